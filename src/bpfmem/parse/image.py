"""Container images as shipped: a ``docker save`` archive or an OCI image layout (a
directory or a tar of one, as ``skopeo copy oci:`` and ``podman save --format oci-archive``
write them), read without unpacking anything to disk.

The image's manifest is found (``index.json``, an image index picked by platform, or
``manifest.json`` of a docker archive); its layers are applied in order as a container
runtime applies them, in memory: each layer streamed once through :mod:`tarfile` (gzip
layers decompressed on the fly), whiteouts honoured (``.wh.NAME`` removes NAME from the layers
below, ``.wh..wh..opq`` empties its directory of them), a later file replacing an earlier
one, parent directories that are symlinks followed inside the image's root (40 links at
most, as Linux does). ``examine(path, size, head, stream)`` is called for each regular ELF
file as its layer is read (``head``: its first 64 bytes, ``stream`` the rest); what it
returns is kept for the files of the final filesystem only (a string: why it was skipped).

Bounded: member names that leave the root (``../x``), links that loop, files over the
limit, a layer that decompresses to more than :data:`MAX_LAYER_BYTES` or far more than its
compressed size (a gzip bomb), more than :data:`MAX_MEMBERS` entries: each skipped (or the
layer stopped) with a line saying so, never an exception other than ParseError for an
image that cannot be read at all.
"""

from __future__ import annotations

import gzip
import io
import json
import posixpath
import tarfile
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from ..errors import ParseError

__all__ = ["BlobSource", "TarSource", "ImageFile", "ImageContents", "read_image",
           "is_image_archive", "MAX_LAYER_BYTES", "MAX_MEMBERS", "MAX_FILE"]

#: what one layer may decompress to, and how many entries an image may have
MAX_LAYER_BYTES = 16 << 30
MAX_MEMBERS = 500_000       # a full distribution image has ~10^5 files; ~250 bytes each here
#: the largest ELF file whose bytes are read (a bigger one is skipped, said in a line)
MAX_FILE = 512 << 20
#: a gzip layer decompressing past this many times its size (and past 256 MiB) is a bomb
MAX_RATIO = 200
_MAX_LINKS = 40
_JSON_MAX = 8 << 20

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"


class BlobSource(Protocol):
    """Where an image's files are: ``open(name)`` a readable binary stream and its size (or
    None when absent)."""
    name: str

    def open(self, name: str) -> tuple[Any, int] | None: ...


class TarSource:
    """The files of an image tar (docker save, oci-archive): its members' headers read once
    (tarfile seeks over the data), each opened in place on demand."""

    def __init__(self, fileobj, name: str):
        self.name = name
        try:
            self.tar = tarfile.open(fileobj=fileobj, mode="r:")
            self.members: dict[str, tarfile.TarInfo] = {}
            for i, m in enumerate(self.tar):
                if i >= MAX_MEMBERS:
                    raise ParseError(f"more than {MAX_MEMBERS} entries: not an image archive")
                if m.isfile():
                    self.members[posixpath.normpath(m.name.lstrip("/"))] = m
        except (tarfile.TarError, EOFError, OSError) as e:
            raise ParseError(f"not a tar archive ({e})", path=name) from None
        self.tar.members = []   # the index above is ours; tarfile's list is not needed

    def open(self, name: str):
        m = self.members.get(posixpath.normpath(name))
        if m is None:
            return None
        return self.tar.extractfile(m), m.size


def is_image_archive(head: bytes) -> bool:
    """Whether ``head`` (the first 512 bytes of a file) is a tar header."""
    return len(head) >= 512 and head[257:262] == b"ustar"


@dataclass(frozen=True)
class ImageFile:
    """A file of the final filesystem that ``examine`` kept a result for."""
    path: str               # absolute in the image ("/usr/sbin/execsnoop")
    layer: int              # 1-based index of the layer that wrote it
    digest: str             # that layer's blob digest ("sha256:...") or path in the archive
    size: int
    result: Any


@dataclass(frozen=True)
class ImageContents:
    name: str
    platform: str | None
    layers: tuple[str, ...]
    files: tuple[ImageFile, ...]
    skipped: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    entries: int = 0        # entries kept of the final filesystem (links, examined files)


def _json(src: BlobSource, name: str, what: str):
    got = src.open(name)
    if got is None:
        return None
    f, size = got
    if size > _JSON_MAX:
        raise ParseError(f"{what} {name}: {size} bytes, not a manifest", path=src.name)
    try:
        return json.loads(f.read(_JSON_MAX + 1))
    except (ValueError, UnicodeDecodeError) as e:
        raise ParseError(f"{what} {name}: not JSON ({e})", path=src.name) from None


def _blob_name(digest: str) -> str:
    algo, _, hexd = str(digest).partition(":")
    if not algo.isalnum() or not hexd.isalnum():
        raise ParseError(f"a bad blob digest {digest!r}")
    return f"blobs/{algo}/{hexd}"


def _platform_of(desc: dict) -> str:
    p = desc.get("platform") or {}
    s = f"{p.get('os', '?')}/{p.get('architecture', '?')}"
    return s + (f"/{p['variant']}" if p.get("variant") else "")


def _layers(src: BlobSource, platform: str | None, notes: list[str], prefer: str | None = None
            ) -> tuple[list[tuple[str, str, str]], str | None]:
    """[(blob name, digest, media type)] of the image's layers in order, and the platform
    chosen."""
    index = _json(src, "index.json", "image index")
    if index is not None:
        desc = _pick(src, index, platform, notes, prefer)
        chosen = _platform_of(desc) if desc.get("platform") else None
        manifest = _json(src, _blob_name(desc.get("digest", "")), "manifest")
        while manifest is not None and manifest.get("mediaType") in (OCI_INDEX, DOCKER_LIST) \
                or manifest is not None and "manifests" in manifest:
            desc = _pick(src, manifest, platform, notes, prefer)
            chosen = _platform_of(desc) if desc.get("platform") else chosen
            manifest = _json(src, _blob_name(desc.get("digest", "")), "manifest")
        if manifest is None:
            raise ParseError("the image index names a manifest the layout does not hold",
                             path=src.name)
        layers = manifest.get("layers") or []
        return [(_blob_name(d.get("digest", "")), str(d.get("digest", "")),
                 str(d.get("mediaType", ""))) for d in layers], chosen
    docker = _json(src, "manifest.json", "docker manifest")
    if isinstance(docker, list) and docker:
        if len(docker) > 1:
            notes.append(f"the archive holds {len(docker)} images: the first "
                         f"({', '.join(docker[0].get('RepoTags') or []) or 'untagged'}) is read")
        if platform:
            notes.append("a docker archive holds one platform: --platform is not used")
        return [(str(p), str(p), "") for p in docker[0].get("Layers") or []], None
    raise ParseError("not a container image: no index.json (OCI layout) or manifest.json "
                     "(docker save)", path=src.name)


def _pick(src: BlobSource, index: dict, platform: str | None, notes: list[str],
          prefer: str | None = None) -> dict:
    manifests = [m for m in index.get("manifests") or [] if isinstance(m, dict)]
    # attestation manifests (buildkit) are not images
    images = [m for m in manifests
              if (m.get("annotations") or {}).get("vnd.docker.reference.type") !=
              "attestation-manifest"]
    if not images:
        raise ParseError("the image index lists no image", path=src.name)
    nested = [m for m in images if m.get("mediaType") in (OCI_INDEX, DOCKER_LIST)
              and not m.get("platform")]
    if len(images) == 1 and nested:      # an index of an index (buildkit): look inside
        return images[0]
    if platform:
        want = platform.strip("/").split("/")
        hits = [m for m in images if _platform_of(m).split("/")[:len(want)] == want]
        if not hits:
            raise ParseError(f"no image for platform {platform} (the index has "
                             f"{', '.join(_platform_of(m) for m in images)})", path=src.name)
        return hits[0]
    if len(images) > 1:
        hits = [m for m in images if prefer and _platform_of(m).startswith(prefer)]
        pick = hits[0] if hits else images[0]
        notes.append(f"a multi-platform image ({', '.join(_platform_of(m) for m in images)}): "
                     f"{_platform_of(pick)} read (--platform for another)")
        return pick
    return images[0]


class _Counted(io.RawIOBase):
    """A stream that refuses to give more than ``limit`` bytes (a bomb stops here)."""

    def __init__(self, f, limit: int, what: str):
        self.f, self.limit, self.what, self.n = f, limit, what, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self.f.read(len(b))
        self.n += len(data)
        if self.n > self.limit:
            raise _Bomb(self.what)
        b[:len(data)] = data
        return len(data)


class _Bomb(Exception):
    pass


@dataclass(slots=True)
class _Entry:
    kind: str                 # "file" | "dir" | "link" (symlink)
    layer: int
    digest: str = ""
    size: int = 0
    target: str = ""
    result: Any = None


@dataclass
class _Fs:
    entries: dict[str, _Entry] = field(default_factory=dict)
    children: dict[str, set[str]] = field(default_factory=dict)

    def add(self, path: str, e: _Entry) -> None:
        old = self.entries.get(path)
        if old is not None and old.kind == "dir" and e.kind == "dir":
            old.layer = e.layer
            return
        if old is not None:
            self.remove(path)
        self.entries[path] = e
        parent = posixpath.dirname(path)
        self.children.setdefault(parent, set()).add(path)
        while parent != "/" and parent not in self.entries:
            self.entries[parent] = _Entry("dir", e.layer)
            grand = posixpath.dirname(parent)
            self.children.setdefault(grand, set()).add(parent)
            parent = grand

    def remove(self, path: str, below: int | None = None) -> None:
        """Remove ``path`` and what is under it (only what layers before ``below`` wrote,
        when given: an opaque directory keeps its own layer's files)."""
        stack = [path]
        while stack:
            p = stack.pop()
            stack += list(self.children.get(p, ()))
            e = self.entries.get(p)
            if e is None or (below is not None and e.layer >= below):
                continue
            del self.entries[p]
            self.children.get(posixpath.dirname(p), set()).discard(p)
            self.children.pop(p, None) if below is None else None

    def resolve_parent(self, path: str) -> str | None:
        """``path`` with its directories' symlinks followed inside the root; None for a
        loop (more than 40 links)."""
        parts = [p for p in path.split("/") if p]
        out = "/"
        hops = 0
        i = 0
        while i < len(parts) - 1:
            cand = posixpath.join(out, parts[i])
            e = self.entries.get(cand)
            if e is not None and e.kind == "link":
                hops += 1
                if hops > _MAX_LINKS:
                    return None
                target = e.target
                base = "/" if target.startswith("/") else out
                rest = [p for p in target.split("/") if p]
                parts = rest + parts[i + 1:]
                out, i = base, 0
                out = _clamp(out)
                continue
            out = _clamp(cand)
            i += 1
        return _clamp(posixpath.join(out, parts[-1])) if parts else "/"


def _clamp(path: str) -> str:
    """A path normalised inside the root: ``..`` stops at ``/`` (as in a chroot)."""
    out: list[str] = []
    for p in path.split("/"):
        if p in ("", "."):
            continue
        if p == "..":
            if out:
                out.pop()
            continue
        out.append(p)
    return "/" + "/".join(out)


def _member_path(name: str) -> str | None:
    """The absolute path a layer member names; None when it leaves the root (``../x``)."""
    parts = []
    for p in name.split("/"):
        if p in ("", "."):
            continue
        if p == "..":
            if not parts:
                return None
            parts.pop()
            continue
        parts.append(p)
    return "/" + "/".join(parts)


def read_image(src: BlobSource, examine: Callable[[str, int, bytes, Any], Any], *,
               platform: str | None = None, prefer: str | None = None,
               max_file: int = MAX_FILE) -> ImageContents:
    """The image in ``src`` with its layers applied; ``examine(path, size, head, stream)`` on
    each regular file whose first bytes are an ELF header. ``platform`` ("linux/arm64") picks an image of
    a multi-platform index; without it, ``prefer`` (the host's), else the first."""
    notes: list[str] = []
    skipped: list[str] = []
    try:
        layers, chosen = _layers(src, platform, notes, prefer)
    except (AttributeError, TypeError, KeyError) as e:   # a manifest of the wrong shape
        raise ParseError(f"a malformed image manifest ({type(e).__name__}: {e})",
                         path=src.name) from None
    fs = _Fs()
    members = 0
    for n, (blob, digest, media) in enumerate(layers, 1):
        got = src.open(blob)
        short = digest[:19] if digest.startswith("sha256:") else digest
        where = f"layer {n} ({short})"
        if got is None:
            raise ParseError(f"{where}: the image names a layer it does not hold", path=src.name)
        f, size = got
        if "zstd" in media:
            skipped.append(f"{where}: a zstd layer, which bpfmem cannot decompress: skipped")
            continue
        try:
            members = _apply(fs, f, size, n, digest, where, examine, max_file, members,
                             skipped)
        except _Bomb as e:
            skipped.append(f"{where}: {e}: the rest of the layer skipped")
        except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile, ValueError) as e:
            skipped.append(f"{where}: not a readable layer ({e}): the rest of it skipped")
    files = tuple(ImageFile(p, e.layer, e.digest, e.size, e.result)
                  for p, e in sorted(fs.entries.items())
                  if e.kind == "file" and e.result is not None)
    return ImageContents(src.name, chosen, tuple(d for _, d, _ in layers), files,
                         tuple(skipped), tuple(notes), len(fs.entries))


def _apply(fs: _Fs, f, size: int, n: int, digest: str, where: str, examine, max_file: int,
           members: int, skipped: list[str]) -> int:
    head = f.read(2)
    f.seek(0)
    stream = f
    gz = head == b"\x1f\x8b"
    if gz:
        stream = gzip.GzipFile(fileobj=f, mode="rb")
    limit = min(MAX_LAYER_BYTES, max(256 << 20, size * MAX_RATIO)) if gz else MAX_LAYER_BYTES
    from ..units import format_size as qty
    what = (f"decompresses to more than {qty(limit)} from {qty(size)} (a gzip bomb)" if gz else
            f"more than {qty(limit)}")
    counted = io.BufferedReader(_Counted(stream, limit, what), 1 << 16)
    tar = tarfile.open(fileobj=counted, mode="r|")
    while True:
        m = tar.next()
        if m is None:
            break
        tar.members.clear()     # tarfile keeps every header read: we keep what matters
        members += 1
        if members > MAX_MEMBERS:
            raise _Bomb(f"more than {MAX_MEMBERS} entries in the image")
        path = _member_path(m.name)
        if path is None:
            skipped.append(f"{where}: {m.name!r} leaves the image's root: skipped")
            continue
        if path == "/":
            continue
        path = fs.resolve_parent(path)
        if path is None:
            skipped.append(f"{where}: {m.name}: a symlink loop in its directories: skipped")
            continue
        base = posixpath.basename(path)
        parent = posixpath.dirname(path)
        if base == ".wh..wh..opq":
            for child in list(fs.children.get(parent, ())):
                fs.remove(child, below=n)
            continue
        if base.startswith(".wh."):
            fs.remove(posixpath.join(parent, base[4:]), below=n)
            continue
        # only what can matter is kept: symlinks (paths resolve through them), files
        # examine kept a result for, and whatever replaces something kept; a plain file or
        # directory that replaces nothing costs no memory (10^5-file layers stay small)
        if m.isdir():
            old = fs.entries.get(path)
            if old is not None and old.kind != "dir":
                fs.add(path, _Entry("dir", n, digest))
        elif m.issym():
            fs.add(path, _Entry("link", n, digest, target=m.linkname))
        elif m.islnk():
            target = _member_path(m.linkname)
            if target is None:
                skipped.append(f"{where}: {m.name}: a hard link to {m.linkname!r}, outside "
                               "the image's root: skipped")
                continue
            src = fs.entries.get(target)
            if src is not None and src.kind == "file":
                fs.add(path, _Entry("file", n, digest, src.size, result=src.result))
            elif path in fs.entries:
                fs.add(path, _Entry("file", n, digest))
        elif m.isfile():
            result = None
            if m.size >= 64:
                r = tar.extractfile(m)
                first = r.read(64) if r is not None else b""
                if first[:4] == b"\x7fELF":
                    if m.size > max_file:
                        from ..units import format_size as qty
                        skipped.append(f"{where}: {path}: an ELF file of {qty(m.size)}, over "
                                       f"the limit of {qty(max_file)}: skipped")
                    else:
                        result = examine(path, m.size, first, r)
                        if isinstance(result, str):      # why it was skipped
                            skipped.append(f"{where}: {path}: {result}: skipped")
                            result = None
            if result is not None or path in fs.entries:
                fs.add(path, _Entry("file", n, digest, m.size, result=result))
        # devices, FIFOs: not files an agent ships
    return members
