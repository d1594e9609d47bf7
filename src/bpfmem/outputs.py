"""The one door for the files bpfmem writes (``-o``, ``--plot``): written through a temporary
file beside the target and renamed over it only when the writing succeeded (no half-written
or empty file when a render fails), and never through a symlink someone else owns (a link
planted in a shared directory such as /tmp must not make root overwrite its target).
A target that is not a regular file (a terminal, /dev/stdout, a FIFO) is written directly."""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from typing import IO, Iterator

from .errors import BpfmemError

__all__ = ["OutputError", "output_file", "copy_to_output"]


class OutputError(BpfmemError):
    """An output file cannot be written where it was asked for. Names the file."""


def _check_links(path: str) -> None:
    """Refuse a symlink on the way to ``path`` unless this user or the owner of the
    directory holding it owns it (the kernel's fs.protected_symlinks rule, for every
    directory: /dev/stdout, root's, is followed; a link another user left in /tmp is not)."""
    me = os.geteuid()
    cur = path
    for _ in range(40):
        try:
            st = os.lstat(cur)
        except OSError:
            return
        if not stat.S_ISLNK(st.st_mode):
            return
        try:
            dir_owner = os.stat(os.path.dirname(os.path.abspath(cur))).st_uid
        except OSError:
            dir_owner = None
        if st.st_uid not in (me, dir_owner):
            raise OutputError(f"{path}: refusing to write through a symlink owned by uid "
                              f"{st.st_uid} (neither this user, {me}, nor its directory's "
                              "owner)")
        cur = os.path.join(os.path.dirname(cur), os.readlink(cur))
    raise OutputError(f"{path}: a symlink loop")


@contextmanager
def output_file(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """An open file whose content becomes ``path`` when the block ends without an error."""
    name = os.fspath(path)
    _check_links(name)
    try:
        st = os.stat(name)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise OutputError(f"{name}: {e.strerror or e}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{name}: is a directory")
    if st is not None and not stat.S_ISREG(st.st_mode):
        with open(name, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            yield f
        return
    target = os.path.realpath(name)
    d = os.path.dirname(target) or "."
    tmp = os.path.join(d, f".{os.path.basename(target)}.bpfmem-{os.getpid()}-"
                          f"{os.urandom(4).hex()}")
    perm = stat.S_IMODE(st.st_mode) if st is not None else 0o666
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     perm)
    except OSError as e:
        raise OutputError(f"{name}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            yield f
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def copy_to_output(src: str, path: str | os.PathLike) -> None:
    """Copy the file ``src`` to ``path`` the way :func:`output_file` writes."""
    import shutil
    with open(src, "rb") as s, output_file(path, "wb") as f:
        shutil.copyfileobj(s, f)
