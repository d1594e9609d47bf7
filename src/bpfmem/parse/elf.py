"""The one ELF reader: 32- and 64-bit, either byte order, every read through
:class:`~bpfmem.parse.reader.Bytes` (so every offset and size is checked, and an error names
the part and the file offset).

:class:`Elf` reads what every ELF file has: the header, the section headers and their names,
the program headers, the symbol tables (in bulk, as columns). Two views stand on it:

* :class:`ElfFile`, a relocatable BPF object (ELFCLASS64, ET_REL, EM_BPF): strict, as a BPF
  loader is (a bad name offset or a section past the end is an error), with relocations;
* :class:`ElfImage`, a linked image (executable, PIE, shared object, an ELF ``vmlinux``):
  lenient where a loader is (names it cannot read are empty), with segments and address to
  file-offset translation.

An ELF inside a larger buffer (a BPF object embedded in a binary's ``.rodata``, a vmlinux in
a decompressed image) opens the same way over a sub-view: ``ElfFile(outer.sub(off, n, ...))``
or :meth:`Elf.at`; section offsets are then the inner file's, error offsets the outer's, and
:attr:`Elf.extent` says how many bytes the inner file spans.
"""

from __future__ import annotations

import array
import operator
import sys
from itertools import accumulate, repeat

from ..errors import ParseError
from ..values import Record, items
from .reader import Bytes, decoding

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Sequence

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
SHT_DYNSYM = 11
SHT_SYMTAB_SHNDX = 18

SHF_WRITE = 0x1
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4
SHF_TLS = 0x400
SHF_COMPRESSED = 0x800

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
STT_FILE = 4
STT_TLS = 6

STV_DEFAULT = 0
STV_INTERNAL = 1
STV_HIDDEN = 2

PT_LOAD = 1

_MACHINES = {3: "x86 (EM_386)", 62: "x86-64 (EM_X86_64)", 40: "ARM (EM_ARM)",
             183: "AArch64 (EM_AARCH64)", 243: "RISC-V (EM_RISCV)", 8: "MIPS (EM_MIPS)",
             21: "PowerPC64 (EM_PPC64)", 22: "s390 (EM_S390)"}
_TYPES = {0: "ET_NONE", 1: "ET_REL (relocatable)", 2: "ET_EXEC (executable)",
          3: "ET_DYN (shared object or PIE executable)", 4: "ET_CORE (core dump)"}

#: the most segments a file may declare, and the most symbols a table may hold (a corrupt
#: count must not hang us)
_MAX_SEGMENTS = 1 << 16
_MAX_SYMBOLS = 1 << 20      # 1,048,576: a large Go agent has a few 100,000

# per class: header after e_ident, section header, program header, symbol (field order of
# Elf32_Shdr and Elf64_Shdr is the same; Phdr and Sym differ)
_EHDR = {True: "HHIQQQIHHHHHH", False: "HHIIIIIHHHHHH"}
_SHDR = {True: ("IIQQQQIIQQ", 64), False: ("IIIIIIIIII", 40)}
_PHDR = {True: ("IIQQQQQQ", 56), False: ("IIIIIIII", 32)}
_SYM = {True: 24, False: 16}

_HIGH_NIBBLE = bytes(b >> 4 for b in range(256))
_LOW_NIBBLE = bytes(b & 0xF for b in range(256))
_LOW_TWO_BITS = bytes(b & 0x3 for b in range(256))


class Section(Record):
    """One section header (an immutable record; a named tuple so that the thousand sections
    of a large object are made at C speed)."""

    __slots__ = ()
    _fields = ("index", "name", "type", "flags", "offset", "size", "link", "info", "entsize",
               "addr")
    index, name, type, flags, offset, size, link, info, entsize, addr = items(_fields)

    def __new__(cls, index: int, name: str, type: int, flags: int, offset: int, size: int,
                link: int, info: int, entsize: int, addr: int = 0):
        return tuple.__new__(cls, (index, name, type, flags, offset, size, link, info, entsize,
                                  addr))

    @property
    def is_exec(self) -> bool:
        return bool(self.flags & SHF_EXECINSTR)

    @property
    def in_file(self) -> bool:
        """Whether the section has bytes in the file (.bss and .tbss do not)."""
        return self.type != SHT_NOBITS and self.type != SHT_NULL

    @property
    def in_memory(self) -> bool:
        """Whether the loader maps it (SHF_ALLOC); .tbss is per thread, not in the image."""
        return bool(self.flags & SHF_ALLOC) and not (
            self.flags & SHF_TLS and self.type == SHT_NOBITS)

    @property
    def file_size(self) -> int:
        return self.size if self.in_file else 0


class Segment(Record):
    __slots__ = ()
    _fields = ("type", "flags", "offset", "vaddr", "filesz", "memsz")
    type, flags, offset, vaddr, filesz, memsz = items(_fields)

    def __new__(cls, type: int, flags: int, offset: int, vaddr: int, filesz: int, memsz: int):
        return tuple.__new__(cls, (type, flags, offset, vaddr, filesz, memsz))


class Symbol(Record):
    __slots__ = ()
    _fields = ("index", "name", "value", "size", "bind", "type", "visibility", "shndx")
    index, name, value, size, bind, type, visibility, shndx = items(_fields)

    def __new__(cls, index: int, name: str, value: int, size: int, bind: int, type: int,
                visibility: int, shndx: int):
        return tuple.__new__(cls, (index, name, value, size, bind, type, visibility, shndx))


class ImageSymbol(Record):
    """A symbol of a binary's image; ``section`` is its section index (st_shndx)."""
    __slots__ = ()
    _fields = ("name", "value", "size", "type", "section")
    name, value, size, type, section = items(_fields)

    def __new__(cls, name: str, value: int, size: int, type: int, section: int):
        return tuple.__new__(cls, (name, value, size, type, section))


class ImageSymbols:
    """A symbol table of an image as columns, in table order: a large binary has 10^5
    symbols, and a column of machine integers (``array``) costs 2 to 8 bytes a symbol where
    a record costs a tuple and an int object a field. ``types`` holds each st_type (the low
    nibble of st_info)."""

    __slots__ = ("names", "values", "sizes", "types", "shndxs", "name_offsets")

    def __init__(self, names: list[str], values: Sequence[int], sizes: Sequence[int],
                 types: bytes, shndxs: Sequence[int], name_offsets: Sequence[int]):
        self.names, self.values, self.sizes = names, values, sizes
        self.types, self.shndxs, self.name_offsets = types, shndxs, name_offsets

    def __len__(self) -> int:
        return len(self.names)

    def tuples(self) -> list[tuple[str, int, int, int, int, int]]:
        """(name, value, size, type, section index, name offset) of each symbol."""
        return list(zip(self.names, self.values, self.sizes, self.types, self.shndxs,
                        self.name_offsets))


EMPTY_SYMBOLS = ImageSymbols([], array.array("Q"), array.array("Q"), b"", array.array("H"),
                             array.array("I"))


class Relocation(Record):
    __slots__ = ()
    _fields = ("offset", "symbol", "type")
    offset, symbol, type = items(_fields)

    def __new__(cls, offset: int, symbol: int, type: int):
        return tuple.__new__(cls, (offset, symbol, type))


class SymbolColumns(Record):
    """A symbol table read in bulk: one list (or byte string) per field, in table order."""
    __slots__ = ()
    _fields = ("name_offsets", "infos", "others", "shndxs", "values", "sizes")
    name_offsets, infos, others, shndxs, values, sizes = items(_fields)

    def __new__(cls, name_offsets: list[int], infos: bytes, others: bytes, shndxs: list[int],
                values: list[int], sizes: list[int]):
        return tuple.__new__(cls, (name_offsets, infos, others, shndxs, values, sizes))


class Elf:
    """An ELF file over ``data`` (bytes, an mmap, or a :class:`Bytes` view of a larger
    buffer): its header, section headers (``strict``: a name that cannot be read is an error;
    else empty) and, on demand, program headers and symbol columns."""

    def __init__(self, data, *, path: str | None = None, strict: bool = False):
        # a strict view names the part in its errors, as a BPF loader's log does
        view = data if isinstance(data, Bytes) else Bytes(data, "ELF header" if strict else None)
        self.path = path
        self.strict = strict
        self.buffer = view.data           # the file's bytes (an mmap, for a large image)
        self.base = view.base
        self.file_size = len(view)
        raw = view.data
        if len(raw) < 16 or raw[:4] != b"\x7fELF":
            if len(raw) == 0:
                raise ParseError("empty file, not an ELF file", offset=view.base)
            raise view.error("not an ELF file (no \\x7fELF magic)", 0)
        ei_class, ei_data = raw[4], raw[5]
        self._check_ident(view, ei_class, ei_data)
        self.is64 = ei_class == 2
        self.endian = "<" if ei_data == 1 else ">"
        self.little_endian = ei_data == 1
        self.ptr_size = 8 if self.is64 else 4
        self._file = Bytes(raw, view.section, base=view.base, endian=self.endian)
        (self.e_type, self.machine, _ver, self.entry, self.phoff, self.shoff, _flags,
         self.ehsize, self.phentsize, self.phnum, self.shentsize, self.e_shnum,
         self.e_shstrndx) = self._file.unpack(_EHDR[self.is64], 16, "ELF header")
        self._check_header()
        if strict:
            self._file.section = "section headers"
        self.sections: list[Section] = self._read_sections()
        self._by_name: dict[str, Section] = {}
        for s in self.sections:
            self._by_name.setdefault(s.name, s)

    @classmethod
    def at(cls, outer: Bytes, offset: int, size: int | None = None, **kw):
        """The ELF file that starts ``offset`` bytes into ``outer`` (and runs ``size``
        bytes, default: to the end of ``outer``)."""
        n = len(outer) - offset if size is None else size
        return cls(outer.sub(offset, n, "embedded ELF", "ELF header"), **kw)

    # -- checks a view may tighten --------------------------------------------------------------
    def _check_ident(self, view: Bytes, ei_class: int, ei_data: int) -> None:
        if ei_class not in (1, 2) or ei_data not in (1, 2):
            raise view.error(f"unknown ELF class {ei_class} or byte order {ei_data}", 4)

    def _check_header(self) -> None:
        pass

    # -- section headers --------------------------------------------------------------------------
    def _read_sections(self) -> list[Section]:
        f = self._file
        shoff, entsize, shnum = self.shoff, self.shentsize, self.e_shnum
        if shoff == 0:
            return []
        fmt, want = _SHDR[self.is64]
        if entsize < want:
            raise f.error(f"section header size {entsize}, expected {want}", shoff)
        first = f.unpack(fmt, shoff, "section header 0")
        shnum = shnum or first[5]            # ELF extended numbering for very large files
        shstrndx = first[6] if self.e_shstrndx == SHN_XINDEX else self.e_shstrndx
        if shnum == 0:
            return []
        if shnum > len(f) // want:
            raise f.error(f"{shnum} section headers cannot fit in a {len(f)}-byte file", shoff)
        if entsize == want:
            raw = list(f.iter_unpack(fmt, shoff, shnum, "section headers"))
        else:
            raw = [f.unpack(fmt, shoff + i * entsize, "section header") for i in range(shnum)]
        self.shstrndx = shstrndx
        if 0 < shstrndx < shnum:
            sh = raw[shstrndx]
            shstr = self._bytes_of(".shstrtab", sh[1], sh[4], sh[5])
        elif self.strict:
            raise f.error(f"section name table index {shstrndx} is out of range", 0x3E)
        else:
            shstr = Bytes(b"", ".shstrtab")
        names = string_table(shstr, shnum)
        out: list[Section] = []
        append = out.append
        new = tuple.__new__
        n = len(f)
        check = f.check
        for i, (name_off, typ, flags, addr, off, size, link, info, _al, entsize_) in \
                enumerate(raw):
            if i:
                name = names.get(name_off)
                if name is None:
                    name = self._name(shstr, name_off, f"name of section {i}")
            else:
                name = ""
            append(new(Section, (i, name, typ, flags, off, size, link, info, entsize_, addr)))
            if i and typ != SHT_NOBITS and typ != SHT_NULL and (off < 0 or off + size > n):
                check(off, size, f"section {name or i} data")
        return out

    def _name(self, strs: Bytes, offset: int, what: str) -> str:
        """A string table entry that is no key of the table's index (the tail of another
        name, or out of bounds): strict views raise, lenient ones read what is there."""
        if self.strict:
            return strs.cstr(offset, what)
        raw = strs.data
        if offset <= 0 or offset >= len(raw) or raw[offset] == 0:
            return ""
        end = raw.find(b"\0", offset)
        return bytes(raw[offset:end if end >= 0 else len(raw)]).decode("utf-8", "replace")

    def _bytes_of(self, name: str, typ: int, off: int, size: int) -> Bytes:
        if typ == SHT_NOBITS:
            return Bytes(b"", name, base=self.base + off, endian=self.endian)
        return self._file.sub(off, size, f"section {name} data", name)

    @property
    def extent(self) -> int:
        """How many bytes from the file's start its headers and section contents span (the
        size of an ELF embedded in a larger buffer)."""
        ends = [self.ehsize,
                self.shoff + self.shentsize * len(self.sections) if self.sections else 0,
                self.phoff + self.phentsize * self.phnum if self.phnum else 0]
        ends += [s.offset + s.size for s in self.sections if s.in_file]
        return max(ends)

    # -- lookups ------------------------------------------------------------------------------
    def section(self, name: str) -> Section | None:
        """The first section called ``name``, or None."""
        return self._by_name.get(name)

    def section_at(self, index: int, what: str = "section index") -> Section:
        if not 0 <= index < len(self.sections):
            raise ParseError(f"{what} {index} is out of range ({len(self.sections)} sections)")
        return self.sections[index]

    def data_of(self, sec: Section) -> Bytes:
        """The bytes of ``sec`` as a bounded view (empty for SHT_NOBITS such as .bss)."""
        return self._bytes_of(sec.name, sec.type, sec.offset, sec.size)

    def bytes_at(self, offset: int, size: int, what: str) -> bytes:
        return self._file.raw(offset, size, what)

    # -- program headers ------------------------------------------------------------------------
    def read_segments(self) -> list[Segment]:
        num = self.phnum
        if num == 0:
            return []
        fmt, want = _PHDR[self.is64]
        if self.phentsize < want or num > _MAX_SEGMENTS:
            raise self._file.error(f"program header table: bad entry size {self.phentsize} or "
                                   f"count {num}", self.phoff)
        out = []
        unpack = self._file.unpack
        for i in range(num):
            rec = unpack(fmt, self.phoff + i * self.phentsize, "program header")
            if self.is64:
                typ, flags, offset, vaddr, _pa, filesz, memsz, _al = rec
            else:
                typ, offset, vaddr, _pa, filesz, memsz, flags, _al = rec
            out.append(Segment(typ, flags, offset, vaddr, filesz, memsz))
        return out

    # -- symbols ----------------------------------------------------------------------------------
    def symbol_columns(self, tab: Section) -> tuple[SymbolColumns, Bytes]:
        """The symbols of table ``tab`` in bulk, and its string table: one C-level pass where
        the file's byte order and class are the host's 64-bit one, else one iter_unpack."""
        entsize = _SYM[self.is64]
        if tab.size // entsize > _MAX_SYMBOLS:     # before a byte of it is read
            raise self._file.error(f"{tab.name}: {tab.size // entsize} symbols is more than "
                                   f"any real binary has (at most {_MAX_SYMBOLS})", tab.offset)
        strs = self.data_of(self.section_at(tab.link, "symbol string table index"))
        data = self.data_of(tab)
        count = len(data) // entsize
        raw = data.data[:entsize * count]
        if self.is64 and self.little_endian == (sys.byteorder == "little"):
            # Elf64_Sym columns straight from the bytes: st_name (u32 0 of 6), st_info and
            # st_other (bytes 4, 5 of 24), st_shndx (u16 3 of 12), st_value, st_size (u64 1, 2
            # of 3)
            mv = memoryview(raw)
            raw_b = bytes(raw)
            q = mv.cast("Q")
            return SymbolColumns(mv.cast("I")[0::6].tolist(), raw_b[4::24], raw_b[5::24],
                                 mv.cast("H")[3::12].tolist(), q[1::3].tolist(),
                                 q[2::3].tolist()), strs
        if self.is64:
            recs = list(data.iter_unpack("IBBHQQ", 0, count, tab.name))
            names, infos, others, shndxs, values, sizes = zip(*recs) if recs else ((),) * 6
        else:
            recs = list(data.iter_unpack("IIIBBH", 0, count, tab.name))
            names, values, sizes, infos, others, shndxs = zip(*recs) if recs else ((),) * 6
        return SymbolColumns(list(names), bytes(infos), bytes(others), list(shndxs),
                             list(values), list(sizes)), strs

    def symbol_names(self, strs: Bytes, offsets: list[int]) -> list[str]:
        """The names at ``offsets`` of string table ``strs`` ("" for offset 0)."""
        raw = strs.data
        if not self.strict and raw[:1] == b"\0" and raw[-1:] == b"\0":
            # lenient, and every name ends before the table does: each one cut out where
            # it starts, up to its NUL, in C (the only strings made are the names; a
            # name's bytes that are not UTF-8 read with replacement characters, as _name
            # reads them; an offset past the table gives "")
            ends = map(raw.find, repeat(b"\0"), offsets)
            return list(map(str, map(operator.getitem, repeat(raw), map(slice, offsets, ends)),
                            repeat("utf-8"), repeat("replace")))
        get = string_table(strs, len(offsets)).get
        names = [get(o) if o else "" for o in offsets]
        if None in names:   # a suffix of another name, or out of bounds
            name = self._name
            names = [n if n is not None else name(strs, o, f"name of symbol {i}")
                     for i, (n, o) in enumerate(zip(names, offsets))]
        return names


class ElfFile(Elf):
    """A parsed relocatable BPF ELF file (ELFCLASS64, ET_REL, EM_BPF or EM_NONE).

    >>> elf = ElfFile(open("obj.o", "rb").read())   # doctest: +SKIP
    """

    def __init__(self, data, *, path: str | None = None):
        with decoding("ELF header"):
            super().__init__(data, path=path, strict=True)
        self._view = memoryview(self.buffer)
        self._symbols: list[Symbol] | None = None
        self._symtab: list[Section] | None = None
        self._relocation_sections: list[Section] | None = None

    def _check_ident(self, view: Bytes, ei_class: int, ei_data: int) -> None:
        if ei_class != 2:
            raise view.error(f"not a 64-bit ELF (EI_CLASS {ei_class}); BPF objects are "
                             "ELFCLASS64", 4)
        if ei_data not in (1, 2):
            raise view.error(f"unknown byte order (EI_DATA {ei_data})", 5)

    def _check_header(self) -> None:
        f = self._file
        if self.machine not in (EM_BPF, EM_NONE):
            name = _MACHINES.get(self.machine, f"machine {self.machine}")
            raise f.error(f"not a BPF object: ELF for {name}, expected EM_BPF (247)", 18)
        if self.e_type != ET_REL:
            raise f.error(f"not a relocatable BPF object: e_type is "
                          f"{_TYPES.get(self.e_type, self.e_type)}, expected ET_REL", 16)
        if self.shoff == 0:
            raise f.error("no section headers", 0x28)
        if self.shentsize != 64:
            raise f.error(f"section header size {self.shentsize}, expected 64", 0x3A)

    def data(self, sec: Section) -> Bytes:
        """The bytes of ``sec`` (empty for SHT_NOBITS such as .bss; use ``sec.size``)."""
        return self._bytes_of(sec.name, sec.type, sec.offset, sec.size)

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
            with decoding(".symtab"):
                self._symbols = self._read_symbols()
        return self._symbols

    def _read_symbols(self) -> list[Symbol]:
        tab = self.symtab
        if tab is None:
            return []
        if tab.entsize != 24:
            raise ParseError(f"symbol entry size {tab.entsize}, expected 24",
                             section=tab.name, offset=tab.offset)
        xindex: list[int] | None = None
        for s in self.sections:
            if s.type == SHT_SYMTAB_SHNDX and s.link == tab.index:
                d = self.data(s)
                xindex = [v for (v,) in d.iter_unpack("I", 0, len(d) // 4, "extended indices")]
        cols, strs = self.symbol_columns(tab)
        count = len(cols.name_offsets)
        sym_names = self.symbol_names(strs, cols.name_offsets)
        shndxs = cols.shndxs
        if SHN_XINDEX in shndxs:
            for i, shndx in enumerate(shndxs):
                if shndx == SHN_XINDEX:
                    if xindex is None or i >= len(xindex):
                        raise ParseError(f"symbol {i} uses SHN_XINDEX without an index table",
                                         section=tab.name, offset=tab.offset + 24 * i)
                    shndxs[i] = xindex[i]
        # st_info's binding and type, st_other's visibility: byte tables applied in C
        infos = cols.infos
        return list(map(tuple.__new__, repeat(Symbol), zip(
            range(count), sym_names, cols.values, cols.sizes, infos.translate(_HIGH_NIBBLE),
            infos.translate(_LOW_NIBBLE), cols.others.translate(_LOW_TWO_BITS), shndxs)))

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


class ElfImage(Elf):
    """A linked ELF image (executable, PIE, shared object, vmlinux) over ``data`` (bytes, or
    a read-only mmap for large files): sections with their addresses, segments, symbols and
    address to file-offset translation. Never looks at relocations."""

    def __init__(self, data, *, path: str | None = None):
        with decoding("ELF header"):
            super().__init__(data, path=path, strict=False)
            self.segments = self.read_segments()
        self.data = self.buffer
        self.phdr_range = (self.phoff, self.phoff + self.phentsize * self.phnum) \
            if self.phnum else (0, 0)
        self.shdr_range = (self.shoff, self.shoff + self.shentsize * len(self.sections)) \
            if self.sections else (0, 0)
        self._symbols: dict[bool, list] = {}

    def section_data(self, sec: Section):
        """The section's bytes (a memoryview slice: no copy for large sections)."""
        if not sec.in_file:
            return b""
        return memoryview(self.buffer)[sec.offset:sec.offset + sec.size]

    def addr_to_offset(self, addr: int) -> int | None:
        """The file offset of virtual address ``addr`` (by the loadable segments)."""
        for s in self.segments:
            if s.type == PT_LOAD and s.vaddr <= addr < s.vaddr + s.filesz:
                return s.offset + (addr - s.vaddr)
        for s in self.sections:
            if s.in_file and s.flags & SHF_ALLOC and s.addr <= addr < s.addr + s.size:
                return s.offset + (addr - s.addr)
        return None

    def read_addr(self, addr: int, size: int, what: str) -> bytes:
        off = self.addr_to_offset(addr)
        if off is None:
            raise ParseError(f"{what}: address {addr:#x} is not in the file")
        return self.bytes_at(off, size, what)

    def symbols(self, dynamic: bool = False) -> list[ImageSymbol]:
        """The symbols of .symtab (or .dynsym); [] when the file has none (stripped)."""
        return [ImageSymbol(*t[:5]) for t in self.symbol_tuples(dynamic)]

    def symbol_table(self, dynamic: bool = False) -> Section | None:
        want = SHT_DYNSYM if dynamic else SHT_SYMTAB
        return next((s for s in self.sections if s.type == want), None)

    def symbol_tuples(self, dynamic: bool = False) -> list[tuple[str, int, int, int, int, int]]:
        """(name, value, size, type, section index, name offset) of each symbol of .symtab
        (or .dynsym), in table order: plain tuples (:meth:`image_symbols` holds them as
        columns)."""
        return self.image_symbols(dynamic).tuples()

    def symbol_count(self, dynamic: bool = False) -> int:
        """How many entries .symtab (or .dynsym) has (0: no table), without reading it."""
        sec = self.symbol_table(dynamic)
        if sec is None or not 0 < sec.link < len(self.sections) or not sec.in_file:
            return 0
        return sec.size // _SYM[self.is64]

    def image_symbols(self, dynamic: bool = False) -> ImageSymbols:
        """The symbols of .symtab (or .dynsym) as columns, in table order; none when the
        file has no such table. Read once per table (shared: do not change them)."""
        got = self._symbols.get(dynamic)
        if got is None:
            with decoding(".dynsym" if dynamic else ".symtab"):
                got = self._symbols[dynamic] = self._read_image_symbols(dynamic)
        return got

    def rela_offsets(self, sec: Section) -> list[int]:
        """The places (r_offset) a 64-bit image's SHT_RELA section relocates, sorted; [] for
        anything else (32-bit, SHT_REL, an odd entry size, not in the file). Read as one
        column of the table: a PIE has 10^5 dynamic relocations."""
        if not self.is64 or sec.type != SHT_RELA or sec.entsize not in (0, 24) \
                or not sec.in_file:
            return []
        raw = self.buffer[sec.offset:sec.offset + sec.size - sec.size % 24]
        if self.little_endian == (sys.byteorder == "little"):
            return sorted(memoryview(raw).cast("Q")[0::3].tolist())
        import struct
        return sorted(o for (o,) in struct.iter_unpack(self.endian + "Q16x", raw))

    def forget_symbols(self) -> None:
        """Drop the symbols read so far (their memory), once the caller is done with them."""
        self._symbols.clear()

    def _read_image_symbols(self, dynamic: bool) -> ImageSymbols:
        sec = self.symbol_table(dynamic)
        if sec is None or not 0 < sec.link < len(self.sections):
            return EMPTY_SYMBOLS
        entsize = _SYM[self.is64]
        if self.is64 and self.little_endian == (sys.byteorder == "little") and \
                sec.size // entsize <= _MAX_SYMBOLS:
            # Elf64_Sym columns straight from the bytes into arrays: st_name (u32 0 of 6),
            # st_info (byte 4 of 24), st_shndx (u16 3 of 12), st_value, st_size (u64 1, 2 of 3)
            strs = self.data_of(self.section_at(sec.link, "symbol string table index"))
            data = self.data_of(sec)
            raw = data.data[:entsize * (len(data) // entsize)]
            with memoryview(raw) as mv, mv.cast("I") as w, mv.cast("H") as h, \
                    mv.cast("Q") as q:
                offs = array.array("I", w[0::6].tobytes())
                shndxs = array.array("H", h[3::12].tobytes())
                values = array.array("Q", q[1::3].tobytes())
                sizes = array.array("Q", q[2::3].tobytes())
                infos = bytes(mv[4::24])
            del raw
            return ImageSymbols(self.symbol_names(strs, offs), values, sizes,
                                infos.translate(_LOW_NIBBLE), shndxs, offs)
        cols, strs = self.symbol_columns(sec)
        names = self.symbol_names(strs, cols.name_offsets)
        return ImageSymbols(names, array.array("Q", cols.values), array.array("Q", cols.sizes),
                            cols.infos.translate(_LOW_NIBBLE), array.array("H", cols.shndxs),
                            array.array("I", cols.name_offsets))

    def symbol_values(self, wanted: tuple[str, ...], dynamic: bool = False
                      ) -> list[tuple[str, int]]:
        """(name, value) of each symbol of .symtab (or .dynsym) named one of ``wanted``, in
        table order, found by the names' bytes in the string table: no other name is
        read."""
        sec = self.symbol_table(dynamic)
        if sec is None or not 0 < sec.link < len(self.sections):
            return []
        entsize = _SYM[self.is64]
        count = sec.size // entsize
        if count > _MAX_SYMBOLS:
            raise self._file.error(f"{sec.name}: {count} symbols is more than any real "
                                   f"binary has (at most {_MAX_SYMBOLS})", sec.offset)
        strs = self.data_of(self.section_at(sec.link, "symbol string table index")).data
        at: dict[int, str] = {}          # string table offset -> the name there
        for name in wanted:
            needle = name.encode() + b"\0"
            p = strs.find(needle, 1)
            while p >= 0:
                at[p] = name
                p = strs.find(needle, p + 1)
        if not at:
            return []
        data = self.data_of(sec)
        if self.little_endian == (sys.byteorder == "little"):
            with memoryview(data.data[:entsize * count]) as mv, mv.cast("I") as w:
                offs = w[0::entsize // 4].tolist()          # st_name, the first field
        else:
            offs = [o for (o,) in data.iter_unpack(f"I{entsize - 4}x", 0, count, sec.name)]
        found = sorted(k for p in at for k in _indices(offs, p))
        value = "Q" if self.is64 else "I"
        out = []
        for k in found:
            v = data.unpack(("8x" if self.is64 else "4x") + value, k * entsize,
                            "symbol value")[0]
            out.append((at[offs[k]], v))
        return out


def _indices(values: list, value) -> list[int]:
    """Every index of ``value`` in ``values``."""
    out = []
    k = -1
    while True:
        try:
            k = values.index(value, k + 1)
        except ValueError:
            return out
        out.append(k)


def parse_image(data, *, path: str | None = None) -> ElfImage:
    """The ELF image in ``data``; ParseError (naming ``path``) for anything else."""
    try:
        return ElfImage(data, path=path)
    except ParseError as e:
        raise e.with_path(path) if path else e


def string_table(strs: Bytes, lookups: int) -> dict[int, str]:
    """Every NUL-terminated string of an ELF string table by the offset it starts at, in
    one pass (``split`` in C); names that point into the middle of another (suffix sharing)
    are not keys: look those up with ``strs.cstr``. A last string without its NUL is left
    out, so ``cstr`` reports it. A table with far more strings than the ``lookups`` to come
    (a mangled header pointing at some other section) gets no index, so the work stays bounded
    by the lookups, not by the table."""
    raw = strs.data
    if not isinstance(raw, bytes):
        raw = bytes(raw)
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
