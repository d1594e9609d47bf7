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

import array
import bisect
import operator
import re
import struct
import sys
from ..values import dataclass, field
from itertools import accumulate, chain, repeat

from ..errors import ParseError, UnsupportedError
from .elf import ElfImage
from .gosym import C_CODE, RUNTIME_DATA, TYPES, UNNAMED, package_of  # noqa: F401
from .reader import Bytes

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Sequence

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
    its name is ``name_sizes[i]`` bytes (with its NUL) at ``name_offsets[i]`` in the table,
    its ``_func`` record ``rec_sizes[i]`` bytes at ``rec_offsets[i]`` (both empty for the
    Go 1.2 layout, whose records bpfmem does not size). Columns of machine integers
    (``array``), not a record per function: a large binary has 10^5 functions.
    """
    layout: str                # "1.2", "1.16", "1.18", "1.20": the first Go release of it
    magic: int
    offset: int                # file offset of the header
    addr: int                  # its virtual address (0 when unknown)
    size: int                  # bytes of the whole table
    ptr_size: int
    found_by: str              # "section .gopclntab" or "scan of <section>"
    names: tuple[str, ...]
    entries: Sequence[int]
    ends: Sequence[int]
    name_offsets: Sequence[int]
    name_sizes: Sequence[int]
    rec_offsets: Sequence[int]
    rec_sizes: Sequence[int]
    parts: tuple[PclnPart, ...]
    pc_bytes: Sequence[int] = ()   # per function: its pc-value tables in pctab
    # per function: its funcdata (stack maps, ...) when the linker put that inside the table
    # (Go 1.26+: moduledata.gofunc points past the _func records), else empty
    fd_bytes: Sequence[int] = ()
    #: otherwise (Go 1.18-1.25: funcdata in go:func.*, outside the table) the funcdata
    #: blobs' offsets from moduledata.gofunc (ascending) and the first function to use each
    fd_starts: Sequence[int] = ()
    fd_owners: Sequence[int] = ()

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
            syms = img.symbol_values(("runtime.pcheader", "runtime.firstmoduledata"), dynamic)
        except ParseError:
            return None
        for name, value in syms:
            if name == "runtime.pcheader":
                addr = value
            else:
                off = img.addr_to_offset(value)
                if off is None or off + img.ptr_size > img.file_size:
                    continue
                addr = struct.unpack_from(img.endian + ("Q" if img.is64 else "I"),
                                          img.data, off)[0]
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
        parts_offsets = []
    else:
        n = 7 if layout == "1.16" else 8
        words = unpack(w * n, 8, "header")
        nfunc = words[0]
        if layout != "1.16":
            text_start = words[2]
        funcname, cu, filetab, pctab, pcln = words[-5:]
        ftab, nametab_base, func_base = pcln, funcname, pcln
        pair = 8 if layout != "1.16" else 2 * ptr
        parts_offsets = [("header", 0), ("funcnametab", funcname), ("cutab", cu),
                         ("filetab", filetab), ("pctab", pctab), ("functab", pcln)]
    if not 0 <= nfunc < _MAX_FUNCS:
        raise ParseError(f"pclntab claims {nfunc} functions", section=where, offset=off + 8)
    # functab: nfunc (entry, funcoff) pairs, then the end address of the last function
    tab_end = ftab + nfunc * pair + (4 if pair == 8 else ptr)
    if tab_end > limit:
        raise ParseError(f"pclntab function table ({nfunc} functions) runs past the table",
                         section=where, offset=off + ftab)
    # the function table in two columns, straight from its bytes
    cols = _words(data, off + ftab, 2 * nfunc + 1, e, 4 if pair == 8 else ptr)
    last = cols[2 * nfunc]
    if text_start == 0 and pair == 8:      # Go 1.20+ no longer fills it in
        text_start = _moduledata_text(img, addr, addr + nametab_base, ptr, e) if addr else 0
        if not text_start:
            text = img.section(".text")
            text_start = text.addr if text is not None else _text_segment(img)
    if pair == 8:
        starts = [text_start + a for a in cols[0:2 * nfunc:2]]
        last += text_start
    else:
        starts = cols[0:2 * nfunc:2]
    recs = [func_base + f for f in cols[1:2 * nfunc:2]]
    del cols
    ends = starts[1:]
    ends.append(last)
    fixed = _FUNC_FIXED.get(layout)
    entry_size = 4 if pair == 8 else ptr
    rec_size = entry_size + (fixed if fixed is not None else 4)
    # The checks of each function, in the order a reader of one function after another
    # makes them; each looks only at the functions before the first one found wrong so
    # far, so that the error raised is that of the first wrong function.
    n = nfunc
    error = None

    def found(k: int, what: str, at: int) -> None:
        nonlocal n, error
        n, error = k, ParseError(f"pclntab function {k}{what}", section=where,
                                 offset=off + at)

    if recs and max(recs) > limit - rec_size:
        k = _first([r > limit - rec_size for r in recs])
        found(k, f": record at {recs[k]:#x} is outside the table", ftab + k * pair)
        del recs[n:]
    gather = _Gather(data, off, limit, e, recs)
    # names: offsets (signed) into the name table, each name read once from the table split
    # at its NULs
    nstarts = gather.words(recs, entry_size)
    if nstarts and max(nstarts) >= 1 << 31:          # negative
        k = _first([o >= 1 << 31 for o in nstarts])
        found(k, f": name offset {nstarts[k] - (1 << 32):#x} is outside the table",
              recs[k] + entry_size)
        del nstarts[n:]
    nstarts = [nametab_base + o for o in nstarts]
    if nstarts and max(nstarts) >= limit:
        k = _first([o >= limit for o in nstarts])
        found(k, f": name offset {nstarts[k] - nametab_base:#x} is outside the table",
              recs[k] + entry_size)
        del nstarts[n:]
    names, sizes, k = _names(data, off, limit, nametab_base,
                             parts_offsets[2][1] if layout != "1.2" else None, nstarts)
    if k is not None:
        found(k, ": name is not NUL-terminated", nstarts[k])
    records: list[int] | tuple = ()
    rec_sizes: list[int] | tuple = ()
    pc_first: tuple[list[int], list[int]] = ([], [])
    fd_first: tuple[list[int], list[int]] = ([], [])
    max_end = tab_end
    if fixed is not None:
        del recs[n:]
        npcdata = gather.words(recs, entry_size + 24)
        nfuncdata = gather.bytes_at(recs, rec_size - 1)
        if layout == "1.16":     # the funcdata pointers are pointer-aligned
            bodies = [rec_size + 4 * p + (-(rec_size + 4 * p) % ptr + f * ptr if f else 0)
                      for p, f in zip(npcdata, nfuncdata)]
        else:
            bodies = [rec_size + 4 * (p + f) for p, f in zip(npcdata, nfuncdata)]
        rec_ends = list(map(operator.add, recs, bodies))
        if recs and (max(npcdata) > 1 << 12 or max(rec_ends) > limit):
            k = _first([p > 1 << 12 or r > limit for p, r in zip(npcdata, rec_ends)])
            found(k, f": {npcdata[k]} pcdata entries run past the table", recs[k])
        if error is None:
            records, rec_sizes = recs, bodies
            max_end = max(tab_end, max(rec_ends, default=0))
            # the functions' pc-value tables in pctab (0: none): pcsp, pcfile, pcln and the
            # pcdata, function by function
            first = [r + rec_size for r in recs]
            pc_first = _first_users(
                gather.runs(list(chain.from_iterable(zip([r + entry_size + 12 for r in recs],
                                                         first))),
                            list(chain.from_iterable(zip(repeat(3, n), npcdata)))),
                [p + 3 for p in npcdata], 0)
            if layout != "1.16":     # from Go 1.18: funcdata offsets (~0: none)
                first = [f + 4 * p for f, p in zip(first, npcdata)]
                fd_first = _first_users(gather.runs(first, nfuncdata), nfuncdata, 0xFFFFFFFF)
            del first
        del npcdata, nfuncdata, rec_ends
    if error is not None:
        raise error
    if any(map(operator.lt, ends, starts)):
        k = _first(map(operator.lt, ends, starts))
        raise ParseError(f"pclntab function {k} ({names[k]}) ends before it starts: "
                         "the function table is not sorted", section=where,
                         offset=off + ftab + k * pair)
    fd_starts, fd_owners = fd_first
    gofunc = _gofunc_in_table(img, addr, nametab_base, ptr, e, max_end,
                              size if size is not None else limit, fd_starts[-1]) \
        if layout == "1.20" and fd_starts else None
    if gofunc is not None:
        gofunc, findfunc = gofunc
        parts_offsets.append(("funcdata", gofunc))
        if findfunc is not None:
            parts_offsets.append(("findfunctab", findfunc))
        if size is None:
            max_end = max(max_end, gofunc + fd_starts[-1] + 1)
    total = size if size is not None else max_end
    parts = []
    po = sorted(parts_offsets, key=lambda t: t[1])
    for j, (name, o) in enumerate(po):
        nxt = po[j + 1][1] if j + 1 < len(po) else total
        parts.append(PclnPart(name, o, max(0, min(nxt, total) - o)))
    if not parts:
        parts = [PclnPart("table", 0, total)]
    pc_bytes = _pc_table_bytes(pc_first, len(names), parts)
    fd_bytes = _pc_table_bytes(fd_first, len(names), parts, "funcdata") \
        if gofunc is not None else ()
    outside = gofunc is None and bool(fd_starts)
    return Pclntab(layout, magic, off, addr, total, ptr, how, tuple(names),
                   _column(starts), _column(ends), _column(nstarts), _column(sizes),
                   _column(records), _column(rec_sizes), tuple(parts), pc_bytes, fd_bytes,
                   _column(fd_starts if outside else ()), _column(fd_owners if outside else ()))


def _column(values) -> array.array:
    """``values`` (non-negative integers) as an array of the smallest of 32 or 64 bits."""
    try:
        return array.array("I", values)
    except OverflowError:
        return array.array("Q", values)


def _gofunc_in_table(img: ElfImage, addr: int, funcnametab: int, ptr: int, e: str,
                     records_end: int, limit: int,
                     last_ref: int) -> tuple[int, int | None] | None:
    """The offsets in the table of the funcdata (``moduledata.gofunc``) and of the
    pc-to-function index (``moduledata.findfunctab``, its 20th word) when the linker put them
    after the _func records (Go 1.26+), else None: the moduledata must hold the funcdata's
    address and every funcdata offset must lie inside the table."""
    if not addr:
        return None
    g = (records_end + 7) & ~7
    if g >= limit or g + last_ref >= limit:
        return None
    words = moduledata_words(img, addr, addr + funcnametab, ptr, e, 64)
    if not words or addr + g not in words:
        return None
    ff = words[19] - addr
    last = g + last_ref
    return g, (ff if last < ff < limit else None)


def _first_users(values: list[int], counts: list[int],
                 skip: int) -> tuple[list[int], list[int]]:
    """The distinct ``values`` (table offsets, in ascending order) but ``skip``, and the first
    function to use each: ``values`` come function by function, ``counts[i]`` of function i.
    Read backwards into a dict, so that the lowest function of a value is the one kept."""
    owners = list(chain.from_iterable(map(repeat, range(len(counts)), counts)))
    first = dict(zip(reversed(values), reversed(owners)))
    del owners
    first.pop(skip, None)
    starts = sorted(first)
    return starts, list(map(first.__getitem__, starts))


def _pc_table_bytes(first: tuple[list[int], list[int]], nfunc: int, parts: list[PclnPart],
                    part: str = "pctab") -> array.array:
    """Per function, the bytes of the pctab tables (or funcdata blobs) it is the first to
    use (``first``: :func:`_first_users`). They lie back to back (the linker dedups equal
    ones), so each runs to the next one's start."""
    pctab = next((p for p in parts if p.name == part), None)
    out = [0] * nfunc
    starts, owners = first
    if pctab is None or not starts:
        return _column(out)
    if starts[-1] >= pctab.size:
        k = bisect.bisect_left(starts, pctab.size)
        raise ParseError(f"pclntab function {owners[k]}: a table at {starts[k]:#x} is "
                         f"outside {part} ({pctab.size:#x} bytes)", section=".gopclntab",
                         offset=pctab.offset + starts[k])
    ends = starts[1:]
    ends.append(pctab.size)
    for i, n in zip(owners, map(operator.sub, ends, starts)):
        out[i] += n
    return _column(out)


def _first(flags) -> int | None:
    """The index of the first true one of ``flags`` (an iterable of bools), or None."""
    flags = list(flags)
    try:
        return flags.index(True)
    except ValueError:
        return None


def _words(data, start: int, count: int, e: str, size: int = 4) -> list[int]:
    """``count`` unsigned integers of ``size`` bytes at ``start``, in byte order ``e``."""
    code = "I" if size == 4 else "Q"
    raw = data[start:start + count * size]
    if (e == "<") == (sys.byteorder == "little"):
        with memoryview(raw) as mv, mv.cast(code) as words:
            return words.tolist()
    return [v for (v,) in struct.iter_unpack(e + code, raw)]


class _Gather:
    """Fields of the functions' ``_func`` records, a column at a time: 32-bit words read
    from one array of the records' part of the table (in the host's byte order) when the
    records share their alignment, as a real table's do; else one unpack each."""

    def __init__(self, data, off: int, limit: int, e: str, recs: list[int]):
        self.data, self.off, self.e = data, off, e
        self.words_of = None
        if len(set(r & 3 for r in recs)) == 1:
            self.base = lo = min(recs)
            hi = lo + (limit - lo) // 4 * 4
            self.words_of = array.array("I", data[off + lo:off + hi])
            if (e == "<") != (sys.byteorder == "little"):
                self.words_of.byteswap()

    def words(self, recs: list[int], field: int) -> list[int]:
        """The 32-bit word ``field`` bytes into each record at ``recs`` (table offsets)."""
        a = self.words_of
        if a is not None:
            d = field - self.base
            return [a[(r + d) >> 2] for r in recs]
        st = struct.Struct(self.e + "I").unpack_from
        base = self.off + field
        return [st(self.data, base + r)[0] for r in recs]

    def bytes_at(self, recs: list[int], field: int) -> list[int]:
        data = self.data
        d = self.off + field
        return [data[r + d] for r in recs]

    def runs(self, firsts: list[int], counts: list[int]) -> list[int]:
        """The ``counts[i]`` words from table offset ``firsts[i]`` on, for each i, in one
        list."""
        a = self.words_of
        if a is not None:
            base = self.base
            lo = [(f - base) >> 2 for f in firsts]
            return list(chain.from_iterable(map(operator.getitem, repeat(a),
                                                map(slice, lo, map(operator.add, lo, counts)))))
        st = struct.Struct(self.e + "I").unpack_from
        return [st(self.data, self.off + f + 4 * j)[0]
                for f, c in zip(firsts, counts) for j in range(c)]


def _names(data, off: int, limit: int, base: int, blob_end: int | None,
           nstarts: list[int]) -> tuple[list[str], list[int], int | None]:
    """The function names at table offsets ``nstarts`` and their sizes with the NUL, from the
    name table (``base`` up to ``blob_end``: split at its NULs once); a name no split gives
    is looked for in the table. The index of the first one with no NUL before the table's
    end, or None."""
    n = len(nstarts)
    got: list = [None] * n
    sizes: list = [None] * n
    if blob_end is not None and 0 <= base <= limit:
        end = min(blob_end, limit)
        blob = bytes(data[off + base:off + end])
        raw = blob.split(b"\0")
        if blob.isascii():
            parts = blob.decode("ascii").split("\0")
        else:
            try:            # valid UTF-8: a NUL is never inside a character
                parts = blob.decode("utf-8").split("\0")
            except UnicodeDecodeError:
                parts = [p.decode("utf-8", "replace") for p in raw]
        del blob
        starts = list(accumulate(map((1).__add__, map(len, raw)), initial=base))
        del raw
        # the last part has no NUL in the table when the table ends there: not trusted
        at = dict(zip(starts, range(len(parts) - (end == limit))))
        idx = list(map(at.get, nstarts))
        del at
        if None not in idx:
            got = list(map(parts.__getitem__, idx))
            sizes = list(map(operator.sub, map(starts.__getitem__, map((1).__add__, idx)),
                             nstarts))
        else:
            for i, k in enumerate(idx):
                if k is not None:
                    got[i], sizes[i] = parts[k], starts[k + 1] - starts[k]
        del parts, starts, idx
    bad = None
    if None in got:
        find = data.find
        for i, (nm, nstart) in enumerate(zip(got, nstarts)):
            if nm is None:
                nend = find(b"\0", off + nstart, off + limit)
                if nend < 0:
                    bad = i
                    del got[i:], sizes[i:]
                    break
                got[i] = bytes(data[off + nstart:nend]).decode("utf-8", "replace")
                sizes[i] = nend - off - nstart + 1
    return got, sizes, bad


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
