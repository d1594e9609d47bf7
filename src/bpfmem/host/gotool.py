"""The toolchains bpfmem asks when the user has them: ``go list`` (why a package is linked)
and ``c++filt`` (demangling C++ and Rust names). The only code that runs them."""

from __future__ import annotations

import os
import shutil
import subprocess

from ..errors import HostError


def go_list_deps(src_dir: str, *, go: str | None = None, timeout: float = 300) -> str:
    """The text of ``go list -deps -json .`` run in ``src_dir`` (the main package's
    directory), with the user's Go environment."""
    go = go or os.environ.get("BPFMEM_GO") or shutil.which("go")
    if not go:
        raise HostError("--go-src needs the Go toolchain: `go` is not on PATH")
    if not os.path.isdir(src_dir):
        raise HostError(f"{src_dir}: not a directory (--go-src wants the main package's "
                        "directory)")
    try:
        r = subprocess.run([go, "list", "-deps", "-json", "."], cwd=src_dir,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise HostError(f"go list in {src_dir} took more than {timeout:.0f} s") from None
    except OSError as e:
        raise HostError(f"{go}: {e.strerror}") from None
    if r.returncode != 0:
        msg = (r.stderr.strip().splitlines() or ["failed"])[-1]
        raise HostError(f"go list in {src_dir}: {msg}")
    return r.stdout


def go_version(go: str | None = None, *, cwd: str | None = None) -> str | None:
    """The version of the Go toolchain ``go list`` runs with (``go env GOVERSION`` in
    ``cwd``, where a go.mod may select another), or None when it cannot say."""
    go = go or os.environ.get("BPFMEM_GO") or shutil.which("go")
    if not go:
        return None
    try:
        r = subprocess.run([go, "env", "GOVERSION"], cwd=cwd, capture_output=True, text=True,
                           timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    v = r.stdout.strip()
    return v if r.returncode == 0 and v.startswith("go") else None


def cxxfilt(names: list[str]) -> list[str]:
    """``names`` demangled by binutils' c++filt (C++ and Rust legacy ``_ZN...E``); the names
    unchanged when c++filt is not installed or fails."""
    tool = shutil.which("c++filt")
    want = [i for i, n in enumerate(names) if n.startswith(("_Z", "_R"))]
    if not tool or not want:
        return names
    try:
        r = subprocess.run([tool], input="\n".join(names[i] for i in want) + "\n",
                           capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return names
    out = r.stdout.split("\n")
    if r.returncode != 0 or len(out) < len(want):
        return names
    res = list(names)
    for i, d in zip(want, out):
        res[i] = d
    return res
