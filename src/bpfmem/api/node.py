"""The live node: every BPF map on this host and the memory cgroups whose processes hold
them."""

from __future__ import annotations

from ..analysis.live import cgroup_sums, memlock_behaviour
from ..errors import HostError
from ..host.cgroup import CgroupMemory, CgroupUsage, read_cgroup_memory, read_cgroup_usage
from ..host.live import Snapshot, scan_maps

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from ..host.rescan import ScanMemo


def scan_node(*, entries: bool = False, time_bound: float = 0.5, pins: bool = True,
              owners: bool = True, progress=None, parallel: bool = False,
              owners_method: str = "auto", memo: ScanMemo | None = None,
              programs: bool = False) -> Snapshot:
    """Scan every BPF map on this host (root or CAP_SYS_ADMIN): a :class:`Snapshot`.
    ``parallel`` forks a helper for the walk of processes (not from threaded programs);
    ``owners_method`` "auto", "iterator" (the kernel's task_file iterator) or "proc";
    ``memo`` (from :func:`scan_memo`, kept between calls) makes repeated scans incremental.
    ``programs`` also walks every program, link and BTF object (host/progs.py): the
    Snapshot's ``progs``, ``btfs`` and ``jit`` (None without); with ``parallel`` and no
    memo, the JIT's memory (/proc/vmallocinfo, which the kernel takes 3-8 ms to write) is
    read by a thread beside the map scan."""
    found: dict | None = {} if programs else None   # one owner walk for maps and programs
    jit_soon = None
    if programs and parallel and memo is None:      # a single scan from the command line:
        from ..host.progs import jit_memory_soon    # the JIT's memory read beside the maps
        jit_soon = jit_memory_soon()
    snap = scan_maps(entries=entries, entry_time_bound=time_bound, pins=pins, owners=owners,
                     progress=progress, parallel=parallel, owners_method=owners_method,
                     memo=memo, bpf_fds=found)
    if not programs:
        return snap
    from ..host.progs import scan_programs
    from ..values import replace
    if progress is not None:
        progress("programs and BTF")
    ps = scan_programs(owners=owners, pins=pins, bpffs=list(snap.bpffs) if pins else None,
                       known=memo.prog_infos if memo is not None else None,
                       jit_cache=memo.prog_jit if memo is not None else None,
                       fds=found.get("fds"), last=memo.prog_last if memo is not None else None,
                       listed=found.get("progs"), owner_of=found.get("owners"),
                       pin_stamps=found.get("pin_stamps"), jit_soon=jit_soon)
    return replace(snap, progs=ps.progs, btfs=ps.btfs, jit=ps.jit,
                   skipped=snap.skipped + ps.gone, errors=snap.errors + ps.errors)


def scan_memo(profile, *, recheck: float = 900.0, full_every: int = 0) -> ScanMemo:
    """What repeated :func:`scan_node` calls keep between scans (the exporter's), with the
    model of ``profile``'s kernel saying which maps' memlock cannot change or follows their
    count; what is so taken on trust is read again, a slice at a time, at least every
    ``recheck`` seconds (0: never); with ``full_every``, every ``full_every``-th scan reads
    everything again (the first always does)."""
    from ..host.rescan import ScanMemo     # (weakref: the exporter's, not a snapshot's)
    return ScanMemo(memlock_static=lambda m: memlock_behaviour(m, profile) == "static",
                    memlock_counts=lambda m: memlock_behaviour(m, profile) == "counts",
                    full_every=full_every, recheck=recheck)


_SUMS: list = [None, None]      # (maps, their cgroup sums) of the last call


def sums_of(maps) -> list:
    """:func:`~bpfmem.analysis.live.cgroup_sums` of ``maps``, kept for the very same tuple
    (an incremental scan that found nothing moved gives the last scan's tuple again)."""
    if _SUMS[0] is not maps:
        _SUMS[:] = [maps, cgroup_sums(maps)]
    return _SUMS[1]


def cgroup_memory_of(snap: Snapshot) -> dict[str, CgroupMemory]:
    """``{cgroup path: CgroupMemory}`` for every memory cgroup whose processes hold maps in
    ``snap`` (cgroups that vanish or cannot be read are left out)."""
    out = {}
    for path in sorted({s.cgroup for s in sums_of(snap.maps) if s.cgroup}):
        try:
            out[path] = read_cgroup_memory(path)
        except (HostError, OSError):
            continue
    return out


def cgroup_usage_of(snap: Snapshot) -> dict[str, CgroupUsage]:
    """``{cgroup path: CgroupUsage}`` (usage and limit) for every memory cgroup whose
    processes hold maps in ``snap``: what the exporter's cgroup rows show, two small files
    a cgroup (cgroups that vanish or cannot be read are left out)."""
    out = {}
    for path in sorted({s.cgroup for s in sums_of(snap.maps) if s.cgroup}):
        try:
            out[path] = read_cgroup_usage(path)
        except (HostError, OSError):
            continue
    return out
