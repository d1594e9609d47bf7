"""The parser's bulk paths (memoryview casts, split string tables) against a plain
record-by-record reading with ``struct`` of the same bytes, on every fixture (both byte
orders), and the bound that keeps a mangled string table from costing more than its lookups."""

from __future__ import annotations

import struct

import pytest

from bpfmem.errors import ParseError
from bpfmem.parse.elf import SHT_REL, SHT_SYMTAB, ElfFile, string_table
from bpfmem.parse.reader import Bytes
from conftest import fixture_objects

OBJECTS = fixture_objects()


def _cstr(table: bytes, off: int) -> str:
    return table[off:table.index(b"\0", off)].decode("utf-8", "replace")


def _reference_symbols(data: bytes, elf: ElfFile) -> list[tuple]:
    e = elf.endian
    tab = next(s for s in elf.sections if s.type == SHT_SYMTAB)
    strs = elf.sections[tab.link]
    table = data[strs.offset:strs.offset + strs.size]
    out = []
    for i in range(tab.size // 24):
        name, info, other, shndx, value, size = struct.unpack_from(
            e + "IBBHQQ", data, tab.offset + 24 * i)
        out.append((i, _cstr(table, name) if name else "", value, size, info >> 4, info & 0xF,
                    other & 3, shndx))
    return out


@pytest.mark.parametrize("path", OBJECTS, ids=lambda p: p.name)
def test_symbols_and_relocations_match_a_plain_reading(path):
    data = path.read_bytes()
    elf = ElfFile(data)
    assert [tuple(s) for s in elf.symbols] == _reference_symbols(data, elf)
    rels = [s for s in elf.sections if s.type == SHT_REL]
    assert rels
    for sec in rels:
        want = [(off, info >> 32, info & 0xFFFFFFFF) for off, info in
                struct.iter_unpack(elf.endian + "QQ", data[sec.offset:sec.offset + sec.size])]
        assert [tuple(r) for r in elf.relocations(sec)] == want
        assert list(zip(*elf.relocation_table(sec))) == want


def test_both_byte_orders_are_covered():
    assert {ElfFile(p.read_bytes()).little_endian for p in OBJECTS} == {True, False}


def test_string_table_indexes_starts_and_leaves_suffixes_to_lookups():
    raw = b"\0map\0tail_call\0\xc3\xa9t\xc3\xa9\0unterminated"
    names = string_table(Bytes(raw, ".strtab"), 4)
    assert names == {0: "", 1: "map", 5: "tail_call", 15: "été"}
    assert 10 not in names                       # "call", a suffix: found by cstr instead
    assert Bytes(raw, ".strtab").cstr(10, "x") == "call"
    with pytest.raises(ParseError, match="not NUL-terminated"):
        Bytes(raw, ".strtab").cstr(22, "x")      # the last string has no NUL: never indexed


def test_string_table_of_many_strings_for_few_lookups_is_not_indexed():
    """A header pointing the names at, say, 4 MB of code must not cost a split of it."""
    assert string_table(Bytes(b"\0" * 100_000, ".shstrtab"), 12) == {}
    assert string_table(Bytes(b"a\0" * 100, ".strtab"), 100) != {}
