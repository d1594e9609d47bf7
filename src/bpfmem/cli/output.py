"""Where a command's output goes, and its messages on stderr.

The one door for "a file or stdout": :func:`emit` renders to stdout, or to ``-o FILE``
only once the render succeeded (:func:`bpfmem.report.output.emit`, an atomic write: a render
that fails leaves no file behind, no symlink another user owns is followed)."""

from __future__ import annotations

import sys

from ..errors import UsageError

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import IO, Callable

    Render = Callable[[IO[str]], None]


def emit(output: str | None, render: Render) -> None:
    """``render(out)`` to stdout, or to the file ``output``."""
    from ..report.output import emit as emit_to
    emit_to(output, render)


def render(result, fmt: str, out: IO[str], **options) -> None:
    """Draw a result as --format asks (``table`` is the text renderer)."""
    from ..report import formats
    formats.render(result, "text" if fmt == "table" else fmt, out, **options)


def emit_result(result, fmt: str, output: str | None, **options) -> None:
    """A result drawn in ``fmt`` to stdout or to the file ``output``."""
    emit(output, lambda out: render(result, fmt, out, **options))


def emit_results(results: list, fmt: str, output: str | None) -> None:
    """Results for several kernels: JSON as one matrix document, text and markdown one
    after the other; the other formats take one kernel (--kernel NAME picks it)."""
    from .. import api
    if len(results) > 1 and fmt not in ("table", "json", "markdown"):
        raise UsageError(f"--format {fmt} shows one kernel: bpfmem.toml lists "
                         f"{len(results)}; pick one with --kernel NAME or --kernel-btf FILE")
    emit_result(api.one_or_matrix(results), fmt, output)


def fail(message: str) -> None:
    """``bpfmem: error: message`` on stderr."""
    print(f"bpfmem: error: {message}", file=sys.stderr)


def warn(command: str, messages: list[str]) -> None:
    """``bpfmem COMMAND: warning: ...`` on stderr, one line each."""
    for m in messages:
        print(f"bpfmem {command}: warning: {m}", file=sys.stderr)


def note(message: str) -> None:
    """``bpfmem: message`` on stderr (what was done, where it went)."""
    print(f"bpfmem: {message}", file=sys.stderr)
