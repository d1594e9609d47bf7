"""Compiled BPF objects: the bundled example, parsing one as a loader reads it."""

from __future__ import annotations

import os
from ..values import dataclass

from ..errors import BpfmemError, ParseError
from ..inputs import is_image, read_input  # noqa: F401  (is_image: re-exported)
from ..parse.loader import get_loader
from ..parse.objspec import ObjectCode, ObjectSpec, parse_object, parse_object_code
from .session import collector_paused

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
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
    # The parse makes tens of thousands of records (BTF types, sections, symbols, maps,
    # programs) that all live on: the collector's passes over them find nothing (on a
    # 4.7 MiB object 4.5% of the parse). Paused while one object is read, as it was after.
    with collector_paused():
        if code:
            return parse_object_code(data, path=path, loader=loader)
        return parse_object(data, path=path, name=name, loader=loader, programs=programs)


def loader_name(name: str) -> str:
    """The canonical name of the loader people call ``name`` (``cilium/ebpf`` ->
    ``cilium-ebpf``); ValueError naming the choices for an unknown one."""
    return get_loader(name).name


def load_objects(source: str | os.PathLike, *, loader: str | None = None,
                 programs: bool = True, code: bool = False,
                 platform: str | None = None) -> tuple[list, list[str]]:
    """Every BPF object a file holds, and a line for each one skipped: a BPF object is
    itself; an ELF binary (executable or shared library, C, C++, Rust or Go) gives the objects
    embedded in it (:func:`bpfmem.parse.embedded.find_embedded`), each named
    ``BINARY:.rodata+0x38240`` or ``BINARY:<embedded file>`` and read with the loader the
    binary links (``loader`` None or ``"auto"``) or ``loader``. ParseError for a binary that
    carries none (naming the file), as for anything that is no BPF object. A container image
    (:func:`bpfmem.api.image.load_image`; ``platform`` picks one of a multi-platform index)
    gives every BPF object of its final filesystem."""
    from ..inputs import peek_input
    path = os.fspath(source)
    if is_image(path):
        from .image import load_image
        got = load_image(path, loader=loader, programs=programs, code=code, platform=platform)
        if not got.objects:
            raise ParseError("a container image carrying no BPF object" +
                             _why_none(got.skipped), path=path)
        return got.objects, got.skipped + [f"{path}: note: {n}" for n in got.image.notes]
    head = peek_input(path, 64, "binary")
    if head[:4] == b"\x7fELF" and not _bpf_head(head):
        from ..inputs import mapped_input
        with mapped_input(path, "binary") as data:
            return load_embedded(data, path, loader=loader, programs=programs, code=code)
    return [load_object(path, loader=loader, programs=programs, code=code)], []


def load_all(sources, *, loader: str | None = None, programs: bool = True,
             code: bool = False, platform: str | None = None) -> tuple[list, list[str]]:
    """:func:`load_objects` of every source, in order: (all the objects, what was skipped)."""
    specs, skipped = [], []
    for s in sources:
        got, sk = load_objects(s, loader=loader, programs=programs, code=code,
                               platform=platform)
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
        head = peek_input(path, 64, "binary")
        if head[:4] != b"\x7fELF" or _bpf_head(head):
            return False
        from ..inputs import mapped_input
        with mapped_input(path, "binary") as data:
            return bool(find_embedded(parse_image(data, path=path))[0])
    except (ParseError, OSError, BpfmemError):
        return False


def _bpf_head(head: bytes) -> bool:
    """An ELF header for EM_BPF (or EM_NONE): a BPF object, read as one."""
    machine = int.from_bytes(head[18:20], "little" if head[5:6] != b"\x02" else "big")
    return machine in (0, 247)


@dataclass(frozen=True)
class Carried:
    """What a binary carries, cut out of it: its BPF objects' bytes by where they were
    found, the loader the binary names (None: it does not say) and why, the libbpf
    skeleton's object name, what was skipped, and its machine."""
    objects: tuple[tuple[str, bytes], ...]
    loader: str | None
    reason: str
    skeleton: str | None
    skipped: tuple[str, ...]
    machine: str


def carried_by(data, path: str) -> Carried:
    """The BPF objects inside the ELF binary ``data`` (named ``path`` in errors), cut out;
    ParseError when it is no ELF file."""
    from ..parse.elf import _MACHINES, parse_image
    from ..parse.embedded import binary_loader, find_embedded, skeleton_name
    img = parse_image(data, path=path)
    found, skipped = find_embedded(img)
    machine = _MACHINES.get(img.machine, f"machine {img.machine}")
    if not found:
        return Carried((), None, "", None, tuple(skipped), machine)
    chosen, reason = binary_loader(img)
    skel = skeleton_name(img, path.rsplit("/", 1)[-1]) if chosen in (None, "libbpf") else None
    objects = tuple((e.where, bytes(img.buffer[e.offset:e.offset + e.size])) for e in found)
    return Carried(objects, chosen, reason, skel, tuple(skipped), machine)


def load_embedded(data, path: str, *, loader: str | None = None, programs: bool = True,
                  code: bool = False) -> tuple[list, list[str]]:
    """The BPF objects embedded in the binary ``data`` (named ``path``), and what was
    skipped; ParseError when it carries none."""
    return specs_of(carried_by(data, path), path, loader=loader, programs=programs, code=code)


def _object_name(where: str, base: str) -> str:
    """The object name of an embedded object not opened by a skeleton: an embedded file's
    stem (``objs/counter_bpfel.o``), a variable's name (``main._BpfBytes``), else the
    binary's."""
    from ..parse.objspec import object_name_from_path
    if where[:1] in (".", "+"):
        return object_name_from_path(base)
    if "/" in where or where.endswith(".o"):
        return object_name_from_path(where)
    return where.rsplit(".", 1)[-1][:15]


def specs_of(carried: Carried, path: str, *, loader: str | None = None, programs: bool = True,
             code: bool = False) -> tuple[list, list[str]]:
    """The specs of what a binary carries (:func:`carried_by`), each named
    ``path:<where>``, read with ``loader`` or, when None or ``"auto"``, the binary's."""
    from ..values import replace
    from ..parse.objspec import AUTO
    skipped = [f"{path}:{line}" for line in carried.skipped]
    if not carried.objects:
        raise ParseError(f"not a BPF object: an ELF binary for {carried.machine} that carries "
                         f"no BPF object{_why_none(skipped)}", path=path)
    if loader in (None, AUTO):
        chosen, reason = carried.loader, carried.reason
    else:
        chosen, reason = loader, f"--loader {loader}"
    skel = carried.skeleton if chosen in (None, "libbpf") else None
    base = path.rsplit("/", 1)[-1]
    out = []
    for where, raw in carried.objects:
        name = f"{path}:{where}"
        obj_name = skel or _object_name(where, base)
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
        spec = replace(spec, loader_reason=why, carrier=path)
        out.append(replace(got, spec=replace(got.spec, loader_reason=why, carrier=path))
                   if code else spec)
    if not out:
        raise ParseError(f"not a BPF object: an ELF binary whose BPF objects cannot be read"
                         f"{_why_none(skipped)}", path=path)
    return out, skipped


def _why_none(skipped: list[str]) -> str:
    return f" ({len(skipped)} skipped: {skipped[0]})" if skipped else ""
