"""Estimate a map's memory on a kernel: memlock and memcg charge, at create and when full."""

from __future__ import annotations

from dataclasses import dataclass

from ..uapi import MapType as T
from . import formulas as fm
from .kernel import KernelProfile
from .limits import rejection
from .shape import MapShape

# How close the charge model is to what a memory cgroup shows (measured, see the tests):
# cgroup charges move in pages, and small slab objects share per-CPU byte stocks.
PAGE_TOLERANCE = 1


@dataclass(frozen=True)
class Footprint:
    """Model output for one map on one kernel. ``None`` means "cannot be known from the
    spec" (and says why in ``notes``), never a fake 0."""

    kernel: KernelProfile
    shape: MapShape
    entries: int                    # entries the `memlock`/`charged` figures assume
    capacity: int | None            # entries when full (None: unbounded, e.g. local storage)
    memlock: int | None
    memlock_at_create: int | None
    memlock_full: int | None
    charged: int | None
    charged_at_create: int | None
    charged_full: int | None
    charged_tolerance: int          # +- bytes the charge figures are good to
    rejected: str | None
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {"memlock": self.memlock, "memlock_at_create": self.memlock_at_create,
                "memlock_full": self.memlock_full, "charged": self.charged,
                "charged_at_create": self.charged_at_create, "charged_full": self.charged_full,
                "charged_tolerance": self.charged_tolerance, "entries": self.entries,
                "capacity": self.capacity, "rejected": self.rejected,
                "notes": list(self.notes)}


def capacity(sh: MapShape, prof: KernelProfile) -> int | None:
    """How many entries "full" means."""
    if sh.type in fm.LOCAL_STORAGES or sh.type in fm.CGROUP_STORAGES:
        return None
    if sh.type == T.STRUCT_OPS:
        return 1
    return fm.effective_max_entries(sh, prof)


def estimate(sh: MapShape, prof: KernelProfile, entries: int = 0) -> Footprint:
    """The memory ``sh`` costs on ``prof``'s kernel, empty, with ``entries`` and full."""
    reason = rejection(sh, prof)
    if reason is not None:
        return Footprint(prof, sh, entries, None, None, None, None, None, None, None, 0, reason,
                         ("the kernel refuses this map: nothing is created",))
    cap = capacity(sh, prof)
    notes: list[str] = []
    if cap is not None and entries > cap:
        notes.append(f"{entries} entries asked for, but the map holds at most {cap}")
        entries = cap
    grows = fm.grows_with_entries(sh)
    ml_create = fm.memlock(sh, prof, 0)
    ml_full = fm.memlock(sh, prof, cap) if (grows and cap is not None) else ml_create
    ml_now = fm.memlock(sh, prof, entries) if grows else ml_create
    if prof.memlock_era != "mem_usage" and grows:
        notes.append(f"memlock on {prof.version} does not follow the entries present")
    ch_create = fm.charged_at_create(sh, prof)
    per = fm.charged_per_entry(sh, prof)
    if ch_create is None:
        ch_now = ch_full = None
    elif per is None:
        ch_now, ch_full = (ch_create if entries == 0 else None), None
        notes.append("elements are charged per socket/task/inode/cgroup that stores one, "
                     "which the map cannot know")
    else:
        ch_now = ch_create + round(per * entries)
        ch_full = None if cap is None else ch_create + round(per * cap)
    if sh.type == T.STRUCT_OPS:
        notes.append("struct_ops memory depends on the kernel's struct; not modelled")
    if not prof.sizes.exact and prof.memlock_era == "mem_usage":
        notes.append(f"struct sizes from the {prof.sizes.name}; exact on the kernel itself")
    tol = PAGE_TOLERANCE * prof.page_size
    return Footprint(prof, sh, entries, cap, ml_now, ml_create, ml_full, ch_now, ch_create,
                     ch_full, tol, None, tuple(notes))
