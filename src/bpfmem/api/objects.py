"""Compiled BPF objects: the bundled example, parsing one as a loader reads it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..errors import ParseError
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
