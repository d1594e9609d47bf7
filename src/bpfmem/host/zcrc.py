"""CRC-32s put together by the zlib library itself (``crc32_combine_gen`` and
``crc32_combine_op``, zlib 1.2.12+), through ctypes: the exporter's gzipped page is made of
pieces compressed once and kept, and its trailer's CRC-32 of the whole text is put together
from the pieces' own CRCs at every page (report/prometheus.py). Without the library that
costs a CRC over as many zeros as the page has bytes (7 MB at 10,000 maps); with it, one
call a piece, whatever its size."""

from __future__ import annotations

import ctypes

__all__ = ["ZlibCrc", "zlib_crc"]


class ZlibCrc:
    """``gen(size)`` gives a piece's op once; ``combine(crc1, crc2, op)`` the CRC of text A
    then B from their CRCs and B's op (report.prometheus.ZerosCrc's interface)."""

    def __init__(self, lib) -> None:
        self.gen = lib.crc32_combine_gen
        self.gen.restype = ctypes.c_ulong
        self.gen.argtypes = [ctypes.c_long]
        self.combine = lib.crc32_combine_op
        self.combine.restype = ctypes.c_ulong
        self.combine.argtypes = [ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def zlib_crc() -> ZlibCrc | None:
    """The zlib library's CRC combination, or None where it cannot be loaded (an older
    zlib): then the pieces' CRCs are put together with CRCs of zeros."""
    for name in ("libz.so.1", "libz.so"):
        try:
            return ZlibCrc(ctypes.CDLL(name))
        except (OSError, AttributeError):
            continue
    return None
