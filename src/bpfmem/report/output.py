"""Where a rendered document goes: stdout, or a file written only once the render succeeded
(a render that fails, say without plotly, leaves no empty file behind)."""

from __future__ import annotations

import io
import os
import sys
from typing import IO, Callable


def emit(path: str | os.PathLike[str] | None, render: Callable[[IO[str]], None]) -> None:
    """``render(out)`` to stdout, or to ``path`` after rendering into memory."""
    if path is None:
        render(sys.stdout)
        return
    buf = io.StringIO()
    render(buf)
    with open(path, "w", encoding="utf-8") as f:
        f.write(buf.getvalue())
