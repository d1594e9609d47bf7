"""Turn a relocatable BPF ELF object into an :class:`ObjectSpec`: the maps and programs a
loader creates, with libbpf's semantics (libbpf 1.x, ``src/libbpf.c``), and legacy
``SEC("maps")`` definitions as libbpf 0.x, cilium/ebpf and iproute2 read them.

Deterministic: the same bytes give the same spec on every host. Whatever a loader decides at
load time from the host (perf event array sizes, struct_ops value sizes) is marked as such,
never filled in from this machine.
"""

from __future__ import annotations

from ..values import dataclass, field, replace

from ..errors import ParseError
from ..uapi import BPF_OBJ_NAME_LEN, MapFlag, MapType, ProgType, map_type_name
from . import btf as B
from .btf import Btf
from .elf import (SHN_UNDEF, SHT_NOBITS, SHT_PROGBITS, SHT_REL, STB_GLOBAL, STB_WEAK,
                  STT_NOTYPE, STT_OBJECT, STT_SECTION, STV_HIDDEN, STV_INTERNAL, ElfFile,
                  Section, Symbol)
from .loader import (LIBBPF, MAP_CHECK_BTF_TYPES, Loader, bpf2go_name, get_loader,
                     sanitize_name)
from .programs import (MapSymbols, ProgramSpec, collect_functions, program_relocations_ok,
                       read_programs)
from .reader import decoding

PAGE_SIZE = 4096  # libbpf rounds ringbuf sizes to the host page size; x86-64/arm64 default

KIND_BTF = "btf"
KIND_LEGACY = "legacy"
KIND_DATA = "data"
KIND_STRUCT_OPS = "struct_ops"

# Map types whose max_entries is legitimately 0 in an object (the kernel requires 0).
_ZERO_ENTRIES_OK = frozenset({MapType.CGROUP_STORAGE, MapType.PERCPU_CGROUP_STORAGE,
                              MapType.SK_STORAGE, MapType.INODE_STORAGE,
                              MapType.TASK_STORAGE, MapType.CGRP_STORAGE})
_MAP_IN_MAP = frozenset({MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS})
_RINGBUFS = frozenset({MapType.RINGBUF, MapType.USER_RINGBUF})

@dataclass(frozen=True, slots=True)
class MapSpec:
    """One map as the loader would create it (attributes as the kernel sees them)."""

    name: str
    type: int
    key_size: int
    value_size: int
    max_entries: int
    map_flags: int = 0
    map_extra: int = 0
    numa_node: int = 0
    pinning: int = 0
    kind: str = KIND_BTF
    section: str = ".maps"
    inner: "MapSpec | None" = None
    max_entries_set_at_load: bool = False
    value_size_set_at_load: bool = False
    autocreate: bool = True
    key_type: str | None = None
    value_type: str | None = None
    init_slots: tuple[tuple[int, str], ...] = ()
    notes: tuple[str, ...] = ()
    kernel_name: str = ""   # the name the kernel stores; default: name cut to 15 characters
    refused: str | None = None   # why the loader (or the kernel, given what the loader passes)
                                 # fails to create this map; None: it is created
    clamp_to_cpus: bool = False  # max_entries 0 or above the possible CPUs becomes the
                                 # possible CPUs at load (cilium/ebpf perf event arrays, cpumaps)
    instances: int = 1           # how many copies the loader creates (cilium/ebpf: .kconfig
                                 # once per program that reads it)

    def __post_init__(self) -> None:
        if not self.kernel_name:
            object.__setattr__(self, "kernel_name", self.name[:BPF_OBJ_NAME_LEN - 1])

    @property
    def type_name(self) -> str:
        return map_type_name(self.type)


@dataclass(frozen=True, slots=True)
class ObjectSpec:
    """A compiled BPF object as one loader reads it: its maps and programs."""

    path: str | None
    name: str                     # libbpf's object name (file name up to the first dot)
    little_endian: bool
    license: str | None
    maps: tuple[MapSpec, ...]
    programs: tuple[ProgramSpec, ...] | None   # None: not read (parse_object(programs=False)),
                                               # which is not "no programs": ask for them
    has_btf: bool
    notes: tuple[str, ...] = field(default=())
    loader: str = "libbpf"        # the loader whose rules made this spec (parse/loader.py)
    loader_reason: str = ""       # why that loader was assumed
    carrier: str | None = None    # the binary it was embedded in (None: a file of its own)

    def map(self, name: str) -> MapSpec:
        for m in self.maps:
            if m.name == name:
                return m
        raise KeyError(name)


def object_name_from_path(path: str) -> str:
    """libbpf's object name: the file's base name, cut to 15 characters, then at the first dot."""
    base = path.rsplit("/", 1)[-1][:BPF_OBJ_NAME_LEN - 1]
    return base.split(".", 1)[0]


def internal_map_name(obj_name: str, real_name: str) -> str:
    """libbpf's ``internal_map_name``: the map name for a global data section."""
    sfx_len = min(max(7, len(real_name)), BPF_OBJ_NAME_LEN - 1)
    if "." in real_name[1:]:
        pfx_len = 0
    else:
        pfx_len = min(BPF_OBJ_NAME_LEN - sfx_len - 1, len(obj_name))
    name = (obj_name[:pfx_len] + real_name[:sfx_len])[:BPF_OBJ_NAME_LEN - 1]
    return "".join(c if (c.isascii() and c.isalnum()) or c in "_." else "_" for c in name)


def adjust_ringbuf_size(size: int, page_size: int = PAGE_SIZE) -> int:
    """libbpf's ``adjust_ringbuf_sz``: round up to a power-of-2 multiple of the page size."""
    if size == 0:
        return 0
    if size % page_size == 0 and (size // page_size) & (size // page_size - 1) == 0:
        return size
    mul = 1
    while mul <= 0xFFFFFFFF // page_size:
        if mul * page_size > size:
            return mul * page_size
        mul <<= 1
    return size


@dataclass(frozen=True)
class ObjectCode:
    """An object's programs as code, for analyses of what they do (the advisor)."""

    spec: ObjectSpec
    elf: ElfFile
    text_idx: int | None
    funcs: dict[int, list[Symbol]]                    # section index -> function symbols
    reloc_targets: dict[tuple[int, int], tuple[str, int]]

    def function(self, shndx: int, start: int) -> Symbol | None:
        for f in self.funcs.get(shndx, []):
            if f.value == start:
                return f
        return None

    def program_entries(self) -> list[tuple[ProgramSpec, int, Symbol]]:
        """(program, section index, function symbol) for every program."""
        out = []
        for p in self.spec.programs:
            sec = self.elf.section(p.section)
            if sec is None:
                continue
            sym = next((f for f in self.funcs.get(sec.index, []) if f.name == p.name), None)
            if sym is not None:
                out.append((p, sec.index, sym))
        return out


def parse_object_code(data: bytes, *, path: str | None = None,
                      loader: Loader | str | None = None,
                      name: str | None = None) -> ObjectCode:
    """Like :func:`parse_object`, keeping what code analyses need."""
    if loader == AUTO:
        spec = parse_object_auto(data, path=path, name=name)
        loader = spec.loader
    try:
        with decoding():
            p = _ObjectParser(data, path, name, get_loader(loader))
            spec = p.run()
    except ParseError as e:
        raise e.with_path(path) if path else e
    except RecursionError:
        raise ParseError("type nesting too deep", path=path) from None
    return ObjectCode(spec, p.elf, p.text_idx, p.funcs, p.reloc_targets)


AUTO = "auto"


def parse_object(data: bytes, *, path: str | None = None, name: str | None = None,
                 loader: Loader | str | None = None, programs: bool = True) -> ObjectSpec:
    """Parse a BPF object's bytes with ``loader``'s rules (default libbpf; ``"auto"``: see
    :func:`parse_object_auto`). Raises :class:`ParseError` for anything that loader rejects.

    ``programs=False`` leaves the program list unread (``spec.programs`` is None) for
    commands that never show it: the maps, notes and refusals are the same as the full
    parse's (where they depend on the programs, those are read anyway, and not returned)."""
    if loader == AUTO:
        return parse_object_auto(data, path=path, name=name, programs=programs)
    L = get_loader(loader)
    try:
        with decoding():
            spec = _ObjectParser(data, path, name, L, programs=programs).run()
    except ParseError as e:
        raise e.with_path(path) if path else e
    except RecursionError:
        raise ParseError("type nesting too deep", path=path) from None
    return replace(spec, loader=L.name, loader_reason=f"--loader {L.name}")


def parse_object_auto(data: bytes, *, path: str | None = None,
                      name: str | None = None, programs: bool = True) -> ObjectSpec:
    """The default loader: an object only one loader can open is read with that one; a
    bpf2go file name (``*_bpfel.o``) that cilium/ebpf opens is read as cilium/ebpf does;
    anything else as libbpf does. The spec says which loader was assumed and why."""
    from .loader import CILIUM
    lib_err: ParseError | None = None
    hinted = bpf2go_name(path)
    try:
        # a bpf2go name is read as cilium/ebpf does unless that refuses it: libbpf's
        # answer is then only "opens it or not", which needs no program list
        lib = parse_object(data, path=path, name=name, loader=LIBBPF,
                           programs=programs and not hinted)
    except ParseError as e:
        lib, lib_err = None, e
    if lib is not None and not hinted:
        return replace(lib, loader_reason="the default (libbpf); --loader cilium-ebpf for Go "
                                          "agents")
    try:
        cil = parse_object(data, path=path, name=name, loader=CILIUM, programs=programs)
    except ParseError as e:
        if lib is not None:
            if programs and lib.programs is None:
                lib = parse_object(data, path=path, name=name, loader=LIBBPF)
            return replace(lib, loader_reason=f"bpf2go-style name, but cilium/ebpf refuses it "
                                              f"({e.what}); libbpf opens it")
        assert lib_err is not None
        raise lib_err from None
    if lib is None:
        assert lib_err is not None
        return replace(cil, loader_reason=f"libbpf refuses it ({lib_err.what}); cilium/ebpf "
                                          "opens it")
    return replace(cil, loader_reason="bpf2go-style file name (*_bpfel.o / *_bpfeb.o): a Go "
                                      "agent loads it with cilium/ebpf")


class _ObjectParser:
    def __init__(self, data: bytes, path: str | None, name: str | None,
                 loader: Loader | None = None, *, programs: bool = True):
        self.elf = ElfFile(data, path=path)
        self.path = path
        self.obj_name = name if name is not None else object_name_from_path(path or "object")
        self.notes: list[str] = []
        self.L = loader or get_loader(None)
        self.references: dict[int, int] = {}
        self.want_programs = programs   # False: the spec's programs stay unread (None)
        self.programs: tuple[ProgramSpec, ...] | None = None

    # -- top level --------------------------------------------------------------------------
    def run(self) -> ObjectSpec:
        elf = self.elf
        if elf.symtab is None:
            raise ParseError("no symbol table (stripped object?); a loader needs one")
        self.syms = elf.symbols
        self._classify_sections()
        btf_sec = elf.section(".BTF")
        self.btf: Btf | None = None
        if btf_sec is not None and btf_sec.type == SHT_PROGBITS:
            self.btf = Btf(elf.data(btf_sec).data, endian=elf.endian, section=".BTF")
        self._ds_cache: dict[str, object] = {}
        self._global_objects: dict[str, Symbol] | None = None
        self.maps: list[MapSpec] = []
        self.map_origin: list[tuple[int, int]] = []   # (section index, offset) per map
        if self.L.is_cilium:
            self._cilium_checks()
        self._legacy_maps()
        self._btf_maps()
        self._data_maps()
        self._kconfig_map()
        self._struct_ops_maps()
        self.functions = collect_functions(self.syms, self.exec_secs, self.text_idx,
                                           static_programs=self.L.static_programs)
        self.funcs = self.functions.by_section
        kconfig_readers = self.L.kconfig == "per_program" and self._kconfig_index() is not None
        if self.want_programs or kconfig_readers:
            self._programs()
        else:
            self._check_program_relocations()
        self._map_init_slots()
        programs = self._struct_ops_attach(self.programs)
        if kconfig_readers:
            assert programs is not None
            self._kconfig_per_program(programs)
        if not self.want_programs:
            programs = None
        license = None
        lic = elf.section("license")
        if lic is not None and lic.type == SHT_PROGBITS:
            raw = elf.data(lic).data
            license = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
        return ObjectSpec(self.path, self.obj_name, elf.little_endian, license,
                          tuple(self.maps), programs, self.btf is not None, tuple(self.notes),
                          loader=self.L.name)

    # -- cilium/ebpf's whole-object refusals ----------------------------------------------
    def _known_section(self, idx: int) -> bool:
        """Whether cilium/ebpf's LoadCollectionSpecFromReader keeps section ``idx`` (its
        ``sections`` map): SHN_UNDEF, map, BTF map, data, program and struct_ops sections."""
        if idx == SHN_UNDEF:
            return True
        return idx in self._cilium_kinds

    def _cilium_checks(self) -> None:
        """What makes cilium/ebpf refuse the whole object before any map is created:
        elf_reader.go ``loadRelocations`` (a relocation into a section it does not keep is
        ErrNotSupported; 0.9.1 also refuses relocations into SHF_STRINGS sections) and
        ``relocateInstruction`` (a program referring to a map through a non-global symbol:
        "possible erroneous static qualifier on map definition"); btf.go (0.9.1: a .kconfig
        or .ksyms DATASEC is not supported)."""
        L, elf = self.L, self.elf
        if L.kconfig == "refuse" and self.btf is not None:
            for ds in (".kconfig", ".ksyms"):
                if self.btf.datasec(ds) is not None:
                    raise ParseError(f"cilium/ebpf {L.release} refuses objects with {ds} "
                                     f"externs (BTF: reference to {ds}: not supported)")
        for s in self.struct_ops_secs_refused:
            raise ParseError(f"cilium/ebpf {L.release} refuses a '{s.name}' section "
                             "(only .struct_ops.link is supported)", section=s.name)
        kinds = self._cilium_kinds
        map_secs = {i for i, k in kinds.items() if k == "maps"}
        kconfig_vars: set[str] = set()
        if self.btf is not None and L.kconfig == "per_program":
            ds = self.btf.datasec(".kconfig")
            if ds is not None:
                kconfig_vars = {self.btf.type(v.type).name for v in self.btf.type(ds).secinfos}
        for rsec in elf.relocation_sections():
            if rsec.type != SHT_REL or rsec.info not in kinds:
                continue
            target = elf.sections[rsec.info]
            for rel in elf.relocations(rsec):
                sym = elf.symbol(rel.symbol, f"symbol of relocation at {rel.offset:#x}")
                if not self._known_section(sym.shndx):
                    where = (elf.sections[sym.shndx].name if 0 < sym.shndx < len(elf.sections)
                             else f"section index {sym.shndx}")
                    raise ParseError(f"cilium/ebpf refuses a reference to '{sym.name}' in "
                                     f"{where} (not supported)", section=target.name)
                if sym.shndx != SHN_UNDEF:
                    dest = elf.sections[sym.shndx]
                    if L.refuses_string_relocations and dest.flags & 0x20:  # SHF_STRINGS
                        raise ParseError(f"cilium/ebpf {L.release} refuses string constants "
                                         f"in {dest.name} (string is not stack allocated)",
                                         section=target.name)
                    self.references[sym.shndx] = self.references.get(sym.shndx, 0) + 1
                if (kinds[rsec.info] == "program" and sym.shndx == SHN_UNDEF
                        and sym.name in kconfig_vars and sym.bind != STB_GLOBAL):
                    raise ParseError(f"cilium/ebpf refuses the weak kconfig extern "
                                     f"'{sym.name}' (unsupported binding: STB_WEAK)",
                                     section=target.name)
                if (kinds[rsec.info] == "program" and sym.shndx in map_secs
                        and sym.bind != STB_GLOBAL):
                    raise ParseError(f"cilium/ebpf refuses a reference to the static map "
                                     f"'{sym.name}' (possible erroneous static qualifier on "
                                     "map definition)", section=target.name)

    def _classify_sections(self) -> None:
        """libbpf's ``bpf_object__elf_collect``: which section is what."""
        if self.L.is_cilium:
            return self._classify_sections_cilium()
        self.struct_ops_secs_refused: list[Section] = []
        self.text_idx: int | None = None
        self.exec_secs: list[Section] = []
        self.data_secs: list[tuple[Section, str]] = []   # (section, "data"|"rodata"|"bss")
        self.maps_idx: int | None = None                 # .maps
        self.legacy_idx: int | None = None               # maps
        self.struct_ops_secs: list[Section] = []
        self.arena_idx: int | None = None
        for s in self.elf.sections[1:]:
            n = s.name
            if n == "maps":
                self.legacy_idx = s.index
            elif n == ".maps":
                self.maps_idx = s.index
            elif s.type == SHT_PROGBITS and s.size > 0:
                if s.is_exec:
                    if n == ".text":
                        self.text_idx = s.index
                    self.exec_secs.append(s)
                elif n == ".data" or n.startswith(".data."):
                    self.data_secs.append((s, "data"))
                elif n == ".rodata" or n.startswith(".rodata."):
                    self.data_secs.append((s, "rodata"))
                elif n in (".struct_ops", ".struct_ops.link", "?.struct_ops",
                           "?.struct_ops.link"):
                    self.struct_ops_secs.append(s)
                elif n == ".addr_space.1":
                    self.arena_idx = s.index
            elif s.type == SHT_NOBITS and (n == ".bss" or n.startswith(".bss.")):
                self.data_secs.append((s, "bss"))

    def _classify_sections_cilium(self) -> None:
        """cilium/ebpf's ``LoadCollectionSpecFromReader``: the first matching rule of
        license*, version*, maps* (legacy), .maps, data (the loader's names), SHT_REL,
        executable PROGBITS, struct_ops."""
        L = self.L
        self.text_idx = None
        self.exec_secs, self.data_secs, self.struct_ops_secs = [], [], []
        self.struct_ops_secs_refused = []
        self.maps_idx = self.legacy_idx = self.arena_idx = None
        self._cilium_kinds: dict[int, str] = {}
        kinds = self._cilium_kinds
        for s in self.elf.sections[1:]:
            n = s.name
            if n.startswith(("license", "version")):
                continue
            if n.startswith("maps"):
                if self.legacy_idx is None:
                    self.legacy_idx = s.index
                kinds[s.index] = "maps"
            elif n == ".maps":
                self.maps_idx = s.index
                kinds[s.index] = "maps"
            elif n in L.data_exact or n.startswith(L.data_prefixes):
                what = ("rodata" if n.startswith(".rodata") else
                        "bss" if s.type == SHT_NOBITS else "data")
                self.data_secs.append((s, what))
                kinds[s.index] = "data"
            elif s.type == SHT_REL:
                continue
            elif s.type == SHT_PROGBITS and s.size > 0:
                if s.is_exec:
                    if n == ".text":
                        self.text_idx = s.index
                    self.exec_secs.append(s)
                    kinds[s.index] = "program"
                elif n in L.struct_ops_maps:
                    self.struct_ops_secs.append(s)
                    kinds[s.index] = "struct_ops"
                elif n in L.struct_ops_refused:
                    self.struct_ops_secs_refused.append(s)

    # -- maps -------------------------------------------------------------------------------
    def _add_map(self, spec: MapSpec, sec_idx: int, offset: int) -> None:
        self.maps.append(spec)
        self.map_origin.append((sec_idx, offset))

    def _datasec(self, name: str) -> list[tuple[B.BtfType, int, int, int]] | None:
        """The variables of DATASEC ``name`` as libbpf sees them after ``btf_fixup_datasec``:
        ``(var, offset, size, linkage)`` sorted by offset. Clang leaves DATASEC sizes and
        offsets at 0, so offsets come from the ELF symbols, and a hidden global counts as
        static."""
        cached = self._ds_cache.get(name, False)
        if cached is not False:
            return cached  # type: ignore[return-value]
        btf = self.btf
        ds_id = btf.datasec(name) if btf is not None else None
        if ds_id is None:
            self._ds_cache[name] = None
            return None
        ds = btf.type(ds_id)  # type: ignore[union-attr]
        extern_sec = name in (".kconfig", ".ksyms")
        fixup = ds.size == 0 and not extern_sec
        if fixup:
            sec = self.elf.section(name)
            if sec is None or sec.size == 0:
                raise ParseError(f"BTF DATASEC {name} has no ELF section to size it",
                                 section=".BTF")
        if self._global_objects is None:
            self._global_objects = {}
            for sym in self.syms:
                if sym.type == STT_OBJECT and sym.bind in (STB_GLOBAL, STB_WEAK):
                    self._global_objects.setdefault(sym.name, sym)
        out = []
        for vi in ds.secinfos:
            var = btf.type(vi.type)  # type: ignore[union-attr]
            if var.kind != B.VAR:
                raise ParseError(f"DATASEC {name}: member [{vi.type}] is a {var.kind_name}, "
                                 "not a VAR", section=".BTF")
            offset, linkage = vi.offset, var.linkage
            if not extern_sec and linkage not in (B.VAR_STATIC, B.VAR_GLOBAL_EXTERN):
                sym = self._global_objects.get(var.name)
                if sym is None:
                    raise ParseError(f"DATASEC {name}: no ELF symbol for variable '{var.name}'",
                                     section=".BTF")
                if fixup:
                    offset = sym.value
                if sym.visibility in (STV_HIDDEN, STV_INTERNAL):
                    linkage = B.VAR_STATIC
            out.append((var, offset, vi.size, linkage))
        out.sort(key=lambda v: v[1])
        self._ds_cache[name] = out
        return out

    def _legacy_maps(self) -> None:
        """``SEC("maps")`` records: ``struct bpf_map_def`` (20 bytes, libbpf 0.x) or
        iproute2's ``struct bpf_elf_map`` (36 bytes: + id, pinning, inner_id, inner_idx)."""
        if self.legacy_idx is None:
            return
        if self.L.is_cilium:
            return self._legacy_maps_cilium()
        sec = self.elf.sections[self.legacy_idx]
        data = self.elf.data(sec)
        syms = [s for s in self.syms if s.shndx == sec.index and s.type != STT_SECTION]
        self.notes.append("legacy SEC(\"maps\") definitions: libbpf 1.0+ refuses this object; "
                          "libbpf 0.x, iproute2 and cilium/ebpf load it")
        if not syms or sec.size == 0 or sec.size % len(syms):
            raise ParseError(f"cannot size the legacy map definitions: {sec.size} bytes for "
                             f"{len(syms)} symbols", section="maps", offset=sec.offset)
        even = sec.size // len(syms)
        ids: dict[int, MapSpec] = {}
        inner_of: list[tuple[int, int]] = []   # (index in self.maps, iproute2 inner_id)
        for sym in sorted(syms, key=lambda s: s.index):
            size = sym.size or even
            if size < 20:
                raise ParseError(f"legacy map '{sym.name}': definition is {size} bytes, "
                                 "shorter than struct bpf_map_def (20)", section="maps",
                                 offset=sec.offset + sym.value)
            rec = data.sub(sym.value, size, f"legacy map '{sym.name}'")
            mtype, ks, vs, me, flags = rec.unpack("IIIII", 0, f"legacy map '{sym.name}'")
            pinning, notes = 0, ()
            map_id = inner_id = 0
            if size >= 36:   # iproute2 struct bpf_elf_map: id, pinning, inner_id, inner_idx
                map_id, pinning, inner_id, _inner_idx = rec.unpack(
                    "IIII", 20, f"legacy map '{sym.name}'")
                if pinning:
                    where = {1: "the object's namespace", 2: "/sys/fs/bpf/tc/globals"}.get(
                        pinning, f"namespace {pinning}")
                    notes = (f"iproute2 pinning {pinning}: pinned in {where}",)
            spec = MapSpec(sym.name, mtype, ks, vs, me, flags, pinning=pinning,
                           kind=KIND_LEGACY, section="maps", notes=notes)
            if map_id:
                ids.setdefault(map_id, spec)
            if inner_id and mtype in _MAP_IN_MAP:
                inner_of.append((len(self.maps), inner_id))
            self._add_map(self._load_time(spec), sec.index, sym.value)
        for i, inner_id in inner_of:
            inner = ids.get(inner_id)
            if inner is None:
                raise ParseError(f"legacy map '{self.maps[i].name}': inner_id {inner_id} "
                                 "names no map", section="maps")
            self.maps[i] = replace(self.maps[i], inner=inner)

    def _legacy_maps_cilium(self) -> None:
        """elf_reader.go ``loadMaps``: each named NOTYPE/OBJECT symbol of a ``maps*`` section
        is a ``struct bpf_map_def`` (type, key_size, value_size, max_entries, flags); bytes
        past those 20 are ``Extra``, which ``createMap`` requires to be zero. No pinning, no
        inner map: a legacy map-in-map fails ``newMapWithOptions`` ("requires InnerMap").
        0.9.1 sizes the definitions evenly (section size / symbols), current by symbol size."""
        L = self.L
        sec = self.elf.sections[self.legacy_idx]  # type: ignore[index]
        data = self.elf.data(sec)
        syms = {}
        for sym in self.syms:
            if sym.shndx == sec.index and sym.name and sym.type in (STT_NOTYPE, STT_OBJECT):
                syms[sym.value] = sym
        if not syms:
            raise ParseError(f"cilium/ebpf: section {sec.name}: no symbols", section=sec.name)
        self.notes.append("legacy SEC(\"maps\") definitions (struct bpf_map_def): cilium/ebpf "
                          "reads them; libbpf 1.0+ refuses them")
        even = None
        if L.release == "0.9.1":
            if sec.size % len(syms):
                raise ParseError(f"cilium/ebpf {L.release}: section {sec.name}: map "
                                 "descriptors are not of equal size", section=sec.name)
            even = sec.size // len(syms)
        for off in sorted(syms):
            sym = syms[off]
            size = even if even is not None else sym.size
            if off + size > sec.size:
                raise ParseError(f"cilium/ebpf: map '{sym.name}': size goes out of bounds of "
                                 f"section {sec.name}", section=sec.name)
            if size < 20:
                raise ParseError(f"cilium/ebpf: map '{sym.name}': definition is {size} bytes, "
                                 "shorter than struct bpf_map_def (20)", section=sec.name)
            rec = data.sub(off, size, f"legacy map '{sym.name}'")
            mtype, ks, vs, me, flags = rec.unpack("IIIII", 0, f"legacy map '{sym.name}'")
            refused = None
            extra = bytes(rec.data[20:size]) if hasattr(rec, "data") else b""
            if mtype in _MAP_IN_MAP:
                refused = (f"cilium/ebpf: {map_type_name(mtype)} from a legacy definition has "
                           "no inner map spec (requires InnerMap)")
            elif L.legacy_extra_zero and any(extra):
                refused = (f"cilium/ebpf: {len(extra)} bytes past struct bpf_map_def are not "
                           "zero (extra contains unhandled non-zero bytes)")
            name = sanitize_name(sym.name)
            spec = MapSpec(name, mtype, ks, vs, me, flags, kind=KIND_LEGACY, section=sec.name,
                           refused=refused)
            self._add_map(self._load_time(spec), sec.index, off)

    def _btf_maps(self) -> None:
        """BTF-defined maps in ``SEC(".maps")`` (libbpf ``bpf_object__init_user_btf_maps``)."""
        if self.maps_idx is None:
            return
        sec = self.elf.sections[self.maps_idx]
        btf = self.btf
        if btf is None:
            raise ParseError("BTF-defined maps (.maps) need a .BTF section, and there is none",
                             section=".maps")
        dsvars = self._datasec(".maps")
        if dsvars is None:
            raise ParseError("DATASEC '.maps' not found in BTF", section=".BTF")
        for var, offset, size, linkage in dsvars:
            name = var.name
            if not name:
                raise ParseError("a map in .maps has no name", section=".maps")
            if offset + size > sec.size:
                raise ParseError(f"map '{name}': BTF places it at {offset}+{size}, past "
                                 f"the end of .maps ({sec.size} bytes)", section=".maps",
                                 offset=sec.offset + offset)
            if var.kind != B.VAR:
                raise ParseError(f"map '{name}': unexpected BTF kind {var.kind_name}",
                                 section=".maps")
            if var.linkage != B.VAR_GLOBAL_ALLOCATED and self.L.static_maps == "refuse":
                link = {B.VAR_STATIC: "static", B.VAR_GLOBAL_EXTERN: "extern"}.get(
                    var.linkage, str(var.linkage))
                raise ParseError(f"map '{name}': {link} maps are not supported by libbpf",
                                 section=".maps")
            def_id = btf.skip_mods_and_typedefs(var.type)
            d = btf.type(def_id)
            if d.kind != B.STRUCT:
                raise ParseError(f"map '{name}': definition is a {d.kind_name}, not a struct",
                                 section=".maps")
            if d.size > size:
                raise ParseError(f"map '{name}': invalid definition size", section=".maps")
            spec = self._parse_btf_map_def(name, d, inner=False)
            self._add_map(spec, sec.index, offset)

    def _parse_btf_map_def(self, name: str, d: B.BtfType, *, inner: bool) -> MapSpec:
        """libbpf ``parse_btf_map_def``, strict mode."""
        btf = self.btf
        assert btf is not None
        f: dict[str, int] = {"type": 0, "key_size": 0, "value_size": 0, "max_entries": 0,
                             "map_flags": 0, "numa_node": 0, "map_extra": 0, "pinning": 0}
        key_type = value_type = None
        inner_spec: MapSpec | None = None

        L = self.L
        cilium = L.is_cilium   # once: a property, read for every member of every map
        who = f"cilium/ebpf {L.release}: " if cilium else ""

        def err(what: str) -> ParseError:
            return ParseError(f"{who}map '{name}': {what}", section=".maps")

        def int_field(m: B.Member) -> int:
            # __uint(name, N) is `int (*name)[N]`: a pointer to an array of N elements
            n = btf.ptr_array_nelems(m.type)
            if n is not None:
                return n
            t = btf.skip_mods_and_typedefs(m.type)
            if btf.kind(t) != B.PTR:
                raise err(f"attribute '{m.name}': expected PTR, got {B.KIND_NAMES[btf.kind(t)]}")
            arr = btf.ref(t)
            if btf.kind(arr) != B.ARRAY:
                raise err(f"attribute '{m.name}': expected ARRAY, got "
                          f"{B.KIND_NAMES[btf.kind(arr)]}")
            return btf.array_info(arr)[2]

        def long_field(m: B.Member) -> int:
            if btf.kind(btf.skip_mods_and_typedefs(m.type)) == B.PTR:
                return int_field(m)
            t = btf.type(btf.skip_mods_and_typedefs(m.type))
            if t.kind == B.PTR:
                return int_field(m)
            if t.kind not in (B.ENUM, B.ENUM64):
                raise err(f"attribute '{m.name}': expected ENUM or ENUM64, got {t.kind_name}")
            if len(t.enum_values) != 1:
                raise err(f"attribute '{m.name}': invalid __ulong")
            return t.enum_values[0].value & 0xFFFFFFFFFFFFFFFF

        def sized(m: B.Member, what: str) -> tuple[int, str]:
            if btf.kind(m.type) != B.PTR:
                raise err(f"{what} spec is not PTR: {B.KIND_NAMES[btf.kind(m.type)]}")
            target = btf.ref(m.type)
            return btf.resolve_size(target), btf.type_name(target)

        members = d.members
        given: set[str] = set()
        for i, m in enumerate(members):
            n = m.name
            if cilium and n not in L.btf_map_fields:
                raise err(f"unrecognized field {n} in BTF map definition")
            if cilium and n in ("key", "value", "key_size", "value_size"):
                base = n.replace("_size", "")
                if base in given or f"{base}_size" in given:
                    raise err(f"both {base} and {base}_size given")
                given.add(n)
            if n in ("type", "max_entries", "map_flags", "numa_node", "pinning"):
                f[n] = int_field(m) if not cilium else long_field(m)
                if n == "pinning" and inner:
                    raise err("inner map definitions can't be pinned")
                if n == "pinning" and L.pin_values is not None and f[n] not in L.pin_values:
                    raise err(f"invalid pinning value {f[n]}")
            elif n in ("key_size", "value_size"):
                v = int_field(m) if not cilium else long_field(m)
                if f[n] and f[n] != v:
                    raise err(f"conflicting {n.replace('_', ' ')} {f[n]} != {v}")
                f[n] = v
            elif n in ("key", "value"):
                v, tname = sized(m, n)
                slot = f"{n}_size"
                if f[slot] and f[slot] != v:
                    raise err(f"conflicting {n} size {f[slot]} != {v}")
                f[slot] = v
                if n == "key":
                    key_type = tname
                else:
                    value_type = tname
            elif n == "values":
                mt = f["type"]
                if inner:
                    raise err("multi-level inner maps not supported")
                if i != len(members) - 1:
                    raise err("'values' member should be last")
                if mt not in _MAP_IN_MAP and mt != MapType.PROG_ARRAY:
                    raise err("'values' needs a map-in-map or a prog array")
                if f["value_size"] and f["value_size"] != 4:
                    raise err(f"conflicting value size {f['value_size']} != 4")
                f["value_size"] = 4
                t = btf.type(m.type)
                if t.kind != B.ARRAY or t.array[2]:  # type: ignore[index]
                    raise err("'values' spec is not a zero-sized array")
                t = btf.type(btf.skip_mods_and_typedefs(t.array[0]))  # type: ignore[index]
                if t.kind != B.PTR:
                    raise err(f"'values' element is a {t.kind_name}, not a pointer")
                t = btf.type(btf.skip_mods_and_typedefs(t.type))
                if mt == MapType.PROG_ARRAY:
                    if t.kind != B.FUNC_PROTO:
                        raise err(f"prog-array value def is a {t.kind_name}")
                    continue
                if t.kind != B.STRUCT:
                    raise err(f"map-in-map inner def is a {t.kind_name}")
                inner_spec = self._parse_btf_map_def(f"{name}{L.inner_suffix}", t, inner=True)
            elif n == "map_extra":
                f["map_extra"] = long_field(m)
            else:
                raise err(f"unknown field '{n}'")
        if f["type"] == 0:
            raise err("map type isn't specified")
        max_entries = f["max_entries"]
        notes: list[str] = []
        refused = None
        if cilium:
            if value_type is not None and f["type"] in L.no_value_size:
                # types.go canHaveValueSize; elf_reader.go mapSpecFromBTF drops the size
                if f["value_size"]:
                    notes.append(f"value type {value_type} kept for BTF only: cilium/ebpf "
                                 f"drops the value size ({f['value_size']}) of a "
                                 f"{map_type_name(f['type'])}")
                f["value_size"] = 0
            if L.half_typed_btf_refused and f["type"] not in _MAP_IN_MAP:
                if key_type is not None and value_type is None:
                    refused = (f"EINVAL: cilium/ebpf {L.release} passes a BTF key type without "
                               "a value type, which the kernel refuses, and does not retry "
                               "without BTF")
                elif (key_type is None and value_type is not None and f["key_size"]
                      and f["type"] not in MAP_CHECK_BTF_TYPES):
                    refused = (f"EINVAL: cilium/ebpf {L.release} passes a BTF value type with "
                               f"key type id 0, which {map_type_name(f['type'])} maps refuse "
                               "(no map_check_btf), and does not retry without BTF")
            if f["pinning"] not in (0, 1):
                notes.append(f"pinning {f['pinning']} is no cilium/ebpf PinType: NewCollection "
                             "refuses it unless the agent resets MapSpec.Pinning (as agents "
                             "that pin maps themselves do); counted as created unpinned")
            elif f["pinning"] == 1 and not inner:
                notes.append("pinning by name: cilium/ebpf pins it under "
                             "CollectionOptions.Maps.PinPath, or reuses a compatible pinned map")
        if f["type"] in _RINGBUFS and L.rounds_ringbuf:
            adjusted = adjust_ringbuf_size(max_entries)
            if adjusted != max_entries:
                notes.append(f"declared size {max_entries}; libbpf rounds ring buffers up to a "
                             f"power-of-2 multiple of the page size: {adjusted} "
                             f"(with {PAGE_SIZE}-byte pages)")
                max_entries = adjusted
        spec = MapSpec(sanitize_name(name) if cilium else name, f["type"], f["key_size"],
                       f["value_size"], max_entries,
                       f["map_flags"], f["map_extra"], f["numa_node"], f["pinning"],
                       kind=KIND_BTF, section=".maps", inner=inner_spec,
                       key_type=key_type, value_type=value_type, notes=tuple(notes),
                       refused=refused)
        return self._load_time(spec)

    def _load_time(self, spec: MapSpec) -> MapSpec:
        """Mark what the loader fills in at load time instead of guessing it here."""
        if self.L.is_cilium:
            return self._load_time_cilium(spec)
        notes = list(spec.notes)
        set_at_load = False
        if spec.max_entries == 0 and spec.type not in _ZERO_ENTRIES_OK:
            set_at_load = True
            if spec.type == MapType.PERF_EVENT_ARRAY:
                notes.append("max_entries 0: libbpf uses the number of possible CPUs at load")
            else:
                notes.append("max_entries 0: the loader must set it before load "
                             "(bpf_map__set_max_entries), or the kernel rejects the map")
        if not notes and not set_at_load:
            return spec
        return replace(spec, max_entries_set_at_load=set_at_load, notes=tuple(notes))

    def _load_time_cilium(self, spec: MapSpec) -> MapSpec:
        """map.go ``fixupMagicFields`` (current) / ``createMap`` (0.9.1): a perf event
        array gets key and value size 4 (0 or 4 allowed) and max_entries the possible CPUs
        when 0 or larger (0.9.1 clamps the larger ones in ``clampPerfEventArraySize`` at
        parse); current also clamps a CPUMAP's max_entries; a map-in-map's value size is 4."""
        L = self.L
        notes = list(spec.notes)
        changes: dict = {}
        t = spec.type
        if t == MapType.PERF_EVENT_ARRAY:
            if spec.key_size not in (0, 4) or spec.value_size not in (0, 4):
                changes["refused"] = spec.refused or (
                    "cilium/ebpf: KeySize and ValueSize must be zero or four for a perf event "
                    "array")
            else:
                if (spec.key_size, spec.value_size) != (4, 4):
                    notes.append(f"key/value size {spec.key_size}/{spec.value_size}: "
                                 "cilium/ebpf sets both to 4")
                changes.update(key_size=4, value_size=4)
            changes["clamp_to_cpus"] = True
            notes.append("max_entries: cilium/ebpf uses the number of possible CPUs when it is "
                         "0 or larger")
        elif t == MapType.CPUMAP and L.cpumap_clamp:
            changes["clamp_to_cpus"] = True
            notes.append("max_entries: cilium/ebpf uses the number of possible CPUs when it is "
                         "0 or larger")
        elif t in _MAP_IN_MAP and spec.value_size in (0, 4):
            changes["value_size"] = 4
        if spec.max_entries == 0 and t not in _ZERO_ENTRIES_OK:
            changes["max_entries_set_at_load"] = True
            if not changes.get("clamp_to_cpus"):
                notes.append("max_entries 0: the agent must set MapSpec.MaxEntries before "
                             "load, or the kernel rejects the map")
        if not changes and notes == list(spec.notes):
            return spec
        return replace(spec, notes=tuple(notes), **changes)

    def _datasec_mmapable(self, sec_name: str) -> tuple[bool, bool | None]:
        """libbpf ``map_is_mmapable``: a DATASEC with at least one non-static variable."""
        dsvars = self._datasec(sec_name)
        if dsvars is None:
            return False, None
        return any(linkage != B.VAR_STATIC for _v, _o, _s, linkage in dsvars), True

    def _data_map(self, real_name: str, size: int, rodata: bool) -> MapSpec:
        flags = int(MapFlag.RDONLY_PROG) if rodata else 0
        mmapable, datasec = self._datasec_mmapable(real_name)
        if mmapable:
            flags |= int(MapFlag.MMAPABLE)
        kernel_name = internal_map_name(self.obj_name, real_name)
        # libbpf's map_uses_real_name(): custom .data.* / .rodata.* maps are called by their
        # section name; the kernel gets the internal (15-character) name.
        custom = real_name.startswith((".data.", ".rodata."))
        return MapSpec(real_name if custom else kernel_name, int(MapType.ARRAY), 4,
                       size, 1, flags, kind=KIND_DATA, section=real_name,
                       value_type=f"DATASEC {real_name}" if datasec is not None else None,
                       kernel_name=kernel_name)

    def _data_maps(self) -> None:
        if self.L.is_cilium:
            return self._data_maps_cilium()
        for sec, what in sorted(self.data_secs, key=lambda x: x[0].index):
            if sec.size == 0:
                continue
            self._add_map(self._data_map(sec.name, sec.size, what == "rodata"), sec.index, 0)

    def _data_maps_cilium(self) -> None:
        """elf_reader.go ``loadDataSections``: one single-element ARRAY per data section,
        named after the section (sanitized), key size 4, the section's size as value size,
        BPF_F_RDONLY_PROG (and frozen after it is filled) for .rodata*. 0.9.1 keeps only
        sections that relocations refer to; current also keeps those with symbols. Current
        ``collectionLoader.loadMap`` adds BPF_F_MMAPABLE to every data section on kernels that
        have mmapable arrays (5.5+); 0.9.1 never does."""
        L = self.L
        named = {}
        for sym in self.syms:
            if sym.name and sym.type in (STT_NOTYPE, STT_OBJECT):
                named.setdefault(sym.shndx, 0)
                named[sym.shndx] += 1
        for sec, what in sorted(self.data_secs, key=lambda x: x[0].index):
            refs = self.references.get(sec.index, 0)
            if refs == 0 and (L.data_kept == "referenced" or not named.get(sec.index)):
                continue
            if sec.type not in (SHT_PROGBITS, SHT_NOBITS):
                raise ParseError(f"cilium/ebpf: data section {sec.name}: unknown section type "
                                 f"{sec.type}", section=sec.name)
            flags = int(MapFlag.RDONLY_PROG) if what == "rodata" else 0
            notes = []
            if L.data_mmapable == "always":
                flags |= int(MapFlag.MMAPABLE)
                notes.append("BPF_F_MMAPABLE: cilium/ebpf adds it to data sections at load on "
                             "kernels with mmapable arrays (5.5+)")
            if what == "rodata":
                notes.append("frozen after it is filled (BPF_MAP_FREEZE)")
            name = sanitize_name(sec.name)
            ds = self.btf.datasec(sec.name) if self.btf is not None else None
            spec = MapSpec(name, int(MapType.ARRAY), 4, sec.size, 1, flags, kind=KIND_DATA,
                           section=sec.name,
                           value_type=f"DATASEC {sec.name}" if ds is not None else None,
                           notes=tuple(notes))
            self._add_map(spec, sec.index, 0)

    def _kconfig_map(self) -> None:
        """``.kconfig`` externs become one read-only array (libbpf ``init_kconfig_map``)."""
        btf = self.btf
        if btf is None:
            return
        ds = btf.datasec(".kconfig")
        if ds is None:
            return
        if self.L.kconfig == "per_program":
            return self._kconfig_map_cilium(ds)
        extern_names = {s.name for s in self.syms
                        if s.shndx == SHN_UNDEF and s.bind in (STB_GLOBAL, STB_WEAK)
                        and s.type == STT_NOTYPE and s.name}
        exts = []
        for vi in btf.type(ds).secinfos:
            v = btf.type(vi.type)
            if v.kind != B.VAR or v.name not in extern_names:
                continue
            size = btf.resolve_size(v.type)
            if size <= 0:
                raise ParseError(f"extern (kconfig) '{v.name}': size {size}", section=".kconfig")
            exts.append((-btf.align_of(v.type), size, v.name))
        if not exts:
            return
        exts.sort()
        off = 0
        for neg_align, size, _name in exts:
            align = -neg_align
            off = (off + align - 1) // align * align + size
        spec = self._data_map(".kconfig", off, rodata=True)
        self._add_map(spec, self.elf.symtab.index, 0)  # type: ignore[union-attr]

    def _kconfig_map_cilium(self, ds: int) -> None:
        """elf_reader.go ``loadKconfigSection`` with btf.go ``fixupDatasecLayout``: the
        .kconfig DATASEC laid out in declaration order, each variable at its alignment; an
        ARRAY named ".kconfig", key size 4, BPF_F_RDONLY_PROG, frozen. linker.go
        ``resolveKconfigReferences`` creates it once for every program that reads it."""
        btf = self.btf
        assert btf is not None
        off = 0
        for vi in btf.type(ds).secinfos:
            v = btf.type(vi.type)
            if v.kind != B.VAR:
                raise ParseError(f"cilium/ebpf: .kconfig member [{vi.type}] is a "
                                 f"{v.kind_name}", section=".kconfig")
            align = btf.align_of(v.type)
            off = (off + align - 1) // align * align + btf.resolve_size(v.type)
        if off == 0:
            raise ParseError("cilium/ebpf: zero-length .kconfig", section=".kconfig")
        spec = MapSpec(".kconfig", int(MapType.ARRAY), 4, off, 1, int(MapFlag.RDONLY_PROG),
                       kind=KIND_DATA, section=".kconfig", value_type="DATASEC .kconfig",
                       notes=("frozen after it is filled (BPF_MAP_FREEZE)",))
        self._add_map(spec, self.elf.symtab.index, 0)  # type: ignore[union-attr]

    def _kconfig_index(self) -> int | None:
        """The index of the .kconfig map in ``self.maps``, None without one."""
        return next((i for i, m in enumerate(self.maps)
                     if m.kind == KIND_DATA and m.section == ".kconfig"), None)

    def _kconfig_per_program(self, programs: tuple[ProgramSpec, ...]) -> None:
        """One .kconfig map per program that reads a kconfig extern, none when no program
        does (cilium/ebpf creates it while loading each such program)."""
        i = self._kconfig_index()
        if i is None:
            return
        readers = [p.name for p in programs if ".kconfig" in p.maps]
        if not readers:
            del self.maps[i]
            del self.map_origin[i]
            return
        m = self.maps[i]
        self.maps[i] = replace(m, instances=len(readers), notes=m.notes + (
            f"created once per program that reads it ({', '.join(readers)}): "
            f"{len(readers)} cop{'y' if len(readers) == 1 else 'ies'}",))

    def _struct_ops_maps(self) -> None:
        """Each variable of ``SEC(".struct_ops[.link]")`` is a STRUCT_OPS map."""
        btf = self.btf
        for sec in sorted(self.struct_ops_secs, key=lambda s: s.index):
            if btf is None:
                raise ParseError("struct_ops maps need BTF", section=sec.name)
            dsvars = self._datasec(sec.name)
            if dsvars is None:
                raise ParseError(f"DATASEC {sec.name} not found in BTF", section=sec.name)
            name = sec.name.lstrip("?")
            for var, offset, _size, _linkage in dsvars:
                t = btf.type(btf.skip_mods_and_typedefs(var.type))
                if not t.name:
                    raise ParseError("struct_ops: anonymous types are not supported",
                                     section=sec.name)
                if t.kind != B.STRUCT:
                    raise ParseError(f"struct_ops: {t.name} is not a struct", section=sec.name)
                if offset + t.size > sec.size:
                    raise ParseError(f"struct_ops: {var.name} is beyond the end of {sec.name}",
                                     section=sec.name)
                flags = int(MapFlag.LINK) if name == ".struct_ops.link" else 0
                spec = MapSpec(var.name, int(MapType.STRUCT_OPS), 4, t.size, 1, flags,
                               kind=KIND_STRUCT_OPS, section=sec.name, value_size_set_at_load=True,
                               autocreate=not sec.name.startswith("?"),
                               value_type=f"struct {t.name}",
                               notes=(f"value_size is the kernel's struct bpf_struct_ops_{t.name}, "
                                      f"known at load; {t.size} is the object's struct {t.name}",))
                self._add_map(spec, sec.index, offset)

    # -- programs and references (parse/programs.py) --------------------------------------
    def _map_symbols(self) -> MapSymbols:
        """Where the maps are, for resolving the programs' relocations."""
        map_at: dict[tuple[int, int], int] = {o: i for i, o in enumerate(self.map_origin)}
        data_map: dict[int, int] = {}
        for i, m in enumerate(self.maps):
            if m.kind == KIND_DATA and m.section != ".kconfig":
                data_map[self.map_origin[i][0]] = i
        kconfig_map = next((i for i, m in enumerate(self.maps)
                            if m.kind == KIND_DATA and m.section == ".kconfig"), None)
        arena_map = next((i for i, m in enumerate(self.maps) if m.type == MapType.ARENA), None)
        kconfig_names: frozenset[str] = frozenset()
        if kconfig_map is not None and self.btf is not None:
            ds = self.btf.datasec(".kconfig")
            kconfig_names = frozenset(self.btf.type(v.type).name
                                      for v in self.btf.type(ds).secinfos)  # type: ignore[arg-type]
        return MapSymbols(map_at, data_map, kconfig_map, kconfig_names, arena_map,
                          self.maps_idx, self.legacy_idx, self.arena_idx)

    def _programs(self) -> tuple[ProgramSpec, ...]:
        programs, self.reloc_targets = read_programs(
            self.elf, self.syms, self.exec_secs, self.text_idx, self.functions,
            self._map_symbols(), [m.name for m in self.maps])
        self.programs = programs
        return programs

    def _check_program_relocations(self) -> None:
        """Without the program list: refuse the object exactly when :meth:`_programs` would.
        The bulk check proves most objects clean without decoding; anything it cannot
        prove is left to the full read, whose error (or none) is the answer."""
        where = self._map_symbols()
        if not program_relocations_ok(self.elf, self.syms, self.exec_secs, where):
            self._programs()

    def _struct_ops_attach(self, programs: tuple[ProgramSpec, ...] | None
                           ) -> tuple[ProgramSpec, ...] | None:
        """``.rel.struct_ops``: each function pointer member names a program; libbpf (1.1, at
        open) sets that program's expected_attach_type to the member's index. Without the
        programs (None) the relocations are still checked: they can refuse the object."""
        if not self.struct_ops_secs or self.btf is None:
            return programs
        by_sec_off = {}
        for p in programs or ():
            sec = self.elf.section(p.section)
            sym = next((f for f in self.funcs.get(sec.index, []) if f.name == p.name), None) \
                if sec is not None else None
            if sym is not None:
                by_sec_off[(sec.index, sym.value)] = p.name  # type: ignore[union-attr]
        member_idx: dict[str, int] = {}
        for sec in self.struct_ops_secs:
            rsec = next((s for s in self.elf.relocation_sections()
                         if s.type == SHT_REL and s.info == sec.index), None)
            if rsec is None:
                continue
            spans = [(off, var) for var, off, _s, _l in self._datasec(sec.name) or ()]
            for rel in self.elf.relocations(rsec):
                owner = None
                for off, var in spans:
                    if off <= rel.offset:
                        owner = (off, var)
                if owner is None:
                    raise ParseError(f"struct_ops relocation at {rel.offset} matches no map",
                                     section=rsec.name)
                t = self.btf.type(self.btf.skip_mods_and_typedefs(owner[1].type))
                moff = (rel.offset - owner[0]) * 8
                idx = next((i for i, m in enumerate(t.members) if m.bit_offset == moff), None)
                if idx is None:
                    raise ParseError(f"struct_ops relocation: no member of {t.name} at byte "
                                     f"{moff // 8}", section=rsec.name)
                sym = self.elf.symbol(rel.symbol)
                name = by_sec_off.get((sym.shndx, sym.value))
                if name is not None:
                    member_idx.setdefault(name, idx)
        if not member_idx or programs is None:
            return programs
        return tuple(replace(p, expected_attach_type=member_idx[p.name])
                     if p.name in member_idx and p.type == ProgType.STRUCT_OPS else p for p in programs)

    def _map_init_slots(self) -> None:
        """``.rel.maps``: initial slots of map-in-map and prog array maps."""
        if self.maps_idx is None or self.btf is None:
            return
        rsec = next((s for s in self.elf.relocation_sections()
                     if s.type == SHT_REL and s.info == self.maps_idx), None)
        if rsec is None:
            return
        spans = [(off, off + size, var) for var, off, size, _l in self._datasec(".maps") or ()]
        index_of = {o: i for i, o in enumerate(self.map_origin)}
        slots: dict[int, dict[int, str]] = {}
        # the entry points: read_programs makes one program of every function outside .text
        prog_names = {(sec.name, f.name) for sec in self.exec_secs if sec.index != self.text_idx
                      for f in self.funcs.get(sec.index, ())}
        for rel in self.elf.relocations(rsec):
            sym = self.elf.symbol(rel.symbol)
            owner = next((s for s in spans if s[0] <= rel.offset and rel.offset + 8 <= s[1]), None)
            if owner is None:
                raise ParseError(f".maps relocation at {rel.offset} is outside every map",
                                 section=rsec.name)
            mi = index_of[(self.maps_idx, owner[0])]
            m = self.maps[mi]
            d = self.btf.type(self.btf.skip_mods_and_typedefs(owner[2].type))
            last = d.members[-1] if d.members else None
            if last is None or last.name != "values":
                raise ParseError(f"map '{m.name}': relocation but no 'values' member",
                                 section=rsec.name)
            moff = rel.offset - owner[0] - last.bit_offset // 8
            if moff < 0 or moff % 8:
                raise ParseError(f"map '{m.name}': misaligned initial slot", section=rsec.name)
            if m.type in _MAP_IN_MAP:
                if sym.shndx != self.maps_idx:
                    raise ParseError(f"map '{m.name}': slot target '{sym.name}' isn't a "
                                     "BTF-defined map", section=rsec.name)
                if m.type == MapType.HASH_OF_MAPS and m.key_size != 4:
                    raise ParseError(f"hash-of-maps '{m.name}' should have key size 4",
                                     section=rsec.name)
            elif m.type == MapType.PROG_ARRAY:
                sec_name = self.elf.sections[sym.shndx].name if sym.shndx < len(self.elf.sections) else ""
                if (sec_name, sym.name) not in prog_names:
                    raise ParseError(f"map '{m.name}': '{sym.name}' isn't an entry-point program",
                                     section=rsec.name)
            slots.setdefault(mi, {})[moff // 8] = sym.name
        for mi, s in slots.items():
            self.maps[mi] = replace(self.maps[mi], init_slots=tuple(sorted(s.items())))
