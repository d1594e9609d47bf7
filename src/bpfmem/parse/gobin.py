"""Go's own tables inside a Go binary: the pclntab (functions and their sizes) and the build
info (Go version, main module, dependencies). Pure: both take bytes (or an ElfImage over them).

pclntab layouts by header magic (``runtime/symtab.go``, ``cmd/link/internal/ld/pcln.go``):

  0xfffffffb  Go 1.2-1.15   one table: header, functab of (entry, funcoff) uintptr pairs
  0xfffffffa  Go 1.16-1.17  header with offsets to funcnametab, cutab, filetab, pctab, pclntab
  0xfffffff0  Go 1.18-1.19  + textStart; functab of (entryoff, funcoff) uint32 pairs
  0xfffffff1  Go 1.20-      _func gains startLine; textStart no longer filled in (0)

The table is found by its section (``.gopclntab``) or, when the section headers are gone or
the linker put it elsewhere (PIE builds: inside ``.data.rel.ro``), by scanning for a header
that validates.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

from ..errors import ParseError, UnsupportedError
from .elf import ElfImage
from .gosym import C_CODE, RUNTIME_DATA, TYPES, UNNAMED, package_of  # noqa: F401
from .reader import Bytes

MAGICS = {0xFFFFFFFB: "1.2", 0xFFFFFFFA: "1.16", 0xFFFFFFF0: "1.18", 0xFFFFFFF1: "1.20"}
#: the fixed part of a _func record, after its leading entry field, per layout
_FUNC_FIXED = {"1.16": 36, "1.18": 36, "1.20": 40}
#: a pclntab header's first six bytes, either byte order: magic, then two zero pad bytes
_HEADER_RE = re.compile(rb"[\xf0\xf1\xfa\xfb]\xff\xff\xff\x00\x00|"
                        rb"\xff\xff\xff[\xf0\xf1\xfa\xfb]\x00\x00")
_MAX_FUNCS = 1 << 22


@dataclass(frozen=True, slots=True)
class PclnPart:
    """One of the pclntab's own tables: ``name`` at ``offset`` (from the header), ``size``."""
    name: str
    offset: int
    size: int


@dataclass(frozen=True)
class Pclntab:
    """The functions of a Go binary as the runtime's table lists them.

    ``entries[i]`` is function i's first address, ``ends[i]`` where the next one starts (so
    sizes include the alignment padding after a function: every text byte belongs to one);
    ``records[i]`` is (offset, size) of its ``_func`` record in the table, or None.
    """
    layout: str                # "1.2", "1.16", "1.18", "1.20": the first Go release of it
    magic: int
    offset: int                # file offset of the header
    addr: int                  # its virtual address (0 when unknown)
    size: int                  # bytes of the whole table
    ptr_size: int
    found_by: str              # "section .gopclntab" or "scan of <section>"
    names: tuple[str, ...]
    entries: tuple[int, ...]
    ends: tuple[int, ...]
    name_spans: tuple[tuple[int, int], ...]   # (offset from header, length incl. NUL)
    records: tuple[tuple[int, int] | None, ...]
    parts: tuple[PclnPart, ...]
    pc_bytes: tuple[int, ...] = ()   # per function: its pc-value tables in pctab
    # per function: its funcdata (stack maps, ...) when the linker put that inside the table
    # (Go 1.26+: moduledata.gofunc points past the _func records), else ()
    fd_bytes: tuple[int, ...] = ()
    #: otherwise (Go 1.18-1.25: funcdata in go:func.*, outside the table) each function's
    #: funcdata offsets from moduledata.gofunc, as offset << 22 | function index
    fd_refs: tuple[int, ...] = ()

    @property
    def nfunc(self) -> int:
        return len(self.names)


@dataclass(frozen=True, slots=True)
class Module:
    path: str
    version: str
    sum: str = ""
    replace: "Module | None" = None


@dataclass(frozen=True)
class BuildInfo:
    go_version: str | None             # None: a pre-1.18 blob read without its ELF
    path: str                          # the main package's import path
    main: Module | None
    deps: tuple[Module, ...]
    settings: tuple[tuple[str, str], ...]
    offset: int                        # file offset of the build info blob
    size: int


# --- pclntab ----------------------------------------------------------------------------------

def _header_ok(data, off: int) -> str | None:
    """The layout of a pclntab header at ``off`` in ``data``, or None if it is not one."""
    if off + 8 > len(data) or data[off + 4] != 0 or data[off + 5] != 0:
        return None
    if data[off + 6] not in (1, 2, 4) or data[off + 7] not in (4, 8):
        return None
    for endian in ("<", ">"):
        layout = MAGICS.get(struct.unpack_from(endian + "I", data, off)[0])
        if layout:
            return layout
    return None


def _endian_of(data, off: int) -> str:
    return "<" if struct.unpack_from("<I", data, off)[0] in MAGICS else ">"


def find_pclntab(img: ElfImage) -> tuple[int, int | None, int, str]:
    """(file offset, size or None, address, how it was found) of the pclntab."""
    sec = img.section(".gopclntab") or next(
        (s for s in img.sections if s.name.endswith(".gopclntab") and s.size), None)
    if sec is not None and sec.in_file and sec.size >= 8:
        if _header_ok(img.data, sec.offset) is None:
            if not any(img.data[sec.offset:sec.offset + 16]):
                raise ParseError(f"{sec.name} is zeroed: its table was removed or "
                                 "overwritten", section=sec.name, offset=sec.offset)
            magic = struct.unpack_from(img.endian + "I", img.data, sec.offset)[0]
            raise UnsupportedError(f".gopclntab has an unknown header (magic {magic:#010x}): "
                                   "not a Go 1.2+ pclntab, or a newer layout than bpfmem knows")
        return sec.offset, sec.size, sec.addr, f"section {sec.name}"
    # the runtime's own pointer to it, when a symbol table names runtime.firstmoduledata
    # (its first word) or runtime.pcheader
    found = _by_symbol(img)
    if found is not None:
        return found
    # external linking puts it inside .data.rel.ro (PIE) or .rodata; no sections: the file
    places = [s for s in img.sections
              if s.name.startswith((".data.rel.ro", ".rodata")) and s.in_file]
    ranges = [(s.offset, s.offset + s.size, s.name, s.addr) for s in places]
    if not ranges:
        ranges = [(0, img.file_size, "the file", 0)]
    data = img.data
    for start, end, name, addr in ranges:
        for m in _HEADER_RE.finditer(data, start, end):
            pos = m.start()
            if pos % 4 == 0 and _header_ok(data, pos) and _plausible(data, pos, end):
                a = addr + (pos - start) if addr else 0
                return pos, None, a, f"scan of {name}"
    raise ParseError("no Go pclntab found (not a Go binary, or its tables were removed)")


def _by_symbol(img: ElfImage) -> tuple[int, int | None, int, str] | None:
    for dynamic in (False, True):
        try:
            syms = img.symbol_tuples(dynamic)
        except ParseError:
            return None
        for name, value, *_ in syms:
            if name == "runtime.pcheader":
                addr = value
            elif name == "runtime.firstmoduledata":
                off = img.addr_to_offset(value)
                if off is None or off + img.ptr_size > img.file_size:
                    continue
                addr = struct.unpack_from(img.endian + ("Q" if img.is64 else "I"),
                                          img.data, off)[0]
            else:
                continue
            pos = img.addr_to_offset(addr)
            if pos is not None and _header_ok(img.data, pos) and _plausible(
                    img.data, pos, img.file_size):
                return pos, None, addr, f"symbol {name}"
    return None


def _plausible(data, off: int, limit: int) -> bool:
    layout = _header_ok(data, off)
    e = _endian_of(data, off)
    ptr = data[off + 7]
    w = "Q" if ptr == 8 else "I"
    if layout == "1.2":
        nfunc = struct.unpack_from(e + w, data, off + 8)[0]
        return 0 < nfunc < _MAX_FUNCS and off + 8 + ptr + nfunc * 2 * ptr < limit
    n = 8 if layout != "1.16" else 7
    if off + 8 + n * ptr > limit:
        return False
    words = struct.unpack_from(e + w * n, data, off + 8)
    nfunc, offsets = words[0], words[-5:]
    if not 0 < nfunc < _MAX_FUNCS:
        return False
    return all(8 + n * ptr <= o < limit - off for o in offsets) and \
        list(offsets) == sorted(offsets)


def parse_pclntab(img: ElfImage) -> Pclntab:
    """The pclntab of the Go binary ``img``: ParseError if it has none or it is corrupt,
    UnsupportedError for a header of a layout bpfmem does not know."""
    off, size, addr, how = find_pclntab(img)
    data = img.data
    layout = _header_ok(data, off)
    e = _endian_of(data, off)
    magic = struct.unpack_from(e + "I", data, off)[0]
    ptr = data[off + 7]
    w = "Q" if ptr == 8 else "I"
    limit = size if size is not None else img.file_size - off
    where = ".gopclntab"

    def unpack(fmt: str, rel: int, what: str) -> tuple:
        st = struct.Struct(e + fmt)
        if rel < 0 or rel + st.size > limit:
            raise ParseError(f"pclntab {what}: {st.size} bytes at {rel:#x} run past the "
                             f"table ({limit:#x} bytes)", section=where, offset=off + rel)
        return st.unpack_from(data, off + rel)

    text_start = 0
    if layout == "1.2":
        nfunc = unpack(w, 8, "nfunc")[0]
        ftab, pair, nametab_base, func_base = 8 + ptr, 2 * ptr, 0, 0
        hdr_size = 8 + ptr
        parts_offsets = []
    else:
        n = 7 if layout == "1.16" else 8
        words = unpack(w * n, 8, "header")
        nfunc = words[0]
        if layout != "1.16":
            text_start = words[2]
        funcname, cu, filetab, pctab, pcln = words[-5:]
        hdr_size = 8 + n * ptr
        ftab, nametab_base, func_base = pcln, funcname, pcln
        pair = 8 if layout != "1.16" else 2 * ptr
        parts_offsets = [("header", 0), ("funcnametab", funcname), ("cutab", cu),
                         ("filetab", filetab), ("pctab", pctab), ("functab", pcln)]
    if not 0 <= nfunc < _MAX_FUNCS:
        raise ParseError(f"pclntab claims {nfunc} functions", section=where, offset=off + 8)
    # functab: nfunc (entry, funcoff) pairs, then the end address of the last function
    pfmt = "II" if pair == 8 else w * 2
    tab_end = ftab + nfunc * pair + (4 if pair == 8 else ptr)
    if tab_end > limit:
        raise ParseError(f"pclntab function table ({nfunc} functions) runs past the table",
                         section=where, offset=off + ftab)
    pairs = list(struct.iter_unpack(e + pfmt, data[off + ftab:off + ftab + nfunc * pair]))
    last = unpack("I" if pair == 8 else w, ftab + nfunc * pair, "functab end")[0]
    if text_start == 0 and pair == 8:      # Go 1.20+ no longer fills it in
        text_start = _moduledata_text(img, addr, addr + nametab_base, ptr, e) if addr else 0
        if not text_start:
            text = img.section(".text")
            text_start = text.addr if text is not None else _text_segment(img)
    starts = [text_start + p[0] for p in pairs] if pair == 8 else [p[0] for p in pairs]
    ends = starts[1:] + [text_start + last if pair == 8 else last]
    names, spans, records = [], [], []
    fixed = _FUNC_FIXED.get(layout)
    entry_size = 4 if pair == 8 else ptr
    max_end = tab_end
    find = data.find
    name_fmt = struct.Struct(e + "i")
    names_at: dict[int, bytes] = {}
    if layout != "1.2" and 0 <= nametab_base <= limit:
        # the name table is NUL-separated names: split it once instead of a search per name
        pos = nametab_base
        blob = bytes(data[off + nametab_base:off + min(parts_offsets[2][1], limit)])
        for nm in blob.split(b"\0"):
            names_at[pos] = nm
            pos += len(nm) + 1
    if fixed is not None:
        # name offset, npcdata and nfuncdata of a record, in one read
        skip_tail = 7 if layout != "1.20" else 11
        # nameoff, (args, deferreturn), pcsp, pcfile, pcln, npcdata, ..., nfuncdata
        rec_fmt = struct.Struct(f"{e}{entry_size}xi8xIIII{skip_tail}xB")
        rec_size = rec_fmt.size
    else:
        rec_fmt = struct.Struct(f"{e}{entry_size}xi")
        rec_size = rec_fmt.size
    unpack_rec = rec_fmt.unpack_from
    names_get = names_at.get
    add_name, add_span, add_rec = names.append, spans.append, records.append
    pc_refs: list[int] = []
    add_pc = pc_refs.append
    fd_refs: list[int] = []
    add_fd = fd_refs.append
    pcdata_fmt: dict[int, struct.Struct] = {}
    for i, (_entry, funcoff) in enumerate(pairs):
        rec = func_base + funcoff
        if rec < 0 or rec + rec_size > limit:
            raise ParseError(f"pclntab function {i}: record at {rec:#x} is outside the table",
                             section=where, offset=off + ftab + i * pair)
        fields = unpack_rec(data, off + rec)
        nameoff = fields[0]
        nstart = nametab_base + nameoff
        if nameoff < 0 or nstart >= limit:
            raise ParseError(f"pclntab function {i}: name offset {nameoff:#x} is outside the "
                             "table", section=where, offset=off + rec + entry_size)
        nm = names_get(nstart)
        if nm is None or nstart + len(nm) >= limit:
            nend = find(b"\0", off + nstart, off + limit)
            if nend < 0:
                raise ParseError(f"pclntab function {i}: name is not NUL-terminated",
                                 section=where, offset=off + nstart)
            nm = bytes(data[off + nstart:nend])
        add_name(nm.decode("utf-8", "replace"))
        add_span((nstart, len(nm) + 1))
        if fixed is not None:
            npcdata, nfuncdata = fields[4], fields[5]
            if layout == "1.16":
                body = rec_size + 4 * npcdata
                if nfuncdata:       # the funcdata pointers are pointer-aligned
                    body = (body + ptr - 1) // ptr * ptr + nfuncdata * ptr
            else:
                body = rec_size + 4 * (npcdata + nfuncdata)
            if npcdata > 1 << 12 or rec + body > limit:
                raise ParseError(f"pclntab function {i}: {npcdata} pcdata entries run past "
                                 "the table", section=where, offset=off + rec)
            add_rec((rec, body))
            if rec + body > max_end:
                max_end = rec + body
            # the function's pc-value tables in pctab (0: none), as table << 22 | function
            for t in fields[1:4]:
                if t:
                    add_pc(t << 22 | i)
            if npcdata:
                st = pcdata_fmt.get(npcdata)
                if st is None:
                    st = pcdata_fmt[npcdata] = struct.Struct(f"{e}{npcdata}I")
                for t in st.unpack_from(data, off + rec + rec_size):
                    if t:
                        add_pc(t << 22 | i)
            if nfuncdata and layout != "1.16":
                for t in struct.unpack_from(f"{e}{nfuncdata}I", data,
                                            off + rec + rec_size + 4 * npcdata):
                    if t != 0xFFFFFFFF:
                        add_fd(t << 22 | i)
        else:
            add_rec(None)
    for i in range(len(starts)):
        if ends[i] < starts[i]:
            raise ParseError(f"pclntab function {i} ({names[i]}) ends before it starts: "
                             "the function table is not sorted", section=where,
                             offset=off + ftab + i * pair)
    gofunc = _gofunc_in_table(img, addr, nametab_base, ptr, e, max_end,
                              size if size is not None else limit, fd_refs) \
        if layout == "1.20" and fd_refs else None
    if gofunc is not None:
        gofunc, findfunc = gofunc
        parts_offsets.append(("funcdata", gofunc))
        if findfunc is not None:
            parts_offsets.append(("findfunctab", findfunc))
        if size is None:
            max_end = max(max_end, gofunc + (max(fd_refs) >> 22) + 1)
    total = size if size is not None else max_end
    parts = []
    po = sorted(parts_offsets, key=lambda t: t[1])
    for j, (name, o) in enumerate(po):
        nxt = po[j + 1][1] if j + 1 < len(po) else total
        parts.append(PclnPart(name, o, max(0, min(nxt, total) - o)))
    if not parts:
        parts = [PclnPart("table", 0, total)]
    pc_bytes = _pc_table_bytes(pc_refs, len(names), parts)
    fd_bytes = _pc_table_bytes(fd_refs, len(names), parts, "funcdata") \
        if gofunc is not None else ()
    return Pclntab(layout, magic, off, addr, total, ptr, how, tuple(names), tuple(starts),
                   tuple(ends), tuple(spans), tuple(records), tuple(parts), pc_bytes,
                   fd_bytes, tuple(fd_refs) if gofunc is None else ())


def _gofunc_in_table(img: ElfImage, addr: int, funcnametab: int, ptr: int, e: str,
                     records_end: int, limit: int,
                     refs: list[int]) -> tuple[int, int | None] | None:
    """The offsets in the table of the funcdata (``moduledata.gofunc``) and of the
    pc-to-function index (``moduledata.findfunctab``, its 20th word) when the linker put them
    after the _func records (Go 1.26+), else None: the moduledata must hold the funcdata's
    address and every funcdata offset must lie inside the table."""
    if not addr:
        return None
    g = (records_end + 7) & ~7
    if g >= limit or g + (max(refs) >> 22) >= limit:
        return None
    words = moduledata_words(img, addr, addr + funcnametab, ptr, e, 64)
    if not words or addr + g not in words:
        return None
    ff = words[19] - addr
    last = g + (max(refs) >> 22)
    return g, (ff if last < ff < limit else None)


def _pc_table_bytes(refs: list[int], nfunc: int, parts: list[PclnPart],
                    part: str = "pctab") -> tuple[int, ...]:
    """Per function, the bytes of the pctab tables (or funcdata blobs) it is the first to
    use. They lie back to back (the linker dedups equal ones), so each runs to the next
    one's start. ``refs`` are offset << 22 | function index (_MAX_FUNCS is 1 << 22)."""
    pctab = next((p for p in parts if p.name == part), None)
    out = [0] * nfunc
    if pctab is None or not refs:
        return tuple(out)
    refs.sort()
    starts = []
    owner = []
    last = -1
    mask = (1 << 22) - 1
    for r in refs:
        t, i = r >> 22, r & mask
        if t != last:
            if t >= pctab.size:
                raise ParseError(f"pclntab function {i}: a table at {t:#x} is outside "
                                 f"{part} ({pctab.size:#x} bytes)", section=".gopclntab",
                                 offset=pctab.offset + t)
            starts.append(t)
            owner.append(i)       # sorted: the first function to use it has the lowest index
            last = t
    starts.append(pctab.size)
    for k, i in enumerate(owner):
        out[i] += starts[k + 1] - starts[k]
    return tuple(out)


def _moduledata_text(img: ElfImage, pcln_addr: int, funcnametab: int, ptr: int,
                     e: str) -> int:
    """``runtime.firstmoduledata.text``: the moduledata starts with a pointer to the pclntab
    header, then the funcnametab slice; ``text`` is its 23rd word (Go 1.16 and later)."""
    words = moduledata_words(img, pcln_addr, funcnametab, ptr, e, 23)
    return words[22] if words else 0


def moduledata_words(img: ElfImage, pcln_addr: int, funcnametab: int, ptr: int, e: str,
                     n: int) -> tuple[int, ...]:
    """The first ``n`` words of ``runtime.firstmoduledata`` (found by its first two: the
    pclntab header's address and the funcnametab's), or () when it is not found."""
    w = "Q" if ptr == 8 else "I"
    needle = struct.pack(e + w + w, pcln_addr, funcnametab)
    places = [s for s in img.sections if s.in_file and s.flags & 1 and s.flags & 2] or None
    ranges = [(s.offset, s.offset + s.size) for s in places] if places else \
        [(0, img.file_size)]
    for lo, hi in ranges:
        pos = img.data.find(needle, lo, hi)
        while pos >= 0:
            if pos % ptr == 0 and pos + n * ptr <= hi:
                return struct.unpack_from(e + w * n, img.data, pos)
            pos = img.data.find(needle, pos + 1, hi)
    return ()


def _text_segment(img: ElfImage) -> int:
    for s in img.segments:
        if s.type == 1 and s.flags & 1:
            return s.vaddr
    return 0


# --- package of a symbol: parse/gosym.py (re-exported here) ----------------------------------

# --- build info -------------------------------------------------------------------------------
# The Go linker writes a build-info blob into every binary (the ``.go.buildinfo`` section on
# ELF; ``debug/buildinfo`` reads it): a 32-byte header starting with BUILDINFO_MAGIC at a
# 16-byte aligned offset, a pointer size byte and a flags byte (bit 0: big-endian pointers,
# bit 1: strings inline). Since Go 1.18 the header is followed by two varint-prefixed
# strings, the Go version (``go1.19.8``) and the module info (``path``, ``mod``, ``dep`` and
# ``build`` lines between two 16-byte sentinels: what ``go version -m`` prints); older
# binaries store two pointers to Go strings there, which only an ELF's address map resolves.

BUILDINFO_MAGIC = b"\xff Go buildinf:"
MAGIC = BUILDINFO_MAGIC
_BI_HEADER = 32
_BI_BIG_ENDIAN, _BI_INLINE = 1, 2
_BI_MAX = 1 << 20                  # module info is a few KiB, never MiBs


@dataclass(frozen=True)
class GoBuildInfo:
    """What a process view needs of a build info (:func:`parse_go_buildinfo`)."""
    version: str | None          # "go1.19.8"; None for a pre-1.18 binary read without its ELF
    path: str | None             # the main package ("github.com/prometheus/prometheus/cmd/...")
    module: str | None           # the main module and its version ("github.com/x/y v1.2.3")
    settings: dict = field(default_factory=dict)   # "build" lines: CGO_ENABLED, GOARCH...
    offset: int = 0              # of the magic in the bytes given
    ptr_size: int = 8
    big_endian: bool = False


def find_buildinfo(data, start: int = 0) -> int:
    """Offset of the build-info header in ``data`` (bytes or an mmap), -1 when absent.
    The magic sits at a 16-byte aligned offset; an unaligned match is skipped."""
    i = data.find(BUILDINFO_MAGIC, start)
    while i >= 0 and i % 16:
        i = data.find(BUILDINFO_MAGIC, i + 1)
    return i


def _read_buildinfo(data, off: int, end: int, img: ElfImage | None, sized: int | None):
    """The one build-info decoder: (BuildInfo, pointer size, big endian) of the header at
    ``off`` in ``data`` (the blob ends by ``end``), every read bounded by a
    :class:`Bytes` view of the blob. Pointer-format (pre-1.18) strings are read through
    ``img``'s address map; without one the version is None."""
    blob = Bytes(bytes(data[off:min(end, len(data))]), ".go.buildinfo", base=off)
    blob.check(0, _BI_HEADER, "build info header")
    ptr, flags = blob.u8(14, "build info pointer size"), blob.u8(15, "build info flags")
    if ptr not in (4, 8):
        raise blob.error(f"build info: pointer size {ptr}", 14)
    big = bool(flags & _BI_BIG_ENDIAN)
    if flags & _BI_INLINE:   # Go 1.18+: two varint-prefixed strings after the header
        version, pos = _varint_string(blob, _BI_HEADER)
        modinfo, pos = _varint_string(blob, pos)
        size = pos
    elif img is None:
        return (BuildInfo(None, "", None, (), (), off, _BI_HEADER if sized is None else sized),
                ptr, big)
    else:            # older: pointers to two Go strings
        blob.endian = ">" if big else "<"
        w = "Q" if ptr == 8 else "I"
        vp, mp = blob.unpack(w + w, 16, "build info string pointers")
        version = _go_string(img, vp, blob.endian, w, ptr)
        modinfo = _go_string(img, mp, blob.endian, w, ptr)
        size = 16 + 2 * ptr
    if len(modinfo) >= 33 and modinfo[-17] == "\n":
        modinfo = modinfo[16:-16]
    path, main, deps, settings = _modinfo(modinfo)
    return (BuildInfo(version, path, main, tuple(deps), tuple(settings), off,
                      size if sized is None else sized),
            ptr, big)


def parse_buildinfo(img: ElfImage) -> BuildInfo | None:
    """The build info of a Go binary (``.go.buildinfo``), None when there is none."""
    sec = img.section(".go.buildinfo")
    data = img.data
    if sec is not None and sec.in_file and sec.size >= _BI_HEADER:
        off, end = sec.offset, sec.offset + sec.size
        if bytes(data[off:off + 14]) != BUILDINFO_MAGIC:
            raise ParseError(".go.buildinfo does not start with its magic",
                             section=".go.buildinfo", offset=off)
        sized = sec.size
    else:
        off = find_buildinfo(data)
        if off < 0:
            return None
        end, sized = min(img.file_size, off + _BI_MAX), (sec.size if sec is not None else None)
    return _read_buildinfo(data, off, end, img, sized)[0]


def parse_go_buildinfo(data, offset: int | None = None) -> GoBuildInfo | None:
    """The build info in an executable's bytes (or mmap), found by its magic without
    reading the ELF: None when it is not a Go binary; ParseError when the header is there
    but broken. A pre-1.18 binary's version is not read (None)."""
    i = find_buildinfo(data) if offset is None else offset
    if i < 0:
        return None
    info, ptr, big = _read_buildinfo(data, i, min(len(data), i + _BI_HEADER + _BI_MAX),
                                     None, None)
    if info.go_version is None:
        return GoBuildInfo(None, None, None, {}, i, ptr, big)
    module = f"{info.main.path} {info.main.version}" if info.main is not None else None
    return GoBuildInfo(info.go_version or None, info.path or None, module,
                       dict(info.settings), i, ptr, big)


def _varint_string(blob: Bytes, pos: int) -> tuple[str, int]:
    """The uvarint-length-prefixed string at ``pos`` of the blob, and the offset after it."""
    n, shift = 0, 0
    while True:
        if shift > 63:
            raise blob.error("build info: a string length of more than 64 bits", pos)
        b = blob.u8(pos, "build info string length")
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            break
    return blob.raw(pos, n, "build info string").decode("utf-8", "replace"), pos + n


def _go_string(img: ElfImage, addr: int, e: str, w: str, ptr: int) -> str:
    if addr == 0:
        return ""
    sp, sl = struct.unpack(e + w + w, img.read_addr(addr, 2 * ptr, "build info string"))
    if sl > 1 << 24:
        raise ParseError(f"build info: a {sl}-byte string")
    return img.read_addr(sp, sl, "build info string").decode("utf-8", "replace") if sl else ""


def _modinfo(text: str):
    path, main, deps, settings = "", None, [], []
    for line in text.splitlines():
        f = line.split("\t")
        if f[0] == "path" and len(f) > 1:
            path = f[1]
        elif f[0] == "mod" and len(f) > 2:
            main = Module(f[1], f[2], f[3] if len(f) > 3 else "")
        elif f[0] == "dep" and len(f) > 2:
            deps.append(Module(f[1], f[2], f[3] if len(f) > 3 else ""))
        elif f[0] == "=>" and len(f) > 2 and deps:
            d = deps.pop()
            deps.append(Module(d.path, d.version, d.sum,
                               Module(f[1], f[2], f[3] if len(f) > 3 else "")))
        elif f[0] == "build" and len(f) > 1:
            k, _, v = f[1].partition("=")
            settings.append((k, v))
    return path, main, deps, settings


_STD = re.compile(r"^[^./]+(/|$)")


def module_of(package: str, modules: list[str], main: str | None) -> str:
    """The module a package belongs to: the longest module path that is a prefix of it;
    ``std`` for the standard library (no dot in the first path element); else the package's
    own bucket name (for the named buckets)."""
    if package.startswith("("):
        return package
    v = package.find("/vendor/")
    if v > 0:                       # GOPATH-mode vendoring: a/vendor/b is b
        package = package[v + 8:]
    best = ""
    for m in modules:
        if (package == m or package.startswith(m + "/")) and len(m) > len(best):
            best = m
    if best:
        return best
    if package == "main" or (main and (package == main or package.startswith(main + "/"))):
        return main or "main"
    parts = package.split("/")
    if "." not in parts[0]:
        return "std"
    if modules:
        return package
    return guess_module(parts)


#: hosts whose module paths have three elements (host/owner/repo)
_THREE = {"github.com", "gitlab.com", "bitbucket.org", "golang.org", "gitea.com",
          "git.sr.ht", "codeberg.org"}


def guess_module(parts: list[str]) -> str:
    """A module path for a package of a binary built without modules (GOPATH mode, as
    Debian builds): host/owner/repo on the code hosts, host/name elsewhere."""
    n = 3 if parts[0] in _THREE else 2
    head = parts[:n]
    if len(parts) > n and re.fullmatch(r"v[2-9][0-9]*", parts[n]):
        head.append(parts[n])
    return "/".join(head)
