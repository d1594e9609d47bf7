"""parse/insn.py: the BPF instruction decoder (the advisor's foundation)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from bpfmem.errors import ParseError
from bpfmem.parse.elf import ElfFile
from bpfmem.parse.helpers import helper_name
from bpfmem.parse.insn import decode


def enc(code, dst=0, src=0, off=0, imm=0, little=True):
    regs = (src << 4 | dst) if little else (dst << 4 | src)
    return struct.pack("<BBhi" if little else ">BBhi", code, regs, off, imm)


@pytest.mark.parametrize("little", [True, False])
def test_decode_basic_program(little):
    prog = (enc(0xB7, dst=1, imm=4, little=little)                 # r1 = 4
            + enc(0x18, dst=2, src=1, imm=0x1234, little=little)   # r2 = map_fd ll
            + enc(0x00, imm=0x5678, little=little)
            + enc(0x85, imm=1, little=little)                       # call map_lookup_elem
            + enc(0x85, src=1, imm=3, little=little)                # call pc+3
            + enc(0x85, src=2, imm=77, little=little)               # call kfunc
            + enc(0x7B, dst=10, src=1, off=-8, little=little)       # *(u64 *)(r10 -8) = r1
            + enc(0xDB, dst=0, src=1, imm=0x01, little=little)      # atomic fetch_add
            + enc(0x15, dst=0, off=2, little=little)                # if r0 == 0 goto +2
            + enc(0x95, little=little))                             # exit
    insns = decode(prog, little=little)
    assert [x.index for x in insns] == [0, 1, 3, 4, 5, 6, 7, 8, 9]
    assert insns[1].is_ld_imm64 and insns[1].src == 1 and insns[1].imm64 == 0x5678_00001234
    assert insns[2].is_helper_call and insns[2].helper == "map_lookup_elem"
    assert insns[3].is_bpf_call and insns[3].index + insns[3].imm + 1 == 8
    assert insns[4].is_kfunc_call
    assert insns[5].is_store and insns[5].dst == 10 and insns[5].off == -8
    assert insns[6].is_store and "fetch_add" in str(insns[6])
    assert insns[7].is_conditional and insns[7].jump_target == 11
    assert insns[8].is_exit
    assert str(insns[0]) == "r1 = 4"


def test_both_byte_orders_of_a_fixture_decode_alike():
    def program(path, little):
        elf = ElfFile((FIXTURES / path).read_bytes())
        secs = [s for s in elf.sections if s.is_exec and s.size]
        # clang emits the same code for both byte orders except where bytes are placed
        # (shift amounts, byte offsets): compare the helper calls and the opcode sequence
        return [(x.code, x.helper) for s in secs
                for x in decode(elf.data(s).data, little=little)]
    le, be = program("hash_basic.o", True), program("hash_basic.bpfeb.o", False)
    assert le and le == be


def test_every_fixture_decodes():
    total = 0
    for path in sorted(FIXTURES.glob("*.o")):
        elf = ElfFile(path.read_bytes())
        for s in elf.sections:
            if s.is_exec and s.size:
                total += len(decode(elf.data(s).data, little=elf.little_endian))
    assert total > 10_000


def test_cut_ld_imm64_and_bad_registers():
    with pytest.raises(ParseError, match="cut short"):
        decode(enc(0x18, dst=1))
    with pytest.raises(ParseError, match="r11"):
        decode(enc(0xB7, dst=11))
    with pytest.raises(ParseError, match="whole number"):
        decode(b"\x00" * 12)


def test_helper_names():
    assert helper_name(1) == "map_lookup_elem" and helper_name(12) == "tail_call"
    assert helper_name(130) == "ringbuf_output" and helper_name(9999) == "helper#9999"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=4096), st.booleans())
def test_any_bytes_decode_or_parse_error(data, little):
    try:
        insns = decode(data, little=little)
    except ParseError:
        return
    for x in insns:
        str(x)


@pytest.mark.parametrize("little", [True, False])
def test_fields_at_agrees_with_decode_on_every_fixture_section(little):
    """The relocated-instruction reader the spec parser uses (fields_at) says what the full
    decoder says, at every instruction start of every code section of every fixture (of
    both byte orders: the int32 view and the byte-wise path), and None off the grid."""
    from conftest import fixture_objects
    from bpfmem.parse.insn import fields_at
    checked = 0
    for path in fixture_objects():
        elf = ElfFile(path.read_bytes(), path=str(path))
        if elf.little_endian != little:
            continue
        for sec in elf.sections:
            if sec.type != 1 or not sec.flags & 0x4 or not sec.size:   # PROGBITS, EXECINSTR
                continue
            raw = elf.data(sec).data
            insns = decode(raw, little=little)
            offsets = [8 * x.index for x in insns]
            got = list(fields_at(raw, offsets, little=little))
            assert got == [(x.code, x.src, x.imm) for x in insns], (path.name, sec.name)
            checked += len(insns)
            assert list(fields_at(raw, [4, len(raw), len(raw) - 4], little=little)) == \
                [None, None, None]
    assert checked > (1000 if little else 50)   # (one big-endian twin: hash_basic.bpfeb.o)


def _reencode(x, little):
    from bpfmem.parse.insn import encode
    out = encode(x.code, x.dst, x.src, x.off, x.imm, little=little)
    if x.is_ld_imm64:
        hi = (x.imm64 >> 32) & 0xFFFFFFFF
        out += encode(0, 0, 0, 0, hi - (1 << 32) if hi >> 31 else hi, little=little)
    return out


def test_the_encoder_writes_what_clang_wrote():
    """Every instruction clang emitted in the fixtures (both byte orders), decoded and encoded
    again, is the same bytes (the second slot of an ld_imm64 carries only its high half)."""
    total = 0
    for path in sorted(FIXTURES.glob("*.o")):
        elf = ElfFile(path.read_bytes())
        for s in elf.sections:
            if not (s.is_exec and s.size):
                continue
            code = bytes(elf.data(s).data)
            insns = decode(code, little=elf.little_endian)
            assert b"".join(_reencode(x, elf.little_endian) for x in insns) == code, path
            total += len(insns)
    assert total > 10_000


def test_assembled_programs_decode_to_what_was_written():
    from bpfmem.parse.insn import (Jump, Label, alu64, assemble, call, call_kfunc, exit_insn,
                                   ld_imm64, ldx, st, stx)
    prog = assemble([ldx(8, 6, 1, 8), Jump("jeq", 6, "out"), ld_imm64(4, 0xffffffff81a2b3c4),
                     Jump("jne", 6, "out", src=4), stx(4, 10, 2, -16), st(8, 10, -8, 0),
                     alu64("mov", 1, src=10), alu64("add", 1, imm=-8), call(113),
                     call_kfunc(888), Label("out"), alu64("mov", 0, imm=0), exit_insn()])
    insns = decode(prog)
    assert [str(x) for x in insns][:2] == ["r6 = *(u64 *)(r1 +8)", "if r6 jeq 0 goto pc+9"]
    assert insns[1].jump_target == insns[3].jump_target == insns[-2].index
    assert insns[2].imm64 == 0xffffffff81a2b3c4 and insns[2].dst == 4
    assert insns[8].is_helper_call and insns[8].helper == "probe_read_kernel"
    assert insns[9].is_kfunc_call and insns[9].imm == 888 and insns[-1].is_exit
