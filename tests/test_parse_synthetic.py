"""The reader on synthetic bytes: byte orders, bounds, BTF corruption, libbpf naming rules."""

import struct

import pytest

import elfgen
from elfgen import BtfBuilder, Sec
from bpfmem.errors import ParseError
from bpfmem.parse.btf import Btf
from bpfmem.parse.elf import ElfFile
from bpfmem.parse.objspec import (adjust_ringbuf_size, internal_map_name, object_name_from_path,
                                  parse_object)


@pytest.mark.parametrize("little", [True, False])
def test_both_byte_orders_give_the_same_maps(little):
    maps = [("conntrack", {"type": 1, "max_entries": 65536, "map_flags": 1}, 13, 100),
            ("metrics", {"type": 6, "max_entries": 7}, 4, 24)]
    o = parse_object(elfgen.btf_map_object(maps, little=little))
    assert o.little_endian is little
    assert [(m.name, m.type, m.key_size, m.value_size, m.max_entries, m.map_flags)
            for m in o.maps] == [("conntrack", 1, 13, 100, 65536, 1), ("metrics", 6, 4, 24, 7, 0)]


def test_other_machines_are_rejected_by_name():
    data = elfgen.build_elf([Sec(".text", flags=6, data=b"\0" * 8)], machine=62)
    with pytest.raises(ParseError, match=r"x86-64 .*expected EM_BPF"):
        ElfFile(data)


def test_executables_are_not_relocatable_objects():
    data = elfgen.build_elf([Sec(".text", flags=6, data=b"\0" * 8)], e_type=2)
    with pytest.raises(ParseError, match="ET_EXEC"):
        ElfFile(data)


def test_32_bit_elf_is_rejected():
    data = bytearray(elfgen.build_elf([]))
    data[4] = 1
    with pytest.raises(ParseError, match="64-bit"):
        ElfFile(bytes(data))


def test_section_past_end_names_section_and_offset():
    data = bytearray(elfgen.btf_map_object([("m", {"type": 1, "max_entries": 1}, 4, 4)]))
    # Point the .BTF section (header 2) far past the end of the file.
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    struct.pack_into("<Q", data, shoff + 2 * 64 + 24, 10_000_000)
    with pytest.raises(ParseError) as e:
        parse_object(bytes(data), path="x.o")
    msg = str(e.value)
    assert msg.startswith("x.o: ") and ".BTF" in msg and "offset" in msg


def test_section_headers_past_end():
    data = bytearray(elfgen.build_elf([]))
    struct.pack_into("<Q", data, 0x28, len(data) + 100)
    with pytest.raises(ParseError, match="section header"):
        ElfFile(bytes(data))


def _obj_with_key_type(build_key):
    return elfgen.one_map_object(build_key)


def test_btf_type_cycle_is_an_error_not_a_hang():
    with pytest.raises(ParseError, match="cycle"):
        parse_object(_obj_with_key_type(elfgen.type_cycle))


def test_billion_element_array_of_u64_exceeds_4gib():
    with pytest.raises(ParseError, match="exceeds 4 GiB"):
        parse_object(_obj_with_key_type(lambda b: b.array(b.int_("long", 8), 1_000_000_000)))


def test_large_but_representable_key_is_parsed_as_is():
    o = parse_object(_obj_with_key_type(lambda b: b.array(b.int_("char", 1), 1_000_000_000)))
    assert o.maps[0].key_size == 1_000_000_000


def test_unknown_btf_kind():
    b = BtfBuilder()
    b.int_("int", 4)
    b.raw(31)
    with pytest.raises(ParseError, match="unknown BTF kind 31"):
        Btf(b.build())


def test_btf_string_offset_past_end():
    b = BtfBuilder()
    b.int_("int", 4)
    raw = bytearray(b.build())
    struct.pack_into("<I", raw, 24, 9999)   # name_off of type 1
    btf = Btf(bytes(raw))
    with pytest.raises(ParseError, match="outside the table"):
        btf.type(1)


def test_btf_type_section_past_end():
    raw = bytearray(BtfBuilder().build())
    struct.pack_into("<I", raw, 12, 4096)   # type_len
    with pytest.raises(ParseError, match="run past the end"):
        Btf(bytes(raw))


def test_btf_reference_to_missing_type():
    with pytest.raises(ParseError, match="out of range"):
        parse_object(_obj_with_key_type(lambda b: 999))


def test_btf_sizes_and_alignment():
    b = BtfBuilder()
    c = b.int_("char", 1)
    u32 = b.int_("u32", 4)
    u64 = b.int_("u64", 8)
    arr = b.array(u32, 3)
    st = b.struct("s", 24, [("a", c, 0), ("b", u64, 64), ("c", arr, 128)])
    td = b.typedef("s_t", st)
    btf = Btf(b.build())
    assert btf.resolve_size(arr) == 12
    assert btf.resolve_size(td) == 24
    assert btf.align_of(st) == 8
    assert btf.type_name(td) == "s_t" and btf.type_name(arr) == "u32[3]"


@pytest.mark.parametrize("obj,sec,expected", [
    # the examples of libbpf's own comment in internal_map_name()
    ("my_object_name", ".rodata", "my_objec.rodata"),
    ("my_object_name", ".bss", "my_objec.bss"),
    ("my_object_name", ".kconfig", "my_obje.kconfig"),
    ("my_object_name", ".rodata.abracadabra", ".rodata.abracad"),
    ("t", ".data", "t.data"),
    ("cni_datapath", ".rodata.str1.1", ".rodata.str1.1"),
    ("a-b", ".data", "a_b.data"),
])
def test_internal_map_names(obj, sec, expected):
    assert internal_map_name(obj, sec) == expected


def test_object_name_is_basename_up_to_first_dot():
    assert object_name_from_path("/x/y/cni_datapath.bpf.o") == "cni_datapath"
    assert object_name_from_path("a_very_long_object_file_name.o") == "a_very_long_obj"


@pytest.mark.parametrize("size,expected", [(0, 0), (4096, 4096), (5000, 8192),
                                           (3 * 4096, 4 * 4096), (1 << 20, 1 << 20), (1, 4096)])
def test_ringbuf_rounding(size, expected):
    assert adjust_ringbuf_size(size) == expected


def test_no_symbol_table():
    data = elfgen.build_elf([Sec(".text", flags=6, data=b"\0" * 8)])
    with pytest.raises(ParseError, match="symbol table"):
        parse_object(data)
