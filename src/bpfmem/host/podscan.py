"""Reading one memory cgroup ("a pod") as it is now, and over time.

One :class:`PodSample` is the cgroup's counters (:mod:`bpfmem.host.cgroup`), every process in
its subtree with RSS/PSS/USS from ``/proc/PID/smaps_rollup``, and the BPF maps those processes
hold (their fd tables only: cheap) with where each is pinned and when. The arithmetic on it
lives in :mod:`bpfmem.analysis.pod`; this module only reads.

:func:`sample_loop` samples on a monotonic clock; :func:`launched` starts a command inside a
scratch cgroup from its first instruction (the child writes its own pid into ``cgroup.procs``
between fork and exec), and on the way out (also on errors and Ctrl-C) kills every process
left in that cgroup by pid and removes the cgroup.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from bpfmem.errors import HostError
from bpfmem.host import procfs
from bpfmem.host.cleanup import die_with_parent
from bpfmem.host.cgroup import (ScratchCgroup, read_cgroup_memory,
                                read_subtree_procs, scratch_cgroup)
from bpfmem.host.goproc import GoProber
from bpfmem.host.live import walk_pins, maps_held_by
from bpfmem.host.pagemap import cgroup_inodes, file_page_owners, process_files
from bpfmem.records import LiveMap, Pin, PodSample, ProcMem

__all__ = ["ProcMem", "Pin", "PodSample", "PodSampler", "read_proc_mem", "boot_seconds",
           "sample_loop", "launched", "Launched"]

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def boot_seconds() -> float:
    """Now, in seconds since boot (CLOCK_BOOTTIME: what process start times count from)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def _stat(pid: int, root: str) -> tuple[str, float | None] | None:
    """(comm, start time in seconds since boot) from /proc/PID/stat (one file for both: a
    trace reads it for every process at every sample); None when it has gone."""
    try:
        with open(os.path.join(root, "proc", str(pid), "stat"), "rb") as f:
            raw = f.read()
    except OSError:
        return None
    close = raw.rfind(b")")
    comm = raw[raw.find(b"(") + 1:close].decode(errors="replace")
    rest = raw[close + 2:].split()
    try:  # field 22 (starttime) is the 20th after "pid (comm)"
        return comm, int(rest[19]) / _CLK_TCK
    except (IndexError, ValueError):
        return comm, None


def read_proc_mem(pid: int, root: str = "/", smaps: bool = True) -> ProcMem | None:
    """A process's memory figures; None when it has gone."""
    st = _stat(pid, root)
    if st is None:
        return None
    comm, started = st
    r: dict[str, int] = {}
    if smaps:
        try:
            r = procfs.read_smaps_rollup(pid, root)
        except (FileNotFoundError, ProcessLookupError):
            return None
        except OSError:
            r = {}   # e.g. no ptrace access: the figures stay None
    uss = None
    if "Private_Clean" in r and "Private_Dirty" in r:
        uss = r["Private_Clean"] + r["Private_Dirty"] + r.get("Private_Hugetlb", 0)
    return ProcMem(pid, comm, r.get("Rss"), r.get("Pss"), uss, r.get("Pss_Anon"),
                   r.get("Pss_File"), r.get("Pss_Shmem"), r.get("Swap"), started)


def _bpffs_mounts(root: str) -> list[str]:
    try:
        return procfs.bpffs_mounts(root)
    except OSError:
        return []


def _pins_of(ids: set[int], mounts: list[str]) -> dict[int, tuple[Pin, ...]]:
    if not ids or not mounts:
        return {}
    offset = time.time() - boot_seconds()   # wall clock - boot clock
    found = walk_pins(mounts, [])
    out: dict[int, tuple[Pin, ...]] = {}
    for map_id, paths in found.items():
        if map_id not in ids:
            continue
        pins = []
        for p in sorted(paths):
            try:
                pins.append(Pin(p, os.stat(p).st_ctime - offset))
            except OSError:
                pins.append(Pin(p, None))
        out[map_id] = tuple(pins)
    return out


class PodSampler:
    """Reads one cgroup again and again, caching what does not change between readings (map
    attributes; pins, walked again only when the set of held maps changes)."""

    def __init__(self, fs_path: str, *, entries: bool = False, entry_time_bound: float = 0.5,
                 smaps: bool = True, maps: bool = True, pins: bool = True,
                 root: str = "/", go: GoProber | None = None,
                 budget: Callable[[int], float] | None = None, files: bool = False):
        self.fs_path = fs_path
        self.entries = entries
        self.entry_time_bound = entry_time_bound
        self.smaps = smaps
        self.maps = maps
        self.pins = pins
        self.root = root
        self._infos: dict = {}
        self._prog_infos: dict = {}
        self._pin_ids: frozenset[int] | None = None
        self._pin_cache: dict[int, tuple[Pin, ...]] = {}
        self._bpffs: list[str] = _bpffs_mounts(root) if pins else []
        self.go = go      # reads each process in detail (smaps by class, Go runtime)
        self.files = files     # who is charged for its open and mapped files' page cache
        self._rollups: dict[int, tuple[float, ProcMem]] = {}   # pid -> (when, figures)
        self.budget = budget   # processes -> seconds per sample for that detail (a trace's);
        #                        None: every process in full each time

    def _procs(self, pids: list[int]) -> tuple[list[ProcMem], int]:
        """Every process's figures. With a budget (a trace), smaps_rollup is read for as
        many as fit in a third of it, least recently read first; the others keep their last
        figures (cgroup.procs, read every time, says they are still there)."""
        out: list[ProcMem] = []
        gone = 0
        if self.budget is None:
            for pid in pids:
                pm = read_proc_mem(pid, self.root, self.smaps)
                if pm is None:
                    gone += 1
                else:
                    out.append(pm)
            return out, gone
        now = time.monotonic()
        deadline = now + self.budget(len(pids)) / 3
        live = set(pids)
        for pid in [p for p in self._rollups if p not in live]:
            del self._rollups[pid]
        for pid in sorted(pids, key=lambda p: self._rollups.get(p, (-1.0, None))[0]):
            last = self._rollups.get(pid)
            if last is not None and time.monotonic() > deadline:
                out.append(last[1])    # (still in cgroup.procs: alive)
                continue
            pm = read_proc_mem(pid, self.root, self.smaps)
            if pm is None:
                gone += 1
                continue
            self._rollups[pid] = (now, pm)
            out.append(pm)
        return out, gone

    def sample(self) -> PodSample:
        # maps before the cgroup's counters: a map created in between is then in the
        # cgroup's kernel memory but not yet among the maps (parts still add up) rather than
        # counted as a map the usage does not hold yet
        t, wall = time.monotonic(), time.time()
        pids = read_subtree_procs(self.fs_path, self.root)
        maps: tuple[LiveMap, ...] = ()
        skipped = 0
        if self.maps and pids:
            maps, gone = maps_held_by(pids, entries=self.entries,
                                      entry_time_bound=self.entry_time_bound,
                                      root=self.root, known=self._infos)
            skipped += gone
        progs = btfs = None
        if self.maps:
            from bpfmem.host.progs import progs_held_by
            progs, btfs, gone = (progs_held_by(pids, self.root, self._prog_infos) if pids
                                 else ((), (), 0))
            skipped += gone
        cg = read_cgroup_memory(self.fs_path, self.root)
        procs, gone = self._procs(pids)
        skipped += gone
        details = (self.go.read_all(procs, smaps=self.smaps,
                                    inodes=cgroup_inodes(self.fs_path),
                                    budget=None if self.budget is None
                                    else self.budget(len(procs)))
                   if self.go is not None else {})
        files = exe_files = None
        if self.files and pids:
            exes: dict = {}
            for pid, d in details.items():   # Go executables: their pages are "binary"
                if getattr(d, "go", None) is None:
                    continue
                p = os.path.join(self.root, "proc", str(pid), "exe")
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                exes.setdefault((st.st_dev, st.st_ino), p)
            inodes = cgroup_inodes(self.fs_path)
            found = process_files(pids, self.root, set(exes))
            files = file_page_owners(found.values(), inodes, self.root)
            if exes and files is not None:
                exe_files = file_page_owners(exes.values(), inodes, self.root)
        pins: dict = {}
        if self.pins and maps:
            ids = frozenset(m.id for m in maps)
            if ids != self._pin_ids:
                self._pin_cache = _pins_of(set(ids), self._bpffs)
                self._pin_ids = ids
            pins = {i: p for i, p in self._pin_cache.items() if i in ids}
        return PodSample(t, wall, time.monotonic() - t, cg, tuple(procs), maps, pins,
                         skipped, tuple(self._bpffs), details, files, exe_files, progs,
                         btfs)


def sample_loop(sample: Callable[[], PodSample], duration: float, interval: float, *,
                stop: Callable[[], bool] | None = None,
                on_sample: Callable[[PodSample], None] | None = None) -> tuple[list[PodSample], bool]:
    """Samples every ``interval`` seconds (ticks on the monotonic clock from the first; a tick
    missed because a reading took longer is skipped, not made up) for ``duration`` seconds, or
    until ``stop()`` says so (then one last sample is taken). Ctrl-C ends the loop early and
    keeps what was sampled. Returns (samples, interrupted)."""
    out: list[PodSample] = []
    start = time.monotonic()
    end = start + duration
    k = 0
    try:
        while True:
            stopping = stop is not None and stop()   # checked before: the last sample is after
            s = sample()
            out.append(s)
            if on_sample is not None:
                on_sample(s)
            now = time.monotonic()
            if now >= end or stopping:
                break
            k = max(k + 1, int((now - start) / interval) + 1)
            time.sleep(max(0.0, min(start + k * interval, end) - time.monotonic()))
    except KeyboardInterrupt:
        return out, True
    return out, False


# ---- launching a command in a scratch cgroup ----

@dataclass
class Launched:
    """A command started by :func:`launched`, in ``cgroup`` from its first instruction."""
    proc: subprocess.Popen
    cgroup: ScratchCgroup
    started: float            # time.monotonic() just before the fork

    @property
    def pid(self) -> int:
        return self.proc.pid

    def exited(self) -> bool:
        return self.proc.poll() is not None


def _kill_all(cg: ScratchCgroup, main: subprocess.Popen, grace: float) -> None:
    """End the command: SIGTERM to it, then SIGKILL to every process still in the cgroup
    (all of them descend from it: the cgroup was made for it), by pid."""
    if main.poll() is None:
        try:
            os.kill(main.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            main.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        left = read_subtree_procs(cg.fs_path)
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        main.poll()   # reap our child
        time.sleep(0.05)
    try:
        main.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


@contextmanager
def launched(argv: Sequence[str], *, limit: int | None = None, grace: float = 2.0,
             stdout=None, stderr=None) -> Iterator[Launched]:
    """Run ``argv`` in a fresh scratch memory cgroup (``limit`` bytes, or unlimited): the
    forked child moves itself into the cgroup before exec, so everything the command ever
    allocates, and every map it creates, is charged there. On exit the command and whatever
    it left in the cgroup are killed by pid and the cgroup is removed."""
    if not argv:
        raise ValueError("no command to launch")
    with scratch_cgroup(limit=limit, prefix="bpfmem-trace-") as cg:
        procs_file = os.path.join(cg.fs_path, "cgroup.procs")

        parent = os.getpid()

        def enter() -> None:  # runs in the child between fork and exec
            fd = os.open(procs_file, os.O_WRONLY)
            try:
                os.write(fd, str(os.getpid()).encode())
            finally:
                os.close(fd)
            die_with_parent(parent)   # a SIGKILLed tracer takes its command with it

        started = time.monotonic()
        try:
            proc = subprocess.Popen(list(argv), preexec_fn=enter, stdin=subprocess.DEVNULL,
                                    stdout=stdout, stderr=stderr)
        except FileNotFoundError:
            raise HostError(f"no such command: {argv[0]}") from None
        except PermissionError:
            raise HostError(f"cannot run {argv[0]}: permission denied") from None
        except subprocess.SubprocessError as e:
            raise HostError(f"cannot start {argv[0]} in {cg.fs_path}: {e}") from None
        try:
            yield Launched(proc, cg, started)
        finally:
            _kill_all(cg, proc, grace)
