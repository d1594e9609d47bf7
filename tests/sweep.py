"""The spec sweep: map shapes across every creatable type, awkward sizes, flags and counts,
used to compare the model with real kernels (this one, and others under qemu)."""

from __future__ import annotations

from itertools import product

from bpfmem.model.shape import MapShape
from bpfmem.uapi import MapFlag as F, MapType as T

KEYS = (1, 3, 4, 7, 13, 100, 513)
VALUES = (1, 3, 8, 13, 100, 4096)
ENTRIES = (1, 3, 1000, 65536)
NP = int(F.NO_PREALLOC)


def sweep_specs() -> list[MapShape]:
    """At least 500 shapes; about a third are refused by the kernel on purpose."""
    out: list[MapShape] = []
    add = out.append
    for t in (T.HASH, T.PERCPU_HASH, T.LRU_HASH, T.LRU_PERCPU_HASH):
        for k, v, m in product((1, 4, 13, 100), (1, 8, 13, 100), (1, 3, 1000, 65536)):
            add(MapShape(t, k, v, m))
        for flags in (NP, int(F.NO_COMMON_LRU), int(F.ZERO_SEED), int(F.NUMA_NODE),
                      int(F.RDONLY_PROG), int(F.RDONLY | F.WRONLY), int(F.MMAPABLE)):
            add(MapShape(t, 4, 8, 1001, flags))
        add(MapShape(t, 0, 8, 10))
        add(MapShape(t, 4, 0, 10))
        add(MapShape(t, 4, 8, 0))
        add(MapShape(t, 513, 8, 10))
        add(MapShape(t, 4, 40000, 10))
    for k, v, m in product((3, 7, 100), (3, 13, 4096), (1, 1000)):
        add(MapShape(T.HASH, k, v, m, NP))
        add(MapShape(T.PERCPU_HASH, k, v, m, NP))
    add(MapShape(T.LRU_PERCPU_HASH, 8, 7, 1001, int(F.NO_COMMON_LRU)))
    add(MapShape(T.LRU_HASH, 3, 7, 999, int(F.NO_COMMON_LRU)))
    for t in (T.ARRAY, T.PERCPU_ARRAY):
        for v, m in product(VALUES, ENTRIES):
            add(MapShape(t, 4, v, m))
        for flags in (int(F.MMAPABLE), int(F.NUMA_NODE), int(F.RDONLY_PROG), NP,
                      int(F.INNER_MAP), int(F.PRESERVE_ELEMS)):
            add(MapShape(t, 4, 13, 1000, flags))
        add(MapShape(t, 8, 8, 10))
        add(MapShape(t, 4, 40000, 10))
    for v, m in product((1, 13, 4096), (1, 3, 1000, 1025)):
        add(MapShape(T.ARRAY, 4, v, m, int(F.MMAPABLE)))
    for t in (T.PROG_ARRAY, T.PERF_EVENT_ARRAY, T.CGROUP_ARRAY, T.ARRAY_OF_MAPS):
        for m in (1, 3, 1000, 65536):
            add(MapShape(t, 4, 4, m))
        add(MapShape(t, 4, 8, 10))
        add(MapShape(t, 4, 4, 10, int(F.PRESERVE_ELEMS)))
    for k, m in product((4, 13), (1, 3, 1000, 65536)):
        add(MapShape(T.HASH_OF_MAPS, k, 4, m))
        add(MapShape(T.HASH_OF_MAPS, k, 4, m, NP))
    add(MapShape(T.HASH_OF_MAPS, 4, 8, 10))
    for v, m in product((8, 16, 160, 1016, 1024), (1, 3, 1000)):
        add(MapShape(T.STACK_TRACE, 4, v, m))
    for v in (32, 320, 4064, 4096):
        add(MapShape(T.STACK_TRACE, 4, v, 100, int(F.STACK_BUILD_ID)))
    add(MapShape(T.STACK_TRACE, 8, 8, 10))
    for k, v in product((4, 5, 8, 20, 260, 261), (1, 8, 100)):
        add(MapShape(T.LPM_TRIE, k, v, 1000, NP))
    add(MapShape(T.LPM_TRIE, 8, 8, 1000))
    for t in (T.QUEUE, T.STACK):
        for v, m in product((1, 3, 13, 4096), (1, 1000, 65536)):
            add(MapShape(t, 0, v, m))
        add(MapShape(t, 4, 8, 10))
        add(MapShape(t, 0, 8, 10, NP))
    for v, m, x in product((1, 7, 100), (1, 1000, 65536, 10_000_000), (0, 1, 3, 15)):
        add(MapShape(T.BLOOM_FILTER, 0, v, m, 0, x))
    add(MapShape(T.BLOOM_FILTER, 0, 8, 100, 0, 16))
    add(MapShape(T.BLOOM_FILTER, 4, 8, 100))
    for t in (T.RINGBUF, T.USER_RINGBUF):
        for m in (4096, 8192, 12288, 1 << 16, 1 << 20, 5000):
            add(MapShape(t, 0, 0, m))
        add(MapShape(t, 4, 0, 4096))
    for t in (T.DEVMAP, T.DEVMAP_HASH):
        for v, m in product((4, 8, 12), (1, 3, 64, 1000)):
            add(MapShape(t, 4, v, m))
    for v, m in product((4, 8, 12), (1, 3, 64, 255, 256, 257)):
        add(MapShape(T.CPUMAP, 4, v, m))
    for m in (1, 3, 64, 1000):
        add(MapShape(T.XSKMAP, 4, 4, m))
        add(MapShape(T.SOCKMAP, 4, 4, m))
        add(MapShape(T.SOCKMAP, 4, 8, m))
        add(MapShape(T.REUSEPORT_SOCKARRAY, 4, 8, m))
        add(MapShape(T.REUSEPORT_SOCKARRAY, 4, 4, m))
        for k in (1, 4, 13, 100):
            add(MapShape(T.SOCKHASH, k, 4, m))
    add(MapShape(T.XSKMAP, 4, 8, 10))
    add(MapShape(T.SOCKMAP, 8, 4, 10))
    for t in (T.CGROUP_STORAGE, T.PERCPU_CGROUP_STORAGE):
        for k, v in product((8, 16, 12), (1, 13, 4096, 5000)):
            add(MapShape(t, k, v, 0))
        add(MapShape(t, 8, 8, 10))
    for m, x in product((1, 16, 1000, 1 << 20, (1 << 20) + 1), (0,)):
        add(MapShape(T.ARENA, 0, 0, m, int(F.MMAPABLE), x))
    add(MapShape(T.ARENA, 0, 0, 16, 0))
    add(MapShape(T.ARENA, 0, 0, 16, int(F.MMAPABLE), 0x10000000))
    add(MapShape(T.ARENA, 0, 0, 16, int(F.MMAPABLE), 0x10000001))
    add(MapShape(T.ARENA, 0, 0, 16, int(F.MMAPABLE), 0xFFFFF000))
    return out
