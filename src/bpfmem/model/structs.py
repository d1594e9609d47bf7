"""Sizes of the kernel structs that map memory formulas add up, per release (x86_64).

They change between releases (``struct bpf_map`` grew a 32-byte ``sha`` in 6.18,
``lpm_trie_node`` lost its ``rcu_head`` in 6.13) and between builds of one release (its
config), so the exact way to know them is the target kernel's BTF (``host/profile.py`` reads
it). The tables hold what was read from one build each; a release between two tables uses
the nearest older table and is marked inexact.
"""

from __future__ import annotations

from ..values import dataclass, fields, replace


@dataclass(frozen=True)
class StructSizes:
    """The sizes of the kernel structures the memory model adds up, for one build."""

    name: str
    exact: bool
    bpf_htab: int
    bucket: int
    htab_elem: int
    bpf_array: int
    bpf_stack_map: int
    stack_map_bucket: int
    lpm_trie: int
    lpm_trie_node: int
    bpf_queue_stack: int
    bpf_bloom_filter: int
    bpf_ringbuf_map: int
    bpf_ringbuf: int
    bpf_local_storage_map: int
    bpf_local_storage_map_bucket: int
    bpf_dtab: int
    bpf_dtab_netdev: int
    bpf_cpu_map: int
    xsk_map: int
    xsk_map_node: int
    bpf_stab: int
    bpf_shtab: int
    bpf_shtab_bucket: int
    bpf_shtab_elem: int
    bpf_cgroup_storage_map: int
    reuseport_array: int
    bpf_struct_ops_map: int
    bpf_struct_ops_value: int
    bpf_arena: int
    file: int = 184          # struct file: the map's fd (filp cache, SLAB_ACCOUNT)
    dentry: int = 192        # struct dentry: its anon inode file's own dentry (SLAB_ACCOUNT)
    nr_cpus: int = 8192      # CONFIG_NR_CPUS of that build (sizeof(struct cpumask) * 8)


STRUCT_NAMES = tuple(f.name for f in fields(StructSizes)
                     if f.name not in ("name", "exact", "nr_cpus"))

# Each table is one build's BTF, as measured; another build of the same release can differ
# by a few cache lines per struct (two builds of 6.18.44: bpf_htab 832 and 896). Tests check
# the Debian tables against the BTF committed under tests/data/btf/.

# 6.18.44-fc-v857 x86_64, read from its /sys/kernel/btf/vmlinux (kernel-map-memory.md §2).
LINUX_6_18 = StructSizes(
    "table of 6.18.44-fc-v857 as measured", True, bpf_htab=832, bucket=16, htab_elem=48,
    bpf_array=312, bpf_stack_map=320, stack_map_bucket=16, lpm_trie=400, lpm_trie_node=24,
    bpf_queue_stack=312, bpf_bloom_filter=312, bpf_ringbuf_map=304, bpf_ringbuf=12288,
    bpf_local_storage_map=448, bpf_local_storage_map_bucket=16, bpf_dtab=344,
    bpf_dtab_netdev=64, bpf_cpu_map=304, xsk_map=304, xsk_map_node=32, bpf_stab=376,
    bpf_shtab=384, bpf_shtab_bucket=16, bpf_shtab_elem=48, bpf_cgroup_storage_map=328,
    reuseport_array=296, bpf_struct_ops_map=512, bpf_struct_ops_value=64, bpf_arena=400,
    nr_cpus=256)

# Debian 6.12.117+deb12-cloud-amd64 (package 6.12.117-1~deb12u1), from its image's BTF.
LINUX_6_12 = StructSizes(
    "table of Debian 6.12.117+deb12-cloud-amd64 as measured", True, bpf_htab=896, bucket=16,
    htab_elem=48, bpf_array=264, bpf_stack_map=288, stack_map_bucket=16, lpm_trie=288,
    lpm_trie_node=40, bpf_queue_stack=264, bpf_bloom_filter=264, bpf_ringbuf_map=256,
    bpf_ringbuf=12288, bpf_local_storage_map=432, bpf_local_storage_map_bucket=16,
    bpf_dtab=296, bpf_dtab_netdev=64, bpf_cpu_map=256, xsk_map=256, xsk_map_node=32,
    bpf_stab=328, bpf_shtab=336, bpf_shtab_bucket=16, bpf_shtab_elem=48,
    bpf_cgroup_storage_map=280, reuseport_array=248, bpf_struct_ops_map=512,
    bpf_struct_ops_value=64, bpf_arena=336)

# Debian 6.1.0-57-cloud-amd64 (package 6.1.192-3), from its image's BTF (no arena: 6.9+).
LINUX_6_1 = StructSizes(
    "table of Debian 6.1.0-57-cloud-amd64 as measured", True, bpf_htab=832, bucket=16,
    htab_elem=48, bpf_array=320, bpf_stack_map=320, stack_map_bucket=16, lpm_trie=320,
    lpm_trie_node=40, bpf_queue_stack=320, bpf_bloom_filter=320, bpf_ringbuf_map=320,
    bpf_ringbuf=12288, bpf_local_storage_map=320, bpf_local_storage_map_bucket=16,
    bpf_dtab=320, bpf_dtab_netdev=72, bpf_cpu_map=320, xsk_map=320, xsk_map_node=32,
    bpf_stab=320, bpf_shtab=320, bpf_shtab_bucket=16, bpf_shtab_elem=48,
    bpf_cgroup_storage_map=320, reuseport_array=256, bpf_struct_ops_map=448,
    bpf_struct_ops_value=64, bpf_arena=400, file=232, dentry=192)

# Debian 5.10.0-46-cloud-amd64 (package 5.10.262-1), from its image's BTF (no bloom filter,
# no arena: those keep 6.1's and 6.18's value, never used: the types do not exist there).
LINUX_5_10 = replace(
    LINUX_6_1, name="table of Debian 5.10.0-46-cloud-amd64 as measured", bpf_htab=640,
    bpf_struct_ops_map=384, file=256)

# (first release, table): a release uses the last table whose first release it reaches.
TABLES = (((0, 0), LINUX_5_10), ((6, 1), LINUX_6_1), ((6, 12), LINUX_6_12),
          ((6, 18), LINUX_6_18))
EXACT_RELEASES = {(5, 10): LINUX_5_10, (6, 1): LINUX_6_1, (6, 12): LINUX_6_12,
                  (6, 18): LINUX_6_18}


def sizes_for_release(release: tuple[int, ...]) -> StructSizes:
    """The table for ``release``; ``exact`` only for the releases the tables were read from."""
    major_minor = tuple(release[:2])
    if major_minor in EXACT_RELEASES:
        return EXACT_RELEASES[major_minor]  # type: ignore[index]
    table = TABLES[0][1]
    for first, t in TABLES:
        if major_minor >= first:
            table = t
    sizes = replace(table, exact=False, name=f"{table.name}, for "
                                               f"{'.'.join(map(str, major_minor))}")
    if major_minor < (6, 13):
        sizes = replace(sizes, lpm_trie_node=40)   # rcu_head dropped in 6.13
    return sizes


def sizes_from_dict(found: dict[str, int | None], release: tuple[int, ...]) -> StructSizes:
    """Sizes a probe read from a kernel's BTF (``{"bpf_htab": 832, ...}``); names the kernel
    lacks (None or absent) keep the release's table value."""
    known = {k: v for k, v in found.items() if k in STRUCT_NAMES and isinstance(v, int)}
    base = sizes_for_release(release)
    return replace(base, name=f"BTF of {'.'.join(map(str, release))}", exact=True, **known)
