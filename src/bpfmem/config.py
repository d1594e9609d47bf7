"""bpfmem's project configuration: ``bpfmem.toml``, or ``[tool.bpfmem]`` in pyproject.toml.

Every key, with what it means, is in ``bpfmem.toml.example`` at the root of the repository
(a file the test suite loads with :func:`load_config`, so it stays valid)."""

from __future__ import annotations

import os
from .values import dataclass, field

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any
    from pathlib import Path

from .errors import BpfmemError, InputError
from .inputs import load_toml, read_input
from .parse.document import Fields

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
    """The settings of a bpfmem.toml (or [tool.bpfmem]): limits, kernels, CPUs, what-ifs."""

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
    """bpfmem.toml, or a pyproject.toml with [tool.bpfmem], in ``start`` or a parent. A file
    found on the way that this user or root does not own, that others may write, or that lies
    in a directory others may write (group or world writable, unless sticky and this user's
    or root's: then only its owner may replace it) is passed over with a warning on stderr:
    another user's file must not set root's limits."""
    # os.path, not pathlib, for the walk up: most runs find nothing, and pathlib (with
    # urllib.parse and ipaddress) would be imported for nothing
    d = os.path.realpath(start)
    while True:
        toml = os.path.join(d, "bpfmem.toml")
        if os.path.isfile(toml) and _trusted(toml):
            from pathlib import Path
            return Path(toml)
        pp = os.path.join(d, "pyproject.toml")
        if os.path.isfile(pp) and _trusted(pp, quiet=True):
            try:
                # through the door: bounded (1 MiB), no FIFO; none: no TOML parser
                found = b"bpfmem" in read_input(pp, "config")
                if found:
                    tool = load_toml(pp).get("tool", {})
                    if isinstance(tool, dict) and "bpfmem" in tool:
                        from pathlib import Path
                        return Path(pp)
            except (InputError, OSError):
                pass
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def untrusted_reason(path: str, *, uid: int | None = None) -> str | None:
    """Why the configuration file ``path`` found on the walk up must not be used (owned by
    neither ``uid``, this user by default, nor root; its directory writable by group or
    others), or None when it may be."""
    import stat
    me = os.geteuid() if uid is None else uid
    try:
        st = os.stat(path)
        dst = os.stat(os.path.dirname(path) or ".")
    except OSError as e:
        return e.strerror or str(e)
    if st.st_uid not in (me, 0):
        return f"owned by uid {st.st_uid}, neither this user ({me}) nor root"
    sticky = dst.st_mode & stat.S_ISVTX and dst.st_uid in (me, 0)
    if dst.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not sticky:
        who = "others" if dst.st_mode & stat.S_IWOTH else "its group"
        return (f"its directory is writable by {who} (mode {stat.S_IMODE(dst.st_mode):o}, "
                "not sticky), who may have put it there")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _trusted(path: str, *, quiet: bool = False) -> bool:
    why = untrusted_reason(path)
    if why is None:
        return True
    if not quiet or _mentions_bpfmem(path):
        import sys
        print(f"bpfmem: warning: {path} not read: {why}", file=sys.stderr)
    return False


def _mentions_bpfmem(path: str) -> bool:
    try:
        return b"bpfmem" in read_input(path, "config")
    except (InputError, OSError):
        return False


def load_config(path: str | os.PathLike | None = None) -> Config:
    """The configuration at ``path`` (or found from the current directory); an empty one if
    there is none. ConfigError names the file and what is wrong."""
    if path is None:
        p = find_config()
        if p is None:
            return Config()
    else:
        from pathlib import Path
        p = Path(path)
    try:
        data = load_toml(p)
    except InputError as e:
        raise ConfigError(str(e)) from None
    if p.name == "pyproject.toml":
        data = data.get("tool", {}).get("bpfmem", {})
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: [tool.bpfmem] must be a table")
    try:
        return _decode(data, str(p))
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


def parse_config(text: str, path: str = "bpfmem.toml") -> Config:
    """A Config from the text of a bpfmem.toml (pure: :func:`load_config` reads the file)."""
    import tomllib
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply") from None
    try:
        return _decode(data, path)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{path}: {e}") from None


def _size_field(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"{name}: expected a size such as \"128Mi\", not {value!r:.40}")
    from .units import parse_size   # only a config with sizes needs Decimal
    try:
        return parse_size(value if isinstance(value, str) else str(value))
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None


def _one_or_list(value: Any, name: str, kind, label: str) -> list:
    items = value if isinstance(value, list) else [value]
    for i, v in enumerate(items):
        if isinstance(v, bool) or not isinstance(v, kind):
            raise ValueError(f"{name}[{i}]: expected {label}, not {v!r:.40}")
    return items


def _dynamic(f: Fields) -> dict[str, Any]:
    """[dynamic]: size_ratio, node_memory, max and [dynamic.maps] name = {default, min}."""
    out: dict[str, Any] = {}
    unknown = set(f.value) - {"size_ratio", "node_memory", "max", "maps"}
    if unknown:
        raise ValueError(f"{f.where}: unknown setting(s) {', '.join(sorted(unknown))}")
    ratio = f.number("size_ratio", None)
    if ratio is not None:
        if not 0 < ratio <= 1:
            raise ValueError(f"{f.where}.size_ratio: must be in (0, 1], not {ratio}")
        out["size_ratio"] = ratio
    if f.has("node_memory"):
        _size_field(f.value["node_memory"], f"{f.where}.node_memory")
        out["node_memory"] = str(f.value["node_memory"])
    if f.has("max"):
        out["max"] = f.uint("max", bits=32)
    maps = f.object("maps")
    if maps.value:
        out["maps"] = {}
        for name in maps.value:
            m = maps.object(name)
            out["maps"][name] = {"default": m.uint("default", bits=32),
                                 "min": m.uint("min", 0, 32)}
    return out


def _decode(data: dict, path: str) -> Config:
    """A Config from a decoded TOML table; ValueError names the field that is wrong."""
    unknown = set(data) - KEYS
    if unknown:
        raise ValueError(f"unknown setting(s) {', '.join(sorted(unknown))}; "
                         f"known: {', '.join(sorted(KEYS))}")
    f = Fields(data)
    binary = f.object("binary")
    if set(binary.value) - BINARY_KEYS:
        raise ValueError(f"[binary] takes {', '.join(sorted(BINARY_KEYS))}")
    fraction = f.number("max_fraction", None)
    if fraction is not None and not 0 < fraction <= 1:
        raise ValueError(f"max_fraction: must be in (0, 1], not {fraction}")
    cpus = _one_or_list(data.get("cpus", []), "cpus", int, "an integer")
    for c in cpus:
        if not 1 <= c <= 1 << 16:
            raise ValueError(f"cpus: {c} is not a CPU count in 1..65536")
    listed = data.get("kernels", [])
    listed = listed if isinstance(listed, list) else [listed]
    from pathlib import Path
    entries = [_kernel_entry(k, i, Path(path)) for i, k in enumerate(listed)
               if isinstance(k, dict)]
    for i, k in enumerate(listed):
        if isinstance(k, (int, float)) and not isinstance(k, bool):
            # TOML reads 6.10 as the float 6.1: a release is a string
            raise ValueError(f"kernels[{i}]: {k!r} is a number; write releases as strings "
                             '(kernels = ["6.1", "6.10"]: TOML reads 6.10 as 6.1)')
    kernels = _one_or_list([k for k in listed if not isinstance(k, dict)],
                           "kernels", str, 'a release such as "6.1"')
    sets = f.texts("set")
    objects, maps, dynamic = f.object("objects"), f.object("maps"), f.object("dynamic")
    return Config(
        path=path, kernel_entries=entries,
        limit=_size_field(data["limit"], "limit") if "limit" in data else None,
        max_fraction=fraction, full=f.flag("full", None), kernels=kernels,
        cpus=cpus, sets=sets,
        object_limits={k: _size_field(v, f"objects.{k}") for k, v in objects.value.items()},
        map_caps={k: _size_field(v, f"maps.{k}") for k, v in maps.value.items()},
        dynamic=_dynamic(dynamic),
        binary_max=(_size_field(binary.value["max"], "binary.max")
                    if binary.has("max") else None),
        binary_files={k: _size_field(v, f"binary.files.{k}")
                      for k, v in binary.object("files").value.items()},
        binary_modules={k: _size_field(v, f"binary.modules.{k}")
                        for k, v in binary.object("modules").value.items()},
        loader=_loader(f.text("loader")) if f.has("loader") else None)
