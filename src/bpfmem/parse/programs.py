"""The programs of a BPF object as a loader sees them at open: every function symbol of the
code sections, and per program (a function outside ``.text``) its section's type and attach
type, its size, and the maps and ``.text`` subprograms it reaches through relocations, also
through the subprograms it calls (libbpf ``bpf_object__collect_relos`` /
``bpf_program__record_reloc``).

Only the relocated instructions are decoded (:func:`bpfmem.parse.insn.fields_at`): a
relocation against a map symbol on an ``ld_imm64`` is a map reference, one against a global
data, kconfig or arena section a reference to that map's value, and a ``call`` against
``.text`` a subprogram call. The whole code of a program is decoded only for the analyses
that need it (:mod:`bpfmem.parse.access`).
"""

from __future__ import annotations

import bisect
from ..values import dataclass

from ..errors import ParseError
from .elf import SHN_LORESERVE, SHN_UNDEF, SHT_REL, STB_LOCAL, STT_FUNC, ElfFile, Section, Symbol
from .insn import CALL, LD_IMM64, PSEUDO_CALL, fields_at
from .sections import program_type_for_section

__all__ = ["ProgramSpec", "Functions", "MapSymbols", "collect_functions", "read_programs",
           "program_relocations_ok"]


@dataclass(frozen=True, slots=True)
class ProgramSpec:
    """One program of an object as its loader reads it: section, types, maps it uses."""

    name: str
    section: str
    type: int                   # BPF_PROG_TYPE_* value, 0 (unspec) when libbpf cannot tell
    expected_attach_type: int
    autoload: bool
    sleepable: bool
    insns: int
    maps: tuple[str, ...] = ()          # maps referenced, also through subprograms
    subprograms: tuple[str, ...] = ()   # .text functions it calls, directly or not
    subprogram_insns: int = 0           # their instructions: a loader appends each once


class Functions:
    """Function symbols per executable section index, sorted by offset (``starts``: their
    offsets, for bisection). (Plain classes here and below, not dataclasses: the spec parser
    is on every command's start-up path, and each dataclass costs its creation there.)"""
    __slots__ = ("by_section", "starts")

    def __init__(self, by_section: dict[int, list[Symbol]], starts: dict[int, list[int]]):
        self.by_section, self.starts = by_section, starts

    def at(self, shndx: int, offset: int) -> Symbol | None:
        """The function of section ``shndx`` that byte ``offset`` is in."""
        starts = self.starts.get(shndx)
        if not starts:
            return None
        i = bisect.bisect_right(starts, offset) - 1
        if i < 0:
            return None
        f = self.by_section[shndx][i]
        return f if offset < f.value + max(f.size, 8) else None


def collect_functions(syms: list[Symbol], exec_secs: list[Section], text_idx: int | None,
                      *, static_programs: bool) -> Functions:
    """The function symbols of the executable sections. A function crossing its section's
    end is a ParseError; so is a static program outside ``.text`` unless the loader takes
    them (``static_programs``)."""
    funcs: dict[int, list[Symbol]] = {}
    exec_idx = {s.index: s for s in exec_secs}
    for sym in syms:
        if sym.type == STT_FUNC and sym.shndx in exec_idx:
            sec = exec_idx[sym.shndx]
            if sym.value + sym.size > sec.size or sym.value % 8:
                raise ParseError(f"program '{sym.name}' at offset {sym.value} crosses the "
                                 "end of its section", section=sec.name)
            if sym.shndx != text_idx and sym.bind == STB_LOCAL and not static_programs:
                raise ParseError(f"program '{sym.name}' is static, which libbpf does not "
                                 "support outside .text", section=sec.name)
            funcs.setdefault(sym.shndx, []).append(sym)
    for fs in funcs.values():
        fs.sort(key=lambda s: s.value)
    return Functions(funcs, {idx: [s.value for s in fs] for idx, fs in funcs.items()})


class MapSymbols:
    """Where the object's maps are, for resolving relocations: the map index of each map
    definition (section index, offset), of each global data section, of .kconfig (with its
    extern names) and of the arena; the sections holding map definitions (``maps_idx``
    .maps, ``legacy_idx`` maps, ``arena_idx`` the arena's)."""
    __slots__ = ("at", "data", "kconfig", "kconfig_names", "arena", "maps_idx", "legacy_idx",
                 "arena_idx")

    def __init__(self, at: dict[tuple[int, int], int], data: dict[int, int],
                 kconfig: int | None, kconfig_names: frozenset[str], arena: int | None,
                 maps_idx: int | None, legacy_idx: int | None, arena_idx: int | None):
        self.at, self.data, self.kconfig, self.kconfig_names = at, data, kconfig, kconfig_names
        self.arena, self.maps_idx, self.legacy_idx = arena, maps_idx, legacy_idx
        self.arena_idx = arena_idx


def program_relocations_ok(elf: ElfFile, syms: list[Symbol], exec_secs: list[Section],
                           maps: MapSymbols) -> bool:
    """Whether :func:`read_programs` over the same object certainly raises no ParseError,
    found in bulk without decoding an instruction or building a program: every relocation
    of an executable section starts an instruction inside it and names a symbol of the
    table, and none names a symbol of a map section that is no map. False means "maybe":
    only read_programs gives the exact answer then. (For commands that never show programs;
    reads the sections in read_programs' order, so a malformed one raises the same error.)"""
    exec_by_idx = {s.index: s for s in exec_secs}
    nsyms = len(syms)
    map_secs = {i for i in (maps.maps_idx, maps.legacy_idx) if i is not None}
    used: set[int] = set()
    for rsec in elf.relocation_sections():
        if rsec.type != SHT_REL or rsec.info not in exec_by_idx:
            continue
        size = len(elf.data(exec_by_idx[rsec.info]).data)
        offsets, symbols, _types = elf.relocation_table(rsec)
        if not offsets:
            continue
        if max(offsets) + 8 > size or any(map((7).__and__, offsets)) or max(symbols) >= nsyms:
            return False
        used.update(symbols)
    if map_secs:
        at = maps.at
        for i in used:
            sym = syms[i]
            if sym.shndx in map_secs and (sym.shndx, sym.value) not in at:
                return False
    return True


def read_programs(elf: ElfFile, syms: list[Symbol], exec_secs: list[Section],
                  text_idx: int | None, functions: Functions, maps: MapSymbols,
                  map_names: list[str]
                  ) -> tuple[tuple[ProgramSpec, ...], dict[tuple[int, int], tuple[str, int]]]:
    """Every program with the maps and subprograms it reaches, and what each relocated
    instruction refers to: (section index, byte offset) -> ("map", map index) | ("value",
    map index) | ("call" | "func", .text offset)."""
    targets: dict[tuple[int, int], tuple[str, int]] = {}
    # refs[(shndx, func offset)] = (set of map indexes, set of called .text offsets)
    refs: dict[tuple[int, int], tuple[set[int], set[int]]] = {}
    exec_by_idx = {s.index: s for s in exec_secs}
    little = elf.little_endian
    nsyms = len(syms)
    map_at, data_map, kconfig_map, arena_map = maps.at, maps.data, maps.kconfig, maps.arena
    kconfig_names = maps.kconfig_names
    maps_idx, legacy_idx, arena_idx = maps.maps_idx, maps.legacy_idx, maps.arena_idx
    for rsec in elf.relocation_sections():
        if rsec.type != SHT_REL or rsec.info not in exec_by_idx:
            continue
        target = exec_by_idx[rsec.info]
        tidx = target.index
        raw = elf.data(target).data
        # one pass per section: the relocation columns in bulk, the relocated instructions
        # decoded in step, functions found by bisection
        starts = functions.starts.get(tidx) or []
        funcs = functions.by_section.get(tidx) or []
        offsets, symbols, _types = elf.relocation_table(rsec)
        func_start = 0
        func_end = -1
        entry = None
        for off, symi, fields in zip(offsets, symbols, fields_at(raw, offsets, little=little)):
            if fields is None:
                raise ParseError(f"relocation at {off:#x} is outside {target.name}",
                                 section=rsec.name, offset=rsec.offset)
            if not func_start <= off < func_end:
                j = bisect.bisect_right(starts, off) - 1
                if j < 0:
                    continue
                f = funcs[j]
                if off >= f.value + max(f.size, 8):
                    continue
                # the bisection's answer holds until this function or the next start ends
                func_start, func_end = f.value, f.value + max(f.size, 8)
                if j + 1 < len(starts):
                    func_end = min(func_end, starts[j + 1])
                key = (tidx, func_start)
                entry = refs.get(key)
                if entry is None:
                    entry = refs[key] = (set(), set())
            sym = syms[symi] if 0 <= symi < nsyms else \
                elf.symbol(symi, f"symbol of relocation at {off:#x}")
            opcode, src_reg, imm = fields
            maps_used, calls = entry
            shndx = sym.shndx
            if shndx == SHN_UNDEF:
                if sym.name in kconfig_names and kconfig_map is not None:
                    maps_used.add(kconfig_map)
                    targets[(tidx, off)] = ("value", kconfig_map)
                continue
            if opcode == CALL:
                if src_reg == PSEUDO_CALL and shndx == text_idx:
                    calls.add(sym.value + (imm + 1) * 8)
                    targets[(tidx, off)] = ("call", sym.value + (imm + 1) * 8)
                continue
            if opcode != LD_IMM64 or shndx >= SHN_LORESERVE:
                continue
            if shndx == text_idx:
                calls.add(sym.value + imm)          # callback (subprogram address)
                targets[(tidx, off)] = ("func", sym.value + imm)
            elif shndx == maps_idx or shndx == legacy_idx:
                i = map_at.get((shndx, sym.value))
                if i is None:
                    raise ParseError(f"map relocation against '{sym.name}' at offset "
                                     f"{sym.value} matches no map", section=rsec.name)
                maps_used.add(i)
                targets[(tidx, off)] = ("map", i)
            elif shndx in data_map:
                maps_used.add(data_map[shndx])
                targets[(tidx, off)] = ("value", data_map[shndx])
            elif shndx == arena_idx and arena_map is not None:
                maps_used.add(arena_map)
                targets[(tidx, off)] = ("value", arena_map)

    programs: list[ProgramSpec] = []
    text_funcs = {f.value: f for f in functions.by_section.get(text_idx or -1, [])}
    for sec in sorted(exec_secs, key=lambda s: s.index):
        if sec.index == text_idx:
            continue
        ptype, attach, autoload, sleepable = program_type_for_section(sec.name)
        for f in functions.by_section.get(sec.index, []):
            used: set[int] = set()
            seen_sub: set[int] = set()
            stack = [(sec.index, f.value)]
            while stack:
                node = stack.pop()
                entry = refs.get(node)
                if entry is None:
                    continue
                used |= entry[0]
                for target_off in entry[1]:
                    sub = functions.at(text_idx, target_off) if text_idx else None
                    if sub is not None and sub.value not in seen_sub:
                        seen_sub.add(sub.value)
                        stack.append((text_idx, sub.value))  # type: ignore[arg-type]
            subs = [text_funcs[o] for o in sorted(seen_sub) if o in text_funcs]
            programs.append(ProgramSpec(
                f.name, sec.name, int(ptype) if ptype is not None else 0, int(attach),
                autoload, sleepable, f.size // 8,
                tuple([map_names[i] for i in sorted(used)]), tuple([s.name for s in subs]),
                sum([s.size // 8 for s in subs])))
    return tuple(programs), targets
