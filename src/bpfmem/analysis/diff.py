"""Build-to-build diff: maps added, removed and changed, what each costs on both sides, what
the first start after an upgrade charges, and which pinned maps lose their state.
:func:`diff` returns a :class:`DiffResult`; its document is made in ``report/documents.py``."""

from __future__ import annotations

from ..values import dataclass

from ..model.kernel import KernelProfile
from ..parse.objspec import ObjectSpec
from ..uapi import flag_names
from .footprints import MapCost, object_costs
from .whatif import WhatIf

from .pins import reusable


def _costs(objects: list[ObjectSpec], prof, whatif) -> list[MapCost]:
    return [c for o in objects for c in object_costs(o, prof, whatif)]


def _keyed(costs: list[MapCost], by_name: bool) -> dict[tuple[str, str], MapCost]:
    """Maps are matched by name when names are unique on both sides (an object file may be
    renamed between builds; pinned maps are global by name anyway), else by object and name."""
    def name(c: MapCost) -> str:
        # global data maps are named after the object file (obj.rodata): match them by section
        return c.spec.section if c.spec.kind == "data" else c.name  # type: ignore[attr-defined]
    return {("", name(c)) if by_name else (c.object, name(c)): c for c in costs}


@dataclass(frozen=True)
class MapChange:
    """One map of either build: what changed and what it costs on each side (None: the side
    does not have it)."""
    object: str
    map: str
    status: str                 # added | removed | changed | unchanged
    pinned: bool                # NEW pins it
    pin_incompatible: bool      # OLD pinned it with attributes NEW's cannot reuse
    pin_reused: bool            # NEW reuses OLD's pin (not created, not charged)
    changes: tuple[str, ...]    # "max_entries: 1024 -> 4096", ...
    old: MapCost | None
    new: MapCost | None
    delta_at_create: int
    delta_full: int


@dataclass(frozen=True)
class DiffSide:
    """One build: its objects and the costs of the maps it creates."""
    objects: tuple[ObjectSpec, ...]
    costs: tuple[MapCost, ...]

    @property
    def paths(self) -> list:
        return [o.path for o in self.objects]

    @property
    def loaders(self) -> list[str]:
        return [o.loader for o in self.objects]

    @property
    def refused(self) -> list[str]:
        return sorted(c.name for c in self.costs
                      if c.footprint is not None and c.footprint.rejected)

    def _sum(self, field: str) -> int:
        return sum(getattr(c, field) or 0 for c in self.costs)

    @property
    def charged_at_create(self) -> int:
        return self._sum("charged_at_create")

    @property
    def charged_full(self) -> int:
        return self._sum("charged_full")

    @property
    def memlock_at_create(self) -> int:
        return self._sum("memlock_at_create")


@dataclass(frozen=True)
class DiffResult:
    """``bpfmem diff``: OLD and NEW on one kernel, the maps matched between them, and what
    the first start after the upgrade charges."""
    kernel: KernelProfile
    limit: int | None
    whatif: tuple[str, ...]     # on the new side, described
    old: DiffSide
    new: DiffSide
    upgrade_charge: int         # what NEW's first start charges (reused pins are not created)
    newly_charged: int          # of which for maps OLD did not have, or pins recreated
    maps: tuple[MapChange, ...]
    warnings: tuple[str, ...] = ()   # what-if settings that match no map
    programs: tuple | None = None    # analysis.progs.ProgramChange per program (diff
    #                                  --programs; lower bounds), None: not asked for

    @property
    def delta_at_create(self) -> int:
        return self.new.charged_at_create - self.old.charged_at_create

    @property
    def delta_full(self) -> int:
        return self.new.charged_full - self.old.charged_full

    @property
    def new_share_of_limit(self) -> float | None:
        return (self.upgrade_charge / self.limit) if self.limit else None

    @property
    def pin_incompatible(self) -> list[str]:
        return [r.map for r in self.maps if r.pin_incompatible]


def _changes(a, b) -> list[str]:
    out = []
    for f in ("type", "key_size", "value_size", "max_entries", "map_flags", "map_extra",
              "pinning"):
        va, vb = getattr(a, f), getattr(b, f)
        if va != vb:
            if f == "map_flags":
                out.append(f"map_flags: {','.join(flag_names(va)) or '0'} -> "
                           f"{','.join(flag_names(vb)) or '0'}")
            else:
                out.append(f"{f}: {va} -> {vb}")
    return out


def diff(old: list[ObjectSpec], new: list[ObjectSpec], prof: KernelProfile,
         whatif: WhatIf | None = None, limit: int | None = None) -> DiffResult:
    ca_list, cb_list = _costs(old, prof, None), _costs(new, prof, whatif)
    by_name = all(len({c.name for c in side}) == len(side) for side in (ca_list, cb_list))
    a, b = _keyed(ca_list, by_name), _keyed(cb_list, by_name)
    pinned_old = {c.name: c for c in ca_list if c.spec.pinning}
    rows = []
    upgrade = newly = 0
    for key in sorted(set(a) | set(b)):
        ca, cb = a.get(key), b.get(key)
        status = ("added" if ca is None else "removed" if cb is None else
                  "changed" if _changes(ca.spec, cb.spec) or ca.count != cb.count
                  else "unchanged")
        pinned = bool(cb is not None and cb.spec.pinning)
        incompatible = False
        reused = False
        if cb is not None and cb.spec.pinning:
            prev = pinned_old.get(cb.name)
            if prev is not None:
                incompatible = not reusable(prev.spec, cb.spec)
                reused = not incompatible
        if cb is not None and not reused:
            upgrade += (cb.charged_at_create or 0)
            if status == "added" or incompatible:
                newly += (cb.charged_at_create or 0)
        da = (cb.charged_at_create or 0 if cb else 0) - (ca.charged_at_create or 0 if ca else 0)
        df = (cb.charged_full or 0 if cb else 0) - (ca.charged_full or 0 if ca else 0)
        obj = (cb or ca).object  # type: ignore[union-attr]
        rows.append(MapChange(obj, (cb or ca).name, status, pinned,  # type: ignore[union-attr]
                              incompatible, reused,
                              tuple(_changes(ca.spec, cb.spec)) if ca and cb else (),
                              ca, cb, da, df))
    return DiffResult(prof, limit, tuple(whatif.describe()) if whatif else (),
                      DiffSide(tuple(old), tuple(a.values())),
                      DiffSide(tuple(new), tuple(b.values())), upgrade, newly, tuple(rows))
