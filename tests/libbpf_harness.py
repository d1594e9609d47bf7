"""Run tests/harness/libbpf_maps (Debian's libbpf) and read its JSON Lines."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

HARNESS_DIR = Path(__file__).resolve().parent / "harness"
BINARY = HARNESS_DIR / "libbpf_maps"


def ensure_built() -> Path | None:
    """Build the harness if needed; None when gcc or libbpf-dev is missing."""
    src = HARNESS_DIR / "libbpf_maps.c"
    if BINARY.exists() and BINARY.stat().st_mtime >= src.stat().st_mtime:
        return BINARY
    if shutil.which("gcc") is None or not Path("/usr/include/bpf/libbpf.h").exists():
        return None
    subprocess.run(["sh", str(HARNESS_DIR / "build.sh")], check=True)
    return BINARY


def run(mode: str, *args: str, stdin: str | None = None) -> tuple[int, list[dict]]:
    """(exit status, parsed lines) of ``libbpf_maps MODE ARGS``."""
    p = subprocess.run([str(BINARY), mode, *args], input=stdin, capture_output=True, text=True,
                       timeout=120)
    lines = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    return p.returncode, lines
