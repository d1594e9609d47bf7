"""Compare what a kernel measured for real maps with what the model predicts.

:func:`plan_measure` picks the maps of an object that can be created for real (and the
fill levels to measure); the host creates them (:mod:`bpfmem.host.measure`);
:func:`compare` sets what it read beside the model's figures."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..model.estimate import Footprint, estimate, shape_of_spec
from ..model.kernel import KernelProfile
from ..model.shape import MapShape
from ..uapi import MapType


@dataclass(frozen=True)
class Measured:
    """One map as the probe saw it: memlock and memcg charge at create and after fills."""

    name: str
    ok: bool
    errno: int | None
    memlock: int | None
    charged: int | None
    fills: tuple[tuple[int, int | None, int | None], ...] = ()   # (entries, memlock, charged)


@dataclass(frozen=True)
class Comparison:
    name: str
    model: Footprint | None
    measured: Measured | None
    why_not_measured: str | None = None

    @property
    def memlock_match(self) -> bool | None:
        m, fp = self.measured, self.model
        if m is None or fp is None or not m.ok or fp.rejected:
            return None
        if m.memlock != fp.memlock_at_create:
            return False
        return all(f[1] == f[2] for f in self.fill_figures())

    def fill_figures(self):
        """(entries, measured memlock, model memlock, measured charge, model charge) for each
        fill level the probe reached."""
        if self.measured is None or self.model is None or self.model.rejected:
            return []
        out = []
        for n, ml, ch in self.measured.fills:
            fp = estimate(self.model.shape, self.model.kernel, n)
            out.append((n, ml, fp.memlock, ch, fp.charged))
        return out

    @property
    def charged_delta(self) -> int | None:
        m, fp = self.measured, self.model
        if m is None or fp is None or m.charged is None or fp.charged_at_create is None:
            return None
        return m.charged - fp.charged_at_create

    @property
    def charged_within(self) -> bool | None:
        d = self.charged_delta
        return None if d is None else abs(d) <= self.model.charged_tolerance  # type: ignore[union-attr]

    @property
    def rejection_match(self) -> bool | None:
        m, fp = self.measured, self.model
        if m is None or fp is None:
            return None
        return (not m.ok) == (fp.rejected is not None)


@dataclass(frozen=True)
class MeasureResult:
    """``bpfmem measure``: every map of an object as a kernel measured it, beside the model
    for that kernel (``comparisons``: one per map, the unmeasured ones with why)."""
    path: str
    kernel: KernelProfile
    comparisons: tuple[Comparison, ...]
    programs: object = None      # analysis.progs.ProgramsMeasured (measure --programs)

    @property
    def measured(self) -> int:
        return sum(1 for c in self.comparisons if c.measured is not None)

    def _count(self, field: str) -> int:
        return sum(1 for c in self.comparisons if c.measured is not None and getattr(c, field))

    @property
    def memlock_matches(self) -> int:
        return self._count("memlock_match")

    @property
    def rejections_match(self) -> int:
        return self._count("rejection_match")

    @property
    def charged_within_tolerance(self) -> int:
        return self._count("charged_within")


# ---- the plan and the comparison ----

@dataclass(frozen=True)
class PlannedMap:
    """A map to create for real: the probe's id for it, its shape, the fills to measure."""
    id: str
    name: str
    shape: MapShape
    fills: tuple[int, ...] = ()


@dataclass(frozen=True)
class MeasurePlan:
    maps: tuple[PlannedMap, ...]
    skipped: tuple[tuple[str, str], ...]     # (map name, why it is not created)


def plan_measure(spec, profile: KernelProfile, *, fill: bool = False) -> MeasurePlan:
    """Which maps of ``spec`` (an ObjectSpec) a loader would create on ``profile``'s kernel,
    with half and full capacity as fill levels when ``fill``; the others with the reason."""
    wanted, skipped = [], []
    for i, m in enumerate(spec.maps):
        shape, why = shape_of_spec(m, profile)
        if not m.autocreate:
            skipped.append((m.name, "not created by default (autocreate off)"))
        elif m.refused:
            skipped.append((m.name, f"refused by the loader: {m.refused}"))
        elif shape is None:
            skipped.append((m.name, why))
        elif m.type == MapType.STRUCT_OPS:
            skipped.append((m.name, "struct_ops maps need the kernel's struct and programs"))
        else:
            fills: tuple[int, ...] = ()
            if fill:
                cap = estimate(shape, profile).capacity
                if cap:
                    fills = tuple(sorted({cap // 2, cap}))
            wanted.append(PlannedMap(f"m{i}", m.name, shape, fills))
    return MeasurePlan(tuple(wanted), tuple(skipped))


def measured_of(name: str, result: Mapping[str, Any]) -> Measured:
    """A probe result line (memlock and charge at create and per fill) as a Measured."""
    return Measured(name, bool(result.get("ok")), result.get("errno"), result.get("memlock"),
                    result.get("charged"),
                    tuple((f["inserted"], f.get("memlock"), f.get("charged"))
                          for f in result.get("fills") or ()))


def compare(plan: MeasurePlan, results: Iterable[Mapping[str, Any]],
            profile: KernelProfile) -> list[Comparison]:
    """Each planned map's measurement beside the model on ``profile`` (the kernel measured),
    then the maps the plan skipped."""
    by_id = {r["id"]: r for r in results if "id" in r}
    out = []
    for m in plan.maps:
        r = by_id.get(m.id)
        out.append(Comparison(m.name, estimate(m.shape, profile),
                              None if r is None else measured_of(m.name, r),
                              None if r is not None else "the probe gave no result"))
    out += [Comparison(n, None, None, why) for n, why in plan.skipped]
    return out


def release_guess(vm_kernel: str) -> str:
    """A release for planning a probe run in a VM before the VM reports its own."""
    m = re.search(r"(\d+\.\d+)", vm_kernel)
    return m.group(1) if m else "6.1"
