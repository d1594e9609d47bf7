"""x86-64 machine code, as far as binary size needs it: where the code refers to data.

A Go binary's functions reach their constant data (strings, tables, type descriptors,
funcdata) with RIP-relative LEA and MOV. :func:`rip_relative_refs` finds those instructions
in a stretch of code by their bytes and gives each data address the first instruction (in
address order) that refers to it. It is a pattern scan, not a disassembler: a match inside
another instruction's bytes is possible, which is why a caller uses it only to fill what
symbols and descriptors leave unlabelled."""

from __future__ import annotations

import operator
import struct
from itertools import accumulate, repeat

__all__ = ["rip_relative_refs"]

#: x86-64 LEA and MOV with a RIP-relative operand (REX.W, optionally REX.R): 48/4c 8d/8b, a
#: ModRM of mod 00, r/m 101; then a 32-bit displacement from the next instruction. The code
#: is read through a table that maps each byte to its part (R: the REX prefix, O: the
#: opcode, M: such a ModRM; the three sets are apart), so that one search for b"ROM" in C
#: (a split) finds them all; two matches never overlap.
_PARTS = bytearray(b"." * 256)
for _b, _part in ((0x48, "R"), (0x4C, "R"), (0x8D, "O"), (0x8B, "O"),
                  *((m, "M") for m in (0x05, 0x0D, 0x15, 0x1D, 0x25, 0x2D, 0x35, 0x3D))):
    _PARTS[_b] = ord(_part)
_PARTS = bytes(_PARTS)
del _b, _part
#: the instruction's length: REX, opcode, ModRM and the 32-bit displacement
INSN_LEN = 7
_DISP = struct.Struct("<i").unpack_from
#: bytes of code read at a time (each chunk is copied, mapped and split)
_CHUNK = 1 << 20


def rip_relative_refs(data, start: int, end: int, addr: int, lo: int, hi: int
                      ) -> dict[int, int]:
    """The data addresses in [``lo``, ``hi``) that the RIP-relative LEA/MOV instructions in
    ``data[start:end]`` refer to, each to the file offset of the first (lowest) instruction
    referring to it; ``addr`` is the virtual address of ``data[start]``. (An instruction
    whose first three bytes are not before ``end - INSN_LEN`` is not looked at.)"""
    last = end - INSN_LEN
    base = addr - start + INSN_LEN
    disp = _DISP
    first: dict[int, int] = {}
    p = start
    while p < last:
        q = min(p + _CHUNK, last)
        # a match starting before q may end 2 bytes after it
        parts = data[p:min(q + 2, last)].translate(_PARTS).split(b"ROM")
        parts.pop()                         # after the last match
        at = list(accumulate(map(operator.add, map(len, parts), repeat(3)), initial=p - 3))
        del at[0], parts                    # the initial value
        while at and at[-1] >= q:           # the next chunk's
            at.pop()
        targets = [base + o + disp(data, o + 3)[0] for o in at]
        # a dict built from the last reference back keeps the first one's value; a target
        # an earlier chunk refers to keeps that chunk's
        for t, o in dict(zip(reversed(targets), reversed(at))).items():
            if lo <= t < hi and t not in first:
                first[t] = o
        p = q
    return first
