"""A farm of child processes that load and hold real BPF programs (tiny socket filters,
loaded with :func:`bpfmem.host.bpfsys.prog_load`), for tests and benchmarks.

    with ProgFarm(children=10, per_child=100) as farm:
        farm.children -> [(pid, [program id, ...])]

Each child is forked, loads its programs, reports their ids on a pipe and blocks until the
farm closes; every child is killed by its pid and reaped on exit, also on errors and Ctrl-C
(the kernel frees a program when its last fd closes).
"""

from __future__ import annotations

import json
import os
import signal

from bpfmem.host import bpfsys
from bpfmem.parse.insn import alu64, exit_insn

SOCKET_FILTER = 1


def _child(w: int, n: int, insns: int) -> None:
    code = alu64("mov", 0, imm=0) + alu64("add", 0, imm=1) * max(insns - 2, 0) + exit_insn()
    ids = []
    for i in range(n):
        fd = bpfsys.prog_load(SOCKET_FILTER, code, name=f"farm{i}")
        ids.append(bpfsys.prog_info(fd).id)
    os.write(w, (json.dumps(ids) + "\n").encode())
    os.close(w)
    signal.pause()


class ProgFarm:
    def __init__(self, children: int, per_child: int, insns: int = 4):
        self.plan = (children, per_child, insns)
        self.children: list[tuple[int, list[int]]] = []
        self._pids: list[int] = []

    def __enter__(self) -> "ProgFarm":
        try:
            children, per_child, insns = self.plan
            for _ in range(children):
                r, w = os.pipe()
                pid = os.fork()
                if pid == 0:
                    try:
                        os.close(r)
                        _child(w, per_child, insns)
                    finally:
                        os._exit(1)
                self._pids.append(pid)
                os.close(w)
                with os.fdopen(r) as f:
                    line = f.readline()
                if not line:
                    raise RuntimeError(f"farm child {pid} died before loading its programs")
                self.children.append((pid, json.loads(line)))
            return self
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def __exit__(self, *exc) -> None:
        for pid in self._pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in self._pids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        self._pids.clear()
