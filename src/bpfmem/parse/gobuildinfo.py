"""Is this executable a Go program, and which Go built it? (pure: bytes in)

The Go linker writes a build-info blob into every binary (the ``.go.buildinfo`` section on
ELF): a 32-byte header starting with the magic ``\\xff Go buildinf:`` (16-byte aligned), a
pointer size byte and a flags byte. Since Go 1.18 (flag bit 2, "version inline") the header
is followed by two varint-length-prefixed strings: the Go version (``go1.19.8``) and the
module info (``path``, ``mod``, ``dep`` and ``build`` lines between two 16-byte sentinels),
which is what ``go version -m`` prints. Older binaries store two pointers there instead; for
those only "a Go binary, version not read" is said (reading them needs the ELF's virtual
address map: see the full Go binary reader).

Minimal on purpose (version, main package path, main module, build settings), to be merged
into the Go binary reader later.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ParseError

__all__ = ["MAGIC", "GoBuildInfo", "find_buildinfo", "parse_go_buildinfo"]

MAGIC = b"\xff Go buildinf:"
_HEADER = 32
_FLAG_BIG_ENDIAN, _FLAG_INLINE = 1, 2


@dataclass(frozen=True)
class GoBuildInfo:
    version: str | None          # "go1.19.8"; None for a pre-1.18 binary (not read)
    path: str | None             # the main package ("github.com/prometheus/prometheus/cmd/...")
    module: str | None           # the main module and its version ("github.com/x/y v1.2.3")
    settings: dict = field(default_factory=dict)   # "build" lines: CGO_ENABLED, GOARCH...
    offset: int = 0              # of the magic in the bytes given
    ptr_size: int = 8
    big_endian: bool = False


def find_buildinfo(data) -> int:
    """Offset of the build-info header in ``data`` (bytes or an mmap), -1 when absent.
    The magic sits at a 16-byte aligned offset; an unaligned match is skipped."""
    i = data.find(MAGIC)
    while i >= 0 and i % 16:
        i = data.find(MAGIC, i + 1)
    return i


def _modinfo(text: str) -> tuple[str | None, str | None, dict]:
    """path, "module version" and build settings, decoded by the binary reader's
    (parse/gobin.py) module-info parser."""
    from .gobin import _modinfo as parse_modinfo
    # between two 16-byte sentinels, the last one preceded by a newline
    if len(text) >= 33 and text[-17] == "\n":
        text = text[16:-16]
    path, main, _deps, settings = parse_modinfo(text)
    module = f"{main.path} {main.version}" if main is not None else None
    return path or None, module, dict(settings)


def parse_go_buildinfo(data, offset: int | None = None) -> GoBuildInfo | None:
    """The build info of a Go binary's bytes (or mmap); None when it is not a Go binary.
    Raises ParseError when the header is there but broken."""
    i = find_buildinfo(data) if offset is None else offset
    if i < 0:
        return None
    end = min(len(data), i + _HEADER + (1 << 20))   # module info is a few KiB, not MiBs
    if len(data) < i + _HEADER:
        raise ParseError("Go build info header cut short", section=".go.buildinfo", offset=i)
    ptr_size, flags = data[i + 14], data[i + 15]
    if ptr_size not in (4, 8):
        raise ParseError(f"Go build info pointer size {ptr_size}", section=".go.buildinfo",
                         offset=i + 14)
    big = bool(flags & _FLAG_BIG_ENDIAN)
    if not flags & _FLAG_INLINE:
        return GoBuildInfo(None, None, None, {}, i, ptr_size, big)
    from .gobin import _varint_string
    version, pos = _varint_string(data, i + _HEADER, end, i)
    mod, _pos = _varint_string(data, pos, end, i)
    path, module, settings = _modinfo(mod)
    return GoBuildInfo(version or None, path, module, settings, i, ptr_size, big)
