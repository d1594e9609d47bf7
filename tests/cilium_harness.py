"""Run tests/harness/cilium_maps (Debian's cilium/ebpf 0.9.1, built with Debian's Go) and
read its JSON Lines."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

HARNESS_DIR = Path(__file__).resolve().parent / "harness"
BINARY = HARNESS_DIR / "cilium_maps"
GOPATH_SRC = Path("/usr/share/gocode/src/github.com/cilium/ebpf")


def ensure_built() -> Path | None:
    """Build the harness if needed; None when go or golang-github-cilium-ebpf-dev is missing."""
    src = HARNESS_DIR / "cilium_maps.go"
    if BINARY.exists() and BINARY.stat().st_mtime >= src.stat().st_mtime:
        return BINARY
    if shutil.which("go") is None or not GOPATH_SRC.is_dir():
        return None
    subprocess.run(["sh", str(HARNESS_DIR / "build_cilium.sh")], check=True, timeout=600)
    return BINARY


def run(mode: str, *paths: str) -> tuple[int, dict[str, list[dict]]]:
    """(exit status, {object path: its lines}) of ``cilium_maps MODE PATHS``."""
    p = subprocess.run([str(BINARY), mode, *paths], capture_output=True, text=True,
                       timeout=300)
    out: dict[str, list[dict]] = {path: [] for path in paths}
    for line in p.stdout.splitlines():
        if line.strip():
            d = json.loads(line)
            out.setdefault(d["object"], []).append(d)
    return p.returncode, out
