"""Names in a what-if or a configuration that match nothing: almost always a typo, which a
gate must not pass over in silence."""

from __future__ import annotations

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Iterable
    from .whatif import WhatIf


def _hint(name: str, known: Iterable[str]) -> str:
    import difflib   # only once something is misspelt
    close = difflib.get_close_matches(name, sorted(set(known)), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def unmatched(objects, whatif: WhatIf | None = None, map_caps: dict | None = None,
              object_limits: dict | None = None, config: str | None = None) -> list[str]:
    """One message per ``--set`` whose glob matches no map of ``objects``, per map cap naming
    no map, and per object limit naming no object (by path or name). ``config`` names the
    file the caps and limits came from."""
    names = [m.name for o in objects for m in o.maps]
    where = config or "bpfmem.toml"
    out = []
    if whatif:
        for s in whatif.settings:
            if not whatif.unmatched_one(s, names):
                continue
            out.append(f"what-if {str(s)!r} matches no map{_hint(s.glob, names)}")
    for name in (map_caps or {}):
        if name not in names:
            out.append(f"{where}: [maps] {name!r} is no map of the objects checked"
                       f"{_hint(name, names)}")
    objs = [x for o in objects for x in (o.name, o.path) if x]
    for name in (object_limits or {}):
        if name not in objs:
            out.append(f"{where}: [objects] {name!r} is none of the objects checked"
                       f"{_hint(name, objs)}")
    return out
