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


def estimate(sh: MapShape, prof: KernelProfile, entries: int = 0) -> Footprint:
    """The memory ``sh`` costs on ``prof``'s kernel, empty, with ``entries`` and full."""
    reason, cap, ml0, ml_slope, ch0, per, notes, slack, credit = _linear(sh, prof)
    if reason is not None:
        return Footprint(prof, sh, entries, None, None, None, None, None, None, None, 0, reason,
                         ("the kernel refuses this map: nothing is created",))
    if cap is not None and entries > cap:
        notes = notes + (f"{entries} entries asked for, but the map holds at most {cap}",)
        entries = cap
    if ml0 is None:
        ml_now = ml_full = None
    else:
        ml_now = ml0 + ml_slope * entries
        ml_full = ml0 + ml_slope * cap if cap is not None else (ml0 if not ml_slope else None)
    if ch0 is None:
        ch_now = ch_full = None
    elif per is None:
        ch_now, ch_full = (ch0 if entries == 0 else None), None
    else:
        ch_now = ch0 + round(per * entries) - (credit if entries else 0)
        ch_full = None if cap is None else ch0 + round(per * cap) - (credit if cap else 0)
    return Footprint(prof, sh, entries, cap, ml_now, ml0, ml_full, ch_now, ch0, ch_full,
                     charge_tolerance(prof), None, notes, slack)


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
