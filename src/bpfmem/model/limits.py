"""When the kernel refuses BPF_MAP_CREATE: the checks of each map type's ``map_alloc_check``
/ ``map_alloc``, with the kernel's errno and reason. A refused map fails an agent's start,
so the model says so instead of estimating memory for it."""

from __future__ import annotations

from ..uapi import MapFlag, MapType as T, map_type_name
from .formulas import (CGROUP_STORAGES, FD_ARRAYS, LOCAL_STORAGES, LRUS, PCPU_MIN_UNIT_SIZE,
                       PERCPU_HASHES, RINGBUFS, effective_max_entries, p2, r8)
from .kernel import KernelProfile
from .shape import MapShape

# plain ints: enum flag arithmetic is slow in a hot loop
_F_CLONE = int(MapFlag.CLONE)
_F_INNER_MAP = int(MapFlag.INNER_MAP)
_F_MMAPABLE = int(MapFlag.MMAPABLE)
_F_NO_COMMON_LRU = int(MapFlag.NO_COMMON_LRU)
_F_NO_PREALLOC = int(MapFlag.NO_PREALLOC)
_F_NO_USER_CONV = int(MapFlag.NO_USER_CONV)
_F_NUMA_NODE = int(MapFlag.NUMA_NODE)
_F_PRESERVE_ELEMS = int(MapFlag.PRESERVE_ELEMS)
_F_RDONLY = int(MapFlag.RDONLY)
_F_RDONLY_PROG = int(MapFlag.RDONLY_PROG)
_F_SEGV_ON_FAULT = int(MapFlag.SEGV_ON_FAULT)
_F_STACK_BUILD_ID = int(MapFlag.STACK_BUILD_ID)
_F_WRONLY = int(MapFlag.WRONLY)
_F_WRONLY_PROG = int(MapFlag.WRONLY_PROG)
_F_ZERO_SEED = int(MapFlag.ZERO_SEED)

KMALLOC_MAX_SIZE = 1 << 22        # x86-64: 4 MiB (MAX_PAGE_ORDER 10)
MAX_BPF_STACK = 512
PERF_MAX_STACK = 127              # sysctl kernel.perf_event_max_stack default
LPM_KEY_MIN, LPM_KEY_MAX = 4 + 1, 4 + 256
LOCAL_STORAGE_MAX_VALUE = 0xFFFF - 128   # U16_MAX - sizeof(struct bpf_local_storage_elem)
ERRNO = {"EPERM": 1, "EBADF": 9, "ENOMEM": 12, "EINVAL": 22, "E2BIG": 7, "ERANGE": 34,
         "ENOTSUPP": 524}

# The first release that has each map type (include/uapi/linux/bpf.h history).
SINCE = {T.HASH: (3, 19), T.ARRAY: (3, 19), T.PROG_ARRAY: (4, 2), T.PERF_EVENT_ARRAY: (4, 3),
         T.PERCPU_HASH: (4, 6), T.PERCPU_ARRAY: (4, 6), T.STACK_TRACE: (4, 6),
         T.CGROUP_ARRAY: (4, 8), T.LRU_HASH: (4, 10), T.LRU_PERCPU_HASH: (4, 10),
         T.LPM_TRIE: (4, 11), T.ARRAY_OF_MAPS: (4, 12), T.HASH_OF_MAPS: (4, 12),
         T.DEVMAP: (4, 14), T.SOCKMAP: (4, 14), T.CPUMAP: (4, 15), T.XSKMAP: (4, 18),
         T.SOCKHASH: (4, 18), T.CGROUP_STORAGE: (4, 19), T.REUSEPORT_SOCKARRAY: (4, 19),
         T.PERCPU_CGROUP_STORAGE: (4, 20), T.QUEUE: (4, 20), T.STACK: (4, 20),
         T.SK_STORAGE: (5, 2), T.DEVMAP_HASH: (5, 4), T.STRUCT_OPS: (5, 6), T.RINGBUF: (5, 8),
         T.INODE_STORAGE: (5, 10), T.TASK_STORAGE: (5, 11), T.BLOOM_FILTER: (5, 16),
         T.USER_RINGBUF: (6, 1), T.CGRP_STORAGE: (6, 2), T.ARENA: (6, 9),
         T.INSN_ARRAY: (6, 19)}

_SINCE = {int(k): v for k, v in SINCE.items()}

ACCESS = int(_F_RDONLY | _F_WRONLY | _F_RDONLY_PROG | _F_WRONLY_PROG)
HTAB_FLAGS = int(_F_NO_PREALLOC | _F_NO_COMMON_LRU | _F_NUMA_NODE | ACCESS | _F_ZERO_SEED)
ARRAY_FLAGS = int(_F_NUMA_NODE | _F_MMAPABLE | ACCESS | _F_INNER_MAP | _F_PRESERVE_ELEMS)
QUEUE_FLAGS = int(_F_NUMA_NODE | ACCESS)
BLOOM_FLAGS = int(_F_NUMA_NODE | _F_ZERO_SEED | ACCESS)
STACK_FLAGS = int(_F_NUMA_NODE | _F_RDONLY | _F_WRONLY | _F_STACK_BUILD_ID)
LPM_FLAGS = int(_F_NO_PREALLOC | _F_NUMA_NODE | ACCESS)
DEV_FLAGS = int(_F_NUMA_NODE | ACCESS)
SOCK_FLAGS = int(_F_NUMA_NODE | _F_RDONLY | _F_WRONLY)
LOCAL_FLAGS = int(_F_NO_PREALLOC | _F_CLONE)
CGROUP_STORAGE_FLAGS = int(_F_NUMA_NODE | ACCESS)


# the kinds of Rejection
UNKNOWN_TYPE = "unknown-type"   # a map type the model does not know (newer than bpfmem?)
KERNEL = "kernel"               # the kernel refuses the shape (the error its map_alloc_check gives)
LOADER = "loader"               # the loader does not create the map (it refuses it first)


class Rejection(str):
    """Why a map is not created, as a value: ``errno`` (the kernel's, "" when the loader
    refuses without asking it), ``reason``, and ``kind`` (:data:`UNKNOWN_TYPE`,
    :data:`KERNEL`, :data:`LOADER`) for callers to branch on. It reads as its words,
    ``"ERRNO: reason"`` (what documents and tables show), so it is a string too."""

    def __new__(cls, errno: str, reason: str, kind: str = KERNEL):
        self = super().__new__(cls, f"{errno}: {reason}" if errno else reason)
        self.errno, self.reason, self.kind = errno, reason, kind
        return self

    def __reduce__(self):
        return (Rejection, (self.errno, self.reason, self.kind))


class Rejected(Exception):
    def __init__(self, errno: str, reason: str, kind: str = KERNEL):
        self.rejection = Rejection(errno, reason, kind)
        self.errno = errno
        self.reason = reason
        super().__init__(str(self.rejection))


def _access_ok(flags: int) -> bool:
    """bpf_map_flags_access_ok: not both read-only and write-only, for syscall or programs."""
    return not ((flags & _F_RDONLY and flags & _F_WRONLY)
                or (flags & _F_RDONLY_PROG and flags & _F_WRONLY_PROG))


def check(sh: MapShape, prof: KernelProfile) -> None:
    """Raise :class:`Rejected` when ``prof``'s kernel refuses to create ``sh``."""
    t, k, v, m, f, x = (sh.type, sh.key_size, sh.value_size, sh.max_entries, sh.map_flags,
                        sh.map_extra)
    since = _SINCE.get(t)
    if since is None:
        raise Rejected("EINVAL", f"unknown map type {t}", UNKNOWN_TYPE)
    if prof.map_types is not None:      # the kernel's own enum bpf_map_type (its BTF)
        if t not in prof.map_types:
            raise Rejected("EINVAL", f"this kernel has no map type {map_type_name(t)} (not in "
                                     "its enum bpf_map_type)")
    elif prof.release[:2] < since:
        raise Rejected("EINVAL", f"map type {map_type_name(t)} needs Linux "
                                 f"{since[0]}.{since[1]}+")
    if x and t not in (T.BLOOM_FILTER, T.ARENA):
        raise Rejected("EINVAL", "map_extra is only for bloom filters and arenas")
    if not _access_ok(f):
        raise Rejected("EINVAL", "read-only and write-only flags together")


    if t in (T.HASH, T.PERCPU_HASH, T.LRU_HASH, T.LRU_PERCPU_HASH, T.HASH_OF_MAPS):
        # kernel/bpf/hashtab.c htab_map_alloc_check, htab_map_alloc
        _check_flags(t, f, int(HTAB_FLAGS))
        if f & _F_NO_COMMON_LRU and t not in LRUS:
            raise Rejected("EINVAL", "BPF_F_NO_COMMON_LRU is only for LRU hashes")
        if t in LRUS and f & _F_NO_PREALLOC:
            raise Rejected("ENOTSUPP", "LRU maps are always preallocated (BPF_F_NO_PREALLOC "
                                       "is not supported)")
        if f & _F_NUMA_NODE and (t in PERCPU_HASHES or f & _F_NO_COMMON_LRU):
            raise Rejected("EINVAL", "BPF_F_NUMA_NODE does not apply to per-CPU maps")
        if m == 0 or k == 0 or v == 0:
            raise Rejected("EINVAL", "hash maps need key_size, value_size and max_entries > 0")
        if not prof.at_least(5, 11) and k > MAX_BPF_STACK:
            raise Rejected("E2BIG", f"key_size {k} exceeds {MAX_BPF_STACK} on this kernel")
        if k + v >= KMALLOC_MAX_SIZE - prof.sizes.htab_elem:
            raise Rejected("E2BIG", "key_size + value_size too large for one element")
        if t == T.HASH_OF_MAPS and v != 4:
            raise Rejected("EINVAL", "hash_of_maps values are 4-byte map fds")
        if t in PERCPU_HASHES and r8(v) > PCPU_MIN_UNIT_SIZE:
            raise Rejected("E2BIG", f"per-CPU value of {r8(v)} bytes exceeds "
                                    f"PCPU_MIN_UNIT_SIZE ({PCPU_MIN_UNIT_SIZE})")
        if p2(effective_max_entries(sh, prof)) * 16 > 0xFFFFFFFF:
            raise Rejected("E2BIG", "too many buckets")
        return
    if t in (T.ARRAY, T.PERCPU_ARRAY) or t in FD_ARRAYS or t == T.REUSEPORT_SOCKARRAY:
        # kernel/bpf/arraymap.c array_map_alloc_check, fd_array_map_alloc_check
        if t in FD_ARRAYS and v != 4:
            raise Rejected("EINVAL", f"{map_type_name(t)} values are 4-byte fds")
        if t in FD_ARRAYS and f & (_F_RDONLY_PROG | _F_WRONLY_PROG):
            # fd_array_map_alloc_check: "Program read-only/write-only not supported for
            # special maps yet"
            raise Rejected("EINVAL", f"{map_type_name(t)} maps do not take BPF_F_RDONLY_PROG "
                                     "or BPF_F_WRONLY_PROG")
        if t == T.REUSEPORT_SOCKARRAY and v not in (4, 8):
            raise Rejected("EINVAL", "reuseport_sockarray values are 4 or 8 bytes")
        _check_flags(t, f, int(ARRAY_FLAGS))
        if m == 0 or k != 4 or v == 0:
            raise Rejected("EINVAL", "arrays need key_size 4, value_size > 0, max_entries > 0")
        if t == T.PERCPU_ARRAY and f & _F_NUMA_NODE:
            raise Rejected("EINVAL", "BPF_F_NUMA_NODE does not apply to per-CPU arrays")
        if t != T.ARRAY and f & (_F_MMAPABLE | _F_INNER_MAP):
            raise Rejected("EINVAL", "BPF_F_MMAPABLE and BPF_F_INNER_MAP are only for arrays")
        if t != T.PERF_EVENT_ARRAY and f & _F_PRESERVE_ELEMS:
            raise Rejected("EINVAL", "BPF_F_PRESERVE_ELEMS is only for perf event arrays")
        if v > 0x7FFFFFFF:
            raise Rejected("E2BIG", "value_size too large")
        if t == T.PERCPU_ARRAY and r8(v) > PCPU_MIN_UNIT_SIZE:
            raise Rejected("E2BIG", f"per-CPU value of {r8(v)} bytes exceeds "
                                    f"PCPU_MIN_UNIT_SIZE ({PCPU_MIN_UNIT_SIZE})")
        return
    if t == T.STACK_TRACE:
        _check_flags(t, f, int(STACK_FLAGS))
        if m == 0 or k != 4 or v < 8 or v % 8:
            raise Rejected("EINVAL", "stack_trace needs key_size 4 and value_size a multiple "
                                     "of 8")
        if f & _F_STACK_BUILD_ID:
            if v % 32 or v // 32 > PERF_MAX_STACK:
                raise Rejected("EINVAL", "build-id stacks need value_size a multiple of 32, "
                                         f"at most {PERF_MAX_STACK} frames")
        elif v // 8 > PERF_MAX_STACK:
            raise Rejected("EINVAL", f"more than {PERF_MAX_STACK} frames "
                                     "(kernel.perf_event_max_stack)")
        if m > 1 << 31:
            raise Rejected("E2BIG", "max_entries above 2^31")
        return
    if t == T.LPM_TRIE:
        if (m == 0 or not f & _F_NO_PREALLOC or f & ~int(LPM_FLAGS)
                or not LPM_KEY_MIN <= k <= LPM_KEY_MAX or v < 1):
            raise Rejected("EINVAL", f"lpm_trie needs BPF_F_NO_PREALLOC, max_entries > 0 and "
                                     f"{LPM_KEY_MIN} <= key_size <= {LPM_KEY_MAX}")
        return
    if t in (T.QUEUE, T.STACK):
        _check_flags(t, f, int(QUEUE_FLAGS))
        if m == 0 or k != 0 or v == 0:
            raise Rejected("EINVAL", "queue/stack need key_size 0, value_size > 0, "
                                     "max_entries > 0")
        if v > KMALLOC_MAX_SIZE:
            raise Rejected("E2BIG", "value_size too large")
        return
    if t == T.BLOOM_FILTER:
        if v > KMALLOC_MAX_SIZE:
            raise Rejected("E2BIG", "value_size too large")
        _check_flags(t, f, int(BLOOM_FLAGS))
        if k != 0 or v == 0 or m == 0 or x & ~0xF:
            raise Rejected("EINVAL", "bloom_filter needs key_size 0, value_size > 0, "
                                     "max_entries > 0, map_extra (hash count) <= 15")
        return
    if t in RINGBUFS:
        _check_flags(t, f, int(_F_NUMA_NODE))
        if k or v or m == 0 or m & (m - 1) or m % prof.page_size:
            raise Rejected("EINVAL", "ring buffer size must be a power-of-2 multiple of the "
                                     "page size, key and value size 0")
        return
    if t in (T.DEVMAP, T.DEVMAP_HASH):
        _check_flags(t, f, int(DEV_FLAGS))
        if m == 0 or k != 4 or v not in (4, 8):
            raise Rejected("EINVAL", "devmap needs key_size 4, value_size 4 or 8")
        return
    if t == T.CPUMAP:
        _check_flags(t, f, int(_F_NUMA_NODE))
        if m == 0 or k != 4 or v not in (4, 8):
            raise Rejected("EINVAL", "cpumap needs key_size 4, value_size 4 or 8")
        if prof.nr_cpus is not None and m > prof.nr_cpus:
            raise Rejected("E2BIG", f"cpumap max_entries above NR_CPUS ({prof.nr_cpus})")
        return
    if t == T.XSKMAP:
        _check_flags(t, f, int(_F_NUMA_NODE | _F_RDONLY | _F_WRONLY))
        if m == 0 or k != 4 or v != 4:
            raise Rejected("EINVAL", "xskmap needs key_size 4, value_size 4")
        return
    if t in (T.SOCKMAP, T.SOCKHASH):
        if m == 0 or (t == T.SOCKMAP and k != 4) or k == 0 or v not in (4, 8) \
                or f & ~int(SOCK_FLAGS):
            raise Rejected("EINVAL", f"{map_type_name(t)} needs value_size 4 or 8"
                                     + (" and key_size 4" if t == T.SOCKMAP else ""))
        if t == T.SOCKHASH and k > MAX_BPF_STACK:
            raise Rejected("E2BIG", f"key_size above {MAX_BPF_STACK}")
        return
    if t in CGROUP_STORAGES:
        if k not in (8, 16):
            raise Rejected("EINVAL", "cgroup storage keys are 8 (cgroup id) or 16 bytes")
        if v == 0:
            raise Rejected("EINVAL", "value_size 0")
        limit = LOCAL_STORAGE_MAX_VALUE if t == T.CGROUP_STORAGE else min(
            LOCAL_STORAGE_MAX_VALUE, PCPU_MIN_UNIT_SIZE)
        if not prof.at_least(5, 11):
            limit = min(limit, 4096)
        if v > limit:
            raise Rejected("E2BIG", f"value_size above {limit}")
        _check_flags(t, f, int(CGROUP_STORAGE_FLAGS))
        if m:
            raise Rejected("EINVAL", "cgroup storage max_entries must be 0")
        return
    if t in LOCAL_STORAGES:
        if f & ~int(LOCAL_FLAGS) or not f & _F_NO_PREALLOC or m or k != 4 or v == 0:
            raise Rejected("EINVAL", "local storage needs BPF_F_NO_PREALLOC, key_size 4, "
                                     "max_entries 0 and BTF for key and value")
        if v > LOCAL_STORAGE_MAX_VALUE:
            raise Rejected("E2BIG", f"value_size above {LOCAL_STORAGE_MAX_VALUE}")
        return
    if t == T.ARENA:
        if k or v or m == 0 or not f & _F_MMAPABLE or f & ~int(
                _F_SEGV_ON_FAULT | _F_MMAPABLE | _F_NO_USER_CONV):
            raise Rejected("EINVAL", "arena needs BPF_F_MMAPABLE, key/value size 0 and a "
                                     "page count in max_entries")
        if x % prof.page_size:
            raise Rejected("EINVAL", "arena map_extra (user address) must be page aligned")
        if m * prof.page_size > 1 << 32:
            raise Rejected("E2BIG", "arena larger than 4 GiB")
        if x and (x >> 32) != ((x + m * prof.page_size - 1) >> 32):
            raise Rejected("ERANGE", "arena user range crosses a 4 GiB boundary")
        return


def _check_flags(t: int, f: int, mask: int) -> None:
    extra = f & ~mask
    if extra:
        from ..uapi import flag_names
        raise Rejected("EINVAL", f"flag(s) {','.join(flag_names(extra))} not supported by "
                                 f"{map_type_name(t)} maps")


def rejection(sh: MapShape, prof: KernelProfile) -> Rejection | None:
    """The kernel's refusal (it reads 'ERRNO: reason'), or None when the map is created."""
    try:
        check(sh, prof)
    except Rejected as e:
        return e.rejection
    return None
