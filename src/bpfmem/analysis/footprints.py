"""Memory of each map an object creates, on one kernel, after what-if changes."""

from __future__ import annotations

from ..values import dataclass

from ..model.estimate import Footprint, estimate_spec
from ..model.kernel import KernelProfile
from ..parse.objspec import ObjectSpec
from .whatif import WhatIf


@dataclass(frozen=True)
class MapCost:
    object: str
    spec: object            # the (possibly what-if changed) MapSpec
    count: int              # how many times the agent creates it
    footprint: Footprint | None
    unknown: str | None     # why the footprint is unknown

    @property
    def name(self) -> str:
        return self.spec.name  # type: ignore[attr-defined]

    def _times(self, field: str) -> int | None:
        if self.footprint is None or self.footprint.rejected:
            return None
        v = getattr(self.footprint, field)
        return None if v is None else v * self.count

    @property
    def charged_at_create(self) -> int | None:
        return self._times("charged_at_create")

    @property
    def charged_full(self) -> int | None:
        return self._times("charged_full")

    @property
    def memlock_at_create(self) -> int | None:
        return self._times("memlock_at_create")

    @property
    def memlock_full(self) -> int | None:
        return self._times("memlock_full")


def object_costs(obj: ObjectSpec, prof: KernelProfile,
                 whatif: WhatIf | None = None) -> list[MapCost]:
    """Every map the loader creates at start (autocreate), with what it costs on ``prof``."""
    return map_costs(obj.name, [m for m in obj.maps if m.autocreate], prof, whatif)


def map_costs(object_name: str, maps: list, prof: KernelProfile,
              whatif: WhatIf | None = None) -> list[MapCost]:
    """What each of ``maps`` (MapSpecs of the object ``object_name``) costs on ``prof`` after
    ``whatif``, times the times it is created: the one figure every command sums."""
    pairs = whatif.apply(maps) if whatif else [(m, 1) for m in maps]
    out = []
    for m, count in pairs:
        fp, why = estimate_spec(m, prof)
        out.append(MapCost(object_name, m, count * getattr(m, "instances", 1), fp, why))
    return out


def total(costs: list[MapCost], field: str) -> tuple[int, int]:
    """(sum of ``field`` over known figures, number of maps whose figure is unknown)."""
    s, unknown = 0, 0
    for c in costs:
        v = getattr(c, field)
        if v is None:
            unknown += 1
        else:
            s += v
    return s, unknown
