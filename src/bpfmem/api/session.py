"""The running command itself: what earlier runs left behind, and signals that end it as
Ctrl-C does (every command may need these: only the light cleanup module is imported)."""

from __future__ import annotations

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
