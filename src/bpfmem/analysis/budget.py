"""The CI budget gate: do the maps an agent creates fit its memory limit, on every kernel and
CPU count it runs on? :func:`check` returns a :class:`CheckResult`; its document is made in
``report/documents.py``."""

from __future__ import annotations

from ..values import dataclass, field

from ..model.kernel import CHARGE_NONE, KernelProfile
from ..parse.objspec import ObjectSpec
from .footprints import MapCost, object_costs, total
from .hints import MEASURE_PROGRAMS, Hinted
from .placeholders import placeholder_note
from .whatif import WhatIf


@dataclass(frozen=True)
class Budget:
    limit: int                          # the container's memory limit, bytes
    max_fraction: float = 1.0           # share of the limit maps may take
    full: bool = False                  # judge the maps when full instead of at create
    object_limits: dict[str, int] = field(default_factory=dict)   # object path/name -> bytes
    map_caps: dict[str, int] = field(default_factory=dict)        # map name -> bytes
    programs: bool = False              # add the programs' memlock lower bound to the charge

    @property
    def budget(self) -> int:
        return int(self.limit * self.max_fraction)

    @property
    def measure(self) -> str:
        """The figure the gate judges: ``charged_full`` or ``charged_at_create``."""
        return "charged_full" if self.full else "charged_at_create"


@dataclass(frozen=True)
class Check:
    """One named comparison of a result, and why it failed (no failures: it passed)."""
    name: str
    failures: tuple[str, ...] = ()
    object: str | None = None
    map: str | None = None
    value: int | None = None
    limit: int | None = None

    @property
    def passed(self) -> bool:
        return not self.failures


@dataclass(frozen=True)
class MapCharge:
    """A map's cost and its share of the profile's total."""
    cost: MapCost
    share: float


@dataclass(frozen=True)
class ObjectCharge:
    """One object's maps on one profile: their total (of the judged figure) and how many are
    unknown to the model."""
    spec: ObjectSpec
    total: int
    unknown: int
    maps: tuple[MapCharge, ...]
    programs: int | None = None     # the programs' memlock lower bound in ``total`` (None:
    #                                 not asked, or a kernel that charges no memory cgroup)

    @property
    def refused(self) -> tuple[str, ...]:
        """The maps the kernel or the loader refuses (not created, not counted)."""
        return tuple(m.cost.name for m in self.maps if m.cost.footprint is not None
                     and m.cost.footprint.rejected)


@dataclass(frozen=True)
class Offender:
    object: str
    map: str
    charged: int
    share: float


@dataclass(frozen=True)
class ProfileCheck:
    """The gate on one kernel/CPU profile (and one loader's reading of the objects)."""
    kernel: KernelProfile
    loader: str | tuple[str, ...]       # one loader, or several (sorted) when objects differ
    total: int
    total_before_whatif: int | None     # None without a what-if
    budget: Budget
    checks: tuple[Check, ...]           # the budget first, then per object and per map cap
    notes: tuple[str, ...]
    objects: tuple[ObjectCharge, ...]
    offenders: tuple[Offender, ...]     # the largest maps, largest first
    memlock: int = 0                    # the maps' memlock at create, summed
    programs: int | None = None         # the programs' lower bound in ``total`` (None: not
    #                                     asked for, or not charged to a memory cgroup)

    @property
    def charged_to_memcg(self) -> bool:
        """Whether this kernel charges maps to the creator's memory cgroup at all (5.11+);
        before, maps count against the creator's RLIMIT_MEMLOCK only."""
        return self.kernel.charge_era != CHARGE_NONE

    @property
    def headroom(self) -> int:
        """The budget less the maps' charge (negative: over the budget)."""
        return self.budget.budget - self.total

    @property
    def refused(self) -> tuple[str, ...]:
        return tuple(f"{o.spec.name}/{m}" for o in self.objects for m in o.refused)

    @property
    def failures(self) -> tuple[str, ...]:
        return tuple(f for c in self.checks for f in c.failures)

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def share_of_limit(self) -> float:
        return self.total / self.budget.limit if self.budget.limit else 0


@dataclass(frozen=True)
class CheckResult:
    """``bpfmem check``: one :class:`ProfileCheck` per profile (and loader); passes when
    every one does."""
    budget: Budget
    whatif: tuple[str, ...]             # the what-if settings, described
    results: tuple[ProfileCheck, ...]

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)


def check(objects: list[ObjectSpec], budget: Budget, profiles: list[KernelProfile],
          whatif: WhatIf | None = None, top: int = 5) -> CheckResult:
    """The gate on every profile. Each profile's result lists its ``checks`` (the budget,
    then per object: the kernel accepts its maps, its own limit, its maps' caps), each named
    for exactly what it compares, so one object never both passes and fails the same thing;
    ``failures`` are theirs, in order."""
    from ..units import format_size as fs
    what = budget.measure
    results = []
    for prof in profiles:
        checks: list[Check] = []
        per_object, all_costs = [], []
        for o in objects:
            costs = object_costs(o, prof, whatif)
            all_costs += costs
            obj_total, unknown = total(costs, what)
            prog = _program_bound(o, prof) if budget.programs else None
            obj_total += prog or 0
            per_object.append((o, costs, obj_total, unknown, prog))
            refused = tuple(f"{o.name}/{c.name}: the kernel or the loader refuses this map "
                            f"({c.footprint.rejected})" for c in costs
                            if c.footprint is not None and c.footprint.rejected)
            checks.append(Check(f"{o.name}: the kernel accepts every map", refused,
                                object=o.name))
            lim = budget.object_limits.get(o.path or "") or budget.object_limits.get(o.name)
            if lim is not None:
                over = ((f"{o.name}: {_what(prog)} charge {fs(obj_total)}, over its own limit "
                         f"{fs(lim)} by {fs(obj_total - lim)}",)
                        if obj_total > lim else ())
                checks.append(Check(f"{o.name}: {_what(prog)} within its own limit {fs(lim)}",
                                    over, object=o.name, value=obj_total, limit=lim))
        grand = sum(t for _o, _c, t, _u, _p in per_object)
        progs = [p for *_x, p in per_object if p is not None]
        prog_total = sum(progs) if progs else None
        before = None
        if whatif:
            before = sum(total(object_costs(o, prof, None), what)[0] for o in objects)

        def share(c: MapCost) -> float:
            v = getattr(c, what)
            return (v / grand) if (v is not None and grand) else 0.0
        objs = tuple(ObjectCharge(o, t, u, tuple(MapCharge(c, share(c)) for c in costs), p)
                     for o, costs, t, u, p in per_object)
        for c in all_costs:
            cap = budget.map_caps.get(c.name)
            if cap is None:
                continue
            v = getattr(c, what)
            over = ((f"{c.object}/{c.name}: charges {fs(v)}, over its cap {fs(cap)} by "
                     f"{fs(v - cap)}",)
                    if v is not None and v > cap else ())
            checks.append(Check(f"{c.object}/{c.name}: within its cap {fs(cap)}",
                                over, object=c.object, map=c.name, value=v, limit=cap))
        of = ("" if budget.max_fraction == 1 else
              f" ({budget.max_fraction:g} of the limit {fs(budget.limit)})")
        what_all = _what(prog_total)
        over = ((f"{what_all} charge {fs(grand)}, over the budget {fs(budget.budget)}{of} by "
                 f"{fs(grand - budget.budget)}",)
                if grand > budget.budget else ())
        checks.insert(0, Check(f"all {what_all} within the budget {fs(budget.budget)}",
                               over, value=grand, limit=budget.budget))
        memlock = sum(c.memlock_at_create or 0 for c in all_costs)
        notes = tuple(f"{c.object}/{c.name}: {n}" for c in all_costs
                      for n in (placeholder_note(c.spec),) if n)
        if prog_total is not None:
            notes = (Hinted(f"programs: at least {fs(prog_total)} (a lower bound: the pages "
                            "of the instructions the loader hands over; aux data, line info, "
                            "the JIT image and the verifier's working memory during the load "
                            "come beside", MEASURE_PROGRAMS, tail=")"),) + notes
        if prof.charge_era == CHARGE_NONE:
            notes = (f"Linux {prof.version} charges maps to no memory cgroup (that began in "
                     f"5.11): the limit that matters is RLIMIT_MEMLOCK. The maps' memlock, "
                     f"{fs(memlock)}, counts against the locked memory of their creator's "
                     f"user (every process of that uid together), and creating a map fails "
                     f"with EPERM past `ulimit -l`; agents raise it with setrlimit "
                     f"(CAP_SYS_RESOURCE to raise the hard limit)",
                     ) + notes
        ranked = sorted(((getattr(m.cost, what), o.spec.name, m.cost.name)
                         for o in objs for m in o.maps
                         if getattr(m.cost, what) is not None), reverse=True)[:top]
        loaders = sorted({o.loader for o in objects})
        results.append(ProfileCheck(
            prof, loaders[0] if len(loaders) == 1 else tuple(loaders), grand, before, budget,
            tuple(checks), notes, objs,
            tuple(Offender(on, mn, v, v / grand if grand else 0.0) for v, on, mn in ranked),
            memlock, prog_total))
    return CheckResult(budget, tuple(whatif.describe()) if whatif else (), tuple(results))


def _what(programs: int | None) -> str:
    return "maps" if programs is None else "maps and programs"


def _program_bound(o: ObjectSpec, prof: KernelProfile) -> int | None:
    """The memlock lower bound of ``o``'s programs on ``prof`` when that kernel charges them
    to the loader's memory cgroup (5.11+, as maps), else None."""
    if o.programs is None or prof.charge_era == CHARGE_NONE:
        return None
    from .progs import program_bounds
    return sum(b.memlock_at_least for b in program_bounds(o.programs, prof))
