"""Hostile kernel files for the hardening tests and bench/kernel_inputs.py: decompression
bombs (one layer, layered, two payloads in one bzImage, zstd), BTF with millions of types,
BTFHub-style tars (GNU-sparse members, many empty members, a bad pax sparse map, a long
member name), a sparse file, and a real BTF whose struct sizes are forged.

Every bomb is made here, at run time, in a second or two: zeros compressed chunk by chunk
(nothing large is held), written to a file in the directory given.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import struct
import tarfile
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
BTF_DIR = HERE / "data" / "btf"
RELEASE = "6.1.0-57-cloud-amd64"
MiB = 1 << 20
_ZEROS = bytes(MiB)


def real_btf(release: str = RELEASE) -> bytes:
    """A Debian kernel's BTF as committed (nobody here wrote it)."""
    return lzma.decompress((BTF_DIR / f"{release}.btf.xz").read_bytes())


def _zeros(compressor, mib: int) -> bytes:
    out = [compressor.compress(_ZEROS) for _ in range(mib)]
    out.append(compressor.flush())
    return b"".join(out)


def gzip_bomb(mib: int) -> bytes:
    return _zeros(zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS), mib)


def bz2_bomb(mib: int) -> bytes:
    return _zeros(bz2.BZ2Compressor(9), mib)


def xz_bomb(mib: int) -> bytes:
    return _zeros(lzma.LZMACompressor(preset=0), mib)


def zstd_bomb(mib: int) -> bytes:
    import zstandard
    return _zeros(zstandard.ZstdCompressor(level=1).compressobj(), mib)


def bzimage(*payloads: bytes, version: bytes = RELEASE.encode() + b" (bomb) #1") -> bytes:
    """An x86 boot image (setup sectors, 'HdrS', boot protocol 2.15) whose payload_offset
    points at the first payload; the others follow it (each a candidate stream)."""
    setup_sects = 3
    setup = bytearray((setup_sects + 1) * 512)
    setup[0x1F1] = setup_sects
    setup[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", setup, 0x206, 0x020F)
    struct.pack_into("<H", setup, 0x20E, 0x400 - 0x200)
    setup[0x400:0x400 + len(version) + 1] = version + b"\0"
    struct.pack_into("<II", setup, 0x248, 64, len(payloads[0]))
    return bytes(setup) + b"\0" * 64 + b"".join(payloads) + struct.pack("<I", 0) + b"\0" * 100


def many_types_btf(types: int) -> bytes:
    """A well-formed raw BTF of ``types`` pointer types (12 bytes each, all to void)."""
    one = struct.pack("<III", 0, 2 << 24, 0)          # BTF_KIND_PTR, no name, to void
    strs = b"\0"
    hdr = struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, 12 * types, 12 * types, len(strs))
    return hdr + one * types + strs


def forged_sizes_btf(sizes: dict[str, int], release: str = RELEASE) -> bytes:
    """The committed BTF of ``release`` with the size of each struct named in ``sizes``
    overwritten in place (its members left as they are)."""
    from bpfmem.parse.btf import STRUCT, Btf
    data = bytearray(real_btf(release))
    btf = Btf(bytes(data))
    hdr_len, type_off = struct.unpack_from("<II", data, 4)[0], struct.unpack_from("<I", data, 8)[0]
    left = dict(sizes)
    for tid in range(1, btf.count):
        if btf.kind(tid) == STRUCT and btf.name_of(tid) in left:
            off = hdr_len + type_off + btf._offsets[tid]
            struct.pack_into("<I", data, off + 8, left.pop(btf.name_of(tid)))
            if not left:
                break
    assert not left, left
    return bytes(data)


# -- tars -------------------------------------------------------------------------------------
def _tar(build) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:", format=tarfile.PAX_FORMAT) as tar:
        build(tar)
    return buf.getvalue()


def sparse_tar(members: int = 3, hole: int = 4 << 30, head: bytes = b"") -> bytes:
    """GNU sparse 1.0 members (pax headers, the map at the start of the data): each a file
    of ``hole`` bytes, all of them a hole but a last 512-byte block (``head`` is put at
    offset 0 instead when given, as a data block of its own)."""
    def build(tar):
        for i in range(members):
            if head:
                smap = f"2\n0\n{len(head)}\n{hole - 512}\n512\n".encode()
                body = head + bytes(512)
            else:
                smap = f"1\n{hole - 512}\n512\n".encode()
                body = bytes(512)
            smap += bytes(-len(smap) % 512)
            body += bytes(-len(body) % 512)
            info = tarfile.TarInfo(f"GNUSparseFile.0/{RELEASE}-{i}.btf")
            info.size = len(smap) + len(body)
            info.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
                                "GNU.sparse.name": f"{RELEASE}-{i}.btf",
                                "GNU.sparse.realsize": str(hole)}
            tar.addfile(info, io.BytesIO(smap + body))
    return _tar(build)


def bad_sparse_map_tar() -> bytes:
    """A pax member whose GNU sparse 0.1 map is not numbers."""
    def build(tar):
        info = tarfile.TarInfo(f"{RELEASE}.btf")
        info.size = 512
        info.pax_headers = {"GNU.sparse.major": "0", "GNU.sparse.minor": "1",
                            "GNU.sparse.map": "zero,one", "GNU.sparse.size": "512"}
        tar.addfile(info, io.BytesIO(bytes(512)))
    return _tar(build)


def empty_members_tar(count: int) -> bytes:
    """``count`` empty regular members (one header block repeated), then the end blocks."""
    info = tarfile.TarInfo("empty")
    block = info.tobuf(tarfile.USTAR_FORMAT)
    return block * count + bytes(1024)


def long_name_tar(length: int = 40_000) -> bytes:
    """One member holding a real BTF, named by a pax path of ``length`` characters built to
    make a backtracking release pattern quadratic ('-1.1' over and over, no match at the
    end)."""
    btf = real_btf()
    name = ("-1.1" * (length // 4)) + "!"

    def build(tar):
        info = tarfile.TarInfo(name)
        info.size = len(btf)
        tar.addfile(info, io.BytesIO(btf))
    return _tar(build)


def write(directory: str | os.PathLike, name: str, data: bytes) -> Path:
    path = Path(directory) / name
    path.write_bytes(data)
    return path


def sparse_file(directory: str | os.PathLike, name: str, size: int) -> Path:
    path = Path(directory) / name
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def xz(data: bytes) -> bytes:
    return lzma.compress(data, preset=0)


def gz(data: bytes) -> bytes:
    return gzip.compress(data, 1)


# The worst input of each kind, as (file name, maker(directory) -> path): what the tests run
# and bench/kernel_inputs.py measures. Sizes: each bomb unpacks past the 256 MiB budget.
def hostile(directory) -> dict[str, Path]:
    d = directory
    return {
        "bz2 in bzImage": write(d, "bz2.bzImage", bzimage(bz2_bomb(320))),
        "xz of gzip": write(d, "gzip.btf.xz", xz(gzip_bomb(320))),
        "two bombs in one bzImage": write(d, "two.bzImage",
                                          bzimage(gzip_bomb(300), zstd_bomb(300))),
        "zstd": write(d, "vmlinux.zst", zstd_bomb(1536)),
        "BTF types": write(d, "types.btf.xz", xz(many_types_btf(20_000_000))),
        "sparse tar members": write(d, "sparse.btf.tar", sparse_tar()),
        "empty tar members": write(d, "empty.btf.tar.gz", gz(empty_members_tar(200_000))),
        "bad pax sparse map": write(d, "badmap.btf.tar", bad_sparse_map_tar()),
        "long member name": write(d, "longname.btf.tar", long_name_tar()),
        "sparse 511Mi file": sparse_file(d, "sparse.btf", 511 << 20),
        "zero-byte structs": write(d, f"{RELEASE}.btf",
                                   forged_sizes_btf({"htab_elem": 0, "bucket": 0,
                                                     "bpf_map": 0})),
    }
