"""The one walk over a directory tree of the system (bpffs pins, a cgroup subtree): iterative,
so a chain of directories thousands deep (anyone who may write a bpffs directory or was
delegated a cgroup subtree can make one) is no RecursionError, and bounded in depth, so it
is no endless walk either. What lies deeper than the bound is not walked and said once."""

from __future__ import annotations

import os
TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Callable, Iterator

__all__ = ["MAX_DEPTH", "walk_tree"]

#: the deepest directory walked below the top: real bpffs and cgroup trees are a few levels
#: (kubepods/burstable/pod<uid>/<container> is 4; nested delegation a few more)
MAX_DEPTH = 64


def walk_tree(top: str, *, max_depth: int = MAX_DEPTH,
              too_deep: Callable[[str], None] | None = None
              ) -> Iterator[tuple[str, list[str], list[str]]]:
    """(dirpath, subdirectory names, other names) for ``top`` and each directory below it,
    parents before children, like ``os.walk(top)`` (a symlink to a directory listed with the
    directories and not entered; a directory that cannot be read is passed over). A directory
    ``max_depth`` levels below ``top`` is listed but not entered: ``too_deep`` is called
    with the first such path (once a walk)."""
    stack = [(top, 0)]
    told = False
    while stack:
        path, depth = stack.pop()
        dirs, files, links = [], [], set()
        try:
            with os.scandir(path) as it:
                for entry in it:
                    try:
                        is_dir = entry.is_dir()
                        if is_dir and entry.is_symlink():
                            links.add(entry.name)
                    except OSError:
                        is_dir = False
                    (dirs if is_dir else files).append(entry.name)
        except OSError:
            continue
        yield path, dirs, files
        if links:
            dirs = [d for d in dirs if d not in links]
        if depth >= max_depth:
            if dirs and not told:
                told = True
                if too_deep is not None:
                    too_deep(os.path.join(path, dirs[0]))
            continue
        for name in reversed(dirs):     # the caller may have pruned dirs, as with os.walk
            stack.append((os.path.join(path, name), depth + 1))
