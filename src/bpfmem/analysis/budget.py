"""The CI budget gate: do the maps an agent creates fit its memory limit, on every kernel and
CPU count it runs on?"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model.kernel import KernelProfile
from ..parse.objspec import ObjectSpec
from .footprints import object_costs, total
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


def check(objects: list[ObjectSpec], budget: Budget, profiles: list[KernelProfile],
          whatif: WhatIf | None = None, top: int = 5) -> dict:
    """The check document: one result per kernel/CPU profile; passes when every one does."""
    what = "charged_full" if budget.full else "charged_at_create"
    results = []
    for prof in profiles:
        failures: list[str] = []
        objs, all_costs = [], []
        for o in objects:
            costs = object_costs(o, prof, whatif)
            all_costs += costs
            obj_total, unknown = total(costs, what)
            recs = [c.record() for c in costs]
            objs.append({"path": o.path, "name": o.name, "total": obj_total,
                         "unknown": unknown, "maps": recs})
            lim = budget.object_limits.get(o.path or "") or budget.object_limits.get(o.name)
            if lim is not None and obj_total > lim:
                failures.append(f"{o.name}: {obj_total:,} bytes over its own limit {lim:,}")
            for c in costs:
                if c.footprint is not None and c.footprint.rejected:
                    failures.append(f"{o.name}/{c.name}: the kernel refuses this map "
                                    f"({c.footprint.rejected})")
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
            v = getattr(c, what)
            if cap is not None and v is not None and v > cap:
                failures.append(f"{c.object}/{c.name}: {v:,} bytes over its cap {cap:,}")
        if grand > budget.budget:
            failures.insert(0, f"maps charge {grand:,} bytes, over the budget "
                               f"{budget.budget:,} ({budget.max_fraction:g} of "
                               f"{budget.limit:,})")
        ranked = sorted(((m[what] or 0, o["name"], m["name"]) for o in objs for m in o["maps"]),
                        reverse=True)[:top]
        results.append({
            "kernel": prof.describe(), "total": grand, "total_before_whatif": before,
            "budget": budget.budget,
            "limit": budget.limit, "share_of_limit": grand / budget.limit if budget.limit else 0,
            "pass": not failures, "failures": failures, "objects": objs,
            "offenders": [{"object": on, "map": mn, "charged": v,
                           "share": v / grand if grand else 0.0} for v, on, mn in ranked]})
    return {"schema": SCHEMA, "limit": budget.limit, "max_fraction": budget.max_fraction,
            "budget": budget.budget, "full": budget.full, "measure": what,
            "whatif": whatif.describe() if whatif else [],
            "pass": all(r["pass"] for r in results), "results": results}
