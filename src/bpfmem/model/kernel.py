"""KernelProfile: the kernel a memory estimate is for (release, possible CPUs, page size,
arch, struct sizes, accounting eras, features, map types), and the tables of eras by release.

Every number that depends on a kernel comes from a profile the caller passes in. This module
does no I/O: profiles of the host or of a BTF file are made in ``host/profile.py`` from the
facts ``parse/kernel_btf.py`` reads, and :func:`profile_from_facts` turns those facts into a
profile. A release number alone (:meth:`KernelProfile.for_release`) gives the eras of the
mainline release and the struct sizes of the one build each table was read from.
"""

from __future__ import annotations

import re
from ..values import dataclass, field, replace

from .structs import StructSizes, sizes_for_release, sizes_from_dict

# How `memlock:` in fdinfo is computed (kernel/bpf/syscall.c).
MEMLOCK_RLIMIT = "rlimit"        # <= 5.10: pages charged to RLIMIT_MEMLOCK (bpf_map_charge_init)
MEMLOCK_FOOTPRINT = "footprint"  # 5.11 - 6.3: bpf_map_memory_footprint(), an estimate
MEMLOCK_USAGE = "mem_usage"      # >= 6.4: map->ops->map_mem_usage()

# What the memory cgroup pays (kernel/bpf/syscall.c, memcontrol).
CHARGE_NONE = "none"             # <= 5.10: kernel/bpf allocates without __GFP_ACCOUNT
CHARGE_CREATOR = "creator"       # 5.11 - 5.19: map->memcg; percpu memory at create charged too
CHARGE_OBJCG = "objcg"           # >= 6.0: map->objcg set after map_alloc: percpu at create free

# (first release, value, BTF marker, citation) — each era starts at the release named; the
# marker is the "struct.member" whose presence in a kernel's BTF shows the era (checked in
# the order given, newest first, by era_from_members).
MEMLOCK_ERAS = (
    ((0, 0), MEMLOCK_RLIMIT, "bpf_map.memory",
     "RLIMIT_MEMLOCK accounting (bpf_map_charge_init, struct bpf_map_memory)"),
    ((5, 11), MEMLOCK_FOOTPRINT, None,
     "5.11: 'bpf: Eliminate rlimit-based memory accounting' (Roman Gushchin); fdinfo shows "
     "bpf_map_memory_footprint()"),
    ((6, 4), MEMLOCK_USAGE, "bpf_map_ops.map_mem_usage",
     "6.4: 'bpf: bpf memory usage' series (Yafang Shao): map_mem_usage callbacks"),
)
CHARGE_ERAS = (
    ((0, 0), CHARGE_NONE, None, "no __GFP_ACCOUNT in kernel/bpf"),
    ((5, 11), CHARGE_CREATOR, "bpf_map.memcg",
     "5.11: memcg-based accounting of BPF memory (map->memcg)"),
    ((6, 0), CHARGE_OBJCG, "bpf_map.objcg",
     "6.0: 'bpf: reparent bpf maps on memcg offlining' (map->objcg, saved after map_alloc)"),
)
# Allocator changes the formulas follow: (name, first release, BTF marker, citation).
FEATURES = (
    ("htab_mem_alloc", (6, 1), "bpf_htab.ma",
     "6.1: NO_PREALLOC hash elements from bpf_mem_alloc ('bpf: Convert hash map to "
     "bpf_mem_alloc')"),
    ("local_storage_mem_alloc", (6, 5), "bpf_local_storage_map.bpf_ma",
     "6.5: task and cgroup storage elements from bpf_mem_alloc"),
    ("percpu_prefill_one", (6, 7), "bpf_mem_alloc.percpu",
     "6.7: per-CPU bpf_mem_alloc caches prefilled with one object per CPU, not four "
     "('bpf: Use bpf_mem_alloc_percpu_init ...' series: prefill_mem_cache)"),
    ("lpm_mem_alloc", (6, 13), "lpm_trie.ma",
     "6.13: LPM trie nodes from bpf_mem_alloc ('bpf: Switch to bpf mem allocator for LPM "
     "trie')"),
)

NEWEST_MODELLED = (6, 18)

# Architectures modelled, as `uname -m` names them, with the page sizes each builds.
ARCHES = {"x86_64": (4096,), "aarch64": (4096, 16384, 65536)}
ARCH_ALIASES = {"amd64": "x86_64", "x86-64": "x86_64", "arm64": "aarch64"}


def arch_name(text: str) -> str:
    """'arm64', 'aarch64', 'amd64', 'x86_64' -> the `uname -m` name; ValueError else."""
    name = ARCH_ALIASES.get(text.strip().lower(), text.strip().lower())
    if name not in ARCHES:
        raise ValueError(f"architecture {text!r} is not modelled (known: x86_64/amd64, "
                         "aarch64/arm64)")
    return name


def kmalloc_minalign(arch: str, release: tuple[int, ...]) -> int:
    """ARCH_KMALLOC_MINALIGN, the smallest kmalloc cache: 8 on x86_64; on arm64 the DMA
    alignment, 128, until 6.5 ('arm64: Allow kmalloc() caches aligned to the smaller
    cache_line_size()' made it 8 where non-coherent DMA bounces through swiotlb)."""
    if arch == "aarch64" and tuple(release[:2]) < (6, 5):
        return 128
    return 8


def _era(table, release: tuple[int, int]) -> str:
    value = table[0][1]
    for first, v, *_ in table:
        if release >= first:
            value = v
    return value


def era_from_members(table, members: frozenset[str]) -> str:
    """The newest era of ``table`` whose marker member the BTF has; an era without a marker
    is the one between its neighbours (taken when no newer marker and the older era's marker
    is absent)."""
    for i in range(len(table) - 1, -1, -1):
        marker = table[i][2]
        if marker is not None and marker in members:
            return table[i][1]
    # no marker present: the unmarked era (there is exactly one per table)
    return next(v for _, v, marker, _ in table if marker is None)


def features_for_release(release: tuple[int, ...]) -> frozenset[str]:
    return frozenset(name for name, first, _, _ in FEATURES if tuple(release[:2]) >= first)


def parse_release(text: str) -> tuple[int, int, int]:
    """'6.1', '6.12.117', '6.18.44-fc-v857', '5.10.0-46-cloud-amd64' -> (major, minor, patch)."""
    m = re.match(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?", str(text))
    if not m:
        raise ValueError(f"not a kernel release: {text!r} (expected e.g. 6.1 or 5.10.209)")
    rel = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    if rel[:2] < (3, 18) or rel[0] > 99:
        raise ValueError(f"not a kernel release bpfmem can model: {text!r} (BPF maps came "
                         "with Linux 3.18)")
    return rel


@dataclass(frozen=True)
class KernelProfile:
    """The kernel an estimate is for.

    ``memlock_era``, ``charge_era``, ``features`` and ``map_types`` left as None are those of
    the mainline release; a profile read from a kernel's BTF has them detected from it.
    """

    release: tuple[int, int, int]
    possible_cpus: int
    page_size: int = 4096
    arch: str = "x86_64"
    sizes: StructSizes = field(default=None)  # type: ignore[assignment]
    source: str = "table"                     # "btf" or "table": where the sizes came from
    nr_cpus: int | None = None                # CONFIG_NR_CPUS, when known (cpumap limit)
    memlock_era: str = None                   # type: ignore[assignment]
    charge_era: str = None                    # type: ignore[assignment]
    features: frozenset = None                # type: ignore[assignment]
    map_types: frozenset | None = None        # map type ids the kernel has; None: by release
    build: str = ""                           # the build named ("6.1.0-57-cloud-amd64"), if known
    sizes_source: str = ""                    # says where the struct sizes came from
    notes: tuple[str, ...] = ()               # what was assumed, where BTF and release disagree
    name: str = ""                            # the [[kernels]] entry of bpfmem.toml, if one
    kmalloc_min: int = None                   # type: ignore[assignment]  # smallest kmalloc
    _hash: int = field(default=0, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.possible_cpus, int) or not 1 <= self.possible_cpus <= 1 << 16:
            raise ValueError(f"possible CPUs must be 1..65536, not {self.possible_cpus}")
        set_ = object.__setattr__
        if self.sizes is None:
            set_(self, "sizes", sizes_for_release(self.release))
        if self.memlock_era is None:
            set_(self, "memlock_era", _era(MEMLOCK_ERAS, self.release[:2]))
        if self.charge_era is None:
            set_(self, "charge_era", _era(CHARGE_ERAS, self.release[:2]))
        if self.features is None:
            set_(self, "features", features_for_release(self.release))
        if not self.sizes_source:
            set_(self, "sizes_source", self.sizes.name)
        if self.kmalloc_min is None:
            set_(self, "kmalloc_min", kmalloc_minalign(self.arch, self.release))
        set_(self, "_hash", hash((self.release, self.possible_cpus, self.page_size, self.arch,
                                  self.sizes, self.nr_cpus, self.memlock_era, self.charge_era,
                                  self.features, self.map_types, self.kmalloc_min)))

    def __hash__(self) -> int:   # profiles key the model's caches: hash once
        return self._hash

    @classmethod
    def for_release(cls, release: str | tuple[int, int, int], possible_cpus: int,
                    *, page_size: int = 4096) -> "KernelProfile":
        """The release's table: mainline eras, the struct sizes and NR_CPUS of the build the
        table was read from (exact for that build only)."""
        rel = parse_release(release) if isinstance(release, str) else tuple(release)
        sizes = sizes_for_release(rel)
        notes = [f"struct sizes from the {sizes.name}; other builds of {rel[0]}.{rel[1]} may "
                 "differ by a few cache lines per map (--kernel-btf FILE for a node's own)",
                 f"eras of mainline {rel[0]}.{rel[1]}; a distro kernel may backport others "
                 "(--kernel-btf detects them)",
                 f"NR_CPUS assumed {sizes.nr_cpus} (that build's; it limits cpumap sizes)"]
        if rel[:2] > NEWEST_MODELLED:
            notes.insert(0, f"{rel[0]}.{rel[1]} is newer than the newest release modelled "
                            f"({NEWEST_MODELLED[0]}.{NEWEST_MODELLED[1]}): modelled with its "
                            "rules")
        return cls(rel, possible_cpus, page_size, "x86_64", sizes, "table",
                   sizes.nr_cpus, sizes_source=sizes.name, notes=tuple(notes))

    @property
    def version(self) -> str:
        return ".".join(str(x) for x in self.release)

    @property
    def exact(self) -> bool:
        """Struct sizes and eras are the kernel's own (read from its BTF)."""
        return self.source == "btf" and self.sizes.exact

    def at_least(self, major: int, minor: int) -> bool:
        return self.release[:2] >= (major, minor)

    def has(self, feature: str) -> bool:
        return feature in self.features

    def describe(self) -> dict:
        d = {"version": self.version, "possible_cpus": self.possible_cpus,
             "page_size": self.page_size, "arch": self.arch,
             "kmalloc_min_align": self.kmalloc_min,
             "memlock_era": self.memlock_era, "charge_era": self.charge_era,
             "struct_sizes": self.sizes.name, "struct_sizes_exact": self.sizes.exact,
             "struct_sizes_source": self.sizes_source, "exact": self.exact}
        if self.build:
            d["build"] = self.build
        if self.name:
            d["name"] = self.name
        if self.notes:
            d["notes"] = list(self.notes)
        return d


def profile_from_facts(facts, *, release: str | None, possible_cpus: int,
                       page_size: int = 4096, arch: str = "x86_64", sizes_source: str = "",
                       assumed: tuple[str, ...] = ()) -> KernelProfile:
    """A profile of the kernel whose BTF gave ``facts`` (parse.kernel_btf.KernelFacts).

    Struct sizes, eras, allocator features, map types and NR_CPUS come from the BTF; the
    release (from the file, else the caller) decides only what BTF cannot show. Where a
    detected era or feature differs from the release's, a note says so; ``assumed`` are
    notes on what the caller assumed (possible CPUs, page size).
    """
    text = facts.release or release
    if not text:
        raise ValueError("the BTF does not say which release it is: give --kernel VERSION "
                         "with --kernel-btf")
    rel = parse_release(text)
    sizes = replace(sizes_from_dict(facts.sizes, rel),
                    name=f"BTF of {text}")
    memlock = era_from_members(MEMLOCK_ERAS, facts.members)
    charge = era_from_members(CHARGE_ERAS, facts.members)
    features = frozenset(name for name, _, marker, _ in FEATURES if marker in facts.members)
    notes = []
    for what, got, want in (("memlock era", memlock, _era(MEMLOCK_ERAS, rel[:2])),
                            ("charge era", charge, _era(CHARGE_ERAS, rel[:2]))):
        if got != want:
            notes.append(f"{what} {got} detected from the BTF; mainline {rel[0]}.{rel[1]} "
                         f"would be {want} (a backport?): using the BTF's")
    mainline = features_for_release(rel)
    for name, first, _, _ in FEATURES:
        if (name in features) != (name in mainline):
            notes.append(f"{name} {'present' if name in features else 'absent'} in the BTF, "
                         f"unlike mainline {rel[0]}.{rel[1]}: using the BTF's")
    if facts.nr_cpus is None:
        notes.append("NR_CPUS unknown (no struct cpumask in the BTF): cpumap sizes unchecked")
    notes.extend(assumed)
    return KernelProfile(rel, possible_cpus, page_size, arch, sizes, "btf", facts.nr_cpus,
                         memlock, charge, features, facts.map_types or None, text,
                         sizes_source or sizes.name, tuple(notes))


def parse_cpu_list(text: str) -> int:
    """Number of CPUs in a kernel CPU list such as '0-3,8-11' or '0'."""
    count = 0
    for part in text.strip().split(","):
        if not part:
            continue
        a, _, b = part.partition("-")
        count += (int(b) - int(a) + 1) if b else 1
    return count


