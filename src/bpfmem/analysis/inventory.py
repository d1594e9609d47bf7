"""``bpfmem maps``: every map and program of the objects, and with a kernel what each map
costs on it (after what-if changes, and the totals before them). :func:`inventory` returns an
:class:`Inventory`; its document is made in ``report/documents.py``."""

from __future__ import annotations

from operator import attrgetter

from ..values import dataclass, replace

from ..model.kernel import KernelProfile
from ..parse.objspec import MapSpec, ObjectSpec
from .placeholders import placeholder_note

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Iterable

FIELDS = ("memlock_at_create", "memlock_full", "charged_at_create", "charged_full")


@dataclass(frozen=True)
class MapMemory:
    """One map's figures on a kernel, times the number of copies the agent creates; None where
    the model cannot know (``unknown`` says why)."""
    memlock_at_create: int | None
    memlock_full: int | None
    charged_at_create: int | None
    charged_full: int | None
    charged_tolerance: int | None = None    # None: no footprint (the figures are unknown)
    rejected: str | None = None             # why the kernel or the loader refuses it
    unknown: str | None = None

    def times(self, n: int) -> "MapMemory":
        if n == 1:
            return self
        return replace(self, **{f: None if getattr(self, f) is None else getattr(self, f) * n
                                for f in FIELDS})


@dataclass(frozen=True)
class MemoryTotals:
    """Sums over the maps an object creates at start; ``incomplete`` counts the maps whose
    figures are unknown (``refused`` ones among them: never counted, as 0 or otherwise)."""
    memlock_at_create: int
    memlock_full: int
    charged_at_create: int
    charged_full: int
    incomplete: int
    refused: tuple[str, ...]


@dataclass(frozen=True)
class MapEntry:
    """One map of ``bpfmem maps``: its spec, notes, inner map and memory."""

    spec: MapSpec
    notes: tuple[str, ...]              # the parser's and the placeholder's
    inner: "MapEntry | None"            # a map-in-map's inner map (no memory of its own)
    memory: MapMemory | None = None     # None: no kernel asked
    count: int | None = None            # how many the what-if makes (None: no what-if)


@dataclass(frozen=True)
class ObjectInventory:
    """One object of ``bpfmem maps``: its maps and their totals."""

    spec: ObjectSpec                    # as the what-if changed it
    maps: tuple[MapEntry, ...]
    memory: MemoryTotals | None = None          # None: no kernel asked
    memory_before: MemoryTotals | None = None   # before the what-if (None: no what-if)
    unmatched_settings: tuple[str, ...] | None = None   # None: no what-if
    programs: tuple | None = None       # analysis.progs.ProgramBound per program (with a
    #                                     kernel and the programs read; lower bounds)


@dataclass(frozen=True)
class Inventory:
    """The objects (and the files that failed, as (path, message)), on ``kernel`` when
    given; ``binaries``: per binary that carries some of them, its objects' totals."""
    kernel: KernelProfile | None
    whatif: tuple[str, ...] | None      # None: no what-if
    objects: tuple[ObjectInventory, ...]
    errors: tuple[tuple[str, str], ...] = ()
    binaries: tuple["BinaryTotals", ...] = ()


@dataclass(frozen=True)
class BinaryTotals:
    """One binary's embedded objects together (``memory`` None: no kernel asked)."""
    path: str
    objects: tuple[str, ...]            # the objects' paths (binary:where)
    memory: MemoryTotals | None


def binary_totals(objects: Iterable[ObjectInventory]) -> tuple[BinaryTotals, ...]:
    """Per carrier (binary) of the objects, in order first seen: their totals summed."""
    groups: dict[str, list[ObjectInventory]] = {}
    for o in objects:
        if o.spec.carrier:
            groups.setdefault(o.spec.carrier, []).append(o)
    out = []
    for path, objs in groups.items():
        mem = None
        if all(o.memory is not None for o in objs):
            mem = MemoryTotals(**{f: sum(getattr(o.memory, f) for o in objs) for f in FIELDS},
                               incomplete=sum(o.memory.incomplete for o in objs),
                               refused=tuple(r for o in objs for r in o.memory.refused))
        out.append(BinaryTotals(path, tuple(o.spec.path or o.spec.name for o in objs), mem))
    return tuple(out)


def map_memory(m: MapSpec, profile: KernelProfile) -> MapMemory:
    """``m``'s figures on ``profile`` (times its instances), worked out once per distinct
    spec shape and kernel: an object's maps often repeat one shape, and a MapMemory is a
    frozen value, the same for each."""
    key = (m.type, m.key_size, m.value_size, m.max_entries, m.map_flags, m.map_extra,
           m.refused, m.value_size_set_at_load, m.max_entries_set_at_load, m.clamp_to_cpus,
           m.instances, profile)
    mem = _MEMORY.get(key)
    if mem is None:
        if len(_MEMORY) >= 1 << 14:
            _MEMORY.clear()
        mem = _MEMORY[key] = _map_memory(m, profile)
    return mem


_MEMORY: dict[tuple, MapMemory] = {}
_FIGURES = None     # model.estimate.spec_figures, imported for the first map with a kernel


def _map_memory(m: MapSpec, profile: KernelProfile) -> MapMemory:
    global _FIGURES
    if _FIGURES is None:
        from ..model.estimate import spec_figures as _FIGURES
    figures, why = _FIGURES(m, profile)
    if figures is None:
        mem = MapMemory(None, None, None, None, unknown=why or "not known from the object")
    else:
        mem = MapMemory(*figures)
    return mem.times(m.instances)


def map_entry(m: MapSpec, profile: KernelProfile | None = None, count: int | None = None
              ) -> MapEntry:
    note = placeholder_note(m)
    notes = tuple(m.notes) + (note,) if note else tuple(m.notes)
    memory = None if profile is None else map_memory(m, profile).times(count or 1)
    return MapEntry(m, notes, map_entry(m.inner) if m.inner is not None else None, memory,
                    count)


_FIGURES_OF = attrgetter(*FIELDS)


def totals(maps: Iterable[MapEntry]) -> MemoryTotals:
    created = [m for m in maps if m.spec.autocreate]
    rows = [_FIGURES_OF(m.memory) for m in created]
    columns = zip(*rows) if rows else [()] * len(FIELDS)
    sums = {f: sum([v for v in col if v is not None]) for f, col in zip(FIELDS, columns)}
    return MemoryTotals(**sums, incomplete=sum(None in row for row in rows),
                        refused=tuple(m.spec.name for m in created if m.memory.rejected))


def object_inventory(o: ObjectSpec, profile: KernelProfile | None = None) -> ObjectInventory:
    maps = tuple(map_entry(m, profile) for m in o.maps)
    return ObjectInventory(o, maps, totals(maps) if profile is not None else None,
                           programs=_program_bounds(o, profile))


def _program_bounds(o: ObjectSpec, profile: KernelProfile | None):
    if profile is None or o.programs is None:
        return None
    from .progs import program_bounds
    return program_bounds(o.programs, profile)


def inventory(objects: Iterable[ObjectSpec], errors: Iterable[tuple[str, str]] = (),
              profile: KernelProfile | None = None, whatif=None) -> Inventory:
    """The objects' maps and programs; with a KernelProfile every map's memory and every
    object's totals; with a what-if, the maps as it changes them (and the totals before)."""
    objects = list(objects)
    if not whatif:
        objs = tuple(object_inventory(o, profile) for o in objects)
        return Inventory(profile, None, objs, tuple(errors), binary_totals(objs))
    out = []
    for o in objects:
        pairs = whatif.apply(list(o.maps))
        maps = tuple(map_entry(m, profile, count) for m, count in pairs)
        changed = replace(o, maps=tuple(m for m, _c in pairs))
        before = object_inventory(o, profile).memory
        out.append(ObjectInventory(changed, maps,
                                   totals(maps) if profile is not None else None, before,
                                   tuple(whatif.unmatched([m.name for m in o.maps])),
                                   _program_bounds(o, profile)))
    return Inventory(profile, tuple(whatif.describe()), tuple(out), tuple(errors),
                     binary_totals(out))
