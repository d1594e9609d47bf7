"""Every command block of README.md and examples/*/README.md, run as written (through `sh`,
so globs, quotes and $(...) are the shell's) in a scratch project that has the files the
README names: fails when a command errors, warns, prints a traceback, exits other than its
comment says, or no longer prints what the README shows.

The scratch project: agent.bpf.o is the bundled example; build/ holds the seed's v0.6.0
before the fix and base/build/ the seed's v0.5.4 (the upgrade the project started from);
old/ and new/ the same pair, and old/agent, new/agent the Go binaries of the ENISpec pattern
(tests/gobuild.py; new/agent's source in cmd/agent); examples/ is the repository's; bpfmem.toml sets limit = 128Mi;
shapes.jsonl, peak.json, bpftool.json, before.json, after.json and node.json are small
samples of what their commands read; node-vmlinux and the *.btf files are the Debian kernels'
BTF committed under tests/data/btf. Commands that read a file from elsewhere (a vmlinuz in
/boot, a BTFHub archive) or need a node (top, export, pod, measure:
root, a running agent, a server) are parsed by bpfmem's own parser instead of run; snapshot
runs for real as root. The quick start is tests/test_quickstart.py's.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import is_root
from readme_blocks import ROOT, Block, read_blocks, readmes

SEED = ROOT / "examples" / "seed"
NODE_COMMANDS = {"top", "export", "pod", "measure"}      # parsed, not run
ROOT_COMMANDS = {"snapshot"}                             # run as root, else parsed
NOT_RUN = {                                              # command prefix -> why
    "python3 tests/bpf/build.py": "rebuilds the committed objects with clang; tests/run runs "
                                  "it with --check",
    "bash tests/run": "CI itself (.ci/run)",
    "apt-get update": "the quick start: tests/test_quickstart.py",
}
# files a README command reads that come from elsewhere (a node's /boot, BTFHub): parsed only
ELSEWHERE = ("/boot/vmlinuz-", ".btf.tar.xz")


def _commands(block: Block) -> list[str]:
    """A shell block's commands, one per line (backslash continuations joined)."""
    text = block.body.replace("\\\n", " ")
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def _sh_commands() -> list[tuple[str, str]]:
    out = []
    for path in readmes():
        for b in read_blocks(path):
            if b.lang == "sh":
                out += [(f"{b.where()}", c) for c in _commands(b)]
    return out


def _comment(command: str) -> str:
    """What follows `#` outside quotes: the README's claim about the command."""
    m = re.search(r"\s#\s(.*)$", command)
    return m.group(1) if m else ""


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    from bpfmem import api
    from bpfmem.report.documents import document
    d = tmp_path_factory.mktemp("readme")
    shutil.copy(api.example_object_path(), d / "agent.bpf.o")
    for sub, src in (("build", "cni_v060_before"), ("base/build", "cni_v054"),
                     ("new", "cni_v060_before"), ("old", "cni_v054")):
        (d / sub).mkdir(parents=True)
        name = "agent.bpf.o" if "build" in sub else "agent.o"
        shutil.copy(SEED / f"{src}.bpf.o", d / sub / name)
    (d / "examples").symlink_to(ROOT / "examples")
    import lzma                       # kernels named by their BTF: the committed Debian ones
    btf = ROOT / "tests" / "data" / "btf"
    for name, src in (("node-vmlinux", "6.12.117+deb12-cloud-amd64"),
                      ("6.1.0-57-cloud-amd64.btf", "6.1.0-57-cloud-amd64"),
                      ("6.12.117+deb12-cloud-amd64.btf", "6.12.117+deb12-cloud-amd64")):
        (d / name).write_bytes(lzma.decompress((btf / f"{src}.btf.xz").read_bytes()))
    (d / "bpfmem.toml").write_text('limit = "128Mi"\n')
    (d / "shapes.jsonl").write_text(
        '{"type": "lru_hash", "key_size": 16, "value_size": 40, "max_entries": 65536}\n'
        '{"type": "hash", "key_size": 8, "value_size": 8, "max_entries": 1024, '
        '"map_flags": 1, "entries": 100}\n')
    (d / "peak.json").write_text(json.dumps({"conntrack_table": 1000}))

    def dump(entries_id: int, max_entries: int):
        return [{"id": entries_id, "type": "hash", "name": "conntrack_table", "flags": 0,
                 "bytes_key": 40, "bytes_value": 40, "max_entries": max_entries,
                 "bytes_memlock": 1 << 20, "frozen": 0, "pids": [{"pid": 1, "comm": "agent"}]},
                {"id": 2, "type": "array", "name": "config", "flags": 0, "bytes_key": 4,
                 "bytes_value": 64, "max_entries": 1, "bytes_memlock": 4096}]
    (d / "bpftool.json").write_text(json.dumps(dump(1, 131072)))
    (d / "before.json").write_text(json.dumps(dump(1, 131072)))
    (d / "after.json").write_text(json.dumps(dump(3, 262144)))
    snap = api.load_snapshot(str(d / "bpftool.json"), profile=api.profile("6.18", cpus=2))
    (d / "node.json").write_text(json.dumps(document(api.snapshot_view(snap, None))))
    go = shutil.which("go")       # `bpfmem size`: the ENISpec pair of tests/gobuild.py
    if go:
        from gobuild import GoBuilder, write_enispec_project
        gb = GoBuilder(d / ".go", go)
        heavy, light = gb.enispec_sources()
        shutil.copy(gb.build(light, "light"), d / "old" / "agent")
        shutil.copy(gb.build(heavy, "heavy"), d / "new" / "agent")
        write_enispec_project(d)
    if shutil.which("objcopy"):   # an agent binary carrying the example object, its images
        import imagegen
        subprocess.run(["objcopy", "--add-section", f".bpfobj={api.example_object_path()}",
                        "--set-section-flags", ".bpfobj=alloc,readonly,data", "/bin/true",
                        str(d / "agent")], check=True, capture_output=True)
        agent = (d / "agent").read_bytes()
        imagegen.docker_archive(d / "old-image.tar", [[("file", "usr/bin/agent", agent)]])
        for name in ("agent-image.tar", "new-image.tar"):
            imagegen.oci_tar(d / name, {"linux/amd64": [[("file", "usr/bin/agent", agent)]]})
    bindir = d / ".bin"
    bindir.mkdir()
    shim = bindir / "bpfmem"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m bpfmem "$@"\n')
    shim.chmod(0o755)
    return d


def _env(project: Path) -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{project / '.bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT / "src")
    env["COLUMNS"] = "100"
    return env


def _run(project: Path, command: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", command], cwd=project, env=_env(project),
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def _parses(command: str) -> None:
    from bpfmem import cli
    argv = shlex.split(command.replace("$(pidof agent)", str(os.getpid())), comments=True)
    assert argv[0] == "bpfmem"
    cli._parser().parse_args(argv[1:])       # SystemExit (a usage error) fails the test


@pytest.mark.parametrize("where,command", _sh_commands(),
                         ids=[f"{w}:{c[:60]}" for w, c in _sh_commands()])
def test_readme_command(project, where, command):
    for prefix, why in NOT_RUN.items():
        if command.startswith(prefix):
            pytest.skip(why)
    words = shlex.split(command, comments=True)
    assert words[0] == "bpfmem", f"{where}: a README command this test does not know: {command}"
    sub = words[1] if len(words) > 1 else ""
    if (sub in NODE_COMMANDS or (sub in ROOT_COMMANDS and not is_root())
            or any(e in command for e in ELSEWHERE)):
        _parses(command)
        return
    r = _run(project, command)
    comment = _comment(command)
    want = {1} if "fails" in comment else {0, 1} if "exit 1" in comment else {0}
    assert r.returncode in want, (where, command, r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "warning:" not in r.stderr, (where, r.stderr)
    out = r.stdout
    if "-o" in words:
        out += (project / words[words.index("-o") + 1]).read_text()
    for schema in re.findall(r"bpfmem/[a-z-]+/v\d+", comment):
        assert schema in out, (where, command, schema)
    for figure in re.findall(r"\d+\.\d+", comment):      # "59.6 of 51.2Mi: fails"
        assert f"{figure}Mi" in out, (where, command, figure, out[-2000:])


def _output_blocks() -> list[Block]:
    """Blocks that show a command (`$ bpfmem ...`) and what it prints."""
    return [b for p in readmes() for b in read_blocks(p)
            if not b.lang and b.body.startswith("$ bpfmem ")]


@pytest.mark.parametrize("block", _output_blocks(), ids=lambda b: b.where())
def test_readme_output_is_what_the_command_prints(project, block):
    command, *shown = block.body.rstrip("\n").splitlines()
    r = _run(project, command[2:])
    assert r.returncode == 0, r.stderr
    lines = [line.rstrip() for line in r.stdout.splitlines()]
    at = 0
    for want in shown:
        if want.strip() == "...":
            continue
        try:
            at = lines.index(want.rstrip(), at) + 1
        except ValueError:
            pytest.fail(f"{block.where()}: {want.strip()!r} is not (in this order) in what "
                        f"`{command[2:]}` prints:\n{r.stdout}")


def _quoted_outputs() -> list[tuple[str, str, str]]:
    """Blockquotes introduced by "... `bpfmem COMMAND`:": (where, command, text shown)."""
    out = []
    for path in readmes():
        text = path.read_text()
        for m in re.finditer(r"`(bpfmem [^`]+)`:\n\n((?:>.*\n)+)", text):
            shown = "\n".join(re.sub(r"^> ?", "", l) for l in m.group(2).splitlines())
            out.append((f"{path.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}",
                        " ".join(m.group(1).split()), shown))
    return out


def test_the_readme_quotes_a_diff_comment():
    assert any("--format markdown" in c for _w, c, _s in _quoted_outputs())


@pytest.mark.parametrize("where,command,shown", _quoted_outputs(),
                         ids=[w for w, _c, _s in _quoted_outputs()])
def test_readme_quote_is_what_the_command_prints(where, command, shown, tmp_path):
    bindir = tmp_path / ".bin"          # `bpfmem` as the checkout's: a shim, as in project
    bindir.mkdir()
    python = shlex.quote(sys.executable)
    (bindir / "bpfmem").write_text(f'#!/bin/sh\nexec {python} -m bpfmem "$@"\n')
    (bindir / "bpfmem").chmod(0o755)
    env = dict(_env(ROOT), PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    r = subprocess.run(["sh", "-c", command], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == shown.strip(), f"{where}: `{command}` now prints:\n{r.stdout}"


def _python_blocks() -> list[Block]:
    return [b for p in readmes() for b in read_blocks(p) if b.lang == "python"]


@pytest.mark.parametrize("block", _python_blocks(), ids=lambda b: b.where())
def test_readme_python(project, block, monkeypatch, capsys):
    monkeypatch.chdir(project)
    scope: dict = {"__name__": "readme"}
    exec(compile(block.body, block.where(), "exec"), scope)
    for name, fn in list(scope.items()):
        if name.startswith("test_") and callable(fn):
            fn()                                  # the README's own test must pass


def test_every_readme_block_is_covered():
    """A new kind of block needs a rule here, not silence."""
    known = {"sh", "python", "yaml", "toml"}
    for path in readmes():
        for b in read_blocks(path):
            if b.lang in known or b.body.startswith("$ bpfmem "):
                continue
            # the JSON field reference: a listing, not a command
            assert b.lang == "" and b.body.lstrip().startswith("{"), b.where()


def _toml_blocks() -> list[Block]:
    return [b for p in readmes() for b in read_blocks(p) if b.lang == "toml"]


@pytest.mark.parametrize("block", _toml_blocks(), ids=lambda b: b.where())
def test_readme_toml_is_a_bpfmem_toml_that_loads(block, tmp_path):
    """A bpfmem.toml the README shows: bpfmem reads it (the BTF files it names are the
    committed ones under tests/data/btf)."""
    from bpfmem.config import load_config
    (tmp_path / "bpfmem.toml").write_text(block.body)
    import lzma
    for btf in re.findall(r'btf = "([^"]+)"', block.body):
        src = ROOT / "tests" / "data" / "btf" / f"{Path(btf).name}.xz"
        (tmp_path / btf).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / btf).write_bytes(lzma.decompress(src.read_bytes()))
    cfg = load_config(tmp_path / "bpfmem.toml")
    names = re.findall(r'name = "([^"]+)"', block.body)
    assert [k.name for k in cfg.kernel_entries] == names
