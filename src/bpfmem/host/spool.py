"""The bytes of one file streamed out of an archive (a container image's layer), held for a
reader that needs them whole (an ELF binary's section headers are at its end): small ones in
memory, larger ones in an unlinked private temporary file (mode 0600, gone when closed) that
is mapped read-only, so a large binary costs the pages a reader touches, not its size."""

from __future__ import annotations

import mmap
import tempfile
from contextlib import contextmanager
from typing import Iterator

#: files up to this size are held in memory
IN_MEMORY = 8 << 20
_CHUNK = 1 << 20


class CutShort(Exception):
    """The stream ended before the size its header declared."""


@contextmanager
def whole(head: bytes, stream, size: int) -> Iterator[bytearray | mmap.mmap]:
    """The ``size`` bytes that start with ``head`` and go on in ``stream``; CutShort when the
    stream ends sooner."""
    if size <= IN_MEMORY:
        buf = bytearray(size)
        buf[:len(head)] = head
        view = memoryview(buf)
        got = len(head)
        while got < size:
            n = stream.readinto(view[got:])
            if not n:
                raise CutShort(f"{got} of {size} bytes")
            got += n
        view.release()
        yield buf
        return
    with tempfile.TemporaryFile(prefix="bpfmem-spool-") as f:
        f.write(head)
        got = len(head)
        while got < size:
            chunk = stream.read(min(_CHUNK, size - got))
            if not chunk:
                raise CutShort(f"{got} of {size} bytes")
            f.write(chunk)
            got += len(chunk)
        f.flush()
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            yield mm
        finally:
            try:
                mm.close()
            except BufferError:     # a view still refers to it: the GC closes it
                pass
