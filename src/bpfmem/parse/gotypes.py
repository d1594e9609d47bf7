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

import bisect
import struct
import sys

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


class _Reader:
    """Pointers and integers at virtual addresses of the image; in a PIE, a pointer the file
    holds as 0 is the addend of its R_X86_64_RELATIVE relocation."""

    def __init__(self, img, relative: dict[int, int]):
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


def relative_relocations(img) -> dict[int, int]:
    """r_offset -> addend of the R_X86_64_RELATIVE entries of a PIE's .rela.dyn."""
    sec = img.section(".rela.dyn")
    if sec is None or not sec.in_file or img.e_type != 3 or not img.is64:
        return {}
    raw = img.data[sec.offset:sec.offset + sec.size - sec.size % 24]
    if sys.byteorder != "little":
        return {o: a for o, info, a in struct.iter_unpack("<QQq", raw)
                if info & 0xFFFFFFFF == 8}
    # the three columns straight from the bytes (Elf64_Rela: r_offset, r_info, r_addend)
    offs, infos = memoryview(raw).cast("Q")[0::3].tolist(), memoryview(raw).cast("Q")[1::3]
    adds = memoryview(raw).cast("q")[2::3].tolist()
    if infos.tolist().count(8) == len(offs):      # a Go PIE's: all of them RELATIVE
        return dict(zip(offs, adds))
    return {o: a for o, info, a in zip(offs, infos.tolist(), adds) if info & 0xFFFFFFFF == 8}


def _name(rd: _Reader, addr: int) -> tuple[str, int] | None:
    """(text, bytes) of an encoded name (Go 1.17+: flags, varint length, bytes, optional tag
    and package path offset); names are shared, so each is decoded once."""
    got = rd.names.get(addr, _NONE)
    if got is _NONE:
        got = rd.names[addr] = _decode_name(rd, addr)
    return got


_NONE = object()


def _decode_name(rd: _Reader, addr: int) -> tuple[str, int] | None:
    head = rd.raw(addr, 11)
    if not head:
        return None
    flags = head[0]
    n, shift, k = 0, 0, 1
    while k < len(head):
        b = head[k]
        k += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            break
    text = rd.raw(addr + k, n)
    if text is None:
        return None
    size = k + n
    if flags & 2:               # a tag: another varint-prefixed string
        tag = rd.raw(addr + size, 10) or b""
        m, shift, j = 0, 0, 0
        while j < len(tag):
            b = tag[j]
            j += 1
            m |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        size += j + m
    if flags & 4:
        size += 4
    return text.decode("utf-8", "replace"), size


def type_ranges(img, words: tuple[int, ...], relative: dict[int, int] | None = None
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
    out: list[tuple[int, int, str, str]] = []
    names: list[tuple[int, int]] = []       # (address, owner type) of names to size later

    def in_types(a: int) -> bool:
        return types <= a < etypes

    # first pass: every type reachable from the links, with its own parts
    while pending:
        t = pending.pop()
        if t in seen or not in_types(t):
            continue
        o = rd.off(t, 48)
        if o is None:
            continue
        tflag, kind, str_off, ptr_to = _HEAD(data, o)
        kind &= 0x1F
        extra = _EXTRA.get(kind, 0)
        end = t + 48 + extra
        elem = 0
        refs = []
        parts = []
        if kind in (_PTR, _SLICE, _ARRAY, _CHAN):
            elem = rd.ptr(t + 48)
            refs.append(elem)
        elif kind == _MAP:
            refs += [rd.ptr(t + 48), rd.ptr(t + 56)]
            elem = refs[1]
        elif kind == _STRUCT:
            fields, nf = rd.ptr(t + 56), rd.ptr(t + 64)
            if fields and nf < 1 << 16:
                parts.append((fields, fields + 24 * nf))
                for j in range(nf):
                    names.append((rd.ptr(fields + 24 * j), t))
                    refs.append(rd.ptr(fields + 24 * j + 8))
        elif kind == _IFACE:
            ms, nm = rd.ptr(t + 56), rd.ptr(t + 64)
            if ms and nm < 1 << 16:
                parts.append((ms, ms + 8 * nm))
                for j in range(nm):
                    no, to = rd.pair(ms + 8 * j)
                    names.append((types + no, t))
                    refs.append(types + to)
        pkg_off = 0
        if tflag & _TFLAG_UNCOMMON:
            u = rd.off(end, 16)
            if u is not None:
                pkg_off, mcount, _x, moff = _UNCOMMON(data, u)
                end += 16
                if mcount and moff < 1 << 20:
                    m0 = end - 16 + moff
                    parts.append((m0, m0 + 16 * mcount))
                    for j in range(mcount):
                        no, mt = rd.pair(m0 + 16 * j)
                        names.append((types + no, t))
                        if mt != 0xFFFFFFFF:
                            refs.append(types + mt)
        if kind == _FUNC:
            cnt = struct.unpack("<HH", rd.raw(t + 48, 4) or bytes(4))
            n = cnt[0] + (cnt[1] & 0x7FFF)
            p0 = end if not tflag & _TFLAG_UNCOMMON else end
            if n < 1 << 12:
                parts.append((p0, p0 + 8 * n))
                refs += [rd.ptr(p0 + 8 * j) for j in range(n)]
        if ptr_to:
            refs.append(types + ptr_to)
        names.append((types + str_off, t))
        pkgpath = ""
        if pkg_off:
            nm = _name(rd, types + pkg_off)
            pkgpath = nm[0] if nm else ""
        elif kind in (_STRUCT, _IFACE):
            pp = rd.ptr(t + 48)
            nm = _name(rd, pp) if pp else None
            pkgpath = nm[0] if nm else ""
        seen[t] = (end, pkgpath, elem, parts)
        for r in refs:
            if r and r not in seen:
                pending.append(r)
                parent.setdefault(r, t)

    # packages: a named type's path, else that of what it is made of, else that of the
    # type that refers to it (a struct field's map type goes with the struct)
    def own_pkg(t: int, depth: int = 0) -> str:
        end, pkgpath, elem, _parts = seen[t]
        if pkgpath and pkgpath != "go.shape":      # generic shapes have no package
            return pkgpath
        if elem in seen and depth < 8:
            return own_pkg(elem, depth + 1)
        return TYPES

    def pkg_of(t: int) -> str:
        for _ in range(8):
            pkg = own_pkg(t)
            if pkg != TYPES or t not in parent or parent[t] not in seen:
                return pkg
            t = parent[t]
        return TYPES
    pkgs = {t: pkg_of(t) for t in seen}
    for t, (end, _p, _e, parts) in seen.items():
        out.append((t, end, pkgs[t], "type descriptor"))
        for a, b in parts:
            if b > a:
                out.append((a, b, pkgs[t], "type data"))
    for a, owner in names:
        if a and in_types(a):
            nm = _name(rd, a)
            if nm:
                out.append((a, a + nm[1], pkgs[owner], "type name"))
    for itab in itabs:
        inter, typ = rd.ptr(itab), rd.ptr(itab + 8)
        n = rd.ptr(inter + 64) if inter in seen else 1
        out.append((itab, itab + 24 + 8 * max(1, min(n, 1 << 12)),
                    pkgs.get(typ, TYPES), "itab"))
    return out
