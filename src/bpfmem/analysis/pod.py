"""Pure accounting of one memory cgroup ("a pod"): where its usage goes, which BPF maps it pays
for, how it moved over time, and what an upgrade would add. No system access: the input is
one or more :class:`bpfmem.records.PodSample` readings (or values built like them).

How the usage splits (every part from the cgroup's own counters, so they add up to usage):

==============  ============================================================================
processes       the cgroup's anonymous memory: v2 ``anon``, v1 ``total_rss``
page cache      v2 ``file``, v1 ``total_cache`` (includes shmem/tmpfs)
kernel          the cgroup's kernel memory minus the maps below: v2 ``kernel`` (5.18+, else
                the sum of its parts), v1 ``memory.kmem.usage_in_bytes``
maps            the model's memcg charge (:func:`bpfmem.model.estimate.estimate`) of the maps
                that the cgroup's processes hold and that were (probably) created here
programs        out of "kernel": the memlock of the programs its processes hold (a lower
                bound of what their loads left charged)
btf             the BTF objects they hold or loaded their programs with: 0 bytes, exactly
                (the kernel charges BTF to no memory cgroup; its size, node memory, in a
                note); shown where the programs were read
sock            v2 only (v1 counts TCP buffers apart from usage)
go_*            for Go processes (:mod:`bpfmem.analysis.gosplit`), out of "processes": heap
                in use, freed not returned (or the heap arenas whole, without the runtime's
                figures), stacks and runtime metadata, as *resident* memory: what the runtime
                counts in use but never wrote (not in RSS, not charged) comes off the heap
                and is named once in a note ("allocated but never written")
binary          out of "page cache": the Go executables' resident file pages that the kernel
                charges to this cgroup (``/proc/PID/pagemap`` + ``/proc/kpagecgroup``; once
                per page frame; in a one-time reading the whole executable files, also
                their pages read ahead and not mapped). A page cache page is charged to the cgroup that read it
                first: the binary's pages charged elsewhere are "shared, charged elsewhere"
                (``shared_elsewhere``, not in usage), like other files the Go processes map.
                Without pagemap (no root), a stated estimate: the binaries' resident pages.
                Each part is capped at what is left of the one it comes from (said in a note)
open_files      out of "page cache": the resident pages of the regular files its processes
                have open or map (``/proc/PID/fd``, ``map_files``; Go executables aside)
                that the kernel charges here; the rest of them is "shared, charged
                elsewhere" (a one-time reading: not in a trace)
thp_residue     anonymous memory charged here that no process maps (:func:`anon_unmapped`):
                huge pages partly returned with MADV_DONTNEED; reclaimable (a note says so,
                and the Go setting that avoids it); at most what is left of usage
unexplained     usage minus all of the above: the cgroup's counters are per-CPU batched, so
                usage and memory.stat disagree by up to a few pages per CPU; and maps whose
                model charge exceeds the kernel figure push it below zero
==============  ============================================================================

Where a map is charged: the memory cgroup of the process that *created* it pays, for as long
as the map lives, whoever holds it later. A map that is pinned in bpffs outlives its creator,
so a pod that opens a pin left by an earlier incarnation (the previous container of a
restarted or upgraded pod, or another pod) holds a map it does not pay for: its charge stayed
with that earlier cgroup (or that cgroup's parent, once it was removed). The kernel does not
say which cgroup a map is charged to; a pin made before the cgroup's oldest process started is
the evidence used here: such a map is reported as "charged elsewhere" and left out of the sum.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..model.kernel import KernelProfile
from ..uapi import map_type_name
from ..units import format_size
from .gosplit import GoSplit, go_split
from .hints import SAMPLE_FASTER, Hinted
from .live import check_map
from .pins import reusable

if TYPE_CHECKING:
    from .diff import DiffResult

__all__ = ["ProcRow", "MapRow", "Component", "PodView", "pod_view", "COMPONENTS",
           "TracePoint", "Peak", "TraceSummary", "trace_point", "summarize_trace",
           "Headroom", "HeadroomLine", "headroom_after", "kernel_name",
           "TraceBuilder", "TraceCgroup", "PodTrace", "Upgrade", "gc_at_peak", "garbage_at",
           "anon_unmapped"]

# the stacked parts, bottom to top, with their labels
COMPONENTS = (("go_heap", "Go heap in use"), ("go_free", "Go heap freed, not returned"),
              ("go_arenas", "Go heap arenas"), ("go_stacks", "Go stacks"),
              ("go_runtime", "Go runtime metadata"),
              ("processes", "processes (anon)"),
              ("thp_residue", "huge-page residue (reclaimable)"),
              ("binary", "Go binary pages"),
              ("open_files", "its open and mapped files"),
              ("page_cache", "page cache"),
              ("kernel", "kernel (not maps)"), ("maps", "BPF maps"),
              ("programs", "BPF programs (memlock, at least)"),
              ("btf", "BPF BTF objects (charged to no cgroup)"), ("sock", "sockets"),
              ("unexplained", "unexplained"))
# BPF_OBJ_NAME_LEN - 1: the kernel keeps 15 characters of a map's name
_NAME_LEN = 15
# pins within this long of the oldest process's start (clock tick granularity) are not
# taken as made "before" it
_PIN_MARGIN = 0.05


@dataclass(frozen=True)
class ProcRow:
    pid: int
    comm: str
    rss: int | None
    pss: int | None
    uss: int | None
    pss_anon: int | None
    swap: int | None
    maps: int                    # maps it holds an fd to


@dataclass(frozen=True)
class MapRow:
    """A map held by the cgroup's processes, and whether this cgroup pays for it."""
    id: int
    name: str
    type: str
    key_size: int
    value_size: int
    max_entries: int
    map_flags: int
    map_extra: int
    memlock: int | None          # fdinfo
    charged: int | None          # the model's memcg charge now (None: not modelled)
    charged_full: int | None
    tolerance: int               # +- bytes the model's charge is good to
    entries: int | None
    holders: tuple[int, ...]     # pids in the cgroup holding it
    pins: tuple[str, ...]
    charged_here: bool
    why: str                     # one line: why here / why elsewhere


@dataclass(frozen=True)
class Component:
    key: str
    label: str
    bytes: int | None


@dataclass(frozen=True)
class PodView:
    version: int
    path: str                    # as /proc/PID/cgroup names it
    fs_path: str
    usage: int
    limit: int | None
    headroom: int | None         # limit - usage
    peak: int | None             # the kernel's high-water mark (memory.peak/max_usage)
    components: tuple[Component, ...]    # add up to usage exactly (unexplained: the rest)
    kernel_kinds: tuple[tuple[str, int], ...]   # what the cgroup reports of its kernel memory
    processes: tuple[ProcRow, ...]
    maps: tuple[MapRow, ...]
    maps_here: int               # model charge of the maps charged here
    maps_elsewhere: int          # model charge of the held maps charged to another cgroup
    maps_unknown: int            # held maps the model cannot size
    totals: dict                 # sums over processes: rss, pss, uss, pss_anon, swap
    notes: tuple[str, ...]
    go: tuple = ()               # GoSplit of each Go process, largest first
    details: dict = field(default_factory=dict)   # pid -> ProcDetail read with the view
    kernel: KernelProfile | None = None   # what the maps' charges were modelled on
    upgrade: "Upgrade | None" = None      # what an upgrade would make of it (pod --after)
    shared_elsewhere: dict = field(default_factory=dict)   # bytes its processes map that
    #       another cgroup is charged for (not in usage): "binary", "mapped_files"

    def component(self, key: str) -> int | None:
        return next((c.bytes for c in self.components if c.key == key), None)

    @property
    def share(self) -> float | None:
        return self.usage / self.limit if self.limit else None


def kernel_name(t: int) -> str:
    try:
        return map_type_name(t)
    except (ValueError, KeyError):
        return str(t)


def _sum(xs) -> int | None:
    xs = [x for x in xs if x is not None]
    return sum(xs) if xs else None


def _classify(m, pins, oldest_start: float | None) -> tuple[bool, str]:
    if not pins:
        return True, "not pinned: created by a process of this cgroup (it dies with its holders)"
    times = [p.pinned_at for p in pins if p.pinned_at is not None]
    if oldest_start is not None and times and min(times) < oldest_start - _PIN_MARGIN:
        ago = oldest_start - min(times)
        return False, (f"pinned {_ago(ago)} before this cgroup's oldest process started: "
                       "created by an earlier incarnation (or another pod), whose cgroup "
                       "(or its parent) still pays for it")
    if oldest_start is None or not times:
        return True, "pinned, pin time unknown: assumed created here"
    return True, "pinned after this cgroup's oldest process started: created here"


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _map_rows(sample, prof: KernelProfile | None, oldest: float | None) -> list[MapRow]:
    rows = []
    for m in sample.maps:
        pins = sample.pins.get(m.id, ())
        here, why = _classify(m, pins, oldest)
        charged = charged_full = None
        tol = 0
        if prof is not None:
            chk = check_map(m, prof)
            charged, charged_full = chk.charged, chk.charged_full
            if charged is not None:
                tol = prof.page_size
        rows.append(MapRow(
            m.id, m.name, kernel_name(m.type), m.key_size, m.value_size, m.max_entries,
            m.map_flags, m.map_extra, m.memlock, charged, charged_full, tol, m.entries,
            tuple(o.pid for o in m.owners), tuple(p.path for p in pins), here, why))
    return rows


def _kernel_kinds(cg) -> list[tuple[str, int]]:
    if cg.version == 2:
        keys = ("kernel_stack", "pagetables", "sec_pagetables", "percpu", "slab_reclaimable",
                "slab_unreclaimable", "vmalloc", "sock")
        return [(k, cg.stat[k]) for k in keys if k in cg.stat]
    out = []
    for key, name in (("memory.kmem.usage_in_bytes", "kmem"),
                      ("memory.kmem.tcp.usage_in_bytes", "tcp (not in usage)")):
        if key in cg.counters:
            out.append((name, cg.counters[key]))
    return out


def pod_view(sample, prof: KernelProfile | None) -> PodView:
    """Split one reading of a cgroup into parts that add up to its usage.

    ``prof`` is the kernel to model the maps' charges on (the host's); None leaves map
    charges unknown (then every map's memory stays inside "kernel")."""
    cg = sample.cgroup
    starts = [p.started for p in sample.procs if p.started is not None]
    oldest = min(starts) if starts else None
    rows = _map_rows(sample, prof, oldest)
    here = sum(r.charged for r in rows if r.charged_here and r.charged is not None)
    elsewhere_maps = sum(r.charged for r in rows
                         if not r.charged_here and r.charged is not None)
    unknown = sum(1 for r in rows if r.charged is None)
    notes: list[str] = []
    kernel_other = None
    maps_part: int | None = here if rows or prof is not None else None
    v1_root = cg.version == 1 and cg.path == "/"
    if v1_root:   # mem_cgroup_usage() of the v1 root: anon + page cache (+ swap), no kmem
        notes.append("the v1 root cgroup's usage counts only anon and page cache: its "
                     "kernel memory (and any map) is not in it")
        maps_part = None
    elif cg.kernel is not None:
        kernel_other = cg.kernel - here
        if kernel_other < 0:
            notes.append(
                f"the model's charge of the maps held here ({format_size(here)}) exceeds the "
                f"cgroup's kernel memory ({format_size(cg.kernel)}): some of them are charged to "
                "another cgroup although no pin says so (created elsewhere and passed over, or "
                "opened by id)")
            kernel_other = 0
    elif here:
        notes.append("the cgroup reports no kernel memory figure: maps are shown from the "
                     "model alone")
    sock = cg.sock if cg.version == 2 else None
    parts = {"processes": cg.anon, "page_cache": cg.file, "kernel": kernel_other,
             "maps": maps_part, "sock": sock}
    _carve_programs(parts, sample, prof, notes)
    _btf_part(parts, sample, notes)
    details = dict(getattr(sample, "details", None) or {})
    splits = sorted((x for x in (go_split(d) for d in details.values()) if x is not None),
                    key=lambda x: -x.rss)
    elsewhere: dict = {}
    go_keys = (_carve_go(parts, splits, details, notes, elsewhere,
                         getattr(sample, "files", None) is not None,
                         getattr(sample, "exe_files", None)) if splits else ())
    fp = getattr(sample, "files", None)
    if fp is not None and parts["page_cache"] is not None:
        take = max(0, min(fp.here * fp.page_size, parts["page_cache"]))
        parts["open_files"] = take
        parts["page_cache"] -= take
        elsewhere["open_files"] = fp.elsewhere * fp.page_size
        if fp.elsewhere:
            notes.append(f"shared, charged elsewhere: {format_size(fp.elsewhere * fp.page_size)}"
                         f" of the page cache of the {fp.files} files its processes have open "
                         "or map is charged to the cgroups that read it first, not here")
        if fp.capped:
            notes.append(f"{fp.capped} open file(s) larger than 4 GiB: only their first 4 GiB "
                         "were looked at")
    known = sum(v for v in parts.values() if v is not None)
    residue = anon_unmapped(cg)
    if residue is not None:
        parts["thp_residue"] = max(0, min(residue, cg.usage - known))
        known += parts["thp_residue"]
        if parts["thp_residue"] >= (1 << 20):
            notes.append(_residue_note(parts["thp_residue"], cg, splits))
    parts["unexplained"] = cg.usage - known
    comps = tuple(Component(k, label, parts[k]) for k, label in COMPONENTS
                  if not (k == "sock" and cg.version == 1)
                  and (k != "thp_residue" or residue is not None)
                  and (k != "open_files" or k in parts)
                  and (k != "programs" or k in parts)
                  and (k != "btf" or k in parts)
                  and (not k.startswith("go_") and k != "binary" or k in go_keys))
    missing = [label for k, label in COMPONENTS if k in ("processes", "page_cache", "kernel")
               and parts[k] is None and not (k == "kernel" and here)]
    if missing:
        notes.append(f"not reported by this cgroup: {', '.join(missing)} (in unexplained)")
    if unknown:
        notes.append(f"{unknown} held map(s) the model cannot size: their memory stays in "
                     "kernel")
    if any(not r.charged_here for r in rows):
        notes.append(
            f"{sum(1 for r in rows if not r.charged_here)} held map(s) "
            f"({format_size(elsewhere_maps)}) were pinned before this cgroup's processes started: "
            "charged to the cgroup that created them, not here")
    procs = []
    held_by: dict[int, int] = {}
    for r in rows:
        for pid in r.holders:
            held_by[pid] = held_by.get(pid, 0) + 1
    for p in sorted(sample.procs, key=lambda p: -(p.pss or p.rss or 0)):
        procs.append(ProcRow(p.pid, p.comm, p.rss, p.pss, p.uss, p.pss_anon, p.swap,
                             held_by.get(p.pid, 0)))
    totals = {k: _sum(getattr(p, k) for p in sample.procs)
              for k in ("rss", "pss", "uss", "pss_anon", "swap")}
    return PodView(
        cg.version, cg.path, cg.fs_path, cg.usage, cg.limit,
        None if cg.limit is None else cg.limit - cg.usage, cg.peak, comps,
        tuple(_kernel_kinds(cg)), tuple(procs),
        tuple(sorted(rows, key=lambda r: (not r.charged_here, -(r.charged or 0), r.id))),
        here, elsewhere_maps, unknown, totals, tuple(notes), tuple(splits), details, prof,
        shared_elsewhere=elsewhere)


def _carve_programs(parts: dict, sample, prof: KernelProfile | None, notes: list) -> None:
    """The programs its processes hold, as their own part taken out of "kernel": their
    memlock, a lower bound of what their loads left charged (measured: memlock + 1 page on
    6.1/6.12, 4-24Ki a small program on 6.18; aux data, line info and the JIT come beside).
    Not on a kernel that charges no memory cgroup for them (before 5.11), nor without a
    kernel figure to take them from."""
    progs = getattr(sample, "progs", None)
    if progs is None or parts.get("kernel") is None:
        return
    from ..model.kernel import CHARGE_NONE
    if prof is not None and prof.charge_era == CHARGE_NONE:
        return
    mine = sum(p.memlock or 0 for p in progs)
    take = min(mine, parts["kernel"])
    parts["programs"] = take
    parts["kernel"] -= take
    if progs:
        notes.append(f"{len(progs)} program(s) held here: memlock {format_size(mine)} "
                     "(a lower bound of what their loads left charged, taken to be this "
                     "cgroup's: a program is charged to the cgroup that loaded it)")


def _btf_part(parts: dict, sample, notes: list) -> None:
    """The BTF objects its processes hold or loaded their programs with, as their own part:
    what the cgroup pays for them is 0 bytes, exactly. The kernel allocates a BTF object
    (kernel/bpf/btf.c: btf_parse's struct btf, the copy of the blob, its type tables) with
    GFP_KERNEL and no __GFP_ACCOUNT, so no memory cgroup is charged for it on any release
    (tests/test_btf_charge.py measures it on the running kernel); only its fd's file is, as
    any fd's, in "kernel". The kernel memory they take is node memory: at least their
    ``btf_size`` (the blob's copy), said in a note."""
    btfs = getattr(sample, "btfs", None)
    if btfs is None:
        return
    parts["btf"] = 0
    if btfs:
        size = sum(b.btf_size for b in btfs)
        notes.append(f"{len(btfs)} BTF object(s) held here or loaded with its programs: at "
                     f"least {format_size(size)} of kernel memory (their BTF data) that no "
                     "memory cgroup is charged for (the kernel allocates BTF unaccounted): "
                     "node memory, not this cgroup's")


def _resident_go(x: GoSplit) -> tuple[dict, int]:
    """One Go process's heap parts as resident memory: the runtime counts spans it allocated
    but never wrote (a fresh large allocation, a freshly grown heap), which are not in RSS
    (the split's negative "unexplained"); they come off heap in use, then freed, then the
    goroutine stacks. Returns (part -> bytes, bytes allocated but never written)."""
    out = {"go_heap": x.part("heap_inuse") or 0, "go_free": x.part("heap_free") or 0,
           "go_arenas": x.part("go_arenas") or 0, "go_stacks": x.part("stacks") or 0,
           "go_runtime": x.part("runtime") or 0}
    unwritten = max(0, -(x.part("unexplained") or 0)) if x.part("heap_inuse") is not None \
        else 0
    left = unwritten
    for k in ("go_heap", "go_free", "go_stacks"):
        take = min(left, out[k])
        out[k] -= take
        left -= take
    return out, unwritten - left


def anon_unmapped(cg) -> int | None:
    """Anonymous memory the cgroup is charged for that no process maps: the anon LRU
    (active_anon + inactive_anon, which also holds shmem and swap cache) less the mapped
    anon (v2 ``anon``, v1 ``rss``, both NR_ANON_MAPPED), shmem and swap cache; None when
    memory.stat lacks the fields. When a process returns part of a transparent huge page
    (MADV_DONTNEED on 64 KiB of it, as Go's scavenger does), the kernel splits only the
    page's mapping: the unmapped 4 KiB parts leave ``anon`` at once but the 2 MiB page stays
    charged, on the LRU, until a deferred split (under memory pressure) or reclaim frees
    them. (Pages being freed at the instant of the reading count too: a few.)"""
    st = cg.stat

    def get(key: str) -> int | None:
        return st.get(f"total_{key}", st.get(key)) if cg.version == 1 else st.get(key)
    active, inactive = get("active_anon"), get("inactive_anon")
    if active is None or inactive is None or cg.anon is None:
        return None
    return max(0, active + inactive - cg.anon - (get("shmem") or 0)
               - (get("swapcached") or 0))


def _residue_note(residue: int, cg, splits) -> str:
    v1 = cg.version == 1
    how = ("total_active_anon + total_inactive_anon - total_rss - total_shmem" if v1
           else "active_anon + inactive_anon - anon - shmem")
    text = (f"huge-page residue {format_size(residue)}: anonymous memory charged here that no "
            f"process maps any more (memory.stat {how}): transparent huge pages of which a "
            "process returned parts (MADV_DONTNEED splits only the mapping; the 2 MiB page "
            "stays charged). Reclaimable: the kernel frees it under memory pressure, before "
            "this cgroup would reach its limit, without OOM")
    vers = sorted({x.version for x in splits if x.version})
    if vers:
        text += ("; for Go: GODEBUG=disablethp=1 (Go 1.21.6 and later) keeps the heap off "
                 "huge pages; before that, start it with THP disabled (prctl "
                 "PR_SET_THP_DISABLE, inherited across exec) or THP 'never' "
                 f"(here: {', '.join(vers)})")
    return text


def _carve_go(parts: dict, splits: list[GoSplit], details: dict, notes: list[str],
              elsewhere: dict, files_read: bool = False,
              exe_files=None) -> tuple[str, ...]:
    """Take the Go processes' parts out of "processes" and "page cache" (in place); the
    keys added. The heap parts are what is resident (:func:`_resident_go`); the binary's
    pages are those charged to this cgroup (pagemap + kpagecgroup), else an estimate."""
    sums = {"go_heap": 0, "go_free": 0, "go_arenas": 0, "go_stacks": 0, "go_runtime": 0}
    unwritten = 0
    for x in splits:
        res, nw = _resident_go(x)
        unwritten += nw
        for k in sums:
            sums[k] += res[k]
    if unwritten >= (1 << 20):
        notes.append(f"Go heap allocated but never written: {format_size(unwritten)} the "
                     "runtime counts in use (HeapInuse/StackInuse) is not resident, so not "
                     "charged: the Go parts here are resident memory (the process blocks "
                     "show the runtime's own figures)")
    keys = [k for k in sums if k != "go_arenas" or sums[k]]
    if not any(x.part("heap_inuse") is not None for x in splits):
        keys = [k for k in keys if k not in ("go_heap", "go_free", "go_runtime")]
    if parts["processes"] is not None:
        left = parts["processes"]
        short = 0
        for k in keys:
            take = max(0, min(sums[k], left))
            short += sums[k] - take
            parts[k] = take
            left -= take
        parts["processes"] = left
        if short > (1 << 20):
            notes.append(f"the Go processes' resident parts exceed the cgroup's anonymous "
                         f"memory by {format_size(short)}: the last ones are cut to fit "
                         "(the readings moved apart, or memory charged to another cgroup)")
    else:
        keys = []
    if parts["page_cache"] is not None:
        ds = [details[x.pid] for x in splits]
        if ds and all(getattr(d, "binary_pages", None) is not None for d in ds):
            here = frozenset().union(*(d.binary_pages.here for d in ds))
            other = frozenset().union(*(d.binary_pages.elsewhere for d in ds)) - here
            files = frozenset().union(*(d.file_pages.elsewhere for d in ds
                                        if d.file_pages is not None))
            page = ds[0].binary_pages.page_size
            binary = len(here) * page
            elsewhere["binary"] = len(other) * page
            if exe_files is not None:   # the executables read whole: their pages not
                #                         mapped (read ahead) are the binary's too
                binary = max(binary, exe_files.here * exe_files.page_size)
                elsewhere["binary"] = exe_files.elsewhere * exe_files.page_size
                other = frozenset(range(exe_files.elsewhere))
            if files_read:         # the pod's open and mapped files are counted whole
                files = frozenset()
            else:
                elsewhere["mapped_files"] = len(files) * page
            if other or files:
                notes.append(
                    f"shared, charged elsewhere: {format_size(len(other) * page)} of the Go "
                    "binaries' resident pages" + (
                        f" and {format_size(len(files) * page)} of other files the Go "
                        "processes map" if files else "")
                    + " are charged to the cgroup that read them first (/proc/kpagecgroup), "
                    "not to this one: not in its usage")
        else:
            binary = 0
            seen: dict = {}    # one executable file mapped by several processes: counted once
            for x in splits:
                c = details[x.pid].classes
                key = details[x.pid].exe or x.pid
                seen[key] = max(seen.get(key, 0),
                                c.binary_text + c.binary_rodata + c.binary_data)
            binary = sum(seen.values())
            why = next((d.pages_unread for d in ds if getattr(d, "pages_unread", None)),
                       None)
            notes.append("Go binary pages are an estimate (at most the binaries' resident "
                         "pages, at most the page cache): who is charged for them is "
                         f"unknown ({why or 'pagemap not read'}); pages read first by another "
                         "cgroup are charged there")
        take = max(0, min(binary, parts["page_cache"]))
        parts["binary"] = take
        parts["page_cache"] -= take
        keys.append("binary")
    return tuple(keys)


# ---- over time ----

@dataclass(frozen=True)
class TracePoint:
    """One sample of a trace: seconds since the trace started, and the parts of usage."""
    t: float
    usage: int
    limit: int | None
    parts: dict                  # component key -> bytes (None when unknown)
    procs: int
    maps: int
    kernel_peak: int | None      # the cgroup's own high-water mark at that moment


def trace_point(view: PodView, t: float) -> TracePoint:
    return TracePoint(t, view.usage, view.limit, {c.key: c.bytes for c in view.components},
                      len(view.processes), len(view.maps), view.peak)


@dataclass(frozen=True)
class Peak:
    t: float
    usage: int
    index: int
    parts: dict


@dataclass(frozen=True)
class TraceSummary:
    samples: int
    duration: float              # t of the last sample
    interval: float | None       # median time between samples
    peak: Peak | None            # the highest sampled usage (first one if tied)
    kernel_peak: int | None      # the cgroup's own high-water mark at the end
    kernel_peak_between: bool    # the kernel saw a higher usage than any sample did
    start: int | None            # usage of the first sample
    settled: int | None          # median usage over the last tenth of the trace
    above_settled: int | None    # peak - settled: what a start-up spike costs
    limit: int | None
    peak_share: float | None     # peak / limit
    notes: tuple[str, ...]
    asked_interval: float | None = None
    behind: bool = False         # samples came markedly slower than asked
    reading: float | None = None         # median seconds one reading took
    processes: int | None = None         # the most processes one sample saw
    left: tuple = ()             # (pid, comm, t of the last sample that saw it)
    peak_go_heap: int | None = None      # HeapAlloc of the Go processes at the peak
    peak_garbage: int | None = None      # of it, freed by the next GC cycle
    peak_gc_at: float | None = None      # t of the first sample after that cycle


def summarize_trace(points: list[TracePoint], *, kernel_peak_before: int | None = None,
                    fresh_cgroup: bool = False, interval: float | None = None,
                    readings: list[float] | None = None, left: tuple = (),
                    processes: int | None = None, gc: dict | None = None,
                    late_figures: int = 0, bare_figures: int = 0) -> TraceSummary:
    """The peak of a trace and when it happened; what the usage settled at; whether the
    samples kept up with ``interval`` (``readings``: seconds each took); the processes that
    left (``left``: (pid, comm, t)); and, with ``gc`` (:func:`gc_at_peak`), how much of the
    Go heap at the peak was garbage the next GC cycle freed.

    The cgroup's own high-water mark (memory.peak / max_usage_in_bytes) sees every charge,
    also between samples. For a cgroup made for the trace (``fresh_cgroup``) it is the true
    peak; for an existing one it only counts if it rose during the trace (it is above
    ``kernel_peak_before``)."""
    if not points:
        return TraceSummary(0, 0.0, None, None, None, False, None, None, None, None, None,
                            ("no samples",), interval)
    i = max(range(len(points)), key=lambda j: (points[j].usage, -j))
    p = points[i]
    peak = Peak(p.t, p.usage, i, dict(p.parts))
    gaps = sorted(b.t - a.t for a, b in zip(points, points[1:]))
    median_gap = gaps[len(gaps) // 2] if gaps else None
    kp = points[-1].kernel_peak
    rose = kp is not None and (fresh_cgroup or kernel_peak_before is None
                               or kp > kernel_peak_before)
    between = bool(rose and kp is not None and kp > p.usage)
    tail_from = points[-1].t - max(points[-1].t * 0.1, 0.0)
    tail = sorted(q.usage for q in points if q.t >= tail_from) or [points[-1].usage]
    settled = tail[len(tail) // 2]
    notes = []
    reading = sorted(readings)[len(readings) // 2] if readings else None
    behind = bool(interval and median_gap is not None and median_gap > interval * 1.25)
    if behind:
        notes.append(
            f"the samples fell behind: one every {median_gap:.2f}s (median), not every "
            f"{interval:g}s as asked" + (f"; a reading took {reading:.2f}s" if reading else "")
            + (f" ({processes} processes)" if processes else "")
            + (f"; the longest gap {gaps[-1]:.2f}s" if gaps[-1] > median_gap * 2 else ""))
    elif interval and gaps and gaps[-1] > max(interval * 3, 0.5):
        notes.append(f"the samples stalled once: a gap of {gaps[-1]:.2f}s (asked every "
                     f"{interval:g}s)")
    if between:
        said = (f"the cgroup's own high-water mark ({format_size(kp)}) is above every sample: "
                "a shorter spike happened between two samples")
        notes.append(said + " (the samples could not keep up: the high-water mark is the peak)"
                     if behind else Hinted(said, SAMPLE_FASTER))
    if late_figures:
        notes.append(f"{late_figures} of {len(points)} samples split a Go process with runtime "
                     "figures a second old or more, or none yet: its endpoint answers slower "
                     "than the trace samples (it is read in the background, the trace does "
                     "not wait for it)")
    if bare_figures:
        notes.append(f"{bare_figures} of {len(points)} samples split a Go process without "
                     "runtime figures (no Go /metrics endpoint of it answered): its heap "
                     "arenas are shown whole, heap in use, free and goroutine stacks together")
    if left:
        if len(left) <= 5:
            notes.extend(f"process {pid} ({comm}) left after {t:.1f}s" for pid, comm, t in left)
        else:
            ts = [t for _p, _c, t in left]
            notes.append(f"{len(left)} processes left between {min(ts):.1f}s and "
                         f"{max(ts):.1f}s (" + ", ".join(f"{pid} {comm}" for pid, comm, _t
                                                         in left[:3]) + ", ...)")
    gc = gc or {}
    if gc.get("garbage") is not None:
        notes.append(
            f"the Go heap at the peak: {format_size(gc['heap'])} allocated in that GC cycle "
            f"(HeapAlloc), {format_size(gc['garbage'])} of it garbage awaiting GC (the next "
            f"cycle, seen by {gc['after']:.1f}s, freed it), "
            f"{format_size(gc['heap'] - gc['garbage'])} live")
    elif gc.get("since_gc") is not None and gc["since_gc"] >= max(1 << 20, gc["heap"] // 10):
        notes.append(
            f"at the peak the Go heap held {format_size(gc['heap'])}, "
            f"{format_size(gc['since_gc'])} of it allocated since the last GC (live or "
            "garbage: no GC cycle came before the trace ended)")
    limit = p.limit
    return TraceSummary(len(points), points[-1].t, median_gap, peak, kp if rose else None,
                        between, points[0].usage, settled, p.usage - settled, limit,
                        p.usage / limit if limit else None, tuple(notes), interval, behind,
                        reading, processes, tuple(left), gc.get("heap"), gc.get("garbage"),
                        gc.get("after"))


def _go_heap(view: PodView) -> tuple[int | None, int | None, int | None]:
    """(HeapAlloc, GC cycles, live heap at the last GC) summed over the view's Go processes
    with runtime figures; None where a process lacks them."""
    heap = cycles = live = 0
    seen = False
    for x in view.go:
        d = view.details.get(x.pid)
        f = getattr(d, "figures", None)
        if f is None or f.heap_alloc is None:
            continue
        seen = True
        heap += f.heap_alloc
        cycles = None if cycles is None or f.gc_cycles is None else cycles + f.gc_cycles
        gogc = x.settings.gogc
        live = (None if live is None or f.next_gc is None or not gogc
                else live + int(f.next_gc / (1 + gogc / 100)))
    return (heap, cycles, live) if seen else (None, None, None)


def gc_at_peak(views: list[PodView], points: list[TracePoint], index: int) -> dict:
    """How much of the Go heap at sample ``index`` was garbage (see :func:`garbage_at`)."""
    return garbage_at([_go_heap(v) for v in views], [p.t for p in points], index)


def garbage_at(heaps: list[tuple[int | None, int | None, int | None]], ts: list[float],
               index: int) -> dict:
    """How much of the Go heap at sample ``index`` was garbage, from each sample's
    (HeapAlloc, GC cycles, live share) and time: the first later sample whose GC cycle
    counter moved on shows the heap after that cycle (live, plus what was allocated since);
    the difference was garbage. When the peak's own runtime figures already show a cycle
    the sample before did not (the endpoint read a little after the cgroup, and the pages
    of a collection are returned later still), the memory at the peak was the earlier
    cycle's: the garbage is that cycle's top less the heap the peak's figures show. Without
    a later cycle, what was allocated since the last GC (HeapAlloc less the goal's live
    share, NextGC / (1 + GOGC/100))."""
    heap, cycles, live = heaps[index]
    if heap is None:
        return {}
    out: dict = {"heap": heap}
    if cycles is not None:
        prev = next((heaps[j] for j in range(index - 1, -1, -1)
                     if heaps[j][0] is not None and heaps[j][1] is not None), None)
        if prev is not None and prev[1] < cycles and prev[0] > heap:
            top = prev[0]
            for j in range(index - 1, -1, -1):
                h, c, _l = heaps[j]
                if h is None or c is None:
                    continue
                if c != prev[1]:
                    break
                top = max(top, h)
            return {"heap": top, "garbage": top - heap, "after": ts[index]}
        top = heap        # the most the heap held in the peak's GC cycle (the figures come
        #                   from the endpoint a little apart from the counters)
        for j in range(index + 1, len(heaps)):
            h, c, _l = heaps[j]
            if h is None or c is None:
                continue
            if c > cycles:
                out["heap"] = top
                out["garbage"] = max(0, top - h)
                out["after"] = ts[j]
                return out
            top = max(top, h)
    if live is not None:
        out["since_gc"] = max(0, heap - live)
    return out


@dataclass(frozen=True)
class TraceCgroup:
    path: str                    # as /proc/PID/cgroup names it
    dir: str
    version: int
    scratch: bool                # made for the traced command (and removed after)


@dataclass(frozen=True)
class PodTrace:
    """A pod over time: a point per sample, the summary (peak, settled), the view at the
    peak, and how the trace went."""
    kernel: KernelProfile | None
    cgroup: TraceCgroup
    command: tuple[str, ...] | None
    exit_code: int | None
    interval: float              # asked for
    interrupted: bool            # Ctrl-C ended it early
    summary: TraceSummary
    at_peak: PodView | None
    points: tuple[TracePoint, ...]
    t0_monotonic: float          # t = 0 on this host's CLOCK_MONOTONIC


class TraceBuilder:
    """A trace as its samples arrive: each sample split into a view (``on_view(view, t)`` is
    called with it), its point kept, the processes that left, how long each reading took;
    then the summary and the view at the peak."""

    def __init__(self, profile: KernelProfile | None, on_view=None):
        self.profile = profile
        self.on_view = on_view
        self.views: list[PodView] = []
        self.points: list[TracePoint] = []
        self.readings: list[float] = []
        self.left: list[tuple] = []
        self.most = 0
        self.late = 0
        self.bare = 0          # samples with a Go process split without runtime figures
        self._seen: dict[int, tuple[str, float]] = {}

    def add(self, sample, t: float) -> None:
        """One sample, taken ``t`` seconds after the trace started."""
        v = pod_view(sample, self.profile)
        self.views.append(v)
        self.points.append(trace_point(v, t))
        self.readings.append(getattr(sample, "duration", 0.0) or 0.0)
        if any(n.startswith(("runtime figures from", "its endpoint has not answered"))
               for d in v.details.values() for n in getattr(d, "notes", ())):
            self.late += 1
        elif any(getattr(v.details.get(x.pid), "figures", None) is None for x in v.go):
            self.bare += 1
        now = {p.pid: p.comm for p in sample.procs}
        self.most = max(self.most, len(now))
        for pid, (comm, last) in list(self._seen.items()):
            if pid not in now:
                self.left.append((pid, comm, last))
                del self._seen[pid]
        for pid, comm in now.items():
            self._seen[pid] = (comm, t)
        if self.on_view is not None:
            self.on_view(v, t)

    def summary(self, *, kernel_peak_before: int | None = None,
                fresh_cgroup: bool = False, interval: float | None = None,
                ended: bool = False) -> TraceSummary:
        """``ended``: a launched command ended: its processes leaving is no news."""
        pts = self.points
        peak_i = max(range(len(pts)), key=lambda j: (pts[j].usage, -j)) if pts else None
        gc = gc_at_peak(self.views, pts, peak_i) if peak_i is not None else None
        cut = pts[-2].t if ended and len(pts) > 1 else None   # the command's own exit
        left = tuple(x for x in self.left if cut is None or x[2] < cut - 1e-9)
        return summarize_trace(pts, kernel_peak_before=kernel_peak_before,
                               fresh_cgroup=fresh_cgroup, interval=interval,
                               readings=self.readings, left=left, processes=self.most,
                               gc=gc, late_figures=self.late, bare_figures=self.bare)

    def view_at(self, peak: Peak | None) -> PodView | None:
        return self.views[peak.index] if peak is not None else None

    def finish(self, *, cgroup: TraceCgroup, kernel_peak_before: int | None,
               command=None, exit_code: int | None = None, interval: float,
               interrupted: bool, t0_monotonic: float) -> PodTrace:
        """The trace, once sampling ended (``kernel_peak_before``: the cgroup's own
        high-water mark at the first sample, for a cgroup not made for the trace)."""
        summary = self.summary(kernel_peak_before=None if cgroup.scratch
                               else kernel_peak_before, fresh_cgroup=cgroup.scratch,
                               interval=interval, ended=exit_code is not None)
        return PodTrace(self.profile, cgroup, tuple(command) if command else None, exit_code,
                        interval, interrupted, summary, self.view_at(summary.peak),
                        tuple(self.points), t0_monotonic)


@dataclass(frozen=True)
class Upgrade:
    """A pod's headroom after an upgrade to the objects ``after`` (from ``before``)."""
    headroom: "Headroom"
    after: tuple[str, ...]
    before: tuple[str, ...] | None


# ---- an upgrade ----

@dataclass(frozen=True)
class HeadroomLine:
    map: str
    action: str          # create | reuse | release | keep
    bytes: int           # + for create, - for release, 0 otherwise
    why: str


@dataclass(frozen=True)
class Headroom:
    usage: int                   # now
    limit: int | None
    upgrade_charge: int          # what NEW's first start charges (diff's figure, or less
                                 # when the pod's live pins are reused)
    released: int                # map charges freed when the old processes go
    projected: int               # usage - released + upgrade_charge
    share: float | None          # projected / limit
    headroom: int | None         # limit - projected
    diff_upgrade_charge: int     # diff's own figure, for comparison
    lines: tuple[HeadroomLine, ...]
    notes: tuple[str, ...]


def _same_name(spec_name: str, live_name: str) -> bool:
    if spec_name[:_NAME_LEN] == live_name:
        return True
    # global data maps: libbpf names them <object prefix>.<section>; match the section
    dot = spec_name.rfind(".")
    return dot > 0 and live_name.endswith(spec_name[dot:]) and "." in live_name


def headroom_after(view: PodView, diff: "DiffResult", *, before_given: bool) -> Headroom:
    """Where the pod's usage goes when its processes are replaced by NEW's.

    - Every map NEW creates at start is charged to the pod (``charged_at_create``, the
      figure ``bpfmem diff`` reports), except pinned maps NEW reuses: with ``--before`` the
      diff's own verdict (``pin_reused``, from OLD's and NEW's specs); without it, a pinned
      map the pod holds now with NEW's name and compatible attributes (libbpf's reuse rule).
    - Maps charged here that the old processes hold go away with them (``released``): the
      unpinned ones, and pinned ones NEW cannot reuse (recreated: the agent unpins them).
      Pinned maps NEW does not know stay pinned and stay charged.
    - Everything else (processes, page cache, other kernel memory) is assumed to come back
      as it is now: the new release's own process memory is not known from its objects.

    projected = usage - released + upgrade_charge. With ``--before`` and no reuse, the
    upgrade charge is exactly the diff's ``upgrade_charge``."""
    rows = [r for r in diff.maps if r.new is not None]
    lines: list[HeadroomLine] = []
    notes: list[str] = []
    kept_live: set[int] = set()
    charge = 0
    for r in rows:
        new = r.new
        name = new.name or r.map
        c = new.charged_at_create
        if c is None:
            notes.append(f"{name}: the model cannot size it; not counted")
            c = 0
        live = [m for m in view.maps if _same_name(name, m.name)]
        if before_given:
            reused = r.pin_reused
            why = ("pinned by OLD with the same attributes: reused" if reused else
                   "created at start" + (" (OLD's pin is incompatible: recreated)"
                                        if r.pin_incompatible else ""))
        else:
            match = [m for m in live if m.pins and reusable(m, new.spec)] \
                if new.spec.pinning else []
            reused = bool(match)
            why = (f"the pod's pinned map {match[0].id} is compatible: reused" if reused
                   else "created at start")
        if reused:
            kept_live.update(m.id for m in live if m.pins)
            lines.append(HeadroomLine(name, "reuse", 0, why))
        else:
            charge += c
            lines.append(HeadroomLine(name, "create", c, why))
    released = 0
    new_names = [(r.new.name or r.map) for r in rows]
    for m in view.maps:
        if m.id in kept_live:
            continue
        if not m.charged_here:
            lines.append(HeadroomLine(m.name, "keep", 0, "charged to another cgroup"))
            continue
        if m.pins and not any(_same_name(n, m.name) for n in new_names):
            lines.append(HeadroomLine(m.name, "keep", 0, "pinned, and NEW does not create "
                                                         "it: stays pinned and charged"))
            continue
        freed = m.charged or 0
        released += freed
        lines.append(HeadroomLine(
            m.name, "release", -freed,
            "pinned but NEW recreates it" if m.pins else "freed when its holders exit"))
    projected = view.usage - released + charge
    diff_charge = diff.upgrade_charge
    if before_given and charge != diff_charge:
        notes.append("the upgrade charge differs from diff's (model could not size a map)")
    if not view.maps:
        notes.append("the pod holds no maps now: nothing is released")
    limit = view.limit
    return Headroom(view.usage, limit, charge, released, projected,
                    projected / limit if limit else None,
                    None if limit is None else limit - projected, diff_charge,
                    tuple(lines), tuple(notes))
