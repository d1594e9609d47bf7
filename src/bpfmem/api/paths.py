"""The one rule for the file arguments of every command that reads objects or binaries:
paths, globs bpfmem expands, quoted lists of them; each file read once. And which of them
are saved node scans (``diff`` takes objects or two snapshots)."""

from __future__ import annotations

import os
from ..values import dataclass

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Sequence


@dataclass(frozen=True)
class Expanded:
    """The files named, in the order first named, each once; ``notes`` says what was named
    more than once (and read once)."""
    paths: tuple[str, ...]
    notes: tuple[str, ...] = ()


def _has_magic(path: str) -> bool:
    """glob.has_magic without importing glob (and its re, fnmatch) for plain paths."""
    return any(c in path for c in "*?[")


def _identity(path: str):
    """What makes two spellings one file: its device and inode (a symlink, ``./a.o`` and
    ``dir/../a.o`` are the file they name); a path that cannot be stat'ed, by its spelling
    (the reader reports it)."""
    try:
        st = os.stat(path)
    except OSError:
        return ("path", os.path.normpath(path))
    return ("file", st.st_dev, st.st_ino)


def expand_paths(arguments: Sequence[str]) -> Expanded:
    """Each argument is a path, a glob bpfmem expands itself when quoted (``'build/*.o'``),
    or a quoted list of them (``'a.o b/*.o'``); a glob that matches nothing is a ValueError,
    not a silent empty list. A file that exists is itself, even with glob characters in its
    name (``build[arm]/x.o``). A file named twice (a path and a glob, a symlink, ``./a.o``)
    is read once, the first spelling kept, with a note."""
    named: list[str] = []
    for arg in arguments:
        parts = [arg] if os.path.exists(arg) else arg.split()
        for part in parts:
            if not os.path.exists(part) and _has_magic(part):   # build[arm]/x.o: a file
                import glob
                hits = sorted(glob.glob(part))
                if not hits:
                    raise ValueError(f"no file matches {part!r}")
                named += hits
            else:
                named.append(part)
    first: dict = {}
    again: dict[str, list[str]] = {}
    for p in named:
        key = _identity(p)
        if key in first:
            if p != first[key]:
                again.setdefault(first[key], []).append(p)
            else:
                again.setdefault(first[key], [])
            continue
        first[key] = p
    notes = []
    for p, others in again.items():
        also = sorted(set(others))
        notes.append(f"{p} is named more than once" +
                     (f" (also as {', '.join(also)})" if also else "") + ": read once")
    return Expanded(tuple(first.values()), tuple(notes))


def is_snapshot_file(path: str) -> bool:
    """Whether ``path`` is a saved ``bpfmem snapshot`` or ``bpftool -j map show`` (JSON).
    (Here, not with the snapshot readers: ``diff`` of two objects asks, and need not load
    them.)"""
    if not str(path).endswith(".json"):
        return False
    from ..errors import InputError
    from ..inputs import peek_input
    from ..parse.snapshot import looks_like_snapshot
    try:
        return looks_like_snapshot(peek_input(path, 4096).decode(errors="replace"))
    except InputError:
        return False
