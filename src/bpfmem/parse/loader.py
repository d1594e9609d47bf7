"""Loaders as data: the rules each user-space loader applies to an object's maps.

An object's maps are not a property of the object alone: libbpf and cilium/ebpf (the Go
library most Kubernetes agents use, through ``bpf2go``) read the same ELF differently. A
:class:`Loader` states the differences that decide which maps are created and with which
attributes; :mod:`bpfmem.parse.objspec` applies them. Nothing above ``parse/`` needs to know
which loader ran: the result is an ordinary :class:`~bpfmem.parse.objspec.ObjectSpec`.

Sources (read, not copied):

- libbpf 1.x ``src/libbpf.c`` (``bpf_object__elf_collect``, ``parse_btf_map_def``,
  ``internal_map_name``, ``adjust_ringbuf_sz``, ``map_set_def_max_entries``).
- cilium/ebpf, current (v0.22): ``elf_reader.go`` (``LoadCollectionSpecFromReader``,
  ``loadRelocations``, ``relocateInstruction``, ``loadMaps``, ``loadBTFMaps``,
  ``mapSpecFromBTF``, ``loadDataSections``, ``loadKconfigSection``, ``createStructOpsMap``),
  ``map.go`` (``fixupMagicFields``, ``newMapWithOptions``, ``createMap``), ``collection.go``
  (``collectionLoader.loadMap``: BPF_F_MMAPABLE on data sections), ``linker.go``
  (``resolveKconfigReferences``: one .kconfig map per program load), ``types.go``
  (``canHaveValueSize``), ``btf/btf.go`` (``fixupDatasecLayout``).
- cilium/ebpf 0.9.1 (Debian golang-github-cilium-ebpf-dev): the same files as they were.
"""

from __future__ import annotations

import re
from ..values import dataclass

from ..uapi import MapType as T

LIBBPF = "libbpf"
CILIUM = "cilium-ebpf"
CILIUM_09 = "cilium-ebpf@0.9"


@dataclass(frozen=True, slots=True)
class Loader:
    """What one loader (and release) does with an object's maps."""

    name: str                          # the --loader spelling
    family: str                        # "libbpf" or "cilium-ebpf"
    release: str                       # the release whose source the rules follow
    # which ELF sections are global data (one single-element ARRAY each)
    data_exact: tuple[str, ...]
    data_prefixes: tuple[str, ...]
    data_kept: str                     # "nonempty" | "referenced" | "referenced_or_symbols"
    data_mmapable: str                 # "non_static_globals" | "always" | "never"
    kconfig: str                       # "one_map" | "per_program" | "refuse"
    struct_ops_maps: frozenset[str]    # sections whose variables become STRUCT_OPS maps
    struct_ops_refused: frozenset[str]   # sections that make the loader refuse the object
    btf_map_fields: frozenset[str]     # members a BTF map definition may have
    pin_values: frozenset[int] | None  # accepted pinning values; None: any (agent's business)
    inner_suffix: str                  # inner map template name: outer name + this
    rounds_ringbuf: bool               # rounds ring buffer sizes up (libbpf adjust_ringbuf_sz)
    no_value_size: frozenset[int]      # types whose value size is dropped when typed
    cpumap_clamp: bool                 # CPUMAP max_entries 0 or > CPUs -> possible CPUs
    static_maps: str                   # "refuse" | "refuse_if_referenced"
    static_programs: bool              # programs with STB_LOCAL symbols outside .text accepted
    refuses_string_relocations: bool   # relocations into SHF_STRINGS sections refused (0.9)
    legacy_extra_zero: bool            # bytes past struct bpf_map_def must be zero
    half_typed_btf_refused: bool       # one of key/value typed: no retry without BTF (0.9)

    @property
    def is_cilium(self) -> bool:
        return self.family == CILIUM


_ALL_BTF_FIELDS = frozenset({"type", "key", "value", "key_size", "value_size", "max_entries",
                             "map_flags", "numa_node", "pinning", "values", "map_extra"})

LOADERS: dict[str, Loader] = {
    LIBBPF: Loader(
        LIBBPF, LIBBPF, "1.7",
        data_exact=(".data", ".rodata", ".bss"), data_prefixes=(".data.", ".rodata.", ".bss."),
        data_kept="nonempty", data_mmapable="non_static_globals",
        kconfig="one_map",
        struct_ops_maps=frozenset({".struct_ops", ".struct_ops.link", "?.struct_ops",
                                   "?.struct_ops.link"}),
        struct_ops_refused=frozenset(), btf_map_fields=_ALL_BTF_FIELDS,
        pin_values=frozenset({0, 1}), inner_suffix=".inner", rounds_ringbuf=True,
        no_value_size=frozenset(), cpumap_clamp=False,
        static_maps="refuse", static_programs=False,
        refuses_string_relocations=False, legacy_extra_zero=False,
        half_typed_btf_refused=False),
    # elf_reader.go LoadCollectionSpecFromReader: .bss exactly, .data* and .rodata* prefixes
    # (isDataSection); .struct_ops.link maps, a plain .struct_ops section is ErrNotSupported.
    CILIUM: Loader(
        CILIUM, CILIUM, "0.22",
        data_exact=(".bss",), data_prefixes=(".data", ".rodata"),
        data_kept="referenced_or_symbols", data_mmapable="always",
        kconfig="per_program",
        struct_ops_maps=frozenset({".struct_ops.link"}),
        struct_ops_refused=frozenset({".struct_ops"}),
        btf_map_fields=_ALL_BTF_FIELDS - {"numa_node"},
        pin_values=None, inner_suffix="_inner", rounds_ringbuf=False,
        no_value_size=frozenset({int(T.RINGBUF), int(T.ARENA), int(T.PERF_EVENT_ARRAY)}),
        cpumap_clamp=True,
        static_maps="refuse_if_referenced", static_programs=True,
        refuses_string_relocations=False, legacy_extra_zero=True,
        half_typed_btf_refused=False),
    # 0.9.1 elf_reader.go: .bss, .data exactly, .rodata* prefix; no .kconfig (btf.go
    # fixupDatasec: "reference to .kconfig: not supported"); no map_extra member; no
    # retry without BTF in createMap.
    CILIUM_09: Loader(
        CILIUM_09, CILIUM, "0.9.1",
        data_exact=(".bss", ".data"), data_prefixes=(".rodata",), data_kept="referenced",
        data_mmapable="never",
        kconfig="refuse",
        struct_ops_maps=frozenset(), struct_ops_refused=frozenset(),
        btf_map_fields=_ALL_BTF_FIELDS - {"numa_node", "map_extra"},
        pin_values=None, inner_suffix="_inner", rounds_ringbuf=False,
        no_value_size=frozenset(), cpumap_clamp=False,
        static_maps="refuse_if_referenced", static_programs=True,
        refuses_string_relocations=True, legacy_extra_zero=True,
        half_typed_btf_refused=True),
}

LOADER_NAMES = tuple(LOADERS)

# Map types whose ops have map_check_btf (kernel/bpf/*.c), so a BTF value type with key type
# id 0 is accepted: arraymap.c array_map_check_btf, local_storage.c cgroup_storage_check_btf,
# bpf_local_storage.c bpf_local_storage_map_check_btf, lpm_trie.c trie_check_btf,
# bloom_filter.c bloom_map_check_btf, arena.c arena_map_check_btf.
MAP_CHECK_BTF_TYPES = frozenset(int(t) for t in (
    T.ARRAY, T.PERCPU_ARRAY, T.CGROUP_STORAGE, T.PERCPU_CGROUP_STORAGE, T.SK_STORAGE,
    T.INODE_STORAGE, T.TASK_STORAGE, T.CGRP_STORAGE, T.LPM_TRIE, T.BLOOM_FILTER, T.ARENA))


def get_loader(name: str | Loader | None) -> Loader:
    """The loader called ``name`` (``libbpf``, ``cilium-ebpf``, ``cilium-ebpf@0.9``)."""
    if isinstance(name, Loader):
        return name
    if name is None:
        return LOADERS[LIBBPF]
    key = name.strip().lower().replace("cilium/ebpf", CILIUM).replace("cilium_ebpf", CILIUM)
    if key in ("cilium-ebpf@0.9.1", "cilium-ebpf@v0.9", "cilium-ebpf@v0.9.1"):
        key = CILIUM_09
    if key in ("cilium-ebpf@latest", "cilium", "ebpf-go"):
        key = CILIUM
    if key not in LOADERS:
        raise ValueError(f"unknown loader {name!r}: choose {', '.join(LOADER_NAMES)}")
    return LOADERS[key]


_BPF2GO_NAME = (r"_bpf(el|eb)(_[a-z0-9]+)?\.o$|_(x86|arm64|arm|amd64|loong64|mips|"
                r"powerpc|riscv|s390|sparc)_bpf(el|eb)\.o$")     # (compiled when first used)


def bpf2go_name(path: str | None) -> bool:
    """Whether a file name looks like bpf2go output (``<stem>_bpfel.o``, ``<stem>_x86_bpfel.o``)."""
    return bool(path) and bool(re.search(_BPF2GO_NAME, str(path).rsplit("/", 1)[-1]))


def sanitize_name(name: str) -> str:
    """cilium/ebpf ``sanitizeName(name, -1)`` (syscalls.go): drop every character but
    ``A-Za-z0-9._``."""
    return "".join(c for c in name if (c.isascii() and c.isalnum()) or c in "._")
