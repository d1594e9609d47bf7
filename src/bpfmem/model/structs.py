"""Sizes of the kernel structs that map memory formulas add up, per release (x86_64).

They change between releases (``struct bpf_map`` grew a 32-byte ``sha`` in 6.18,
``lpm_trie_node`` lost its ``rcu_head`` in 6.13), so the exact way to know them is the target
kernel's BTF: :func:`sizes_from_btf` reads ``/sys/kernel/btf/vmlinux`` (or any raw BTF file).
The tables hold what was read from Debian's and this project's kernels; a release between two
tables uses the nearest older table and is marked inexact.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class StructSizes:
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


STRUCT_NAMES = tuple(f.name for f in fields(StructSizes) if f.name not in ("name", "exact"))

# Linux 6.18.44 x86_64, read from /sys/kernel/btf/vmlinux (kernel-map-memory.md §2).
LINUX_6_18 = StructSizes(
    "6.18", True, bpf_htab=832, bucket=16, htab_elem=48, bpf_array=312, bpf_stack_map=320,
    stack_map_bucket=16, lpm_trie=400, lpm_trie_node=24, bpf_queue_stack=312,
    bpf_bloom_filter=312, bpf_ringbuf_map=304, bpf_ringbuf=12288, bpf_local_storage_map=448,
    bpf_local_storage_map_bucket=16, bpf_dtab=344, bpf_dtab_netdev=64, bpf_cpu_map=304,
    xsk_map=304, xsk_map_node=32, bpf_stab=376, bpf_shtab=384, bpf_shtab_bucket=16,
    bpf_shtab_elem=48, bpf_cgroup_storage_map=328, reuseport_array=296,
    bpf_struct_ops_map=512, bpf_struct_ops_value=64, bpf_arena=400)

# Debian 6.12.117+deb12-cloud-amd64 (kernel-map-memory.md §8); the sizes not listed there
# (element and bucket structs, ringbuf, struct_ops, arena) are taken as on 6.18.
LINUX_6_12 = replace(
    LINUX_6_18, name="6.12", bpf_htab=896, bpf_array=264, bpf_stack_map=288,
    bpf_queue_stack=264, bpf_bloom_filter=264, bpf_ringbuf_map=256, bpf_local_storage_map=432,
    bpf_dtab=296, bpf_dtab_netdev=64, bpf_cpu_map=256, xsk_map=256, bpf_stab=328,
    bpf_shtab=336, bpf_cgroup_storage_map=280, reuseport_array=248, lpm_trie_node=40)

# Debian 5.10.262 (kernel-map-memory.md §8): the sizes RLIMIT_MEMLOCK charging adds.
LINUX_5_10 = replace(
    LINUX_6_18, name="5.10", bpf_htab=640, bpf_array=320, lpm_trie=320, bpf_stack_map=320,
    bpf_queue_stack=320, xsk_map=320, bpf_local_storage_map=320, bpf_cgroup_storage_map=320,
    bpf_ringbuf_map=320, bpf_ringbuf=12288, reuseport_array=256, htab_elem=48,
    bpf_shtab_elem=48, lpm_trie_node=40)

# (first release, table): a release uses the last table whose first release it reaches.
TABLES = (((0, 0), LINUX_5_10), ((5, 11), LINUX_6_12), ((6, 12), LINUX_6_12),
          ((6, 13), LINUX_6_18), ((6, 18), LINUX_6_18))
EXACT_RELEASES = {(5, 10): LINUX_5_10, (6, 12): LINUX_6_12, (6, 18): LINUX_6_18}


def sizes_for_release(release: tuple[int, ...]) -> StructSizes:
    """The table for ``release``; ``exact`` only for the releases the tables were read from."""
    major_minor = tuple(release[:2])
    if major_minor in EXACT_RELEASES:
        return EXACT_RELEASES[major_minor]  # type: ignore[index]
    table = TABLES[0][1]
    for first, t in TABLES:
        if major_minor >= first:
            table = t
    sizes = replace(table, exact=False, name=f"{table.name} table for "
                                               f"{'.'.join(map(str, major_minor))}")
    if major_minor < (6, 13):
        sizes = replace(sizes, lpm_trie_node=40)   # rcu_head dropped in 6.13
    return sizes


def sizes_from_btf(path: str, release: tuple[int, ...] = (0, 0, 0)) -> StructSizes:
    """Struct sizes read from a kernel's BTF (``/sys/kernel/btf/vmlinux``).

    Structs the kernel does not have (an older release) keep the table's value.
    Raises OSError when the file cannot be read, ValueError when it is not BTF.
    """
    from ..errors import ParseError
    from ..parse.btf import STRUCT, Btf
    with open(path, "rb") as f:
        data = f.read()
    try:
        btf = Btf(data, section=path)
        wanted = set(STRUCT_NAMES)
        found: dict[str, int] = {}
        for tid in range(1, btf.count):
            if btf.kind(tid) == STRUCT:
                name = btf.name_of(tid)
                if name in wanted and name not in found:
                    found[name] = btf.ref(tid)
    except ParseError as e:
        raise ValueError(str(e)) from None
    return sizes_from_dict(found, release)


def sizes_from_dict(found: dict[str, int | None], release: tuple[int, ...]) -> StructSizes:
    """Sizes a probe read from a kernel's BTF (``{"bpf_htab": 832, ...}``); names the kernel
    lacks (None or absent) keep the release's table value."""
    known = {k: v for k, v in found.items() if k in STRUCT_NAMES and isinstance(v, int)}
    base = sizes_for_release(release)
    return replace(base, name=f"BTF of {'.'.join(map(str, release))}", exact=True, **known)
