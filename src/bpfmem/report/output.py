"""Where a rendered document goes: stdout, or a file written only once the render succeeded
(a render that fails, say without plotly, leaves no empty file behind), through
:func:`bpfmem.outputs.output_file` (a temporary file renamed over the target; no symlink
another user owns is followed)."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import IO, Callable


def emit(path: str | os.PathLike[str] | None, render: Callable[[IO[str]], None]) -> None:
    """``render(out)`` to stdout, or to ``path`` once it rendered whole."""
    if path is None:
        render(sys.stdout)
        return
    from ..outputs import output_file
    with output_file(path) as f:
        render(f)
