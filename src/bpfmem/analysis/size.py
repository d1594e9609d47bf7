"""Where the bytes of a binary go: every byte of the file labelled once (bloaty's rule), so the
parts add up to the file size; memory (what the loader maps: SHF_ALLOC sections, ``.bss``
included) counted apart from the file (debug info and symbol tables are file only).

Labels come, in order of precedence, from the Go pclntab (functions, their table records and
names), the ELF symbol table, and finally the section itself (a named bucket per section).
Pure: it takes a parsed :class:`ElfImage` (and optionally its pclntab and build info).
"""

from __future__ import annotations

import bisect
import fnmatch
from dataclasses import dataclass, field
from typing import Callable, Iterable, NamedTuple

from ..parse.elfimage import SHF_ALLOC, SHF_EXECINSTR, STT_FILE, STT_SECTION, ElfImage
from ..parse.gobin import (C_CODE, TYPES, BuildInfo, Module, Pclntab, module_of, package_of)

GROUPS = ("package", "module", "section", "symbol")
HEADERS = "(ELF headers)"
PADDING = "(padding)"
PCLNTAB = "(Go pclntab)"
DEBUG = "(debug info)"
SYMTAB = "(symbol table)"
BUILDINFO = "(Go build info)"


class Piece(NamedTuple):
    """A run of bytes with one label: ``file`` bytes in the file, ``vm`` bytes in memory.
    (Stored as plain tuples of these five fields: a large binary has 10^5 of them.)"""
    section: str
    package: str
    symbol: str
    file: int
    vm: int


@dataclass(frozen=True, slots=True)
class SizeRow:
    name: str
    file: int
    vm: int
    module: str = ""


@dataclass(frozen=True)
class SizeReport:
    path: str
    file_size: int
    vm_size: int
    kind: str                          # "go" or "elf"
    stripped: bool
    pie: bool
    pieces: tuple[Piece, ...]
    go_version: str | None = None
    pclntab_layout: str | None = None
    pclntab_found_by: str | None = None
    functions: int = 0
    main_module: Module | None = None
    main_path: str = ""
    modules: tuple[Module, ...] = ()
    notes: tuple[str, ...] = ()
    _module_paths: tuple[str, ...] = field(default=(), repr=False)

    def module_of(self, package: str) -> str:
        main = self.main_module.path if self.main_module else (self.main_path or None)
        return module_of(package, list(self._module_paths), main)

    def group(self, by: str = "package") -> list[SizeRow]:
        """Rows by package|module|section|symbol, largest file size first."""
        if by not in GROUPS:
            raise ValueError(f"--by must be one of {', '.join(GROUPS)}, not {by}")
        acc: dict[str, list[int]] = {}
        mods: dict[str, str] = {}
        idx = {"package": 1, "module": 1, "section": 0, "symbol": 2}[by]
        for p in self.pieces:
            key = p[idx]
            if by == "module":
                m = mods.get(key)
                if m is None:
                    m = mods[key] = self.module_of(key)
                key = m
            a = acc.get(key)
            if a is None:
                acc[key] = [p[3], p[4]]
            else:
                a[0] += p[3]
                a[1] += p[4]
        rows = [SizeRow(k, v[0], v[1]) for k, v in acc.items()]
        if by == "package":
            rows = [SizeRow(r.name, r.file, r.vm, self.module_of(r.name)) for r in rows]
        rows.sort(key=lambda r: (-r.file, -r.vm, r.name))
        return rows

    def package_bytes(self) -> dict[str, int]:
        return {r.name: r.file for r in self.group("package")}


def _labels_in(start: int, end: int, layers: Iterable[list[tuple[int, int, str, str]]],
               default: tuple[str, str]) -> list[tuple[int, str, str]]:
    """Cover [start, end) with labelled runs: each layer fills only what earlier ones left;
    what no layer covers gets ``default``. Returns (size, package, symbol) runs."""
    gaps = [(start, end)] if end > start else []
    out: list[tuple[int, str, str]] = []
    add = out.append
    for layer in layers:
        if not gaps:
            break
        layer = sorted(layer)
        n = len(layer)
        new_gaps = []
        for gs, ge in gaps:
            cur = gs
            k = bisect.bisect_left(layer, (gs,))
            if k > 0 and layer[k - 1][1] > gs:
                k -= 1
            while k < n:
                s, e, pkg, sym = layer[k]
                k += 1
                if s >= ge:
                    break
                if e <= cur:
                    continue
                if s > cur:
                    new_gaps.append((cur, s))
                    cur = s
                if e > ge:
                    e = ge
                add((e - cur, pkg, sym))
                cur = e
            if cur < ge:
                new_gaps.append((cur, ge))
        gaps = new_gaps
    for gs, ge in gaps:
        add((ge - gs, default[0], default[1]))
    return out


def _section_default(name: str, is_go: bool, flags: int) -> tuple[str, str]:
    if name.startswith((".debug", ".zdebug")):
        return DEBUG, name
    if name in (".symtab", ".strtab", ".shstrtab"):
        return SYMTAB, name
    if name == ".go.buildinfo":
        return BUILDINFO, name
    if name in (".gopclntab", ".gosymtab"):
        return PCLNTAB, name
    if is_go and name in (".typelink", ".itablink"):
        return TYPES, name
    if is_go:
        return f"({name} unattributed)", name
    return f"({name})", name


def analyse_image(img: ElfImage, *, path: str, pcln: Pclntab | None = None,
                  buildinfo: BuildInfo | None = None,
                  demangle: Callable[[list[str]], list[str]] | None = None,
                  package_of_native: Callable[[str], str] | None = None) -> SizeReport:
    """Label every byte of ``img`` (see the module docstring)."""
    is_go = pcln is not None
    syms = img.symbols()
    stripped = not syms
    pkg_of_native = package_of_native or native_package
    names = [s.name for s in syms]
    if not is_go and demangle is not None and names:
        names = demangle(names)

    # symbols by address (functions and objects with a size), their package
    sym_ranges: list[tuple[int, int, str, str]] = []
    for s, name in zip(syms, names):
        if s.size <= 0 or s.type in (STT_SECTION, STT_FILE) or not s.name:
            continue
        pkg = package_of(name) if is_go else pkg_of_native(name)
        sym_ranges.append((s.value, s.value + s.size, pkg, name))
    sym_ranges.sort()
    if is_go and syms:
        sym_ranges += _go_markers(syms)
        sym_ranges.sort()

    func_ranges: list[tuple[int, int, str, str]] = []
    pcln_layers: list[list[tuple[int, int, str, str]]] = []
    if pcln is not None:
        cache: dict[str, str] = {}
        for name, a, b in zip(pcln.names, pcln.entries, pcln.ends):
            pkg = cache.get(name)
            if pkg is None:
                pkg = package_of(name)
                cache[name] = pkg
            func_ranges.append((a, b, pkg, name))
        # the table's own per-function parts (file offsets): names and _func records
        base = pcln.offset
        own = []
        for name, (no, nl), rec in zip(pcln.names, pcln.name_spans, pcln.records):
            pkg = cache[name]
            own.append((base + no, base + no + nl, pkg, name))
            if rec is not None:
                own.append((base + rec[0], base + rec[0] + rec[1], pkg, name))
        shared = [(base + p.offset, base + p.offset + p.size, PCLNTAB, f"pclntab {p.name}")
                  for p in pcln.parts if p.size > 0]
        pcln_layers = [own, shared]

    pieces: list[Piece] = []
    covered: list[tuple[int, int]] = []
    for sec in img.sections:
        if sec.index == 0 or sec.size == 0:
            continue
        alloc = bool(sec.flags & SHF_ALLOC) and sec.in_memory
        default = _section_default(sec.name, is_go, sec.flags)
        if sec.in_file:
            lo, hi = sec.offset, sec.offset + sec.size
            # clip against sections that already took these file bytes
            for cs, ce in covered:
                if cs <= lo < ce:
                    lo = ce
            if hi <= lo:
                continue
            covered.append((lo, hi))
            shift = sec.addr - sec.offset if alloc else None
        else:
            if not alloc:
                continue
            lo, hi, shift = sec.addr, sec.addr + sec.size, 0
        layers = []
        if shift is not None:
            # address-based sources, converted to this section's coordinates
            a_lo, a_hi = lo + shift, hi + shift
            if func_ranges and sec.flags & SHF_EXECINSTR:
                layers.append(_window(func_ranges, a_lo, a_hi, -shift))
            if sym_ranges:
                layers.append(_window(sym_ranges, a_lo, a_hi, -shift))
        if pcln_layers and sec.in_file and lo <= pcln.offset < hi:
            layers = [[r for r in lay if lo <= r[0] < hi] for lay in pcln_layers] + layers
        name, in_file = sec.name, sec.in_file
        add = pieces.append
        for size, pkg, sym in _labels_in(lo, hi, layers, default):
            add((name, pkg, sym, size if in_file else 0, size if alloc else 0))

    # what no section holds: headers, tables of headers, padding
    extra = [(0, img.ehsize, HEADERS, "ELF header"),
             (img.phdr_range[0], img.phdr_range[1], HEADERS, "program headers"),
             (img.shdr_range[0], img.shdr_range[1], HEADERS, "section headers")]
    covered.sort()
    gaps = []
    cur = 0
    for cs, ce in covered:
        if cs > cur:
            gaps.append((cur, cs))
        cur = max(cur, ce)
    if cur < img.file_size:
        gaps.append((cur, img.file_size))
    for gs, ge in gaps:
        for size, pkg, sym in _labels_in(gs, ge, [extra], (PADDING, "(between sections)")):
            pieces.append(("(none)", pkg, sym, size, 0))

    vm = sum(p[4] for p in pieces)
    notes = []
    if is_go and stripped:
        notes.append("stripped: functions come from the pclntab; data and type descriptors "
                     "stay in per-section buckets")
    deps = buildinfo.deps if buildinfo else ()
    mod_paths = tuple(m.path for m in deps)
    return SizeReport(
        path=path, file_size=img.file_size, vm_size=vm, kind="go" if is_go else "elf",
        stripped=stripped, pie=img.e_type == 3, pieces=tuple(pieces),
        go_version=buildinfo.go_version if buildinfo else None,
        pclntab_layout=pcln.layout if pcln else None,
        pclntab_found_by=pcln.found_by if pcln else None,
        functions=pcln.nfunc if pcln else sum(1 for s in syms if s.type == 2 and s.size),
        main_module=buildinfo.main if buildinfo else None,
        main_path=buildinfo.path if buildinfo else "",
        modules=deps, notes=tuple(notes), _module_paths=mod_paths)


#: Go's linker lists aggregates (all type descriptors, all strings, ...) as one zero-size
#: symbol at their start; they run to the next symbol
_MARKERS = {"type.*": TYPES, "type:*": TYPES, "go.string.*": "(Go strings)",
            "go:string.*": "(Go strings)", "go.func.*": "(Go func data)",
            "go:func.*": "(Go func data)", "runtime.gcbits.*": "(Go GC bitmaps)",
            "runtime.gcbits.": "(Go GC bitmaps)"}


def _go_markers(syms) -> list[tuple[int, int, str, str]]:
    addrs = sorted({s.value for s in syms if s.value and s.type not in (STT_FILE,)})
    out = []
    for s in syms:
        bucket = _MARKERS.get(s.name) if s.size == 0 else None
        if bucket is None:
            continue
        i = bisect.bisect_right(addrs, s.value)
        if i < len(addrs):
            out.append((s.value, addrs[i], bucket, s.name))
    return out


def _window(ranges: list[tuple[int, int, str, str]], lo: int, hi: int,
            delta: int) -> list[tuple[int, int, str, str]]:
    """The ranges (sorted by start) that overlap [lo, hi), shifted by ``delta``."""
    i = bisect.bisect_left(ranges, (lo,))
    # one before may still reach into the window
    if i > 0 and ranges[i - 1][1] > lo:
        i -= 1
    out = []
    for k in range(i, len(ranges)):
        s, e, pkg, sym = ranges[k]
        if s >= hi:
            break
        out.append((s + delta, e + delta, pkg, sym))
    return out


def native_package(name: str) -> str:
    """The namespace (C++) or crate (Rust) of a demangled name; C_CODE for plain C names."""
    depth = 0
    for i, ch in enumerate(name):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == ":" and depth == 0 and name.startswith("::", i):
            head = name[:i].strip()
            if head.startswith(("<", "_<")):
                break
            return head.split(" ")[-1] or C_CODE
        elif ch == " " and depth == 0 and i and name[i - 1] != ",":
            # "operator new(...)" / "void foo()" style: not a namespace
            continue
    return C_CODE


# --- diff -------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class SizeDelta:
    name: str
    old: int
    new: int

    @property
    def delta(self) -> int:
        return self.new - self.old


def diff_reports(old: SizeReport, new: SizeReport, by: str = "package") -> list[SizeDelta]:
    """What grew and shrank between two builds, by ``by``, largest change first."""
    o = {r.name: r.file for r in old.group(by)}
    n = {r.name: r.file for r in new.group(by)}
    rows = [SizeDelta(k, o.get(k, 0), n.get(k, 0)) for k in set(o) | set(n)]
    rows.sort(key=lambda d: (-abs(d.delta), -d.new, d.name))
    return rows


# --- gate -------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class BinaryVerdict:
    path: str
    what: str          # "file" or a module glob
    size: int
    limit: int

    @property
    def ok(self) -> bool:
        return self.size <= self.limit


def judge_binary(rep: SizeReport, *, max_size: int | None,
                 module_limits: dict[str, int]) -> list[BinaryVerdict]:
    """The file-size limit and each module glob's limit (sum of matching modules) of one
    binary."""
    out = []
    if max_size is not None:
        out.append(BinaryVerdict(rep.path, "file", rep.file_size, max_size))
    if module_limits:
        mods = rep.group("module")
        for glob, limit in module_limits.items():
            size = sum(r.file for r in mods if fnmatch.fnmatchcase(r.name, glob))
            out.append(BinaryVerdict(rep.path, glob, size, limit))
    return out
