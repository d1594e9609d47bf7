"""Per-map verdicts as report records."""

from __future__ import annotations


def uses_record(obj, uses: dict) -> list[dict]:
    out = []
    for m in obj.maps:
        u = uses.get(m.name)
        out.append({"name": m.name,
                    "verdict": u.verdict if u is not None else "unreferenced",
                    "ops": {op: sorted(p) for op, p in (u.ops.items() if u else [])}})
    return out
