"""Every map on the host in one stream: a BPF ``bpf_map`` iterator writing each map's info and
its entry count.

Listing the maps from user space costs a ``BPF_MAP_GET_NEXT_ID``, a ``BPF_MAP_GET_FD_BY_ID``
and a ``BPF_OBJ_GET_INFO_BY_FD`` per map, and counting a hash map's entries walks its keys. A
small tracing program attached to the ``bpf_map`` iterator (one call per map on the host)
writes, for each map, the fields ``bpf_map_info`` reports (id, type, key and value size,
max_entries, flags, map_extra, BTF id, name) and the frozen flag, read from the kernel's
``struct bpf_map``, and the map's entry count: since 6.6 the kernel keeps a per-CPU count of
inserts and deletes in every hash map (preallocated, LRU and per-CPU ones too:
``bpf_map_inc_elem_count`` in kernel/bpf/hashtab.c), and the kfunc ``bpf_map_sum_elem_count``
sums it. Other map types (arrays, LPM tries, ...) keep no such count and are counted as
before. On a kernel without the kfunc the same program runs without the count
(:func:`map_infos_raw`); :func:`map_counts` needs it.

memlock is not among the fields: the kernel computes it when fdinfo is read
(``map->ops->map_mem_usage``), and that is where it is read (host/live.py).

As with :mod:`.owner_iter`, the program is written here as instructions, with the kfunc's and
the iterator's BTF ids and the field offsets taken from the running kernel's BTF. It needs
CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); otherwise :class:`CountsUnavailable` is raised
and the caller lists the maps one by one.
"""

from __future__ import annotations

import os
import struct
from bpfmem.values import dataclass, fields

from bpfmem.errors import HostError, ParseError
from bpfmem.parse.insn import (Jump, Label, alu64, assemble, call_kfunc, exit_insn, ldx,
                               st, stx)
from bpfmem.uapi import MapType as T

from . import cache
from .owner_iter import HOST_BTF, run_iterator, seq_write

# id, type, key_size, value_size, max_entries, map_flags, map_extra, btf_id, frozen,
# count (-1: the kernel has no count), name (NUL padded)
RECORD = struct.Struct("=IIIIIIQIIq16s")
NO_COUNT = -1
# map types whose count the kernel keeps (the hash table family)
KERNEL_COUNTED = frozenset({T.HASH, T.PERCPU_HASH, T.LRU_HASH, T.LRU_PERCPU_HASH,
                            T.HASH_OF_MAPS})
ITERATOR_NAME = "bpfmem_maps"


class CountsUnavailable(HostError):
    """The map iterator (or its in-kernel count) cannot run here (the reason says why)."""


@dataclass(frozen=True)
class CountLayout:
    """What the program needs of the running kernel: BTF ids and ``struct bpf_map`` offsets
    (-1: the kernel's struct has no such field; the record then holds 0)."""
    attach_btf_id: int        # FUNC bpf_iter_bpf_map
    kfunc_btf_id: int         # FUNC bpf_map_sum_elem_count (0: none, before 6.6)
    map_id: int               # offsetof(struct bpf_map, id)
    map_type: int = -1
    key_size: int = -1
    value_size: int = -1
    max_entries: int = -1
    map_flags: int = -1
    map_extra: int = -1       # 5.16+
    btf: int = -1             # offsetof(struct bpf_map, btf)
    btf_id: int = -1          # offsetof(struct btf, id)
    name: int = -1
    frozen: int = -1


_MAP_FIELDS = {"id": 4, "map_type": 4, "key_size": 4, "value_size": 4, "max_entries": 4,
               "map_flags": 4, "map_extra": 8, "btf": 8, "name": 16, "frozen": 1}
_REQUIRED = ("id", "map_type", "key_size", "value_size", "max_entries", "map_flags", "btf",
             "name")


def parse_map_layout(btf_data: bytes) -> CountLayout:
    """The layout from vmlinux BTF bytes (pure); ``kfunc_btf_id`` is 0 on a kernel without
    ``bpf_map_sum_elem_count``."""
    from bpfmem.parse.btf import FUNC, STRUCT, Btf
    btf = Btf(btf_data, section="vmlinux BTF")
    funcs = {"bpf_iter_bpf_map": 0, "bpf_map_sum_elem_count": 0}
    fields: dict[str, int] = {}
    btf_id = None
    for tid in range(1, btf.count):
        kind = btf.kind(tid)
        if kind == FUNC:
            name = btf.name_of(tid)
            if name in funcs and not funcs[name]:
                funcs[name] = tid
        elif kind == STRUCT:
            name = btf.name_of(tid)
            if name == "bpf_map" and not fields:
                for m in btf.type(tid).members:
                    if m.name in _MAP_FIELDS:
                        if m.bitfield_size or m.bit_offset % 8:
                            raise ParseError(f"bpf_map.{m.name} is a bit field")
                        fields[m.name] = m.bit_offset // 8
            elif name == "btf" and btf_id is None:
                btf_id = next((m.bit_offset // 8 for m in btf.type(tid).members
                               if m.name == "id"), None)
    missing = ([] if funcs["bpf_iter_bpf_map"] else ["bpf_iter_bpf_map"]) + [
        f"bpf_map.{f}" for f in _REQUIRED if f not in fields] + (
        ["btf.id"] if btf_id is None else [])
    if missing:
        raise ParseError("the kernel's BTF lacks " + ", ".join(missing))
    return CountLayout(funcs["bpf_iter_bpf_map"], funcs["bpf_map_sum_elem_count"],
                       fields["id"], fields["map_type"], fields["key_size"],
                       fields["value_size"], fields["max_entries"], fields["map_flags"],
                       fields.get("map_extra", -1), fields["btf"], btf_id, fields["name"],
                       fields.get("frozen", -1))


def parse_count_layout(btf_data: bytes) -> CountLayout:
    """:func:`parse_map_layout` of a kernel that keeps hash maps' element counts (6.6+);
    a ParseError otherwise."""
    lay = parse_map_layout(btf_data)
    if not lay.kfunc_btf_id:
        raise ParseError("the kernel's BTF lacks bpf_map_sum_elem_count (the kernel keeps no "
                         "map element counts before 6.6)")
    return lay


def program(lay: CountLayout) -> bytes:
    """For each map: seq_write (id, type, key_size, value_size, max_entries, map_flags,
    map_extra, btf->id, frozen, bpf_map_sum_elem_count(map) or -1, name). The record is
    built at fp - 64 (RECORD's layout)."""
    base = -RECORD.size
    u32 = [(lay.map_id, 0), (lay.map_type, 4), (lay.key_size, 8), (lay.value_size, 12),
           (lay.max_entries, 16), (lay.map_flags, 20)]
    body: list = [
        ldx(8, 6, 1, 0),                               # r6 = ctx->meta
        ldx(8, 7, 1, 8),                               # r7 = ctx->map
        Jump("jeq", 7, "out"),                         # if !map goto out
    ]
    for off, at in u32:                                # the u32 fields, as they are
        body += [ldx(4, 2, 7, off), stx(4, 10, 2, base + at)]
    body += ([ldx(8, 2, 7, lay.map_extra), stx(8, 10, 2, base + 24)] if lay.map_extra >= 0
             else [st(8, 10, base + 24, 0)])
    body += [
        st(4, 10, base + 32, 0),                       # btf id 0 unless map->btf
        ldx(8, 3, 7, lay.btf),                         # r3 = map->btf
        Jump("jeq", 3, "nobtf"),
        ldx(4, 2, 3, lay.btf_id),                      # r2 = btf->id
        stx(4, 10, 2, base + 32),
        Label("nobtf"),
    ]
    body += ([ldx(1, 2, 7, lay.frozen), stx(4, 10, 2, base + 36)] if lay.frozen >= 0
             else [st(4, 10, base + 36, 0)])
    body += [                                          # the name, 16 bytes (two loads)
        ldx(8, 2, 7, lay.name), stx(8, 10, 2, base + 48),
        ldx(8, 2, 7, lay.name + 8), stx(8, 10, 2, base + 56),
    ]
    if lay.kfunc_btf_id:
        body += [alu64("mov", 1, src=7),               # r1 = map
                 call_kfunc(lay.kfunc_btf_id),         # bpf_map_sum_elem_count
                 stx(8, 10, 0, base + 40)]
    else:
        body += [st(8, 10, base + 40, NO_COUNT)]
    body += [
        *seq_write(base, RECORD.size),
        Label("out"),
        alu64("mov", 0, imm=0),                        # r0 = 0
        exit_insn(),
    ]
    return assemble(body)


# ---- the light listing of a rescan ----------------------------------------------------
# A rescan knows every map it saw before (its info is fixed at creation): it needs the ids,
# the frozen flags, and the count only of the maps whose memlock follows their count (hash
# maps without preallocation), or of every counted map when entries are counted. The light
# program reads the id, type, flags and frozen flag and, for those maps only, the kernel's
# count (a cold read of 10,000 maps costs about 1 ms less); the others' count reads -1.
LIGHT = struct.Struct("=Iiq")           # id, frozen, count (-1: not read)
BPF_F_NO_PREALLOC = 1


def light_program(lay: CountLayout, every_count: bool) -> bytes:
    """For each map: seq_write (id, frozen, count), the count of a map the kernel counts
    (with ``every_count``: every such map; else those without preallocation), -1 of the
    others."""
    base = -LIGHT.size
    counted = sorted(KERNEL_COUNTED)
    body: list = [
        ldx(8, 6, 1, 0),                               # r6 = ctx->meta
        ldx(8, 7, 1, 8),                               # r7 = ctx->map
        Jump("jeq", 7, "out"),
        ldx(4, 2, 7, lay.map_id), stx(4, 10, 2, base),
        *([ldx(1, 2, 7, lay.frozen), stx(4, 10, 2, base + 4)] if lay.frozen >= 0
          else [st(4, 10, base + 4, 0)]),
        st(8, 10, base + 8, -1),
        ldx(4, 2, 7, lay.map_type),
    ]
    body += [Jump("jeq", 2, "counted", imm=int(t)) for t in counted]
    body += [Jump("ja", 0, "emit"), Label("counted")]
    if not every_count:
        body += [ldx(4, 3, 7, lay.map_flags),
                 Jump("jset", 3, "prealloc_no", imm=BPF_F_NO_PREALLOC),
                 Jump("ja", 0, "emit"),
                 Label("prealloc_no")]
    body += [alu64("mov", 1, src=7),
             call_kfunc(lay.kfunc_btf_id),
             stx(8, 10, 0, base + 8),
             Label("emit"),
             *seq_write(base, LIGHT.size),
             Label("out"),
             alu64("mov", 0, imm=0),
             exit_insn()]
    return assemble(body)


def light_columns(data: bytes) -> tuple[list[int], list[int], list[int]]:
    """(ids, counts, frozen flags) of a light listing (a count -1: not read)."""
    n = len(data) // LIGHT.size
    view = memoryview(data)[:n * LIGHT.size]
    words, quads = view.cast("i"), view.cast("q")
    return (view.cast("I")[0::4].tolist(), quads[1::2].tolist(), words[1::4].tolist())


def full_as_light(data: bytes, every_count: bool) -> tuple[list[int], list[int], list[int]]:
    """The light columns of a full listing's records: what the light program would have
    read of the same maps."""
    ids, counts, frozen = [], [], []
    for r in records(data):
        ids.append(r[0])
        frozen.append(r[8])
        counts.append(r[9] if r[1] in KERNEL_COUNTED and
                      (every_count or r[5] & BPF_F_NO_PREALLOC) else -1)
    return ids, counts, frozen


def map_light_raw(kept: dict | None, every_count: bool) -> bytes:
    """The :data:`LIGHT` record of every map on the host, in id order (the kernel's counts
    are needed: CountsUnavailable before 6.6)."""
    def make():
        lay = read_count_layout()
        return light_program(lay, every_count), lay.attach_btf_id
    return run_iterator(make, ITERATOR_NAME + ("_all" if every_count else "_light"),
                        CountsUnavailable, "map", kept)


def records(data: bytes):
    """The (id, type, key_size, value_size, max_entries, map_flags, map_extra, btf_id,
    frozen, count, name bytes) tuples of what the iterator wrote, in id order."""
    n = len(data) // RECORD.size
    return RECORD.iter_unpack(memoryview(data)[:n * RECORD.size])


def parse_records(data: bytes) -> dict[int, int]:
    """{map id: count} from what the iterator wrote (-1: the kernel keeps no count)."""
    return {r[0]: r[9] for r in records(data)}


def _layout_key() -> str:
    try:
        st_ = os.stat(HOST_BTF)
    except OSError as e:
        raise CountsUnavailable(f"no kernel BTF ({e.strerror})") from None
    return f"map-iter-v2|{os.uname().release}|{os.uname().version}|{st_.st_size}"


def read_map_layout() -> CountLayout:
    """The running kernel's layout, cached per kernel build (it holds no addresses)."""
    def build() -> CountLayout:
        try:
            with open(HOST_BTF, "rb") as f:
                return parse_map_layout(f.read())
        except (OSError, ParseError) as e:
            raise CountsUnavailable(str(e)) from None
    return cache.layout("count-iter-layout", _layout_key(), CountLayout, build)


def read_count_layout() -> CountLayout:
    """:func:`read_map_layout` where the kernel keeps element counts; CountsUnavailable
    otherwise."""
    lay = read_map_layout()
    if not lay.kfunc_btf_id:
        raise CountsUnavailable("the kernel's BTF lacks bpf_map_sum_elem_count (the kernel "
                                "keeps no map element counts before 6.6)")
    return lay


def map_counts() -> dict[int, int]:
    """{map id: entries} of every map on the host whose type the kernel counts
    (:data:`KERNEL_COUNTED`; the others are listed too, as 0: callers look only at those);
    every fd the program, its link and the iterator took is closed again."""
    read_count_layout()
    return parse_records(map_infos_raw())


def map_infos_raw(kept: dict | None = None, counts: bool = True) -> bytes:
    """The :data:`RECORD` of every map on the host, in id order, as the iterator wrote them
    (equal bytes: the same maps with the same info, frozen flags and counts; a count is -1
    on a kernel that keeps none, or without ``counts``: the program is then loaded without
    the kfunc, whose resolution is most of its verification, 1.1 -> 0.2 ms)."""
    def make():
        lay = read_map_layout()
        if not counts:
            lay = CountLayout(**{f.name: getattr(lay, f.name) for f in fields(lay)
                                 if f.name != "kfunc_btf_id"}, kfunc_btf_id=0)
        return program(lay), lay.attach_btf_id
    return run_iterator(make, ITERATOR_NAME if counts else ITERATOR_NAME + "_info",
                        CountsUnavailable, "map", kept)
