"""bpfmem's project configuration: ``bpfmem.toml``, or ``[tool.bpfmem]`` in pyproject.toml.

    limit = "128Mi"            # the agent container's memory limit
    max_fraction = 0.5         # share of it the maps may take
    full = false               # judge maps when full instead of at create
    kernels = ["6.1", "6.18"]  # a matrix: the gate must hold on every kernel ...
    cpus = [2, 64]             # ... and every possible-CPU count
    [[kernels]]                # or the fleet's own kernels, from their BTF (instead of the
    name = "prod-6.1"          #   list above): struct sizes, eras and map types exact
    btf = "btf/6.1.0-57-cloud-amd64.btf"   # a path relative to this file
    cpus = [2, 96]             # possible CPUs of the nodes that run it (default: `cpus`)
    [[kernels]]
    name = "rhel9"
    btf = "btf/5.14.0-427.el9.x86_64.btf.tar.xz"
    [[kernels]]
    name = "6.12 table"
    release = "6.12"           # no BTF: the release table
    set = ["service_*.flags+=no_prealloc", "policy_map.count=110"]   # what-if
    loader = "cilium-ebpf"     # libbpf | cilium-ebpf | cilium-ebpf@0.9 | auto (the default)
    [objects]                  # limits per object (path or object name)
    "build/cni.bpf.o" = "96Mi"
    [maps]                     # caps per map
    conntrack_table = "32Mi"
    [dynamic]                  # Cilium-style dynamic sizing (--size-ratio/--node-memory)
    size_ratio = 0.0025
    node_memory = "64Gi"
    max = 16777216
    [dynamic.maps]
    ct_tcp = { default = 524288, min = 131072 }
    [binary]                   # binary-size gate (bpfmem check BINARY ...)
    max = "60Mi"               # any binary
    files = { "cilium-cni" = "24Mi" }      # per binary (path or file-name glob)
    modules = { "k8s.io/*" = "2Mi" }       # per module glob: their bytes in each binary
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .analysis.quantity import parse_size
from .errors import BpfmemError

KEYS = {"limit", "max_fraction", "full", "kernels", "cpus", "set", "objects", "maps",
        "dynamic", "binary", "loader"}
BINARY_KEYS = {"max", "files", "modules"}


class ConfigError(BpfmemError):
    pass


@dataclass(frozen=True)
class KernelEntry:
    """One ``[[kernels]]`` entry: a kernel of the fleet, by its BTF file or its release."""

    name: str
    release: str | None = None
    btf: str | None = None
    cpus: tuple[int, ...] = ()


@dataclass
class Config:
    path: str | None = None
    limit: int | None = None
    max_fraction: float | None = None
    full: bool | None = None
    kernels: list[str] = field(default_factory=list)
    kernel_entries: list[KernelEntry] = field(default_factory=list)
    cpus: list[int] = field(default_factory=list)
    sets: list[str] = field(default_factory=list)
    object_limits: dict[str, int] = field(default_factory=dict)
    map_caps: dict[str, int] = field(default_factory=dict)
    dynamic: dict[str, Any] = field(default_factory=dict)
    binary_max: int | None = None
    binary_files: dict[str, int] = field(default_factory=dict)
    binary_modules: dict[str, int] = field(default_factory=dict)
    loader: str | None = None


def find_config(start: str | os.PathLike = ".") -> Path | None:
    """bpfmem.toml, or a pyproject.toml with [tool.bpfmem], in ``start`` or a parent."""
    d = Path(start).resolve()
    for p in [d, *d.parents]:
        if (p / "bpfmem.toml").is_file():
            return p / "bpfmem.toml"
        pp = p / "pyproject.toml"
        if pp.is_file():
            try:
                if "bpfmem" in tomllib.loads(pp.read_text()).get("tool", {}):
                    return pp
            except (tomllib.TOMLDecodeError, OSError):
                pass
    return None


def load_config(path: str | os.PathLike | None = None) -> Config:
    """The configuration at ``path`` (or found from the current directory); an empty one if
    there is none. ConfigError names the file and what is wrong."""
    p = Path(path) if path is not None else find_config()
    if p is None:
        return Config()
    try:
        data = tomllib.loads(p.read_text())
    except OSError as e:
        raise ConfigError(f"{p}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: not valid TOML: {e}") from None
    if p.name == "pyproject.toml":
        data = data.get("tool", {}).get("bpfmem", {})
    unknown = set(data) - KEYS
    if unknown:
        raise ConfigError(f"{p}: unknown setting(s) {', '.join(sorted(unknown))}; "
                          f"known: {', '.join(sorted(KEYS))}")
    binary = data.get("binary", {})
    if not isinstance(binary, dict) or set(binary) - BINARY_KEYS:
        raise ConfigError(f"{p}: [binary] takes {', '.join(sorted(BINARY_KEYS))}")
    try:
        kernels = data.get("kernels", [])
        cpus = data.get("cpus", [])
        strings = kernels if isinstance(kernels, list) else [kernels]
        entries = [_kernel_entry(k, i, p) for i, k in enumerate(strings) if isinstance(k, dict)]
        return Config(
            path=str(p),
            kernel_entries=entries,
            limit=parse_size(data["limit"]) if "limit" in data else None,
            max_fraction=float(data["max_fraction"]) if "max_fraction" in data else None,
            full=bool(data["full"]) if "full" in data else None,
            kernels=[str(k) for k in strings if not isinstance(k, dict)],
            cpus=[int(c) for c in (cpus if isinstance(cpus, list) else [cpus])],
            sets=list(data.get("set", [])),
            object_limits={k: parse_size(v) for k, v in data.get("objects", {}).items()},
            map_caps={k: parse_size(v) for k, v in data.get("maps", {}).items()},
            dynamic=dict(data.get("dynamic", {})),
            binary_max=parse_size(binary["max"]) if "max" in binary else None,
            binary_files={k: parse_size(v) for k, v in binary.get("files", {}).items()},
            binary_modules={k: parse_size(v) for k, v in binary.get("modules", {}).items()},
            loader=_loader(data["loader"]) if "loader" in data else None)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{p}: {e}") from None


def _kernel_entry(d: dict, i: int, path: Path) -> KernelEntry:
    where = f"[[kernels]] entry {i + 1}"
    unknown = set(d) - {"name", "release", "btf", "cpus"}
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; known: "
                         "name, release, btf, cpus")
    if not d.get("btf") and not d.get("release"):
        raise ValueError(f"{where}: needs btf (a path) or release (e.g. \"6.1\")")
    for key in ("name", "release", "btf"):
        if key in d and not isinstance(d[key], str):
            raise ValueError(f"{where}: {key} must be a string")
    cpus = d.get("cpus", [])
    cpus = cpus if isinstance(cpus, list) else [cpus]
    if not all(isinstance(c, int) and not isinstance(c, bool) and 1 <= c <= 1 << 16
               for c in cpus):
        raise ValueError(f"{where}: cpus must be integers 1..65536")
    btf = d.get("btf")
    if btf is not None and not os.path.isabs(btf):
        btf = str(path.parent / btf)
    return KernelEntry(d.get("name") or d.get("release") or os.path.basename(btf or ""),
                       d.get("release"), btf, tuple(cpus))


def _loader(name: Any) -> str:
    from .parse.loader import get_loader
    if name == "auto":
        return name
    return get_loader(str(name)).name
