"""The public library surface: what the CLI, tests and notebooks call.

>>> from bpfmem import api
>>> spec = api.load_object(api.example_object_path())
>>> [m.name for m in spec.maps][:2]   # doctest: +SKIP
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ParseError
from .parse.objspec import ObjectSpec, parse_object

EXAMPLE_OBJECT = "cni_datapath.bpf.o"


def example_object_path() -> Path:
    """The bundled example object: a small CNI-like datapath shipped with bpfmem."""
    return Path(__file__).resolve().parent / "examples" / EXAMPLE_OBJECT


def load_object(source: str | os.PathLike | bytes, *, name: str | None = None) -> ObjectSpec:
    """Parse a compiled BPF object from a path or from its bytes.

    Raises :class:`bpfmem.errors.ParseError` (naming the file) for anything that is not a
    BPF object a loader would accept, and ``OSError`` when the file cannot be read.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        return parse_object(bytes(source), name=name)
    path = os.fspath(source)
    with open(path, "rb") as f:
        data = f.read()
    try:
        return parse_object(data, path=path, name=name)
    except ParseError as e:
        raise e.with_path(path) from None


def load_objects(sources: list[str | os.PathLike]) -> list[ObjectSpec]:
    return [load_object(s) for s in sources]
