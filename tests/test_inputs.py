"""The input door (bpfmem.inputs): every kind of file has its limit, large binaries are
mapped and small ones read (the same bytes either way), and a file the door refuses is refused
before anything reads it, whichever function of the door is asked."""

from __future__ import annotations

import mmap
import os

import pytest

from bpfmem import inputs
from bpfmem.errors import InputError


def test_every_kind_has_a_limit_below_10_gib():
    assert {"object", "binary", "kernel", "snapshot", "occupancy", "config", "batch",
            "batch line"} <= set(inputs.LIMITS)
    assert all(0 < v < 10 << 30 for v in inputs.LIMITS.values())


def test_large_binaries_are_read_into_memory_small_ones_into_bytes(tmp_path):
    small, large = tmp_path / "small", tmp_path / "large"
    small.write_bytes(b"\x7fELF" + os.urandom(4096))
    body = os.urandom(1 << 20)
    with open(large, "wb") as f:
        f.write(body)
        f.truncate(inputs.MAP_ABOVE + 1)
        f.seek(inputs.MAP_ABOVE - 3)
        f.write(b"tail")               # data after a hole
    with inputs.mapped_input(small) as data:
        assert isinstance(data, bytes) and data == small.read_bytes()
    with inputs.mapped_input(large) as data:
        assert isinstance(data, mmap.mmap) and len(data) == inputs.MAP_ABOVE + 1
        assert data[:len(body)] == body and data[-4:] == b"tail"
        assert data[len(body):len(body) + 4096] == bytes(4096)      # the hole reads as zeros
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with inputs.mapped_input(empty) as data:
        assert data == b""


def test_a_binary_truncated_while_used_is_no_sigbus(tmp_path):
    """issue 30: a binary over MAP_ABOVE truncated under `bpfmem size` killed it with SIGBUS
    (the file was mapped). Its bytes are now bpfmem's own: the report is made, exit 0."""
    import subprocess
    import sys
    big = tmp_path / "big"
    ls = open("/bin/ls", "rb").read()
    with open(big, "wb") as f:
        f.write(ls)
        f.write(os.urandom(inputs.MAP_ABOVE))      # data, not a hole: pages of the file
    code = f"""
import os
from bpfmem import inputs
from bpfmem.api.size import size_report
with inputs.mapped_input({str(big)!r}) as data:
    os.truncate({str(big)!r}, 0)
    assert data[-1:] is not None and len(data) == {len(ls) + inputs.MAP_ABOVE}
    rep = size_report(data, path="big")
print(rep.file_size)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert int(r.stdout) == len(ls) + inputs.MAP_ABOVE


def test_a_binary_shrinking_while_read_is_a_clean_error(tmp_path, monkeypatch):
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.write(os.urandom(inputs.MAP_ABOVE + (20 << 20)))
    real = os.preadv
    calls = []

    def shrink_after_first(fd, bufs, offset):
        if calls:
            os.truncate(big, offset)
        calls.append(offset)
        return real(fd, bufs, offset)

    monkeypatch.setattr(inputs.os, "preadv", shrink_after_first)
    with pytest.raises(InputError) as e:
        with inputs.mapped_input(big):
            pass
    assert str(e.value).startswith(f"{big}: shrank while read (") and len(calls) == 2


def test_a_sparse_binary_costs_its_data_only(tmp_path):
    """The holes of a sparse binary are not read: the pages of the anonymous mapping under
    them are never written (a 400 MiB file of one page of data: the child's peak RSS grows by
    far less than the file)."""
    import subprocess
    import sys
    sparse = tmp_path / "sparse"
    with open(sparse, "wb") as f:
        f.write(b"\x7fELF")
        f.truncate(400 << 20)
    code = f"""
from bpfmem import inputs
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) << 10
before = hwm()
with inputs.mapped_input({str(sparse)!r}) as data:
    assert data[:4] == b"\\x7fELF" and len(data) == 400 << 20
    print(hwm() - before)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert int(r.stdout) < 16 << 20


@pytest.mark.parametrize("what", ["fifo", "dir", "/dev/zero", "sparse"])
def test_each_door_refuses_before_reading(tmp_path, what):
    path = tmp_path / what
    if what == "fifo":
        os.mkfifo(path)          # opening it for reading without O_NONBLOCK would block
    elif what == "dir":
        path.mkdir()
    elif what == "/dev/zero":
        path = "/dev/zero"
    else:
        with open(path, "wb") as f:
            f.truncate(10 << 30)
    calls = [lambda: inputs.read_input(path, "object"), lambda: inputs.check_input(path, "kernel"),
             lambda: inputs.peek_input(path, 20), lambda: inputs.load_json(path),
             lambda: inputs.load_toml(path), lambda: list(inputs.input_lines(path)),
             lambda: inputs.mapped_input(path).__enter__()]
    for call in calls:
        with pytest.raises(InputError) as e:
            call()
        assert str(e.value).startswith(f"{path}: ") and "\n" not in str(e.value)
    # a FIFO, device or directory is no binary: left with the objects, whose door reports it
    assert inputs.split_binaries([str(path)]) == ([str(path)], [])
