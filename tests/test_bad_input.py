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
