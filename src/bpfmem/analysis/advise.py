"""The advisor: which maps to change, what each change saves (from the model), the trade-off,
and the kernel rule behind it. Pure: it takes what the programs do with each map (from
parse/access.py), the specs and a KernelProfile. :func:`advise_all` returns an
:class:`AdviseResult`; its document is made in ``report/documents.py``."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..model.estimate import estimate, shape_of_spec
from ..model.kernel import KernelProfile
from ..model.shape import MapShape
from ..parse.objspec import ObjectSpec
from ..uapi import MapFlag, MapType as T
from ..units import format_size

NO_PREALLOC = int(MapFlag.NO_PREALLOC)
PERCPU = {T.PERCPU_HASH, T.PERCPU_ARRAY, T.LRU_PERCPU_HASH, T.PERCPU_CGROUP_STORAGE}
CPU_STEPS = (64, 128, 192)


@dataclass(frozen=True)
class Advice:
    map: str
    kind: str                 # no_prealloc | keep_prealloc | lru_resize | percpu | unused | resize
    title: str
    saves_at_create: int      # bytes charged less at start (negative: costs more)
    saves_full: int | None    # bytes charged less when full
    tradeoff: str
    rule: str
    set: str | None = None    # the what-if line `check`/`diff` accept
    saves_memlock: int | None = None   # memlock (fdinfo) less at start


# the kinds of advice that are changes to make, in --apply (the others say what to keep or
# weigh; "unused" says what dropping a map would save, which only its owner can decide)
APPLIED = ("no_prealloc", "resize")
SAVING = APPLIED


@dataclass(frozen=True)
class ObjectAdvice:
    """One object: what its programs do with each map, and the advice, largest saving first."""
    spec: ObjectSpec
    uses: dict            # map name -> parse.access.MapUse (a map no program names: absent)
    advice: tuple[Advice, ...]

    @property
    def saves_at_create(self) -> int:
        """What the recommended changes (:attr:`apply`) save at start, together: each
        change's saving is counted on top of the changes to the same map before it, so this
        is what ``check``/``diff`` with ``--set`` of :attr:`apply` save."""
        return sum(a.saves_at_create for a in self.advice if a.kind in SAVING)

    @property
    def saves_if_dropped(self) -> int:
        """What dropping every map no program references would save at start."""
        return sum(a.saves_at_create for a in self.advice if a.kind == "unused")

    @property
    def apply(self) -> tuple[str, ...]:
        """The what-if lines of the changes to make (``--set`` of check and diff)."""
        return tuple(a.set for a in self.advice if a.set and a.kind in APPLIED)


@dataclass(frozen=True)
class AdviseResult:
    """``bpfmem advise`` on one kernel; ``warnings``: what of the occupancy given was not used
    (maps it names that no object has, maps of a snapshot whose entries were not counted)."""
    kernel: KernelProfile
    objects: tuple[ObjectAdvice, ...]
    warnings: tuple[str, ...] = ()


def _prealloc_rule(prof: KernelProfile, prog_types: set[str]) -> str:
    tracing = prog_types & {"kprobe", "tracepoint", "raw_tracepoint", "perf_event", "tracing"}
    if prof.at_least(6, 1):
        return ("Linux 6.1+ lets every program type use non-preallocated hash maps (elements "
                "come from bpf_mem_alloc's per-CPU caches).")
    if "perf_event" in tracing:
        return ("perf_event programs can only use preallocated hash maps before Linux 6.1 "
                "(verifier: 'perf_event programs can only use preallocated hash map').")
    if tracing and prof.at_least(5, 7):
        return ("Before 6.1, tracing programs (kprobe, tracepoint, raw_tp) using "
                "non-preallocated hash maps load with a warning and are refused on PREEMPT_RT; "
                "sleepable programs need preallocated maps.")
    return "Non-preallocated hash maps are allowed for these program types on this kernel."


def advise(obj: ObjectSpec, uses: dict, prof: KernelProfile,
           occupancy: dict[str, int] | None = None) -> list[Advice]:
    """Recommendations for one object, largest saving first."""
    out: list[Advice] = []
    prog_type_of = {p.name: p.type for p in obj.programs}
    from ..uapi import prog_type_name
    for m in obj.maps:
        if not m.autocreate or m.refused:
            continue
        shape, _why = shape_of_spec(m, prof)
        if shape is None:
            continue
        fp = estimate(shape, prof)
        if fp.rejected:
            continue
        use = uses.get(m.name)
        verdict = use.verdict if use is not None else "unreferenced"
        progs = sorted({p for ps in (use.ops.values() if use else []) for p in ps})
        ptypes = {prog_type_name(prog_type_of[p]) for p in progs if prog_type_of.get(p)}
        is_hash = m.type in (T.HASH, T.PERCPU_HASH)
        prealloc = not m.map_flags & NO_PREALLOC

        if verdict == "unreferenced" and m.kind != "data":
            out.append(Advice(
                m.name, "unused", f"{m.name}: no program references it",
                fp.charged_at_create or 0, fp.charged_full,
                "Drop it, or create it lazily when a feature needs it (userspace-only maps "
                "still cost their full preallocation at every start).",
                "A map is charged to the creating process's memory cgroup whether or not a "
                "program uses it.", f"{m.name}.count=0"))
        if is_hash and prealloc and verdict == "read_only":
            after = estimate(replace(shape, map_flags=shape.map_flags | NO_PREALLOC), prof)
            out.append(Advice(
                m.name, "no_prealloc",
                f"{m.name}: BPF_F_NO_PREALLOC (the datapath only looks it up: "
                f"{', '.join(progs) or 'no program'})",
                (fp.charged_at_create or 0) - (after.charged_at_create or 0),
                None if fp.charged_full is None or after.charged_full is None
                else fp.charged_full - after.charged_full,
                "Rows then cost memory as userspace writes them, so an empty map costs only "
                "its buckets; a write that does not fit fails that write (ENOMEM) instead of "
                "the agent's start. A full map costs somewhat more than preallocated (each "
                "element is its own allocation), and the pinned map must be recreated once.",
                _prealloc_rule(prof, ptypes), f"{m.name}.flags+=no_prealloc",
                (fp.memlock_at_create or 0) - (after.memlock_at_create or 0)))
        elif is_hash and prealloc and verdict == "datapath_writes":
            w = use.writers if use else {}
            how = "; ".join(op + " in " + ", ".join(p) for op, p in w.items())
            out.append(Advice(
                m.name, "keep_prealloc",
                f"{m.name}: keep preallocated (the datapath writes it: {how})",
                0, 0,
                "With BPF_F_NO_PREALLOC every datapath insert would allocate from "
                "bpf_mem_alloc's per-CPU cache (refilled from irq_work), adding latency and "
                "a failure mode under memory pressure on the packet path.",
                _prealloc_rule(prof, ptypes)))
        elif m.type in (T.LRU_HASH, T.LRU_PERCPU_HASH):
            half = estimate(replace(shape, max_entries=max(1, shape.max_entries // 2)), prof)
            out.append(Advice(
                m.name, "lru_resize",
                f"{m.name}: LRU maps are always preallocated; only its size is a lever "
                f"(halving max_entries saves the amount shown)",
                (fp.charged_at_create or 0) - (half.charged_at_create or 0),
                None if fp.charged_full is None else
                fp.charged_full - (half.charged_full or 0),
                "A smaller LRU evicts sooner: size it to the peak working set.",
                "The kernel refuses BPF_F_NO_PREALLOC on LRU maps (ENOTSUPP): LRU lists "
                "need every element up front.", f"{m.name}.max_entries="
                f"{max(1, shape.max_entries // 2)}"))
        if m.type in PERCPU:
            costs = {c: estimate(shape, replace(prof, possible_cpus=c)).memlock_at_create
                     for c in CPU_STEPS}
            shared_type = {T.PERCPU_HASH: T.HASH, T.PERCPU_ARRAY: T.ARRAY,
                           T.LRU_PERCPU_HASH: T.LRU_HASH}.get(T(m.type))
            shared = None
            if shared_type is not None:
                shared = estimate(MapShape(int(shared_type), shape.key_size, shape.value_size,
                                           shape.max_entries, shape.map_flags), prof)
            out.append(Advice(
                m.name, "percpu",
                f"{m.name}: per-CPU: memlock "
                + ", ".join(f"{c} CPUs {format_size(v)}" for c, v in costs.items()
                            if v is not None),
                0, None,
                "A shared map with atomic updates (__sync_fetch_and_add) would cost "
                f"{format_size(shared.memlock_at_create or 0)} memlock on any node, "
                "at the price of cache-line contention on hot counters." if shared else
                "Per-CPU values scale with the node's possible CPUs.",
                "Per-CPU memory is allocated for every possible CPU "
                "(/sys/devices/system/cpu/possible), online or not; on 6.0+ the part allocated "
                "at create is not charged to any memory cgroup."))
        # a live snapshot knows maps by the kernel's name: at most 15 characters
        peak = None if not occupancy else occupancy.get(
            m.name, occupancy.get(getattr(m, "kernel_name", None) or m.name))
        if peak is not None and m.type in (T.HASH, T.PERCPU_HASH, T.LRU_HASH,
                                           T.LRU_PERCPU_HASH, T.LPM_TRIE):
            if peak * 4 < shape.max_entries:
                suggested = 1 << max(0, (2 * max(peak, 1) - 1).bit_length())
                after = estimate(replace(shape, max_entries=suggested), prof)
                out.append(Advice(
                    m.name, "resize",
                    f"{m.name}: peak occupancy {peak:,} of {shape.max_entries:,}; "
                    f"max_entries {suggested:,} keeps 2x headroom",
                    (fp.charged_at_create or 0) - (after.charged_at_create or 0),
                    None if fp.charged_full is None or after.charged_full is None
                    else fp.charged_full - after.charged_full,
                    "Sized from one node's snapshot: check the peak across the fleet first.",
                    "Preallocated maps cost max_entries elements whatever they hold.",
                    f"{m.name}.max_entries={suggested}"))
    out.sort(key=lambda a: -(a.saves_at_create or 0))
    return _composed(obj, prof, out)


def _composed(obj: ObjectSpec, prof: KernelProfile, advice: list[Advice]) -> list[Advice]:
    """The advice with every saving measured as ``check`` and ``diff`` measure it: the map's
    cost (the same footprint, times the times it is created) before and after its ``--set``
    line, each change to a map counted on top of the changes to it listed before it (so a
    resize and BPF_F_NO_PREALLOC of one map are not both counted in full)."""
    from .footprints import map_costs
    from .whatif import WhatIf, parse_setting
    specs = {m.name: m for m in obj.maps}
    applied: dict[str, list[str]] = {}
    out = []

    def cost(name: str, sets: list[str]):
        wi = WhatIf(tuple(parse_setting(x) for x in sets))
        (c,) = map_costs(obj.name, [specs[name]], prof, wi)
        return c

    for a in advice:
        if a.set is None or a.kind not in APPLIED + ("unused",):
            out.append(a)
            continue
        before = applied.get(a.map, [])
        after = before + [a.set]
        c0, c1 = cost(a.map, before), cost(a.map, after)
        if a.kind in APPLIED:
            applied[a.map] = after

        def minus(x, y):
            return None if x is None or y is None else x - y
        out.append(replace(a, saves_at_create=minus(c0.charged_at_create,
                                                     c1.charged_at_create) or 0,
                           saves_full=minus(c0.charged_full, c1.charged_full),
                           saves_memlock=minus(c0.memlock_at_create, c1.memlock_at_create)))
    return out


def advise_all(objects_and_uses, prof: KernelProfile, occupancy=None) -> AdviseResult:
    """The advice for each (ObjectSpec, uses) pair on ``prof``."""
    pairs = list(objects_and_uses)
    objects = tuple(ObjectAdvice(obj, uses, tuple(advise(obj, uses, prof, occupancy)))
                    for obj, uses in pairs)
    return AdviseResult(prof, objects, occupancy_warnings(occupancy, [o for o, _ in pairs]))


def occupancy_warnings(occupancy, objects) -> tuple[str, ...]:
    """What of an occupancy the advice cannot use, said instead of dropped."""
    if occupancy is None:
        return ()
    out = []
    names = {n for o in objects for m in o.maps
             for n in (m.name, getattr(m, "kernel_name", None) or m.name[:15])}
    unknown = sorted(n for n in occupancy if n not in names)
    if unknown:
        shown = ", ".join(unknown[:8]) + (f" and {len(unknown) - 8} more" if len(unknown) > 8
                                          else "")
        out.append(f"the occupancy names {len(unknown)} map{'s' if len(unknown) != 1 else ''} "
                   f"no object has, left unused: {shown}")
    uncounted = [n for n in getattr(occupancy, "uncounted", ()) if n in names]
    if uncounted:
        out.append(f"the snapshot has no entry count for {len(uncounted)} of these objects' "
                   f"maps ({', '.join(uncounted[:8])}{' ...' if len(uncounted) > 8 else ''}): "
                   f"no resize advice for them; take the snapshot with entries counted")
    if not occupancy and not uncounted and not unknown:
        out.append("the occupancy has no entry counts: no resize advice")
    return tuple(out)
