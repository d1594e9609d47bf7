"""Pure analysis of a live scan: the model's prediction beside the kernel's figure for each map,
filters, and sums per cgroup. No system access here: the input is a :class:`Snapshot`."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from functools import lru_cache

from ..model import formulas as fm
from ..model.estimate import estimate
from ..model.kernel import KernelProfile
from ..model.shape import MapShape
from ..uapi import MapType, map_type_name

__all__ = ["ModelCheck", "check_map", "primary_owner", "map_cgroup", "filter_maps",
           "cgroup_sums", "CgroupSum"]


@dataclass(frozen=True)
class ModelCheck:
    """The model's view of one live map on the scanning kernel.

    ``status``: ``match`` (memlock equal to the byte), ``mismatch`` (differs: the model or the
    map's state is not what we think), ``in-range`` (entries not counted: the kernel's figure
    lies between the model's empty and full figures), ``unknown`` (the model has no figure).
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
                if "unknown map type" in fp.rejected else
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
        return ModelCheck(fp.memlock, hi, fp.charged, fp.charged_full, "in-range",
                          note="count entries (--entries) for an exact comparison")
    return ModelCheck(fp.memlock, hi, fp.charged, fp.charged_full, "mismatch",
                      kernel - lo, "outside the model's empty..full range")


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
        a = acc.setdefault(map_cgroup(m), [0, 0])
        a[0] += 1
        a[1] += m.memlock or 0
    return sorted((CgroupSum(c, n, b) for c, (n, b) in acc.items()),
                  key=lambda s: (-s.memlock, s.cgroup or ""))
