"""For a project's own pytest suite: fail a test when the eBPF maps outgrow the budget.

    from bpfmem.testing import assert_maps_fit

    def test_maps_fit_the_agent_limit():
        assert_maps_fit(["build/agent.bpf.o"], limit="128Mi", fraction=0.5,
                        kernel=["6.1", "6.12"], cpus=[2, 64])

The failure message is the same offenders table ``bpfmem check`` prints.
"""

from __future__ import annotations

import io
import os
from typing import Iterable

__all__ = ["assert_maps_fit", "MapsDoNotFit"]


class MapsDoNotFit(AssertionError):
    """The maps do not fit the budget; ``doc`` is the check document."""

    def __init__(self, message: str, doc: dict):
        super().__init__(message)
        self.doc = doc


def assert_maps_fit(objects: Iterable[str | os.PathLike] | str | os.PathLike,
                    limit: str | int = "128Mi", fraction: float = 1.0, *,
                    kernel: str | Iterable[str] | None = None,
                    cpus: int | Iterable[int] | None = None, full: bool = False,
                    set: Iterable[str] = ()) -> dict:
    """Raise :class:`MapsDoNotFit` (an AssertionError) unless the maps the objects create fit
    ``limit * fraction`` on every kernel and CPU count given; return the check document."""
    from . import api
    from .units import parse_size
    from .report.documents import document
    from .report.text import check_text

    if isinstance(objects, (str, os.PathLike)):
        objects = [objects]
    kernels = [kernel] if isinstance(kernel, str) else list(kernel or [])
    cpu_list = [cpus] if isinstance(cpus, int) else list(cpus or [])
    result = api.check_objects([os.fspath(o) for o in objects], limit=parse_size(limit),
                               profiles=api.profiles(kernels, cpu_list), max_fraction=fraction,
                               full=full, whatif=api.make_whatif(list(set)))
    doc = document(result)
    if not result.passed:
        buf = io.StringIO()
        check_text(result, buf)
        raise MapsDoNotFit("eBPF maps do not fit the memory budget:\n" + buf.getvalue(), doc)
    return doc
