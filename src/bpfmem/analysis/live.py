"""Pure analysis of a live scan: the model's prediction beside the kernel's figure for each map,
filters, sums per cgroup, and what changed between two scans. No system access here: the
input is a :class:`~bpfmem.records.Snapshot`; the results (:class:`SnapshotView`,
:class:`SnapshotDiff`) are frozen values whose documents report/documents.py makes."""

from __future__ import annotations

import fnmatch
from bpfmem.values import dataclass
from collections import Counter
from functools import lru_cache
from operator import itemgetter, le

from ..model import formulas as fm
from ..model.estimate import estimate
from ..model.kernel import KernelProfile
from ..model.limits import UNKNOWN_TYPE
from ..model.shape import MapShape
from ..records import LiveMap, Owner, Snapshot
from ..uapi import MapType, map_type_name

__all__ = ["ModelCheck", "check_map", "memlock_behaviour", "primary_owner", "map_cgroup",
           "filter_maps", "cgroup_sums", "CgroupSum", "SnapshotView", "snapshot_view",
           "SnapshotDiff", "LiveMapChange", "LiveMapSide", "SnapshotSide", "CgroupChange",
           "diff_snapshots"]


@dataclass(frozen=True)
class ModelCheck:
    """The model's view of one live map on the scanning kernel.

    ``status``: ``match`` (memlock equal to the byte), ``mismatch`` (differs: the model or the
    map's state is not what we think), ``in-range`` (entries not counted: the kernel's figure
    lies between the model's empty and full figures: counting the entries would give an
    exact comparison), ``unknown`` (the model has no figure).
    """
    memlock: int | None          # model memlock at the counted entries (or at create)
    memlock_full: int | None
    charged: int | None          # model memcg charge at the counted entries (or at create)
    charged_full: int | None
    status: str
    delta: int | None = None     # kernel memlock - model memlock
    note: str | None = None


def check_map(m, prof: KernelProfile) -> ModelCheck:
    """Compare a live map (anything with kernel attribute names, ``memlock``, ``entries``)."""
    return _check(m.type, m.key_size, m.value_size, m.max_entries, m.map_flags or 0,
                  m.map_extra or 0, m.entries, bool(getattr(m, "entries_complete", True)),
                  m.memlock, prof)


@lru_cache(maxsize=1 << 14)
def _check(type_: int, key_size: int, value_size: int, max_entries: int, map_flags: int,
           map_extra: int, entries: int | None, complete: bool, kernel: int | None,
           prof: KernelProfile) -> ModelCheck:
    # nodes run many maps of the same shape and fill (one per pod, per interface...):
    # the comparison is worked out once per distinct input
    shape = MapShape(int(type_), key_size, value_size, max_entries, map_flags, map_extra)
    counted = entries is not None
    fp = estimate(shape, prof, entries or 0)
    if fp.rejected is not None:
        note = (f"map type {type_} is not modelled (newer than bpfmem?)"
                if fp.rejected.kind == UNKNOWN_TYPE else
                f"the model says the kernel refuses this shape: {fp.rejected}")
        return ModelCheck(None, None, None, None, "unknown", note=note)
    if fp.memlock is None or kernel is None:
        return ModelCheck(fp.memlock, fp.memlock_full, fp.charged, fp.charged_full, "unknown",
                          note="no memlock figure" if kernel is None else
                          (fp.notes[0] if fp.notes else "not modelled"))
    grows = fm.grows_with_entries(shape) and fp.memlock_full != fp.memlock_at_create
    if counted or not grows:
        delta = kernel - fp.memlock
        status = "match" if delta == 0 else "mismatch"
        note = None
        if status == "mismatch" and grows and not complete:
            note = "entry count cut short by the time bound"
        return ModelCheck(fp.memlock, fp.memlock_full, fp.charged, fp.charged_full, status,
                          delta, note)
    lo, hi = fp.memlock_at_create, fp.memlock_full
    if hi is not None and lo <= kernel <= hi:
        return ModelCheck(fp.memlock, hi, fp.charged, fp.charged_full, "in-range")
    return ModelCheck(fp.memlock, hi, fp.charged, fp.charged_full, "mismatch",
                      kernel - lo, "outside the model's empty..full range")


@lru_cache(maxsize=1 << 12)
def _behaviour(type_: int, key_size: int, value_size: int, max_entries: int, map_flags: int,
               map_extra: int, prof: KernelProfile) -> str:
    shape = MapShape(int(type_), key_size, value_size, max_entries, map_flags, map_extra)
    fp = estimate(shape, prof, 0)
    if fp.rejected is not None or fp.memlock_at_create is None or fp.memlock_full is None:
        return "unknown"
    if fp.memlock_at_create == fp.memlock_full:
        return "static"
    if prof.memlock_era == "mem_usage" and fm.grows_with_entries(shape):
        return "counts"
    return "unknown"


def memlock_behaviour(m, prof: KernelProfile) -> str:
    """How a live map's memlock moves on ``prof``'s kernel: "static" (the same empty and full:
    arrays, preallocated hash maps, ring buffers...), "counts" (the kernel's ``map_mem_usage``
    counts the elements, so memlock changes exactly when the entry count does: hash maps
    without preallocation and LPM tries since 6.4), or "unknown" (read it every time)."""
    return _behaviour(m.type, m.key_size, m.value_size, m.max_entries, m.map_flags or 0,
                      m.map_extra or 0, prof)


def primary_owner(m):
    """The holder a map is attributed to in sums: the lowest pid (None if nobody holds it)."""
    return m.owners[0] if m.owners else None


def map_cgroup(m) -> str | None:
    o = primary_owner(m)
    return o.cgroup if o is not None else None


def _type_matches(value: int, wanted: str) -> bool:
    try:
        return int(MapType.from_name(wanted)) == value
    except (ValueError, KeyError):
        return map_type_name(value) == wanted


def filter_maps(maps, *, owner: str | None = None, cgroup: str | None = None,
                name: str | None = None, type: str | None = None, pid: int | None = None):
    """Maps matching every filter given: ``owner`` a comm glob, ``cgroup`` a substring of an
    owner's cgroup path, ``name`` a glob, ``type`` a kernel map type name."""
    out = []
    for m in maps:
        if name and not fnmatch.fnmatchcase(m.name, name):
            continue
        if type and not _type_matches(m.type, type):
            continue
        if owner and not any(fnmatch.fnmatchcase(o.comm, owner) for o in m.owners):
            continue
        if cgroup and not any(o.cgroup and cgroup in o.cgroup for o in m.owners):
            continue
        if pid is not None and not any(o.pid == pid for o in m.owners):
            continue
        out.append(m)
    return out


@dataclass(frozen=True)
class CgroupSum:
    cgroup: str | None        # None: maps no process holds (pinned or held by programs)
    maps: int
    memlock: int


def cgroup_sums(maps) -> list[CgroupSum]:
    """memlock summed per cgroup of each map's primary owner, largest first."""
    acc: dict[str | None, list[int]] = {}
    for m in maps:
        owners = m.owners
        a = acc.get(owners[0].cgroup if owners else None)
        if a is None:
            a = acc[owners[0].cgroup if owners else None] = [0, 0]
        a[0] += 1
        a[1] += m.memlock or 0
    return sorted((CgroupSum(c, n, b) for c, (n, b) in acc.items()),
                  key=lambda s: (-s.memlock, s.cgroup or ""))


@dataclass(frozen=True)
class SnapshotView:
    """A scan as ``bpfmem snapshot`` shows it: its maps by id, each with the model's check on
    the scanning kernel (None everywhere without a profile), the sums per cgroup and the
    totals. Its document is ``bpfmem/snapshot/v2`` (report/documents.py)."""
    snapshot: Snapshot
    maps: tuple[LiveMap, ...]                 # by id
    checks: tuple[ModelCheck | None, ...]     # one per map (None: no model asked for)
    model_kernel: str | None                  # the profile's release (None: no model)
    cgroups: tuple[CgroupSum, ...]            # largest first
    memlock: int                              # kernel memlock of every map
    charged_model: int | None                 # the model's charge summed (None: no model)
    model_status: tuple[tuple[str, int], ...]  # (status, maps), in the order first seen
    programs: object = None                   # analysis.progs.ProgramTotals (None: the
    #                                           scan did not list programs)


# a LiveMap (a tuple: records.py) read at once: the fields of its model check, its memlock
_CHECK_KEY = itemgetter(*map(LiveMap._fields.index, (
    "type", "key_size", "value_size", "max_entries", "map_flags", "map_extra", "entries",
    "entries_complete", "memlock")))
_ID, _MEMLOCK = (itemgetter(LiveMap._fields.index(f)) for f in ("id", "memlock"))


class _Checks(dict):
    """The model's check of each distinct _CHECK_KEY, worked out on first use (a node's maps
    come in few shapes and fills)."""

    def __init__(self, prof: KernelProfile):
        super().__init__()
        self.prof = prof

    def __missing__(self, key):
        t, k, v, e, flags, extra, entries, complete, memlock = key
        c = self[key] = _check(t, k, v, e, flags or 0, extra or 0, entries, bool(complete),
                               memlock, self.prof)
        return c


def snapshot_view(snap: Snapshot, prof: KernelProfile | None = None) -> SnapshotView:
    """The :class:`SnapshotView` of ``snap``; ``prof`` (the scanning kernel's) adds the
    model's check of every map."""
    maps = snap.maps
    ids = list(map(_ID, maps))
    if not all(map(le, ids, ids[1:])):
        maps = tuple(sorted(maps, key=_ID))
    statuses: dict[str, int] = {}
    charged = None
    if prof is not None:
        table = _Checks(prof)
        checks = tuple(map(table.__getitem__, map(_CHECK_KEY, maps)))
        times = Counter(map(id, checks))            # each distinct check: how many maps
        charged = 0
        for c in {id(c): c for c in table.values()}.values():   # in the order first seen
            n = times[id(c)]
            statuses[c.status] = statuses.get(c.status, 0) + n
            charged += (c.charged or 0) * n
    else:
        checks = (None,) * len(maps)
    return SnapshotView(
        snapshot=snap, maps=maps, checks=checks,
        model_kernel=None if prof is None else prof.version,
        cgroups=tuple(cgroup_sums(snap.maps)),
        memlock=sum(filter(None, map(_MEMLOCK, snap.maps))),
        charged_model=charged,
        model_status=tuple(statuses.items()),
        programs=None if snap.progs is None else _program_totals(snap))


def _program_totals(snap: Snapshot):
    from .progs import program_totals
    return program_totals(snap.progs, snap.btfs or ())


# ---- two moments of a node ----

@dataclass(frozen=True)
class SnapshotSide:
    """One snapshot's totals in a diff."""
    taken_at: float
    hostname: str
    maps: int
    memlock: int


@dataclass(frozen=True)
class LiveMapSide:
    """One map on one side of a diff; ``owner`` its primary holder (fds not compared)."""
    id: int
    memlock: int | None
    entries: int | None
    owner: Owner | None


@dataclass(frozen=True)
class LiveMapChange:
    """A map between two snapshots: ``status`` added, removed, recreated (same name, shape
    and owner comm, new id: an agent restart), changed or unchanged."""
    name: str
    type: int
    status: str
    old: LiveMapSide | None
    new: LiveMapSide | None
    delta_memlock: int
    delta_entries: int | None


@dataclass(frozen=True)
class CgroupChange:
    cgroup: str | None
    old: int
    new: int
    delta: int


@dataclass(frozen=True)
class SnapshotDiff:
    """What changed on a node between two snapshots (document ``bpfmem/snapshot-diff/v1``)."""
    old: SnapshotSide
    new: SnapshotSide
    delta_memlock: int
    counts: tuple[tuple[str, int], ...]      # (status, maps) for every status, in STATUSES order
    cgroups: tuple[CgroupChange, ...]        # largest move first
    maps: tuple[LiveMapChange, ...]              # added, removed, recreated, changed, unchanged


STATUSES = ("added", "removed", "recreated", "changed", "unchanged")


def _identity(m) -> tuple:
    o = primary_owner(m)
    return (m.name, m.type, m.key_size, m.value_size, m.max_entries, o.comm if o else "")


def _side(m) -> LiveMapSide | None:
    if m is None:
        return None
    o = primary_owner(m)
    return LiveMapSide(m.id, m.memlock, m.entries,
                   None if o is None else Owner(o.pid, o.comm, o.cgroup))


def _totals(s: Snapshot) -> SnapshotSide:
    return SnapshotSide(s.taken_at, s.hostname, len({m.id for m in s.maps}),
                        sum(m.memlock or 0 for m in s.maps))


def diff_snapshots(old: Snapshot, new: Snapshot) -> SnapshotDiff:
    """What changed on a node between two snapshots: maps that appeared, went away, were
    recreated (same name, shape and owner comm, new id: an agent restart), and how memlock
    and entries moved; totals and per-cgroup deltas. Maps are matched by id first (ids are
    never reused while the kernel runs), then by identity."""
    a = {m.id: m for m in old.maps}
    b = {m.id: m for m in new.maps}
    rows = []
    gone = [a[i] for i in sorted(set(a) - set(b))]
    came = [b[i] for i in sorted(set(b) - set(a))]
    spare: dict[tuple, list] = {}
    for m in gone:
        spare.setdefault(_identity(m), []).append(m)
    for i in sorted(set(a) & set(b)):
        rows.append(("same", a[i], b[i]))
    for m in came:
        pool = spare.get(_identity(m))
        rows.append(("recreated", pool.pop(0), m) if pool else ("added", None, m))
    rows += [("removed", m, None) for pool in spare.values() for m in pool]

    out = []
    for status, x, y in rows:
        ml = (y.memlock or 0 if y else 0) - (x.memlock or 0 if x else 0)
        ent = (None if (x is None or y is None or x.entries is None or y.entries is None)
               else y.entries - x.entries)
        if status == "same" and ml == 0 and not ent:
            status = "unchanged"
        elif status == "same":
            status = "changed"
        m = y or x
        out.append(LiveMapChange(m.name, m.type, status, _side(x), _side(y), ml, ent))
    order = {s: i for i, s in enumerate(STATUSES)}
    out.sort(key=lambda r: (order[r.status], -abs(r.delta_memlock), r.name))
    ca = {s.cgroup: s.memlock for s in cgroup_sums(old.maps)}
    cb = {s.cgroup: s.memlock for s in cgroup_sums(new.maps)}
    cg = [CgroupChange(c, ca.get(c, 0), cb.get(c, 0), cb.get(c, 0) - ca.get(c, 0))
          for c in set(ca) | set(cb)]
    cg.sort(key=lambda r: (-abs(r.delta), r.cgroup or ""))
    count = tuple((k, sum(1 for r in out if r.status == k)) for k in STATUSES)
    before, after = _totals(old), _totals(new)
    return SnapshotDiff(before, after, after.memlock - before.memlock, count, tuple(cg),
                        tuple(out))
