"""Estimate a map's memory on a kernel: memlock and memcg charge, at create and when full."""

from __future__ import annotations

from ..values import dataclass
from functools import lru_cache

from ..uapi import MapFlag, MapType as T
from . import formulas as fm
from .kernel import KernelProfile
from .limits import LOADER, Rejection, rejection
from .shape import MapShape



def charge_tolerance(prof: KernelProfile) -> int:
    """How far a memory cgroup's ``memory.current`` may stand from the bytes the kernel
    charged for a map (mm/memcontrol.c): slab objects are charged in bytes through per-CPU
    object stocks, the page counter in whole pages. Each CPU's stock holds under a page of
    the cgroup's pre-charged bytes, and a drained stock hands its remainder (under a page) to
    the cgroup's obj_cgroup, where it stays charged: a reading is off by less than a page per
    CPU, either way. The qemu sweeps (tests/data/sweeps) show both ends on 2 CPUs."""
    return prof.page_size * prof.possible_cpus


@dataclass(frozen=True, slots=True)
class Footprint:
    """Model output for one map on one kernel. ``None`` means "cannot be known from the
    spec" (and says why in ``notes``), never a fake 0."""

    kernel: KernelProfile
    shape: MapShape
    entries: int                    # entries the `memlock`/`charged` figures assume
    capacity: int | None            # entries when full (None: unbounded, e.g. local storage)
    memlock: int | None
    memlock_at_create: int | None
    memlock_full: int | None
    charged: int | None
    charged_at_create: int | None
    charged_full: int | None
    charged_tolerance: int          # +- bytes the charge at create is good to
    rejected: Rejection | None      # why nothing is created (None: it is)
    notes: tuple[str, ...] = ()
    charged_slack: int = 0          # + bytes allocator caches may add once entries arrive

    def as_dict(self) -> dict:
        return {"memlock": self.memlock, "memlock_at_create": self.memlock_at_create,
                "memlock_full": self.memlock_full, "charged": self.charged,
                "charged_at_create": self.charged_at_create, "charged_full": self.charged_full,
                "charged_tolerance": self.charged_tolerance,
                "charged_slack": self.charged_slack, "entries": self.entries,
                "capacity": self.capacity, "rejected": self.rejected,
                "notes": list(self.notes)}


def capacity(sh: MapShape, prof: KernelProfile) -> int | None:
    """How many entries "full" means."""
    if sh.type in fm.LOCAL_STORAGES or sh.type in fm.CGROUP_STORAGES:
        return None
    if sh.type == T.STRUCT_OPS:
        return 1
    return fm.effective_max_entries(sh, prof)


@lru_cache(maxsize=1 << 16)
def _linear(sh: MapShape, prof: KernelProfile) -> tuple:
    """Everything about ``sh`` on ``prof`` that does not depend on the entries present:
    memlock and charge are linear in the entries (elements are allocated one at a time), so
    a shape is worked out once and any fill level is a multiply-add."""
    reason = rejection(sh, prof)
    if reason is not None:
        return (reason, None, None, 0, None, None, (), 0, 0)
    cap = capacity(sh, prof)
    notes: list[str] = []
    ml_create = fm.memlock(sh, prof, 0)
    ml_slope = 0
    if fm.grows_with_entries(sh) and ml_create is not None:
        ml_slope = fm.memlock(sh, prof, 1) - ml_create
        if prof.memlock_era != "mem_usage":
            notes.append(f"memlock on {prof.version} does not follow the entries present")
    ch_create = fm.charged_at_create(sh, prof)
    per = fm.charged_per_entry(sh, prof) if ch_create is not None else None
    if ch_create is not None and per is None:
        notes.append("elements are charged per socket/task/inode/cgroup that stores one, "
                     "which the map cannot know")
    if sh.type == T.STRUCT_OPS:
        notes.append("struct_ops memory depends on the kernel's struct; not modelled")
    if not prof.sizes.exact and prof.memlock_era == "mem_usage":
        notes.append(f"struct sizes from the {prof.sizes.name}; exact on the kernel itself")
    slack = fm.charged_slack(sh, prof)
    credit = fm.first_entry_credit(sh, prof)
    return (None, cap, ml_create, ml_slope, ch_create, per, tuple(notes), slack, credit)


def _memlock_at(ml0: int | None, slope: int, n: int | None) -> int | None:
    """memlock with ``n`` entries (None: unbounded, full means nothing then unless flat)."""
    if ml0 is None:
        return None
    if n is None:
        return ml0 if not slope else None
    return ml0 + slope * n


def _charged_at(ch0: int | None, per: float | None, credit: int, n: int | None
                ) -> int | None:
    """The charge with ``n`` entries (None: unbounded)."""
    if ch0 is None or n is None:
        return None
    if not n:
        return ch0
    if per is None:
        return None
    return ch0 + round(per * n) - credit


def estimate(sh: MapShape, prof: KernelProfile, entries: int = 0) -> Footprint:
    """The memory ``sh`` costs on ``prof``'s kernel, empty, with ``entries`` and full."""
    reason, cap, ml0, ml_slope, ch0, per, notes, slack, credit = _linear(sh, prof)
    if reason is not None:
        return Footprint(prof, sh, entries, None, None, None, None, None, None, None, 0, reason,
                         ("the kernel refuses this map: nothing is created",))
    if cap is not None and entries > cap:
        notes = notes + (f"{entries} entries asked for, but the map holds at most {cap}",)
        entries = cap
    ch_full = _charged_at(ch0, per, credit, cap) if per is not None else None
    return Footprint(prof, sh, entries, cap, _memlock_at(ml0, ml_slope, entries), ml0,
                     _memlock_at(ml0, ml_slope, cap), _charged_at(ch0, per, credit, entries),
                     ch0, ch_full, charge_tolerance(prof), None, notes, slack)


def spec_figures(spec, prof: KernelProfile) -> tuple[tuple | None, str | None]:
    """What :func:`estimate_spec` says of an object's map with no entries, as the figures an
    inventory keeps, without making the Footprint (``bpfmem maps`` asks it of every map):
    ``(memlock_at_create, memlock_full, charged_at_create, charged_full,
    charged_tolerance, rejection)``, or None and why when the spec leaves a size to load
    time."""
    refused = getattr(spec, "refused", None)
    if refused:
        return (None, None, None, None, 0, Rejection("", refused, LOADER)), None
    shape, why = shape_of_spec(spec, prof)
    if shape is None:
        return None, why
    reason, cap, ml0, ml_slope, ch0, per, _notes, _slack, credit = _linear(shape, prof)
    if reason is not None:
        return (None, None, None, None, 0, reason), None
    return (ml0, _memlock_at(ml0, ml_slope, cap), ch0,
            _charged_at(ch0, per, credit, cap) if per is not None else None,
            charge_tolerance(prof), None), None


def shape_of_spec(spec, prof: KernelProfile) -> tuple[MapShape | None, str | None]:
    """The one door from an object's map spec to the shape the kernel is given on ``prof``
    (``bpfmem maps``, check, diff, advise and measure all come through here, and the libbpf
    and cilium/ebpf differential tests check it), the loader's rules applied: a per-CPU
    clamp (cilium/ebpf: ``max_entries`` 0 or over the possible CPUs becomes the CPUs), a
    PERF_EVENT_ARRAY without max_entries gets one slot per possible CPU (libbpf
    ``map_set_def_max_entries``). None and why when the spec leaves it to the loader (a
    max_entries set by the agent at load, a struct_ops value size from the kernel's own
    struct)."""
    if getattr(spec, "value_size_set_at_load", False):
        return None, "value_size is set at load from the kernel's struct"
    m = spec.max_entries
    if getattr(spec, "clamp_to_cpus", False) and (m == 0 or m > prof.possible_cpus):
        m = prof.possible_cpus
    elif getattr(spec, "max_entries_set_at_load", False):
        if spec.type == T.PERF_EVENT_ARRAY and m == 0:
            m = prof.possible_cpus
        else:
            return None, "max_entries is set by the loader at load time"
    return MapShape(int(spec.type), spec.key_size, spec.value_size, m, spec.map_flags,
                    spec.map_extra), None


@dataclass(frozen=True, slots=True)
class CreatedAttrs:
    """What the kernel reports back (``bpf_map_info``) for the attributes it settles
    itself when it creates a map."""
    max_entries: int
    map_flags: int


def created_attrs(sh: MapShape, prof: KernelProfile) -> CreatedAttrs:
    """max_entries and map_flags as the kernel reports them after creating ``sh`` (the
    output of :func:`shape_of_spec`) on ``prof``:

    - kernel/bpf/hashtab.c ``htab_map_alloc``: an LRU hash with BPF_F_NO_COMMON_LRU has its
      max_entries rounded up to a multiple of the possible CPUs (the model's
      :func:`~bpfmem.model.formulas.effective_max_entries`, which its capacity uses);
    - kernel/bpf/devmap.c ``dev_map_init_map`` (5.8+): DEVMAP and DEVMAP_HASH always get
      BPF_F_RDONLY_PROG, since a lookup returns a pointer into the device entry.
    """
    flags = sh.map_flags
    if sh.type in (T.DEVMAP, T.DEVMAP_HASH):
        flags |= int(MapFlag.RDONLY_PROG)
    return CreatedAttrs(fm.effective_max_entries(sh, prof), int(flags))


def estimate_spec(spec, prof: KernelProfile, entries: int = 0
                  ) -> tuple[Footprint | None, str | None]:
    """The Footprint of an object's map spec on ``prof`` (None and why when the spec leaves
    a size to load time). A map the loader refuses (``spec.refused``) gets a rejected
    Footprint: it is never 0 bytes, it is not created."""
    refused = getattr(spec, "refused", None)
    if refused:
        sh = MapShape(int(spec.type), spec.key_size, spec.value_size, spec.max_entries,
                      spec.map_flags, spec.map_extra)
        return Footprint(prof, sh, entries, None, None, None, None, None, None, None, 0,
                         Rejection("", refused, LOADER),
                         ("the loader does not create this map",)), None
    shape, why = shape_of_spec(spec, prof)
    return (estimate(shape, prof, entries) if shape is not None else None), why
