"""The records of the live node: what a scan of the kernel, /proc and the cgroups saw, as plain
frozen values.

They live on the ground floor (beside :mod:`bpfmem.uapi` and :mod:`bpfmem.errors`) so that
``analysis/`` and ``report/`` can name their types without importing ``host/``. ``host/`` builds
them from the running system (:func:`bpfmem.host.live.scan_maps`,
:class:`bpfmem.host.podscan.PodSampler`, :func:`bpfmem.host.cgroup.read_cgroup_memory`);
``parse/`` decodes them from files (:mod:`bpfmem.parse.snapshot`: a saved snapshot,
``bpftool -j map show``).
"""

from __future__ import annotations

from bpfmem.values import dataclass, field, tuple_dataclass

__all__ = ["Owner", "ProgRef", "LiveMap", "LiveProg", "LiveBtf", "JitMemory", "Snapshot", "CgroupMemory", "ProcMem", "Pin",
           "PodSample"]


# ---- the maps of a node (one scan) ----

@dataclass(frozen=True, slots=True)
class Owner:
    """A process holding at least one fd to a map."""
    pid: int
    comm: str
    cgroup: str | None   # its memory cgroup (v1 memory line, else v2), as a host path
    fds: int = 1


@dataclass(frozen=True, slots=True)
class ProgRef:
    id: int
    name: str
    type: int


@tuple_dataclass
class LiveMap:
    """One map as the kernel reports it now, with who holds and uses it (a frozen dataclass
    stored as a tuple: a scan makes one per map on the node, values.tuple_dataclass)."""
    id: int
    name: str
    type: int
    key_size: int
    value_size: int
    max_entries: int
    map_flags: int
    map_extra: int
    btf_id: int
    memlock: int | None            # fdinfo memlock (bytes; meaning depends on the release)
    frozen: bool | None
    owners: tuple[Owner, ...] = ()
    programs: tuple[ProgRef, ...] = ()
    pins: tuple[str, ...] = ()
    entries: int | None = None     # None: not counted (not asked, or not countable)
    entries_complete: bool | None = None  # False: the time bound cut the count short
    entries_method: str | None = None     # batch | next_key | array | kernel

    @property
    def pressure(self) -> float | None:
        """entries / max_entries, when both are known (None for arrays: every slot always
        exists, so "full" says nothing)."""
        if self.entries is None or not self.max_entries or self.entries_method == "array":
            return None
        return self.entries / self.max_entries


@dataclass(frozen=True, slots=True)
class LiveProg:
    """One loaded program as the kernel reports it (``bpf_prog_info`` and fdinfo), with who
    holds it: processes with a program fd, links, pins."""
    id: int
    name: str
    type: int
    tag: str
    memlock: int | None          # fdinfo memlock (bytes: the pages of struct bpf_prog)
    xlated_prog_len: int         # bytes of instructions after the verifier's rewrites
    jited_prog_len: int          # bytes of the JIT image (0: not jited)
    map_ids: tuple[int, ...]
    btf_id: int                  # 0: no BTF
    verified_insns: int | None   # 5.16+ (None where the kernel does not say)
    load_time: int               # ns since boot
    created_by_uid: int
    owners: tuple[Owner, ...] = ()      # processes holding a program fd
    links: tuple[int, ...] = ()         # ids of the links that hold it
    link_owners: tuple[Owner, ...] = ()  # processes holding one of those links' fds
    pins: tuple[str, ...] = ()          # bpffs paths of the program or of a link to it


@dataclass(frozen=True)
class LiveBtf:
    """One BTF object loaded in the kernel (``bpf_btf_info``)."""
    id: int
    name: str
    btf_size: int                # bytes of the BTF blob the kernel keeps
    kernel_btf: bool             # vmlinux or a module's (not loaded by a process)
    owners: tuple[Owner, ...] = ()


@dataclass(frozen=True)
class JitMemory:
    """The JIT's memory against its limit: ``bpf_jit_limit`` (net.core sysctl) and what
    ``/proc/vmallocinfo`` shows allocated for JIT images (``bpf_prog_pack`` chunks, which
    the kernel charges against the limit whole, and single images); None where unreadable
    (vmallocinfo needs root)."""
    limit: int | None
    in_use: int | None
    packs: int | None            # bpf_prog_pack chunks (5.18+ x86)


@dataclass(frozen=True)
class Snapshot:
    """Everything one scan saw."""
    taken_at: float                 # time.time() at the start
    duration: float                 # seconds
    hostname: str
    kernel: str                     # uname release
    possible_cpus: int
    maps: tuple[LiveMap, ...]
    entries_counted: bool
    skipped: int = 0                # maps or processes that vanished mid-scan
    errors: tuple[str, ...] = ()    # non-fatal problems (e.g. a map whose count failed)
    bpffs: tuple[str, ...] = ()     # bpffs mount points walked for pins
    owners_from: str = ""           # "kernel iterator", "/proc (why)", or "" (not asked)
    progs: tuple[LiveProg, ...] | None = None   # None: programs were not scanned
    btfs: tuple[LiveBtf, ...] | None = None
    jit: JitMemory | None = None


# ---- one memory cgroup ("a pod") ----

@dataclass(frozen=True)
class CgroupMemory:
    """What one memory cgroup holds, normalized so that v1 and v2 stack the same way.

    ``usage`` counts the whole subtree on both versions, and so does the breakdown: v2 stat
    is hierarchical; for v1 the ``total_*`` stat fields (subtree sums, the ones that add up to
    the hierarchical ``memory.usage_in_bytes``) are used, the bare ones only when absent.
    ``usage`` ~= anon + file + kernel (+ sock on v2). v1 ``sock`` stays None: its TCP memory
    is a separate counter (``memory.kmem.tcp.usage_in_bytes``, in ``counters``) that
    ``usage_in_bytes`` does not include, and v1 stat has none of the kernel parts.
    """
    version: int                     # 1 or 2
    path: str                        # as in /proc/PID/cgroup
    fs_path: str                     # the directory, as seen inside root
    usage: int                       # memory.current | memory.usage_in_bytes
    limit: int | None                # memory.max | memory.limit_in_bytes; None = unlimited
    peak: int | None                 # memory.peak (5.19+) | memory.max_usage_in_bytes
    anon: int | None                 # v2 anon | v1 total_rss (anon incl. THP + swap cache)
    file: int | None                 # v2 file | v1 total_cache (page cache incl. shmem)
    kernel: int | None               # v2 kernel (5.18+), else the sum of the parts the kernel
                                     # reports (a lower bound) | v1 memory.kmem.usage_in_bytes
    kernel_stack: int | None
    slab_reclaimable: int | None
    slab_unreclaimable: int | None
    percpu: int | None               # v2 5.9+
    sock: int | None                 # v2 only
    vmalloc: int | None              # v2 6.0+
    swap: int | None                 # memory.swap.current | v1 total_swap
    procs: tuple[int, ...]           # direct members only (see read_subtree_procs)
    stat: dict[str, int] = field(repr=False)       # memory.stat as is
    counters: dict[str, int] = field(repr=False)   # every single-number file read, as is


@dataclass(frozen=True)
class ProcMem:
    """One process of the cgroup (smaps_rollup figures in bytes; None when unreadable)."""
    pid: int
    comm: str
    rss: int | None
    pss: int | None
    uss: int | None            # Private_Clean + Private_Dirty (+ Private_Hugetlb)
    pss_anon: int | None       # 5.8+
    pss_file: int | None
    pss_shmem: int | None
    swap: int | None
    started: float | None      # seconds since boot (/proc/PID/stat starttime)


@dataclass(frozen=True)
class Pin:
    path: str
    pinned_at: float | None    # seconds since boot (the bpffs inode's ctime)


@dataclass(frozen=True)
class PodSample:
    """Everything read about one cgroup at one instant."""
    t: float                              # time.monotonic() when the reading started
    wall: float                           # time.time() then
    duration: float                       # seconds the reading took
    cgroup: CgroupMemory
    procs: tuple[ProcMem, ...]            # the whole subtree
    maps: tuple[LiveMap, ...]             # held by those processes (owners: them only)
    pins: dict = field(default_factory=dict)   # map id -> tuple[Pin, ...]
    skipped: int = 0                      # processes or maps gone meanwhile
    bpffs: tuple[str, ...] = ()
    details: dict = field(default_factory=dict)   # pid -> goproc.ProcDetail (with ``go``)
    files: object = None                  # pagemap.FilePages of its open and mapped files
    exe_files: object = None              # the same of its Go executables (whole files)
    progs: tuple | None = None            # LiveProg held by those processes (None: not read)
    btfs: tuple | None = None             # LiveBtf they hold or their programs use (None: not read)
