"""MapShape: the attributes a memory estimate needs, from an object's spec, a live map, or the
command line."""

from __future__ import annotations

from dataclasses import dataclass

from ..uapi import MapFlag, MapType, map_type_name


@dataclass(frozen=True, slots=True)
class MapShape:
    """What the kernel sizes a map by: type, sizes, entries, flags."""

    type: int
    key_size: int
    value_size: int
    max_entries: int
    map_flags: int = 0
    map_extra: int = 0

    @classmethod
    def of(cls, spec) -> "MapShape":
        """From anything with the kernel's attribute names (a MapSpec, a MapInfo, a dict)."""
        get = spec.get if isinstance(spec, dict) else (lambda k, d=0: getattr(spec, k, d))
        t = get("type")
        if isinstance(t, str):
            t = MapType.from_name(t)
        return cls(int(t), int(get("key_size", 0)), int(get("value_size", 0)),
                   int(get("max_entries", 0)), int(get("map_flags", 0) or 0),
                   int(get("map_extra", 0) or 0))

    @property
    def type_name(self) -> str:
        return map_type_name(self.type)

    def has(self, flag: MapFlag) -> bool:
        return bool(self.map_flags & flag)
