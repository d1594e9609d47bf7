"""The records of the live node sit on the ground floor, and their input documents are decoded
in parse/ (no kernel needed)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from bpfmem.parse.snapshot import looks_like_snapshot, occupancy_from

SRC = Path(__file__).resolve().parent.parent / "src" / "bpfmem"
GROUND_FLOOR = {"bpfmem.uapi", "bpfmem.errors", "bpfmem.units"}


def imports_of(path: Path, package: str | None = None) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``, function-local ones too;
    ``package`` (default: from the path under src/) resolves relative imports."""
    if package is None:
        package = "bpfmem." + ".".join(path.relative_to(SRC).with_suffix("").parts)
        package = package.rsplit(".", 1)[0]   # the module's package
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.append((node.lineno, name))
            # "from . import x", "from bpfmem import host": x may be a module itself
            out += [(node.lineno, f"{name}.{a.name}") for a in node.names]
    return out


def within(name: str, modules) -> bool:
    """Whether module ``name`` (or a name imported from it) is one of ``modules`` or in it."""
    return any(name == m or name.startswith(m + ".") for m in modules)


def test_imports_of_resolves_relative_and_local_imports(tmp_path):
    """The checker itself: relative imports at any depth, ``from . import``, and imports
    inside functions and under conditions."""
    mod = tmp_path / "m.py"
    mod.write_text("from .escape import term\n"
                   "from ..records import LiveMap\n"
                   "from .. import host\n"
                   "import json\n"
                   "def f():\n"
                   "    if True:\n"
                   "        from bpfmem.parse.snapshot import occupancy_from\n"
                   "    import bpfmem.host.live\n")
    found = {name for _line, name in imports_of(mod, "bpfmem.report")}
    assert {"bpfmem.report.escape", "bpfmem.records", "bpfmem.host", "json",
            "bpfmem.parse.snapshot", "bpfmem.host.live"} <= found
    assert dict((n, line) for line, n in imports_of(mod, "bpfmem.report"))["bpfmem.host.live"] == 8


def test_report_imports_neither_host_nor_parse():
    """report/ draws finished results: it never reaches the system (host/) or reads an input
    format (parse/), not even in a function."""
    bad = [f"report/{path.name}:{line} imports {name}"
           for path in sorted((SRC / "report").glob("*.py"))
           for line, name in imports_of(path)
           if within(name, ("bpfmem.host", "bpfmem.parse"))]
    assert not bad, "\n".join(bad)


def test_records_import_only_the_ground_floor():
    for line, name in imports_of(SRC / "records.py"):
        top = name.split(".")[0]
        if top == "bpfmem":
            assert within(name, GROUND_FLOOR), f"records.py:{line} imports {name}"
        else:
            assert top in sys.stdlib_module_names, f"records.py:{line} imports {name}"


def test_looks_like_snapshot():
    assert looks_like_snapshot('  {"schema": "bpfmem/snapshot/v1", "maps": []}')
    assert looks_like_snapshot('\n[{"id": 1}]')          # bpftool -j map show
    assert not looks_like_snapshot('{"map_a": 10}')      # an occupancy mapping
    assert not looks_like_snapshot('{"schema": "bpfmem/maps/v1"}')


def test_occupancy_from_a_mapping_and_a_snapshot():
    assert occupancy_from({"a": 3, "b": 0}) == {"a": 3, "b": 0}
    snap = {"schema": "bpfmem/snapshot/v1", "maps": [
        {"name": "ct", "entries": 5}, {"name": "ct", "entries": 9}, {"name": "x"}]}
    assert occupancy_from(snap) == {"ct": 9}    # the fullest of two maps of one name
    with pytest.raises(ValueError, match="b: expected entries"):
        occupancy_from({"a": 1, "b": True})
    with pytest.raises(ValueError, match="map name"):
        occupancy_from([1, 2])
