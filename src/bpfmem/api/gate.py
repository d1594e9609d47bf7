"""Budget gates and what changes between builds: ``check`` and ``diff`` of compiled objects,
and the what-if settings both apply."""

from __future__ import annotations

from ..analysis.budget import Budget, CheckResult, check
from ..analysis.gate import GateResult, GateSettings, gate_inputs
from ..analysis.typos import unmatched
from ..analysis.whatif import WhatIf, whatif_from
from ..values import replace
from .objects import load_all

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from ..analysis.diff import DiffResult


def make_whatif(sets=(), size_ratio: float | None = None, node_memory=None,
                dynamic_config: dict | None = None) -> WhatIf:
    """A WhatIf from ``--set`` expressions and Cilium-style dynamic sizing settings."""
    return whatif_from(sets, size_ratio, node_memory, dynamic_config)


def gate_settings(*, limit: int | str | None = None, max_fraction: float | None = None,
                  full: bool | None = None, max_binary_size: int | str | None = None,
                  config=None, programs: bool = False) -> GateSettings:
    """The one rule for what ``check`` judges: each setting given here (the command line)
    over bpfmem.toml's (``config``, a :class:`bpfmem.config.Config`), over the defaults
    (fraction 1, at create). Sizes may be quantities (``128Mi``) or bytes. ValueError for a
    value that is wrong."""
    from ..units import parse_size

    def size(v):
        return parse_size(v) if isinstance(v, str) else v
    cfg = config
    return GateSettings(
        limit=size(limit) if limit is not None else getattr(cfg, "limit", None),
        max_fraction=(max_fraction if max_fraction is not None else
                      getattr(cfg, "max_fraction", None) or 1.0),
        full=bool(full if full is not None else getattr(cfg, "full", None)),
        object_limits=dict(getattr(cfg, "object_limits", None) or {}),
        map_caps=dict(getattr(cfg, "map_caps", None) or {}),
        binary_max=(size(max_binary_size) if max_binary_size is not None else
                    getattr(cfg, "binary_max", None)),
        binary_files=dict(getattr(cfg, "binary_files", None) or {}),
        binary_modules=dict(getattr(cfg, "binary_modules", None) or {}),
        binary_named=max_binary_size is not None, config=getattr(cfg, "path", None),
        programs=programs)


def check_gates(sources, settings: GateSettings, *, profiles, whatif=None,
                loader: str | list[str] | tuple[str, ...] | None = None,
                platform: str | None = None) -> GateResult:
    """Every gate ``settings`` asks for, on ``sources`` (paths; globs already expanded):
    the maps budget on the BPF objects (:func:`check_objects`, on every profile and loader)
    and the binary sizes on the binaries (:func:`bpfmem.api.check_binaries`). The result
    passes only when every gate does. ValueError when no gate is asked for;
    :class:`bpfmem.errors.UnreadableInput` when a binary cannot be read."""
    from ..inputs import split_binaries
    if not settings.any_gate:
        raise ValueError("no gate to check: give a memory limit or a binary size limit")
    from .objects import carries_objects, is_image
    objects, binaries = split_binaries(list(sources))
    # a binary that carries BPF objects feeds the maps gate with them (and is sized); an
    # image feeds both gates (its objects; its binaries that carry them)
    carriers = [b for b in binaries if carries_objects(b)] if settings.maps_gate else []
    images = [o for o in objects if is_image(o)]
    maps_in, bins_in, notes = gate_inputs(settings, objects + carriers, binaries + images)
    maps = None
    if maps_in:
        maps, skipped = _check_objects(
            maps_in, limit=settings.limit, profiles=profiles,
            max_fraction=settings.max_fraction, full=settings.full, whatif=whatif,
            object_limits=settings.object_limits, map_caps=settings.map_caps,
            config=settings.config, loader=loader, platform=platform,
            programs=settings.programs)
        notes = tuple(notes) + tuple(skipped)
    bins = None
    if bins_in:
        from ..errors import BpfmemError, UnreadableInput, UsageError
        from .size import check_binaries     # (and the Go toolchain's door) for a binary only
        try:
            bins = check_binaries(bins_in, max_size=settings.binary_max,
                                  module_limits=settings.binary_modules,
                                  file_limits=settings.binary_files, platform=platform)
        except UsageError:
            raise
        except (BpfmemError, OSError) as e:
            # not "over the limit": the gate could not judge this binary
            raise UnreadableInput(f"{e.filename}: {e.strerror}"
                                  if isinstance(e, OSError) and e.filename else str(e)) from e
    return GateResult(maps, bins, notes)


def check_objects(sources, *, limit: int, profiles, max_fraction: float = 1.0,
                  full: bool = False, whatif=None, object_limits=None, map_caps=None,
                  config: str | None = None,
                  loader: str | list[str] | tuple[str, ...] | None = None,
                  platform: str | None = None) -> CheckResult:
    """The :class:`~bpfmem.analysis.budget.CheckResult` for compiled objects, on every
    profile of ``profiles`` (:func:`bpfmem.api.profiles`). ValueError when a what-if, a map
    cap or an object limit names nothing checked (a gate must not pass on a typo);
    ``config`` names the file the caps and limits came from. ``loader`` may name several
    loaders (``["libbpf", "cilium-ebpf"]``): the objects are then checked as each one reads
    them, one result per loader and profile, and the gate must hold for all. A binary among
    ``sources`` is read for the BPF objects it carries."""
    return _check_objects(sources, limit=limit, profiles=profiles, max_fraction=max_fraction,
                          full=full, whatif=whatif, object_limits=object_limits,
                          map_caps=map_caps, config=config, loader=loader,
                          platform=platform)[0]


def _check_objects(sources, *, limit, profiles, max_fraction, full, whatif, object_limits,
                   map_caps, config, loader, platform=None, programs: bool = False
                   ) -> tuple[CheckResult, list[str]]:
    loaders = [loader] if loader is None or isinstance(loader, str) else list(loader)
    # a gate judges maps (the program list is not read: same maps, notes, refusals), and
    # with ``programs`` their lower bound beside
    objs, skipped = load_all(sources, loader=loaders[0], programs=programs, platform=platform)
    typos = unmatched(objs, whatif, map_caps, object_limits, config)
    if typos:
        raise ValueError("; ".join(typos))
    budget = Budget(limit, max_fraction, full, dict(object_limits or {}), dict(map_caps or {}),
                    programs)
    profiles = list(profiles)
    result = check(objs, budget, profiles, whatif)
    for name in loaders[1:]:
        part = check(load_all(sources, loader=name, programs=programs, platform=platform)[0],
                     budget, profiles, whatif)
        result = replace(result, results=result.results + part.results)
    return result, skipped


def diff_objects(old, new, *, profile, whatif=None, limit: int | None = None,
                 old_loader: str | None = None, new_loader: str | None = None,
                 platform: str | None = None, programs: bool = False) -> DiffResult:
    """The :class:`~bpfmem.analysis.diff.DiffResult` between two builds (each one or more
    objects) on ``profile``; the what-if applies to the new side. ``old_loader`` and
    ``new_loader`` read each side as that loader does: the same object under libbpf and
    cilium/ebpf shows what a move from one to the other changes. ``programs``: also each
    program's relocated instructions and memlock lower bound on both sides."""
    from ..analysis.diff import diff
    new_objs, new_skipped = load_all(new, loader=new_loader, programs=programs,
                                     platform=platform)
    old_objs, old_skipped = load_all(old, loader=old_loader, programs=programs,
                                     platform=platform)
    old_objs, new_objs = _by_place(old_objs, new_objs)
    result = diff(old_objs, new_objs, profile, whatif, limit)
    if programs:
        from ..analysis.progs import program_changes
        result = replace(result, programs=program_changes(old_objs, new_objs, profile))
    return replace(result, warnings=tuple(unmatched(new_objs, whatif)) +
                   tuple(old_skipped + new_skipped))


def _place(spec) -> str:
    """Where an embedded object is, the same in two builds: its path in the image (without
    the image's name and layer) or its binary's file name, and where in the binary."""
    path = spec.path or spec.name
    head, _, where = path.rpartition(":")
    if "@layer" in head and ":" in head:     # IMAGE@layerN:/path
        head = head.split(":", 1)[1]
    else:
        head = head.rsplit("/", 1)[-1]
    return f"{head}:{where}"


def _by_place(old: list, new: list) -> tuple[list, list]:
    """Objects are matched by name; an object name that several embedded objects share on
    either side (one skeleton in two binaries of an image) is told apart by place on both
    sides (``opensnoop_bpf@/usr/sbin/tool:.rodata+0x4b8``), so they are matched by path and
    name."""
    from collections import Counter
    shared = set()
    for side in (old, new):
        shared |= {n for n, c in Counter(o.name for o in side).items() if c > 1}

    def named(side):
        return [replace(o, name=f"{o.name}@{_place(o)}")
                if o.name in shared and o.carrier else o for o in side]
    return (named(old), named(new)) if shared else (old, new)
