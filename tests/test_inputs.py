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


def test_large_binaries_are_mapped_small_ones_read(tmp_path):
    small, large = tmp_path / "small", tmp_path / "large"
    small.write_bytes(b"\x7fELF" + os.urandom(4096))
    body = os.urandom(1 << 20)
    with open(large, "wb") as f:
        f.write(body)
        f.truncate(inputs.MAP_ABOVE + 1)
    with inputs.mapped_input(small) as data:
        assert isinstance(data, bytes) and data == small.read_bytes()
    with inputs.mapped_input(large) as data:
        assert isinstance(data, mmap.mmap) and len(data) == inputs.MAP_ABOVE + 1
        assert data[:len(body)] == body
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with inputs.mapped_input(empty) as data:
        assert data == b""


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
