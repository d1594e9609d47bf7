"""Where the bytes of a binary go: every byte of the file labelled once (bloaty's rule), so the
parts add up to the file size; memory (what the loader maps: SHF_ALLOC sections, ``.bss``
included) counted apart from the file (debug info and symbol tables are file only).

Labels come, in order of precedence, from the Go pclntab (functions, their table records and
names), the ELF symbol table, and finally the section itself (a named bucket per section).
Pure: it takes a parsed :class:`ElfImage` (and optionally its pclntab and build info).
"""

from __future__ import annotations

import bisect
import functools
import operator
import re
from collections import Counter
import fnmatch
from itertools import compress, islice, repeat

from ..errors import ParseError
from ..values import Record, dataclass, field, items
from ..units import format_size
from ..parse.elf import (PT_LOAD, SHF_ALLOC, SHF_EXECINSTR, SHF_WRITE,
                         SHT_NOBITS, SHT_PROGBITS, STT_FILE, STT_FUNC, STT_SECTION, ElfImage,
                         ImageSymbols, Section)
from ..parse.gobin import (C_CODE, TYPES, BuildInfo, Module, Pclntab, guess_module,
                           module_of, moduledata_words, package_of)
from ..parse.gosym import packages_of
from ..parse import dwarf
from ..parse.x86 import rip_relative_refs
from ..parse.gotypes import type_ranges as _type_ranges

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Callable, Iterable

    from .imports import WhyLinked

_START = operator.itemgetter(0)
_END = operator.itemgetter(1)
#: hosts whose module paths are host/owner/repo: an internal/ there is a repository's
_CODE_HOSTS = frozenset({"github.com", "gitlab.com", "bitbucket.org", "golang.org",
                         "gitea.com", "git.sr.ht", "codeberg.org"})


def _gopath_root(package: str, roots: frozenset[str]) -> str | None:
    v = package.find("/vendor/")
    p = package[v + 8:] if v > 0 else package
    host = p.split("/", 1)[0]
    return host if host in roots else None
GROUPS = ("package", "module", "section", "symbol")
HEADERS = "(ELF headers)"
PADDING = "(padding)"
PCLNTAB = "(Go pclntab)"
DEBUG = "(debug info)"
SYMTAB = "(symbol table)"
BUILDINFO = "(Go build info)"


class Piece(Record):
    """A run of bytes with one label: ``file`` bytes in the file, ``vm`` bytes in memory.
    (Stored as plain tuples of these five fields: a large binary has 10^5 of them.)"""
    __slots__ = ()
    _fields = ("section", "package", "symbol", "file", "vm")
    section, package, symbol, file, vm = items(_fields)

    def __new__(cls, section: str, package: str, symbol: str, file: int, vm: int):
        return tuple.__new__(cls, (section, package, symbol, file, vm))


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
    #: (what, bytes) of memory the runtime maps but never touches in the usual run (it is in
    #: vm_size: the mapping is there, its pages are not)
    untouched: tuple[tuple[str, int], ...] = ()
    #: the build info's "build" settings (-ldflags, -tags, CGO_ENABLED, GOARCH, vcs.*, ...)
    build_settings: tuple[tuple[str, str], ...] = ()
    _module_paths: tuple[str, ...] = field(default=(), repr=False)

    @property
    def has_dwarf(self) -> bool:
        return any(p[0].startswith((".debug_", ".zdebug_")) for p in self.pieces)

    @property
    def vm_untouched(self) -> int:
        return sum(n for _w, n in self.untouched)

    def module_of(self, package: str) -> str:
        if self.kind != "go":
            return package
        main = self.main_module.path if self.main_module else (self.main_path or None)
        if not self._module_paths:
            root = _gopath_root(package, self._gopath_roots)
            if root:
                return root
            if main and not self.main_module and "." in main.split("/", 1)[0]:
                # a GOPATH build names no main module: its main package
                # (github.com/docker/docker/cmd/dockerd) is in its repository's
                main = guess_module(main.split("/"))
        return module_of(package, list(self._module_paths), main)

    @functools.cached_property
    def _gopath_roots(self) -> frozenset[str]:
        """A GOPATH build (no modules in its build info): the hosts whose packages include
        HOST/internal/...: a package tree with an internal directory at its top is one
        module (go.opencensus.io, gotest.tools), not one per second path element."""
        roots = set()
        for p in {p[1] for p in self.pieces}:
            v = p.find("/vendor/")
            p = p[v + 8:] if v > 0 else p
            parts = p.split("/")
            if len(parts) >= 2 and parts[1] == "internal" and "." in parts[0] and \
                    parts[0] not in _CODE_HOSTS:
                roots.add(parts[0])
        return frozenset(roots)

    def group(self, by: str = "package") -> list[SizeRow]:
        """Rows by package|module|section|symbol, largest file size first."""
        if by not in GROUPS:
            raise ValueError(f"no grouping by {by!r}: one of {', '.join(GROUPS)}")
        idx = {"package": 1, "module": 1, "section": 0, "symbol": 2}[by]
        fsum: dict[str, int] = {}
        vsum: dict[str, int] = {}
        fget, vget = fsum.get, vsum.get
        for p in self.pieces:
            key = p[idx]
            fsum[key] = fget(key, 0) + p[3]
            vsum[key] = vget(key, 0) + p[4]
        if by == "module":
            f2: dict[str, int] = {}
            v2: dict[str, int] = {}
            for key in fsum:
                m = self.module_of(key)
                f2[m] = f2.get(m, 0) + fsum[key]
                v2[m] = v2.get(m, 0) + vsum[key]
            fsum, vsum = f2, v2
        acc = {k: (fsum[k], vsum[k]) for k in fsum}
        rows = [SizeRow(k, v[0], v[1]) for k, v in acc.items()]
        if by == "package":
            rows = [SizeRow(r.name, r.file, r.vm, self.module_of(r.name)) for r in rows]
        rows.sort(key=lambda r: (-r.file, -r.vm, r.name))
        return rows

    def package_bytes(self) -> dict[str, int]:
        return {r.name: r.file for r in self.group("package")}


def _labels_in(start: int, end: int, layers: Iterable[list[tuple[int, int, str, str]]],
               default: tuple[str, str], runs: dict[tuple[str, str], int]) -> None:
    """Cover [start, end) with labelled runs: each layer (sorted by start) fills only what
    earlier ones left; what no layer covers gets ``default``. Adds each run's size to
    ``runs`` by (package, symbol)."""
    gaps = [(start, end)] if end > start else []
    get = runs.get
    for layer in layers:
        if not gaps:
            break
        n = len(layer)
        new_gaps = []
        first = 0           # the first range starting at or after the gap (gaps are sorted)
        for gs, ge in gaps:
            cur = gs
            while first < n and layer[first][0] < gs:
                first += 1
            k = first
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
                key = (pkg, sym)
                runs[key] = get(key, 0) + e - cur
                cur = e
            if cur < ge:
                new_gaps.append((cur, ge))
        gaps = new_gaps
    for gs, ge in gaps:
        runs[default] = get(default, 0) + ge - gs


def _section_default(name: str, is_go: bool, flags: int) -> tuple[str, str]:
    if name.startswith((".debug", ".zdebug")):
        return DEBUG, name
    if name in (".symtab", ".strtab", ".shstrtab"):
        return SYMTAB, name
    if name in (".dynsym", ".dynstr", ".gnu.hash", ".hash", ".gnu.version", ".gnu.version_r"):
        return "(dynamic symbols)", name
    if name.startswith((".rela", ".rel.")):
        return "(relocations)", name
    if name == ".go.buildinfo":
        return BUILDINFO, name
    if name.endswith((".gopclntab", ".gosymtab")):
        return PCLNTAB, name
    if is_go and name.endswith((".typelink", ".itablink")):
        return TYPES, name
    if is_go:
        return f"({name} unattributed)", name
    return f"({name})", name


def limit_for(path: str, max_size: int | None, file_limits: dict[str, int]) -> int | None:
    """A binary's size limit: that of the last per-file glob matching its path or its file
    name, else ``max_size``."""
    limit = max_size
    name = path.rsplit("/", 1)[-1]
    for glob, lim in file_limits.items():
        if fnmatch.fnmatch(path, glob) or fnmatch.fnmatch(name, glob):
            limit = lim
    return limit


def analyse_image(img: ElfImage, *, path: str, pcln: Pclntab | None = None,
                  buildinfo: BuildInfo | None = None,
                  demangle: Callable[[list[str]], list[str]] | None = None,
                  package_of_native: Callable[[str], str] | None = None,
                  code_refs: dict[int, int] | None = None) -> SizeReport:
    """Label every byte of ``img`` (see the module docstring), parsed before: its pclntab
    and build info (a Go binary), and for a stripped x86-64 Go binary the references of its
    code to its data (``code_refs``: :func:`bpfmem.parse.x86.rip_relative_refs` over
    :func:`code_ref_window`; read from ``img`` when not given). Its symbols are those of
    .symtab, or of .dynsym when .symtab has none (stripped): taken from ``img`` (which keeps
    no copy) and let go once labelled."""
    is_go = pcln is not None
    has_symtab = img.symbol_count() > 0
    dynamic = not has_symtab and img.symbol_count(dynamic=True) > 0
    stripped = dynamic or not has_symtab
    pkg_of_native = package_of_native or native_package

    func_ranges: list[tuple[int, int, str, str]] = []
    pcln_pkgs: list[str] = []
    cache: dict[str, str] = {}
    if pcln is not None:
        pcln_pkgs = packages_of(pcln.names)
        func_ranges = list(zip(pcln.entries, pcln.ends, pcln_pkgs, pcln.names))
        cache = dict(zip(pcln.names, pcln_pkgs))

    # stripped Go: type descriptors and itabs to packages by the moduledata's links
    type_ranges: list[tuple[int, int, str, str]] = []
    if is_go and stripped and pcln is not None:
        type_ranges = sorted(go_type_ranges(img, pcln, pcln_pkgs) or (), key=_START)
    # the dynamic symbols of type descriptors have hashed names: their package is the
    # type's (below), they get no range of their own
    by_type = bool(dynamic and type_ranges)

    # symbols by address (functions and objects with a size), their package; in a Go
    # binary the pclntab already has the Go functions
    syms = img.image_symbols(dynamic)
    img.forget_symbols()
    sym_ranges: list[tuple[int, int, str, str]]
    names, values, sizes, types = syms.names, syms.values, syms.sizes, syms.types
    sym_pkgs: list[str | None] | None = None       # each symbol's package, once known
    if is_go:
        sym_ranges, sym_pkgs = _go_symbols(syms, cache, TYPES if by_type else None)
    else:
        sized = [k for k, (nm, size, typ) in enumerate(zip(names, sizes, types))
                 if size > 0 and typ != STT_SECTION and typ != STT_FILE and nm]
        raw = [names[k] for k in sized]
        demangled = demangle(raw) if demangle is not None and raw else raw
        sym_ranges = []
        for k, raw_name, name in zip(sized, raw, demangled):
            pkg = cache.get(name)
            if pkg is None:
                pkg = cache[name] = pkg_of_native(name)
            cache[raw_name] = pkg
            sym_ranges.append((values[k], values[k] + sizes[k], pkg, name))
        del sized, raw, demangled
    if is_go and syms and not dynamic:
        sym_ranges += _go_markers(syms)
    sym_ranges.sort(key=_START)
    if by_type:
        # the first of a name's symbols in a type's range says which package
        typed = list(compress(range(len(names)), map(operator.eq, sym_pkgs, repeat(TYPES))))
        # each symbol's type range (the last starting at or before it, if it holds it),
        # found by one walk over the symbols by address
        by_addr = sorted(typed, key=values.__getitem__)
        addrs = [values[k] for k in by_addr]
        cut = bisect.bisect_left(addrs, type_ranges[0][0])
        holder = dict(zip(by_addr[cut:], _holders(addrs[cut:], type_ranges)))
        del by_addr, addrs
        got: dict[str, str] = {}
        for k in typed:
            pkg = holder.get(k)
            if pkg is not None and pkg != TYPES:
                got.setdefault(names[k], pkg)
        for k in typed:
            sym_pkgs[k] = got.get(names[k], TYPES)
        del typed, holder, got

    pieces: list[Piece] = []
    covered: list[tuple[int, int]] = []
    notes: list[str] = []
    cus = False                       # not read yet
    cu_ranges: list[tuple[int, int, str, str]] = []
    if not is_go and (img.section(".debug_info") or img.section(".zdebug_info")):
        try:
            cus = dwarf.read_compile_units(img)
        except ParseError as e:
            cus = None
            notes.append(f"DWARF not attributed: {e}")
        cu_ranges = sorted(((c.low_pc, c.high_pc, _cu_label(c.name), c.name) for c in cus or ()
                            if c.low_pc and c.high_pc and c.high_pc > c.low_pc), key=_START)
        if cu_ranges:
            # a C/Rust symbol with no namespace of its own belongs to its compile unit
            starts = [r[0] for r in cu_ranges]
            for k, (a, b, pkg, nm) in enumerate(sym_ranges):
                if pkg == C_CODE:
                    i = bisect.bisect_right(starts, a) - 1
                    if i >= 0 and a < cu_ranges[i][1]:
                        sym_ranges[k] = (a, b, cu_ranges[i][2], nm)
    table = img.symbol_table(dynamic) if syms else None
    table_pieces = _symbol_table_pieces(img, table, syms, cache, is_go, sym_pkgs) \
        if table else {}
    del sym_pkgs
    n_functions = pcln.nfunc if pcln else sum(
        1 for size, typ in zip(sizes, types) if typ == STT_FUNC and size)
    del syms, cache, names, values, sizes, types
    # what is left of the data (strings, globals, GC bitmaps): to the package of the first
    # function whose code refers to it (x86-64 RIP-relative LEA/MOV), to the next reference
    ref_ranges: list[tuple[int, int, str, str]] = []
    if is_go and stripped and pcln is not None and img.machine == 62:
        if code_refs is None:
            window = code_ref_window(img)
            text = img.section(".text")
            code_refs = rip_relative_refs(img.data, text.offset, text.offset + text.size,
                                          text.addr, *window) if window else {}
        ref_ranges = _code_ref_ranges(img, func_ranges, pcln_pkgs, code_refs)
    del code_refs
    sections = img.sections
    if not sections:
        sections = _segment_sections(img)
        if sections:
            notes.append("no section headers: bytes labelled by the program headers' "
                         "loadable segments (LOAD#n) and what the pclntab names in them")
    for sec in sections:
        if sec.index == 0 or sec.size == 0:
            continue
        alloc = bool(sec.flags & SHF_ALLOC) and sec.in_memory
        default = _section_default(sec.name, is_go, sec.flags)
        in_file = sec.in_file
        if in_file:
            # every file byte one label: a section gets only what no earlier one took
            spans = _uncovered(sec.offset, sec.offset + sec.size, covered)
            if not spans:
                continue
            for span in spans:
                bisect.insort(covered, span)
            whole = spans == [(sec.offset, sec.offset + sec.size)]
        elif not alloc:
            continue
        else:
            spans, whole = [(sec.addr, sec.addr + sec.size)], True
        for lo, hi in spans:
            layers = []
            shift = 0                  # labelling runs in addresses for what the loader maps
            if alloc:
                if in_file:
                    shift = sec.addr - sec.offset
                    lo, hi = lo + shift, hi + shift
                if func_ranges and sec.flags & SHF_EXECINSTR:
                    layers.append(_window(func_ranges, lo, hi))
                if type_ranges:
                    layers.append(_window(type_ranges, lo, hi))
                if sym_ranges:
                    layers.append(_window(sym_ranges, lo, hi))
                if ref_ranges and not sec.flags & SHF_EXECINSTR:
                    layers.append(_window(ref_ranges, lo, hi))
                if cu_ranges and sec.flags & SHF_EXECINSTR:
                    layers.append(_window(cu_ranges, lo, hi))
            if pcln is not None and in_file and lo <= pcln.offset + shift < hi:
                start = pcln.offset + shift
                if start + pcln.size > hi:
                    raise ParseError(f"the pclntab ({pcln.size} bytes) runs past its section "
                                     f"{sec.name}", section=sec.name, offset=pcln.offset)
                layers.insert(0, [(start, start + pcln.size, PCLNTAB, _PCLN)])
            name = sec.name
            add = pieces.append
            if whole and sec.index in table_pieces and in_file:
                pieces += table_pieces[sec.index]
                continue
            if whole and is_go and stripped and sec.name == ".rela.dyn" and in_file:
                owned = _reloc_pieces(img, sec,
                                      [func_ranges, type_ranges, sym_ranges, ref_ranges], alloc)
                if owned:
                    pieces += owned
                    continue
            if whole and in_file and not alloc and (pcln is not None or sym_ranges) \
                    and name.lstrip(".").lstrip("z").startswith("debug_"):
                try:
                    if cus is False:
                        cus = dwarf.read_compile_units(img)
                    shares = _debug_shares(dwarf.read_debug_section(img, sec),
                                           func_ranges or sym_ranges, is_go, cus)
                except ParseError as e:
                    shares = None
                    notes.append(f"{name} not attributed: {e}")
                if shares:
                    pieces += _split(name, sec.file_size, shares)
                    continue
            runs: dict[tuple[str, str], int] = {}      # one piece per label and section
            _labels_in(lo, hi, layers, default, runs)
            if runs.pop((PCLNTAB, _PCLN), None) is not None:
                pieces += _pclntab_pieces(pcln, pcln_pkgs, name, alloc)
            for (pkg, sym), size in runs.items():
                add((name, pkg, sym, size if in_file else 0, size if alloc else 0))
            del runs

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
    extra.sort(key=_START)
    for gs, ge in gaps:
        runs = {}
        _labels_in(gs, ge, [extra], (PADDING, "(between sections)"), runs)
        pieces += [("(none)", pkg, sym, size, 0) for (pkg, sym), size in runs.items()]

    untouched = _untouched(img, pieces, set(pcln_pkgs)) if is_go else []
    if untouched:
        notes.append("; ".join(f"{format_size(n)} of memory is {w}" for w, n in untouched))
    vm = sum(p[4] for p in pieces)
    if is_go and stripped:
        notes.append("stripped: functions come from the pclntab; data and type descriptors "
                     + ("from the dynamic symbols (.dynsym) where it names them, else "
                        if dynamic else "") + "in per-section buckets")
    elif stripped and dynamic:
        notes.append("stripped: symbols from the dynamic symbol table (.dynsym) only")
    deps = buildinfo.deps if buildinfo else ()
    mod_paths = tuple(m.path for m in deps)
    return SizeReport(
        path=path, file_size=img.file_size, vm_size=vm, kind="go" if is_go else "elf",
        stripped=stripped, pie=img.e_type == 3, pieces=tuple(pieces),
        go_version=buildinfo.go_version if buildinfo else None,
        pclntab_layout=pcln.layout if pcln else None,
        pclntab_found_by=pcln.found_by if pcln else None,
        functions=n_functions,
        main_module=buildinfo.main if buildinfo else None,
        main_path=buildinfo.path if buildinfo else "",
        modules=deps, notes=tuple(notes), untouched=tuple(untouched),
        build_settings=tuple(buildinfo.settings) if buildinfo else (),
        _module_paths=mod_paths)


#: Go 1.26+'s FIPS 140-3 entropy source: ``var memory entropy.ScratchBuffer`` (1 << 25 bytes)
#: in .noptrbss, which gets pages at its first use, in FIPS mode only
_FIPS_PKG = "crypto/internal/fips140/drbg"
_FIPS_SYM = _FIPS_PKG + ".memory"
_FIPS_SIZE = 1 << 25
_FIPS_WHAT = (f"{_FIPS_SYM}, the FIPS 140-3 entropy scratch buffer: mapped (.noptrbss), "
              "touched only in FIPS mode (GODEBUG=fips140=on)")



def _uncovered(lo: int, hi: int, covered: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The runs of [lo, hi) that none of ``covered`` (sorted, disjoint) holds."""
    out = []
    i = max(bisect.bisect_right(covered, (lo, lo)) - 1, 0)
    cur = lo
    while i < len(covered) and covered[i][0] < hi:
        cs, ce = covered[i]
        if ce > cur:
            if cs > cur:
                out.append((cur, cs))
            cur = max(cur, ce)
        i += 1
    if cur < hi:
        out.append((cur, hi))
    return out

def _untouched(img: ElfImage, pieces: list, pkgs: set[str]) -> list[tuple[str, int]]:
    """Memory the Go runtime maps but does not touch unless asked to: the FIPS scratch
    buffer, by its symbol, or (stripped) as 32 MiB of .noptrbss when the FIPS DRBG's code is
    linked in; that part of the section's bucket is relabelled to the package."""
    for k, p in enumerate(pieces):
        if p[2] == _FIPS_SYM and p[4]:
            return [(_FIPS_WHAT, p[4])]
    if _FIPS_PKG not in pkgs:
        return []
    bucket = "(.noptrbss unattributed)"
    for k, p in enumerate(pieces):
        # the section's bucket, or the FIPS code that refers to the buffer
        if p[0] == ".noptrbss" and (p[1] == bucket or p[1].startswith("crypto/internal/")) \
                and p[3] == 0 and p[4] >= _FIPS_SIZE:
            pieces[k] = (p[0], p[1], p[2], 0, p[4] - _FIPS_SIZE)
            pieces.append((".noptrbss", _FIPS_PKG, _FIPS_SYM, 0, _FIPS_SIZE))
            if not pieces[k][4]:
                del pieces[k]
            return [(_FIPS_WHAT, _FIPS_SIZE)]
    return []


_REF_SECTIONS = (".rodata", ".noptrdata", ".data", ".bss", ".noptrbss", ".data.rel.ro",
                 ".go.func", ".go.type")


def code_ref_window(img: ElfImage) -> tuple[int, int] | None:
    """The addresses whose references in a stripped Go binary's code label its data (see
    :func:`_code_ref_ranges`): those of its data sections; None when it has none or no
    .text, or is no x86-64 binary."""
    text = img.section(".text")
    if img.machine != 62 or text is None or not text.in_file:
        return None
    secs = [s for s in img.sections if s.name in _REF_SECTIONS and s.size]
    if not secs:
        return None
    return min(s.addr for s in secs), max(s.addr + s.size for s in secs)


def _code_ref_ranges(img: ElfImage, funcs: list[tuple[int, int, str, str]],
                     pkgs: list[str], first: dict[int, int]) -> list[tuple[int, int, str, str]]:
    """Data the Go code refers to (``first``: each referenced address to the file offset of
    the first instruction referring to it, :func:`bpfmem.parse.x86.rip_relative_refs` of
    .text), each referenced place to the package of the first function referring to it
    (``funcs``: the functions' ranges, ``pkgs`` their packages), up to the next referenced
    place (a lower layer than the descriptors and symbols: it only fills what they
    leave)."""
    text = img.section(".text")
    if text is None or not text.in_file or not funcs or not first:
        return []
    secs = [s for s in img.sections if s.name in _REF_SECTIONS and s.size]
    shift = text.addr - text.offset
    keys = sorted(first)
    starts = [f[0] for f in funcs]
    lower = bisect.bisect_left
    out = []
    for sec in secs:
        lo, hi = sec.addr, sec.addr + sec.size
        mine = keys[lower(keys, lo):lower(keys, hi)]
        if not mine:
            continue
        ends = mine[1:]
        ends.append(hi)
        # the function of each first reference: how many functions start at or before it
        # (0: before the first), by one walk over the references by address
        at = [first[t] + shift for t in mine]
        owners = [0] * len(at)
        k, n = 0, len(starts)
        for j in sorted(range(len(at)), key=at.__getitem__):
            a = at[j]
            while k < n and starts[k] <= a:
                k += 1
            owners[j] = k
        out += [(t, e, pkgs[i - 1], _REF) for t, e, i in zip(mine, ends, owners) if i]
    out.sort(key=_START)
    return out


_REF = "referenced by code"


def _reloc_pieces(img: ElfImage, sec, layers, alloc: bool) -> list:
    """A PIE's dynamic relocations, each entry to the package of the place it relocates
    (the first layer that names it); the rest to the section's bucket."""
    ent = 24
    offs = img.rela_offsets(sec)
    if not offs:
        return []
    acc: Counter = Counter()
    left = offs
    for layer in layers:
        if not left or not layer:
            continue
        # each place to the last range starting at or before it, if that holds it; only
        # the places between the layer's first start and its last end can be
        lo = bisect.bisect_left(left, layer[0][0])
        hi = bisect.bisect_left(left, max(map(_END, layer)))
        if lo == hi:
            continue
        mine = left[lo:hi]
        got = _holders(mine, layer)
        acc.update(filter(None, got))
        left[lo:hi] = compress(mine, map(operator.not_, got))
        del got, mine
    acc = {pkg: n * ent for pkg, n in acc.items()}
    if not acc:
        return []
    out = [(sec.name, pkg, sec.name, n, n if alloc else 0) for pkg, n in acc.items()]
    rest_bytes = sec.size - sum(acc.values())
    if rest_bytes:
        out.append((sec.name, "(relocations)", sec.name, rest_bytes,
                    rest_bytes if alloc else 0))
    return out


def _holders(places: list[int], layer: list[tuple[int, int, str, str]]) -> list[str | None]:
    """For each of ``places`` (sorted, none before the layer's first start) the package of
    the last range of ``layer`` (sorted by start) starting at or before it, when that range
    holds it; else None. One walk over both (a bisection a place reads a list of 10^5 far
    apart in memory: two to three times slower)."""
    out: list[str | None] = []
    add = out.append
    k, n = 0, len(layer)
    nxt = layer[0][0]
    r = layer[0]
    for o in places:
        while nxt <= o:
            r = layer[k]
            k += 1
            nxt = layer[k][0] if k < n else 1 << 64
        add(r[2] if o < r[1] else None)
    return out


def _segment_sections(img: ElfImage) -> list[Section]:
    """Pseudo-sections for an image whose section headers are gone: one per PT_LOAD
    segment's file bytes (named LOAD#n r-x), one for its memory past them (zero-filled)."""
    out: list[Section] = []
    k = 0
    for seg in img.segments:
        if seg.type != PT_LOAD:
            continue
        perm = "".join(c if seg.flags & bit else "-" for c, bit in (("r", 4), ("w", 2),
                                                                    ("x", 1)))
        flags = SHF_ALLOC | (SHF_EXECINSTR if seg.flags & 1 else 0) | (
            SHF_WRITE if seg.flags & 2 else 0)
        name = f"LOAD#{k} {perm}"
        filesz = max(0, min(seg.filesz, img.file_size - seg.offset))   # cut short: clip
        out.append(Section(len(out) + 1, name, SHT_PROGBITS, flags, seg.offset, filesz,
                           0, 0, 0, seg.vaddr))
        if seg.memsz > seg.filesz:
            out.append(Section(len(out) + 1, name + " zero-filled", SHT_NOBITS, flags, 0,
                               seg.memsz - seg.filesz, 0, 0, 0, seg.vaddr + seg.filesz))
        k += 1
    return out


def go_type_ranges(img: ElfImage, pcln: Pclntab, pkgs: list[str] | None = None):
    """The type descriptors and itabs of a stripped Go binary by package
    (:func:`bpfmem.parse.gotypes.type_ranges`), or None when its layout is not known."""
    fn = next((p.offset for p in pcln.parts if p.name == "funcnametab"), None)
    if fn is None or not pcln.addr:
        return None
    words = moduledata_words(img, pcln.addr, pcln.addr + fn, pcln.ptr_size,
                             "<" if img.endian == "<" else ">", 48)
    if not words:
        return None
    out = _type_ranges(img, words)
    if out is None:
        return None
    # Go 1.18-1.19: each function's funcdata (stack maps, ...) in go.func.*, from
    # moduledata.gofunc (word 38), to the first function that uses it
    gofunc = words[38]
    if pcln.fd_starts and gofunc and img.addr_to_offset(gofunc) is not None:
        if pkgs is None:
            pkgs = [package_of(n) for n in pcln.names]
        starts = pcln.fd_starts
        ends = list(starts[1:])
        ends.append(starts[-1] + 8)
        out += zip(map(gofunc.__add__, starts), map(gofunc.__add__, ends),
                   map(pkgs.__getitem__, pcln.fd_owners), repeat("funcdata"))
    return out


_PCLN = "(the pclntab)"


def _own_by_part(own: list[int], starts: list[int], offsets, sizes) -> None:
    """Add each of ``sizes`` to the part of the pclntab its offset lies in."""
    if not offsets:
        return
    lo = bisect.bisect_right(starts, min(offsets)) - 1
    if lo == bisect.bisect_right(starts, max(offsets)) - 1:   # all in one part, as usual
        own[lo] += sum(sizes)
        return
    bis = bisect.bisect_right
    for o, n in zip(offsets, sizes):
        own[bis(starts, o) - 1] += n


def _pclntab_pieces(pcln: Pclntab, pkgs: list[str], section: str,
                    alloc: bool) -> list[tuple[str, str, str, int, int]]:
    """The pclntab's bytes: each function's name, ``_func`` record and pc-value tables (a
    table two functions share goes to the first) to its package, as the function's symbol;
    the rest (header, file and compile-unit tables, inlined functions' names, the function
    table's index) as named buckets."""
    starts = [p.offset for p in pcln.parts]
    own = [0] * len(starts)
    pc_part = next((k for k, p in enumerate(pcln.parts) if p.name == "pctab"), 0)
    fd_part = next((k for k, p in enumerate(pcln.parts) if p.name == "funcdata"), 0)
    # each function's entry in the function table's index: (entry, record offset)
    ft_part = next((k for k, p in enumerate(pcln.parts) if p.name == "functab"), None)
    idx = 0 if ft_part is None else 2 * pcln.ptr_size if pcln.layout == "1.16" else 8
    # a function's bytes: its name, pc-value tables, funcdata, index entry and record
    n = list(pcln.name_sizes)
    _own_by_part(own, starts, pcln.name_offsets, pcln.name_sizes)
    for col, part in ((pcln.pc_bytes, pc_part), (pcln.fd_bytes, fd_part)):
        if col:
            n = list(map(operator.add, n, col))
            own[part] += sum(col)
    if idx:
        n = list(map(idx.__add__, n))
        own[ft_part] += idx * len(pcln.names)
    if pcln.rec_sizes:
        n = list(map(operator.add, n, pcln.rec_sizes))
        _own_by_part(own, starts, pcln.rec_offsets, pcln.rec_sizes)
    out = list(zip(repeat(section), pkgs, pcln.names, n, n if alloc else repeat(0)))
    del n
    for part, mine in zip(pcln.parts, own):
        rest = part.size - mine
        if rest < 0:
            raise ParseError(f"pclntab: function names or records overlap in its {part.name}",
                             section=section, offset=pcln.offset + part.offset)
        if rest:
            out.append((section, PCLNTAB, f"pclntab {part.name}", rest, rest if alloc else 0))
    return out


def _symbol_table_pieces(img: ElfImage, table, syms, cache: dict[str, str], is_go: bool,
                         sym_pkgs: list | None = None
                         ) -> dict[int, list[tuple[str, str, str, int, int]]]:
    """The symbol table's entries and their names, each to the package of its symbol
    (``sym_pkgs``: each symbol's, when known; else by name from ``cache``); what is left
    (the null entry, shared strings) to the section's bucket. By section index."""
    strtab = img.sections[table.link]
    if strtab.type == 8 or table.type == 8:
        return {}
    entsize = 24 if img.is64 else 16
    names, offs = syms.names, syms.name_offsets
    if "" in names:             # unnamed symbols: only their entries, in the bucket
        keep = list(map(bool, names))
        names, offs = list(compress(names, keep)), list(compress(offs, keep))
        if sym_pkgs is not None:
            sym_pkgs = list(compress(sym_pkgs, keep))
        del keep
    pkgs = sym_pkgs
    if pkgs is None or None in pkgs:
        try:                    # every name is in the cache after the labelling
            pkgs = list(map(cache.__getitem__, names))
        except KeyError:
            get = cache.get
            pkgs = []
            for nm in names:
                pkg = get(nm)
                if pkg is None:
                    pkg = cache[nm] = C_CODE if not is_go else package_of(nm)
                pkgs.append(pkg)
    counts = Counter(pkgs)
    ent = {k: v * entsize for k, v in counts.items()}
    strs = _string_bytes(names, offs, pkgs)
    del names, offs, pkgs
    out = {}
    tables = [(table, ent), (strtab, strs)]
    if table.type == 11:            # .dynsym: its version and hash entries, one a symbol
        for sname, width in ((".gnu.version", 2), (".gnu.hash", 4)):
            sec = img.section(sname)
            if sec is not None and sec.in_file and sec.link == table.index:
                tables.append((sec, {k: v * width for k, v in counts.items()}))
    for sec, acc in tables:
        alloc = bool(sec.flags & SHF_ALLOC)
        bucket = _section_default(sec.name, is_go, sec.flags)
        given = sum(acc.values())
        if given > sec.size:          # names that are not what the table says: no split
            if sec is table or sec is strtab:
                return {}
            continue
        pieces = [(sec.name, pkg, sec.name, n, n if alloc else 0) for pkg, n in acc.items()]
        rest = sec.size - given
        if rest:
            pieces.append((sec.name, bucket[0], bucket[1], rest, rest if alloc else 0))
        out[sec.index] = pieces
    return out


def _string_bytes(names: list[str], offs: list[int], pkgs: list[str]) -> dict[str, int]:
    """Per package, the bytes of the string table its names take (``offs``: where each name
    starts); a name that is the tail of another (linkers merge them) is counted once, for the
    longer one."""
    n = len(names)
    lens = list(map(len, names))
    odd = []                        # offsets count bytes: the names that are not ASCII
    if not all(map(str.isascii, names)):
        odd = list(compress(range(n), map(operator.not_, map(str.isascii, names))))
        for k in odd:
            lens[k] = len(names[k].encode())
    ends = [o + ln + 1 for o, ln in zip(offs, lens)]
    strs: dict[str, int] = {}
    get = strs.get
    if not any(["\ufffd" in names[k] for k in odd]):
        # each name runs to its NUL, so two names overlap only when they share it, the one
        # that starts later being the tail of the other
        order = sorted(ends)
        shared = set(compress(islice(order, 1, None), map(operator.eq, order, islice(order, 1, None))))
        del order
        if not shared:
            for pkg, ln in zip(pkgs, lens):
                strs[pkg] = get(pkg, 0) + ln + 1
            return strs
        owner: dict[int, int] = {}         # a shared NUL to the name that starts first
        for k in sorted(compress(range(n), map(shared.__contains__, ends)),
                        key=offs.__getitem__):
            owner.setdefault(ends[k], k)
        for k, (pkg, ln, e) in enumerate(zip(pkgs, lens, ends)):
            if e not in shared or owner[e] == k:
                strs[pkg] = get(pkg, 0) + ln + 1
        return strs
    # names read with replacement characters are not their bytes' length: the intervals as
    # they are, in the table's order, each byte once
    order = sorted(range(n), key=offs.__getitem__)
    cur = 0
    for k in order:
        a, b = offs[k], ends[k]
        got = b - (a if a > cur else cur)
        if got > 0:
            strs[pkgs[k]] = get(pkgs[k], 0) + got
            cur = b
    return strs


def _debug_shares(units, ranges, is_go: bool, cus):
    """(package, uncompressed bytes) of a debug section's units (a
    :class:`~bpfmem.parse.dwarf.DebugSection`), and its uncompressed size: .debug_info and
    .debug_line by compile unit (a Go package, a C source file), .debug_frame by the function
    each entry describes. None for the other debug sections."""
    if units is None:
        return None
    if units.kind == "frame":
        starts = [r[0] for r in ranges]
        out = []
        for loc, size in units.units:
            i = bisect.bisect_right(starts, loc) - 1
            pkg = ranges[i][2] if i >= 0 and loc < ranges[i][1] else None
            if pkg is not None:
                out.append((pkg, size))
        return out, units.size
    if cus is None:
        return None
    label = (lambda n: n or DEBUG) if is_go else _cu_label
    if units.kind == "info":
        return [(label(c.name), c.size) for c in cus], units.size
    by_off = {c.stmt_list: c.name for c in cus if c.stmt_list is not None}
    return [(label(by_off.get(off, "")), size) for off, size in units.units], units.size


def _cu_label(name: str) -> str:
    """A C/C++ compile unit by its source path; a Rust one ("src/lib.rs/@/std.9f2c-cgu.0")
    by its crate, so that it adds up with the crate's code."""
    if not name:
        return DEBUG
    if "/@/" in name:
        return name.rsplit("/@/", 1)[1].split(".", 1)[0]
    return f"(cu) {name}"


def _split(section: str, file_size: int, shares) -> list[tuple[str, str, str, int, int]]:
    """The section's file bytes split over ``shares`` in proportion to their uncompressed
    bytes; what rounding (and a compression header) leaves goes to the debug bucket."""
    parts, total = shares
    out = []
    given = 0
    if total > 0:
        acc: dict[str, int] = {}
        for pkg, size in parts:
            acc[pkg] = acc.get(pkg, 0) + size
        for pkg, size in acc.items():
            n = file_size * size // total
            if n:
                out.append((section, pkg, section, n, 0))
                given += n
    if file_size - given:
        out.append((section, DEBUG, section, file_size - given, 0))
    return out


def _go_symbols(syms: ImageSymbols, funcs: dict[str, str], skip: str | None = None
                ) -> tuple[list[tuple[int, int, str, str]], list[str | None]]:
    """Each Go symbol's package (``funcs``: the pclntab functions' by name; None for an
    unnamed symbol), and the ranges of those that are no function and have a size: (start,
    end, package, name), the first symbol of a name only, none of package ``skip``."""
    names = syms.names
    pkgs: list[str | None] = list(map(funcs.get, names))
    # the symbols whose name is no function's, in table order
    new = list(compress(range(len(names)), map(operator.not_, pkgs)))
    new_names = [names[k] for k in new]
    if "" in names:                             # unnamed symbols are no one's
        for k in compress(range(len(names)), map(operator.not_, names)):
            pkgs[k] = None
        keep = list(map(bool, new_names))
        new = list(compress(new, keep))
        new_names = list(compress(new_names, keep))
    for k, pkg in zip(new, packages_of(new_names)):
        pkgs[k] = pkg
    if len(set(new_names)) < len(new_names):    # a name twice: its first symbol only
        new = sorted(dict(zip(reversed(new_names), reversed(new))).values())
    del new_names
    values, sizes, types = syms.values, syms.sizes, syms.types
    return [(values[k], values[k] + sizes[k], pkg, names[k])
            for k, pkg in zip(new, map(pkgs.__getitem__, new))
            if pkg != skip and sizes[k] > 0 and types[k] != STT_SECTION
            and types[k] != STT_FILE], pkgs


#: Go's linker lists aggregates (all type descriptors, all strings, ...) as one zero-size
#: symbol at their start; they run to the next symbol
_MARKERS = {"type.*": TYPES, "type:*": TYPES, "go.string.*": "(Go strings)",
            "go:string.*": "(Go strings)", "go.func.*": "(Go func data)",
            "go:func.*": "(Go func data)", "runtime.gcbits.*": "(Go GC bitmaps)",
            "runtime.gcbits.": "(Go GC bitmaps)"}


def _go_markers(syms: ImageSymbols) -> list[tuple[int, int, str, str]]:
    names, values = syms.names, syms.values
    marked = [k for k in compress(range(len(names)), map(_MARKERS.__contains__, names))
              if syms.sizes[k] == 0]
    if not marked:
        return []
    addrs = sorted(set(compress(values, [v and t != STT_FILE
                                         for v, t in zip(values, syms.types)])))
    out = []
    for k in marked:
        i = bisect.bisect_right(addrs, values[k])
        if i < len(addrs):
            out.append((values[k], addrs[i], _MARKERS[names[k]], names[k]))
    return out


def _window(ranges: list[tuple[int, int, str, str]], lo: int,
            hi: int) -> list[tuple[int, int, str, str]]:
    """The ranges (sorted by start) that may overlap [lo, hi)."""
    i = bisect.bisect_left(ranges, (lo,))
    if i > 0 and ranges[i - 1][1] > lo:      # one before may still reach into the window
        i -= 1
    return ranges[i:bisect.bisect_left(ranges, (hi,))]


_NATIVE_NS = re.compile(r"(?:dyn |impl )?([A-Za-z_]\w*)(?:\[[0-9a-f]+\])?::")


def native_package(name: str) -> str:
    """The namespace (C++) or crate (Rust; ``core[1a2b]::`` and ``<std::..>`` forms too) of
    a demangled name; C_CODE for plain C names and anything else."""
    m = _NATIVE_NS.match(name.lstrip("<&*( "))
    return m.group(1) if m else C_CODE


# --- diff -------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class SizeDelta:
    name: str
    old: int
    new: int
    vm_old: int = 0                    # memory (what the loader maps) beside file bytes
    vm_new: int = 0

    @property
    def delta(self) -> int:
        return self.new - self.old

    @property
    def vm_delta(self) -> int:
        return self.vm_new - self.vm_old


def diff_reports(old: SizeReport, new: SizeReport, by: str = "package") -> list[SizeDelta]:
    """What grew and shrank between two builds, by ``by``, largest change first."""
    o = {r.name: r for r in old.group(by)}
    n = {r.name: r for r in new.group(by)}
    zero = SizeRow("", 0, 0)
    rows = []
    for k in set(o) | set(n):
        a, b = o.get(k, zero), n.get(k, zero)
        rows.append(SizeDelta(k, a.file, b.file, a.vm, b.vm))
    rows.sort(key=lambda d: (-abs(d.delta), -d.new, d.name))
    return rows


#: build settings that differ between any two builds (not a build flag)
_VCS = ("vcs", "vcs.revision", "vcs.time", "vcs.modified")


def build_differences(old: SizeReport, new: SizeReport) -> list[str]:
    """Why two builds' sizes are not comparable row by row: they differ in strip state,
    DWARF, toolchain or build flags (a label moves between buckets, and shows as growth)."""
    out = []
    if old.stripped != new.stripped:
        out.append(f"{'old' if old.stripped else 'new'} build is stripped, the other is not: "
                   "symbol tables and the data they name move between rows")
    if old.has_dwarf != new.has_dwarf:
        out.append(f"{'old' if old.has_dwarf else 'new'} build has DWARF debug info, the "
                   "other has none: (debug info) and per-package debug bytes change")
    if old.go_version != new.go_version and old.kind == new.kind == "go":
        out.append(f"toolchains differ: {old.go_version} -> {new.go_version} (the runtime "
                   "and the standard library change with it)")
    a = {k: v for k, v in old.build_settings if k not in _VCS}
    b = {k: v for k, v in new.build_settings if k not in _VCS}
    changed = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    if changed:
        out.append("build settings differ: " + "; ".join(
            f"{k} {a.get(k, '(unset)')!r} -> {b.get(k, '(unset)')!r}" for k in changed))
    return out


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

    def failure(self) -> str:
        """What is over its limit, and by how much."""
        what = "file size" if self.what == "file" else "modules " + self.what
        return (f"{self.path}: {what} {format_size(self.size)} exceeds its limit "
                f"{format_size(self.limit)} by {format_size(self.size - self.limit)}")


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


# --- the results of the size commands ---------------------------------------------------------

@dataclass(frozen=True)
class SizeResult:
    """``bpfmem size``: binaries, each grouped ``by`` package, module, section or kind (the
    ``top`` largest groups; 0 all), and why the first one's packages are linked."""
    reports: tuple[SizeReport, ...]
    by: str = "package"
    top: int = 30
    why: WhyLinked | None = None


@dataclass(frozen=True)
class SizeDiff:
    """``bpfmem size diff``: what grew and shrank between two builds, by ``by`` (largest
    change first), and why NEW's grown packages are linked."""
    old: SizeReport
    new: SizeReport
    by: str
    top: int
    deltas: tuple[SizeDelta, ...]
    grown: tuple[str, ...]              # packages that grew, most first (at most 10)
    why: WhyLinked | None = None
    warnings: tuple[str, ...] = ()      # the builds differ in strip state, DWARF, toolchain...


@dataclass(frozen=True)
class BinaryCheck:
    """The binary-size gate: each binary against its file-size and module limits."""
    reports: tuple[SizeReport, ...]
    verdicts: tuple[BinaryVerdict, ...]

    @property
    def failures(self) -> tuple[str, ...]:
        return tuple(v.failure() for v in self.verdicts if not v.ok)

    @property
    def passed(self) -> bool:
        return all(v.ok for v in self.verdicts)


def size_result(reports, *, by: str = "package", top: int = 30,
                why: tuple | None = None) -> SizeResult:
    """The ``size`` result of ``reports``; ``why``: (import graph, savings[, notes]) of the
    first one's program (:func:`bpfmem.analysis.imports.import_savings`)."""
    reports = tuple(reports)
    if why is not None:
        from .imports import why_linked
    linked = None if why is None else why_linked(
        why[0], why[1], reports[0].package_bytes(), notes=tuple(why[2]) if len(why) > 2 else ())
    return SizeResult(reports, by, top, linked)


def size_diff(old: SizeReport, new: SizeReport, *, by: str = "package", top: int = 30,
              why: tuple | None = None) -> SizeDiff:
    """The ``size diff`` result; ``why``: (import graph, savings[, notes]) of NEW's
    program."""
    grown = [d.name for d in diff_reports(old, new, "package") if d.delta > 0][:10]
    if why is not None:
        from .imports import why_linked
    linked = None if why is None else why_linked(
        why[0], why[1], new.package_bytes(), grown=grown,
        notes=tuple(why[2]) if len(why) > 2 else ())
    return SizeDiff(old, new, by, top, tuple(diff_reports(old, new, by)), tuple(grown), linked,
                    tuple(build_differences(old, new)))
