"""Memory cgroups on v1 and v2: what a cgroup uses, and which cgroup a pid or container is in.

Each ``parse_*`` is pure (text in, values out); each ``read_*``/resolver takes ``root`` (default
``/``) so tests can point it at a captured tree. Directories returned (``fs_path``) are absolute
paths *as seen inside root* (``/sys/fs/cgroup/...``); ``path`` is the cgroup as the kernel names
it in /proc/PID/cgroup (``/kubepods/burstable/pod.../<id>``).

Kernel versions of the v2 fields used (cgroup-v2.rst, mm/memcontrol.c): ``memory.current``,
``memory.max``, ``memory.stat`` anon/file/kernel_stack/slab_*/sock: 4.x; ``percpu``: 5.9;
``pagetables``: 5.11; ``kernel``: 5.18; ``memory.peak``: 5.19; ``vmalloc``, ``sec_pagetables``:
6.0 (the 5.10 capture in tests/data/cgroup has none of pagetables/kernel/vmalloc/peak, the 6.1
one all of them). Before 5.11 BPF maps are charged to RLIMIT_MEMLOCK, not to the cgroup.
A v1 memory.stat has none of the kernel parts: only ``memory.kmem.usage_in_bytes`` says how
much kernel memory a v1 cgroup holds.
"""

from __future__ import annotations

import os
import posixpath
import re
import time
from contextlib import contextmanager

from bpfmem.errors import HostError
from bpfmem.records import CgroupMemory
from bpfmem.values import dataclass
from bpfmem.host.cleanup import scratch_name
from bpfmem.host.procfs import Mount, mounts_of_type, read_mountinfo
from bpfmem.host.walk import walk_tree

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Iterator, Mapping


def Path(*parts):    # noqa: F811 - pathlib on first use: a live scan's reads need none
    from pathlib import Path as _Path
    return _Path(*parts)

__all__ = ["CgroupLine", "CgroupMemory", "parse_memory_stat", "parse_proc_cgroup",
           "parse_cgroup_procs", "parse_counter", "parse_limit", "parse_cgroup_memory",
           "memory_hierarchies", "read_cgroup_memory", "read_cgroup_procs",
           "read_subtree_procs", "cgroup_of_pid", "find_container", "resolve_cgroup",
           "ScratchCgroup", "scratch_cgroup", "scratch_parent", "remove_cgroup_dir"]

# A v1 page counter at PAGE_COUNTER_MAX reads as LONG_MAX rounded down to a page
# (9223372036854771712 with 4 KiB pages); anything this close to LONG_MAX means "no limit".
_V1_UNLIMITED = 2**63 - 2**16

V2_FILES = ("memory.current", "memory.max", "memory.peak", "memory.stat",
            "memory.swap.current", "cgroup.procs")
V1_FILES = ("memory.usage_in_bytes", "memory.limit_in_bytes", "memory.max_usage_in_bytes",
            "memory.stat", "memory.kmem.usage_in_bytes", "memory.kmem.max_usage_in_bytes",
            "memory.kmem.limit_in_bytes", "memory.kmem.tcp.usage_in_bytes",
            "memory.memsw.usage_in_bytes", "cgroup.procs")
# what v2's "kernel" (5.18+) adds up, for older kernels: a lower bound of it
_V2_KERNEL_PARTS = ("kernel_stack", "pagetables", "sec_pagetables", "percpu",
                    "slab_reclaimable", "slab_unreclaimable", "vmalloc")
_CONTAINER_RE = re.compile(r"^(?:[A-Za-z0-9_.]+-)*([0-9a-f]{64})(?:\.scope)?$")


# ---- pure parsers ----

@dataclass(frozen=True)
class CgroupLine:
    """One line of /proc/PID/cgroup: v1 ``4:memory:/path``, v2 ``0::/path``."""
    hierarchy_id: int
    controllers: tuple[str, ...]  # empty for the v2 line; "name=systemd" for named ones
    path: str


def parse_proc_cgroup(text: str) -> list[CgroupLine]:
    """/proc/PID/cgroup; malformed lines are skipped (the path may itself contain ':')."""
    out = []
    for line in text.splitlines():
        hid, sep1, rest = line.partition(":")
        ctrl, sep2, path = rest.partition(":")
        if sep1 and sep2 and hid.isdigit():
            out.append(CgroupLine(int(hid), tuple(c for c in ctrl.split(",") if c), path))
    return out


def parse_memory_stat(text: str) -> dict[str, int]:
    """memory.stat (v1 and v2 alike: ``key value`` lines) as a dict; other lines are skipped."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


def parse_cgroup_procs(text: str) -> list[int]:
    """cgroup.procs (or v1 tasks): one pid a line."""
    return [int(w) for w in text.split() if w.isdigit()]


def parse_counter(text: str) -> int:
    """A single-number file such as memory.current or memory.usage_in_bytes."""
    return int(text.strip())


def parse_limit(text: str) -> int | None:
    """memory.max / memory.limit_in_bytes in bytes; None when unlimited (v2 ``max``, v1
    PAGE_COUNTER_MAX pages, i.e. 9223372036854771712 with 4 KiB pages)."""
    text = text.strip()
    if text == "max":
        return None
    value = int(text)
    return None if value >= _V1_UNLIMITED else value


def parse_cgroup_memory(version: int, files: Mapping[str, str], *, path: str,
                        fs_path: str) -> CgroupMemory:
    """A :class:`CgroupMemory` from the texts of a cgroup's files (name -> text).

    Needs memory.current (v2) or memory.usage_in_bytes (v1) and memory.stat; every other
    file is optional and its field None when absent."""
    stat = parse_memory_stat(files.get("memory.stat", ""))
    counters = {n: parse_counter(t) for n, t in files.items()
                if n.startswith("memory.") and n != "memory.stat" and t.strip().isdigit()}
    limit_file = "memory.max" if version == 2 else "memory.limit_in_bytes"
    limit = parse_limit(files[limit_file]) if limit_file in files else None
    procs = tuple(parse_cgroup_procs(files.get("cgroup.procs", "")))
    if version == 2:
        parts = [stat[k] for k in _V2_KERNEL_PARTS if k in stat]
        kernel = stat.get("kernel", sum(parts) if parts else None)
        return CgroupMemory(
            2, path, fs_path, counters["memory.current"], limit, counters.get("memory.peak"),
            stat.get("anon"), stat.get("file"), kernel, stat.get("kernel_stack"),
            stat.get("slab_reclaimable"), stat.get("slab_unreclaimable"), stat.get("percpu"),
            stat.get("sock"), stat.get("vmalloc"), counters.get("memory.swap.current"),
            procs, stat, counters)
    if version != 1:
        raise ValueError(f"cgroup version must be 1 or 2, not {version!r}")

    def total(key: str) -> int | None:
        return stat.get(f"total_{key}", stat.get(key))
    return CgroupMemory(
        1, path, fs_path, counters["memory.usage_in_bytes"], limit,
        counters.get("memory.max_usage_in_bytes"), total("rss"), total("cache"),
        counters.get("memory.kmem.usage_in_bytes"), None, None, None, None, None, None,
        total("swap"), procs, stat, counters)


# ---- hierarchies and paths ----

def _join(root: str | os.PathLike, path: str) -> Path:
    return Path(root) / path.lstrip("/")


def _inside(path: str, base: str) -> str | None:
    """``path`` relative to ``base`` ("." for itself), or None when outside it."""
    rel = posixpath.relpath(posixpath.normpath(path), posixpath.normpath(base))
    return None if rel == ".." or rel.startswith("../") else rel


def _fs_of(cg_path: str, mount: Mount) -> str | None:
    rel = _inside(cg_path, mount.root)
    return None if rel is None else posixpath.normpath(posixpath.join(mount.mount_point, rel))


def _cg_of(fs_path: str, mount: Mount) -> str | None:
    rel = _inside(fs_path, mount.mount_point)
    return None if rel is None else posixpath.normpath(posixpath.join("/", mount.root, rel))


def _ups(path: str) -> int:
    """How many leading ``..`` a path from a cgroup namespace has (0 outside namespaces)."""
    n = 0
    for part in path.strip("/").split("/"):
        if part != "..":
            break
        n += 1
    return n


def _namespace_root(mount: Mount, own: str, root: str | os.PathLike) -> str:
    """The host path of this process's cgroup namespace root in ``mount``'s hierarchy.

    Inside a cgroup namespace (containers on cgroup v2 get one by default) the kernel shows
    every cgroup path relative to the namespace root: a mount of the host's hierarchy has
    root ``/../../..`` and other processes' cgroups read ``/../../kubepods/...``. The number
    of ``..`` says how deep the namespace root is, not where: it is found as the directory
    at that depth (plus ``own``, this process's path inside the namespace) whose
    ``cgroup.procs`` lists this process."""
    ups = _ups(mount.root)
    if ups == 0:
        return "/"
    own_parts = [p for p in own.strip("/").split("/") if p and p != ".."]
    depth = ups + len(own_parts)
    me = str(os.getpid())
    top = _join(root, mount.mount_point)
    level = [top]
    for _ in range(depth):
        nxt = []
        for d in level:
            try:
                nxt += [e.path for e in os.scandir(d) if e.is_dir(follow_symlinks=False)]
            except OSError:
                continue
        level = [Path(p) for p in nxt]
    for d in level:
        try:
            if me in (d / "cgroup.procs").read_text().split():
                rel = d.relative_to(top).parts
                return "/" + "/".join(rel[:ups])
        except OSError:
            continue
    raise HostError(f"cannot place this process's cgroup namespace in the hierarchy at "
                    f"{mount.mount_point} (mounted root {mount.root})")


_NS_ROOTS: dict[tuple, str] = {}


def _host_mount(version: int, m: Mount, root: str | os.PathLike) -> Mount:
    """``m`` with its root as a host path (resolving a cgroup namespace, once per process)."""
    if _ups(m.root) == 0:
        return m
    key = (os.fspath(root), m.mount_id, m.root, os.getpid())
    ns = _NS_ROOTS.get(key)
    if ns is None:
        lines = parse_proc_cgroup(_join(root, "/proc/self/cgroup").read_text())
        own = next((l.path for l in lines if ((l.hierarchy_id == 0) if version == 2
                                             else ("memory" in l.controllers))), "/")
        ns = _NS_ROOTS[key] = _namespace_root(m, own, root)
    return Mount(m.mount_id, m.parent_id, host_path(m.root, ns), m.mount_point, m.options,
                 m.fs_type, m.source, m.super_options)


def host_path(path: str, namespace_root: str) -> str:
    """A cgroup path as the kernel showed it inside a namespace, as a host path."""
    return posixpath.normpath(posixpath.join(namespace_root, path.lstrip("/"))) \
        if _ups(path) else path


def memory_hierarchies(root: str | os.PathLike = "/") -> list[tuple[int, Mount]]:
    """The mounts holding the memory controller, as seen by this process: cgroup2 mounts
    whose cgroup.controllers lists ``memory`` first, then v1 mounts with ``memory``. Mount
    roots are host paths, also when this process is in a cgroup namespace."""
    mounts = read_mountinfo(root)
    found: list[tuple[int, Mount]] = []
    for m in mounts_of_type(mounts, "cgroup2"):
        try:
            with open(os.path.join(os.fspath(root), m.mount_point.lstrip("/"),
                                   "cgroup.controllers")) as f:
                ctrls = f.read().split()
        except OSError:
            continue
        if "memory" in ctrls:
            found.append((2, _host_mount(2, m, root)))
    found += [(1, _host_mount(1, m, root)) for m in mounts_of_type(mounts, "cgroup")
              if "memory" in m.super_options.split(",")]
    return found


def namespace_roots(root: str | os.PathLike = "/") -> dict[int, str]:
    """{version: host path of this process's cgroup namespace root} for the memory
    hierarchies ("/" outside namespaces)."""
    out = {}
    for version, m in memory_hierarchies(root):
        raw = next(x for x in mounts_of_type(read_mountinfo(root),
                                             "cgroup2" if version == 2 else "cgroup")
                   if x.mount_id == m.mount_id)
        out.setdefault(version, _NS_ROOTS.get((os.fspath(root), raw.mount_id, raw.root,
                                               os.getpid()), "/"))
    return out


def memory_cgroup_path(proc_cgroup_text: str, ns_roots: Mapping[int, str] | None = None
                       ) -> str | None:
    """The memory cgroup of a process, from its /proc/PID/cgroup text, as a host path: the
    v1 ``memory`` line, else the v2 ``0::`` line (the two never both hold memory)."""
    lines = parse_proc_cgroup(proc_cgroup_text)
    roots = ns_roots or {}
    for l in lines:
        if "memory" in l.controllers:
            return host_path(l.path, roots.get(1, "/"))
    for l in lines:
        if l.hierarchy_id == 0:
            return host_path(l.path, roots.get(2, "/"))
    return None


def _version_of(dir_: Path) -> int | None:
    if (dir_ / "memory.current").exists():
        return 2
    if (dir_ / "memory.usage_in_bytes").exists():
        return 1
    return None


def _cgroup_dir(cgroup: str, root: str | os.PathLike) -> tuple[int, str, str]:
    """(version, kernel path, fs dir) of a cgroup given as a directory or a kernel path."""
    cgroup = posixpath.normpath("/" + cgroup.lstrip("/"))
    hierarchies = memory_hierarchies(root)
    for version, m in hierarchies:   # a directory under a memory mount
        path = _cg_of(cgroup, m)
        if path is not None and _version_of(_join(root, cgroup)) == version:
            return version, path, cgroup
    for version, m in hierarchies:   # a path as /proc/PID/cgroup names it
        fs = _fs_of(cgroup, m)
        if fs is not None and _version_of(_join(root, fs)) == version:
            return version, cgroup, fs
    raise HostError(f"no memory cgroup {cgroup} (neither a directory with memory.current or "
                    f"memory.usage_in_bytes nor a cgroup under a memory hierarchy)")


def _read_files(dir_: Path, names: tuple[str, ...]) -> dict[str, str]:
    files = {}
    for name in names:
        try:
            files[name] = (dir_ / name).read_text()
        except (FileNotFoundError, PermissionError):
            continue
        except OSError as e:  # e.g. EOPNOTSUPP from a file the kernel stubs out
            if name in ("memory.current", "memory.usage_in_bytes", "memory.stat"):
                raise HostError(f"cannot read {dir_ / name}: {e.strerror}") from None
    return files


def read_cgroup_memory(cgroup: str, root: str | os.PathLike = "/") -> CgroupMemory:
    """The memory of a cgroup given as its directory (``/sys/fs/cgroup/...``) or as the
    kernel names it (``/kubepods/...``, mapped to the memory hierarchy)."""
    version, path, fs = _cgroup_dir(cgroup, root)
    dir_ = _join(root, fs)
    files = _read_files(dir_, V2_FILES if version == 2 else V1_FILES)
    if "memory.stat" not in files:
        raise HostError(f"cannot read {dir_ / 'memory.stat'}")
    return parse_cgroup_memory(version, files, path=path, fs_path=fs)


@dataclass(frozen=True, slots=True)
class CgroupUsage:
    """A memory cgroup's usage and limit in bytes (None: unlimited), the two figures an
    exporter reads of each cgroup at every scan."""
    usage: int
    limit: int | None


_USAGE_FILES = {2: ("memory.current", "memory.max"),
                1: ("memory.usage_in_bytes", "memory.limit_in_bytes")}
_USAGE_DIRS: dict[tuple[str, str], tuple[int, str]] = {}   # (cgroup, root) -> (version, dir)


def _read_small(path: str) -> str:
    f = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(f, 64).decode()
    finally:
        os.close(f)


def read_cgroup_usage(cgroup: str, root: str | os.PathLike = "/") -> CgroupUsage:
    """The usage and limit of a cgroup named as :func:`read_cgroup_memory` takes it: two
    small files, the cgroup's directory found once and kept (found again when it is gone
    or moved)."""
    key = (cgroup, os.fspath(root))
    for _attempt in (0, 1):
        hit = _USAGE_DIRS.get(key)
        if hit is None:
            version, _path, fs = _cgroup_dir(cgroup, root)
            if len(_USAGE_DIRS) >= 4096:
                _USAGE_DIRS.clear()
            hit = _USAGE_DIRS[key] = (version, str(_join(root, fs)))
        version, dir_ = hit
        usage_file, limit_file = _USAGE_FILES[version]
        try:
            usage = parse_counter(_read_small(f"{dir_}/{usage_file}"))
        except OSError:
            _USAGE_DIRS.pop(key, None)
            continue
        try:
            limit = parse_limit(_read_small(f"{dir_}/{limit_file}"))
        except OSError:
            limit = None
        return CgroupUsage(usage, limit)
    raise HostError(f"cannot read the memory usage of cgroup {cgroup}")


def read_cgroup_procs(fs_path: str, root: str | os.PathLike = "/") -> list[int]:
    """The pids directly in a cgroup directory (not those of its child cgroups)."""
    return parse_cgroup_procs((_join(root, fs_path) / "cgroup.procs").read_text())


def read_subtree_procs(fs_path: str, root: str | os.PathLike = "/") -> list[int]:
    """The pids of a cgroup directory and all its descendants (cgroup.procs lists only
    direct members on v1 and v2 alike), sorted; cgroups vanishing meanwhile are skipped."""
    pids: set[int] = set()
    for dirpath, _dirs, names in walk_tree(str(_join(root, fs_path))):
        if "cgroup.procs" in names:
            try:
                pids.update(parse_cgroup_procs(Path(dirpath, "cgroup.procs").read_text()))
            except OSError:
                continue
    return sorted(pids)


# ---- resolvers ----

def cgroup_of_pid(pid: int, root: str | os.PathLike = "/") -> str:
    """The memory cgroup directory of ``pid``: its ``0::`` cgroup under a cgroup2 mount with
    the memory controller, else its ``memory`` line under the v1 memory mount."""
    try:
        lines = parse_proc_cgroup(_join(root, f"/proc/{int(pid)}/cgroup").read_text())
    except (FileNotFoundError, ProcessLookupError):
        raise HostError(f"no process {pid}") from None
    roots = namespace_roots(root)
    for version, m in memory_hierarchies(root):
        for line in lines:
            if (line.hierarchy_id == 0) if version == 2 else ("memory" in line.controllers):
                fs = _fs_of(host_path(line.path, roots.get(version, "/")), m)
                if fs is not None and _join(root, fs).is_dir():
                    return fs
    raise HostError(f"process {pid} is in no memory cgroup visible here")


def parse_container_id(container_id: str) -> str:
    """The hex id in ``docker://3f2a...``, ``containerd://...`` or a bare id (12 to 64 hex
    digits, lower-cased). ValueError otherwise."""
    cid = container_id.strip().lower().split("://", 1)[-1]  # containerd://..., docker://...
    if not re.fullmatch(r"[0-9a-f]{12,64}", cid):
        raise ValueError(f"not a container id: {container_id!r} (want 12 to 64 hex digits)")
    return cid


def _normalize_id(container_id: str) -> str:
    try:
        return parse_container_id(container_id)
    except ValueError as e:
        raise HostError(str(e)) from None


def find_container(container_id: str, root: str | os.PathLike = "/") -> str:
    """The memory cgroup directory of a container: a directory named ``<id>``,
    ``docker-<id>.scope``, ``cri-containerd-<id>.scope``, ``crio-<id>.scope``...
    (``crio-conmon-*`` excluded). A unique prefix of at least 12 hex digits will do."""
    cid = _normalize_id(container_id)
    hierarchies = memory_hierarchies(root)
    if not hierarchies:
        raise HostError("no memory cgroup hierarchy mounted")
    _version, mount = hierarchies[0]
    base = _join(root, mount.mount_point)
    hits: list[str] = []
    for dirpath, dirs, _names in walk_tree(str(base)):
        for d in dirs:
            m = _CONTAINER_RE.match(d)
            if m and m.group(1).startswith(cid) and "conmon-" not in d:
                rel = Path(dirpath, d).relative_to(base).as_posix()
                hits.append(posixpath.join(mount.mount_point, rel))
    if not hits:
        raise HostError(f"no memory cgroup for container {cid} under {mount.mount_point}")
    if len(hits) > 1:
        shown = ", ".join(sorted(hits)[:3]) + (", ..." if len(hits) > 3 else "")
        raise HostError(f"container id {cid} is ambiguous: {len(hits)} cgroups match "
                        f"({shown}); give more digits")
    return hits[0]


def resolve_cgroup(cgroup: str | None = None, pid: int | None = None,
                   container: str | None = None, root: str | os.PathLike = "/") -> str:
    """The memory cgroup directory named by exactly one of a cgroup (directory or kernel
    path), a pid or a container id."""
    given = [x is not None for x in (cgroup, pid, container)]
    if sum(given) != 1:
        raise ValueError("give exactly one of cgroup, pid, container")
    if cgroup is not None:
        return _cgroup_dir(cgroup, root)[2]
    if pid is not None:
        return cgroup_of_pid(pid, root)
    return find_container(container, root)  # type: ignore[arg-type]


# ---- a scratch cgroup on this host ----

@dataclass(frozen=True)
class ScratchCgroup:
    """A memory cgroup created by :func:`scratch_cgroup`."""
    version: int
    fs_path: str

    def add_pid(self, pid: int) -> None:
        """Move a process (all its threads) into this cgroup."""
        try:
            (Path(self.fs_path) / "cgroup.procs").write_text(str(int(pid)))
        except ProcessLookupError:
            raise HostError(f"no process {pid}") from None

    def read(self) -> CgroupMemory:
        return read_cgroup_memory(self.fs_path)

    def procs(self) -> list[int]:
        return read_subtree_procs(self.fs_path)


def remove_cgroup_dir(path: str | os.PathLike, attempts: int = 50) -> None:
    """rmdir a cgroup directory and the child cgroups left in it (the probe's per-spec ones
    when it was killed), retrying every 0.1 s while the kernel still holds it (its last task
    exiting, memory being reparented); gone already is fine."""
    path = Path(path)
    try:
        children = [c for c in path.iterdir() if c.is_dir() and not c.is_symlink()]
    except OSError:
        children = []
    for child in children:
        remove_cgroup_dir(child, attempts)
    for i in range(attempts):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if i == attempts - 1:
                raise
            time.sleep(0.1)


def scratch_parent(version: int | None = None) -> tuple[int, str]:
    """(version, directory) where this host's scratch memory cgroups are made: a cgroup2
    mount that delegates memory to its children, else the v1 memory mount; ``version`` 1 or
    2 asks for that hierarchy only."""
    for v, m in memory_hierarchies("/"):
        if version not in (None, v):
            continue
        if v == 1:
            return 1, m.mount_point
        try:  # a child of the mount only has memory files if the parent delegates them
            if "memory" in Path(m.mount_point, "cgroup.subtree_control").read_text().split():
                return 2, m.mount_point
        except OSError:
            continue
    if version == 1:
        raise HostError("no cgroup v1 memory controller mounted")
    if version == 2:
        raise HostError("no cgroup2 mount with the memory controller enabled")
    raise HostError("no memory cgroup hierarchy to create a cgroup in (no cgroup2 mount "
                    "delegating +memory, no v1 memory mount)")


@contextmanager
def scratch_cgroup(limit: int | None = None, prefix: str | None = None, wait: float = 5.0,
                   *, kind: str = "pod", version: int | None = None,
                   name: str | None = None) -> Iterator[ScratchCgroup]:
    """Create a scratch memory cgroup and yield it as a :class:`ScratchCgroup`; the one way
    bpfmem makes one (``pod --trace``, ``measure``'s probe, the tests).

    Its name is ``name``, else ``<prefix><pid>-<random>``, else
    :func:`~bpfmem.host.cleanup.scratch_name` of ``kind`` (``bpfmem-<kind>-<pid>-<random>``,
    which the next run's sweep can attribute). It is made where :func:`scratch_parent` says
    (``version`` 1 or 2 forces a hierarchy), optionally with a limit in bytes.

    On exit (also on exceptions, Ctrl-C, and SIGTERM inside
    :func:`~bpfmem.host.cleanup.signals_interrupt`) it kills nothing: it waits up to ``wait``
    seconds for the cgroup to empty and removes it; :class:`HostError` if processes are
    still in it."""
    if os.geteuid() != 0:
        raise HostError("creating a cgroup needs root")
    version, parent = scratch_parent(version)
    if name is None:
        import secrets   # (hmac, hashlib, libcrypto: 3.4 MiB an exporter has no use for)
        name = (f"{prefix}{os.getpid()}-{secrets.token_hex(4)}" if prefix is not None
                else scratch_name(kind))
    dir_ = Path(parent) / name
    try:
        dir_.mkdir()
    except OSError as e:
        raise HostError(f"cannot create cgroup {dir_}: {e.strerror}") from None
    try:
        if limit is not None:
            (dir_ / ("memory.max" if version == 2 else "memory.limit_in_bytes")).write_text(
                str(int(limit)))
        yield ScratchCgroup(version, str(dir_))
    finally:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and read_subtree_procs(str(dir_)):
            time.sleep(0.05)
        try:
            remove_cgroup_dir(dir_, attempts=max(1, int(wait * 10)))
        except OSError as e:
            left = read_subtree_procs(str(dir_))
            raise HostError(f"cannot remove cgroup {dir_}: {e.strerror} "
                            f"(processes still in it: {left})") from None
