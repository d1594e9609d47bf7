"""The CI budget gate: do the maps an agent creates fit its memory limit, on every kernel and
CPU count it runs on?"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model.kernel import KernelProfile
from ..parse.objspec import ObjectSpec
from .footprints import object_costs, total
from .placeholders import placeholder_note
from .whatif import WhatIf

SCHEMA = "bpfmem/check/v1"


@dataclass(frozen=True)
class Budget:
    limit: int                          # the container's memory limit, bytes
    max_fraction: float = 1.0           # share of the limit maps may take
    full: bool = False                  # judge the maps when full instead of at create
    object_limits: dict[str, int] = field(default_factory=dict)   # object path/name -> bytes
    map_caps: dict[str, int] = field(default_factory=dict)        # map name -> bytes

    @property
    def budget(self) -> int:
        return int(self.limit * self.max_fraction)


def _check(name: str, failures: list[str], *, obj: str | None = None, map_: str | None = None,
           value: int | None = None, limit: int | None = None) -> dict:
    """One named check of a result: what was compared, and why it failed (if it did)."""
    return {"name": name, "object": obj, "map": map_, "value": value, "limit": limit,
            "pass": not failures, "failures": failures}


def check(objects: list[ObjectSpec], budget: Budget, profiles: list[KernelProfile],
          whatif: WhatIf | None = None, top: int = 5) -> dict:
    """The check document: one result per kernel/CPU profile; passes when every one does.
    Each result lists its ``checks`` (the budget, then per object: the kernel accepts its
    maps, its own limit, its maps' caps), each named for exactly what it compares, so one
    object never both passes and fails the same thing; ``failures`` are theirs, in order."""
    from .quantity import format_size
    what = "charged_full" if budget.full else "charged_at_create"
    results = []
    for prof in profiles:
        checks: list[dict] = []
        objs, all_costs = [], []
        for o in objects:
            costs = object_costs(o, prof, whatif)
            all_costs += costs
            obj_total, unknown = total(costs, what)
            recs = [c.record() for c in costs]
            refused = [c.name for c in costs
                       if c.footprint is not None and c.footprint.rejected]
            objs.append({"path": o.path, "name": o.name, "total": obj_total,
                         "unknown": unknown, "refused": [c.name for c in costs
                                                         if c.footprint is not None
                                                         and c.footprint.rejected],
                         "loader": {"name": o.loader, "why": o.loader_reason},
                         "maps": recs})
            refused = [f"{o.name}/{c.name}: the kernel or the loader refuses this map "
                       f"({c.footprint.rejected})" for c in costs
                       if c.footprint is not None and c.footprint.rejected]
            checks.append(_check(f"{o.name}: the kernel accepts every map", refused,
                                 obj=o.name))
            lim = budget.object_limits.get(o.path or "") or budget.object_limits.get(o.name)
            if lim is not None:
                over = ([f"{o.name}: {obj_total:,} bytes over its own limit {lim:,}"]
                        if obj_total > lim else [])
                checks.append(_check(f"{o.name}: maps within its own limit {format_size(lim)}",
                                     over, obj=o.name, value=obj_total, limit=lim))
        grand = sum(x["total"] for x in objs)
        before = None
        if whatif:
            before = sum(total(object_costs(o, prof, None), what)[0] for o in objects)
        for o in objs:
            for m in o["maps"]:
                v = m[what]
                m["share"] = (v / grand) if (v is not None and grand) else 0.0
        for c in all_costs:
            cap = budget.map_caps.get(c.name)
            if cap is None:
                continue
            v = getattr(c, what)
            over = ([f"{c.object}/{c.name}: {v:,} bytes over its cap {cap:,}"]
                    if v is not None and v > cap else [])
            checks.append(_check(f"{c.object}/{c.name}: within its cap {format_size(cap)}",
                                 over, obj=c.object, map_=c.name, value=v, limit=cap))
        over = ([f"maps charge {grand:,} bytes, over the budget {budget.budget:,} "
                 f"({budget.max_fraction:g} of {budget.limit:,})"]
                if grand > budget.budget else [])
        checks.insert(0, _check(f"all maps within the budget {format_size(budget.budget)}",
                                over, value=grand, limit=budget.budget))
        failures = [f for c in checks for f in c["failures"]]
        notes = [f"{c.object}/{c.name}: {n}" for c in all_costs
                 for n in (placeholder_note(c.spec),) if n]
        ranked = sorted(((m[what], o["name"], m["name"]) for o in objs for m in o["maps"]
                         if m[what] is not None), reverse=True)[:top]
        loaders = sorted({o.loader for o in objects})
        results.append({
            "kernel": prof.describe(), "loader": loaders[0] if len(loaders) == 1 else loaders,
            "refused": [f"{o['name']}/{m}" for o in objs for m in o["refused"]],
            "total": grand, "total_before_whatif": before,
            "budget": budget.budget,
            "limit": budget.limit, "share_of_limit": grand / budget.limit if budget.limit else 0,
            "pass": not failures, "failures": failures, "checks": checks, "notes": notes,
            "objects": objs,
            "offenders": [{"object": on, "map": mn, "charged": v,
                           "share": v / grand if grand else 0.0} for v, on, mn in ranked]})
    return {"schema": SCHEMA, "limit": budget.limit, "max_fraction": budget.max_fraction,
            "budget": budget.budget, "full": budget.full, "measure": what,
            "whatif": whatif.describe() if whatif else [],
            "pass": all(r["pass"] for r in results), "results": results}
