"""BTF (BPF Type Format) parser: every kind up to ENUM64, type resolution and sizeof.

Types are indexed in one pass and decoded on demand. Resolution mirrors libbpf
(``btf__resolve_size``, ``btf__align_of``, ``skip_mods_and_typedefs``): bounded depth, so a
cycle or an absurd chain is an error, never a hang; sizes beyond u32 are errors (E2BIG).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..errors import ParseError
from .reader import Bytes, packer

BTF_MAGIC = 0xEB9F

INT, PTR, ARRAY, STRUCT, UNION, ENUM, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, \
    FUNC_PROTO, VAR, DATASEC, FLOAT, DECL_TAG, TYPE_TAG, ENUM64 = range(1, 20)
KIND_NAMES = {0: "VOID", INT: "INT", PTR: "PTR", ARRAY: "ARRAY", STRUCT: "STRUCT",
              UNION: "UNION", ENUM: "ENUM", FWD: "FWD", TYPEDEF: "TYPEDEF",
              VOLATILE: "VOLATILE", CONST: "CONST", RESTRICT: "RESTRICT", FUNC: "FUNC",
              FUNC_PROTO: "FUNC_PROTO", VAR: "VAR", DATASEC: "DATASEC", FLOAT: "FLOAT",
              DECL_TAG: "DECL_TAG", TYPE_TAG: "TYPE_TAG", ENUM64: "ENUM64"}

# VAR linkage
VAR_STATIC, VAR_GLOBAL_ALLOCATED, VAR_GLOBAL_EXTERN = 0, 1, 2

MAX_RESOLVE_DEPTH = 32  # libbpf's bound on modifier/typedef/array chains
U32_MAX = 0xFFFFFFFF
PTR_SIZE = 8  # BPF pointers are 64-bit

_MODS = frozenset((TYPEDEF, VOLATILE, CONST, RESTRICT, TYPE_TAG))


class Member(NamedTuple):
    name: str
    type: int
    bit_offset: int
    bitfield_size: int


class EnumValue(NamedTuple):
    name: str
    value: int


class Param(NamedTuple):
    name: str
    type: int


class VarSecinfo(NamedTuple):
    type: int
    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class BtfType:
    """One decoded BTF type. ``size_or_type`` is the size for sized kinds, else a type id."""

    id: int
    kind: int
    name: str
    vlen: int
    kflag: bool
    size_or_type: int
    # kind-specific payload
    int_encoding: int = 0          # INT: the raw u32 (encoding<<24 | offset<<16 | bits)
    array: tuple[int, int, int] | None = None   # ARRAY: (elem type, index type, nelems)
    members: tuple[Member, ...] = ()            # STRUCT, UNION
    enum_values: tuple[EnumValue, ...] = ()     # ENUM, ENUM64
    params: tuple[Param, ...] = ()              # FUNC_PROTO
    linkage: int = 0                            # VAR (and FUNC: vlen)
    secinfos: tuple[VarSecinfo, ...] = ()       # DATASEC
    component_idx: int = -1                     # DECL_TAG

    @property
    def kind_name(self) -> str:
        return KIND_NAMES.get(self.kind, str(self.kind))

    @property
    def type(self) -> int:
        return self.size_or_type

    @property
    def size(self) -> int:
        return self.size_or_type


_VOID = BtfType(0, 0, "void", 0, False, 0)


def _extra_size(kind: int, vlen: int) -> int:
    if kind in (INT, VAR, DECL_TAG):
        return 4
    if kind == ARRAY:
        return 12
    if kind in (STRUCT, UNION, DATASEC, ENUM64):
        return 12 * vlen
    if kind in (ENUM, FUNC_PROTO):
        return 8 * vlen
    return 0


class Btf:
    """Parsed ``.BTF`` section. Type ids start at 1; id 0 is void."""

    def __init__(self, data: bytes, *, endian: str = "<", section: str = ".BTF"):
        buf = Bytes(data, section, endian=endian)
        if len(data) < 8:
            raise ParseError(f"{len(data)} bytes is too short for a BTF header",
                             section=section, offset=0)
        magic = buf.unpack("H", 0, "BTF magic")[0]
        if magic != BTF_MAGIC:
            other = "<" if endian == ">" else ">"
            if Bytes(data, section, endian=other).unpack("H", 0, "BTF magic")[0] == BTF_MAGIC:
                endian = other
                buf.endian = other
            else:
                raise ParseError(f"bad BTF magic {magic:#06x}, expected 0xeb9f",
                                 section=section, offset=0)
        self.endian = endian
        version, _flags, hdr_len = buf.unpack("BBI", 2, "BTF header")
        if version != 1:
            raise ParseError(f"unsupported BTF version {version}", section=section, offset=2)
        if hdr_len < 24:
            raise ParseError(f"BTF header length {hdr_len} is shorter than 24",
                             section=section, offset=4)
        type_off, type_len, str_off, str_len = buf.unpack("IIII", 8, "BTF header")
        buf.check(hdr_len, 0, "BTF header length")
        self._types = buf.sub(hdr_len + type_off, type_len, "BTF type section",
                              section=f"{section} types")
        self._strs = buf.sub(hdr_len + str_off, str_len, "BTF string section",
                             section=f"{section} strings")
        if str_len and self._strs.data[-1:] != b"\0":
            raise ParseError("BTF string section is not NUL-terminated",
                             section=section, offset=hdr_len + str_off + str_len - 1)
        self._offsets: list[int] = [0]
        self._datasecs: dict[str, int] = {}
        self._cache: dict[int, BtfType] = {0: _VOID}
        self._index()

    # -- indexing ---------------------------------------------------------------------------
    def _index(self) -> None:
        data = self._types.data
        n = len(data)
        hdr = packer(self.endian, "III")
        offsets = self._offsets
        off = 0
        while off < n:
            if off + 12 > n:
                raise self._types.error(f"type [{len(offsets)}] header is cut short", off)
            _name_off, info, _ = hdr.unpack_from(data, off)
            kind = (info >> 24) & 0x1F
            vlen = info & 0xFFFF
            if not INT <= kind <= ENUM64:
                raise self._types.error(f"type [{len(offsets)}] has unknown BTF kind {kind}", off)
            if kind == DATASEC:
                self._datasecs.setdefault(self._str(_name_off, len(offsets)), len(offsets))
            offsets.append(off)
            off += 12 + _extra_size(kind, vlen)
        if off != n:
            raise self._types.error(f"type [{len(offsets) - 1}] runs past the type section", n)

    def _str(self, off: int, tid: int) -> str:
        if off == 0:
            return ""
        return self._strs.cstr(off, f"name of type [{tid}]")

    # -- access -----------------------------------------------------------------------------
    @property
    def count(self) -> int:
        """Number of type ids, void included (valid ids are 0 .. count-1)."""
        return len(self._offsets)

    def datasec(self, name: str) -> int | None:
        """Id of the DATASEC called ``name`` (first one), or None."""
        return self._datasecs.get(name)

    def type(self, tid: int) -> BtfType:
        t = self._cache.get(tid)
        if t is not None:
            return t
        if not 0 <= tid < len(self._offsets):
            raise ParseError(f"BTF type id [{tid}] is out of range ({len(self._offsets) - 1} types)",
                             section=".BTF")
        t = self._decode(tid)
        self._cache[tid] = t
        return t

    def _decode(self, tid: int) -> BtfType:
        off = self._offsets[tid]
        buf = self._types
        name_off, info, st = buf.unpack("III", off, f"type [{tid}]")
        kind = (info >> 24) & 0x1F
        vlen = info & 0xFFFF
        kflag = bool(info >> 31)
        name = self._str(name_off, tid)
        base = BtfType(tid, kind, name, vlen, kflag, st)
        x = off + 12
        what = f"type [{tid}] {KIND_NAMES[kind]}"
        if kind == INT:
            return _replace(base, int_encoding=buf.u32(x, what))
        if kind == ARRAY:
            return _replace(base, array=buf.unpack("III", x, what))
        if kind in (STRUCT, UNION):
            members = []
            for mname, mtype, moff in buf.iter_unpack("III", x, vlen, what):
                if kflag:
                    members.append(Member(self._str(mname, tid), mtype, moff & 0xFFFFFF, moff >> 24))
                else:
                    members.append(Member(self._str(mname, tid), mtype, moff, 0))
            return _replace(base, members=tuple(members))
        if kind == ENUM:
            signed = kflag
            vals = []
            for ename, val in buf.iter_unpack("Ii", x, vlen, what):
                vals.append(EnumValue(self._str(ename, tid), val if signed else val & U32_MAX))
            return _replace(base, enum_values=tuple(vals))
        if kind == ENUM64:
            vals = []
            for ename, lo, hi in buf.iter_unpack("III", x, vlen, what):
                v = (hi << 32) | lo
                if kflag and v >> 63:
                    v -= 1 << 64
                vals.append(EnumValue(self._str(ename, tid), v))
            return _replace(base, enum_values=tuple(vals))
        if kind == FUNC_PROTO:
            return _replace(base, params=tuple(Param(self._str(p, tid), pt)
                                               for p, pt in buf.iter_unpack("II", x, vlen, what)))
        if kind == VAR:
            return _replace(base, linkage=buf.u32(x, what))
        if kind == FUNC:
            return _replace(base, linkage=vlen)
        if kind == DATASEC:
            return _replace(base, secinfos=tuple(VarSecinfo(*v)
                                                 for v in buf.iter_unpack("III", x, vlen, what)))
        if kind == DECL_TAG:
            return _replace(base, component_idx=buf.unpack("i", x, what)[0])
        return base

    def __iter__(self):
        for tid in range(1, self.count):
            yield self.type(tid)

    # -- resolution (libbpf semantics) ------------------------------------------------------
    def skip_mods_and_typedefs(self, tid: int) -> int:
        """Follow TYPEDEF/VOLATILE/CONST/RESTRICT/TYPE_TAG to the underlying type id."""
        for _ in range(MAX_RESOLVE_DEPTH + 1):
            t = self.type(tid)
            if t.kind not in _MODS:
                return tid
            tid = t.type
        raise ParseError(f"BTF type [{tid}]: modifier chain deeper than {MAX_RESOLVE_DEPTH} "
                         "(a cycle?)", section=".BTF")

    def resolve_size(self, tid: int) -> int:
        """Size in bytes of type ``tid``, as libbpf's ``btf__resolve_size``."""
        start = tid
        nelems = 1
        t = self.type(tid)
        for _ in range(MAX_RESOLVE_DEPTH):
            k = t.kind
            if k == 0:
                break
            if k in (INT, STRUCT, UNION, ENUM, ENUM64, DATASEC, FLOAT):
                size = t.size
                if nelems and size > U32_MAX // nelems:
                    raise ParseError(f"BTF type [{start}]: size {nelems} x {size} bytes "
                                     "exceeds 4 GiB", section=".BTF")
                return nelems * size
            if k == PTR:
                if nelems and PTR_SIZE > U32_MAX // nelems:
                    raise ParseError(f"BTF type [{start}]: size exceeds 4 GiB", section=".BTF")
                return nelems * PTR_SIZE
            if k in _MODS or k in (VAR, DECL_TAG):
                tid = t.type
            elif k == ARRAY:
                elem, _idx, n = t.array  # type: ignore[misc]
                if nelems and n > U32_MAX // nelems:
                    raise ParseError(f"BTF type [{start}]: array of {nelems} x {n} elements "
                                     "exceeds 4 GiB", section=".BTF")
                nelems *= n
                tid = elem
            else:
                raise ParseError(f"BTF type [{start}]: a {t.kind_name} has no size",
                                 section=".BTF")
            t = self.type(tid)
        else:
            raise ParseError(f"BTF type [{start}]: type chain deeper than {MAX_RESOLVE_DEPTH} "
                             "(a cycle?)", section=".BTF")
        raise ParseError(f"BTF type [{start}] resolves to void, which has no size",
                         section=".BTF")

    def align_of(self, tid: int, _depth: int = 0) -> int:
        """Alignment of type ``tid``, as libbpf's ``btf__align_of``."""
        if _depth > MAX_RESOLVE_DEPTH:
            raise ParseError(f"BTF type [{tid}]: nesting deeper than {MAX_RESOLVE_DEPTH}",
                             section=".BTF")
        t = self.type(tid)
        k = t.kind
        if k in (INT, ENUM, ENUM64, FLOAT):
            return max(1, min(PTR_SIZE, t.size))
        if k == PTR:
            return PTR_SIZE
        if k in _MODS:
            return self.align_of(t.type, _depth + 1)
        if k == ARRAY:
            return self.align_of(t.array[0], _depth + 1)  # type: ignore[index]
        if k in (STRUCT, UNION):
            max_align = 1
            for m in t.members:
                a = self.align_of(m.type, _depth + 1)
                max_align = max(max_align, a)
                if m.bitfield_size == 0 and m.bit_offset % (8 * a):
                    return 1
            return 1 if t.size % max_align else max_align
        raise ParseError(f"BTF type [{tid}]: a {t.kind_name} has no alignment", section=".BTF")

    def type_name(self, tid: int, _depth: int = 0) -> str:
        """A short C-like spelling of type ``tid`` for people (``struct ct_key``, ``__u32[4]``)."""
        if _depth > 8:
            return "..."
        t = self.type(tid)
        k = t.kind
        if k == 0:
            return "void"
        if k in (STRUCT, UNION, ENUM, ENUM64, FWD):
            kw = {STRUCT: "struct", UNION: "union", ENUM: "enum", ENUM64: "enum",
                  FWD: "union" if t.kflag else "struct"}[k]
            return f"{kw} {t.name}" if t.name else f"{kw} <anon>"
        if k in (INT, FLOAT, TYPEDEF, FUNC, VAR, DATASEC):
            return t.name or KIND_NAMES[k].lower()
        if k == PTR:
            return self.type_name(t.type, _depth + 1) + " *"
        if k == ARRAY:
            return f"{self.type_name(t.array[0], _depth + 1)}[{t.array[2]}]"  # type: ignore[index]
        if k in (VOLATILE, CONST, RESTRICT, TYPE_TAG, DECL_TAG):
            return self.type_name(t.type, _depth + 1)
        if k == FUNC_PROTO:
            return "func"
        return KIND_NAMES.get(k, "?")


def _replace(t: BtfType, **kw) -> BtfType:
    return BtfType(t.id, t.kind, t.name, t.vlen, t.kflag, t.size_or_type,
                   kw.get("int_encoding", 0), kw.get("array"), kw.get("members", ()),
                   kw.get("enum_values", ()), kw.get("params", ()), kw.get("linkage", 0),
                   kw.get("secinfos", ()), kw.get("component_idx", -1))
