"""The one mapping of exceptions to exit codes (bpfmem.cli.exits), through real pipes: a reader
that goes away (`bpfmem ... | head -c 10`) is not an error (exit 0, nothing on stderr), in
every format and also when only the interpreter's last flush would meet the closed pipe; -o
FILE is not affected by what happens to stdout; usage, bpfmem and OS errors keep their codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES

SRC = Path(__file__).resolve().parent.parent / "src"
BIG = FIXTURES / "large_synthetic.o"     # a table of ~1 MB: far more than a pipe holds


def _env() -> dict:
    """As a user's shell runs bpfmem: stdout block-buffered (no PYTHONUNBUFFERED)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return dict(env, PYTHONPATH=str(SRC), COLUMNS="100")


def _bpfmem(*argv) -> list[str]:
    return [sys.executable, "-m", "bpfmem", *map(str, argv)]


def into_head(*argv, nbytes: int = 10, cwd=None) -> tuple[int, bytes, str]:
    """``bpfmem ARGV | head -c NBYTES``: (bpfmem's status, what head printed, bpfmem's
    stderr)."""
    writer = subprocess.Popen(_bpfmem(*argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=_env(), cwd=cwd)
    head = subprocess.Popen(["head", "-c", str(nbytes)], stdin=writer.stdout,
                            stdout=subprocess.PIPE)
    writer.stdout.close()       # only head reads the pipe now
    shown = head.communicate(timeout=120)[0]
    err = writer.stderr.read().decode()
    writer.stderr.close()
    return writer.wait(timeout=120), shown, err


@pytest.mark.parametrize("fmt", ["json", "table", "markdown"])
def test_maps_into_head_is_quiet_and_ok(fmt):
    full = subprocess.run(_bpfmem("maps", BIG, "--no-memory", "--format", fmt),
                          capture_output=True, env=_env(), timeout=120)
    assert full.returncode == 0 and len(full.stdout) > 96 << 10   # more than a pipe holds (64 KiB)
    rc, shown, err = into_head("maps", BIG, "--no-memory", "--format", fmt)
    assert shown == full.stdout[:10]
    assert (rc, err) == (0, ""), err


def test_estimate_batch_into_head(tmp_path):
    specs = tmp_path / "specs.jsonl"
    specs.write_text("".join(json.dumps({"type": "hash", "key_size": 8, "value_size": 8 + i,
                                         "max_entries": 1000 + i}) + "\n"
                             for i in range(2000)))
    rc, shown, err = into_head("estimate", "--batch", specs, "--kernel", "6.1", "--cpus", "2")
    assert shown == b'{"schema":'[:10]
    assert (rc, err) == (0, ""), err


def test_a_closed_pipe_at_the_last_flush_is_quiet():
    """A small output stays in stdout's buffer until the end: the reader is gone before the
    one write. Without the flush inside the guard, the interpreter's flush at exit would
    print "Exception ignored ... BrokenPipeError" and exit 120 (as bpfmem did before)."""
    r, w = os.pipe()
    os.close(r)                       # nobody will ever read
    try:
        p = subprocess.run(_bpfmem("estimate", "--type", "hash", "--key-size", "4",
                                   "--value-size", "4", "--max-entries", "16", "--kernel",
                                   "6.1", "--cpus", "2", "--format", "json"),
                           stdout=w, stderr=subprocess.PIPE, env=_env(), timeout=120)
    finally:
        os.close(w)
    assert (p.returncode, p.stderr.decode()) == (0, "")


def test_output_file_is_written_whatever_stdout_does(tmp_path):
    """-o FILE: the file is written whole; stdout going away changes nothing."""
    out = tmp_path / "check.json"
    args = ("check", BIG, "--limit", "1Gi", "--kernel", "6.1", "--cpus", "2",
            "--format", "json", "-o", out)
    plain = subprocess.run(_bpfmem(*args), capture_output=True, env=_env(), timeout=120)
    want = out.read_bytes()
    out.unlink()
    rc, shown, err = into_head(*args)
    assert (rc, shown, err) == (plain.returncode, b"", plain.stderr.decode())
    assert json.loads(out.read_bytes())["schema"] == "bpfmem/check/v1"
    assert out.read_bytes() == want


@pytest.mark.parametrize("argv, code, text", [
    (["diff", "a.o", "b.o", "c.o"], 2, "bpfmem diff: error: diff takes OLD and NEW, got 3"),
    (["estimate", "--kernel", "6.1"], 2, "bpfmem estimate: error: estimate needs --type"),
    (["check", "nope.o", "--limit", "1Gi", "--kernel", "6.1"], 1, "bpfmem: error: nope.o"),
    (["check", str(BIG), "--limit", "1Gi", "--config", "/nonexistent/bpfmem.toml"], 1,
     "bpfmem: error: "),
])
def test_one_line_and_its_code(argv, code, text):
    p = subprocess.run(_bpfmem(*argv), capture_output=True, env=_env(), timeout=120)
    lines = p.stderr.decode().strip().splitlines()
    assert p.returncode == code and len(lines) == 1 and lines[0].startswith(text), lines
