"""Debian packages for tests: ``apt-get download`` into a per-user cache, unpacked with
``dpkg-deb -x`` (never installed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path


def cache_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    d = root / "bpfmem-tests" / "debs"
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    return d


def unpacked(package: str) -> Path | None:
    """The directory Debian's ``package`` is unpacked in (downloaded once); None when apt
    cannot fetch it."""
    dest = cache_dir() / package
    if (dest / ".done").exists():
        return dest
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        return None
    with tempfile.TemporaryDirectory(prefix="bpfmem-deb-") as tmp:
        p = subprocess.run(["apt-get", "download", package], cwd=tmp, capture_output=True,
                           timeout=600)
        debs = list(Path(tmp).glob("*.deb"))
        if p.returncode != 0 or not debs:
            return None
        if dest.exists():
            shutil.rmtree(dest)
        subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(dest)], check=True, timeout=600)
        (dest / ".done").write_text(debs[0].name + "\n")
    return dest
