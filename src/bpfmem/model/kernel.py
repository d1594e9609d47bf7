"""KernelProfile: the kernel a memory estimate is for (release, possible CPUs, page size,
arch, struct sizes), and the table of accounting eras by release.

Every number that depends on a kernel comes from a profile the caller passes in; the host's
own profile (:func:`host_profile`) is just one way to make one.
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass, field, replace

from .structs import StructSizes, sizes_for_release

# How `memlock:` in fdinfo is computed, by release (kernel/bpf/syscall.c).
MEMLOCK_RLIMIT = "rlimit"        # <= 5.10: pages charged to RLIMIT_MEMLOCK (bpf_map_charge_init)
MEMLOCK_FOOTPRINT = "footprint"  # 5.11 - 6.3: bpf_map_memory_footprint(), an estimate
MEMLOCK_USAGE = "mem_usage"      # >= 6.4: map->ops->map_mem_usage()

# What the memory cgroup pays (kernel/bpf/syscall.c, memcontrol).
CHARGE_NONE = "none"             # <= 5.10: kernel/bpf allocates without __GFP_ACCOUNT
CHARGE_CREATOR = "creator"       # 5.11 - 5.19: map->memcg; percpu memory at create charged too
CHARGE_OBJCG = "objcg"           # >= 6.0: map->objcg set after map_alloc: percpu at create free

# (first release, value, citation) — each era starts at the release named.
MEMLOCK_ERAS = (
    ((0, 0), MEMLOCK_RLIMIT, "RLIMIT_MEMLOCK accounting (bpf_map_charge_init)"),
    ((5, 11), MEMLOCK_FOOTPRINT, "5.11: 'bpf: Eliminate rlimit-based memory accounting' "
                                 "(Roman Gushchin); fdinfo shows bpf_map_memory_footprint()"),
    ((6, 4), MEMLOCK_USAGE, "6.4: 'bpf: bpf memory usage' series (Yafang Shao): "
                            "map_mem_usage callbacks"),
)
CHARGE_ERAS = (
    ((0, 0), CHARGE_NONE, "no __GFP_ACCOUNT in kernel/bpf"),
    ((5, 11), CHARGE_CREATOR, "5.11: memcg-based accounting of BPF memory (map->memcg)"),
    ((6, 0), CHARGE_OBJCG, "6.0: 'bpf: reparent bpf maps on memcg offlining' (map->objcg, "
                           "saved after map_alloc)"),
)


def _era(table, release: tuple[int, int]) -> str:
    value = table[0][1]
    for first, v, _ in table:
        if release >= first:
            value = v
    return value


def parse_release(text: str) -> tuple[int, int, int]:
    """'6.1', '6.12.117', '6.18.44-fc-v857', '5.10.0-46-cloud-amd64' -> (major, minor, patch)."""
    m = re.match(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not m:
        raise ValueError(f"not a kernel release: {text!r} (expected e.g. 6.1 or 5.10.209)")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


@dataclass(frozen=True)
class KernelProfile:
    """The kernel an estimate is for."""

    release: tuple[int, int, int]
    possible_cpus: int
    page_size: int = 4096
    arch: str = "x86_64"
    sizes: StructSizes = field(default=None)  # type: ignore[assignment]
    source: str = "table"                     # where the struct sizes came from
    nr_cpus: int | None = None                # CONFIG_NR_CPUS, when known (cpumap limit)
    memlock_era: str = field(default="", init=False, compare=False)
    charge_era: str = field(default="", init=False, compare=False)
    _hash: int = field(default=0, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.possible_cpus < 1:
            raise ValueError(f"possible CPUs must be at least 1, not {self.possible_cpus}")
        if self.sizes is None:
            object.__setattr__(self, "sizes", sizes_for_release(self.release))
        # derived once: the formulas ask for these on every estimate
        object.__setattr__(self, "memlock_era", _era(MEMLOCK_ERAS, self.release[:2]))
        object.__setattr__(self, "charge_era", _era(CHARGE_ERAS, self.release[:2]))
        object.__setattr__(self, "_hash", hash((self.release, self.possible_cpus,
                                                self.page_size, self.arch, self.sizes,
                                                self.nr_cpus)))

    def __hash__(self) -> int:   # profiles key the model's caches: hash once
        return self._hash

    @classmethod
    def for_release(cls, release: str | tuple[int, int, int], possible_cpus: int,
                    *, page_size: int = 4096) -> "KernelProfile":
        rel = parse_release(release) if isinstance(release, str) else release
        return cls(rel, possible_cpus, page_size, "x86_64", sizes_for_release(rel),
                   "table")

    @property
    def version(self) -> str:
        return ".".join(str(x) for x in self.release)

    def at_least(self, major: int, minor: int) -> bool:
        return self.release[:2] >= (major, minor)

    def describe(self) -> dict:
        return {"version": self.version, "possible_cpus": self.possible_cpus,
                "page_size": self.page_size, "arch": self.arch,
                "memlock_era": self.memlock_era, "charge_era": self.charge_era,
                "struct_sizes": self.sizes.name, "struct_sizes_exact": self.sizes.exact}


def parse_cpu_list(text: str) -> int:
    """Number of CPUs in a kernel CPU list such as '0-3,8-11' or '0'."""
    count = 0
    for part in text.strip().split(","):
        if not part:
            continue
        a, _, b = part.partition("-")
        count += (int(b) - int(a) + 1) if b else 1
    return count


def host_possible_cpus(root: str = "/") -> int:
    try:
        with open(os.path.join(root, "sys/devices/system/cpu/possible")) as f:
            return parse_cpu_list(f.read())
    except OSError:
        return os.cpu_count() or 1


def host_profile(root: str = "/") -> KernelProfile:
    """This machine's kernel, with struct sizes read from its BTF when it has one."""
    release = parse_release(platform.release())
    cpus = host_possible_cpus(root)
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    btf_path = os.path.join(root, "sys/kernel/btf/vmlinux")
    sizes, source = sizes_for_release(release), "table"
    try:
        sizes = _cached_btf_sizes(btf_path, release)
        source = "btf"
    except (OSError, ValueError):
        pass
    nr_cpus = None
    try:
        with open(os.path.join(root, "sys/devices/system/cpu/kernel_max")) as f:
            nr_cpus = int(f.read().strip()) + 1
    except (OSError, ValueError):
        pass
    return KernelProfile(release, cpus, page, platform.machine() or "x86_64", sizes, source,
                         nr_cpus)


def _cached_btf_sizes(btf_path: str, release: tuple[int, int, int]):
    """Struct sizes from the kernel's BTF, read once per kernel build: parsing vmlinux BTF
    (about 5 MB) costs a tenth of a second, so the sizes are kept in the user's cache,
    keyed by the release, the build string and the BTF file's size."""
    import hashlib
    import json
    from dataclasses import asdict

    from .structs import StructSizes, sizes_from_btf
    st = os.stat(btf_path)
    key = f"{platform.release()}|{platform.version()}|{st.st_size}"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "bpfmem", "btf-sizes",
                        hashlib.sha256(key.encode()).hexdigest()[:16] + ".json")
    try:
        with open(path) as f:
            return StructSizes(**json.load(f))
    except (OSError, ValueError, TypeError):
        pass
    sizes = sizes_from_btf(btf_path, release)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(asdict(sizes), f)
        os.replace(tmp, path)
    except OSError:
        pass
    return sizes


DEFAULT_RELEASE = (6, 18, 0)


def default_profile(kernel: str | None = None, cpus: int | None = None) -> KernelProfile:
    """The profile `--kernel`/`--cpus` ask for: the running kernel (or 6.18 when none can be
    read) and this host's possible CPUs, unless given."""
    if kernel is None:
        try:
            prof = host_profile()
            return prof if cpus is None else replace(prof, possible_cpus=cpus)
        except ValueError:
            kernel = ".".join(map(str, DEFAULT_RELEASE))
    return KernelProfile.for_release(kernel, cpus if cpus is not None else host_possible_cpus())
