"""The advisor: what each object's programs do with each map, and what to change."""

from __future__ import annotations

from ..analysis.advise import AdviseResult, advise_all
from ..inputs import load_json
from ..parse.access import analyze_code
from ..parse.snapshot import occupancy_from as decode_occupancy
from .objects import load_all


def advise_objects(sources, *, profile, occupancy: dict[str, int] | None = None,
                   loader: str | None = None, platform: str | None = None) -> AdviseResult:
    """The :class:`~bpfmem.analysis.advise.AdviseResult`: per object, what its programs do with
    each map and the recommended changes with the bytes each saves."""
    codes, skipped = load_all(sources, loader=loader, code=True, platform=platform)
    result = advise_all([(c.spec, analyze_code(c)) for c in codes], profile, occupancy)
    if skipped:
        from dataclasses import replace
        result = replace(result, warnings=tuple(result.warnings) + tuple(skipped))
    return result


def load_occupancy(path: str) -> dict[str, int]:
    """``{map name: entries}``, or a bpfmem snapshot's maps with their entry counts.
    ValueError names the file and the field that is wrong."""
    try:
        return occupancy_from(load_json(path, "occupancy"))
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def occupancy_from(data) -> dict[str, int]:
    """:func:`load_occupancy` of a decoded document."""
    return decode_occupancy(data)
