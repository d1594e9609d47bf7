"""Attributes the kernel (or the loader) settles at create time, from a spec and the host.

A spec says what the object asks for; these functions say what the kernel then reports back
(``bpf_map_info``), for the attributes it adjusts itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..parse.objspec import MapSpec
from ..uapi import MapFlag, MapType
from .formulas import round_to_cpus


@dataclass(frozen=True, slots=True)
class CreatedAttrs:
    max_entries: int
    map_flags: int


def created_attrs(spec: MapSpec, possible_cpus: int) -> CreatedAttrs:
    """max_entries and map_flags as the kernel reports them after the loader created ``spec``.

    - libbpf: a PERF_EVENT_ARRAY without max_entries gets one slot per possible CPU
      (``map_set_def_max_entries``).
    - kernel/bpf/hashtab.c ``htab_map_alloc``: an LRU hash with BPF_F_NO_COMMON_LRU has its
      max_entries rounded up to a multiple of the possible CPUs (down, if that overflows u32).
    - kernel/bpf/devmap.c ``dev_map_init_map`` (5.8+): DEVMAP and DEVMAP_HASH always get
      BPF_F_RDONLY_PROG, since a lookup returns a pointer into the device entry.
    """
    m, flags = spec.max_entries, spec.map_flags
    if spec.type == MapType.PERF_EVENT_ARRAY and m == 0:
        m = possible_cpus
    if (spec.type in (MapType.LRU_HASH, MapType.LRU_PERCPU_HASH)
            and flags & MapFlag.NO_COMMON_LRU and possible_cpus > 0):
        m = round_to_cpus(m, possible_cpus)
    if spec.type in (MapType.DEVMAP, MapType.DEVMAP_HASH):
        flags |= MapFlag.RDONLY_PROG
    return CreatedAttrs(m, int(flags))
