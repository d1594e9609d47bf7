"""Small JSON facts kept between runs in the user's cache (``$XDG_CACHE_HOME/bpfmem``).

What is kept is derived from the running kernel (its BTF's facts, the owner iterator's
layout) and re-derived when the key changes. A cache directory that another user could have
written (not owned by us, or group/world writable) is not used: the facts would steer a model
or a BPF program bpfmem loads as root.
"""

from __future__ import annotations

import json
import os
import stat

MAX_ENTRY = 1 << 20


def _base() -> str:
    return os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")


def _private(path: str) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()
            and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _sha256(data: bytes) -> str:
    """sha256 hex digest from CPython's builtin module where there is one: importing hashlib
    loads OpenSSL, which costs more than a small `bpfmem maps` itself."""
    try:
        from _sha2 import sha256  # CPython 3.12+
    except ImportError:
        try:
            from _sha256 import sha256  # CPython 3.11
        except ImportError:
            from hashlib import sha256
    return sha256(data).hexdigest()


def _path(kind: str, key: str) -> str:
    return os.path.join(_base(), "bpfmem", kind, _sha256(key.encode())[:16] + ".json")


def load(kind: str, key: str) -> dict | None:
    """The entry stored under ``key``, or None (absent, unreadable, not ours, malformed)."""
    path = _path(kind, key)
    if not _private(os.path.dirname(path)):
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
        os.makedirs(d, mode=0o700, exist_ok=True)
        if not _private(d):
            return
        tmp = f"{path}.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(value, f)
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):
        pass
