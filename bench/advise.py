#!/usr/bin/env python3
"""Benchmark: the advisor's bytecode analysis on a synthetic object of 1,000 programs x 1,000
instructions (issue 5: under 5 s). Prints instructions per second.

The object is generated here (tests/elfgen.py writes the ELF): 100 BTF-defined hash maps, and
1,000 XDP programs whose straight-line code and branches load map pointers (ld_imm64 with a
relocation), call map_lookup_elem / map_update_elem, spill to the stack and write through
lookup results, the patterns the advisor follows.

usage: python bench/advise.py [--programs N] [--insns N]
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

import elfgen  # noqa: E402
from bpfmem.parse.access import analyze_object  # noqa: E402


def insn(code, dst=0, src=0, off=0, imm=0) -> bytes:
    return struct.pack("<BBhi", code, src << 4 | dst, off, imm)


def program(r: random.Random, n: int, nmaps: int) -> tuple[bytes, list[tuple[int, int]]]:
    """Code of about ``n`` instructions and its (byte offset, map index) relocations."""
    code, relocs = [], []
    while len(code) < n - 16:
        m = r.randrange(nmaps)
        code.append(insn(0x62, dst=10, off=-8, imm=r.randrange(1000)))     # *(u32*)(r10-8)=k
        code.append(insn(0xBF, dst=2, src=10))                              # r2 = r10
        code.append(insn(0x07, dst=2, imm=-8))                              # r2 += -8
        relocs.append((8 * len(code), m))
        code.append(insn(0x18, dst=1))                                      # r1 = map ll
        code.append(insn(0x00))
        code.append(insn(0x7B, dst=10, src=1, off=-16))                     # spill r1
        if r.random() < 0.3:
            code.append(insn(0x79, dst=1, src=10, off=-16))                 # reload
            code.append(insn(0xBF, dst=3, src=10))
            code.append(insn(0x07, dst=3, imm=-8))
            code.append(insn(0xB7, dst=4))
            code.append(insn(0x85, imm=2))                                   # update
        else:
            code.append(insn(0x85, imm=1))                                   # lookup
            code.append(insn(0x15, dst=0, off=3))                            # if r0 == 0
            code.append(insn(0x61, dst=1, src=0))                            # r1 = *r0
            code.append(insn(0x07, dst=1, imm=1))
            code.append(insn(0x63, dst=0, src=1) if r.random() < 0.5 else insn(0xB7, dst=5))
        for _ in range(r.randrange(4)):
            code.append(insn(0x07, dst=6, imm=r.randrange(100)))            # noise
    code.append(insn(0xB7, dst=0, imm=2))
    code.append(insn(0x95))
    return b"".join(code), relocs


def build(programs: int, insns: int, nmaps: int = 100, seed: int = 1) -> bytes:
    r = random.Random(seed)
    maps = [(f"m{i}", {"type": 1, "max_entries": 1024}, 4, 8) for i in range(nmaps)]
    # sections: 1 .maps, 2 .BTF, then per program: code + .rel, then .symtab/.strtab
    progs = [program(r, insns, nmaps) for _ in range(programs)]
    extra, syms = [], []
    first_prog_sec = 3
    for p, (code, _rel) in enumerate(progs):
        extra.append(elfgen.Sec(f"xdp/p{p}", flags=6, data=code))
        extra.append(elfgen.Sec(f".relxdp/p{p}", type=9, entsize=16, info=first_prog_sec + 2 * p,
                                data=b""))
    # symbols: maps (as btf_map_object lays them out: 16 bytes each), then programs
    off = 0
    for name, fields, _k, _v in maps:
        size = 8 * (len(fields) + 2)
        syms.append((name, off, size, 1, 1, 1))
        off += size
    for p, (code, _rel) in enumerate(progs):
        syms.append((f"prog{p}", 0, len(code), 1, 2, first_prog_sec + 2 * p))
    symtab_index = {name: i + 1 for i, (name, *_r) in enumerate(syms)}
    for p, (_code, rel) in enumerate(progs):
        extra[2 * p + 1].data = b"".join(struct.pack("<QQ", o, (symtab_index[f"m{m}"] << 32) | 1)
                                         for o, m in rel)
    n = 2 + len(extra)
    st, strs = elfgen.symtab(syms)
    for s in extra[1::2]:
        s.link = n + 1
    b = elfgen.BtfBuilder()
    data = elfgen.btf_map_object(maps, btf=b, extra_sections=extra)
    # btf_map_object writes its own symtab of the maps only: rebuild with ours
    secs = [elfgen.Sec(".maps", flags=3, data=b"\0" * off)]
    b2 = elfgen.BtfBuilder()
    u32 = b2.int_("unsigned int", 4)
    vars_, o2 = [], 0
    for name, fields, ks, vs in maps:
        key = b2.array(b2.int_("char", 1), ks)
        val = b2.array(b2.int_("char", 1), vs)
        stt = elfgen.map_def_struct(b2, u32, fields, key, val)
        size = 8 * (len(fields) + 2)
        vars_.append((b2.var(name, stt), o2, size))
        o2 += size
    b2.datasec(".maps", o2, vars_)
    secs.append(elfgen.Sec(".BTF", data=b2.build()))
    secs += extra
    secs += [elfgen.Sec(".symtab", type=2, data=st, link=n + 2, entsize=24, info=1),
             elfgen.Sec(".strtab", type=3, data=strs)]
    del data
    return elfgen.build_elf(secs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", type=int, default=1000)
    ap.add_argument("--insns", type=int, default=1000)
    args = ap.parse_args()
    data = build(args.programs, args.insns)
    t0 = time.perf_counter()
    uses = analyze_object(data)
    dt = time.perf_counter() - t0
    total = args.programs * args.insns
    verdicts = {}
    for u in uses.values():
        verdicts[u.verdict] = verdicts.get(u.verdict, 0) + 1
    print(f"{args.programs:,} programs x ~{args.insns:,} instructions ({len(data) / 1e6:.1f} MB) "
          f"analyzed in {dt:.2f} s = {total / dt:,.0f} instructions/s; verdicts {verdicts}")
    print(f"goal: under 5 s -> {'met' if dt < 5 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
