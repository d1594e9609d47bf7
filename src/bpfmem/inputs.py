"""The one door for the files users hand bpfmem (objects, snapshots, bpftool JSON, occupancy,
configuration, batch specs): bounded in size and never blocking, with one-line errors; and a
typed view of decoded JSON/TOML documents whose errors name the file and the field.

Every input is ``stat``-ed first and opened ``O_NONBLOCK`` for the check, so a FIFO, a
device (``/dev/zero``), a socket or a directory is refused at once instead of blocking or
reading for ever; a regular file larger than its kind's limit is refused before it is read
(a sparse 2 GB file costs nothing). JSON refuses NaN and Infinity, numbers of more than 40
digits and nesting deeper than Python can decode; TOML the same nesting.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
from typing import Any, Iterator

from .errors import BpfmemError

__all__ = ["InputError", "LIMITS", "read_input", "read_input_text", "load_json", "load_toml",
           "input_lines", "peek_input", "parse_json", "Fields", "split_binaries"]

# the largest file of each kind bpfmem reads (bytes)
LIMITS = {
    "object": 256 << 20,       # a BPF object (the largest real ones are a few MiB)
    "snapshot": 64 << 20,      # a node snapshot or a bpftool dump: ~1 KiB a map
    "occupancy": 64 << 20,
    "config": 1 << 20,         # bpfmem.toml, pyproject.toml
    "batch line": 1 << 20,     # one line of an estimate --batch file
    "trace": 256 << 20,        # a pod trace saved as JSON (pod --trace -o FILE): ~1 KiB a sample
    "trace line": 16 << 20,    # a line of one saved as JSON lines (the last: the view at the peak)
}


class InputError(BpfmemError):
    """An input file cannot be read, or is not what its kind must be. Names the file."""


def _open_regular(path: str | os.PathLike) -> tuple[int, int]:
    """(fd, size) of a regular file opened for reading; InputError for anything else."""
    name = os.fspath(path)
    try:
        st = os.stat(name)
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"{name}: is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{name}: not a regular file (a FIFO, device or socket)")
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise InputError(f"{name}: a symlink loop") from None
        raise InputError(f"{name}: {e.strerror or e}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):   # replaced between stat and open
        os.close(fd)
        raise InputError(f"{name}: not a regular file (a FIFO, device or socket)")
    os.set_blocking(fd, True)
    return fd, st.st_size


def read_input(path: str | os.PathLike, kind: str = "object") -> bytes:
    """The bytes of ``path``, at most ``LIMITS[kind]`` of them."""
    limit = LIMITS[kind]
    name = os.fspath(path)
    fd, size = _open_regular(name)
    try:
        if size > limit:
            from .units import format_size
            raise InputError(f"{name}: {format_size(size)}; a {kind} file may have at most "
                             f"{format_size(limit)}")
        chunks, got = [], 0
        while True:
            try:
                chunk = os.read(fd, min(1 << 20, limit + 1 - got))
            except OSError as e:
                raise InputError(f"{name}: {e.strerror or e}") from None
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
            if got > limit:   # grew while read
                from .units import format_size
                raise InputError(f"{name}: more than {format_size(limit)}, the limit of a {kind} "
                                 "file")
        return b"".join(chunks)
    finally:
        os.close(fd)


def peek_input(path: str | os.PathLike, n: int) -> bytes:
    """The first ``n`` bytes of a regular file (InputError for anything else)."""
    fd, _ = _open_regular(path)
    try:
        return os.read(fd, n)
    except OSError as e:
        raise InputError(f"{os.fspath(path)}: {e.strerror or e}") from None
    finally:
        os.close(fd)


def split_binaries(paths) -> tuple[list[str], list[str]]:
    """(the rest, ELF binaries that are no BPF object: e_machine is not EM_BPF) among
    ``paths``, from each file's ELF header; a file that cannot be read is left with the rest
    (for the object path to report)."""
    objects, binaries = [], []
    for p in paths:
        try:
            with open(p, "rb") as f:
                head = f.read(20)
        except OSError:
            objects.append(p)
            continue
        machine = int.from_bytes(head[18:20], "little" if head[5:6] != b"\x02" else "big")
        is_binary = head[:4] == b"\x7fELF" and machine != 247
        (binaries if is_binary else objects).append(p)
    return objects, binaries


def read_input_text(path: str | os.PathLike, kind: str) -> str:
    data = read_input(path, kind)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{os.fspath(path)}: not UTF-8 text (byte {e.start})") from None


def _finite(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"number out of range: {text[:40]}")
    return v


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > 40:
        raise ValueError(f"number of {len(text)} digits")
    return int(text)


def _no_constant(text: str):
    raise ValueError(f"{text} is not a JSON number")


def parse_json(text: str, name: str) -> Any:
    """Decode JSON text strictly (no NaN/Infinity, no huge numbers, bounded nesting)."""
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite,
                          parse_int=_integer)
    except json.JSONDecodeError as e:
        raise InputError(f"{name}: not JSON ({e.msg} at line {e.lineno} column {e.colno})") \
            from None
    except ValueError as e:
        raise InputError(f"{name}: not usable JSON ({e})") from None
    except RecursionError:
        raise InputError(f"{name}: nested too deeply") from None


def load_json(path: str | os.PathLike, kind: str = "snapshot") -> Any:
    return parse_json(read_input_text(path, kind), os.fspath(path))


def load_toml(path: str | os.PathLike, kind: str = "config") -> dict:
    import tomllib
    name = os.fspath(path)
    text = read_input_text(path, kind)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{name}: not valid TOML: {e}") from None
    except RecursionError:
        raise InputError(f"{name}: nested too deeply") from None


def input_lines(path: str | os.PathLike, kind: str = "batch line") -> Iterator[str]:
    """The lines of a (possibly large) text file, each at most ``LIMITS[kind]`` long; the
    file is checked like every input (no FIFO, device or directory)."""
    import io
    limit = LIMITS[kind]
    name = os.fspath(path)
    fd, _ = _open_regular(name)
    with io.open(fd, "r", encoding="utf-8", errors="replace", newline=None) as f:
        n = 0
        while True:
            line = f.readline(limit + 1)
            if not line:
                return
            n += 1
            if len(line) > limit:
                from .units import format_size
                raise InputError(f"{name}: line {n} is longer than {format_size(limit)}")
            yield line


_MISSING = object()


class Fields:
    """A typed view of one decoded JSON/TOML object: each accessor checks the field's type
    and range, and raises ValueError naming the field (``maps[3].key_size``)."""

    def __init__(self, value: Any, where: str = ""):
        if not isinstance(value, dict):
            raise ValueError(f"{where or 'the document'}: expected an object, not "
                             f"{_kind(value)}")
        self.value = value
        self.where = where

    def _name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def has(self, key: str) -> bool:
        return key in self.value

    def _get(self, key: str, default: Any):
        if key not in self.value or self.value[key] is None:
            if default is _MISSING:
                raise ValueError(f"{self._name(key)}: missing")
            return default
        return self.value[key]

    def uint(self, key: str, default: Any = _MISSING, bits: int = 64) -> Any:
        v = self._get(key, default)
        if v is default and default is not _MISSING:
            return v
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << bits:
            raise ValueError(f"{self._name(key)}: expected an integer in 0..2^{bits}-1, "
                             f"not {_show(v)}")
        return v

    def number(self, key: str, default: Any = _MISSING) -> Any:
        v = self._get(key, default)
        if v is default and default is not _MISSING:
            return v
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{self._name(key)}: expected a number, not {_show(v)}")
        return float(v)

    def text(self, key: str, default: Any = _MISSING) -> Any:
        v = self._get(key, default)
        if v is default and default is not _MISSING:
            return v
        if not isinstance(v, str):
            raise ValueError(f"{self._name(key)}: expected a string, not {_show(v)}")
        return v

    def flag(self, key: str, default: Any = _MISSING) -> Any:
        v = self._get(key, default)
        if v is default and default is not _MISSING:
            return v
        if not isinstance(v, bool):
            raise ValueError(f"{self._name(key)}: expected true or false, not {_show(v)}")
        return v

    def items(self, key: str) -> list[Any]:
        v = self._get(key, [])
        if not isinstance(v, list):
            raise ValueError(f"{self._name(key)}: expected a list, not {_show(v)}")
        return v

    def objects(self, key: str) -> list["Fields"]:
        return [Fields(v, f"{self._name(key)}[{i}]") for i, v in enumerate(self.items(key))]

    def texts(self, key: str) -> list[str]:
        out = self.items(key)
        for i, v in enumerate(out):
            if not isinstance(v, str):
                raise ValueError(f"{self._name(key)}[{i}]: expected a string, not {_show(v)}")
        return out

    def object(self, key: str) -> "Fields":
        return Fields(self._get(key, {}), self._name(key))


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "a number", float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _show(v: Any) -> str:
    if isinstance(v, (dict, list)):
        return _kind(v)
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."
