"""The kernel's arithmetic for BPF map memory, one function per map-type family, each named
after the kernel function it mirrors.

Three eras of ``memlock`` (what fdinfo and bpftool show):
  - >= 6.4   ``map->ops->map_mem_usage()``            -> :func:`mem_usage`
  - 5.11-6.3 ``bpf_map_memory_footprint()``           -> :func:`memory_footprint`
  - <= 5.10  pages charged by ``bpf_map_charge_init`` -> :func:`rlimit_pages`
and the memory cgroup charge (:func:`charged_at_create`, :func:`charged_per_entry`).
Notation: K key_size, V value_size, M max_entries, C possible CPUs, n entries present.
Each function names the kernel function (and release) it mirrors; the kernel's source is
the authority, and tests/test_sweep_data.py holds every formula to real kernels' readings.
All functions are pure.
"""

from __future__ import annotations

from bisect import bisect_left

from ..uapi import MapFlag, MapType as T
from .kernel import (CHARGE_CREATOR, CHARGE_NONE, MEMLOCK_FOOTPRINT, MEMLOCK_RLIMIT,
                     MEMLOCK_USAGE, KernelProfile)
from .shape import MapShape

# plain ints: enum flag arithmetic is slow in a hot loop
_F_MMAPABLE = int(MapFlag.MMAPABLE)
_F_NO_COMMON_LRU = int(MapFlag.NO_COMMON_LRU)
_F_NO_PREALLOC = int(MapFlag.NO_PREALLOC)

PCPU_MIN_UNIT_SIZE = 32768          # include/linux/percpu.h
HASHTAB_MAP_LOCK_COUNT = 8          # kernel/bpf/hashtab.c
LLIST_NODE_SZ = 8                   # sizeof(struct llist_node)
PTR = 8
LOCAL_STORAGE_ELEM = 128            # sizeof(struct bpf_local_storage_elem), 6.x x86_64
LOCAL_STORAGE = 176                 # sizeof(struct bpf_local_storage)
OBJCG_PTR = 8                       # sizeof(struct obj_cgroup *) charged per slab object
_KMALLOC_CLASSES = (8, 16, 32, 64, 96, 128, 192, 256, 512, 1024, 2048, 4096, 8192)
CACHE_LINE = 64                     # SLAB_HWCACHE_ALIGN on x86_64 and arm64

HASHES = frozenset({T.HASH, T.PERCPU_HASH, T.LRU_HASH, T.LRU_PERCPU_HASH, T.HASH_OF_MAPS})
PERCPU_HASHES = frozenset({T.PERCPU_HASH, T.LRU_PERCPU_HASH})
LRUS = frozenset({T.LRU_HASH, T.LRU_PERCPU_HASH})
FD_ARRAYS = frozenset({T.PROG_ARRAY, T.PERF_EVENT_ARRAY, T.CGROUP_ARRAY, T.ARRAY_OF_MAPS})
ARRAYS = frozenset({T.ARRAY, T.PERCPU_ARRAY}) | FD_ARRAYS
LOCAL_STORAGES = frozenset({T.SK_STORAGE, T.INODE_STORAGE, T.TASK_STORAGE, T.CGRP_STORAGE})
CGROUP_STORAGES = frozenset({T.CGROUP_STORAGE, T.PERCPU_CGROUP_STORAGE})
RINGBUFS = frozenset({T.RINGBUF, T.USER_RINGBUF})
# Maps whose elements are allocated as they are inserted (memlock and charge grow with n).
ON_DEMAND_ALWAYS = frozenset({T.LPM_TRIE, T.DEVMAP, T.DEVMAP_HASH, T.SOCKHASH, T.XSKMAP})


def r8(x: int) -> int:
    return (x + 7) & ~7


def p2(x: int) -> int:
    """roundup_pow_of_two"""
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def page_align(x: int, page: int = 4096) -> int:
    return (x + page - 1) // page * page


def prealloc(sh: MapShape) -> bool:
    return not sh.map_flags & _F_NO_PREALLOC


def grows_with_entries(sh: MapShape) -> bool:
    """True when the map allocates elements as they are inserted."""
    if sh.type in ON_DEMAND_ALWAYS:
        return True
    return sh.type in (T.HASH, T.PERCPU_HASH, T.HASH_OF_MAPS) and not prealloc(sh)


def effective_max_entries(sh: MapShape, prof: KernelProfile) -> int:
    """max_entries as the kernel stores it: an LRU hash with BPF_F_NO_COMMON_LRU is rounded
    up to a multiple of the possible CPUs (kernel/bpf/hashtab.c ``htab_map_alloc``)."""
    if sh.type in LRUS and sh.map_flags & _F_NO_COMMON_LRU:
        return round_to_cpus(sh.max_entries, prof.possible_cpus)
    return sh.max_entries


def round_to_cpus(m: int, cpus: int) -> int:
    """A per-CPU LRU's max_entries: up to a multiple of the CPUs (down on u32 overflow)."""
    up = -(-m // cpus) * cpus
    return up if up <= 0xFFFFFFFF else m // cpus * cpus


def htab_elem_size(sh: MapShape, prof: KernelProfile) -> int:
    """``htab->elem_size``: htab_elem + round_up(key) + (a per-CPU pointer or the value)."""
    s = prof.sizes
    value = 4 if sh.type == T.HASH_OF_MAPS else sh.value_size
    return s.htab_elem + r8(sh.key_size) + (PTR if sh.type in PERCPU_HASHES else r8(value))


def htab_has_extra_elems(sh: MapShape, prof: KernelProfile) -> bool:
    """A spare element per CPU for in-place replacement: plain preallocated hashes (and
    HASH_OF_MAPS until 6.14: 'bpf: Don't allocate per-cpu extra_elems for fd htab', 6.15)."""
    if sh.type == T.HASH_OF_MAPS:
        return not prof.at_least(6, 15)
    return sh.type == T.HASH


# -- >= 6.4: map_mem_usage ------------------------------------------------------------------
def htab_map_mem_usage(sh: MapShape, prof: KernelProfile, n: int) -> int:
    s, c = prof.sizes, prof.possible_cpus
    m = effective_max_entries(sh, prof)
    percpu = sh.type in PERCPU_HASHES
    elem = htab_elem_size(sh, prof)
    usage = s.bpf_htab + s.bucket * p2(m) + 4 * c * HASHTAB_MAP_LOCK_COUNT
    if prealloc(sh) or sh.type in LRUS:
        entries = m + (c if htab_has_extra_elems(sh, prof) else 0)
        usage += elem * entries
        if percpu:
            usage += r8(sh.value_size) * c * entries
        elif sh.type not in LRUS:
            usage += PTR * c
    else:
        usage += (elem + LLIST_NODE_SZ) * n
        if percpu:
            usage += (LLIST_NODE_SZ + PTR) * n
            usage += r8(sh.value_size) * c * n
    return usage


def array_map_mem_usage(sh: MapShape, prof: KernelProfile) -> int:
    s, m = prof.sizes, sh.max_entries
    elem = r8(4 if sh.type in FD_ARRAYS else sh.value_size)
    if sh.type == T.PERCPU_ARRAY:
        return s.bpf_array + m * PTR + m * elem * prof.possible_cpus
    if sh.map_flags & _F_MMAPABLE:
        return page_align(s.bpf_array, prof.page_size) + page_align(m * elem, prof.page_size)
    return s.bpf_array + m * elem


def mem_usage(sh: MapShape, prof: KernelProfile, n: int = 0) -> int | None:
    """``memlock`` on kernels >= 6.4. None where the value needs what an object cannot say
    (struct_ops: the kernel's struct and its function count)."""
    s, c, m, k, v = prof.sizes, prof.possible_cpus, sh.max_entries, sh.key_size, sh.value_size
    t = sh.type
    if t in HASHES:
        return htab_map_mem_usage(sh, prof, n)
    if t in ARRAYS:
        return array_map_mem_usage(sh, prof)
    if t == T.STACK_TRACE:                      # stack_map_mem_usage
        return s.bpf_stack_map + PTR * p2(m) + m * (s.stack_map_bucket + v)
    if t == T.LPM_TRIE:                         # trie_mem_usage
        return (s.lpm_trie_node + (k - 4) + v) * n
    if t == T.DEVMAP:                           # dev_map_mem_usage
        return s.bpf_dtab + PTR * m + s.bpf_dtab_netdev * n
    if t == T.DEVMAP_HASH:
        return s.bpf_dtab + PTR * p2(m) + s.bpf_dtab_netdev * n
    if t == T.SOCKMAP:                          # sock_map_mem_usage
        return s.bpf_stab + PTR * m
    if t == T.SOCKHASH:                         # sock_hash_mem_usage
        return s.bpf_shtab + s.bpf_shtab_bucket * p2(m) + (s.bpf_shtab_elem + r8(k)) * n
    if t == T.CPUMAP:                           # cpu_map_mem_usage
        return s.bpf_cpu_map + PTR * m
    if t == T.XSKMAP:                           # xsk_map_mem_usage
        return s.xsk_map + PTR * m + s.xsk_map_node * n
    if t == T.REUSEPORT_SOCKARRAY:              # reuseport_array_mem_usage
        return s.reuseport_array + PTR * m
    if t in CGROUP_STORAGES:                    # cgroup_storage_map_usage
        return s.bpf_cgroup_storage_map
    if t in (T.QUEUE, T.STACK):                 # queue_stack_map_mem_usage
        return s.bpf_queue_stack + (m + 1) * v
    if t in LOCAL_STORAGES:                     # bpf_local_storage_map_mem_usage
        return s.bpf_local_storage_map + s.bpf_local_storage_map_bucket * max(2, p2(c))
    if t in RINGBUFS:                           # ringbuf_map_mem_usage
        data_pages = m // prof.page_size
        meta_pages = 3
        return (s.bpf_ringbuf_map + (meta_pages + data_pages) * prof.page_size
                + (meta_pages + 2 * data_pages) * PTR)
    if t == T.BLOOM_FILTER:                     # bloom_map_mem_usage
        return s.bpf_bloom_filter + bloom_bitset_bytes(sh)
    if t == T.ARENA:                            # arena_map_mem_usage
        return 0
    return None


def bloom_bitset_bytes(sh: MapShape) -> int:
    """kernel/bpf/bloom_filter.c ``bloom_map_alloc``: the bit array's size in bytes."""
    k = sh.map_extra & 0xF or 5
    nr_bits = sh.max_entries * k
    if nr_bits > 0xFFFFFFFF or (nr_bits // 5) * 7 > 0xFFFFFFFF or (nr_bits // 5) * 7 > 1 << 31:
        nbytes = (0xFFFFFFFF + 7) // 8
    else:
        nr_bits = (nr_bits // 5) * 7
        nr_bits = 64 if nr_bits <= 64 else p2(nr_bits)
        nbytes = (nr_bits + 7) // 8
    return r8(nbytes)


# -- 5.11 - 6.3: bpf_map_memory_footprint -------------------------------------------------
def bpf_map_value_size(sh: MapShape, prof: KernelProfile) -> int:
    if sh.type in (T.PERCPU_HASH, T.LRU_PERCPU_HASH, T.PERCPU_ARRAY, T.PERCPU_CGROUP_STORAGE):
        return r8(sh.value_size) * prof.possible_cpus
    if sh.type in FD_ARRAYS or sh.type == T.HASH_OF_MAPS:
        return 4
    return sh.value_size


def memory_footprint(sh: MapShape, prof: KernelProfile) -> int:
    size = r8(sh.key_size + bpf_map_value_size(sh, prof))
    return page_align(effective_max_entries(sh, prof) * size, prof.page_size)


# -- <= 5.10: RLIMIT_MEMLOCK pages (bpf_map_charge_init) ------------------------------------
def rlimit_cost(sh: MapShape, prof: KernelProfile) -> int | None:
    """The ``cost`` each map type passes to ``bpf_map_charge_init`` (kernel-map-memory.md §6;
    root creator, so no spectre rounding of array sizes)."""
    s, c, m, k, v = prof.sizes, prof.possible_cpus, sh.max_entries, sh.key_size, sh.value_size
    t, page = sh.type, prof.page_size
    if t in HASHES:
        mm = effective_max_entries(sh, prof)
        elem = htab_elem_size(sh, prof)
        cost = s.bucket * p2(mm) + elem * mm
        cost += r8(v) * c * mm if t in PERCPU_HASHES else elem * c
        return cost
    if t in ARRAYS:
        elem = r8(4 if t in FD_ARRAYS else v)
        if t == T.PERCPU_ARRAY:
            return s.bpf_array + PTR * m + elem * c * m
        if sh.map_flags & _F_MMAPABLE:
            return page_align(s.bpf_array, page) + page_align(m * elem, page)
        return s.bpf_array + m * elem
    if t == T.STACK_TRACE:
        return s.bpf_stack_map + PTR * p2(m) + m * (s.stack_map_bucket + v)
    if t == T.LPM_TRIE:
        return s.lpm_trie + m * (s.lpm_trie_node + (k - 4) + v)
    if t in (T.QUEUE, T.STACK):
        return s.bpf_queue_stack + (m + 1) * v
    if t == T.REUSEPORT_SOCKARRAY:
        return s.reuseport_array + PTR * m
    if t == T.SOCKMAP:
        return PTR * m
    if t == T.SOCKHASH:
        return s.bpf_shtab_bucket * p2(m) + (s.bpf_shtab_elem + r8(k)) * m
    if t == T.DEVMAP:
        return PTR * m
    if t == T.DEVMAP_HASH:
        return PTR * p2(m)
    if t == T.CPUMAP:
        return PTR * m
    if t == T.XSKMAP:
        return s.xsk_map + PTR * m
    if t in (T.SK_STORAGE, T.INODE_STORAGE):
        return s.bpf_local_storage_map + s.bpf_local_storage_map_bucket * max(2, p2(c))
    if t in CGROUP_STORAGES:
        return s.bpf_cgroup_storage_map
    if t == T.RINGBUF:
        return s.bpf_ringbuf_map + s.bpf_ringbuf + m
    return None


def rlimit_pages(sh: MapShape, prof: KernelProfile) -> int | None:
    cost = rlimit_cost(sh, prof)
    return None if cost is None else page_align(cost, prof.page_size)


def memlock(sh: MapShape, prof: KernelProfile, n: int = 0) -> int | None:
    """What ``memlock:`` in fdinfo reports on ``prof``'s kernel with ``n`` entries present."""
    era = prof.memlock_era
    if era == MEMLOCK_USAGE:
        return mem_usage(sh, prof, n)
    if era == MEMLOCK_FOOTPRINT:
        return memory_footprint(sh, prof)
    assert era == MEMLOCK_RLIMIT
    return rlimit_pages(sh, prof)


# -- memory cgroup charge -------------------------------------------------------------------
def kmalloc_classes(minalign: int = 8) -> tuple[int, ...]:
    """The kmalloc caches there are when ARCH_KMALLOC_MINALIGN is ``minalign``
    (mm/slab_common.c ``setup_kmalloc_cache_index_table``: none below the alignment, and
    kmalloc-96/-192 only where they are a multiple of it; arm64 before 6.5 has 128)."""
    return tuple(c for c in _KMALLOC_CLASSES if c >= minalign and c % minalign == 0)


_CLASSES = {8: _KMALLOC_CLASSES}


def kmalloc_size(size: int, minalign: int = 8) -> int:
    """The kmalloc size class an object of ``size`` bytes lands in (SLUB, no debug)."""
    classes = _CLASSES.get(minalign)
    if classes is None:
        classes = _CLASSES[minalign] = kmalloc_classes(minalign)
    i = bisect_left(classes, size)      # the first class that holds it
    return classes[i] if i < len(classes) else p2(size)


def slab_charge(size: int, prof: KernelProfile | None = None) -> int:
    """A kmalloc'd object charged to a memcg: its size class plus the obj_cgroup pointer;
    above KMALLOC_MAX_CACHE_SIZE (two pages) kmalloc_large's power-of-two pages."""
    if size == 0:
        return 0
    page = prof.page_size if prof is not None else 4096
    if size > 2 * page:
        return p2(-(-size // page)) * page                # kmalloc_large: whole pages
    return kmalloc_size(size, prof.kmalloc_min if prof is not None else 8) + OBJCG_PTR


def area_charge(size: int, page: int = 4096, mmapable: bool = False,
                prof: KernelProfile | None = None) -> int:
    """``bpf_map_area_alloc``: kmalloc up to PAGE_SIZE << PAGE_ALLOC_COSTLY_ORDER (slab, or
    kmalloc_large pages above two pages), vmalloc (whole pages) above that or when
    mmapable."""
    if size == 0:
        return 0
    if mmapable or size > page << 3:
        return page_align(size, page)
    return slab_charge(size, prof)


def _percpu_at_create(sh: MapShape, prof: KernelProfile) -> int:
    """Per-CPU memory a map allocates during BPF_MAP_CREATE (values of percpu arrays and
    preallocated percpu hashes). Charged to the creator only on 5.11-5.19."""
    c, m = prof.possible_cpus, effective_max_entries(sh, prof)
    if sh.type == T.PERCPU_ARRAY:
        return r8(sh.value_size) * c * m
    if sh.type in PERCPU_HASHES and (prealloc(sh) or sh.type in LRUS):
        return r8(sh.value_size) * c * m
    return 0


def charged_at_create(sh: MapShape, prof: KernelProfile) -> int | None:
    """Bytes the creating process's memory cgroup is charged by BPF_MAP_CREATE."""
    era = prof.charge_era
    if era == CHARGE_NONE:
        return fd_charge(prof)   # the map itself is not accounted, its fd is
    s, c, m, v, page = (prof.sizes, prof.possible_cpus, effective_max_entries(sh, prof),
                        sh.value_size, prof.page_size)
    t = sh.type
    area = lambda size: area_charge(size, page, prof=prof)  # noqa: E731
    if t in HASHES:
        total = area(s.bpf_htab) + area(s.bucket * p2(m))
        if prealloc(sh) or t in LRUS:
            entries = m + (c if htab_has_extra_elems(sh, prof) else 0)
            total += area(htab_elem_size(sh, prof) * entries)
    elif t in ARRAYS:
        elem = r8(4 if t in FD_ARRAYS else v)
        if t == T.PERCPU_ARRAY:
            total = area(s.bpf_array + PTR * m)
        elif sh.map_flags & _F_MMAPABLE:
            total = area_charge(page_align(s.bpf_array, page) + page_align(m * elem, page),
                                page, mmapable=True, prof=prof)
        else:
            total = area(s.bpf_array + m * elem)
    elif t == T.STACK_TRACE:
        total = area(s.bpf_stack_map + PTR * p2(m)) + area((s.stack_map_bucket + v) * m)
    elif t == T.LPM_TRIE:
        total = area(s.lpm_trie)
    elif t in (T.QUEUE, T.STACK):
        total = area(s.bpf_queue_stack + (m + 1) * v)
    elif t == T.BLOOM_FILTER:
        total = area(s.bpf_bloom_filter + bloom_bitset_bytes(sh))
    elif t in RINGBUFS:
        data_pages = m // page
        total = (slab_charge(s.bpf_ringbuf_map, prof) + (3 + data_pages) * page
                 + area((3 + 2 * data_pages) * PTR))
    elif t == T.DEVMAP:
        total = area(s.bpf_dtab) + area(PTR * m)
    elif t == T.DEVMAP_HASH:
        total = area(s.bpf_dtab) + area(PTR * p2(m))
    elif t == T.CPUMAP:
        total = area(s.bpf_cpu_map) + area(PTR * m)
    elif t == T.XSKMAP:
        total = area(s.xsk_map + PTR * m)
    elif t == T.SOCKMAP:
        total = area(s.bpf_stab) + area(PTR * m)
    elif t == T.SOCKHASH:
        total = area(s.bpf_shtab) + area(s.bpf_shtab_bucket * p2(m))
    elif t == T.REUSEPORT_SOCKARRAY:
        total = area(s.reuseport_array + PTR * m)
    elif t in CGROUP_STORAGES:
        total = slab_charge(s.bpf_cgroup_storage_map, prof)
    elif t in LOCAL_STORAGES:
        total = (area(s.bpf_local_storage_map)
                 + area(s.bpf_local_storage_map_bucket * max(2, p2(c))))
    elif t == T.ARENA:
        total = area(s.bpf_arena)
    else:
        return None
    if era == CHARGE_CREATOR:
        total += _percpu_at_create(sh, prof)
    return total + mem_alloc_prefill(sh, prof) + fd_charge(prof)


def fd_charge(prof: KernelProfile) -> int:
    """The map's file descriptor: BPF_MAP_CREATE returns an anon inode file
    (``anon_inode_getfile`` -> ``alloc_file_pseudo``): a ``struct file`` from the filp cache
    (SLAB_HWCACHE_ALIGN) and the file's own ``struct dentry``, both SLAB_ACCOUNT caches,
    charged to the creator with their obj_cgroup pointers (fs/file_table.c, fs/dcache.c)."""
    s = prof.sizes
    return (-(-s.file // CACHE_LINE) * CACHE_LINE + OBJCG_PTR) + (r8(s.dentry) + OBJCG_PTR)


def _prefill(unit_charge: int, unit_size: int, percpu: bool, prof: KernelProfile) -> int:
    """kernel/bpf/memalloc.c ``prefill_mem_cache``: 4 objects per CPU for units up to 256
    bytes (per-CPU units too before 6.7; from 6.7 those get 1), else 1, allocated (and
    charged to the creator) by ``bpf_mem_alloc_init``."""
    small = unit_size <= 256 and not (percpu and prof.has("percpu_prefill_one"))
    cnt = 4 if small else 1
    return prof.possible_cpus * cnt * unit_charge


def mem_alloc_prefill(sh: MapShape, prof: KernelProfile) -> int:
    """Elements ``bpf_mem_alloc`` allocates at create: NO_PREALLOC hashes (6.1+), LPM tries
    (6.13+), task and cgroup local storages (6.5+)."""
    if prof.charge_era == CHARGE_NONE:
        return 0
    t, s, k, v, c = sh.type, prof.sizes, sh.key_size, sh.value_size, prof.possible_cpus
    if t in (T.HASH, T.PERCPU_HASH, T.HASH_OF_MAPS) and not prealloc(sh) \
            and prof.has("htab_mem_alloc"):
        unit = htab_elem_size(sh, prof) + LLIST_NODE_SZ
        total = _prefill(slab_charge(unit, prof), kmalloc_size(unit, prof.kmalloc_min), False,
                         prof)
        if t == T.PERCPU_HASH:
            total += _prefill(r8(v) * (c + 2) + slab_charge(2 * PTR, prof), r8(v), True, prof)
        return total
    if t == T.LPM_TRIE and prof.has("lpm_mem_alloc"):
        unit = s.lpm_trie_node + (k - 4) + v + LLIST_NODE_SZ
        return _prefill(slab_charge(unit, prof), kmalloc_size(unit, prof.kmalloc_min), False,
                        prof)
    if t in (T.TASK_STORAGE, T.CGRP_STORAGE) and prof.has("local_storage_mem_alloc"):
        selem = LOCAL_STORAGE_ELEM + v + LLIST_NODE_SZ
        storage = LOCAL_STORAGE + LLIST_NODE_SZ
        ka = prof.kmalloc_min
        return (_prefill(slab_charge(selem, prof), kmalloc_size(selem, ka), False, prof)
                + _prefill(slab_charge(storage, prof), kmalloc_size(storage, ka), False, prof))
    return 0


def charged_per_entry(sh: MapShape, prof: KernelProfile) -> float | None:
    """Average bytes charged per inserted element, for maps that allocate on insert;
    0 for preallocated maps; None where entries are not counted by this map (local and
    cgroup storages: per socket, task, inode or cgroup) or unknown."""
    era = prof.charge_era
    if era == CHARGE_NONE:
        return 0.0
    t, s, c, k, v = sh.type, prof.sizes, prof.possible_cpus, sh.key_size, sh.value_size
    new_alloc = prof.has("htab_mem_alloc")   # 6.1: elements from bpf_mem_alloc (+ llist node)
    if t in (T.HASH, T.PERCPU_HASH, T.HASH_OF_MAPS):
        if prealloc(sh):
            return 0.0
        elem = htab_elem_size(sh, prof)
        per = slab_charge(elem + LLIST_NODE_SZ if new_alloc else elem, prof)
        if t == T.PERCPU_HASH:
            objcg = r8(v) * 2 if prof.at_least(5, 17) else 0   # pcpu objcg: size/4 * 8
            per += r8(v) * c + objcg + (slab_charge(2 * PTR, prof) if new_alloc else 0)
        return float(per)
    if t == T.LPM_TRIE:   # a leaf and an intermediate node (lpm_first_entry_credit)
        return float(_lpm_leaf(sh, prof) + _lpm_intermediate(sh, prof))
    if t in (T.DEVMAP, T.DEVMAP_HASH):
        return float(slab_charge(s.bpf_dtab_netdev, prof))
    if t == T.SOCKHASH:
        return float(slab_charge(s.bpf_shtab_elem + r8(k), prof))
    if t == T.XSKMAP:
        return float(slab_charge(s.xsk_map_node, prof))
    if t == T.ARENA:
        return float(prof.page_size)   # an entry is a page
    if t in LOCAL_STORAGES or t in CGROUP_STORAGES or t == T.STRUCT_OPS:
        return None
    return 0.0


def _lpm_leaf(sh: MapShape, prof: KernelProfile) -> int:
    s, k, v = prof.sizes, sh.key_size, sh.value_size
    if prof.has("lpm_mem_alloc"):   # one bpf_mem_alloc size for leaves and inner nodes
        return slab_charge(s.lpm_trie_node + (k - 4) + v + LLIST_NODE_SZ, prof)
    return slab_charge(s.lpm_trie_node + (k - 4) + v, prof)


def _lpm_intermediate(sh: MapShape, prof: KernelProfile) -> int:
    if prof.has("lpm_mem_alloc"):
        return _lpm_leaf(sh, prof)
    return slab_charge(prof.sizes.lpm_trie_node + (sh.key_size - 4), prof)


def first_entry_credit(sh: MapShape, prof: KernelProfile) -> int:
    """Bytes the first entry costs less than the others: an LPM trie's first leaf is its
    root, and each later insert of a new prefix splits off one intermediate node
    (kernel/bpf/lpm_trie.c ``trie_update_elem``), so n entries hold n - 1 of them (at most:
    fewer where prefixes nest)."""
    if sh.type == T.LPM_TRIE and prof.charge_era != CHARGE_NONE:
        return _lpm_intermediate(sh, prof)
    return 0


def mem_alloc_slack(unit_charge: int, unit_size: int, prof: KernelProfile) -> int:
    """What ``bpf_mem_alloc`` (6.1+) may hold in its per-CPU free lists beyond the elements
    in use: up to the high watermark plus one refill batch per CPU (kernel/bpf/memalloc.c
    ``init_refill_work``: 32/96 objects for units up to 256 bytes, scaled down above)."""
    if unit_size <= 256:
        low, high = 32, 96
    else:
        low, high = max(32 * 256 // unit_size, 1), max(96 * 256 // unit_size, 3)
    batch = max((high - low) // 4 * 3, 1)
    return prof.possible_cpus * (high + batch) * unit_charge


def charged_slack(sh: MapShape, prof: KernelProfile) -> int:
    """Bytes a memory cgroup may show beyond the elements in use, for maps whose elements
    come from bpf_mem_alloc (NO_PREALLOC hashes from 6.1, LPM tries from 6.13)."""
    if prof.charge_era == CHARGE_NONE:
        return 0
    t, s, k, v = sh.type, prof.sizes, sh.key_size, sh.value_size
    if t in (T.HASH, T.PERCPU_HASH, T.HASH_OF_MAPS) and not prealloc(sh) \
            and prof.has("htab_mem_alloc"):
        unit = htab_elem_size(sh, prof) + LLIST_NODE_SZ
        slack = mem_alloc_slack(slab_charge(unit, prof), kmalloc_size(unit, prof.kmalloc_min),
                                prof)
        if t == T.PERCPU_HASH:
            pcpu = r8(v) * (prof.possible_cpus + 2) + slab_charge(2 * PTR, prof)
            slack += mem_alloc_slack(pcpu, kmalloc_size(r8(v) + LLIST_NODE_SZ, prof.kmalloc_min),
                                     prof)
        return slack
    if t == T.LPM_TRIE and prof.has("lpm_mem_alloc"):
        unit = s.lpm_trie_node + (k - 4) + v + LLIST_NODE_SZ
        return mem_alloc_slack(slab_charge(unit, prof), kmalloc_size(unit, prof.kmalloc_min),
                               prof)
    return 0
