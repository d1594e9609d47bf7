"""Bounded reads over bytes: every offset and size is checked before use.

A read that would leave the buffer raises :class:`ParseError` naming the section (or part)
and the offset, instead of an IndexError or a silently short slice. What a decoder lets slip
through anyway (a ``struct.error``, an ``IndexError``, a ``UnicodeDecodeError``...) becomes a
ParseError in one place, :func:`decoding`, which the parse entry points wrap themselves in
(as pyelftools' ``struct_parse`` turns construct's errors into ``ELFParseError``).
"""

from __future__ import annotations

import struct
from contextlib import contextmanager
from functools import lru_cache

from ..errors import ParseError

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Iterator

#: the low-level errors a decoder over untrusted bytes can raise: every one means "these
#: bytes are not what they claim", never a bug of the caller
LOW_LEVEL_ERRORS = (struct.error, IndexError, UnicodeDecodeError, OverflowError)


@contextmanager
def decoding(section: str | None = None, what: str | None = None,
             offset: int | None = None) -> Iterator[None]:
    """Run a decoder: a low-level error inside becomes :class:`ParseError` (``what``, or the
    error's own words, in ``section``); a ParseError passes unchanged."""
    try:
        yield
    except LOW_LEVEL_ERRORS as e:
        raise ParseError(what or f"malformed data ({type(e).__name__}: {e})",
                         section=section, offset=offset) from None


@lru_cache(maxsize=None)
def packer(endian: str, fmt: str) -> struct.Struct:
    """A cached :class:`struct.Struct` for ``fmt`` in byte order ``endian`` ('<' or '>')."""
    return struct.Struct(endian + fmt)


class Bytes:
    """A bounded view over ``data`` that knows what it is (``section``) for error messages.

    ``base`` is the view's offset in the whole file, so errors give file offsets.
    """

    __slots__ = ("data", "section", "base", "endian")

    def __init__(self, data: bytes, section: str | None, *, base: int = 0,
                 endian: str = "<"):
        self.data = data
        self.section = section
        self.base = base
        self.endian = endian

    def __len__(self) -> int:
        return len(self.data)

    def error(self, what: str, offset: int) -> ParseError:
        return ParseError(what, section=self.section, offset=self.base + offset)

    def check(self, offset: int, size: int, what: str) -> None:
        if offset < 0 or size < 0 or offset + size > len(self.data):
            raise self.error(
                f"{what}: {size} bytes at {offset:#x} run past the end ({len(self.data):#x} bytes)",
                max(offset, 0))

    def sub(self, offset: int, size: int, what: str, section: str | None = None) -> "Bytes":
        """A view of ``size`` bytes at ``offset``, bounds-checked."""
        self.check(offset, size, what)
        return Bytes(self.data[offset:offset + size], section or self.section,
                     base=self.base + offset, endian=self.endian)

    def raw(self, offset: int, size: int, what: str) -> bytes:
        self.check(offset, size, what)
        return bytes(self.data[offset:offset + size])

    def unpack(self, fmt: str, offset: int, what: str) -> tuple:
        st = packer(self.endian, fmt)
        self.check(offset, st.size, what)
        return st.unpack_from(self.data, offset)

    def u8(self, offset: int, what: str) -> int:
        return self.unpack("B", offset, what)[0]

    def u32(self, offset: int, what: str) -> int:
        return self.unpack("I", offset, what)[0]

    def iter_unpack(self, fmt: str, offset: int, count: int, what: str) -> Iterator[tuple]:
        """``count`` consecutive records of ``fmt`` starting at ``offset``."""
        st = packer(self.endian, fmt)
        size = st.size * count
        self.check(offset, size, what)
        if count == 0:
            return iter(())
        return st.iter_unpack(memoryview(self.data)[offset:offset + size])

    def cstr(self, offset: int, what: str) -> str:
        """The NUL-terminated string at ``offset``; it must end inside the buffer."""
        if offset < 0 or offset >= len(self.data):
            raise self.error(f"{what}: string offset {offset:#x} is outside the table "
                             f"({len(self.data):#x} bytes)", max(offset, 0))
        data = self.data
        end = data.find(b"\0", offset)
        if end < 0:
            raise self.error(f"{what}: string at {offset:#x} is not NUL-terminated", offset)
        return data[offset:end].decode("utf-8", "replace")
