"""ELF reader for relocatable BPF objects (ET_REL, EM_BPF), either byte order.

Plain data over byte layouts: sections, symbols and relocations, every read bounds-checked.
Only what a BPF loader needs; 64-bit ELF only (a BPF object is always ELFCLASS64).
"""

from __future__ import annotations

import sys
from itertools import accumulate, repeat
from typing import NamedTuple

from ..errors import ParseError
from .reader import Bytes

EM_NONE = 0
EM_BPF = 247
ET_REL = 1

SHT_NULL = 0
SHT_PROGBITS = 1
SHT_SYMTAB = 2
SHT_STRTAB = 3
SHT_RELA = 4
SHT_NOBITS = 8
SHT_REL = 9
SHT_SYMTAB_SHNDX = 18

SHF_WRITE = 0x1
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4

SHN_UNDEF = 0
SHN_LORESERVE = 0xFF00
SHN_ABS = 0xFFF1
SHN_COMMON = 0xFFF2
SHN_XINDEX = 0xFFFF

STB_LOCAL = 0
STB_GLOBAL = 1
STB_WEAK = 2

STT_NOTYPE = 0
STT_OBJECT = 1
STT_FUNC = 2
STT_SECTION = 3

STV_DEFAULT = 0
STV_INTERNAL = 1
STV_HIDDEN = 2

_MACHINES = {3: "x86 (EM_386)", 62: "x86-64 (EM_X86_64)", 40: "ARM (EM_ARM)",
             183: "AArch64 (EM_AARCH64)", 243: "RISC-V (EM_RISCV)", 8: "MIPS (EM_MIPS)",
             21: "PowerPC64 (EM_PPC64)", 22: "s390 (EM_S390)"}
_TYPES = {0: "ET_NONE", 1: "ET_REL (relocatable)", 2: "ET_EXEC (executable)",
          3: "ET_DYN (shared object or PIE executable)", 4: "ET_CORE (core dump)"}


_HIGH_NIBBLE = bytes(b >> 4 for b in range(256))
_LOW_NIBBLE = bytes(b & 0xF for b in range(256))
_LOW_TWO_BITS = bytes(b & 0x3 for b in range(256))


class Section(NamedTuple):
    """One section header (an immutable record; a NamedTuple so that the thousand sections
    of a large object are made at C speed)."""

    index: int
    name: str
    type: int
    flags: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int

    @property
    def is_exec(self) -> bool:
        return bool(self.flags & SHF_EXECINSTR)


class Symbol(NamedTuple):
    index: int
    name: str
    value: int
    size: int
    bind: int
    type: int
    visibility: int
    shndx: int


class Relocation(NamedTuple):
    offset: int
    symbol: int
    type: int


class ElfFile:
    """A parsed relocatable BPF ELF file.

    >>> elf = ElfFile(open("obj.o", "rb").read())   # doctest: +SKIP
    """

    def __init__(self, data: bytes, *, path: str | None = None):
        self.path = path
        whole = Bytes(data, "ELF header")
        if len(data) < 16 or data[:4] != b"\x7fELF":
            if len(data) == 0:
                raise ParseError("empty file, not an ELF object", offset=0)
            raise ParseError("not an ELF file (no \\x7fELF magic)", section="ELF header", offset=0)
        ei_class, ei_data = data[4], data[5]
        if ei_class != 2:
            raise ParseError(f"not a 64-bit ELF (EI_CLASS {ei_class}); BPF objects are ELFCLASS64",
                             section="ELF header", offset=4)
        if ei_data not in (1, 2):
            raise ParseError(f"unknown byte order (EI_DATA {ei_data})", section="ELF header",
                             offset=5)
        self.endian = "<" if ei_data == 1 else ">"
        self.little_endian = ei_data == 1
        whole.endian = self.endian
        (e_type, e_machine, _ver, _entry, _phoff, e_shoff, _flags, _ehsize, _phentsize,
         _phnum, e_shentsize, e_shnum, e_shstrndx) = whole.unpack("HHIQQQIHHHHHH", 16,
                                                                 "ELF header")
        if e_machine not in (EM_BPF, EM_NONE):
            name = _MACHINES.get(e_machine, f"machine {e_machine}")
            raise ParseError(f"not a BPF object: ELF for {name}, expected EM_BPF (247)",
                             section="ELF header", offset=18)
        if e_type != ET_REL:
            raise ParseError(f"not a relocatable BPF object: e_type is "
                             f"{_TYPES.get(e_type, e_type)}, expected ET_REL",
                             section="ELF header", offset=16)
        self.machine = e_machine
        self._file = Bytes(data, "section headers", endian=self.endian)
        self._view = memoryview(data)

        # Section headers, with ELF extended numbering for very large objects.
        if e_shoff == 0:
            raise ParseError("no section headers", section="ELF header", offset=0x28)
        if e_shentsize != 64:
            raise ParseError(f"section header size {e_shentsize}, expected 64",
                             section="ELF header", offset=0x3A)
        first = self._file.unpack("IIQQQQIIQQ", e_shoff, "section header 0")
        shnum = e_shnum or first[5]
        shstrndx = first[6] if e_shstrndx == SHN_XINDEX else e_shstrndx
        if shnum > len(data) // 64:
            raise ParseError(f"{shnum} section headers cannot fit in a {len(data)}-byte file",
                             section="section headers", offset=e_shoff)
        raw = list(self._file.iter_unpack("IIQQQQIIQQ", e_shoff, shnum, "section headers"))
        if not 0 < shstrndx < shnum:
            raise ParseError(f"section name table index {shstrndx} is out of range",
                             section="ELF header", offset=0x3E)
        sh = raw[shstrndx]
        shstr = self._section_bytes(shstrndx, ".shstrtab", sh[1], sh[4], sh[5])
        self.sections: list[Section] = []
        append = self.sections.append
        new = tuple.__new__
        names = string_table(shstr, shnum)
        n = len(data)
        for i, (name_off, typ, flags, _addr, off, size, link, info, _align, entsize) in enumerate(raw):
            if i:
                name = names.get(name_off)
                if name is None:
                    name = shstr.cstr(name_off, f"name of section {i}")
            else:
                name = ""
            append(new(Section, (i, name, typ, flags, off, size, link, info, entsize)))
            if i and typ != SHT_NOBITS and typ != SHT_NULL and (off < 0 or off + size > n):
                self._file.check(off, size, f"section {name or i} data")
        self._by_name: dict[str, Section] = {}
        for s in self.sections:
            self._by_name.setdefault(s.name, s)
        self._symbols: list[Symbol] | None = None
        self._symtab: list[Section] | None = None
        self._relocation_sections: list[Section] | None = None

    def _section_bytes(self, index: int, name: str, typ: int, off: int, size: int) -> Bytes:
        if typ == SHT_NOBITS:
            return Bytes(b"", name, base=off, endian=self.endian)
        self._file.check(off, size, f"section {name} data")
        return Bytes(self._file.data[off:off + size], name, base=off, endian=self.endian)

    # -- sections ---------------------------------------------------------------------------
    def section(self, name: str) -> Section | None:
        """The first section called ``name``, or None."""
        return self._by_name.get(name)

    def section_at(self, index: int, what: str = "section index") -> Section:
        if not 0 <= index < len(self.sections):
            raise ParseError(f"{what} {index} is out of range ({len(self.sections)} sections)")
        return self.sections[index]

    def data(self, sec: Section) -> Bytes:
        """The bytes of ``sec`` (empty for SHT_NOBITS such as .bss; use ``sec.size``)."""
        return self._section_bytes(sec.index, sec.name, sec.type, sec.offset, sec.size)

    # -- symbols ----------------------------------------------------------------------------
    @property
    def symtab(self) -> Section | None:
        tabs = self._symtab
        if tabs is None:   # asked for several times per parse: found once
            tabs = self._symtab = [s for s in self.sections if s.type == SHT_SYMTAB]
        if len(tabs) > 1:
            raise ParseError("more than one symbol table", section=tabs[1].name,
                             offset=tabs[1].offset)
        return tabs[0] if tabs else None

    @property
    def symbols(self) -> list[Symbol]:
        if self._symbols is None:
            self._symbols = self._read_symbols()
        return self._symbols

    def _read_symbols(self) -> list[Symbol]:
        tab = self.symtab
        if tab is None:
            return []
        if tab.entsize != 24:
            raise ParseError(f"symbol entry size {tab.entsize}, expected 24",
                             section=tab.name, offset=tab.offset)
        strtab_sec = self.section_at(tab.link, "symbol string table index")
        strs = self.data(strtab_sec)
        data = self.data(tab)
        xindex: list[int] | None = None
        for s in self.sections:
            if s.type == SHT_SYMTAB_SHNDX and s.link == tab.index:
                d = self.data(s)
                xindex = [v for (v,) in d.iter_unpack("I", 0, len(d) // 4, "extended indices")]
        count = tab.size // 24
        names = string_table(strs, count)
        get = names.get
        cstr = strs.cstr
        data.check(0, 24 * count, "symbols")
        raw = data.data[:24 * count]
        if self.little_endian == (sys.byteorder == "little"):
            # Elf64_Sym columns straight from the bytes: st_name (u32 0 of 6), st_info and
            # st_other (bytes 4, 5 of 24), st_shndx (u16 3 of 12), st_value, st_size (u64 1, 2
            # of 3)
            mv = memoryview(raw)
            name_offs = mv.cast("I")[0::6].tolist()
            infos, others = raw[4::24], raw[5::24]
            shndxs = mv.cast("H")[3::12].tolist()
            q = mv.cast("Q")
            values, sizes = q[1::3].tolist(), q[2::3].tolist()
        else:
            recs = list(data.iter_unpack("IBBHQQ", 0, count, "symbols"))
            name_offs = [r[0] for r in recs]
            infos, others = bytes(r[1] for r in recs), bytes(r[2] for r in recs)
            shndxs = [r[3] for r in recs]
            values, sizes = [r[4] for r in recs], [r[5] for r in recs]
        sym_names = [get(o) if o else "" for o in name_offs]
        if None in sym_names:   # a suffix of another name (or out of bounds: cstr raises)
            sym_names = [n if n is not None else cstr(o, f"name of symbol {i}")
                         for i, (n, o) in enumerate(zip(sym_names, name_offs))]
        if SHN_XINDEX in shndxs:
            for i, shndx in enumerate(shndxs):
                if shndx == SHN_XINDEX:
                    if xindex is None or i >= len(xindex):
                        raise ParseError(f"symbol {i} uses SHN_XINDEX without an index table",
                                         section=tab.name, offset=tab.offset + 24 * i)
                    shndxs[i] = xindex[i]
        # st_info's binding and type, st_other's visibility: byte tables applied in C
        return list(map(tuple.__new__, repeat(Symbol), zip(
            range(count), sym_names, values, sizes, infos.translate(_HIGH_NIBBLE),
            infos.translate(_LOW_NIBBLE), others.translate(_LOW_TWO_BITS), shndxs)))

    def symbol(self, index: int, what: str = "symbol index") -> Symbol:
        syms = self.symbols
        if not 0 <= index < len(syms):
            raise ParseError(f"{what} {index} is out of range ({len(syms)} symbols)")
        return syms[index]

    # -- relocations ------------------------------------------------------------------------
    def relocation_sections(self) -> list[Section]:
        if self._relocation_sections is None:   # asked for by several passes of a parse
            self._relocation_sections = [s for s in self.sections
                                         if s.type in (SHT_REL, SHT_RELA)]
        return list(self._relocation_sections)

    def relocations(self, sec: Section) -> list[Relocation]:
        """The relocations of an SHT_REL or SHT_RELA section."""
        offsets, symbols, types = self.relocation_table(sec)
        new = tuple.__new__
        return [new(Relocation, r) for r in zip(offsets, symbols, types)]

    def relocation_table(self, sec: Section) -> tuple[list[int], list[int], list[int]]:
        """The relocations of an SHT_REL or SHT_RELA section in bulk, as three columns:
        (r_offset, symbol index, type). One C-level pass over the section where the object's
        byte order is the host's (a memoryview cast), else one ``struct.iter_unpack``."""
        rel = sec.type == SHT_REL
        size = 16 if rel else 24
        if sec.entsize not in (0, size):
            raise ParseError(f"relocation entry size {sec.entsize}, expected {size}",
                             section=sec.name, offset=sec.offset)
        count = sec.size // size
        if count == 0:
            return [], [], []
        if rel and self.little_endian and sys.byteorder == "little":
            # the header pass checked that the section lies inside the file: view it in place
            view = self._view[sec.offset:sec.offset + count * size]
            words = view.cast("I")   # r_offset lo, hi, r_info lo (type), hi (symbol)
            return view.cast("Q")[0::2].tolist(), words[3::4].tolist(), words[2::4].tolist()
        data = self.data(sec)
        fmt = "QQ" if rel else "QQq"
        recs = list(data.iter_unpack(fmt, 0, count, "relocations"))
        return ([r[0] for r in recs], [r[1] >> 32 for r in recs],
                [r[1] & 0xFFFFFFFF for r in recs])


def string_table(strs: Bytes, lookups: int) -> dict[int, str]:
    """Every NUL-terminated string of an ELF string table by the offset it starts at, in
    one pass (``split`` in C); names that point into the middle of another (suffix sharing)
    are not keys: look those up with ``strs.cstr``. A last string without its NUL is left
    out, so ``cstr`` reports it. A table with far more strings than the ``lookups`` to come
    (a mangled header pointing at some other section) gets no index, so the work stays bounded
    by the lookups, not by the table."""
    raw = strs.data
    if not raw or raw.count(b"\0") > 4 * lookups + 256:
        return {}
    if raw.isascii():
        parts = raw.decode("ascii").split("\0")
        parts.pop()   # after the final NUL: "" (or an unterminated string)
        lengths = map(len, parts)
    else:
        pieces = raw.split(b"\0")
        pieces.pop()
        parts = [p.decode("utf-8", "replace") for p in pieces]
        lengths = map(len, pieces)   # offsets count bytes, not characters
    starts = accumulate((n + 1 for n in lengths), initial=0)
    return dict(zip(starts, parts))
