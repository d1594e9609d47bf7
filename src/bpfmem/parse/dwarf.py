"""Just enough DWARF to say which compile unit owns which bytes of the debug sections: the
units of ``.debug_info`` (with their name: a Go package's import path, a C source file) and
their line programs in ``.debug_line``. DWARF 2 to 5, either byte order, sections compressed
(SHF_COMPRESSED, zlib) or not. Pure: it takes section bytes, or an
:class:`~bpfmem.parse.elf.ElfImage` already read (:func:`read_compile_units`,
:func:`read_debug_section`).
"""

from __future__ import annotations

import struct
import zlib
from ..values import dataclass

from ..errors import ParseError
from .elf import SHF_COMPRESSED, ElfImage, Section
from .reader import decoding

_MAX_UNITS = 1 << 20


@dataclass(frozen=True, slots=True)
class CompileUnit:
    offset: int          # in the (uncompressed) .debug_info
    size: int            # its bytes, header included
    name: str
    stmt_list: int | None
    low_pc: int | None
    high_pc: int | None = None     # one past the end, when the unit says (not by ranges)


@dataclass(frozen=True, slots=True)
class DebugSection:
    """A debug section's units as DWARF lays them out, and its uncompressed size.
    ``kind``: ``info`` (its units are the compile units, :func:`read_compile_units`; ``units``
    is empty), ``line`` (``units``: (offset, size) of each line program, the offset a compile
    unit's ``stmt_list`` names) or ``frame`` (``units``: (address, size) of each FDE, the
    address of the code it describes)."""
    kind: str
    units: tuple[tuple[int, int], ...]
    size: int


def read_compile_units(img: ElfImage) -> list[CompileUnit] | None:
    """The DWARF compile units of ``img``, or None without .debug_info (or .debug_abbrev)."""
    info_sec = img.section(".debug_info") or img.section(".zdebug_info")
    abbrev_sec = img.section(".debug_abbrev") or img.section(".zdebug_abbrev")
    if info_sec is None or abbrev_sec is None or not info_sec.in_file:
        return None
    strs = img.section(".debug_str")
    lstr = img.section(".debug_line_str")
    return compile_units(
        section_contents(img, info_sec), section_contents(img, abbrev_sec),
        endian=img.endian,
        strs=section_contents(img, strs) if strs else b"",
        line_strs=section_contents(img, lstr) if lstr else b"")


_UNIT_KINDS = {".debug_info": "info", ".debug_line": "line", ".debug_frame": "frame"}


def read_debug_section(img: ElfImage, sec: Section) -> DebugSection | None:
    """The units of ``sec`` (.debug_info, .debug_line, .debug_frame or their .zdebug_
    forms); None for any other section."""
    kind = _UNIT_KINDS.get(sec.name.replace(".zdebug", ".debug"))
    if kind is None:
        return None
    data = section_contents(img, sec)
    if kind == "frame":
        units = tuple((loc, size) for _off, size, loc
                      in frame_entries(data, endian=img.endian, addr_size=img.ptr_size))
    elif kind == "line":
        units = tuple(line_units(data, endian=img.endian))
    else:
        units = ()
    return DebugSection(kind, units, len(data))


def section_contents(img: ElfImage, sec: Section) -> bytes:
    """The section's bytes, decompressed when the ELF header says it is (zlib only)."""
    raw = bytes(img.section_data(sec))
    if sec.flags & SHF_COMPRESSED:
        fmt = img.endian + ("IIQQ" if img.is64 else "III")
        hs = struct.calcsize(fmt)
        if len(raw) < hs:
            raise ParseError(f"{sec.name}: compression header cut short", section=sec.name)
        ch_type, *rest = struct.unpack_from(fmt, raw)
        size = rest[1] if img.is64 else rest[0]
        if ch_type != 1:
            raise ParseError(f"{sec.name}: compression type {ch_type} (only zlib is known)",
                             section=sec.name)
        return _inflate(raw[hs:], size, sec.name)
    if sec.name.startswith(".zdebug") and raw[:4] == b"ZLIB" and len(raw) >= 12:
        return _inflate(raw[12:], struct.unpack_from(">Q", raw, 4)[0], sec.name)
    return raw


def _inflate(data: bytes, size: int, name: str) -> bytes:
    if size > 1 << 31:
        raise ParseError(f"{name}: claims {size} bytes uncompressed", section=name)
    try:
        d = zlib.decompressobj()
        out = d.decompress(data, size)
    except zlib.error as e:
        raise ParseError(f"{name}: not valid zlib data ({e})", section=name) from None
    return out


def _uleb(b: bytes, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if pos >= len(b):
            raise ParseError("DWARF: a LEB128 number runs past the end", section=".debug_info")
        c = b[pos]
        pos += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return n, pos


def _abbrevs(abbrev: bytes, off: int) -> dict[int, list[tuple[int, int]]]:
    """code -> [(attribute, form)] of the abbreviation table at ``off``."""
    out: dict[int, list[tuple[int, int]]] = {}
    pos = off
    while pos < len(abbrev):
        code, pos = _uleb(abbrev, pos)
        if code == 0:
            break
        _tag, pos = _uleb(abbrev, pos)
        pos += 1                                   # has children
        attrs = []
        while True:
            a, pos = _uleb(abbrev, pos)
            f, pos = _uleb(abbrev, pos)
            if f == 0x21:                          # implicit_const: a value in the table
                _v, pos = _uleb(abbrev, pos)
            if a == 0 and f == 0:
                break
            attrs.append((a, f))
        out[code] = attrs
    return out


_FIXED = {0x0b: 1, 0x05: 2, 0x06: 4, 0x07: 8, 0x0c: 1, 0x11: 1, 0x12: 2, 0x13: 4, 0x14: 8,
          0x19: 0, 0x1c: 4, 0x1e: 16, 0x20: 8, 0x21: 0, 0x25: 1, 0x26: 2, 0x27: 3, 0x28: 4,
          0x29: 1, 0x2a: 2, 0x2b: 3, 0x2c: 4}
_ULEB = {0x0d, 0x0f, 0x15, 0x1a, 0x1b, 0x22, 0x23}


def compile_units(info: bytes, abbrev: bytes, *, endian: str = "<", strs: bytes = b"",
                  line_strs: bytes = b"") -> list[CompileUnit]:
    """The compile units of ``.debug_info`` with their name, stmt_list and low_pc."""
    out = []
    pos = 0
    tables: dict[int, dict] = {}
    while pos + 11 <= len(info) and len(out) < _MAX_UNITS:
        start = pos
        length = struct.unpack_from(endian + "I", info, pos)[0]
        off_size, hdr = 4, 4
        if length == 0xFFFFFFFF:
            length = struct.unpack_from(endian + "Q", info, pos + 4)[0]
            off_size, hdr = 8, 12
        end = start + hdr + length
        if length == 0 or end > len(info):
            raise ParseError(f".debug_info: a unit of {length} bytes runs past the section",
                             section=".debug_info", offset=start)
        p = start + hdr
        version = struct.unpack_from(endian + "H", info, p)[0]
        p += 2
        if version >= 5:
            p += 1                                  # unit_type
            addr_size = info[p]
            p += 1
            ab_off = struct.unpack_from(endian + ("Q" if off_size == 8 else "I"), info, p)[0]
            p += off_size
        elif 2 <= version <= 4:
            ab_off = struct.unpack_from(endian + ("Q" if off_size == 8 else "I"), info, p)[0]
            p += off_size
            addr_size = info[p]
            p += 1
        else:
            raise ParseError(f".debug_info: DWARF version {version}", section=".debug_info",
                             offset=start)
        name, stmt, low, high, high_is_len = "", None, None, None, False
        with decoding(".debug_info", ".debug_info: a compile unit's first entry is cut short",
                      start):
            if ab_off not in tables:
                tables[ab_off] = _abbrevs(abbrev, ab_off)
            code, p = _uleb(info, p)
            for attr, form in tables[ab_off].get(code, ()):
                val, p = _form(info, p, form, endian, addr_size, off_size, version, strs,
                               line_strs)
                if attr == 0x03:
                    name = val if isinstance(val, str) else name
                elif attr == 0x10 and isinstance(val, int):
                    stmt = val
                elif attr == 0x11 and isinstance(val, int):
                    low = val
                elif attr == 0x12 and isinstance(val, int):
                    high, high_is_len = val, form != 0x01
        if high is not None and high_is_len:
            high = low + high if low is not None else None
        out.append(CompileUnit(start, end - start, name, stmt, low, high))
        pos = end
    return out


def _form(b: bytes, p: int, form: int, e: str, addr_size: int, off_size: int, version: int,
          strs: bytes, line_strs: bytes):
    if form == 0x08:                               # string
        end = b.index(b"\0", p)
        return b[p:end].decode("utf-8", "replace"), end + 1
    if form in (0x0e, 0x1f, 0x17, 0x1d) or (form == 0x10 and version >= 3):
        fmt = "Q" if off_size == 8 else "I"
        v = struct.unpack_from(e + fmt, b, p)[0]
        p += off_size
        if form in (0x0e, 0x1f):
            table = strs if form == 0x0e else line_strs
            end = table.find(b"\0", v) if v < len(table) else -1
            return (table[v:end].decode("utf-8", "replace") if end >= 0 else ""), p
        return v, p
    if form == 0x01 or form == 0x10:
        fmt = {8: "Q", 4: "I", 2: "H", 1: "B"}.get(addr_size)
        if fmt is None:
            raise ParseError(f".debug_info: address size {addr_size}", section=".debug_info")
        return struct.unpack_from(e + fmt, b, p)[0], p + addr_size
    if form in _FIXED:
        n = _FIXED[form]
        if n in (1, 2, 4, 8):
            return struct.unpack_from(e + {1: "B", 2: "H", 4: "I", 8: "Q"}[n], b, p)[0], p + n
        return None, p + n
    if form in _ULEB:
        return _uleb(b, p)
    if form in (0x09, 0x18):                       # block, exprloc
        n, p = _uleb(b, p)
        return None, p + n
    if form in (0x0a, 0x03, 0x04):                 # block1/2/4
        w = {0x0a: "B", 0x03: "H", 0x04: "I"}[form]
        n = struct.unpack_from(e + w, b, p)[0]
        return None, p + struct.calcsize(w) + n
    raise ParseError(f".debug_info: unknown attribute form {form:#x}", section=".debug_info")


def line_units(line: bytes, *, endian: str = "<") -> list[tuple[int, int]]:
    """(offset, size) of each line program in ``.debug_line``."""
    out = []
    pos = 0
    while pos + 4 <= len(line) and len(out) < _MAX_UNITS:
        length = struct.unpack_from(endian + "I", line, pos)[0]
        hdr = 4
        if length == 0xFFFFFFFF:
            if pos + 12 > len(line):
                break
            length = struct.unpack_from(endian + "Q", line, pos + 4)[0]
            hdr = 12
        end = pos + hdr + length
        if length == 0 or end > len(line):
            raise ParseError(f".debug_line: a program of {length} bytes runs past the section",
                             section=".debug_line", offset=pos)
        out.append((pos, end - pos))
        pos = end
    return out


def frame_entries(frame: bytes, *, endian: str = "<",
                  addr_size: int = 8) -> list[tuple[int, int, int]]:
    """(offset, size, initial location) of each FDE of ``.debug_frame`` (CIEs are left
    out: they are shared)."""
    out = []
    pos = 0
    a = "Q" if addr_size == 8 else "I"
    while pos + 8 <= len(frame) and len(out) < (1 << 22):
        length = struct.unpack_from(endian + "I", frame, pos)[0]
        if length == 0xFFFFFFFF:
            break                                   # 64-bit DWARF frames: not needed here
        if length == 0:             # a zero terminator (gcc's crtend, host objects of a
            pos += 4                # cgo link): the next unit may follow
            continue
        end = pos + 4 + length
        if end > len(frame):
            raise ParseError(f".debug_frame: an entry of {length} bytes runs past the section",
                             section=".debug_frame", offset=pos)
        cie = struct.unpack_from(endian + "I", frame, pos + 4)[0]
        if cie != 0xFFFFFFFF and pos + 8 + addr_size <= end:
            out.append((pos, end - pos, struct.unpack_from(endian + a, frame, pos + 8)[0]))
        pos = end
    return out
