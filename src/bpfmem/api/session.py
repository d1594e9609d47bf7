"""The running command itself: what earlier runs left behind, and signals that end it as
Ctrl-C does (every command may need these: only the light cleanup module is imported)."""

from __future__ import annotations

import gc

from ..host.cleanup import signals_interrupt as interrupting
from ..host.cleanup import sweep_leftovers as sweep


def sweep_leftovers() -> tuple[list[str], list[str]]:
    """Remove what earlier bpfmem runs killed before they could clean up left behind
    (scratch cgroups, probe directories): ``(removed, could not remove)`` paths."""
    return sweep()


def signals_interrupt():
    """A context in which SIGTERM and SIGHUP raise KeyboardInterrupt, as Ctrl-C does (so
    scratch maps, cgroups and processes are cleaned up the same way)."""
    return interrupting()


class collector_paused:
    """A context in which Python's cyclic garbage collector does not run (as it was after).
    For work that makes many long-lived objects and no cycles (an object's BTF types and
    records, a binary's labels, a node's map records): the collector's passes over them find
    nothing. ``freeze``: what is left at the end is frozen (gc.freeze), so no later pass,
    exit included, walks it either."""
    __slots__ = ("_freeze", "_was")

    def __init__(self, *, freeze: bool = False):
        self._freeze, self._was = freeze, False

    def __enter__(self) -> None:
        self._was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc) -> None:
        if self._freeze:
            gc.freeze()
        if self._was:
            gc.enable()
