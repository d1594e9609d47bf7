"""Compare what a kernel measured for real maps with what the model predicts."""

from __future__ import annotations

from dataclasses import dataclass

from ..model.estimate import Footprint
from ..model.kernel import KernelProfile


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
        from ..model.estimate import estimate
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
