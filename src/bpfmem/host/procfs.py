"""Readers of /proc: mounts, process names, fd tables, fdinfo and smaps_rollup.

Each ``parse_*`` is pure (text in, values out); each ``read_*`` takes a ``root`` (default ``/``)
so tests can point it at a captured tree. A process that exits while being read is skipped by
the callers: the readers raise ``FileNotFoundError``/``ProcessLookupError`` as the OS does.
"""

from __future__ import annotations

import os
from bpfmem.values import dataclass

__all__ = ["Mount", "parse_mountinfo", "read_mountinfo", "mounts_of_type", "bpffs_mounts",
           "MountWatch",
           "parse_fdinfo", "parse_smaps_rollup", "read_smaps_rollup", "read_comm",
           "list_pids", "MapFd", "scan_map_fds", "PidStat", "parse_pid_stat", "read_pid_stat",
           "parse_btime", "ProcessStats", "read_process_stats"]


@dataclass(frozen=True)
class Mount:
    """One line of /proc/PID/mountinfo (see proc(5))."""
    mount_id: int
    parent_id: int
    root: str          # the path inside the filesystem that is mounted here
    mount_point: str
    options: str       # per-mount options (rw, nosuid, ...)
    fs_type: str
    source: str
    super_options: str  # per-superblock options (for cgroup v1: the controllers)


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        c = field[i]
        if c == "\\" and len(field[i + 1:i + 4]) == 3 and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[Mount]:
    """Parse mountinfo text; malformed lines are skipped."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        try:
            sep = fields.index("-", 6)
            mounts.append(Mount(
                mount_id=int(fields[0]), parent_id=int(fields[1]), root=_unescape(fields[3]),
                mount_point=_unescape(fields[4]), options=fields[5],
                fs_type=fields[sep + 1], source=_unescape(fields[sep + 2]),
                super_options=fields[sep + 3] if len(fields) > sep + 3 else ""))
        except (ValueError, IndexError):
            continue
    return mounts


def read_mountinfo(root: str | os.PathLike = "/", pid: int | str = "self") -> list[Mount]:
    with open(os.path.join(os.fspath(root), "proc", str(pid), "mountinfo")) as f:
        return parse_mountinfo(f.read())


def mounts_of_type(mounts: list[Mount], fs_type: str) -> list[Mount]:
    """Mounts of one filesystem type, one per mount point (the last mounted wins)."""
    by_point: dict[str, Mount] = {}
    for m in mounts:
        if m.fs_type == fs_type:
            by_point[m.mount_point] = m
        elif m.mount_point in by_point:
            del by_point[m.mount_point]  # shadowed by a later mount of another type
    return list(by_point.values())


def bpffs_mounts(root: str | os.PathLike = "/") -> list[str]:
    """Mount points of every bpffs this process sees (pins live there)."""
    return [m.mount_point for m in mounts_of_type(read_mountinfo(root), "bpf")]


class MountWatch:
    """This process's mount table, read again only when it changed: /proc/self/mountinfo is
    kept open, and the kernel flags the open file (POLLPRI, seen with a poll that does not
    wait) once the mount namespace's table changed since the file last looked (a mount, an
    unmount, a move). A scan that runs every few seconds so reads and parses the table once,
    not at every scan. ``close()`` closes the file."""

    __slots__ = ("path", "fd", "poller", "reads", "_mounts")

    def __init__(self, root: str | os.PathLike = "/", pid: int | str = "self") -> None:
        self.path = os.path.join(os.fspath(root), "proc", str(pid), "mountinfo")
        self.fd = -1
        self.poller = None
        self.reads = 0                      # times the table was read
        self._mounts: list[Mount] | None = None

    def mounts(self) -> list[Mount]:
        """The mount table now (the last one read, while the kernel flags no change)."""
        if self.fd < 0:
            import select
            self.fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            self.poller = select.poll()
            self.poller.register(self.fd, select.POLLPRI)
        elif self._mounts is not None and not self.poller.poll(0):
            return self._mounts
        # (the flag is taken down by the poll: a change from here on flags the file again)
        os.lseek(self.fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(self.fd, 1 << 16):
            chunks.append(chunk)
        self._mounts = parse_mountinfo(b"".join(chunks).decode(errors="surrogateescape"))
        self.reads += 1
        return self._mounts

    def bpffs(self) -> list[str]:
        """Mount points of every bpffs (:func:`bpffs_mounts`)."""
        return [m.mount_point for m in mounts_of_type(self.mounts(), "bpf")]

    def close(self) -> None:
        fd, self.fd, self.poller, self._mounts = self.fd, -1, None, None
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:     # (a memo dropped without close(); at exit, os may be gone)
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass


def parse_fdinfo(text: str) -> dict[str, str]:
    """``key:\\tvalue`` lines of /proc/PID/fdinfo/FD as a dict of strings."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def parse_smaps_rollup(text: str) -> dict[str, int]:
    """/proc/PID/smaps_rollup as bytes per field (``Rss``, ``Pss``, ``Private_Dirty``...)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        parts = value.split()
        if sep and len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
            out[key.strip()] = int(parts[0]) * 1024
    return out


def read_smaps_rollup(pid: int, root: str | os.PathLike = "/") -> dict[str, int]:
    with open(os.path.join(os.fspath(root), "proc", str(pid), "smaps_rollup")) as f:
        return parse_smaps_rollup(f.read())


def read_comm(pid: int, root: str | os.PathLike = "/") -> str:
    with open(os.path.join(os.fspath(root), "proc", str(pid), "comm")) as f:
        return f.read().rstrip("\n")


def list_pids(root: str | os.PathLike = "/") -> list[int]:
    """Process ids (not threads) in /proc, ascending."""
    return sorted(int(n) for n in os.listdir(os.path.join(os.fspath(root), "proc"))
                  if n.isdigit())


@dataclass(frozen=True)
class PidStat:
    """The fields of /proc/PID/stat that bpfmem reads (proc(5): clock ticks and pages)."""
    utime: int          # field 14, clock ticks
    stime: int          # field 15
    starttime: int      # field 22, clock ticks after boot
    vsize: int          # field 23, bytes
    rss: int            # field 24, pages


def parse_pid_stat(raw: bytes) -> PidStat | None:
    """/proc/PID/stat, or None when it is not one. The fields are counted after the last
    ``)``: a comm may hold spaces and parentheses."""
    rest = raw[raw.rfind(b")") + 1:].split()    # rest[0] is field 3 (state)
    try:
        return PidStat(utime=int(rest[11]), stime=int(rest[12]), starttime=int(rest[19]),
                       vsize=int(rest[20]), rss=int(rest[21]))
    except (IndexError, ValueError):
        return None


def read_pid_stat(pid: int | str = "self", root: str | os.PathLike = "/") -> PidStat | None:
    """``pid``'s /proc/PID/stat; None when it has gone or cannot be read."""
    try:
        with open(os.path.join(os.fspath(root), "proc", str(pid), "stat"), "rb") as f:
            return parse_pid_stat(f.read())
    except OSError:
        return None


def parse_btime(raw: bytes) -> int | None:
    """The boot time (seconds since the epoch) of /proc/stat's ``btime`` line."""
    for line in raw.splitlines():
        if line.startswith(b"btime "):
            try:
                return int(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


def parse_max_fds(raw: bytes) -> int | None:
    """The soft limit of /proc/PID/limits' ``Max open files`` line (None when unlimited)."""
    for line in raw.splitlines():
        if line.startswith(b"Max open files"):
            try:
                return int(line.split()[3])
            except (IndexError, ValueError):
                return None
    return None


@dataclass(frozen=True)
class ProcessStats:
    """What every Prometheus client exports about its own process (``process_*``); a figure
    is None when it could not be read."""
    virtual: int | None          # bytes
    resident: int | None         # bytes
    start_time: float | None     # seconds since the epoch
    cpu_seconds: float | None    # user + system
    open_fds: int | None
    max_fds: int | None


def read_process_stats(pid: int | str = "self", root: str | os.PathLike = "/") -> ProcessStats:
    """A process's memory, CPU time, start time and fds, from ``root``'s /proc."""
    base = os.path.join(os.fspath(root), "proc")
    ticks, page = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")
    stat = read_pid_stat(pid, root)
    try:
        with open(os.path.join(base, "stat"), "rb") as f:
            btime = parse_btime(f.read())
    except OSError:
        btime = None
    try:
        with open(os.path.join(base, str(pid), "limits"), "rb") as f:
            max_fds = parse_max_fds(f.read())
        open_fds = len(os.listdir(os.path.join(base, str(pid), "fd")))
    except OSError:
        max_fds = open_fds = None
    return ProcessStats(
        virtual=stat.vsize if stat else None,
        resident=stat.rss * page if stat else None,
        start_time=stat.starttime / ticks + btime if stat and btime is not None else None,
        cpu_seconds=(stat.utime + stat.stime) / ticks if stat else None,
        open_fds=open_fds if max_fds is not None else None, max_fds=max_fds)


@dataclass(frozen=True)
class MapFd:
    """A process's fd that refers to a BPF map, with what its fdinfo says."""
    pid: int
    fd: int
    map_id: int
    memlock: int | None
    frozen: bool | None    # fdinfo "frozen" (5.2+), None when absent


def fdinfo_field(raw: bytes, key: bytes) -> bytes | None:
    """The value of ``key`` (e.g. ``b"\\nmemlock:"``) in raw fdinfo bytes, stripped."""
    i = raw.find(key)
    if i < 0:
        return None
    j = raw.find(b"\n", i + len(key))
    return raw[i + len(key):j if j >= 0 else len(raw)].strip()


def scan_map_fds(pids: list[int] | None = None, root: str | os.PathLike = "/",
                 link_target: str = "anon_inode:bpf-map") -> list[MapFd]:
    """Every fd of every process that is a BPF map (``anon_inode:bpf-map``).

    Processes and fds that vanish or cannot be read (no ptrace access) are skipped. This runs
    over every fd on the host, so it keeps to the fewest and cheapest system calls: one
    readlink per fd relative to an open ``/proc/PID/fd`` (no path walk from the root), and
    open/read/close of fdinfo only for map fds.
    """
    base = os.path.join(os.fspath(root), "proc")
    found = []
    readlink, open_, read, close = os.readlink, os.open, os.read, os.close
    dir_flags = os.O_RDONLY | os.O_DIRECTORY
    for pid in (list_pids(root) if pids is None else pids):
        try:
            pid_dir = open_(f"{base}/{pid}", dir_flags)
        except OSError:
            continue
        fd_dir = info_dir = -1
        try:
            fd_dir = open_("fd", dir_flags, dir_fd=pid_dir)
            info_dir = open_("fdinfo", dir_flags, dir_fd=pid_dir)
            names = os.listdir(fd_dir)
        except OSError:
            names = []
        for name in names:
            try:
                if readlink(name, dir_fd=fd_dir) != link_target:
                    continue
                f = open_(name, os.O_RDONLY, dir_fd=info_dir)
                try:
                    raw = read(f, 4096)
                finally:
                    close(f)
            except OSError:
                continue
            map_id = fdinfo_field(raw, b"\nmap_id:")
            if map_id is None:
                continue
            memlock = fdinfo_field(raw, b"\nmemlock:")
            frozen = fdinfo_field(raw, b"\nfrozen:")
            found.append(MapFd(pid=pid, fd=int(name), map_id=int(map_id),
                               memlock=int(memlock) if memlock is not None else None,
                               frozen=None if frozen is None else frozen == b"1"))
        for d in (fd_dir, info_dir, pid_dir):
            if d >= 0:
                close(d)
    return found
