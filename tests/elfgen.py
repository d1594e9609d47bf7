"""Tiny writers for synthetic ELF and BTF bytes, for tests that need objects no compiler
would produce (corrupt offsets, cycles, absurd sizes, other machines)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field


@dataclass
class Sec:
    name: str
    type: int = 1            # SHT_PROGBITS
    flags: int = 0
    data: bytes = b""
    link: int = 0
    info: int = 0
    entsize: int = 0
    size: int | None = None  # for NOBITS


def build_elf(sections: list[Sec], *, little: bool = True, machine: int = 247,
              e_type: int = 1) -> bytes:
    """A 64-bit ELF with ``sections`` (section 0 and .shstrtab are added)."""
    e = "<" if little else ">"
    shstr = b"\0"
    names = []
    for s in sections + [Sec(".shstrtab", type=3)]:
        names.append(len(shstr))
        shstr += s.name.encode() + b"\0"
    all_secs = sections + [Sec(".shstrtab", type=3, data=shstr)]
    body = b""
    offsets = []
    off = 64
    for s in all_secs:
        pad = (-off) % 8
        body += b"\0" * pad
        off += pad
        offsets.append(off)
        if s.type != 8:
            body += s.data
            off += len(s.data)
    pad = (-off) % 8
    body += b"\0" * pad
    off += pad
    shoff = off
    shdrs = struct.pack(e + "IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    for s, n, o in zip(all_secs, names, offsets):
        size = s.size if s.size is not None else len(s.data)
        shdrs += struct.pack(e + "IIQQQQIIQQ", n, s.type, s.flags, 0, o, size, s.link, s.info,
                             8, s.entsize)
    ident = b"\x7fELF" + bytes([2, 1 if little else 2, 1, 0]) + b"\0" * 8
    hdr = ident + struct.pack(e + "HHIQQQIHHHHHH", e_type, machine, 1, 0, 0, shoff, 0, 64, 0, 0,
                              64, len(all_secs) + 1, len(all_secs))
    return hdr + body + shdrs


def symtab(symbols: list[tuple[str, int, int, int, int, int]], *, little: bool = True
           ) -> tuple[bytes, bytes]:
    """(symtab bytes, strtab bytes) for (name, value, size, bind, type, shndx) tuples."""
    e = "<" if little else ">"
    strtab = b"\0"
    out = struct.pack(e + "IBBHQQ", 0, 0, 0, 0, 0, 0)
    for name, value, size, bind, typ, shndx in symbols:
        off = len(strtab)
        strtab += name.encode() + b"\0"
        out += struct.pack(e + "IBBHQQ", off, (bind << 4) | typ, 0, shndx, value, size)
    return out, strtab


@dataclass
class BtfBuilder:
    """Appends raw BTF types; ids start at 1 in the order added."""

    little: bool = True
    types: bytearray = field(default_factory=bytearray)
    strings: bytearray = field(default_factory=lambda: bytearray(b"\0"))
    count: int = 0

    def s(self, name: str) -> int:
        if not name:
            return 0
        off = len(self.strings)
        self.strings += name.encode() + b"\0"
        return off

    def _add(self, name: str, kind: int, vlen: int, size_or_type: int, extra: bytes = b"",
             kflag: bool = False) -> int:
        e = "<" if self.little else ">"
        info = (kind << 24) | vlen | (1 << 31 if kflag else 0)
        self.types += struct.pack(e + "III", self.s(name), info, size_or_type) + extra
        self.count += 1
        return self.count

    def int_(self, name: str, size: int) -> int:
        e = "<" if self.little else ">"
        return self._add(name, 1, 0, size, struct.pack(e + "I", size * 8))

    def ptr(self, to: int) -> int:
        return self._add("", 2, 0, to)

    def array(self, elem: int, n: int, index: int = 1) -> int:
        e = "<" if self.little else ">"
        return self._add("", 3, 0, 0, struct.pack(e + "III", elem, index, n))

    def struct(self, name: str, size: int, members: list[tuple[str, int, int]]) -> int:
        e = "<" if self.little else ">"
        extra = b"".join(struct.pack(e + "III", self.s(n), t, off) for n, t, off in members)
        return self._add(name, 4, len(members), size, extra)

    def typedef(self, name: str, to: int) -> int:
        return self._add(name, 8, 0, to)

    def var(self, name: str, t: int, linkage: int = 1) -> int:
        e = "<" if self.little else ">"
        return self._add(name, 14, 0, t, struct.pack(e + "I", linkage))

    def datasec(self, name: str, size: int, vars_: list[tuple[int, int, int]]) -> int:
        e = "<" if self.little else ">"
        extra = b"".join(struct.pack(e + "III", *v) for v in vars_)
        return self._add(name, 15, len(vars_), size, extra)

    def raw(self, kind: int, vlen: int = 0, size_or_type: int = 0, extra: bytes = b"") -> int:
        return self._add("", kind, vlen, size_or_type, extra)

    def build(self) -> bytes:
        e = "<" if self.little else ">"
        hdr = struct.pack(e + "HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(self.types), len(self.types),
                          len(self.strings))
        return hdr + bytes(self.types) + bytes(self.strings)


def map_def_struct(b: BtfBuilder, int_id: int, fields: dict[str, int],
                   key: int | None = None, value: int | None = None) -> int:
    """A libbpf map definition struct: ``__uint(name, N)`` members and __type(key/value)."""
    members = []
    off = 0
    for name, n in fields.items():
        members.append((name, b.ptr(b.array(int_id, n)), off))
        off += 64
    if key is not None:
        members.append(("key", b.ptr(key), off))
        off += 64
    if value is not None:
        members.append(("value", b.ptr(value), off))
        off += 64
    return b.struct("", off // 8, members)


def btf_map_object(maps: list[tuple[str, dict[str, int], int | None, int | None]] | None = None,
                   *, little: bool = True, btf: BtfBuilder | None = None,
                   extra_sections: list[Sec] | None = None) -> bytes:
    """An object with BTF-defined maps: (name, {field: n}, key size, value size)."""
    b = btf or BtfBuilder(little=little)
    u32 = b.int_("unsigned int", 4)
    vars_ = []
    syms = []
    off = 0
    for name, fields, ks, vs in maps or []:
        key = b.array(b.int_("char", 1), ks) if ks is not None else None
        val = b.array(b.int_("char", 1), vs) if vs is not None else None
        st = map_def_struct(b, u32, fields, key, val)
        size = 8 * (len(fields) + (ks is not None) + (vs is not None))
        v = b.var(name, st)
        vars_.append((v, off, size))
        syms.append((name, off, size, 1, 1, 1))  # GLOBAL OBJECT in section 1 (.maps)
        off += size
    b.datasec(".maps", off, vars_)
    st, strs = symtab(syms, little=little)
    secs = [Sec(".maps", flags=3, data=b"\0" * off), Sec(".BTF", data=b.build())]
    secs += extra_sections or []
    n = len(secs)
    secs += [Sec(".symtab", type=2, data=st, link=n + 2, entsize=24, info=1),
             Sec(".strtab", type=3, data=strs)]
    return build_elf(secs, little=little)


def one_map_object(build_key, build_value=None) -> bytes:
    """An object with one BTF hash map ``m`` whose key (and value) types the callbacks add to
    a BtfBuilder, e.g. a type cycle or an absurd array, for tests of corrupt BTF."""
    b = BtfBuilder()
    key = build_key(b)
    u32 = b.int_("u32", 4)
    value = build_value(b) if build_value is not None else u32
    st = map_def_struct(b, u32, {"type": 1, "max_entries": 4}, key, value)
    v = b.var("m", st)
    b.datasec(".maps", 32, [(v, 0, 32)])
    st_, strs = symtab([("m", 0, 32, 1, 1, 1)])
    return build_elf([Sec(".maps", flags=3, data=b"\0" * 32), Sec(".BTF", data=b.build()),
                      Sec(".symtab", type=2, data=st_, link=4, entsize=24, info=1),
                      Sec(".strtab", type=3, data=strs)])


def type_cycle(b: BtfBuilder) -> int:
    """typedef A -> typedef B -> typedef A; returns A's id."""
    first = b.count + 1
    b.typedef("A", first + 1)
    b.typedef("B", first)
    return first
