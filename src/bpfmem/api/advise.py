"""The advisor: what each object's programs do with each map, and what to change."""

from __future__ import annotations

from ..analysis.advise import AdviseResult, advise_all
from ..inputs import Fields, load_json
from ..parse.access import analyze_code
from .objects import load_object


def advise_objects(sources, *, profile, occupancy: dict[str, int] | None = None,
                   loader: str | None = None) -> AdviseResult:
    """The :class:`~bpfmem.analysis.advise.AdviseResult`: per object, what its programs do with
    each map and the recommended changes with the bytes each saves."""
    codes = [load_object(s, loader=loader, code=True) for s in sources]
    return advise_all([(c.spec, analyze_code(c)) for c in codes], profile, occupancy)


def load_occupancy(path: str) -> dict[str, int]:
    """``{map name: entries}``, or a bpfmem snapshot's maps with their entry counts.
    ValueError names the file and the field that is wrong."""
    try:
        return occupancy_from(load_json(path, "occupancy"))
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def occupancy_from(data) -> dict[str, int]:
    """:func:`load_occupancy` of a decoded document."""
    if isinstance(data, dict) and str(data.get("schema", "")).startswith("bpfmem/snapshot"):
        peaks: dict[str, int] = {}   # a name seen on several maps (one per pod...): the fullest
        for m in Fields(data).objects("maps"):
            n = m.uint("entries", None, 32)
            if n is not None:
                name = m.text("name")
                peaks[name] = max(peaks.get(name, 0), n)
        return peaks
    if not isinstance(data, dict):
        raise ValueError("expected {\"map name\": entries, ...}")
    for k, v in data.items():
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << 32:
            raise ValueError(f"{k}: expected entries as an integer in 0..2^32-1, "
                             f"not {v!r:.40}")
    return data
