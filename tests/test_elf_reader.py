"""The one ELF reader (parse/elf.py): an ELF inside a larger buffer opens as one on its own
does (the future search for BPF objects embedded in a binary's .rodata), checked against
binutils' readelf on a real archive of ELF objects (Debian's libbpf.a: ELF members at
offsets in an ar file); the .BTF of a vmlinux comes through the same reader; a low-level
decoding error becomes ParseError in one place."""

from __future__ import annotations

import random
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from bpfmem.errors import ParseError
from bpfmem.parse.elf import EM_BPF, Elf, ElfFile, ElfImage
from bpfmem.parse.reader import Bytes, decoding

FIXTURES = Path(__file__).resolve().parent / "bpf" / "obj"
LIBBPF_A = Path("/usr/lib/x86_64-linux-gnu/libbpf.a")


def ar_members(data: bytes) -> list[tuple[str, int, int]]:
    """(name, offset, size) of each member of a System V ar archive (GNU long names)."""
    assert data[:8] == b"!<arch>\n"
    out, pos, longnames = [], 8, b""
    while pos + 60 <= len(data):
        head = data[pos:pos + 60]
        name, size = head[:16].decode().strip(), int(head[48:58])
        body = pos + 60
        if name == "//":
            longnames = data[body:body + size]
        elif name.startswith("/") and name[1:].isdigit():
            start = int(name[1:])
            out.append((longnames[start:longnames.index(b"/\n", start)].decode(), body, size))
        elif name != "/":
            out.append((name.rstrip("/"), body, size))
        pos = body + size + (size & 1)
    return out


def readelf_sections(path: Path) -> dict[str, list[tuple[str, int, int]]]:
    """readelf -SW of an archive: member -> [(name, offset, size)] of its sections."""
    text = subprocess.run(["readelf", "-SW", str(path)], capture_output=True, text=True,
                          check=True).stdout
    out: dict[str, list] = {}
    member = None
    for line in text.splitlines():
        m = re.match(r"File: .*\((.+)\)$", line)
        if m:
            member = m.group(1)
            out[member] = []
            continue
        m = re.match(r"\s*\[\s*(\d+)\]\s+(?:(\S+)\s+)?([A-Z_0-9]+)\s+([0-9a-f]{16}|[0-9a-f]{8})"
                     r"\s+([0-9a-f]+)\s+([0-9a-f]+)\s", line)
        if m and member is not None:
            out[member].append((m.group(2) or "", int(m.group(5), 16), int(m.group(6), 16)))
    return out


@pytest.mark.skipif(not LIBBPF_A.is_file() or not shutil.which("readelf"),
                    reason="needs libbpf-dev's libbpf.a and binutils' readelf")
def test_elf_members_of_a_real_archive_open_in_place_as_readelf_reads_them():
    data = LIBBPF_A.read_bytes()
    outer = Bytes(data, "libbpf.a")
    want = readelf_sections(LIBBPF_A)
    members = ar_members(data)
    assert len(members) == len(want) > 10
    for name, off, size in members:
        img = Elf.at(outer, off, size)
        assert img.base == off
        got = [(s.name, s.offset, s.size) for s in img.sections]
        assert got == want[name], name
        # the member's extent is its ar size (the section headers come last)
        assert img.extent == size, name
        # and without a size given, the same file is found in the rest of the archive
        assert Elf.at(outer, off).extent == size


def test_an_embedded_bpf_object_reads_as_the_file_alone():
    """A clang-built object placed at an aligned offset inside other bytes (as bpf2go's
    objects sit in a Go binary's .rodata): sections, symbols and relocations are the file's
    own; an error in it names the offset in the outer buffer."""
    obj = (FIXTURES / "hash_basic.o").read_bytes()
    rng = random.Random(26)
    pad = 4096 + 48
    outer = rng.randbytes(pad) + obj + rng.randbytes(777)
    alone, inner = ElfFile(obj), ElfFile.at(Bytes(outer, "binary"), pad)
    assert inner.machine == EM_BPF and inner.extent == len(obj)
    assert inner.sections == alone.sections and inner.symbols == alone.symbols
    for a, b in zip(alone.relocation_sections(), inner.relocation_sections()):
        assert alone.relocations(a) == inner.relocations(b)
    assert inner.data(inner.section(".BTF")).data == alone.data(alone.section(".BTF")).data
    # a section header pointing past the end: the error's offset is the outer file's
    bad = bytearray(outer)
    shoff = struct.unpack_from("<Q", obj, 0x28)[0]
    struct.pack_into("<Q", bad, pad + shoff + 64 + 24, len(obj) * 4)   # section 1's sh_offset
    with pytest.raises(ParseError, match="run past the end") as e:
        ElfFile.at(Bytes(bytes(bad), "binary"), pad, len(obj))
    assert e.value.offset is not None and e.value.offset >= pad


def test_the_image_view_reads_a_bpf_object_and_the_object_view_refuses_binaries():
    obj = (FIXTURES / "hash_basic.o").read_bytes()
    img = ElfImage(obj)
    assert [s.name for s in img.sections] == [s.name for s in ElfFile(obj).sections]
    true = Path("/bin/true").read_bytes()
    assert ElfImage(true).symbol_tuples(dynamic=True)
    with pytest.raises(ParseError, match="not a BPF object"):
        ElfFile(true)


def test_low_level_errors_become_parse_errors_in_one_place():
    for exc in (struct.error("unpack requires a buffer of 8 bytes"), IndexError("index"),
                UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
                OverflowError("too big")):
        with pytest.raises(ParseError) as e:
            with decoding(".BTF"):
                raise exc
        assert type(exc).__name__ in str(e.value) and e.value.section == ".BTF"
    with pytest.raises(KeyError):      # a bug of ours is not turned into a ParseError
        with decoding(".BTF"):
            raise KeyError("x")
    # the section header table cut in the middle of the image: one ParseError
    true = Path("/bin/true").read_bytes()
    shoff = struct.unpack_from("<Q", true, 0x28)[0]
    with pytest.raises(ParseError, match="run past the end"):
        ElfImage(true[:shoff + 100])
