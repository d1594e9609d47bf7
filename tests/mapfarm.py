"""A farm of child processes that create and hold real BPF maps, for tests and benchmarks.

    with MapFarm([[MapPlan(...), ...], ...], pin_dir=...) as farm:
        farm.children   -> [Child(pid, maps=[FarmMap(id, name, fd, pin, filled)...])]

Each child is forked, creates its maps with :mod:`bpfmem.host.bpfsys`, fills and pins what its
plan says, reports the map ids on a pipe and then blocks until the farm closes. On exit
(also on errors and Ctrl-C) every child is killed by its pid and reaped, and every pin removed.
"""

from __future__ import annotations

import json
import os
import signal
import struct
from dataclasses import dataclass

from bpfmem.host import bpfsys


@dataclass(frozen=True)
class MapPlan:
    name: str
    type: int
    key_size: int
    value_size: int
    max_entries: int
    map_flags: int = 0
    fill: int = 0          # entries to insert (keys 0..fill-1, little-endian)
    pin: bool = False      # pin at <pin_dir>/<name>


@dataclass(frozen=True)
class FarmMap:
    id: int
    name: str
    pin: str | None
    fill: int
    fd: int          # the fd number in the child that holds it


@dataclass
class Child:
    pid: int
    maps: list[FarmMap]


def _child(plans: list[MapPlan], pin_dir: str | None, wfd: int, hold_fd: int,
           cpus: int, comm: str | None = None) -> None:
    if comm:  # prctl(PR_SET_NAME): what /proc/PID/comm and the scan's owner show
        import ctypes
        ctypes.CDLL(None).prctl(15, comm.encode()[:15], 0, 0, 0)
    out = []
    for p in plans:
        fd = bpfsys.map_create(p.type, p.key_size, p.value_size, p.max_entries, p.map_flags,
                               p.name)
        percpu = p.type in (5, 6, 10)
        vsize = ((p.value_size + 7) // 8) * 8 * cpus if percpu else p.value_size
        for i in range(p.fill):
            key = struct.pack("<Q", i)[:p.key_size].ljust(p.key_size, b"\0")
            if p.type == 11:  # LPM trie: prefixlen (u32) then data
                key = struct.pack("<I", 8 * (p.key_size - 4)) + struct.pack(
                    ">Q", i)[-(p.key_size - 4):]
            bpfsys.map_update(fd, key, bytes(vsize))
        pin = None
        if p.pin and pin_dir:
            pin = os.path.join(pin_dir, p.name)
            bpfsys.obj_pin(fd, pin)
        out.append({"id": bpfsys.map_info(fd).id, "name": p.name, "pin": pin, "fill": p.fill,
                    "fd": fd})
    os.write(wfd, (json.dumps(out) + "\n").encode())
    os.close(wfd)
    os.read(hold_fd, 1)  # blocks until the farm closes the write end (or kills us)


class MapFarm:
    def __init__(self, plans_per_child: list[list[MapPlan]], pin_dir: str | None = None,
                 comms: list[str] | None = None):
        self.plans = plans_per_child
        self.pin_dir = pin_dir
        self.comms = comms or [None] * len(plans_per_child)
        self.children: list[Child] = []
        self._hold_w: int | None = None

    def __enter__(self) -> "MapFarm":
        from bpfmem.host.profile import host_possible_cpus
        cpus = host_possible_cpus()
        hold_r, self._hold_w = os.pipe()
        try:
            pending = []
            for plans, comm in zip(self.plans, self.comms):
                r, w = os.pipe()
                pid = os.fork()
                if pid == 0:  # child
                    code = 0
                    try:
                        os.close(r)
                        os.close(self._hold_w)
                        _child(plans, self.pin_dir, w, hold_r, cpus, comm)
                    except BaseException as e:  # report and die quietly
                        try:
                            os.write(w, (json.dumps({"error": str(e)}) + "\n").encode())
                        except OSError:
                            pass
                        code = 1
                    os._exit(code)
                os.close(w)
                pending.append((pid, r))
                self.children.append(Child(pid, []))
            for child, (pid, r) in zip(self.children, pending):
                with os.fdopen(r, "rb") as f:
                    line = f.readline()
                data = json.loads(line) if line else {"error": "child exited"}
                if isinstance(data, dict):
                    raise RuntimeError(f"map farm child {pid}: {data['error']}")
                child.maps = [FarmMap(**m) for m in data]
        except BaseException:
            os.close(hold_r)
            self.__exit__(None, None, None)
            raise
        os.close(hold_r)
        return self

    @property
    def maps(self) -> list[FarmMap]:
        return [m for c in self.children for m in c.maps]

    def __exit__(self, *exc) -> None:
        for c in self.children:
            try:
                os.kill(c.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for c in self.children:
            try:
                os.waitpid(c.pid, 0)
            except ChildProcessError:
                pass
        if self._hold_w is not None:
            os.close(self._hold_w)
            self._hold_w = None
        for c in self.children:
            for m in c.maps:
                if m.pin:
                    try:
                        os.unlink(m.pin)
                    except FileNotFoundError:
                        pass
        self.children = []


def uniform_plans(processes: int, maps_per_process: int, prefix: str = "farm") -> list[list[MapPlan]]:
    """A mix of small maps (hash, array, LRU hash, per-CPU hash) for load and benchmark runs."""
    kinds = [(1, 4, 8, 64, 0), (2, 4, 8, 64, 0), (9, 4, 8, 64, 0), (5, 4, 8, 32, 0),
             (1, 8, 16, 128, 1)]
    plans = []
    for p in range(processes):
        row = []
        for i in range(maps_per_process):
            t, k, v, m, f = kinds[i % len(kinds)]
            row.append(MapPlan(f"{prefix}{p}_{i}"[:15], t, k, v, m, f, fill=i % 7))
        plans.append(row)
    return plans
