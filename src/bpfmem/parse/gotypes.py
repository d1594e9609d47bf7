"""A stripped Go binary's type descriptors and itabs, by what the binary itself says: the
moduledata's type links and itab links, each type's kind-specific part, uncommon part and
methods, and each named type's package path (``runtime/type.go``, ``internal/abi/type.go``).

Go 1.18-1.19 moduledata layout (64-bit words, after the pclntab slices): ``types`` and
``etypes`` at words 35-36, ``typelinks`` (a []int32 of offsets from ``types``) at 42-44 and
``itablinks`` (a []*itab) at 45-47. Other layouts are left alone (None): the caller keeps its
per-section buckets.

Pure: it takes the parsed image and the pclntab's moduledata words.
"""

from __future__ import annotations

import array
import bisect
import operator
import struct
import sys
from itertools import compress, islice, repeat

from .gosym import TYPES

#: kinds (abi.Kind) with the size of their kind-specific part after the 48-byte _type
_ARRAY, _CHAN, _FUNC, _IFACE, _MAP, _PTR, _SLICE, _STRUCT = 17, 18, 19, 20, 21, 22, 23, 25
_EXTRA = {_ARRAY: 24, _CHAN: 16, _FUNC: 8, _IFACE: 32, _MAP: 40, _PTR: 8, _SLICE: 8,
          _STRUCT: 32}
_TFLAG_UNCOMMON = 1
_MAX_TYPES = 1 << 21
_Q = struct.Struct("<Q").unpack_from
_PAIR = struct.Struct("<iI").unpack_from
#: a _type's tflag, kind, str (nameOff) and ptrToThis (typeOff)
_HEAD = struct.Struct("<20xB2xB16xiI").unpack_from
_UNCOMMON = struct.Struct("<iHHI").unpack_from
_KIND_PTRS = frozenset((_PTR, _SLICE, _ARRAY, _CHAN))


class _Reader:
    """Pointers and integers at virtual addresses of the image; in a PIE, a pointer the file
    holds as 0 is the addend of its R_X86_64_RELATIVE relocation."""

    def __init__(self, img, relative):
        self.img = img
        self.data = img.data
        self.rel = relative
        self.loads = sorted((s.vaddr, s.vaddr + s.filesz, s.offset) for s in img.segments
                            if s.type == 1 and s.filesz)
        self.starts = [x[0] for x in self.loads]

        self.last = (0, 0, 0)
        self.names: dict[int, tuple[str, int] | None] = {}

    def off(self, addr: int, n: int) -> int | None:
        lo, hi, off = self.last
        if lo <= addr and addr + n <= hi:
            return off + addr - lo
        i = bisect.bisect_right(self.starts, addr) - 1
        if i < 0:
            return None
        lo, hi, off = self.last = self.loads[i]
        return off + addr - lo if addr + n <= hi else None

    def ptr(self, addr: int) -> int:
        lo, hi, off = self.last
        if lo <= addr and addr + 8 <= hi:
            o = off + addr - lo
        else:
            o = self.off(addr, 8)
            if o is None:
                return 0
        v = _Q(self.data, o)[0]
        return v or self.rel.get(addr, 0)

    def pair(self, addr: int) -> tuple[int, int]:
        """Two 32-bit offsets (a nameOff and a typeOff) at ``addr``; (0, 0) outside."""
        lo, hi, off = self.last
        if lo <= addr and addr + 8 <= hi:
            return _PAIR(self.data, off + addr - lo)
        o = self.off(addr, 8)
        return (0, 0) if o is None else _PAIR(self.data, o)

    def u32(self, addr: int) -> int | None:
        o = self.off(addr, 4)
        return None if o is None else struct.unpack_from("<I", self.data, o)[0]

    def raw(self, addr: int, n: int) -> bytes | None:
        o = self.off(addr, n)
        return None if o is None else bytes(self.data[o:o + n])


class RelativeRelocations:
    """The R_X86_64_RELATIVE entries of a PIE's .rela.dyn: ``get(r_offset, default)`` is
    its addend. Asked only where the file holds 0 (GNU ld writes each value in place as
    well: then seldom), so kept as two sorted columns (16 bytes an entry) looked up by
    bisection, and made a dict once looked up often (Go's own linker leaves the places 0)."""

    _DICT_AFTER = 1024

    def __init__(self, offsets: list[int], addends: list[int]):
        if not all(map(operator.le, offsets, islice(offsets, 1, None))):
            order = sorted(range(len(offsets)), key=offsets.__getitem__)
            offsets = [offsets[i] for i in order]
            addends = [addends[i] for i in order]
        self.offsets = array.array("Q", offsets)
        self.addends = array.array("q", addends)
        self.found = 0
        self.map: dict[int, int] | None = None

    def __len__(self) -> int:
        return len(self.offsets)

    def get(self, addr: int, default: int = 0) -> int:
        if self.map is not None:
            return self.map.get(addr, default)
        offs = self.offsets
        i = bisect.bisect_left(offs, addr)
        if i == len(offs) or offs[i] != addr:
            return default
        self.found += 1
        if self.found > self._DICT_AFTER:
            self.map = dict(zip(offs, self.addends))
        return self.addends[i]


def relative_relocations(img) -> RelativeRelocations | dict:
    """r_offset -> addend of the R_X86_64_RELATIVE entries of a PIE's .rela.dyn ({} for
    anything else)."""
    sec = img.section(".rela.dyn")
    if sec is None or not sec.in_file or img.e_type != 3 or not img.is64:
        return {}
    raw = img.data[sec.offset:sec.offset + sec.size - sec.size % 24]
    if sys.byteorder != "little":
        rel = [(o, a) for o, info, a in struct.iter_unpack("<QQq", raw)
               if info & 0xFFFFFFFF == 8]
        return RelativeRelocations([o for o, _a in rel], [a for _o, a in rel])
    # the columns straight from the bytes (Elf64_Rela: r_offset, r_info, r_addend; the
    # type is r_info's low 32 bits)
    with memoryview(raw) as mv, mv.cast("Q") as q, mv.cast("q") as sq, mv.cast("I") as w:
        offs, adds = q[0::3].tolist(), sq[2::3].tolist()
        types = w[2::6].tolist()
    del raw
    if types.count(8) != len(types):      # a Go PIE's are all RELATIVE
        keep = list(map(operator.eq, types, repeat(8)))
        offs, adds = list(compress(offs, keep)), list(compress(adds, keep))
    return RelativeRelocations(offs, adds)


def _name(rd: _Reader, addr: int) -> tuple[str, int] | None:
    """(text, bytes) of an encoded name (Go 1.17+: flags, varint length, bytes, optional tag
    and package path offset); names are shared, so each is decoded once."""
    got = rd.names.get(addr, _NONE)
    if got is _NONE:
        got = rd.names[addr] = _decode_name(rd, addr)
    return got


_NONE = object()


def _uvarint(buf: bytes, k: int) -> tuple[int, int]:
    """(value, offset after it) of the unsigned LEB128 varint at ``buf[k:]`` (cut at the
    buffer's end)."""
    n = shift = 0
    while k < len(buf):
        b = buf[k]
        k += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            break
    return n, k


def _name_extent(rd: _Reader, addr: int) -> tuple[int, int, int] | None:
    """(offset of the text, its length, the bytes of the whole encoding) of the encoded
    name at ``addr``: flags, varint length, text, then an optional varint-prefixed tag
    (flags & 2) and a 4-byte package path offset (flags & 4); None where it is not there."""
    head = rd.raw(addr, 11)
    if not head:
        return None
    n, k = _uvarint(head, 1)
    size = k + n
    flags = head[0]
    if flags & 2:
        m, j = _uvarint(rd.raw(addr + size, 10) or b"", 0)
        size += j + m
    if flags & 4:
        size += 4
    return k, n, size


def _decode_name(rd: _Reader, addr: int) -> tuple[str, int] | None:
    ext = _name_extent(rd, addr)
    if ext is None:
        return None
    k, n, size = ext
    text = rd.raw(addr + k, n)
    if text is None:
        return None
    return text.decode("utf-8", "replace"), size


def _name_size(rd: _Reader, addr: int) -> int | None:
    """The bytes of the encoded name at ``addr`` (:func:`_decode_name`'s size, without
    decoding its text), or None where that gives None."""
    ext = _name_extent(rd, addr)
    if ext is None or rd.off(addr + ext[0], ext[1]) is None:
        return None
    return ext[2]


def _words(rd: _Reader, addr: int, count: int, code: str) -> tuple | None:
    """``count`` integers of struct ``code`` (Q: 8 bytes, i: 4) at ``addr`` in one read, or
    None when they are not all in one loaded piece of the file."""
    o = rd.off(addr, count * (8 if code == "Q" else 4))
    if o is None:
        return None
    return struct.unpack_from(f"<{count}{code}", rd.data, o)


def type_ranges(img, words: tuple[int, ...], relative=None
                ) -> list[tuple[int, int, str, str]] | None:
    """(start, end, package, what) of each type descriptor (with its uncommon part, methods,
    struct fields, interface methods, func parameters and names) and each itab of a Go
    1.18-1.19 binary (64-bit, little-endian); None for other layouts."""
    if len(words) < 48 or not img.is64 or img.endian != "<":
        return None
    types, etypes = words[35], words[36]
    tl, tl_n, tl_cap = words[42:45]
    il, il_n, il_cap = words[45:48]
    if not (0 < types < etypes and tl_n <= tl_cap < _MAX_TYPES and il_n <= il_cap
            < _MAX_TYPES and tl and (il or not il_n)):
        return None
    rd = _Reader(img, relative if relative is not None else relative_relocations(img))
    data = img.data
    rel = rd.rel
    raw = rd.raw(tl, 4 * tl_n)
    if raw is None:
        return None
    pending = [types + o for (o,) in struct.iter_unpack("<i", raw)]
    itabs = []
    for k in range(il_n):
        itab = rd.ptr(il + 8 * k)
        if itab:
            itabs.append(itab)
            pending += [rd.ptr(itab), rd.ptr(itab + 8)]
    seen: dict[int, tuple] = {}
    parent: dict[int, int] = {}             # the first type found to refer to a type
    # names to size later: their addresses, and the type each belongs to
    name_at: list[int] = []
    name_of: list[int] = []
    ptr = rd.ptr
    head = _HEAD
    ptrs = _KIND_PTRS

    # first pass: every type reachable from the links, with its own parts
    while pending:
        t = pending.pop()
        if t in seen or not types <= t < etypes:
            continue
        o = rd.off(t, 48)
        if o is None:
            continue
        tflag, kind, str_off, ptr_to = head(data, o)
        kind &= 0x1F
        end = t + 48 + _EXTRA.get(kind, 0)
        elem = 0
        refs: list[int] = []
        parts = []
        if kind in ptrs:                # pointer, slice, array, chan: the element type
            elem = ptr(t + 48)
            refs.append(elem)
        elif kind == _MAP:
            refs += [ptr(t + 48), ptr(t + 56)]
            elem = refs[1]
        elif kind == _STRUCT:
            fields, nf = ptr(t + 56), ptr(t + 64)
            if fields and nf < 1 << 16:
                parts.append((fields, fields + 24 * nf))
                # each field: name, type, offset
                got = _words(rd, fields, 3 * nf, "Q") if nf else ()
                if got is None or 0 in got[0::3] or 0 in got[1::3]:
                    got = [ptr(fields + 8 * k) if k % 3 < 2 else 0 for k in range(3 * nf)]
                name_at += got[0::3]
                name_of += repeat(t, nf)
                refs += got[1::3]
        elif kind == _IFACE:
            ms, nm = ptr(t + 56), ptr(t + 64)
            if ms and nm < 1 << 16:
                parts.append((ms, ms + 8 * nm))
                # each method: name (nameOff), type (typeOff)
                got = _words(rd, ms, 2 * nm, "i") if nm else ()
                if got is None:
                    got = [v for j in range(nm) for v in rd.pair(ms + 8 * j)]
                name_at += [types + no for no in got[0::2]]
                name_of += repeat(t, nm)
                refs += [types + (to & 0xFFFFFFFF) for to in got[1::2]]
        pkg_off = 0
        if tflag & _TFLAG_UNCOMMON:
            u = rd.off(end, 16)
            if u is not None:
                pkg_off, mcount, _x, moff = _UNCOMMON(data, u)
                end += 16
                if mcount and moff < 1 << 20:
                    m0 = end - 16 + moff
                    parts.append((m0, m0 + 16 * mcount))
                    # each method: name (nameOff), type (typeOff), two text offsets
                    got = _words(rd, m0, 4 * mcount, "i")
                    if got is None:
                        got = [v for j in range(mcount) for v in (*rd.pair(m0 + 16 * j), 0, 0)]
                    name_at += [types + no for no in got[0::4]]
                    name_of += repeat(t, mcount)
                    refs += [types + (mt & 0xFFFFFFFF) for mt in got[1::4] if mt != -1 and
                             mt != 0xFFFFFFFF]
        if kind == _FUNC:
            cnt = struct.unpack("<HH", rd.raw(t + 48, 4) or bytes(4))
            n = cnt[0] + (cnt[1] & 0x7FFF)
            if n < 1 << 12:
                parts.append((end, end + 8 * n))
                got = _words(rd, end, n, "Q") if n else ()
                if got is None or 0 in got:
                    got = [ptr(end + 8 * j) for j in range(n)]
                refs += got
        if ptr_to:
            refs.append(types + ptr_to)
        name_at.append(types + str_off)
        name_of.append(t)
        pkgpath = ""
        if pkg_off:
            nm = _name(rd, types + pkg_off)
            pkgpath = nm[0] if nm else ""
        elif kind == _STRUCT or kind == _IFACE:
            pp = ptr(t + 48)
            nm = _name(rd, pp) if pp else None
            pkgpath = nm[0] if nm else ""
        seen[t] = (end, pkgpath, elem, parts)
        for r in refs:
            if r and r not in seen:
                pending.append(r)
                if r not in parent:
                    parent[r] = t

    # packages: a named type's path, else that of what it is made of (8 steps at most),
    # else that of the type that refers to it (a struct field's map type goes with the
    # struct; 8 steps at most)
    own: dict[int, str] = {}
    for t, (_end, pkgpath, elem, _parts) in seen.items():
        pkg = TYPES
        for _ in range(9):
            if pkgpath and pkgpath != "go.shape":      # generic shapes have no package
                pkg = pkgpath
                break
            if elem not in seen:
                break
            _end, pkgpath, elem, _parts = seen[elem]
        own[t] = pkg
    pkgs: dict[int, str] = {}
    for t in seen:
        u = t
        for _ in range(8):
            pkg = own[u]
            if pkg != TYPES or u not in parent or parent[u] not in seen:
                break
            u = parent[u]
        else:
            pkg = TYPES
        pkgs[t] = pkg
    del own, parent
    out: list[tuple[int, int, str, str]] = []
    add = out.append
    for t, (end, _p, _e, parts) in seen.items():
        pkg = pkgs[t]
        add((t, end, pkg, "type descriptor"))
        for a, b in parts:
            if b > a:
                add((a, b, pkg, "type data"))
    # each name's size once (names are shared); most are in the types' own piece of the
    # file, with a one-byte length and no tag: read there without a call
    sizes: dict[int, int | None] = {}
    base = rd.off(types, etypes - types)
    seg_end = next((o + hi - lo for lo, hi, o in rd.loads if lo <= types < hi), 0)
    for a in set(name_at):
        if not a or not types <= a < etypes:
            continue
        o = a - types + base if base is not None else -1
        if o >= 0 and o + 11 <= seg_end and data[o + 1] < 0x80 and not data[o] & 2:
            n = 2 + data[o + 1]
            sizes[a] = (n + 4 if data[o] & 4 else n) if o + n <= seg_end else None
        else:
            sizes[a] = _name_size(rd, a)
    get = sizes.get
    out += [(a, a + n, pkgs[t], "type name") for a, t, n in zip(name_at, name_of,
                                                                 map(get, name_at)) if n]
    del name_at, name_of, sizes
    for itab in itabs:
        inter, typ = ptr(itab), ptr(itab + 8)
        n = ptr(inter + 64) if inter in seen else 1
        out.append((itab, itab + 24 + 8 * max(1, min(n, 1 << 12)),
                    pkgs.get(typ, TYPES), "itab"))
    seen.clear()
    return out
