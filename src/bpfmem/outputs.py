"""The one door for the files bpfmem writes (``-o``, ``--plot``): written through a temporary
file beside the target and renamed over it only when the writing succeeded (no half-written
or empty file when a render fails), and never through a symlink someone else owns (a link
planted in a shared directory such as /tmp must not make root overwrite its target).
A target that is not a regular file (a terminal, /dev/stdout, a FIFO) is written directly:
a FIFO only when it is the user's (or its directory owner's) and something reads it."""

from __future__ import annotations

import errno
import os
import stat
from contextlib import contextmanager
from typing import IO, Iterator

from .errors import BpfmemError

__all__ = ["OutputError", "output_file", "copy_to_output"]


class OutputError(BpfmemError):
    """An output file cannot be written where it was asked for. Names the file."""


def _check_links(path: str) -> None:
    """Refuse a symlink anywhere on the way to ``path`` (a directory component as well as the
    file) unless this user or the owner of the directory holding it owns it (the kernel's
    fs.protected_symlinks rule, for every directory: /dev/stdout, root's, is followed; a
    link another user left in /tmp, or a directory link planted as /tmp/x in ``-o
    /tmp/x/report.json``, is not). Each link is resolved as the kernel would, component by
    component, at most 40 of them."""
    me = os.geteuid()
    # not abspath: it drops "x/.." before x is resolved (a link x, the kernel goes up from
    # where x points)
    full = path if path.startswith("/") else os.path.join(os.getcwd(), path)
    parts = [p for p in full.split("/") if p and p != "."]
    cur = "/"
    links = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            cur = os.path.dirname(cur)
            continue
        nxt = os.path.join(cur, part)
        try:
            st = os.lstat(nxt)
        except OSError:
            return                       # the rest does not exist yet: nothing to follow
        if not stat.S_ISLNK(st.st_mode):
            cur = nxt
            continue
        links += 1
        if links > 40:
            raise OutputError(f"{path}: a symlink loop")
        try:
            dir_owner = os.stat(cur).st_uid
        except OSError:
            dir_owner = None
        if st.st_uid not in (me, dir_owner):
            what = "symlink" if not parts else f"directory symlink {nxt}"
            raise OutputError(f"{path}: refusing to write through a {what} owned by uid "
                              f"{st.st_uid} (neither this user, {me}, nor its directory's "
                              "owner)")
        target = os.readlink(nxt)
        parts = [p for p in target.split("/") if p] + parts
        if target.startswith("/"):
            cur = "/"


def _open_special(name: str, st: os.stat_result, mode: str) -> IO:
    """A target that is no regular file, opened for writing without blocking: a FIFO only
    when it is this user's or its directory owner's (fs.protected_fifos) and has a reader
    (opened O_NONBLOCK: ENXIO otherwise; a FIFO planted at the -o path hung root)."""
    flags = os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC
    if stat.S_ISFIFO(st.st_mode):
        me = os.geteuid()
        try:
            dir_owner = os.stat(os.path.dirname(os.path.abspath(name))).st_uid
        except OSError:
            dir_owner = None
        if st.st_uid not in (me, dir_owner):
            raise OutputError(f"{name}: refusing to write into a FIFO owned by uid {st.st_uid} "
                              f"(neither this user, {me}, nor its directory's owner)")
        flags |= os.O_NONBLOCK
    try:
        fd = os.open(name, flags)
    except OSError as e:
        if e.errno == errno.ENXIO:
            raise OutputError(f"{name}: a FIFO nobody reads") from None
        raise OutputError(f"{name}: {e.strerror or e}") from None
    try:
        after = os.fstat(fd)
        if stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (st.st_dev, st.st_ino):
            raise OutputError(f"{name}: replaced while opened")
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"}))
    except BaseException:
        os.close(fd)
        raise


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
        with _open_special(name, st, mode) as f:
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
