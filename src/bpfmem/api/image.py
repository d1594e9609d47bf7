"""Container images in: every BPF object and every binary carrying one in the image's final
filesystem (:mod:`bpfmem.parse.image`), each object read as the binary's loader does and
named by image, layer and path (``agent.tar@layer2:/usr/bin/agent:.rodata+0x38240``)."""

from __future__ import annotations

import os
from contextlib import ExitStack
from dataclasses import dataclass

from typing import TYPE_CHECKING

from ..errors import ParseError
from ..inputs import open_input
from .objects import is_image  # noqa: F401  (the test of what this module reads)

if TYPE_CHECKING:
    from ..parse.image import ImageContents


@dataclass(frozen=True)
class ImageObjects:
    """An image's BPF objects (specs, or ObjectCode with ``code``), what was skipped, and
    the image read (its files: BPF objects and binaries carrying them)."""
    objects: list
    skipped: list[str]
    image: "ImageContents"


class _DirSource:
    """An OCI layout directory: each blob opened through the input door."""

    def __init__(self, root: str, stack: ExitStack):
        self.name = root
        self.root = root
        self.stack = stack

    def open(self, name: str):
        if name.startswith("/") or ".." in name.split("/"):
            return None
        path = os.path.join(self.root, name)
        if not os.path.lexists(path):
            return None
        fd, size = open_input(path, "image")
        return self.stack.enter_context(os.fdopen(fd, "rb")), size


def _examine(path: str, size: int, head: bytes, stream):
    """What the image keeps of an ELF file: a BPF object's bytes, a binary's carried
    objects (None for a binary carrying none, and for what is no readable ELF; a string
    when it is cut short)."""
    from ..host.spool import CutShort, whole
    from .objects import _bpf_head, carried_by
    try:
        with whole(head, stream, size) as data:
            if _bpf_head(head):
                return ("object", bytes(data))
            try:
                carried = carried_by(data, path)
            except ParseError:
                return None
    except CutShort as e:
        return f"cut short in its layer ({e})"
    return ("binary", carried) if carried.objects or carried.skipped else None


def _host_platform() -> str:
    from platform import machine
    m = machine()
    return "linux/" + {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}.get(m, m)


def _read(name: str, examine, platform: str | None) -> "ImageContents":
    from ..parse.image import TarSource, read_image
    with ExitStack() as stack:
        if os.path.isdir(name):
            src = _DirSource(name, stack)
        else:
            fd, _ = open_input(name, "image")
            src = TarSource(stack.enter_context(os.fdopen(fd, "rb")), name)
        try:
            return read_image(src, examine, platform=platform, prefer=_host_platform())
        except ParseError as e:
            raise e.with_path(name) from None


def read_image_path(path: str | os.PathLike, *, platform: str | None = None) -> "ImageContents":
    """The image at ``path`` (an OCI layout directory, or a docker save / oci-archive tar)
    with its layers applied, its ELF files examined."""
    return _read(os.fspath(path), _examine, platform)


def load_image(path: str | os.PathLike, *, loader: str | None = None, programs: bool = True,
               code: bool = False, platform: str | None = None) -> ImageObjects:
    """Every BPF object of the image at ``path``: BPF object files as they are, binaries'
    embedded objects as the binary's loader reads them (or ``loader``)."""
    from .objects import specs_of
    from ..parse.objspec import AUTO, parse_object, parse_object_code
    image = read_image_path(path, platform=platform)
    label = os.path.basename(os.fspath(path).rstrip("/")) or os.fspath(path)
    objects, skipped = [], [f"{label}: {line}" for line in image.skipped]
    for f in image.files:
        name = f"{label}@layer{f.layer}:{f.path}"
        kind, what = f.result
        try:
            if kind == "object":   # named by its place: libbpf's object name from the file's
                if code:
                    objects.append(parse_object_code(what, path=name, loader=loader or AUTO))
                else:
                    objects.append(parse_object(what, path=name, loader=loader or AUTO,
                                                programs=programs))
            elif not what.objects:       # only objects it could not cut out
                skipped += [f"{name}:{line}" for line in what.skipped]
            else:
                got, sk = specs_of(what, name, loader=loader, programs=programs, code=code)
                objects += got
                skipped += sk
        except ParseError as e:
            skipped.append(f"{name}: {e.what}: skipped")
    return ImageObjects(objects, skipped, image)



def image_binary_sizes(path: str | os.PathLike, *, platform: str | None = None,
                       demangle: bool = True) -> list:
    """A :class:`~bpfmem.analysis.size.SizeReport` for each binary of the image's final
    filesystem that carries a BPF object (the agent's binaries), named
    ``IMAGE@layerN:/path``; ParseError when there is none."""
    from dataclasses import replace
    from ..host.spool import CutShort, whole
    from .objects import _bpf_head, carried_by
    from .size import cxxfilt, size_report
    name = os.fspath(path)
    label = os.path.basename(name.rstrip("/")) or name

    def examine(p: str, size: int, head: bytes, stream):
        if _bpf_head(head):
            return None
        try:
            with whole(head, stream, size) as data:
                if not carried_by(data, p).objects:
                    return None
                return size_report(data, path=p, demangle=cxxfilt if demangle else None)
        except CutShort as e:
            return f"cut short in its layer ({e})"
        except ParseError:
            return None

    image = _read(name, examine, platform)
    reports = [replace(f.result, path=f"{label}@layer{f.layer}:{f.path}") for f in image.files]
    if not reports:
        raise ParseError("a container image with no binary carrying a BPF object", path=name)
    return reports
