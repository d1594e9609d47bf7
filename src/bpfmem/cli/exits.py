"""The one place an exception becomes a one-line message and an exit status.

0 ok, 1 error (or over budget: the command's own status), 2 usage, 130 interrupted. In this
order: the reader of stdout went away (``bpfmem ... | head``: EPIPE, not an error, nothing
said), a usage problem, an error of bpfmem's tree, an error of the system (a file that
cannot be read). SIGTERM and SIGHUP end a command as Ctrl-C does, so scratch state (maps,
cgroups, processes) is cleaned up by the same ``finally`` blocks.
"""

from __future__ import annotations

import errno
import os
import sys

from ..errors import BpfmemError, UsageError
from .command import EXIT_ERROR, EXIT_OK, EXIT_USAGE
from .output import fail

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Callable

EXIT_INTERRUPTED = 130


def _is_epipe(e: BaseException) -> bool:
    return isinstance(e, BrokenPipeError) or (isinstance(e, OSError)
                                             and e.errno == errno.EPIPE)


def _stdout_gone() -> None:
    """stdout's reader went away: point fd 1 at /dev/null, so what is still buffered (and
    the interpreter's flush at exit) goes nowhere instead of failing again."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return      # not a real file (a test's capture): nothing will flush to a pipe
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def run_guarded(command: str, run: Callable[[], int]) -> int:
    """``run()``'s exit status, or the status of the exception it raised (said in one line
    on stderr, prefixed ``bpfmem COMMAND: error:`` for usage problems)."""
    from .. import api
    try:
        with api.signals_interrupt():   # SIGTERM and SIGHUP end a command as Ctrl-C does
            status = run()
            sys.stdout.flush()   # a reader gone shows here, not in the flush at exit
        return status
    except BrokenPipeError:
        _stdout_gone()
        return EXIT_OK
    except UsageError as e:
        print(f"bpfmem {command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BpfmemError as e:
        fail(str(e))
        return EXIT_ERROR
    except OSError as e:
        if _is_epipe(e):
            _stdout_gone()
            return EXIT_OK
        fail(f"{e.filename}: {e.strerror}" if e.filename else str(e.strerror or e))
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("bpfmem: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
