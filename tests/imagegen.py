"""Container images built offline with Python's tarfile, in the layouts tools write:
``docker save`` archives (manifest.json + <id>/layer.tar), OCI image layouts (oci-layout,
index.json, blobs/sha256/...) as a directory or a tar, multi-platform indexes. A layer is a
list of entries: ("file", path, bytes), ("dir", path), ("symlink", path, target),
("hardlink", path, target), ("whiteout", path), ("opaque", dir), ("raw", TarInfo, bytes)
and, alone in its layer, ("truncated", TarInfo, bytes): a header and less data than it says."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path


def layer_tar(entries, *, gz: bool = False) -> bytes:
    if entries and entries[0][0] == "truncated":    # a header whose data is not all there
        data = entries[0][1].tobuf(format=tarfile.PAX_FORMAT) + entries[0][2]
        return gzip.compress(data, mtime=0) if gz else data
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for e in entries:
            kind, path = e[0], e[1]
            if kind == "file":
                info = tarfile.TarInfo(path)
                info.size = len(e[2])
                info.mode = 0o755
                t.addfile(info, io.BytesIO(e[2]))
            elif kind == "dir":
                info = tarfile.TarInfo(path)
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                t.addfile(info)
            elif kind in ("symlink", "hardlink"):
                info = tarfile.TarInfo(path)
                info.type = tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE
                info.linkname = e[2]
                t.addfile(info)
            elif kind == "whiteout":
                d, _, base = path.rpartition("/")
                info = tarfile.TarInfo(f"{d}/.wh.{base}" if d else f".wh.{base}")
                t.addfile(info, io.BytesIO(b""))
            elif kind == "opaque":
                info = tarfile.TarInfo(f"{path.rstrip('/')}/.wh..wh..opq")
                t.addfile(info, io.BytesIO(b""))
            elif kind == "raw":           # a TarInfo made by the caller
                t.addfile(e[1], io.BytesIO(e[2]) if len(e) > 2 else None)
    data = buf.getvalue()
    return gzip.compress(data, mtime=0) if gz else data


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _add(t: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    t.addfile(info, io.BytesIO(data))


def docker_archive(path: Path, layers, tag: str = "agent:1") -> Path:
    """A ``docker save`` archive of ``layers`` (lists of entries)."""
    blobs = [layer_tar(layer) for layer in layers]
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "rootfs": {"type": "layers",
                                    "diff_ids": [_digest(b) for b in blobs]}}).encode()
    cid = hashlib.sha256(config).hexdigest()
    names = [f"{hashlib.sha256(b).hexdigest()[:12]}/layer.tar" for b in blobs]
    manifest = [{"Config": f"{cid}.json", "RepoTags": [tag], "Layers": names}]
    with tarfile.open(path, "w") as t:
        for n, b in zip(names, blobs):
            _add(t, n, b)
        _add(t, f"{cid}.json", config)
        _add(t, "manifest.json", json.dumps(manifest).encode())
    return path


def _oci_blobs(layers, gz: bool, arch: str = "amd64") -> tuple[dict[str, bytes], bytes]:
    """{digest: bytes} of a manifest, its config and layers; the manifest's bytes."""
    blobs: dict[str, bytes] = {}
    descs = []
    for layer in layers:
        b = layer_tar(layer, gz=gz)
        d = _digest(b)
        blobs[d] = b
        descs.append({"mediaType": "application/vnd.oci.image.layer.v1.tar" +
                      ("+gzip" if gz else ""), "digest": d, "size": len(b)})
    config = json.dumps({"architecture": arch, "os": "linux"}).encode()
    blobs[_digest(config)] = config
    manifest = json.dumps({"schemaVersion": 2,
                           "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": _digest(config), "size": len(config)},
                           "layers": descs}).encode()
    blobs[_digest(manifest)] = manifest
    return blobs, manifest


def oci_files(images: dict[str, list], *, gz: bool = True, nested: bool = False
              ) -> dict[str, bytes]:
    """The files of an OCI layout: ``images`` maps a platform ("linux/amd64") to its layers;
    several make a multi-platform image (``nested``: an image index blob that index.json
    points at, as buildkit writes it)."""
    files: dict[str, bytes] = {"oci-layout": b'{"imageLayoutVersion": "1.0.0"}'}
    manifests = []
    for plat, layers in images.items():
        os_, arch = plat.split("/")[:2]
        blobs, manifest = _oci_blobs(layers, gz, arch)
        for d, b in blobs.items():
            files["blobs/sha256/" + d.split(":")[1]] = b
        desc = {"mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": _digest(manifest), "size": len(manifest)}
        if len(images) > 1:
            desc["platform"] = {"os": os_, "architecture": arch}
        manifests.append(desc)
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": manifests}
    if nested:
        inner = json.dumps(index).encode()
        files["blobs/sha256/" + _digest(inner).split(":")[1]] = inner
        index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                 "manifests": [{"mediaType": "application/vnd.oci.image.index.v1+json",
                                "digest": _digest(inner), "size": len(inner)}]}
    files["index.json"] = json.dumps(index).encode()
    return files


def oci_dir(path: Path, images, **kw) -> Path:
    for name, data in oci_files(images, **kw).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(data)
    return path


def oci_tar(path: Path, images, **kw) -> Path:
    with tarfile.open(path, "w") as t:
        for name, data in oci_files(images, **kw).items():
            _add(t, name, data)
    return path
