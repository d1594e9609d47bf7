"""MapShape: the attributes a memory estimate needs, from an object's spec, a live map, or the
command line."""

from __future__ import annotations

from ..values import dataclass

from ..uapi import MapFlag, map_type_name


@dataclass(frozen=True, slots=True)
class MapShape:
    """What the kernel sizes a map by: type, sizes, entries, flags."""

    type: int
    key_size: int
    value_size: int
    max_entries: int
    map_flags: int = 0
    map_extra: int = 0

    @property
    def type_name(self) -> str:
        return map_type_name(self.type)

    def has(self, flag: MapFlag) -> bool:
        return bool(self.map_flags & flag)
