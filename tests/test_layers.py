"""The import contract of the layers (design.md: a layer imports only from layers below it),
read from the source: every ``import`` of a module, at the top or inside a function, and
every ``importlib.import_module("...")`` with a literal name, resolved to the module it names.

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

# what cli/ may import of bpfmem (a module, or a package and everything in it)
CLI_MAY_IMPORT = ("bpfmem.api", "bpfmem.report", "bpfmem.errors", "bpfmem.config",
                  "bpfmem.units", "bpfmem.uapi", "bpfmem.records", "bpfmem.cli")
# names cli/ may take from the bpfmem package itself that are no module
BPFMEM_ATTRIBUTES = {"__version__"}


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _package_of(path: Path) -> str:
    name = module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _is_module(name: str) -> bool:
    rel = SRC.joinpath(*name.split("."))
    return rel.with_suffix(".py").is_file() or (rel / "__init__.py").is_file()


def imported_modules(source: str, path: Path) -> list[tuple[int, str]]:
    """(line, absolute name) of every module ``source`` imports: ``import a.b``, ``from .x
    import y`` (y itself when it is a module), ``importlib.import_module("a.b")``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package_of(path).split(".")
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for a in node.names:
                sub = f"{module}.{a.name}"
                if _is_module(sub):
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


def breaches(path: Path, allowed: tuple[str, ...], source: str | None = None) -> list[str]:
    """``path:line module`` for each bpfmem module ``path`` imports outside ``allowed``."""
    text = path.read_text() if source is None else source
    out = []
    for line, mod in imported_modules(text, path):
        if mod != "bpfmem" and not mod.startswith("bpfmem."):
            continue        # the standard library, rich
        if not any(mod == a or mod.startswith(a + ".") for a in allowed):
            out.append(f"{path.relative_to(SRC)}:{line} imports {mod}")
    return out


CLI_FILES = sorted((PACKAGE / "cli").glob("*.py"))


def test_the_cli_is_a_package_of_modules():
    assert (PACKAGE / "cli" / "__init__.py").is_file()
    assert not [p.name for p in PACKAGE.glob("cli_*.py")] and not (PACKAGE / "cli.py").exists()
    assert len(CLI_FILES) > 10


@pytest.mark.parametrize("path", CLI_FILES, ids=[p.name for p in CLI_FILES])
def test_cli_imports_only_api_report_errors_config_and_the_ground_floor(path):
    assert breaches(path, CLI_MAY_IMPORT) == []


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
    assert breaches(fake, CLI_MAY_IMPORT, source) == [
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
