"""Decode and encode BPF instructions: every class, the 16-byte ``ld_imm64``, atomics, pseudo
sources, and calls to helpers, kfuncs and BPF subprograms (the encoder, with jumps to labels,
is what host/ assembles its iterator programs with).

Plain data over the 8-byte encoding (``struct bpf_insn``: code, dst_reg:4, src_reg:4, off,
imm). In a big-endian object the two register nibbles are swapped.
"""

from __future__ import annotations

import sys

from ..errors import ParseError
from ..values import Record, items
from .reader import packer

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Iterable, Iterator

# instruction classes (code & 0x07)
LD, LDX, ST, STX, ALU, JMP, JMP32, ALU64 = range(8)
CLASS_NAMES = ("ld", "ldx", "st", "stx", "alu", "jmp", "jmp32", "alu64")
# sizes (code & 0x18) and modes (code & 0xe0) for loads and stores
SIZE_BYTES = {0x00: 4, 0x08: 2, 0x10: 1, 0x18: 8}
MODE_IMM, MODE_ABS, MODE_IND, MODE_MEM, MODE_MEMSX, MODE_ATOMIC = 0x00, 0x20, 0x40, 0x60, \
    0x80, 0xC0
# ALU ops (code & 0xf0)
ALU_OPS = {0x00: "add", 0x10: "sub", 0x20: "mul", 0x30: "div", 0x40: "or", 0x50: "and",
           0x60: "lsh", 0x70: "rsh", 0x80: "neg", 0x90: "mod", 0xA0: "xor", 0xB0: "mov",
           0xC0: "arsh", 0xD0: "end"}
# JMP ops (code & 0xf0)
JMP_OPS = {0x00: "ja", 0x10: "jeq", 0x20: "jgt", 0x30: "jge", 0x40: "jset", 0x50: "jne",
           0x60: "jsgt", 0x70: "jsge", 0x80: "call", 0x90: "exit", 0xA0: "jlt", 0xB0: "jle",
           0xC0: "jslt", 0xD0: "jsle", 0xE0: "jcond"}
# atomic ops (imm of BPF_STX | BPF_ATOMIC)
ATOMIC_OPS = {0x00: "add", 0x40: "or", 0x50: "and", 0xA0: "xor", 0x01: "fetch_add",
              0x41: "fetch_or", 0x51: "fetch_and", 0xA1: "fetch_xor", 0xE1: "xchg",
              0xF1: "cmpxchg", 0x100: "load_acquire", 0x110: "store_release"}
# src_reg of BPF_CALL
PSEUDO_HELPER, PSEUDO_CALL, PSEUDO_KFUNC_CALL = 0, 1, 2
# src_reg of ld_imm64
PSEUDO_IMM, PSEUDO_MAP_FD, PSEUDO_MAP_VALUE, PSEUDO_BTF_ID, PSEUDO_FUNC, PSEUDO_MAP_IDX, \
    PSEUDO_MAP_IDX_VALUE = range(7)

CALL = 0x85     # BPF_JMP | BPF_CALL
EXIT = 0x95     # BPF_JMP | BPF_EXIT
LD_IMM64 = 0x18  # BPF_LD | BPF_IMM | BPF_DW

_MAX_REG = 10


class Insn(Record):
    """One instruction. ``index`` counts 8-byte slots (an ld_imm64 takes two); ``imm64`` is
    the 64-bit immediate of an ld_imm64, else ``imm``."""

    __slots__ = ()
    _fields = ("index", "code", "dst", "src", "off", "imm", "imm64")
    index, code, dst, src, off, imm, imm64 = items(_fields)

    def __new__(cls, index: int, code: int, dst: int, src: int, off: int, imm: int, imm64: int):
        return tuple.__new__(cls, (index, code, dst, src, off, imm, imm64))

    @property
    def cls(self) -> int:
        return self.code & 0x07

    @property
    def slots(self) -> int:
        return 2 if self.code == LD_IMM64 else 1

    @property
    def is_ld_imm64(self) -> bool:
        return self.code == LD_IMM64

    @property
    def is_call(self) -> bool:
        return self.code == CALL

    @property
    def is_helper_call(self) -> bool:
        return self.code == CALL and self.src == PSEUDO_HELPER

    @property
    def is_kfunc_call(self) -> bool:
        return self.code == CALL and self.src == PSEUDO_KFUNC_CALL

    @property
    def is_bpf_call(self) -> bool:
        """A bpf-to-bpf call; its target is ``index + imm + 1``."""
        return self.code == CALL and self.src == PSEUDO_CALL

    @property
    def is_exit(self) -> bool:
        return self.code == EXIT

    @property
    def is_jump(self) -> bool:
        """A branch or goto (not call, not exit)."""
        c = self.cls
        return c in (JMP, JMP32) and self.code not in (CALL, EXIT)

    @property
    def is_conditional(self) -> bool:
        return self.is_jump and (self.code & 0xF0) != 0x00

    @property
    def jump_target(self) -> int:
        """Slot index a jump goes to (``gotol`` in JMP32|JA uses imm)."""
        if self.cls == JMP32 and (self.code & 0xF0) == 0x00:
            return self.index + self.imm + 1
        return self.index + self.off + 1

    @property
    def is_store(self) -> bool:
        """A write to memory: ST/STX MEM, or an atomic that writes."""
        c = self.cls
        if c == ST:
            return (self.code & 0xE0) == MODE_MEM
        if c == STX:
            mode = self.code & 0xE0
            return mode == MODE_MEM or (mode == MODE_ATOMIC and self.imm != 0x100)
        return False

    @property
    def mem_size(self) -> int:
        return SIZE_BYTES[self.code & 0x18]

    @property
    def helper(self) -> str | None:
        if not self.is_helper_call:
            return None
        from .helpers import helper_name
        return helper_name(self.imm)

    def __str__(self) -> str:
        return disassemble(self)


def decode(data: bytes | memoryview, *, little: bool = True, section: str = "code",
           base: int = 0) -> list[Insn]:
    """All instructions of a code section (or a program's bytes).

    Raises :class:`ParseError` when the bytes are not whole instructions, when an ld_imm64 is
    cut short, or when a register number is out of range (the kernel rejects both).
    """
    n = len(data)
    if n % 8:
        raise ParseError(f"{n} bytes is not a whole number of 8-byte instructions",
                         section=section, offset=base + n - n % 8)
    unpack = packer("<" if little else ">", "BBhi").iter_unpack
    raw = list(unpack(data))
    out: list[Insn] = []
    append = out.append
    i = 0
    count = len(raw)
    while i < count:
        code, regs, off, imm = raw[i]
        if little:
            dst, src = regs & 0xF, regs >> 4
        else:
            dst, src = regs >> 4, regs & 0xF
        if dst > _MAX_REG or src > _MAX_REG:
            raise ParseError(f"instruction {i}: register r{max(dst, src)} does not exist",
                             section=section, offset=base + 8 * i)
        if code == LD_IMM64:
            if i + 1 >= count:
                raise ParseError(f"instruction {i}: ld_imm64 is cut short (needs 16 bytes)",
                                 section=section, offset=base + 8 * i)
            hi = raw[i + 1][3] & 0xFFFFFFFF
            append(Insn(i, code, dst, src, off, imm, (hi << 32) | (imm & 0xFFFFFFFF)))
            i += 2
        else:
            append(Insn(i, code, dst, src, off, imm, imm))
            i += 1
    return out


def fields_at(code: bytes | memoryview, offsets: Iterable[int], *, little: bool = True
              ) -> Iterator[tuple[int, int, int] | None]:
    """(opcode, src_reg, imm) of the instruction at each byte offset of ``code``, in order;
    None for an offset that is not the start of a whole instruction inside ``code``.

    For the few instructions a loader looks at (those a relocation points at) without
    decoding the whole section: the immediates are read through one int32 view of the code
    when its byte order is this host's."""
    n = len(code)
    words = memoryview(code).cast("i") \
        if little == (sys.byteorder == "little") and n % 4 == 0 else None
    order = "little" if little else "big"
    for off in offsets:
        if off % 8 or off + 8 > n:
            yield None
            continue
        regs = code[off + 1]
        imm = words[(off >> 2) + 1] if words is not None else \
            int.from_bytes(code[off + 4:off + 8], order, signed=True)
        yield code[off], (regs >> 4) if little else (regs & 0xF), imm


def disassemble(x: Insn) -> str:
    """A short human spelling, in the style of the kernel's verifier log."""
    c = x.cls
    if x.is_ld_imm64:
        what = {PSEUDO_MAP_FD: "map_fd", PSEUDO_MAP_VALUE: "map_value", PSEUDO_BTF_ID: "btf_id",
                PSEUDO_FUNC: "func", PSEUDO_MAP_IDX: "map_idx",
                PSEUDO_MAP_IDX_VALUE: "map_idx_value"}.get(x.src)
        return f"r{x.dst} = {what + ' ' if what else ''}{x.imm64:#x} ll"
    if c in (ALU, ALU64):
        op = ALU_OPS.get(x.code & 0xF0, "?")
        w = "" if c == ALU64 else "w"
        rhs = f"r{x.src}" if x.code & 0x08 else str(x.imm)
        if op == "neg":
            return f"{w or 'r'}{x.dst} = -{w or 'r'}{x.dst}"
        if op == "mov":
            return f"{w or 'r'}{x.dst} = {rhs}"
        return f"{w or 'r'}{x.dst} {op}= {rhs}"
    if c == LDX:
        return f"r{x.dst} = *(u{8 * x.mem_size} *)(r{x.src} {x.off:+d})"
    if c == ST:
        return f"*(u{8 * x.mem_size} *)(r{x.dst} {x.off:+d}) = {x.imm}"
    if c == STX:
        if (x.code & 0xE0) == MODE_ATOMIC:
            return (f"atomic_{ATOMIC_OPS.get(x.imm, hex(x.imm))}((u{8 * x.mem_size} *)"
                    f"(r{x.dst} {x.off:+d}), r{x.src})")
        return f"*(u{8 * x.mem_size} *)(r{x.dst} {x.off:+d}) = r{x.src}"
    if c == LD:
        return f"r0 = legacy packet load (r{x.src} {x.imm:+d})"
    if x.is_call:
        if x.is_bpf_call:
            return f"call pc{x.imm:+d}"
        if x.is_kfunc_call:
            return f"call kfunc#{x.imm}"
        return f"call {x.helper}"
    if x.is_exit:
        return "exit"
    op = JMP_OPS.get(x.code & 0xF0, "?")
    if op == "ja":
        return f"goto pc{(x.imm if c == JMP32 else x.off):+d}"
    rhs = f"r{x.src}" if x.code & 0x08 else str(x.imm)
    return f"if {'w' if c == JMP32 else 'r'}{x.dst} {op} {rhs} goto pc{x.off:+d}"


# ---- encoding: the inverse of decode (host/ assembles its iterator programs with it) ----
BPF_K, BPF_X = 0x00, 0x08       # the source of ALU and JMP: imm, or src_reg
_SIZE_CODE = {4: 0x00, 2: 0x08, 1: 0x10, 8: 0x18}
_ALU_CODE = {name: code for code, name in ALU_OPS.items()}
_JMP_CODE = {name: code for code, name in JMP_OPS.items()}


def _s32(x: int) -> int:
    """The low 32 bits of ``x`` as the signed imm field holds them."""
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >> 31 else x


def encode(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0, *,
           little: bool = True) -> bytes:
    """One 8-byte instruction (``struct bpf_insn``); in a big-endian program the register
    nibbles are swapped, as :func:`decode` reads them."""
    regs = (src << 4 | dst) if little else (dst << 4 | src)
    return packer("<" if little else ">", "BBhi").pack(code, regs, off, imm)


def ldx(size: int, dst: int, src: int, off: int) -> bytes:
    """``dst = *(u<size*8> *)(src + off)``."""
    return encode(LDX | MODE_MEM | _SIZE_CODE[size], dst, src, off)


def stx(size: int, dst: int, src: int, off: int) -> bytes:
    """``*(u<size*8> *)(dst + off) = src``."""
    return encode(STX | MODE_MEM | _SIZE_CODE[size], dst, src, off)


def st(size: int, dst: int, off: int, imm: int) -> bytes:
    """``*(u<size*8> *)(dst + off) = imm``."""
    return encode(ST | MODE_MEM | _SIZE_CODE[size], dst, 0, off, imm)


def alu64(op: str, dst: int, *, src: int | None = None, imm: int = 0) -> bytes:
    """``dst <op>= src`` (a register) or ``imm``: ``alu64("add", 1, imm=-8)``,
    ``alu64("mov", 1, src=10)``."""
    if src is None:
        return encode(ALU64 | _ALU_CODE[op] | BPF_K, dst, 0, 0, imm)
    return encode(ALU64 | _ALU_CODE[op] | BPF_X, dst, src)


def ld_imm64(dst: int, value: int, src: int = PSEUDO_IMM) -> bytes:
    """``dst = value`` (64 bits, two slots)."""
    return (encode(LD_IMM64, dst, src, 0, _s32(value)) + encode(0, 0, 0, 0, _s32(value >> 32)))


def call(helper: int) -> bytes:
    """A call of helper number ``helper``."""
    return encode(CALL, 0, PSEUDO_HELPER, 0, helper)


def call_kfunc(btf_id: int) -> bytes:
    """A call of the kernel function of BTF id ``btf_id``."""
    return encode(CALL, 0, PSEUDO_KFUNC_CALL, 0, btf_id)


def exit_insn() -> bytes:
    return encode(EXIT)


class Jump(Record):
    """A conditional jump to a :class:`Label` of the same :func:`assemble` list: ``if dst
    <op> src`` (a register) or ``imm``."""
    __slots__ = ()
    _fields = ("op", "dst", "to", "src", "imm")
    op, dst, to, src, imm = items(_fields)

    def __new__(cls, op: str, dst: int, to: str, src: int | None = None, imm: int = 0):
        return tuple.__new__(cls, (op, dst, to, src, imm))


class Label(Record):
    __slots__ = ()
    _fields = ("name",)
    name, = items(_fields)

    def __new__(cls, name: str):
        return tuple.__new__(cls, (name,))


def assemble(items: Iterable[bytes | Jump | Label]) -> bytes:
    """A program from encoded instructions, jumps and the labels they go to (a label marks
    the next instruction)."""
    items = list(items)
    at: dict[str, int] = {}
    slot = 0
    for x in items:
        if isinstance(x, Label):
            at[x.name] = slot
        else:
            slot += 1 if isinstance(x, Jump) else len(x) // 8
    out = []
    slot = 0
    for x in items:
        if isinstance(x, Label):
            continue
        if isinstance(x, Jump):
            off = at[x.to] - slot - 1
            code = JMP | _JMP_CODE[x.op] | (BPF_K if x.src is None else BPF_X)
            x = encode(code, x.dst, x.src or 0, off, x.imm)
        out.append(x)
        slot += len(x) // 8
    return b"".join(out)
