"""The one door for every file a user names: BPF objects, binaries, kernel images and BTF,
snapshots and bpftool JSON, occupancy files, configuration, batch specs. Bounded in size,
never blocking, with one-line errors (:class:`~bpfmem.errors.InputError`).

Every input is ``stat``-ed first: a FIFO, a device (``/dev/zero``), a socket or a directory
is refused at once, before anything is opened, and so is a regular file larger than its
kind's limit (a sparse 10 GiB file costs nothing). The file is then opened ``O_NONBLOCK``
and checked again (the same file, still regular), so one swapped in between cannot block
either. Large binaries are read into anonymous memory rather than mapped from the file
(:func:`mapped_input`: a file mapping faults with SIGBUS when the file is truncated under
it, which Python cannot turn into an error); the decoders of
what is read (strict JSON, TOML, typed fields) are pure and live in
:mod:`bpfmem.parse.document`.
"""

from __future__ import annotations

import errno
import mmap
import os
import stat
from contextlib import contextmanager

from .errors import InputError
from .parse.document import parse_json, parse_toml

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any, Iterator

__all__ = ["InputError", "LIMITS", "MAP_ABOVE", "check_input", "read_input",
           "read_input_text", "mapped_input", "load_json", "load_toml", "input_lines",
           "peek_input", "split_binaries", "let_go"]

# the largest file of each kind bpfmem reads (bytes)
LIMITS = {
    "object": 256 << 20,       # a BPF object (the largest real ones are a few MiB)
    "binary": 512 << 20,        # an agent's executable (the largest real ones: a few 100 MiB;
                               # read whole into memory, so the limit is what it may cost)
    "kernel": 512 << 20,       # a kernel image, vmlinux or BTF (a vmlinuz ~15 MB, BTF ~6 MB)
    "snapshot": 64 << 20,      # a node snapshot or a bpftool dump: ~1 KiB a map
    "occupancy": 64 << 20,
    "config": 1 << 20,         # bpfmem.toml, pyproject.toml
    "batch": 4 << 30,          # an estimate --batch file (read line by line)
    "batch line": 1 << 20,     # one line of it
    "trace": 256 << 20,        # a pod trace saved as JSON (pod --trace -o FILE): ~1 KiB a sample
    "trace line": 16 << 20,    # a line of one saved as JSON lines (the last: the view at the peak)
    "image": 8 << 30,          # a container image archive or one blob of an OCI layout (streamed)
}
#: a binary larger than this is read into an anonymous mapping (no second copy when joined;
#: slices of it are bytes), smaller ones into bytes
MAP_ABOVE = 32 << 20


def _size_text(n: int) -> str:
    from .units import format_size
    return format_size(n)


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _refuse(name: str, st: os.stat_result, kind: str) -> None:
    """InputError when ``st`` is no regular file, or larger than ``kind`` may be."""
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{name}: is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{name}: not a regular file (a FIFO, device or socket)")
    limit = LIMITS[kind]
    if st.st_size > limit:
        raise InputError(f"{name}: {_size_text(st.st_size)}; {_a(kind)} file may have at most "
                         f"{_size_text(limit)}")


def _os_error(name: str, e: OSError) -> InputError:
    if e.errno == errno.ELOOP:
        return InputError(f"{name}: a symlink loop")
    return InputError(f"{name}: {e.strerror or e}")


def open_input(path: str | os.PathLike, kind: str) -> tuple[int, int]:
    """(fd, size) of the regular file ``path`` opened for reading (blocking reads: a regular
    file never blocks); InputError for anything else."""
    name = os.fspath(path)
    try:
        st = os.stat(name)
    except OSError as e:
        raise _os_error(name, e) from None
    _refuse(name, st, kind)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as e:
        raise _os_error(name, e) from None
    try:
        st = os.fstat(fd)
        _refuse(name, st, kind)       # what was opened: another file may have been swapped in
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def check_input(path: str | os.PathLike, kind: str) -> int:
    """The checks of every input (a regular file this process may read, within ``kind``'s
    limit) for a file another program will read (a kernel image qemu boots); its size."""
    fd, size = open_input(path, kind)
    os.close(fd)
    return size


def _read_fd(fd: int, name: str, kind: str, size: int = 0) -> bytes:
    """The bytes of ``fd`` up to ``kind``'s limit. A file of ``size`` bytes (as fstat said)
    is read in one read into one buffer (a 4.7 MiB object was read as 1 MiB chunks joined
    into a second copy); one that grows while read, in more reads."""
    limit = LIMITS[kind]
    chunks, got = [], 0
    want = size + 1 if 0 < size <= limit else 1 << 20
    while True:
        try:
            chunk = os.read(fd, min(want, limit + 1 - got))
            want = 1 << 20
        except OSError as e:
            raise _os_error(name, e) from None
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        got += len(chunk)
        if got > limit:   # grew while read
            raise InputError(f"{name}: more than {_size_text(limit)}, the limit of {_a(kind)} "
                             "file")


def read_input(path: str | os.PathLike, kind: str = "object") -> bytes:
    """The bytes of ``path``, at most ``LIMITS[kind]`` of them."""
    name = os.fspath(path)
    fd, size = open_input(name, kind)
    try:
        return _read_fd(fd, name, kind, size)
    finally:
        os.close(fd)


@contextmanager
def mapped_input(path: str | os.PathLike, kind: str = "binary") -> Iterator[bytes | mmap.mmap]:
    """The bytes of ``path`` (a binary: up to ``LIMITS[kind]``): read into bytes, or when
    larger than :data:`MAP_ABOVE` into an anonymous mapping of its size (one copy, no join).
    ``b""`` for an empty file.

    Never a mapping of the file itself: one truncated by another process while it is read
    would make the kernel send SIGBUS, which Python cannot turn into an exception (the
    faulting load runs again). Read, a file that shrinks under us is a short read: an
    InputError naming it."""
    name = os.fspath(path)
    fd, size = open_input(name, kind)
    data: bytes | mmap.mmap
    try:
        data = _read_fd(fd, name, kind, size) if size <= MAP_ABOVE else \
            _read_mapped(fd, name, size)
    finally:
        os.close(fd)
    try:
        yield data
    finally:
        if isinstance(data, mmap.mmap):
            try:
                data.close()
            except BufferError:   # a view still refers to it: the GC closes it
                pass


def let_go(data, offset: int, size: int) -> None:
    """Give the memory of bytes [``offset``, ``offset + size``) of ``data``, as
    :func:`mapped_input` read them, back to the system: the whole pages inside the range, for
    an anonymous mapping (bytes are left alone). Those bytes then read as zeros: only for
    bytes nothing reads again."""
    if not isinstance(data, mmap.mmap) or size <= 0:
        return
    lo = -(-offset // mmap.PAGESIZE) * mmap.PAGESIZE
    hi = min(offset + size, len(data)) // mmap.PAGESIZE * mmap.PAGESIZE
    if hi > lo:
        data.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


def _extents(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """(start, end) of the data of ``fd`` below ``size``: its holes left out (SEEK_DATA and
    SEEK_HOLE), the whole file where the filesystem cannot say."""
    pos = 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
            end = os.lseek(fd, start, os.SEEK_HOLE)
        except OSError as e:
            if e.errno == errno.ENXIO:      # nothing but a hole from pos on
                return
            yield pos, size                 # no SEEK_DATA here: all of it
            return
        if start >= size:
            return
        yield start, min(end, size)
        pos = end


def _read_mapped(fd: int, name: str, size: int) -> mmap.mmap:
    """The first ``size`` bytes of ``fd`` in an anonymous mapping; InputError when the file
    ends sooner (truncated while read). The file's holes are not read: their pages of the
    mapping are never written, so a sparse file costs only its data."""
    try:
        buf = mmap.mmap(-1, size)
    except (OSError, ValueError) as e:
        raise InputError(f"{name}: no memory for its {_size_text(size)} ({e})") from None
    try:
        with memoryview(buf) as mv:
            for start, end in _extents(fd, size):
                got = start
                while got < end:
                    try:
                        n = os.preadv(fd, [mv[got:min(end, got + (16 << 20))]], got)
                    except OSError as e:
                        raise _os_error(name, e) from None
                    if n == 0:
                        raise InputError(f"{name}: shrank while read ({got} of its {size} "
                                         "bytes were there)")
                    got += n
    except BaseException:
        buf.close()
        raise
    return buf


def peek_input(path: str | os.PathLike, n: int, kind: str = "snapshot") -> bytes:
    """The first ``n`` bytes of a regular file (InputError for anything else)."""
    name = os.fspath(path)
    fd, _ = open_input(name, kind)
    try:
        return os.read(fd, n)
    except OSError as e:
        raise _os_error(name, e) from None
    finally:
        os.close(fd)


def split_binaries(paths) -> tuple[list[str], list[str]]:
    """(the rest, ELF binaries that are no BPF object: e_machine is not EM_BPF) among
    ``paths``, from each file's ELF header; a file that cannot be read is left with the rest
    (for the object path to report)."""
    objects, binaries = [], []
    for p in paths:
        try:
            head = peek_input(p, 20, "binary")
        except InputError:
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


def load_json(path: str | os.PathLike, kind: str = "snapshot") -> Any:
    return parse_json(read_input_text(path, kind), os.fspath(path))


def load_toml(path: str | os.PathLike, kind: str = "config") -> dict:
    return parse_toml(read_input_text(path, kind), os.fspath(path))


def input_lines(path: str | os.PathLike, kind: str = "batch") -> Iterator[str]:
    """The lines of a (possibly large) text file, each at most ``LIMITS[kind + " line"]``
    long; the file is checked like every input (no FIFO, device or directory)."""
    import io
    limit = LIMITS[f"{kind} line"]
    name = os.fspath(path)
    fd, _ = open_input(name, kind)
    with io.open(fd, "r", encoding="utf-8", errors="replace", newline=None) as f:
        n = 0
        while True:
            line = f.readline(limit + 1)
            if not line:
                return
            n += 1
            if len(line) > limit:
                raise InputError(f"{name}: line {n} is longer than {_size_text(limit)}")
            yield line


def is_image(path: str | os.PathLike) -> bool:
    """A directory holding an OCI layout (``index.json``) or a tar archive (docker save,
    oci-archive): what :func:`bpfmem.api.objects.load_image` reads."""
    name = os.fspath(path)
    try:
        st = os.stat(name)
    except OSError:
        return False
    if stat.S_ISDIR(st.st_mode):
        return os.path.isfile(os.path.join(name, "index.json"))
    if not stat.S_ISREG(st.st_mode) or st.st_size < 1024:
        return False
    try:
        head = peek_input(name, 512, "image")
    except InputError:
        return False
    if head[257:262] != b"ustar":   # a tar header (parse.image.is_image_archive)
        return False
    try:
        from .parse.image import is_image_archive
        return is_image_archive(head)
    except InputError:
        return False
