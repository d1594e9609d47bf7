"""The import contract of the layers (design.md: a layer imports only from layers below it),
read from the source: every ``import`` of a module, at the top or inside a function, and
every ``importlib.import_module("...")`` with a literal name, resolved to the module it names.

One table, :data:`MAY_IMPORT`, says for every unit of the package (a top-level module or
subpackage of ``bpfmem``) which other units it may import; one test checks every import of
every module against it, and that the table itself is a layering (no cycle, every unit
placed). Beside it, :data:`PURE` names the floors that touch no system (no ``os``, sockets,
ctypes, mmap..., no ``open()``).

The CLI (``bpfmem/cli/``) is a shell over the library: it imports ``bpfmem.api``, the
renderers (``bpfmem.report``), the error tree, the config file reader, the ground-floor value
modules and its own package -- never ``host/``, ``parse/``, ``model/``, ``analysis/``,
``inputs`` or ``outputs`` directly (what it needs from them, api delegates)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "bpfmem"

#: the ground floor: values and the exception tree, importing no other unit (but uapi and
#: records, whose classes values' decorator makes)
GROUND = {"uapi", "errors", "units", "records", "values"}

#: every unit of bpfmem, top floor first, and the other units it may import (its own
#: modules always). Siblings of a floor do not import each other: analysis/ is pure, so it
#: never reaches host/; report/ draws finished results, so it reads no input format (parse/)
#: and no system (host/).
MAY_IMPORT: dict[str, set[str]] = {
    "__main__": {"cli"},
    "cli": {"api", "report", "config"} | GROUND,
    "testing": {"api", "report"} | GROUND,
    "api": {"report", "analysis", "host", "model", "parse", "inputs", "outputs"} | GROUND,
    "config": {"inputs", "parse"} | GROUND,
    "report": {"analysis", "outputs"} | GROUND,
    "analysis": {"model", "parse"} | GROUND,
    "host": {"model", "parse", "inputs", "outputs"} | GROUND,
    "model": {"parse"} | GROUND,
    "inputs": {"parse"} | GROUND - {"records"},
    "parse": GROUND,
    "outputs": GROUND - {"records"},
    "uapi": {"values"}, "errors": set(), "units": set(), "records": {"values"},
    "values": set(),
    "bpfmem": set(),          # the package's __init__: its version, no import
}
#: imports known to run against the table (unit, unit it imports), each with the change
#: that removes it: none
PENDING: set[tuple[str, str]] = set()

#: the floors that touch no system: no import of these standard modules, no open()
PURE = {"parse", "model", "analysis", "records", "uapi", "errors", "units", "values"}
SYSTEM = {"os", "platform", "pathlib", "subprocess", "socket", "shutil", "ctypes", "mmap",
          "tempfile", "signal", "fcntl", "select", "glob"}

# names cli/ may take from the bpfmem package itself that are no module
BPFMEM_ATTRIBUTES = {"__version__"}


def module_name(path: Path, src: Path = SRC) -> str:
    rel = path.relative_to(src).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _package_of(path: Path, src: Path = SRC) -> str:
    name = module_name(path, src)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _is_module(name: str, src: Path = SRC) -> bool:
    rel = src.joinpath(*name.split("."))
    return rel.with_suffix(".py").is_file() or (rel / "__init__.py").is_file()


def imported_modules(source: str, path: Path, src: Path = SRC) -> list[tuple[int, str]]:
    """(line, absolute name) of every module ``source`` imports: ``import a.b``, ``from .x
    import y`` (y itself when it is a module), ``importlib.import_module("a.b")``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package_of(path, src).split(".")
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for a in node.names:
                sub = f"{module}.{a.name}"
                if _is_module(sub, src):
                    found.append((node.lineno, sub))
                elif module == "bpfmem" and a.name in BPFMEM_ATTRIBUTES:
                    continue
                else:
                    found.append((node.lineno, module))
        elif isinstance(node, ast.Call) and node.args and \
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in ("import_module", "__import__"):
                found.append((node.lineno, node.args[0].value))
    return found


def unit_of(module: str) -> str:
    """The unit a module of bpfmem belongs to: ``bpfmem.parse.elf`` -> ``parse``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "bpfmem"


def breaches(path: Path, source: str | None = None, src: Path = SRC) -> list[str]:
    """``path:line imports module`` for each import of ``path`` the contract forbids: a unit
    of bpfmem outside its row of :data:`MAY_IMPORT` (bar :data:`PENDING`), and, on a
    :data:`PURE` floor, a system module or a call of ``open()``."""
    text = path.read_text() if source is None else source
    me = unit_of(module_name(path, src))
    allowed = MAY_IMPORT.get(me)
    where = path.relative_to(src)
    if allowed is None:
        return [f"{where}: unit {me} has no row in MAY_IMPORT"]
    out = []
    for line, mod in imported_modules(text, path, src):
        if mod == "bpfmem" or mod.startswith("bpfmem."):
            them = unit_of(mod)
            if them != me and them not in allowed and (me, them) not in PENDING \
                    and mod != "bpfmem":
                out.append(f"{where}:{line} imports {mod}")
        elif me in PURE and mod.split(".")[0] in SYSTEM:
            out.append(f"{where}:{line} imports {mod}")
    if me in PURE:
        out += [f"{where}:{node.lineno} calls open()" for node in ast.walk(ast.parse(text))
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "open"]
    return out


def contract_breaches(src: Path = SRC) -> list[str]:
    """Every breach of the contract in the package under ``src``."""
    return [b for path in sorted((src / "bpfmem").rglob("*.py")) for b in breaches(path, src=src)]


CLI_FILES = sorted((PACKAGE / "cli").glob("*.py"))


def test_the_cli_is_a_package_of_modules():
    assert (PACKAGE / "cli" / "__init__.py").is_file()
    assert not [p.name for p in PACKAGE.glob("cli_*.py")] and not (PACKAGE / "cli.py").exists()
    assert len(CLI_FILES) > 10


def test_the_table_is_a_layering_of_every_unit():
    """Every unit of the package has a row; the rows name only units; and they order the
    units into floors (no cycle: a unit never reaches itself through what it may import)."""
    units = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    assert units | {"bpfmem"} == set(MAY_IMPORT)
    assert all(row <= units for row in MAY_IMPORT.values())
    assert all(a in MAY_IMPORT and b in MAY_IMPORT for a, b in PENDING)
    done: set[str] = set()
    rest = dict(MAY_IMPORT)
    while rest:     # peel the floors from the ground up
        floor = {u for u, row in rest.items() if row <= done}
        assert floor, f"a cycle among {sorted(rest)}"
        done |= floor
        for u in floor:
            del rest[u]


def test_every_import_keeps_the_layers():
    """The one contract, over every module of the package, function-local imports too."""
    assert contract_breaches() == []


def test_a_planted_upward_import_breaks_the_contract(tmp_path):
    """A copy of the package with upward imports planted (parse -> host, analysis -> host,
    report -> parse, model -> api, cli -> host) and a pure floor touching the system: the
    contract names each of them, and nothing else."""
    import shutil
    src = tmp_path / "src"
    shutil.copytree(PACKAGE, src / "bpfmem", ignore=shutil.ignore_patterns("__pycache__"))
    plants = {"parse/reader.py": "from ..host import cgroup\n",
              "analysis/budget.py": "def f():\n    import bpfmem.host.live\n",
              "report/text.py": "from ..parse.elf import ElfFile\n",
              "model/kernel.py": "import importlib\nimportlib.import_module('bpfmem.api')\n",
              "cli/maps.py": "from .. import host\n",
              "analysis/diff.py": "def g(p):\n    return open(p)\n",
              "parse/btf.py": "import subprocess\n"}
    for rel, text in plants.items():
        f = src / "bpfmem" / rel
        f.write_text(f.read_text() + "\n" + text)
    got = sorted(b.split(":")[0] + " " + b.split(" ", 1)[1] for b in contract_breaches(src))
    assert got == sorted([
        "bpfmem/parse/reader.py imports bpfmem.host.cgroup",
        "bpfmem/analysis/budget.py imports bpfmem.host.live",
        "bpfmem/report/text.py imports bpfmem.parse.elf",
        "bpfmem/model/kernel.py imports bpfmem.api",
        "bpfmem/cli/maps.py imports bpfmem.host",
        "bpfmem/analysis/diff.py calls open()",
        "bpfmem/parse/btf.py imports subprocess"])


def test_the_contract_check_sees_what_it_must():
    """The checker itself: function-local imports, relative imports at every level, a
    module taken with ``from .. import``, and importlib with a literal name all count."""
    fake = PACKAGE / "cli" / "fake.py"
    source = '''
import os
from .. import api, __version__
from . import args
from ..report.pod import render_json
def run():
    from ..host.cgroup import parse_container_id
    from .. import inputs
    import bpfmem.parse.loader
    from ..model import kernel
    import importlib
    importlib.import_module("bpfmem.analysis.typos")
'''
    assert breaches(fake, source) == [
        "bpfmem/cli/fake.py:7 imports bpfmem.host.cgroup",
        "bpfmem/cli/fake.py:8 imports bpfmem.inputs",
        "bpfmem/cli/fake.py:9 imports bpfmem.parse.loader",
        "bpfmem/cli/fake.py:10 imports bpfmem.model.kernel",
        "bpfmem/cli/fake.py:12 imports bpfmem.analysis.typos",
    ]


def test_every_command_module_is_registered_once():
    """One module per command, each with its COMMAND object; dispatch goes through the
    registry (bpfmem.cli.COMMANDS), so a module left out of it is a command nobody can run."""
    from bpfmem import cli
    from bpfmem.cli.command import Command
    helpers = {"__init__", "args", "command", "common", "exits", "output"}
    modules = {p.stem for p in CLI_FILES} - helpers
    names = [c.name for c in cli.COMMANDS]
    assert len(names) == len(set(names))
    assert {type(c).__module__.rpartition(".")[2] for c in cli.COMMANDS} == modules
    assert all(isinstance(c, Command) for c in cli.COMMANDS)
    choices = cli._parser()._subparsers._group_actions[0].choices
    assert list(choices) == names
