"""Memory figures for reports: per map and per object totals, from model Footprints."""

from __future__ import annotations

from typing import Any, Iterable

from ..model.estimate import Footprint

FIELDS = ("memlock_at_create", "memlock_full", "charged_at_create", "charged_full")


def memory_record(fp: Footprint | None, why: str | None = None) -> dict[str, Any]:
    """``{"memlock_at_create", "memlock_full", "charged_at_create", "charged_full"}``;
    None values (and ``unknown``) when the model cannot know."""
    if fp is None:
        rec: dict[str, Any] = {f: None for f in FIELDS}
        rec["unknown"] = why or "not known from the object"
        return rec
    rec = {f: getattr(fp, f) for f in FIELDS}
    rec["charged_tolerance"] = fp.charged_tolerance
    if fp.rejected:
        rec["rejected"] = fp.rejected
    return rec


def totals(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Sums per field; ``incomplete`` counts the maps whose figure is unknown."""
    out: dict[str, Any] = {f: 0 for f in FIELDS}
    incomplete = 0
    for r in records:
        missing = False
        for f in FIELDS:
            if r.get(f) is None:
                missing = True
            else:
                out[f] += r[f]
        incomplete += missing
    out["incomplete"] = incomplete
    return out


def mib(n: int | None) -> str:
    return "?" if n is None else f"{n / (1 << 20):,.2f}"
