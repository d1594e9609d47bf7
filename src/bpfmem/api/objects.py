"""Compiled BPF objects: the bundled example, parsing one as a loader reads it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..errors import BpfmemError, ParseError
from ..inputs import read_input
from ..parse.loader import get_loader
from ..parse.objspec import ObjectCode, ObjectSpec, parse_object, parse_object_code

if TYPE_CHECKING:
    from pathlib import Path

EXAMPLE_OBJECT = "cni_datapath.bpf.o"


def example_object_path() -> Path:
    """The bundled example object: a small CNI-like datapath shipped with bpfmem."""
    from pathlib import Path
    return Path(__file__).resolve().parent.parent / "examples" / EXAMPLE_OBJECT


def load_object(source: str | os.PathLike | bytes, *, name: str | None = None,
                loader: str | None = None, code: bool = False,
                programs: bool = True) -> ObjectSpec | ObjectCode:
    """Parse a compiled BPF object from a path or from its bytes, as ``loader`` reads it:
    ``"libbpf"`` (the default), ``"cilium-ebpf"`` (current cilium/ebpf, Go agents and
    bpf2go objects), ``"cilium-ebpf@0.9"``, or ``"auto"``: the one loader that opens it, or
    cilium/ebpf for a bpf2go file name (``*_bpfel.o``), else libbpf. ``spec.loader`` and
    ``spec.loader_reason`` say which and why.

    Raises :class:`bpfmem.errors.ParseError` (naming the file) for anything that is not a
    BPF object that loader would accept, ``ValueError`` for an unknown loader, and
    ``OSError`` when the file cannot be read.

    ``code=True`` keeps what code analyses need (``advise``): an
    :class:`~bpfmem.parse.objspec.ObjectCode` whose ``spec`` is the object's spec.

    ``programs=False`` does not read the program list (``spec.programs`` is None, "not
    read"), for callers that only need the maps: they, the notes and the refusals are what
    the full parse gives. It cannot be combined with ``code=True``.
    """
    if code and not programs:
        raise ValueError("code=True needs the programs: drop programs=False")
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _parse(bytes(source), None, name, loader, code, programs)
    path = os.fspath(source)
    data = read_input(path, "object")
    try:
        return _parse(data, path, name, loader, code, programs)
    except ParseError as e:
        raise e.with_path(path) from None


def _parse(data: bytes, path: str | None, name: str | None, loader: str | None,
           code: bool, programs: bool) -> ObjectSpec | ObjectCode:
    if code:
        return parse_object_code(data, path=path, loader=loader)
    return parse_object(data, path=path, name=name, loader=loader, programs=programs)


def loader_name(name: str) -> str:
    """The canonical name of the loader people call ``name`` (``cilium/ebpf`` ->
    ``cilium-ebpf``); ValueError naming the choices for an unknown one."""
    return get_loader(name).name


def load_objects(source: str | os.PathLike, *, loader: str | None = None,
                 programs: bool = True, code: bool = False) -> tuple[list, list[str]]:
    """Every BPF object a file holds, and a line for each one skipped: a BPF object is
    itself; an ELF binary (executable or shared library, C, C++, Rust or Go) gives the objects
    embedded in it (:func:`bpfmem.parse.embedded.find_embedded`), each named
    ``BINARY:.rodata+0x38240`` or ``BINARY:<embedded file>`` and read with the loader the
    binary links (``loader`` None or ``"auto"``) or ``loader``. ParseError for a binary that
    carries none (naming the file), as for anything that is no BPF object."""
    from ..inputs import peek_input
    path = os.fspath(source)
    head = peek_input(path, 64)
    if head[:4] == b"\x7fELF" and not _bpf_head(head):
        return load_embedded(read_input(path, "object"), path, loader=loader,
                             programs=programs, code=code)
    return [load_object(path, loader=loader, programs=programs, code=code)], []


def load_all(sources, *, loader: str | None = None, programs: bool = True,
             code: bool = False) -> tuple[list, list[str]]:
    """:func:`load_objects` of every source, in order: (all the objects, what was skipped)."""
    specs, skipped = [], []
    for s in sources:
        got, sk = load_objects(s, loader=loader, programs=programs, code=code)
        specs += got
        skipped += sk
    return specs, skipped


def carries_objects(source: str | os.PathLike) -> bool:
    """Whether the file is an ELF binary with at least one BPF object inside (False for a
    BPF object itself, for anything unreadable and for a binary carrying none)."""
    from ..inputs import peek_input
    from ..parse.elf import parse_image
    from ..parse.embedded import find_embedded
    path = os.fspath(source)
    try:
        head = peek_input(path, 64)
        if head[:4] != b"\x7fELF" or _bpf_head(head):
            return False
        return bool(find_embedded(parse_image(read_input(path, "object"), path=path))[0])
    except (ParseError, OSError, BpfmemError):
        return False


def _bpf_head(head: bytes) -> bool:
    """An ELF header for EM_BPF (or EM_NONE): a BPF object, read as one."""
    machine = int.from_bytes(head[18:20], "little" if head[5:6] != b"\x02" else "big")
    return machine in (0, 247)


def load_embedded(data, path: str, *, loader: str | None = None, programs: bool = True,
                  code: bool = False) -> tuple[list, list[str]]:
    """The BPF objects embedded in the binary ``data`` (named ``path``), and what was
    skipped; ParseError when it carries none."""
    from dataclasses import replace
    from ..parse.elf import parse_image
    from ..parse.embedded import binary_loader, find_embedded, skeleton_name
    from ..parse.objspec import AUTO, object_name_from_path
    img = parse_image(data, path=path)
    found, skipped = find_embedded(img)
    if not found:
        from ..parse.elf import _MACHINES
        what = _MACHINES.get(img.machine, f"machine {img.machine}")
        raise ParseError(f"not a BPF object: an ELF binary for {what} that carries no BPF "
                         f"object{_why_none(skipped)}", path=path)
    if loader in (None, AUTO):
        chosen, reason = binary_loader(img)
    else:
        chosen, reason = loader, f"--loader {loader}"
    base = path.rsplit("/", 1)[-1]
    skel = skeleton_name(img, base) if chosen in (None, "libbpf") else None
    out = []
    for emb in found:
        name = f"{path}:{emb.where}"
        obj_name = skel or object_name_from_path(base)
        raw = bytes(img.buffer[emb.offset:emb.offset + emb.size])
        try:
            spec = parse_object(raw, path=name, name=obj_name, loader=chosen or AUTO,
                                programs=programs and not code)
            got = (parse_object_code(raw, path=name, loader=spec.loader, name=obj_name)
                   if code else None)
        except ParseError as e:
            skipped.append(f"{name}: {e.what}: skipped")
            continue
        why = reason if chosen else f"{reason}; {spec.loader_reason}"
        if skel and spec.loader == "libbpf":
            why += f"; object name {skel} (the skeleton's)"
        spec = replace(spec, loader_reason=why)
        out.append(replace(got, spec=replace(got.spec, loader_reason=why))
                   if code else spec)
    if not out:
        raise ParseError(f"not a BPF object: an ELF binary whose BPF objects cannot be read"
                         f"{_why_none(skipped)}", path=path)
    return out, skipped


def _why_none(skipped: list[str]) -> str:
    return f" ({len(skipped)} skipped: {skipped[0]})" if skipped else ""
