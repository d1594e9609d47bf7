"""Bad input gives one line naming the file and what is wrong, exit code 1, no traceback."""

from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import elfgen
from conftest import FIXTURES
from bpfmem.errors import ParseError
from bpfmem.parse.objspec import parse_object

SRC = str(Path(__file__).resolve().parent.parent / "src")


def bpfmem(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=SRC)
    return subprocess.run([sys.executable, "-m", "bpfmem", *args], capture_output=True,
                          text=True, env=env, timeout=60)


def a_fixture() -> bytes:
    return (FIXTURES / "hash_basic.o").read_bytes()


def corrupt_btf_offsets(data: bytes) -> bytes:
    """Point the BTF string section far past the end of .BTF."""
    from bpfmem.parse.elf import ElfFile
    elf = ElfFile(data)
    sec = elf.section(".BTF")
    out = bytearray(data)
    struct.pack_into("<I", out, sec.offset + 16, 0x7FFFFFF0)   # str_off
    return bytes(out)


def cyclic_btf_object() -> bytes:
    return elfgen.one_map_object(elfgen.type_cycle)


def _huge_value_object() -> bytes:
    return elfgen.one_map_object(lambda b: b.int_("u32", 4),
                                 lambda b: b.array(b.int_("u64", 8), 1_000_000_000))


CASES = {
    "empty": (lambda: b"", "empty file"),
    "random": (lambda: random.Random(7).randbytes(4096), "not an ELF"),
    "truncated": (lambda: a_fixture()[:len(a_fixture()) // 3], "run past the end"),
    "bin_true": (lambda: Path("/bin/true").read_bytes(), "not a BPF object"),
    "btf_offsets": (lambda: corrupt_btf_offsets(a_fixture()), "BTF string section"),
    "btf_cycle": (cyclic_btf_object, "cycle"),
    "btf_billion_array": (_huge_value_object, "exceeds 4 GiB"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_parse_error(case):
    make, words = CASES[case]
    with pytest.raises(ParseError) as e:
        parse_object(make(), path=f"{case}.o")
    assert words in str(e.value)
    assert str(e.value).startswith(f"{case}.o: ")


@pytest.mark.parametrize("case", sorted(CASES))
def test_cli_one_line_exit_1_no_traceback(case, tmp_path):
    make, words = CASES[case]
    path = tmp_path / f"{case}.o"
    path.write_bytes(make())
    p = bpfmem("maps", str(path))
    assert p.returncode == 1
    err = p.stderr.strip().splitlines()
    assert len(err) == 1, p.stderr
    assert err[0].startswith(f"bpfmem: error: {path}: ") and words in err[0]
    assert "Traceback" not in p.stderr + p.stdout


def test_missing_file(tmp_path):
    p = bpfmem("maps", str(tmp_path / "nope.o"))
    assert p.returncode == 1
    assert p.stderr.strip() == f"bpfmem: error: {tmp_path / 'nope.o'}: No such file or directory"


def test_directory(tmp_path):
    p = bpfmem("maps", str(tmp_path))
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_usage_error_exit_2():
    p = bpfmem("maps", "--format", "yaml")
    assert p.returncode == 2


# ---- every command against every kind of hostile input ----
#
# Each run must end within TIME_BOUND seconds with exit 1 or 2, no traceback, and exactly one
# line on stderr that names the file (estimate --batch reports a bad *line* on stdout, as its
# format says, with exit 1).

import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor

TIME_BOUND = 30
EXAMPLE = str(Path(SRC) / "bpfmem" / "examples" / "cni_datapath.bpf.o")
GOOD_SNAPSHOT = '{"schema": "bpfmem/snapshot/v1", "maps": []}'

# where a file goes into each command, and what kind of file it must be
SLOTS = {
    "maps": (["maps", "{}"], "object"),
    "check": (["check", "{}", "--limit", "128Mi"], "object"),
    "diff": (["diff", "{}", EXAMPLE], "object"),
    "advise": (["advise", "{}"], "object"),
    "measure": (["measure", "{}"], "object"),
    "maps --from-bpftool": (["maps", "--from-bpftool", "{}"], "bpftool"),
    "maps --from-bpftool (snapshot)": (["maps", "--from-bpftool", "{}"], "snapshot"),
    "diff (snapshots)": (["diff", "{}", "{good_snapshot}"], "snapshot"),
    "advise --occupancy": (["advise", EXAMPLE, "--occupancy", "{}"], "occupancy"),
    "check --config": (["check", EXAMPLE, "--limit", "128Mi", "--config", "{}"], "config"),
    "estimate --batch": (["estimate", "--batch", "{}"], "batch"),
    "pod --after": (["pod", "--pid", "{pid}", "--after", "{}"], "object"),   # root only
    "size": (["size", "{}"], "binary"),
    "size diff (old)": (["size", "diff", "{}", "/bin/true"], "binary"),
    "size diff (new)": (["size", "diff", "/bin/true", "{}"], "binary"),
    "maps --kernel-btf": (["maps", EXAMPLE, "--kernel-btf", "{}"], "kernel"),
    "check --kernel-btf": (["check", EXAMPLE, "--limit", "128Mi", "--kernel-btf", "{}"],
                           "kernel"),
    "measure --vm-kernel": (["measure", EXAMPLE, "--vm-kernel", "{}"], "kernel"),
    "pod --from": (["pod", "--from", "{}"], "trace"),
}

DEEP = 100_000
# the content cases, per kind of document
CONTENT = {
    "deep nesting": {
        "bpftool": "[" * DEEP, "snapshot": '{"schema": "bpfmem/snapshot/v1", "maps": '
        + "[" * DEEP, "occupancy": '{"a": ' + "[" * DEEP, "config": "a = " + "[" * DEEP,
        "batch": "[" * DEEP + "\n"},
    "wrong types": {
        "bpftool": '[{"id": "seven", "type": "hash"}]',
        "snapshot": '{"schema": "bpfmem/snapshot/v1", "maps": [{"id": 1, "type": "hash", '
                    '"key_size": "4", "value_size": 8, "max_entries": 10}]}',
        "occupancy": '{"conn_track": "lots"}',
        "config": 'limit = ["128Mi"]\n',
        "batch": '{"type": ["hash"], "key_size": {}}\n'},
    "huge numbers": {
        "bpftool": '[{"id": 1, "type": "hash", "bytes_key": 1' + "0" * 60 + "}]",
        "snapshot": '{"schema": "bpfmem/snapshot/v1", "maps": [{"id": 1, "type": "hash", '
                    '"key_size": 4, "value_size": 1e400, "max_entries": 10}]}',
        "occupancy": '{"conn_track": 1' + "0" * 5000 + "}",
        "config": "cpus = [99999999999999999999]\n",
        "batch": '{"type": "hash", "key_size": 4, "value_size": 4, "max_entries": 1'
                 + "0" * 30 + "}\n"},
    "NaN/Infinity": {
        "bpftool": '[{"id": 1, "type": "hash", "bytes_key": NaN}]',
        "snapshot": '{"schema": "bpfmem/snapshot/v1", "duration_s": Infinity, "maps": []}',
        "occupancy": '{"conn_track": NaN}',
        "config": "max_fraction = nan\n",
        "batch": '{"type": "hash", "key_size": NaN, "value_size": 4, "max_entries": 1}\n'},
}
FILE_CASES = ["nonexistent", "directory", "FIFO", "/dev/zero", "sparse 2 GB", "symlink loop",
              "unreadable (nobody)"]
SUFFIX = {"object": ".o", "bpftool": ".json", "snapshot": ".json", "occupancy": ".json",
          "config": ".toml", "batch": ".jsonl", "binary": "", "kernel": ".btf",
          "trace": ".jsonl"}


def _make(case: str, kind: str, d: Path) -> str:
    path = d / f"input{SUFFIX[kind]}"
    if case == "nonexistent":
        pass
    elif case == "directory":
        path.mkdir()
    elif case == "FIFO":
        os.mkfifo(path)
    elif case == "/dev/zero":
        if kind == "object":
            return "/dev/zero"
        os.symlink("/dev/zero", path)   # named like the document it stands for (.json, .toml)
    elif case == "sparse 2 GB":
        with open(path, "wb") as f:
            f.truncate(2 << 30)
    elif case == "sparse 10 GiB":
        with open(path, "wb") as f:
            f.truncate(10 << 30)
    elif case == "symlink loop":
        os.symlink(d / f"other{SUFFIX[kind]}", path)
        os.symlink(path, d / f"other{SUFFIX[kind]}")
    elif case == "unreadable (nobody)":
        path.write_text(GOOD_SNAPSHOT)
        path.chmod(0o600)               # root's, and nobody may not read it; nor may a root
        os.chown(path, 0, 0)            # without CAP_DAC_OVERRIDE if it were someone else's
    else:
        path.write_text(CONTENT[case][kind])
    return str(path)


NOBODY = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]


def _nobody_python() -> str | None:
    """A Python that uid 65534 may run and that imports bpfmem (and rich) from this checkout
    (this machine's own Python may live under /root)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    for exe in (sys.executable, "/usr/bin/python3"):
        p = subprocess.run(NOBODY + [exe, "-c", "import bpfmem.cli, rich"],
                           env=dict(os.environ, PYTHONPATH=SRC), capture_output=True)
        if p.returncode == 0:
            return exe
    return None


def _cases():
    for slot, (_, kind) in SLOTS.items():
        for case in FILE_CASES:
            yield slot, case
        for case, kinds in CONTENT.items():
            if kind in kinds:
                yield slot, case


def _run(slot: str, case: str, nobody: str | None, slots: dict | None = None):
    argv, kind = (slots or SLOTS)[slot]
    d = Path(tempfile.mkdtemp(prefix="bpfmem-bad-"))
    try:
        d.chmod(0o755)
        good = d / "good.json"
        good.write_text(GOOD_SNAPSHOT)
        path = _make(case, kind, d)
        args = [a.replace("{}", path).replace("{good_snapshot}", str(good))
                .replace("{pid}", str(os.getpid())) for a in argv]
        cmd = [sys.executable, "-m", "bpfmem", *args]
        if case == "unreadable (nobody)":
            if nobody:
                cmd = NOBODY + [nobody, "-m", "bpfmem", *args]
            else:   # as uid 65534 with the suite's own Python, which nobody cannot reach
                os.chown(path, 65534, 65534)
                os.chmod(path, 0)
                cmd = ["setpriv", "--bounding-set=-dac_override,-dac_read_search",
                       "--inh-caps=-dac_override,-dac_read_search", *cmd]
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIME_BOUND,
                               env=dict(os.environ, PYTHONPATH=SRC), cwd=d)
        except subprocess.TimeoutExpired:
            return slot, case, path, None, time.monotonic() - t0
        return slot, case, path, p, time.monotonic() - t0
    finally:
        shutil.rmtree(d, ignore_errors=True)


import time  # noqa: E402


def test_every_command_against_every_hostile_input(capsys):
    nobody = _nobody_python()
    root = os.geteuid() == 0 and shutil.which("setpriv") is not None
    cases = [(s, c) for s, c in _cases() if (c != "unreadable (nobody)" or root)
             and (s != "pod --after" or os.geteuid() == 0)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda sc: _run(*sc, nobody), cases))
    bad = []
    slowest = 0.0
    for slot, case, path, p, took in results:
        slowest = max(slowest, took)
        if p is None:
            bad.append(f"{slot} / {case}: no answer within {TIME_BOUND}s")
            continue
        # (measure and pod --trace may first name the leftovers of a killed run they removed)
        err = [ln for ln in p.stderr.strip().splitlines()
               if not ln.startswith("bpfmem: removed what an earlier run")]
        problem = None
        if p.returncode not in (1, 2):
            problem = f"exit {p.returncode}"
        elif "Traceback" in p.stderr + p.stdout:
            problem = "a traceback"
        elif slot == "estimate --batch" and case in CONTENT:
            if not (p.returncode == 1 and '"error"' in p.stdout and not err):
                problem = "no error record on stdout"
        elif len(err) != 1 or "error" not in err[0]:
            problem = f"{len(err)} stderr lines"
        elif path not in err[0]:
            problem = "the message does not name the file"
        if problem:
            bad.append(f"{slot} / {case}: {problem}: {(p.stderr or p.stdout)[-300:]!r}")
    with capsys.disabled():
        print(f"\nbad input: {len(results)} runs ({len(SLOTS)} inputs x "
              f"{len(FILE_CASES) + len(CONTENT)} kinds; unreadable: "
              f"{'as nobody' if nobody else 'as root without CAP_DAC_OVERRIDE'}), "
              f"slowest {slowest:.1f}s, {len(bad)} wrong")
    assert not bad, "\n".join(bad)


#: what the input door says when it refuses a file before reading it
DOOR_CASES = {"FIFO": "not a regular file", "directory": "is a directory",
              "/dev/zero": "not a regular file", "sparse 10 GiB": "file may have at most"}
#: the binary gate's own exit status for a binary it cannot read (README: 3), beside SLOTS
BINARY_GATE = {"check --max-binary-size": (["check", "{}", "--max-binary-size", "64Mi"],
                                           "binary")}


def test_every_file_argument_is_refused_at_the_door():
    """Every file argument of every command, given a FIFO, a directory, /dev/zero or a
    sparse 10 GiB file: one line naming the file, in the words of the input door's stat
    check (so nothing was opened for reading, nor read), exit 1 (3 from the binary gate,
    its status for a binary it cannot read), and no hang."""
    slots = {**SLOTS, **BINARY_GATE}
    cases = [(s, c) for s in slots for c in DOOR_CASES if s != "pod --after" or os.geteuid() == 0]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda sc: _run(*sc, None, slots), cases))
    bad = []
    for slot, case, path, p, _took in results:
        if p is None:
            bad.append(f"{slot} / {case}: no answer within {TIME_BOUND}s")
            continue
        err = [ln for ln in p.stderr.strip().splitlines()
               if not ln.startswith("bpfmem: removed what an earlier run")]
        if p.returncode != (3 if slot in BINARY_GATE else 1) or len(err) != 1 \
                or path not in err[0] \
                or DOOR_CASES[case] not in err[0]:
            bad.append(f"{slot} / {case}: exit {p.returncode}: {p.stderr[-300:]!r}")
    assert len(results) >= 4 * 18 and not bad, "\n".join(bad)


@pytest.mark.parametrize("argv", [
    ["advise", EXAMPLE, "--kernel", "abc"], ["advise", EXAMPLE, "--kernel", "0.0"],
    ["advise", EXAMPLE, "--cpus", "1e20"], ["maps", "--cpus", "1" + "0" * 20],
    ["check", EXAMPLE, "--limit", "1Mi", "--kernel", "6.1,abc"],
    ["check", EXAMPLE, "--limit", "1Mi", "--cpus", "2,0"],
    ["check", EXAMPLE, "--limit", "1Mi", "--max-fraction", "nan"],
    ["maps", "--size-ratio", "inf", "--node-memory", "64Gi"],
    ["estimate", "--type", "hash", "--map-extra", "1" + "0" * 30],
    ["export", "--interval", "nan"], ["export", "--interval=-1s"], ["top", "--interval", "inf"],
])
def test_bad_numbers_are_usage_errors(argv):
    p = bpfmem(*argv)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    # refused by the argument's type, or (a name that could be a [[kernels]] entry of
    # bpfmem.toml) once the configuration is read: either way one usage line
    assert p.stderr.strip().splitlines()[-1].startswith(f"bpfmem {argv[0]}: error: ")
