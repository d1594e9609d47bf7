"""BTF (BPF Type Format) parser: every kind up to ENUM64, type resolution and sizeof.

Types are indexed in one pass and decoded on demand. Resolution mirrors libbpf
(``btf__resolve_size``, ``btf__align_of``, ``skip_mods_and_typedefs``): bounded depth, so a
cycle or an absurd chain is an error, never a hang; sizes beyond u32 are errors (E2BIG).
"""

from __future__ import annotations

from array import array

from ..errors import ParseError
from ..values import Record, items
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
_SIZED = frozenset((INT, STRUCT, UNION, ENUM, ENUM64, DATASEC, FLOAT, PTR))


class Member(Record):
    __slots__ = ()
    _fields = ("name", "type", "bit_offset", "bitfield_size")
    name, type, bit_offset, bitfield_size = items(_fields)

    def __new__(cls, name: str, type: int, bit_offset: int, bitfield_size: int):
        return tuple.__new__(cls, (name, type, bit_offset, bitfield_size))


class EnumValue(Record):
    __slots__ = ()
    _fields = ("name", "value")
    name, value = items(_fields)

    def __new__(cls, name: str, value: int):
        return tuple.__new__(cls, (name, value))


class Param(Record):
    __slots__ = ()
    _fields = ("name", "type")
    name, type = items(_fields)

    def __new__(cls, name: str, type: int):
        return tuple.__new__(cls, (name, type))


class VarSecinfo(Record):
    __slots__ = ()
    _fields = ("type", "offset", "size")
    type, offset, size = items(_fields)

    def __new__(cls, type: int, offset: int, size: int):
        return tuple.__new__(cls, (type, offset, size))


class BtfType(Record):
    """One decoded BTF type. ``size_or_type`` is the size for sized kinds, else a type id.

    An immutable record like :class:`Member`: a named tuple because a large object or a
    kernel decodes thousands of them (a frozen dataclass costs ~30x more to make). The
    kind-specific payload: ``int_encoding`` for INT (the raw u32: encoding<<24 | offset<<16
    | bits); ``array`` for ARRAY (elem type, index type, nelems); ``members`` for STRUCT and
    UNION; ``enum_values`` for ENUM and ENUM64; ``params`` for FUNC_PROTO; ``linkage`` for
    VAR (and FUNC: its vlen); ``secinfos`` for DATASEC; ``component_idx`` for DECL_TAG."""

    __slots__ = ()
    _fields = ("id", "kind", "name", "vlen", "kflag", "size_or_type", "int_encoding", "array",
               "members", "enum_values", "params", "linkage", "secinfos", "component_idx")
    (id, kind, name, vlen, kflag, size_or_type, int_encoding, array, members, enum_values,
     params, linkage, secinfos, component_idx) = items(_fields)

    def __new__(cls, id: int, kind: int, name: str, vlen: int, kflag: bool, size_or_type: int,
                int_encoding: int = 0, array: tuple[int, int, int] | None = None,
                members: tuple[Member, ...] = (), enum_values: tuple[EnumValue, ...] = (),
                params: tuple[Param, ...] = (), linkage: int = 0,
                secinfos: tuple[VarSecinfo, ...] = (), component_idx: int = -1):
        return tuple.__new__(cls, (id, kind, name, vlen, kflag, size_or_type, int_encoding,
                                  array, members, enum_values, params, linkage, secinfos,
                                  component_idx))

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


# Bytes after the 12-byte header: _EXTRA_BASE[kind] + _EXTRA_MULT[kind] * vlen.
_EXTRA_BASE = [0] * 32
_EXTRA_MULT = [0] * 32
for _k in (INT, VAR, DECL_TAG):
    _EXTRA_BASE[_k] = 4
_EXTRA_BASE[ARRAY] = 12
for _k in (STRUCT, UNION, DATASEC, ENUM64):
    _EXTRA_MULT[_k] = 12
for _k in (ENUM, FUNC_PROTO):
    _EXTRA_MULT[_k] = 8


#: the kernel's BTF_MAX_TYPE (include/uapi/linux/btf.h): type ids are 20 bits; a vmlinux
#: BTF has about 150,000 types
MAX_TYPES = 0x000FFFFF


class _Checked:
    """The type section's reads for :meth:`Btf._decode`, without bounds checks: the index
    pass proved that every type's header and payload lie inside the section."""

    __slots__ = ("data", "_view", "_endian")

    def __init__(self, types: Bytes):
        self.data = types.data
        self._view = memoryview(types.data)
        self._endian = types.endian

    def u32(self, offset: int, _what: str) -> int:
        return packer(self._endian, "I").unpack_from(self.data, offset)[0]

    def unpack(self, fmt: str, offset: int, _what: str) -> tuple:
        return packer(self._endian, fmt).unpack_from(self.data, offset)

    def iter_unpack(self, fmt: str, offset: int, count: int, _what: str):
        st = packer(self._endian, fmt)
        return st.iter_unpack(self._view[offset:offset + st.size * count]) if count else ()


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
        # the type section is a view, not a copy (only unpacked from): a BTF as large as an
        # unpack budget is held once
        start = hdr_len + type_off
        buf.check(start, type_len, "BTF type section")
        self._types = Bytes(memoryview(data)[start:start + type_len], f"{section} types",
                            base=buf.base + start, endian=endian)
        self._strs = buf.sub(hdr_len + str_off, str_len, "BTF string section",
                             section=f"{section} strings")
        if str_len and self._strs.data[-1:] != b"\0":
            raise ParseError("BTF string section is not NUL-terminated",
                             section=section, offset=hdr_len + str_off + str_len - 1)
        # columns, not lists: a list holds an int object per type (a forged BTF of a million
        # types, within the unpack budget, cost ~55 MiB more as lists)
        self._offsets = array("I", (0,))
        self._kinds = bytearray(1)
        self._sots = array("I", (0,))
        self._name_offs = array("I", (0,))
        self._strcache: dict[int, str] = {}
        self._iii = packer(endian, "III").unpack_from
        self._datasecs: dict[str, int] = {}
        self._cache: dict[int, BtfType] = {0: _VOID}
        # answers about a type id, worked out once: an object's map definitions ask the
        # same few (`int (*)[1]`, `__u32`) for every map (large_synthetic.o: 6,085 asks of
        # ptr_array_nelems for 79 ids, 2,262 of resolve_size and type_name for 34)
        self._nelems: dict[int, int | None] = {}
        self._sizes: dict[int, int] = {}
        self._names: dict[int, str] = {}
        self._index()
        self._reads = _Checked(self._types)

    # -- indexing ---------------------------------------------------------------------------
    def _index(self) -> None:
        """One pass over the type section: offset, kind, size-or-type and name of each type."""
        data = self._types.data
        n = len(data)
        unpack = packer(self.endian, "III").unpack_from
        offsets, kinds, sots, names = self._offsets, self._kinds, self._sots, self._name_offs
        base, mult = _EXTRA_BASE, _EXTRA_MULT
        off = 0
        while off < n:
            if len(offsets) > MAX_TYPES:
                raise self._types.error(f"more than {MAX_TYPES:,} types (the kernel's "
                                        "BTF_MAX_TYPE): not a BTF any kernel loads", off)
            if off + 12 > n:
                raise self._types.error(f"type [{len(offsets)}] header is cut short", off)
            name_off, info, st = unpack(data, off)
            kind = (info >> 24) & 0x1F
            if not INT <= kind <= ENUM64:
                raise self._types.error(f"type [{len(offsets)}] has unknown BTF kind {kind}", off)
            offsets.append(off)
            kinds.append(kind)
            sots.append(st)
            names.append(name_off)
            off += 12 + base[kind] + mult[kind] * (info & 0xFFFF)
        if off != n:
            raise self._types.error(f"type [{len(offsets) - 1}] runs past the type section", n)
        for tid in [t for t, k in enumerate(kinds) if k == DATASEC]:
            self._datasecs.setdefault(self._str(names[tid], tid), tid)

    def _str(self, off: int, tid: int) -> str:
        if off == 0:
            return ""
        name = self._strcache.get(off)
        if name is None:
            name = self._strcache[off] = self._strs.cstr(off, f"name of type [{tid}]")
        return name

    # -- access -----------------------------------------------------------------------------
    @property
    def count(self) -> int:
        """Number of type ids, void included (valid ids are 0 .. count-1)."""
        return len(self._offsets)

    def _check_id(self, tid: int) -> None:
        if not 0 <= tid < len(self._offsets):
            raise ParseError(f"BTF type id [{tid}] is out of range "
                             f"({len(self._offsets) - 1} types)", section=".BTF")

    def kind(self, tid: int) -> int:
        """The BTF kind of ``tid`` (0 for void), without decoding the type."""
        if not 0 <= tid < len(self._kinds):
            self._check_id(tid)
        return self._kinds[tid]

    def ref(self, tid: int) -> int:
        """The size (sized kinds) or referenced type id (others) of ``tid``."""
        if not 0 <= tid < len(self._sots):
            self._check_id(tid)
        return self._sots[tid]

    def array_info(self, tid: int) -> tuple[int, int, int]:
        """(element type, index type, nelems) of ARRAY ``tid`` (its 12 bytes were bounds-checked
        by the index pass)."""
        return self._iii(self._types.data, self._offsets[tid] + 12)

    def ptr_array_nelems(self, tid: int) -> int | None:
        """``nelems`` of the ARRAY that ``tid`` (after modifiers and typedefs) points to, the
        shape of libbpf's ``__uint(name, N)`` (``int (*name)[N]``); None for any other shape
        (the caller then says what it found)."""
        try:
            return self._nelems[tid]
        except KeyError:
            n = self._nelems[tid] = self._ptr_array_nelems(tid)
            return n

    def _ptr_array_nelems(self, tid: int) -> int | None:
        kinds, sots = self._kinds, self._sots
        n = len(kinds)
        for _ in range(MAX_RESOLVE_DEPTH + 1):
            if not 0 <= tid < n:
                return None
            k = kinds[tid]
            if k not in _MODS:
                break
            tid = sots[tid]
        else:
            return None
        if k != PTR:
            return None
        arr = sots[tid]
        if not 0 <= arr < n or kinds[arr] != ARRAY:
            return None
        return self._iii(self._types.data, self._offsets[arr] + 12)[2]

    def name_of(self, tid: int) -> str:
        self._check_id(tid)
        return self._str(self._name_offs[tid], tid)

    def datasec(self, name: str) -> int | None:
        """Id of the DATASEC called ``name`` (first one), or None."""
        return self._datasecs.get(name)

    def type(self, tid: int) -> BtfType:
        t = self._cache.get(tid)
        if t is not None:
            return t
        self._check_id(tid)
        t = self._decode(tid)
        self._cache[tid] = t
        return t

    def _decode(self, tid: int) -> BtfType:
        off = self._offsets[tid]
        buf = self._reads
        name_off, info, st = self._iii(buf.data, off)
        kind = (info >> 24) & 0x1F
        vlen = info & 0xFFFF
        kflag = bool(info >> 31)
        name = self._str(name_off, tid)
        x = off + 12
        what = ""
        new = tuple.__new__
        extra: tuple = (0, None, (), (), (), 0, (), -1)
        if kind == INT:
            extra = (buf.u32(x, what), None, (), (), (), 0, (), -1)
        elif kind == ARRAY:
            extra = (0, buf.unpack("III", x, what), (), (), (), 0, (), -1)
        elif kind == STRUCT or kind == UNION:
            cache = self._strcache
            s = self._str
            recs = buf.iter_unpack("III", x, vlen, what)
            if kflag:
                members = tuple([new(Member, (cache.get(mn) or s(mn, tid), mt, mo & 0xFFFFFF,
                                              mo >> 24)) for mn, mt, mo in recs])
            else:
                members = tuple([new(Member, (cache.get(mn) or s(mn, tid), mt, mo, 0))
                                 for mn, mt, mo in recs])
            extra = (0, None, members, (), (), 0, (), -1)
        elif kind == ENUM:
            vals = tuple([EnumValue(self._str(en, tid), v if kflag else v & U32_MAX)
                          for en, v in buf.iter_unpack("Ii", x, vlen, what)])
            extra = (0, None, (), vals, (), 0, (), -1)
        elif kind == ENUM64:
            out = []
            for en, lo, hi in buf.iter_unpack("III", x, vlen, what):
                v = (hi << 32) | lo
                if kflag and v >> 63:
                    v -= 1 << 64
                out.append(EnumValue(self._str(en, tid), v))
            extra = (0, None, (), tuple(out), (), 0, (), -1)
        elif kind == FUNC_PROTO:
            params = tuple([Param(self._str(p, tid), pt)
                            for p, pt in buf.iter_unpack("II", x, vlen, what)])
            extra = (0, None, (), (), params, 0, (), -1)
        elif kind == VAR:
            extra = (0, None, (), (), (), buf.u32(x, what), (), -1)
        elif kind == FUNC:
            extra = (0, None, (), (), (), vlen, (), -1)
        elif kind == DATASEC:
            infos = tuple([new(VarSecinfo, v) for v in buf.iter_unpack("III", x, vlen, what)])
            extra = (0, None, (), (), (), 0, infos, -1)
        elif kind == DECL_TAG:
            extra = (0, None, (), (), (), 0, (), buf.unpack("i", x, what)[0])
        return new(BtfType, (tid, kind, name, vlen, kflag, st) + extra)

    def __iter__(self):
        for tid in range(1, self.count):
            yield self.type(tid)

    # -- resolution (libbpf semantics) ------------------------------------------------------
    def skip_mods_and_typedefs(self, tid: int) -> int:
        """Follow TYPEDEF/VOLATILE/CONST/RESTRICT/TYPE_TAG to the underlying type id."""
        kinds, sots = self._kinds, self._sots
        for _ in range(MAX_RESOLVE_DEPTH + 1):
            if not 0 <= tid < len(kinds):
                self._check_id(tid)
            if kinds[tid] not in _MODS:
                return tid
            tid = sots[tid]
        raise ParseError(f"BTF type [{tid}]: modifier chain deeper than {MAX_RESOLVE_DEPTH} "
                         "(a cycle?)", section=".BTF")

    def resolve_size(self, tid: int) -> int:
        """Size in bytes of type ``tid``, as libbpf's ``btf__resolve_size``."""
        size = self._sizes.get(tid)
        if size is None:
            size = self._sizes[tid] = self._resolve_size(tid)
        return size

    def _resolve_size(self, tid: int) -> int:
        start = tid
        nelems = 1
        kinds, sots = self._kinds, self._sots
        for _ in range(MAX_RESOLVE_DEPTH):
            if not 0 <= tid < len(kinds):
                self._check_id(tid)
            k = kinds[tid]
            if k == 0:
                break
            if k in _SIZED:
                size = sots[tid] if k != PTR else PTR_SIZE
                if nelems and size > U32_MAX // nelems:
                    raise ParseError(f"BTF type [{start}]: size {nelems} x {size} bytes "
                                     "exceeds 4 GiB", section=".BTF")
                return nelems * size
            if k in _MODS or k == VAR or k == DECL_TAG:
                tid = sots[tid]
            elif k == ARRAY:
                elem, _idx, n = self.array_info(tid)
                if nelems and n > U32_MAX // nelems:
                    raise ParseError(f"BTF type [{start}]: array of {nelems} x {n} elements "
                                     "exceeds 4 GiB", section=".BTF")
                nelems *= n
                tid = elem
            else:
                raise ParseError(f"BTF type [{start}]: a {KIND_NAMES[k]} has no size",
                                 section=".BTF")
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
        if _depth:
            return self._type_name(tid, _depth)
        name = self._names.get(tid)
        if name is None:
            name = self._names[tid] = self._type_name(tid, 0)
        return name

    def _type_name(self, tid: int, _depth: int) -> str:
        k = self.kind(tid)
        if k in (INT, FLOAT, TYPEDEF, STRUCT, UNION) and _depth == 0:
            name = self.name_of(tid)
            if name:
                return name if k in (INT, FLOAT, TYPEDEF) else (
                    f"struct {name}" if k == STRUCT else f"union {name}")
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
