"""bpfmem's private cache (``$XDG_CACHE_HOME/bpfmem``): the one rule for a directory bpfmem
trusts there (:func:`private_dir`), and small JSON facts kept between runs.

What is kept is derived from the running kernel (its BTF's facts, the owner iterator's
layout) and re-derived when the key changes; the measuring probe's binary and the Debian
kernels the VM tests boot live under the same root (host/probe.py, host/vm.py). A cache
directory that another user could have written (not owned by us, or group/world writable) is
not used: what is in it would steer a model, a BPF program bpfmem loads or a binary it runs
as root.
"""

from __future__ import annotations

import json
import os
import stat
from functools import lru_cache

MAX_ENTRY = 1 << 20


def root() -> str:
    """``$XDG_CACHE_HOME/bpfmem`` or ``~/.cache/bpfmem`` (never inside the repository)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "bpfmem")


def private_dir(path: str | os.PathLike, *, create: bool = False) -> str | None:
    """None when ``path`` is a directory (no symlink) this user owns and nobody else can
    write; else why not, in a few words. ``create``: make it (mode 0700) when missing."""
    path = os.fspath(path)
    try:
        if create:
            os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError as e:
        return e.strerror or str(e)
    me = os.geteuid()
    if not stat.S_ISDIR(st.st_mode):
        return "not a directory (a symlink?)"
    if st.st_uid != me:
        return f"owned by uid {st.st_uid}, not {me}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"writable by others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _sha256(data: bytes) -> str:
    """sha256 hex digest from CPython's builtin module where there is one: importing hashlib
    loads OpenSSL, which costs more than a small `bpfmem maps` itself."""
    return _sha256_maker()(data).hexdigest()


@lru_cache(maxsize=None)
def _sha256_maker():
    # looked for once: a module that is not there is searched for on all of sys.path again
    # at every import (a scan's four cache reads)
    try:
        from _sha2 import sha256  # CPython 3.12+
    except ImportError:
        try:
            from _sha256 import sha256  # CPython 3.11
        except ImportError:
            from hashlib import sha256
    return sha256


def _path(kind: str, key: str) -> str:
    return os.path.join(root(), kind, _sha256(key.encode())[:16] + ".json")


def load(kind: str, key: str) -> dict | None:
    """The entry stored under ``key``, or None (absent, unreadable, not ours, malformed)."""
    path = _path(kind, key)
    if private_dir(os.path.dirname(path)) is not None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size > MAX_ENTRY:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            d = json.loads(f.read(MAX_ENTRY))
        return d if isinstance(d, dict) else None
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        os.close(fd)


def store(kind: str, key: str, value: dict) -> None:
    """Keep ``value`` under ``key`` (written whole and renamed; failures are ignored)."""
    path = _path(kind, key)
    d = os.path.dirname(path)
    try:
        if private_dir(d, create=True) is not None:
            return
        tmp = f"{path}.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(value, f)
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):
        pass


def layout(kind: str, key: str, cls, build):
    """A record of integers (a ``values.dataclass`` such as an iterator's kernel layout)
    kept under ``key``: the stored one when it reads back whole, else ``build()``'s, which
    is stored. What ``build`` raises goes to the caller."""
    from bpfmem.values import fields
    d = load(kind, key)
    if d is not None:
        try:
            return cls(**{f.name: int(d[f.name]) for f in fields(cls)})
        except (ValueError, TypeError, KeyError):
            pass
    made = build()
    store(kind, key, {f.name: getattr(made, f.name) for f in fields(made)})
    return made
