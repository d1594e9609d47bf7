"""The same command on several kernels (bpfmem.toml's ``[[kernels]]``): one result per kernel,
in order."""

from __future__ import annotations

from ..values import dataclass

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True)
class Matrix:
    """Per-kernel results of one command (``Inventory``, ``DiffResult``, ``AdviseResult``)."""
    results: tuple[Any, ...]


def one_or_matrix(results) -> Any:
    """One kernel: its result as it is; several: a :class:`Matrix` of them."""
    results = tuple(results)
    return results[0] if len(results) == 1 else Matrix(results)
