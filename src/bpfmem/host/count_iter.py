"""Every hash map's entry count from the kernel in one stream: a BPF ``bpf_map`` iterator.

Counting a map's entries from user space walks its keys (batch lookups, or one syscall per
key): a node of 10,000 hash maps costs 10,000 walks every scan even when nothing changed.
Since 6.6 the kernel keeps a per-CPU count of inserts and deletes in every hash map
(preallocated, LRU and per-CPU ones too: ``bpf_map_inc_elem_count`` in kernel/bpf/hashtab.c),
and the kfunc ``bpf_map_sum_elem_count`` sums it. A small tracing program attached to the
``bpf_map`` iterator (one call per map on the host) writes ``(map id, count)`` for each; other
map types (arrays, LPM tries, ...) keep no such count and are counted as before.

As with :mod:`.owner_iter`, the program is written here as instructions, with the kfunc's and
the iterator's BTF ids and one field offset taken from the running kernel's BTF. It needs
CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN) and a kernel with the kfunc; otherwise
:func:`map_counts` raises :class:`CountsUnavailable` and the caller walks the maps.
"""

from __future__ import annotations

import os
import struct
from dataclasses import asdict, dataclass

from bpfmem.errors import HostError, ParseError
from bpfmem.parse.insn import (Jump, Label, alu64, assemble, call, call_kfunc, exit_insn, ldx,
                               st, stx)
from bpfmem.uapi import MapType as T

from . import cache
from .owner_iter import HOST_BTF, HELPER_SEQ_WRITE, run_iterator

RECORD = struct.Struct("=IIq")          # map id, 0, count
# map types whose count the kernel keeps (the hash table family)
KERNEL_COUNTED = frozenset({T.HASH, T.PERCPU_HASH, T.LRU_HASH, T.LRU_PERCPU_HASH,
                            T.HASH_OF_MAPS})


class CountsUnavailable(HostError):
    """The in-kernel count cannot run here (the reason says why)."""


@dataclass(frozen=True)
class CountLayout:
    attach_btf_id: int        # FUNC bpf_iter_bpf_map
    kfunc_btf_id: int         # FUNC bpf_map_sum_elem_count
    map_id: int               # offsetof(struct bpf_map, id)


def parse_count_layout(btf_data: bytes) -> CountLayout:
    """The layout from vmlinux BTF bytes (pure)."""
    from bpfmem.parse.btf import FUNC, STRUCT, Btf
    btf = Btf(btf_data, section="vmlinux BTF")
    funcs = {"bpf_iter_bpf_map": 0, "bpf_map_sum_elem_count": 0}
    map_id = None
    for tid in range(1, btf.count):
        kind = btf.kind(tid)
        if kind == FUNC:
            name = btf.name_of(tid)
            if name in funcs and not funcs[name]:
                funcs[name] = tid
        elif kind == STRUCT and map_id is None and btf.name_of(tid) == "bpf_map":
            for m in btf.type(tid).members:
                if m.name == "id":
                    map_id = m.bit_offset // 8
    missing = [n for n, t in funcs.items() if not t] + (["bpf_map.id"] if map_id is None
                                                          else [])
    if missing:
        raise ParseError("the kernel's BTF lacks " + ", ".join(missing) +
                         (" (the kernel keeps no map element counts before 6.6)"
                          if "bpf_map_sum_elem_count" in missing else ""))
    return CountLayout(funcs["bpf_iter_bpf_map"], funcs["bpf_map_sum_elem_count"], map_id)


def program(lay: CountLayout) -> bytes:
    """For each map: seq_write (map->id, 0, bpf_map_sum_elem_count(map))."""
    return assemble([
        ldx(8, 6, 1, 0),                               # r6 = ctx->meta
        ldx(8, 7, 1, 8),                               # r7 = ctx->map
        Jump("jeq", 7, "out"),                         # if !map goto out
        ldx(4, 2, 7, lay.map_id),                      # r2 = map->id
        stx(4, 10, 2, -16),                            # *(u32 *)(fp - 16) = id
        st(4, 10, -12, 0),                             # *(u32 *)(fp - 12) = 0
        alu64("mov", 1, src=7),                        # r1 = map
        call_kfunc(lay.kfunc_btf_id),                  # bpf_map_sum_elem_count
        stx(8, 10, 0, -8),                             # *(u64 *)(fp - 8) = r0
        ldx(8, 1, 6, 0),                               # r1 = meta->seq
        alu64("mov", 2, src=10),                       # r2 = fp
        alu64("add", 2, imm=-16),                      # r2 -= 16
        alu64("mov", 3, imm=RECORD.size),              # r3 = 16
        call(HELPER_SEQ_WRITE),
        Label("out"),
        alu64("mov", 0, imm=0),                        # r0 = 0
        exit_insn(),
    ])


def parse_records(data: bytes) -> dict[int, int]:
    """{map id: count} from what the iterator wrote."""
    n = len(data) // RECORD.size
    return {i: c for i, _z, c in RECORD.iter_unpack(data[:n * RECORD.size])}


def read_count_layout() -> CountLayout:
    """The running kernel's layout, cached per kernel build (it holds no addresses)."""
    try:
        st = os.stat(HOST_BTF)
    except OSError as e:
        raise CountsUnavailable(f"no kernel BTF ({e.strerror})") from None
    key = f"count-iter-v1|{os.uname().release}|{os.uname().version}|{st.st_size}"
    d = cache.load("count-iter-layout", key)
    if d is not None:
        try:
            return CountLayout(**{k: int(d[k]) for k in CountLayout.__dataclass_fields__})
        except (ValueError, TypeError, KeyError):
            pass
    try:
        with open(HOST_BTF, "rb") as f:
            lay = parse_count_layout(f.read())
    except (OSError, ParseError) as e:
        raise CountsUnavailable(str(e)) from None
    cache.store("count-iter-layout", key, asdict(lay))
    return lay


def map_counts() -> dict[int, int]:
    """{map id: entries} of every map on the host whose type the kernel counts
    (:data:`KERNEL_COUNTED`; the others are listed too, as 0: callers look only at those);
    every fd the program, its link and the iterator took is closed again."""
    return parse_records(map_counts_raw())


def map_counts_raw(kept: dict | None = None) -> bytes:
    """The (map id, 0, count) records of every map on the host, in id order, as the
    iterator wrote them (equal bytes: the same maps with the same counts)."""
    lay = read_count_layout()
    return run_iterator(program(lay), lay.attach_btf_id, "bpfmem_counts",
                        CountsUnavailable, "count", kept)
