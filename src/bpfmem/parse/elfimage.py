"""ELF reader for linked images (executables, PIE, shared objects): what ``bpfmem size`` needs.

Sections with their addresses, program headers (segments), the symbol tables and address to
file-offset translation. 32- and 64-bit, either byte order. Every read is bounds-checked and
raises :class:`ParseError`; nothing here attributes bytes (that is ``analysis/size.py``).
The BPF-object reader is ``parse/elf.py``; this one never looks at relocations.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Sequence

from ..errors import ParseError

SHT_NOBITS = 8
SHT_SYMTAB = 2
SHT_DYNSYM = 11
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4
SHF_TLS = 0x400
SHF_COMPRESSED = 0x800
PT_LOAD = 1
STT_OBJECT, STT_FUNC, STT_SECTION, STT_FILE, STT_TLS = 1, 2, 3, 4, 6
SHN_UNDEF, SHN_LORESERVE = 0, 0xFF00
EM_BPF = 247

#: the most sections/symbols/segments a file may declare (a corrupt count must not hang us)
_MAX_SECTIONS = 1 << 16
_MAX_SYMBOLS = 1 << 24


@dataclass(frozen=True, slots=True)
class ImageSection:
    index: int
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    entsize: int
    link: int

    @property
    def in_file(self) -> bool:
        """Whether the section has bytes in the file (.bss and .tbss do not)."""
        return self.type != SHT_NOBITS and self.type != 0

    @property
    def in_memory(self) -> bool:
        """Whether the loader maps it (SHF_ALLOC); .tbss is per thread, not in the image."""
        return bool(self.flags & SHF_ALLOC) and not (
            self.flags & SHF_TLS and self.type == SHT_NOBITS)

    @property
    def file_size(self) -> int:
        return self.size if self.in_file else 0


@dataclass(frozen=True, slots=True)
class Segment:
    type: int
    flags: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int


@dataclass(frozen=True, slots=True)
class ImageSymbol:
    name: str
    value: int
    size: int
    type: int
    section: int     # section index (st_shndx)


class ElfImage:
    """A parsed ELF image over ``data`` (bytes, or a read-only mmap for large files)."""

    def __init__(self, data, *, path: str | None = None):
        self.data = data
        self.path = path
        self.file_size = len(data)
        if len(data) < 16 or data[:4] != b"\x7fELF":
            raise ParseError("not an ELF file (no \\x7fELF magic)", offset=0)
        ei_class, ei_data = data[4], data[5]
        if ei_class not in (1, 2) or ei_data not in (1, 2):
            raise ParseError(f"unknown ELF class {ei_class} or byte order {ei_data}", offset=4)
        self.is64 = ei_class == 2
        self.endian = "<" if ei_data == 1 else ">"
        e = self.endian
        if self.is64:
            hdr = self._unpack(e + "HHIQQQIHHHHHH", 16, "ELF header")
        else:
            hdr = self._unpack(e + "HHIIIIIHHHHHH", 16, "ELF header")
        (self.e_type, self.machine, _ver, self.entry, phoff, shoff, _flags, self.ehsize,
         phentsize, phnum, shentsize, shnum, shstrndx) = hdr
        self.ptr_size = 8 if self.is64 else 4
        self.segments = self._read_segments(phoff, phentsize, phnum)
        self.phdr_range = (phoff, phoff + phentsize * phnum) if phnum else (0, 0)
        self.sections = self._read_sections(shoff, shentsize, shnum, shstrndx)
        self.shdr_range = (shoff, shoff + shentsize * len(self.sections)) \
            if self.sections else (0, 0)
        self._symbols: dict[bool, list] = {}
        self._by_name = {}
        for s in self.sections:
            self._by_name.setdefault(s.name, s)

    # --- raw reads ----------------------------------------------------------------------------

    def _unpack(self, fmt: str, offset: int, what: str) -> tuple:
        st = struct.Struct(fmt)
        if offset < 0 or offset + st.size > len(self.data):
            raise ParseError(f"{what}: {st.size} bytes at {offset:#x} run past the end of the "
                             f"file ({len(self.data):#x} bytes)", offset=max(offset, 0))
        return st.unpack_from(self.data, offset)

    def bytes_at(self, offset: int, size: int, what: str) -> bytes:
        if offset < 0 or size < 0 or offset + size > len(self.data):
            raise ParseError(f"{what}: {size} bytes at {offset:#x} run past the end of the "
                             f"file ({len(self.data):#x} bytes)", offset=max(offset, 0))
        return bytes(self.data[offset:offset + size])

    def _read_segments(self, phoff: int, entsize: int, num: int) -> list[Segment]:
        if num == 0:
            return []
        want = 56 if self.is64 else 32
        if entsize < want or num > _MAX_SECTIONS:
            raise ParseError(f"program header table: bad entry size {entsize} or count {num}",
                             offset=phoff)
        out = []
        for i in range(num):
            off = phoff + i * entsize
            if self.is64:
                typ, flags, offset, vaddr, _pa, filesz, memsz, _al = self._unpack(
                    self.endian + "IIQQQQQQ", off, "program header")
            else:
                typ, offset, vaddr, _pa, filesz, memsz, flags, _al = self._unpack(
                    self.endian + "IIIIIIII", off, "program header")
            out.append(Segment(typ, flags, offset, vaddr, filesz, memsz))
        return out

    def _read_sections(self, shoff: int, entsize: int, num: int,
                       shstrndx: int) -> list[ImageSection]:
        if shoff == 0 or num == 0:
            return []
        want = 64 if self.is64 else 40
        if entsize < want or num > _MAX_SECTIONS:
            raise ParseError(f"section header table: bad entry size {entsize} or count {num}",
                             offset=shoff)
        fmt = self.endian + ("IIQQQQIIQQ" if self.is64 else "IIIIIIIIII")
        raw = [self._unpack(fmt, shoff + i * entsize, "section header") for i in range(num)]
        names = b""
        if 0 < shstrndx < num:
            _n, typ, _f, _a, off, size, *_ = raw[shstrndx]
            if typ != SHT_NOBITS:
                names = self.bytes_at(off, size, "section name table")
        out = []
        for i, (name_off, typ, flags, addr, off, size, link, _info, _al, entsize_) \
                in enumerate(raw):
            if typ not in (SHT_NOBITS, 0) and (off + size > len(self.data)):
                raise ParseError(f"section {i}: {size} bytes at {off:#x} run past the end of "
                                 f"the file ({len(self.data):#x} bytes)", offset=off)
            end = names.find(b"\0", name_off) if name_off < len(names) else -1
            name = names[name_off:end].decode("utf-8", "replace") if end >= 0 else ""
            out.append(ImageSection(i, name, typ, flags, addr, off, size, entsize_, link))
        return out

    # --- lookups ------------------------------------------------------------------------------

    def section(self, name: str) -> ImageSection | None:
        return self._by_name.get(name)

    def section_data(self, sec: ImageSection):
        """The section's bytes (a memoryview slice: no copy for large sections)."""
        if not sec.in_file:
            return b""
        return memoryview(self.data)[sec.offset:sec.offset + sec.size]

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

    def symbol_table(self, dynamic: bool = False) -> ImageSection | None:
        want = SHT_DYNSYM if dynamic else SHT_SYMTAB
        return next((s for s in self.sections if s.type == want), None)

    def symbol_tuples(self, dynamic: bool = False) -> list[tuple[str, int, int, int, int, int]]:
        """(name, value, size, type, section index, name offset) of each symbol of .symtab
        (or .dynsym), in table order: plain tuples, as a large binary has 10^5 of them.
        Read once per table (the list is shared: do not change it)."""
        got = self._symbols.get(dynamic)
        if got is None:
            got = self._symbols[dynamic] = self._read_symbol_tuples(dynamic)
        return got

    def forget_symbols(self) -> None:
        """Drop the symbols read so far (their memory), once the caller is done with them."""
        self._symbols.clear()

    def _read_symbol_tuples(self, dynamic: bool) -> list[tuple[str, int, int, int, int, int]]:
        want = SHT_DYNSYM if dynamic else SHT_SYMTAB
        sec = next((s for s in self.sections if s.type == want), None)
        if sec is None or not 0 < sec.link < len(self.sections):
            return []
        strings = bytes(self.section_data(self.sections[sec.link]))
        data = self.section_data(sec)
        if self.is64:
            fmt, size = self.endian + "IBBHQQ", 24
        else:
            fmt, size = self.endian + "IIIBBH", 16
        count = len(data) // size
        if count > _MAX_SYMBOLS:
            raise ParseError(f"{sec.name}: {count} symbols is more than any real binary has")
        # the string table is NUL-separated names: split it once, then look names up
        at: dict[int, str] = {}
        pos = 0
        for nm in strings.split(b"\0"):
            if nm:
                at[pos] = nm.decode("utf-8", "replace")
            pos += len(nm) + 1
        find = strings.find
        out = []
        add = out.append
        is64 = self.is64
        for rec in struct.iter_unpack(fmt, data[:count * size]):
            if is64:
                name_off, info, _other, shndx, value, sz = rec
            else:
                name_off, value, sz, info, _other, shndx = rec
            name = at.get(name_off)
            if name is None:
                if name_off == 0 or name_off >= len(strings) or strings[name_off] == 0:
                    name = ""
                else:       # a name that is the tail of another (the linker may share them)
                    end = find(b"\0", name_off)
                    name = strings[name_off:end if end >= 0 else len(strings)].decode(
                        "utf-8", "replace")
            add((name, value, sz, info & 0xF, shndx, name_off))
        return out


def parse_image(data, *, path: str | None = None) -> ElfImage:
    """The ELF image in ``data``; ParseError (naming ``path``) for anything else."""
    try:
        return ElfImage(data, path=path)
    except ParseError as e:
        raise e.with_path(path) if path else e


def section_at_addr(sections: Sequence[ImageSection], addr: int) -> ImageSection | None:
    for s in sections:
        if s.flags & SHF_ALLOC and s.addr <= addr < s.addr + s.size:
            return s
    return None
