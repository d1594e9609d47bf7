"""x86-64 machine code, as far as binary size needs it: where the code refers to data.

A Go binary's functions reach their constant data (strings, tables, type descriptors,
funcdata) with RIP-relative LEA and MOV. :func:`rip_relative_refs` finds those instructions
in a stretch of code by their bytes and gives each data address the first instruction (in
address order) that refers to it. It is a pattern scan, not a disassembler: a match inside
another instruction's bytes is possible, which is why a caller uses it only to fill what
symbols and descriptors leave unlabelled."""

from __future__ import annotations

import re
import struct

__all__ = ["rip_relative_refs"]

#: x86-64 LEA and MOV with a RIP-relative operand (REX.W, optionally REX.R): 48/4c 8d/8b, a
#: ModRM of mod 00, r/m 101; then a 32-bit displacement from the next instruction. One
#: pattern per two-byte opcode prefix: a literal prefix is searched for in C (a character
#: class first makes the engine try every byte); two matches can never overlap (a match's
#: second and third bytes are no REX prefix), so the four scans find what one would.
_RIP_MODRM = rb"[\x05\x0d\x15\x1d\x25\x2d\x35\x3d]"
_RIP_REFS = tuple(re.compile(re.escape(bytes((rex, op))) + _RIP_MODRM)
                  for rex in (0x48, 0x4C) for op in (0x8D, 0x8B))
#: the instruction's length: REX, opcode, ModRM and the 32-bit displacement
INSN_LEN = 7
_DISP = struct.Struct("<i").unpack_from


def rip_relative_refs(data, start: int, end: int, addr: int, lo: int, hi: int
                      ) -> dict[int, int]:
    """The data addresses in [``lo``, ``hi``) that the RIP-relative LEA/MOV instructions in
    ``data[start:end]`` refer to, each to the file offset of the first (lowest) instruction
    referring to it; ``addr`` is the virtual address of ``data[start]``."""
    last = end - INSN_LEN
    if last <= start:
        return {}
    at = sorted(m.start() for pat in _RIP_REFS for m in pat.finditer(data, start, last))
    base = addr - start + INSN_LEN
    # a dict built from the last reference back keeps the first one's value
    return {t: o for o in reversed(at)
            if lo <= (t := base + o + _DISP(data, o + 3)[0]) < hi}
