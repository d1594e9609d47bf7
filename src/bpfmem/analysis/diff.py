"""Build-to-build diff: maps added, removed and changed, what each costs on both sides, what
the first start after an upgrade charges, and which pinned maps lose their state."""

from __future__ import annotations

from ..model.kernel import KernelProfile
from ..parse.objspec import ObjectSpec
from ..uapi import flag_names
from .footprints import MapCost, object_costs
from .whatif import WhatIf

SCHEMA = "bpfmem/diff/v1"
# libbpf map_is_reuse_compat(): a pinned map is reused only if all of these match
PIN_COMPAT = ("type", "key_size", "value_size", "max_entries", "map_flags", "map_extra")


def _costs(objects: list[ObjectSpec], prof, whatif) -> list[MapCost]:
    return [c for o in objects for c in object_costs(o, prof, whatif)]


def _keyed(costs: list[MapCost], by_name: bool) -> dict[tuple[str, str], MapCost]:
    """Maps are matched by name when names are unique on both sides (an object file may be
    renamed between builds; pinned maps are global by name anyway), else by object and name."""
    def name(c: MapCost) -> str:
        # global data maps are named after the object file (obj.rodata): match them by section
        return c.spec.section if c.spec.kind == "data" else c.name  # type: ignore[attr-defined]
    return {("", name(c)) if by_name else (c.object, name(c)): c for c in costs}


def _side(c: MapCost | None) -> dict | None:
    if c is None:
        return None
    r = c.record()
    r.pop("object")
    return r


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
         whatif: WhatIf | None = None, limit: int | None = None) -> dict:
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
                incompatible = any(getattr(prev.spec, f) != getattr(cb.spec, f)
                                   for f in PIN_COMPAT)
                reused = not incompatible
        if cb is not None and not reused:
            upgrade += (cb.charged_at_create or 0)
            if status == "added" or incompatible:
                newly += (cb.charged_at_create or 0)
        da = (cb.charged_at_create or 0 if cb else 0) - (ca.charged_at_create or 0 if ca else 0)
        df = (cb.charged_full or 0 if cb else 0) - (ca.charged_full or 0 if ca else 0)
        obj = (cb or ca).object  # type: ignore[union-attr]
        rows.append({"object": obj, "map": (cb or ca).name,  # type: ignore[union-attr]
                     "status": status, "pinned": pinned,
                     "pin_incompatible": incompatible, "pin_reused": reused,
                     "changes": _changes(ca.spec, cb.spec) if ca and cb else [],
                     "old": _side(ca), "new": _side(cb), "delta_at_create": da,
                     "delta_full": df})

    def totals(costs, objs):
        return {"paths": [o.path for o in objs],
                "loaders": [o.loader for o in objs],
                "refused": sorted(c.name for c in costs.values()
                                  if c.footprint is not None and c.footprint.rejected),
                "charged_at_create": sum(c.charged_at_create or 0 for c in costs.values()),
                "charged_full": sum(c.charged_full or 0 for c in costs.values()),
                "memlock_at_create": sum(c.memlock_at_create or 0 for c in costs.values())}
    o_t, n_t = totals(a, old), totals(b, new)
    return {"schema": SCHEMA, "kernel": prof.describe(), "limit": limit,
            "whatif": whatif.describe() if whatif else [],
            "old": o_t, "new": n_t,
            "delta_at_create": n_t["charged_at_create"] - o_t["charged_at_create"],
            "delta_full": n_t["charged_full"] - o_t["charged_full"],
            "upgrade_charge": upgrade,
            "newly_charged": newly,
            "new_share_of_limit": (upgrade / limit) if limit else None,
            "pin_incompatible": [r["map"] for r in rows if r["pin_incompatible"]],
            "maps": rows}
