"""``bpfmem maps``: the objects' maps and programs, what each costs on one kernel or several."""

from __future__ import annotations

from ..analysis.inventory import Inventory
from ..analysis.inventory import inventory as make_inventory
from ..analysis.matrix import one_or_matrix as make_one_or_matrix
from ..analysis.typos import unmatched


def inventory(objects, errors=(), *, profile=None, whatif=None) -> Inventory:
    """``bpfmem maps``: the objects' maps and programs (an Inventory); with a KernelProfile,
    what each costs; ``errors`` (path, message) of objects that could not be read."""
    return make_inventory(objects, errors, profile=profile, whatif=whatif)


def one_or_matrix(results):
    """One kernel's result as it is; several kernels' (bpfmem.toml's [[kernels]]) as one
    Matrix, in order."""
    return make_one_or_matrix(results)


def unmatched_sets(objects, whatif) -> list[str]:
    """One warning per ``--set`` whose map glob matches no map of ``objects``."""
    return unmatched(objects, whatif)
