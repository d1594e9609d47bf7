"""Binary size: every byte of an agent's ELF binary labelled (``bpfmem size``), two builds
compared (``size diff``), binaries against their limits (``check --max-binary-size``)."""

from __future__ import annotations

import os

from ..errors import UsageError
from ..analysis.size import (BinaryCheck, SizeDiff, SizeReport, SizeResult, analyse_image,
                             code_ref_window, judge_binary, limit_for, size_diff,
                             size_result)
from ..errors import ParseError, UnsupportedError
from ..inputs import is_image, let_go, mapped_input
from ..inputs import split_binaries as _split_binaries
from ..parse.elf import parse_image
from ..parse.gobin import BUILDINFO_MAGIC, parse_buildinfo, parse_pclntab
from ..parse.reader import decoding
from ..parse.x86 import rip_relative_refs
from .session import collector_paused


_GO_SECTIONS = (".gopclntab", ".go.buildinfo", ".note.go.buildid")


def size_report(data, *, path: str, demangle=None) -> SizeReport:
    """Every byte of the ELF binary ``data`` (bytes or a mapping of the file) labelled: it
    is parsed here (the image, its symbols; a Go binary's pclntab and build info), then
    labelled by :func:`bpfmem.analysis.size.analyse_image` (other binaries' symbol names
    through ``demangle``). ParseError and UnsupportedError name ``path``.

    The cyclic garbage collector is off meanwhile: a large binary's labels are 10^6 tuples
    of numbers and strings, which make no cycles (its 3,053 passes over dockerd, containerd,
    prometheus, two Go toolchains and ls collected nothing; on dockerd they took 76 ms of
    1.75 s)."""
    try:
        # a low-level error of the Go tables' decoders is a ParseError
        with collector_paused(), decoding():
            img = parse_image(data, path=path)
            is_go = any(img.section(s) is not None for s in _GO_SECTIONS) or (
                not img.sections and data.find(BUILDINFO_MAGIC) >= 0)
            pcln = parse_pclntab(img) if is_go else None
            info = parse_buildinfo(img) if is_go else None
            refs = None
            if pcln is not None:
                # the bytes read once: the pclntab (read above) and a stripped binary's code
                # (its references to data, read here): their pages are given back, the
                # labelling reads no bytes (analysis/ never does) and the rest of the
                # parsing reads other parts (a 75 MB dockerd: 44 MB of it)
                let_go(data, pcln.offset, pcln.size)
                window = code_ref_window(img) if not img.symbol_count() else None
                if window is not None:
                    text = img.section(".text")
                    refs = rip_relative_refs(data, text.offset, text.offset + text.size,
                                             text.addr, *window)
                    let_go(data, text.offset, text.size)
        return analyse_image(img, path=path, pcln=pcln, buildinfo=info,
                             demangle=None if is_go else demangle, code_refs=refs)
    except ParseError as e:
        raise e.with_path(path) from None
    except UnsupportedError as e:
        raise UnsupportedError(f"{path}: {e.what}", e.since) from None


def load_binary_size(source: str | os.PathLike | bytes, *, path: str | None = None,
                     demangle: bool = True) -> SizeReport:
    """Every byte of an ELF binary labelled (:class:`bpfmem.analysis.size.SizeReport`).

    Go binaries (stripped or not, PIE or not, Go 1.2+) by their pclntab and build info;
    other ELF files by sections and symbols (C++/Rust names demangled with c++filt when it is
    installed). ParseError/UnsupportedError (naming the file) for anything else."""
    demangler = cxxfilt if demangle else None
    if isinstance(source, (bytes, bytearray, memoryview)):
        return size_report(bytes(source), path=path or "<bytes>", demangle=demangler)
    with mapped_input(source, "binary") as data:
        return size_report(data, path=path or os.fspath(source), demangle=demangler)


def cxxfilt(names: list[str]) -> list[str]:
    """c++filt's names (the toolchain's door, and subprocess, imported for an ELF binary's
    symbols only: a Go binary's size needs neither)."""
    from ..host.gotool import cxxfilt as demangle
    return demangle(names)


def why_linked(report: SizeReport, go_src: str, *, go: str | None = None):
    """The import savings of a Go binary's program (``go list -deps -json`` in ``go_src``,
    weighted by the bytes each package has in ``report``)."""
    from ..analysis.imports import graph_notes, import_savings
    from ..host.gotool import go_list_deps, go_version
    from ..parse.golist import parse_go_list
    graph = parse_go_list(go_list_deps(go_src, go=go))
    main = report.main_path
    if main and main != "command-line-arguments" and graph.main != main:
        raise UsageError(f"--go-src {go_src} is the source of {graph.main}, but "
                         f"{report.path} was built from {main} (its build info)")
    weights = report.package_bytes()
    notes = graph_notes(graph, weights, binary_go=report.go_version,
                        list_go=go_version(go, cwd=go_src))
    return graph, import_savings(graph, weights), tuple(notes)


def binary_size(paths, *, by: str = "package", top: int = 30, go_src: str | None = None,
                demangle: bool = True, platform: str | None = None) -> SizeResult:
    """One or more binaries, each grouped ``by`` package, module, section or kind (the
    ``top`` largest groups; 0: all); with ``go_src`` (the first one's main package
    directory), why its packages are linked. A container image among ``paths`` gives each
    of its binaries that carries a BPF object (``platform``: of a multi-platform one). Its
    document is ``bpfmem/size/v1``."""
    reps = []
    for p in paths:
        if is_image(p):     # a container image: each binary in it carrying a BPF object
            from .image import image_binary_sizes
            reps += image_binary_sizes(p, platform=platform, demangle=demangle)
        else:
            reps.append(load_binary_size(p, demangle=demangle))
    return size_result(reps, by=by, top=top,
                       why=why_linked(reps[0], go_src) if go_src else None)


def binary_size_diff(old, new, *, by: str = "package", top: int = 30,
                     go_src: str | None = None) -> SizeDiff:
    """What grew and shrank between two builds (``go_src``: NEW's source, for why); its
    document is ``bpfmem/size-diff/v1``."""
    a, b = load_binary_size(old), load_binary_size(new)
    return size_diff(a, b, by=by, top=top, why=why_linked(b, go_src) if go_src else None)


def check_binaries(paths, *, max_size: int | None, module_limits: dict[str, int],
                   file_limits: dict[str, int] | None = None,
                   platform: str | None = None) -> BinaryCheck:
    """Each binary against its size limit (the per-file limit whose glob matches its path
    or name, else ``max_size``) and the module limits; a container image's binaries that
    carry BPF objects, each by its path in the image. Its document is
    ``bpfmem/binary-check/v1``."""
    verdicts, reps = [], []
    for p in paths:
        if is_image(p):
            from .image import image_binary_sizes
            got = [(r, r.path.split(":", 1)[1]) for r in image_binary_sizes(p, platform=platform)]
        else:
            got = [(load_binary_size(p), os.fspath(p))]
        for rep, name in got:
            reps.append(rep)
            verdicts += judge_binary(rep, max_size=limit_for(name, max_size, file_limits or {}),
                                     module_limits=module_limits)
    return BinaryCheck(tuple(reps), tuple(verdicts))


def split_binaries(paths) -> tuple[list[str], list[str]]:
    """(the rest, ELF binaries that are no BPF object) among ``paths``."""
    return _split_binaries(paths)
