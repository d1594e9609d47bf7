"""Budget gates and what changes between builds: ``check`` and ``diff`` of compiled objects,
and the what-if settings both apply."""

from __future__ import annotations

from dataclasses import replace

from ..analysis.budget import Budget, CheckResult, check
from ..analysis.diff import DiffResult, diff
from ..analysis.typos import unmatched
from ..analysis.whatif import WhatIf, whatif_from
from .objects import load_object


def make_whatif(sets=(), size_ratio: float | None = None, node_memory=None,
                dynamic_config: dict | None = None) -> WhatIf:
    """A WhatIf from ``--set`` expressions and Cilium-style dynamic sizing settings."""
    return whatif_from(sets, size_ratio, node_memory, dynamic_config)


def check_objects(sources, *, limit: int, profiles, max_fraction: float = 1.0,
                  full: bool = False, whatif=None, object_limits=None, map_caps=None,
                  config: str | None = None,
                  loader: str | list[str] | tuple[str, ...] | None = None) -> CheckResult:
    """The :class:`~bpfmem.analysis.budget.CheckResult` for compiled objects, on every
    profile of ``profiles`` (:func:`bpfmem.api.profiles`). ValueError when a what-if, a map
    cap or an object limit names nothing checked (a gate must not pass on a typo);
    ``config`` names the file the caps and limits came from. ``loader`` may name several
    loaders (``["libbpf", "cilium-ebpf"]``): the objects are then checked as each one reads
    them, one result per loader and profile, and the gate must hold for all."""
    loaders = [loader] if loader is None or isinstance(loader, str) else list(loader)
    # a gate judges maps only: the program list is not read (same maps, notes, refusals)
    objs = [load_object(s, loader=loaders[0], programs=False) for s in sources]
    typos = unmatched(objs, whatif, map_caps, object_limits, config)
    if typos:
        raise ValueError("; ".join(typos))
    budget = Budget(limit, max_fraction, full, dict(object_limits or {}), dict(map_caps or {}))
    profiles = list(profiles)
    result = check(objs, budget, profiles, whatif)
    for name in loaders[1:]:
        part = check([load_object(s, loader=name, programs=False) for s in sources], budget,
                     profiles, whatif)
        result = replace(result, results=result.results + part.results)
    return result


def diff_objects(old, new, *, profile, whatif=None, limit: int | None = None,
                 old_loader: str | None = None, new_loader: str | None = None) -> DiffResult:
    """The :class:`~bpfmem.analysis.diff.DiffResult` between two builds (each one or more
    objects) on ``profile``; the what-if applies to the new side. ``old_loader`` and
    ``new_loader`` read each side as that loader does: the same object under libbpf and
    cilium/ebpf shows what a move from one to the other changes."""
    new_objs = [load_object(s, loader=new_loader, programs=False) for s in new]
    result = diff([load_object(s, loader=old_loader, programs=False) for s in old], new_objs,
                  profile, whatif, limit)
    return replace(result, warnings=tuple(unmatched(new_objs, whatif)))
