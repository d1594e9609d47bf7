"""A kernel's BTF, from whatever file a user has of it, and the facts bpfmem needs from it.

Files taken (the container is recognised from its bytes, not its name):

* raw BTF: ``/sys/kernel/btf/vmlinux`` copied from a node, or ``bpftool btf dump file ...
  format raw`` output;
* an ELF ``vmlinux`` with a ``.BTF`` section;
* a compressed kernel image (``vmlinuz``/``bzImage``): the x86 boot header's payload
  (``payload_offset``/``payload_length``, boot protocol 2.08+), or any gzip/xz/bzip2 stream
  found in the file, decompressed to the ELF ``vmlinux`` inside;
* an arm64 ``Image`` (the header's ``ARM\x64`` magic; Debian's arm64 ``vmlinuz``), raw or
  gzip-compressed (``Image.gz``): the BTF blob inside it, and the page size its header's
  flags state;
* an EFI zboot image (``vmlinuz.efi``: ``MZ`` + ``zimg``, its payload offset, size and
  compression named in the header), unpacked to the ``Image`` inside;
* a BTFHub archive (``<release>.btf.tar.xz``, one raw BTF per distro kernel);
* any of the above compressed whole with gzip, xz or bzip2 (``vmlinux.btf.xz``).

The architecture comes from the image (bzImage: x86_64; arm64 Image; an ELF's e_machine), else
from the BTF's ``struct pt_regs``; the page size from an arm64 Image's header (x86_64 has only
4 KiB). What neither says is left None for the caller to ask for.

The release comes from the kernel's banner (``Linux version 6.1.0-57-cloud-amd64 ...``) or the
x86 boot header's version string where the file has one, else from the file name.

Everything here is pure: bytes in, :class:`KernelFacts` out, :class:`ParseError` for anything
that is not a kernel's BTF. Decompression is bounded: every layer and every candidate stream
of one file draw on one budget (:data:`BUDGET` bytes unpacked in all), each codec streamed
with an output limit, so a bomb stops at the budget whatever its layers; tar members, BTF
types and the strings the release patterns run on are bounded too.
"""

from __future__ import annotations

import re
from ..values import replace

from ..errors import ParseError
from .elf import ElfImage
from .kernel_facts import KernelFacts  # noqa: F401 (where it was declared first)
from .reader import Bytes, decoding

# The codecs, tarfile and the BTF parser are imported where a file needs them: a profile from
# the cached facts of the host imports none of them (start-up time).

BTF_MAGIC_LE = b"\x9f\xeb"
BTF_MAGIC_BE = b"\xeb\x9f"
#: bytes unpacked from one file, all layers and candidates together: a kernel image unpacks to
#: its vmlinux (Debian's: 40-70 MiB), a BTFHub archive to a few MiB
BUDGET = 256 << 20
_CHUNK = 1 << 20              # each codec is asked for at most this much at a time: a bomb
#                               peaks at the budget plus one chunk (8 MiB chunks: +28 MiB)
_ZSTD_SLICE = 1 << 7          # zstd is fed this much at a time (it has no output limit): 4 MiB
#                               out at most (1 KiB slices: 32 MiB, and the bomb peaked 100 MiB
#                               past the budget); a 50 MiB vmlinux takes 20 ms more
MAX_TAR_MEMBERS = 4096        # a BTFHub archive has one member
_NAME_MAX = 255               # the release patterns run on at most this much of a name
MAX_BTF_CANDIDATES = 1024     # BTF magics looked at in an arm64 Image (Debian 6.1's has 3)
_XZ = b"\xfd7zXZ\x00"
_GZ = b"\x1f\x8b\x08"
_BZ = b"BZh"
_LZ4_LEGACY = b"\x02\x21\x4c\x18"     # lz4 -l, as the kernel's bzImage uses it
_ZSTD = b"\x28\xb5\x2f\xfd"
_MAGICS = (_XZ, _GZ, _BZ, _LZ4_LEGACY, _ZSTD)
_NEEDS = {_LZ4_LEGACY: ("LZ4", "lz4"), _ZSTD: ("zstd", "zstandard")}

# The members whose presence tells an accounting era or a feature (see model/kernel.py).
MARKER_STRUCTS = ("bpf_map", "bpf_map_ops", "bpf_htab", "lpm_trie", "bpf_local_storage_map",
                  "bpf_mem_alloc", "pt_regs")
# struct pt_regs members only one architecture has
_PT_REGS_ARCH = (("pt_regs.orig_ax", "x86_64"), ("pt_regs.orig_x0", "aarch64"))
_ELF_MACHINES = {62: "x86_64", 183: "aarch64"}
_ARM64_MAGIC = b"ARM\x64"                      # arm64 Image header, at 0x38
_ARM64_PAGES = {1: 4096, 2: 16384, 3: 65536}   # Image header flags bits 1-2
# struct bpf_map members every kernel since 4.x has: without them the BTF is not a kernel's.
REQUIRED_MAP_MEMBERS = ("map_type", "key_size", "value_size", "max_entries", "map_flags")


class Budget:
    """The bytes one file may still unpack to, shared by its layers and candidate streams."""

    __slots__ = ("limit", "left")

    def __init__(self, limit: int | None = None):
        self.limit = BUDGET if limit is None else limit
        self.left = self.limit

    @property
    def exhausted(self) -> bool:
        return self.left < 0

    def take(self, n: int, offset: int) -> None:
        self.left -= n
        if self.left < 0:
            from ..units import format_size
            raise ParseError(f"unpacks to more than {format_size(self.limit)} (all its "
                             "compressed layers and streams together): no kernel image or "
                             "BTF is that large", offset=offset)


def parse_kernel_btf(data: bytes, *, name: str = "", struct_names=(),
                     budget: Budget | None = None) -> KernelFacts:
    """The facts of the kernel whose BTF ``data`` holds (any container above)."""
    traits: dict = {}
    with decoding(name or "BTF"):
        btf, release, container = unwrap(data, name, traits=traits, budget=budget)
        facts = facts_from_btf(btf, struct_names, container, section=name or "BTF")
    arch = traits.get("arch") or facts.arch
    page = traits.get("page_size") or (4096 if arch == "x86_64" else None)
    return replace(facts, release=release or release_from_name(name), arch=arch,
                   page_size=page)


# -- containers -------------------------------------------------------------------------------
def unwrap(data: bytes, name: str = "", _depth: int = 0,
           traits: dict | None = None,
           budget: Budget | None = None) -> tuple[bytes, str | None, str]:
    """(raw BTF bytes, release from a banner or None, what the file was); ``traits`` gets
    the image's ``arch`` and ``page_size`` where it states them; ``budget`` what the file
    may unpack to in all (a new :class:`Budget` when None)."""
    traits = {} if traits is None else traits
    budget = Budget() if budget is None else budget
    if _depth > 3:
        raise ParseError("compressed too many times over to be a kernel file", offset=0)
    head = data[:8]
    if len(data) == 0:
        raise ParseError("empty file: not a kernel BTF, vmlinux or kernel image", offset=0)
    if head[:2] in (BTF_MAGIC_LE, BTF_MAGIC_BE):
        return data, None, "raw BTF"
    if head[:4] == b"\x7fELF":
        btf = _elf_btf(data)
        if len(data) > 0x14:
            machine = int.from_bytes(data[0x12:0x14], "little" if data[5] == 1 else "big")
            traits.setdefault("arch", _ELF_MACHINES.get(machine))
        return btf, _elf_banner(data), "ELF vmlinux"
    if any(head.startswith(m) for m in _MAGICS):
        inner = _decompress(data, 0, budget)
        if _is_tar(inner):
            return _from_tar(inner, name, budget)
        btf, release, what = unwrap(inner, name, _depth + 1, traits, budget)
        return btf, release, f"{_kind(head)}-compressed {what}"
    if _is_tar(data):
        return _from_tar(data, name, budget)
    if len(data) > 0x260 and data[0x202:0x206] == b"HdrS":
        traits["arch"] = "x86_64"
        return _from_bzimage(data, budget)
    if len(data) >= 0x40 and data[0x38:0x3C] == _ARM64_MAGIC:
        return _from_arm64_image(data, traits)
    if len(data) >= 0x40 and data[:2] == b"MZ" and data[4:8] == b"zimg":
        btf, release, what = unwrap(_from_zboot(data, budget), name, _depth + 1, traits,
                                    budget)
        return btf, release, f"EFI zboot {what}"
    raise ParseError("not a kernel BTF: expected raw BTF (magic 0xeb9f), an ELF vmlinux with "
                     ".BTF, a vmlinuz/bzImage, an arm64 Image, an EFI zboot vmlinuz.efi or a "
                     "BTFHub .btf.tar.xz", offset=0)


def _from_arm64_image(data: bytes, traits: dict) -> tuple[bytes, str | None, str]:
    """An arm64 ``Image`` (Documentation/arch/arm64/booting.rst): a 64-byte header (flags at
    0x18: bit 0 big-endian, bits 1-2 the page size) before the kernel's bytes as loaded. The
    BTF is the ``.BTF`` section's bytes, copied as is: the largest well-formed BTF blob in
    the image (the BPF objects some kernels embed carry small ones)."""
    flags = int.from_bytes(data[0x18:0x20], "little")
    traits["arch"] = "aarch64"
    if _ARM64_PAGES.get((flags >> 1) & 3):
        traits["page_size"] = _ARM64_PAGES[(flags >> 1) & 3]
    magic = BTF_MAGIC_BE + b"\x01" if flags & 1 else BTF_MAGIC_LE + b"\x01"
    order = ">" if flags & 1 else "<"
    best = None
    image = Bytes(data, "arm64 Image", endian=order)
    i = data.find(magic)
    seen = 0
    while i >= 0:
        seen += 1
        if seen > MAX_BTF_CANDIDATES:
            raise ParseError(f"arm64 Image with more than {MAX_BTF_CANDIDATES} BTF magic "
                             "numbers: not a kernel's (Debian's has 3)", offset=i)
        if i + 24 <= len(data):
            hdr_len, type_off, type_len, str_off, str_len = image.unpack("5I", i + 4,
                                                                         "BTF header")
            size = hdr_len + max(type_off + type_len, str_off + str_len)
            if hdr_len >= 24 and i + size <= len(data) and (best is None or size > best[1]):
                best = (i, size)
        i = data.find(magic, i + 1)
    if best is None:
        raise ParseError("arm64 Image without BTF (a kernel built without "
                         "CONFIG_DEBUG_INFO_BTF)", section=".BTF", offset=0)
    return (data[best[0]:best[0] + best[1]], release_from_banner(data), "arm64 Image")


def _from_zboot(data: bytes, budget: Budget) -> bytes:
    """EFI zboot (drivers/firmware/efi/libstub/zboot-header.S): ``MZ``, ``zimg``, then the
    payload's offset and size (u32 each) and, at 0x18, the compression's name; the payload
    is the compressed ``Image``."""
    off, size = Bytes(data, "EFI zboot header").unpack("II", 8, "payload offset and size")
    kind = data[0x18:0x38].split(b"\0")[0].decode("ascii", "replace")
    if not size or off + size > len(data):
        raise ParseError("EFI zboot image whose payload lies past the end of the file "
                         "(truncated?)", offset=8)
    payload = data[off:off + size]
    if kind == "lzma" or (payload[:1] == b"\x5d" and kind not in ("gzip", "zstd", "xz")):
        import lzma
        return _stream(lzma.LZMADecompressor(lzma.FORMAT_ALONE), memoryview(payload), off,
                       budget, "lzma")
    if not any(payload.startswith(m) for m in _MAGICS):
        raise ParseError(f"EFI zboot image compressed with {kind or 'an unknown method'}, "
                         "which bpfmem cannot unpack (gzip, xz, zstd, lz4, lzma)", offset=off)
    return _decompress(payload, 0, budget)


def _kind(head: bytes) -> str:
    for magic, kind in ((_XZ, "xz"), (_GZ, "gzip"), (_BZ, "bzip2"), (_LZ4_LEGACY, "lz4"),
                        (_ZSTD, "zstd")):
        if head.startswith(magic):
            return kind
    return "unknown"


def _decompress(data: bytes, offset: int, budget: Budget | None = None) -> bytearray:
    """The stream starting at ``offset``, drawn from ``budget`` (a new one when None);
    trailing bytes after the stream (a bzImage's size word and padding) are ignored. gzip,
    xz and bzip2 come with Python; LZ4 and zstd (the payloads of Debian's 5.10/6.1 and 6.12
    images) need the optional packages ``lz4`` and ``zstandard`` (``pip install
    'bpfmem[kernel-images]'``). Every codec is streamed with an output limit: a bomb costs
    the budget, never more; the output is the bytearray it was gathered in (no second copy)."""
    import bz2
    import lzma
    import zlib
    budget = Budget() if budget is None else budget
    head = bytes(data[offset:offset + 6])
    src = memoryview(data)[offset:]
    kind = _kind(head)
    if head.startswith(_XZ):
        out = _stream(lzma.LZMADecompressor(), src, offset, budget, kind)
    elif head.startswith(_BZ):
        out = _stream(bz2.BZ2Decompressor(), src, offset, budget, kind)
    elif head.startswith(_GZ):
        out = _inflate(zlib.decompressobj(16 + zlib.MAX_WBITS), src, offset, budget)
    elif head.startswith(_LZ4_LEGACY):
        out = _unlz4_legacy(_optional(_LZ4_LEGACY, "lz4.block"), src, offset, budget)
    elif head.startswith(_ZSTD):
        out = _unzstd(_optional(_ZSTD, "zstandard"), src, offset, budget)
    else:
        raise ParseError("no gzip, xz, bzip2, lz4 or zstd stream", offset=offset)
    if not out:
        raise ParseError("compressed stream is truncated (nothing unpacks)", offset=offset)
    return out


def _corrupt(kind: str, e: Exception, offset: int) -> ParseError:
    return ParseError(f"corrupt {kind} data: {e}", offset=offset)


def _stream(dec, src: memoryview, offset: int, budget: Budget, kind: str) -> bytearray:
    """An lzma or bz2 decompressor's output, asked for a chunk at a time, each charged."""
    out = bytearray()
    data = src
    try:
        while not dec.eof:
            chunk = dec.decompress(data, max_length=min(_CHUNK, budget.left + 1))
            data = b""
            budget.take(len(chunk), offset)
            out += chunk
            if not chunk and dec.needs_input:
                break                     # the input ends before the stream does
    except ParseError:
        raise
    except Exception as e:   # LZMAError, OSError (bz2), EOFError: corrupt input
        raise _corrupt(kind, e, offset) from None
    return out


def _inflate(dec, src: memoryview, offset: int, budget: Budget) -> bytearray:
    out = bytearray()
    data = src
    try:
        while not dec.eof:
            chunk = dec.decompress(data, min(_CHUNK, budget.left + 1))
            data = dec.unconsumed_tail
            budget.take(len(chunk), offset)
            out += chunk
            if not chunk and not data:
                break
    except ParseError:
        raise
    except Exception as e:   # zlib.error
        raise _corrupt("gzip", e, offset) from None
    return out


def _unzstd(zstd, src: memoryview, offset: int, budget: Budget) -> bytearray:
    """One zstd frame (what follows it ignored: a bzImage's size word), fed to the
    decompressor 128 bytes at a time, each slice's output charged: a zstd RLE block of 4
    bytes is 128 KiB, so one slice unpacks to 4 MiB at most, whatever the frame says of its size
    (the library's stream reader would stop at the output limit too, but reads past the
    frame's end into what follows)."""
    out = bytearray()
    dec = zstd.ZstdDecompressor().decompressobj()
    try:
        for pos in range(0, len(src), _ZSTD_SLICE):
            chunk = dec.decompress(src[pos:pos + _ZSTD_SLICE])
            budget.take(len(chunk), offset)
            out += chunk
            if dec.eof:
                break
    except ParseError:
        raise
    except Exception as e:   # zstd.ZstdError
        raise _corrupt("zstd", e, offset) from None
    return out


def _optional(magic: bytes, module: str):
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError:
        kind, package = _NEEDS[magic]
        raise ParseError(f"this kernel image is {kind}-compressed: unpacking it needs the "
                         f"Python package {package} (pip install {package}; in the checkout's venv: "
                         f".venv/bin/pip install '.[kernel-images]'), "
                         "or give the node's /sys/kernel/btf/vmlinux instead",
                         offset=0) from None


def _unlz4_legacy(block, src: memoryview, offset: int, budget: Budget) -> bytearray:
    """LZ4 legacy frames: the magic, then blocks of (u32 compressed size, data), each
    unpacking to at most 8 MiB; a size word that is no block (the kernel appends the
    image's unpacked size) or the end of the data ends the stream, and so does a block that
    unpacks to less than 8 MiB (lz4 -l fills every block but the last): a stream of
    millions of tiny blocks, or of magic words, is no kernel's."""
    out = bytearray()
    pos = 4
    frames = Bytes(src, "LZ4 stream")
    magics = 0
    while pos + 4 <= len(src):
        size = frames.u32(pos, "LZ4 block size")
        if size == int.from_bytes(_LZ4_LEGACY, "little"):
            magics += 1
            if magics > 64:
                raise ParseError("LZ4 stream of more than 64 frames: not a kernel's",
                                 offset=offset + pos)
            pos += 4
            continue
        if size == 0 or size > (8 << 20) + (8 << 12) or pos + 4 + size > len(src):
            break
        try:
            chunk = block.decompress(src[pos + 4:pos + 4 + size], uncompressed_size=8 << 20)
        except Exception as e:   # lz4.block.LZ4BlockError
            raise _corrupt("lz4", e, offset + pos) from None
        budget.take(len(chunk), offset)
        out += chunk
        pos += 4 + size
        if len(chunk) < 8 << 20:
            break
    return out


def _is_tar(data: bytes) -> bool:
    return len(data) >= 512 and data[257:262] == b"ustar"


def _from_tar(data: bytes, name: str, budget: Budget) -> tuple[bytes, str | None, str]:
    """A BTFHub archive: one ``<release>.btf`` member (the first raw BTF member is taken).
    A member's first bytes are read before the rest (a GNU-sparse member of a 4 GiB hole
    is no BTF and costs nothing), its size is checked against the budget before it is read,
    and at most :data:`MAX_TAR_MEMBERS` members are looked at."""
    import tarfile
    try:
        with tarfile.open(fileobj=_Reader(data), mode="r:") as tar:
            for n, member in enumerate(_members(tar)):
                if n >= MAX_TAR_MEMBERS:
                    raise ParseError(f"archive of more than {MAX_TAR_MEMBERS} members: not "
                                     "a BTFHub archive (one <release>.btf)", offset=0)
                if not member.isfile() or member.size < 24:
                    continue
                f = tar.extractfile(member)
                if f is None:
                    continue
                head = f.read(2)
                if head not in (BTF_MAGIC_LE, BTF_MAGIC_BE):
                    continue
                budget.take(member.size, member.offset_data)
                blob = head + f.read(member.size - 2)
                return blob, release_from_name(member.name), "BTFHub archive"
    except ParseError:
        raise
    except (tarfile.TarError, OSError, EOFError, ValueError, OverflowError) as e:
        # tarfile lets a bad pax header (a sparse map that is no numbers) out as ValueError
        raise ParseError(f"corrupt tar archive: {e}", offset=0) from None
    raise ParseError("archive holds no BTF file (a BTFHub archive has one <release>.btf)",
                     offset=0)


class _Reader:
    """A read-only file over bytes already in memory, for tarfile: io.BytesIO would copy an
    unpacked archive (a bytearray) once more."""

    def __init__(self, data):
        self._view = memoryview(data)
        self._pos = 0

    def read(self, n: int = -1) -> bytes:
        end = len(self._view) if n is None or n < 0 else min(len(self._view), self._pos + n)
        out = bytes(self._view[self._pos:end])
        self._pos = max(self._pos, end)
        return out

    def seek(self, pos: int, whence: int = 0) -> int:
        base = (0, self._pos, len(self._view))[whence]
        self._pos = max(0, base + pos)
        return self._pos

    def tell(self) -> int:
        return self._pos


def _members(tar):
    """The members one by one, none kept (tarfile keeps every header it read otherwise)."""
    while True:
        member = tar.next()
        if member is None:
            return
        tar.members.clear()
        yield member


def _from_bzimage(data: bytes, budget: Budget) -> tuple[bytes, str | None, str]:
    """x86 boot protocol: the protected-mode kernel starts after (setup_sects + 1) sectors;
    ``payload_offset``/``payload_length`` (2.08+) locate the compressed vmlinux in it."""
    hdr = Bytes(data, "bzImage setup header")
    setup_sects = hdr.u8(0x1F1, "setup_sects") or 4
    version, = hdr.unpack("H", 0x206, "boot protocol version")
    banner = None
    ver_ptr, = hdr.unpack("H", 0x20E, "kernel_version")
    if ver_ptr and 0x200 + ver_ptr < len(data):
        end = data.find(b"\0", 0x200 + ver_ptr, 0x200 + ver_ptr + 256)
        if end > 0:
            banner = data[0x200 + ver_ptr:end].decode("ascii", "replace").split(" ")[0] or None
    pm_start = (setup_sects + 1) * 512
    starts = []
    if version >= 0x0208:
        off, length = hdr.unpack("II", 0x248, "payload_offset and payload_length")
        if length and pm_start + off + length <= len(data):
            starts.append(pm_start + off)
    for magic in _MAGICS:           # other layouts: the first stream of a known kind
        i = data.find(magic, pm_start)
        if i >= 0:
            starts.append(i)
    if not starts:
        raise ParseError("kernel image without a gzip, xz, bzip2, lz4 or zstd payload "
                         "(copy /sys/kernel/btf/vmlinux from the node instead)", offset=0x248)
    last: ParseError | None = None
    for start in dict.fromkeys(starts):     # payload_offset is often the first stream too
        try:
            inner = _decompress(data, start, budget)
        except ParseError as e:
            if "needs the Python package" in e.what or budget.exhausted:
                raise
            last = e
            continue
        if inner[:4] == b"\x7fELF":
            btf = _elf_btf(inner)
            return btf, banner or _elf_banner(inner), "bzImage"
    raise last or ParseError("kernel image payload is not an ELF vmlinux", offset=0x248)


def _elf_btf(data: bytes) -> bytes:
    """The .BTF section of an ELF file (32- or 64-bit, either byte order), read by the one
    ELF reader."""
    img = ElfImage(data)
    if not img.sections:
        raise ParseError("ELF file without section headers", section="ELF header", offset=0)
    sec = img.section(".BTF")
    if sec is None:
        raise ParseError("ELF file without a .BTF section (a kernel built without "
                         "CONFIG_DEBUG_INFO_BTF)", section=".BTF", offset=0)
    return img.data_of(sec).data


# (compiled when first used: a start-up that reads the cached facts needs neither)
_BANNER = rb"Linux version (\d{1,4}\.\d{1,4}[^\s\x00]{0,200}) \("
_NAME = (r"(?:^|[-/_])(\d+\.\d+(?:\.\d+)?(?:[-+~][\w.+~-]*?)?)"
         r"(?:\.btf(?:\.tar)?(?:\.xz|\.gz|\.bz2)?|\.xz|\.gz)?$")


def _elf_banner(data) -> str | None:
    """The release in an ELF vmlinux's banner: its ``.rodata`` (where ``linux_banner``
    lives) rather than the whole file, which can be hundreds of MiB of debug info."""
    img = ElfImage(data)
    sec = img.section(".rodata")
    if sec is not None:
        return release_from_banner(img.data_of(sec).data)
    return release_from_banner(data)


def release_from_banner(data: bytes) -> str | None:
    m = re.search(_BANNER, data)
    return m.group(1).decode("ascii", "replace") if m else None


def release_from_name(name: str) -> str | None:
    """'5.4.0-1009-aws.btf.tar.xz', 'vmlinuz-6.1.0-57-cloud-amd64' -> the release."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1][-_NAME_MAX:]
    m = re.search(_NAME, base)
    return m.group(1) if m else None


# -- the facts --------------------------------------------------------------------------------
#: the most tail padding a kernel struct can have: its alignment less one, and no kernel
#: struct is aligned past a page (____cacheline_internodealigned_in_smp: 4096 at most)
_MAX_TAIL = 4095


def _check_size(btf, t, name: str, section: str, *, charged: bool) -> None:
    """ParseError unless ``struct name``'s size holds its members and is no larger than
    their end plus an alignment's padding; a struct the model charges is never 0 bytes. A
    BTF whose sizes are forged (a 0-byte htab_elem) would make every figure too low and
    still read as exact."""
    end = 0
    for m in t.members:
        if m.bitfield_size:
            e = (m.bit_offset + m.bitfield_size + 7) // 8
        else:
            e = m.bit_offset // 8 + btf.resolve_size(m.type)
        end = max(end, e)
    if t.size < end or t.size - end > _MAX_TAIL or (charged and t.size == 0):
        raise ParseError(f"struct {name} is {t.size} bytes in this BTF, but its members end "
                         f"at byte {end}: a forged or corrupt BTF, not a kernel's",
                         section=section, offset=0)


def facts_from_btf(data: bytes, struct_names=(), container: str = "raw BTF",
                   section: str = "BTF") -> KernelFacts:
    from .btf import ENUM, ENUM64, STRUCT, Btf
    btf = Btf(data, section=section)
    wanted = set(struct_names) | {"cpumask"} | set(MARKER_STRUCTS)
    sizes: dict[str, int] = {}
    members: set[str] = set()
    map_types: frozenset[int] = frozenset()
    for tid in range(1, btf.count):
        kind = btf.kind(tid)
        if kind == STRUCT:
            name = btf.name_of(tid)
            if name in wanted and name not in sizes:
                t = btf.type(tid)
                _check_size(btf, t, name, section, charged=name in set(struct_names))
                sizes[name] = t.size
                if name in MARKER_STRUCTS:
                    members.update(f"{name}.{m.name}" for m in t.members if m.name)
        elif kind in (ENUM, ENUM64) and not map_types and btf.name_of(tid) == "bpf_map_type":
            map_types = frozenset(v.value for v in btf.type(tid).enum_values
                                  if v.name.startswith("BPF_MAP_TYPE_"))
    if "bpf_map" not in sizes:
        raise ParseError("BTF without struct bpf_map: not a kernel's vmlinux BTF (a module's "
                         "or a BPF object's BTF, or a kernel without CONFIG_BPF_SYSCALL)",
                         section=section, offset=0)
    missing = [m for m in REQUIRED_MAP_MEMBERS if f"bpf_map.{m}" not in members]
    if missing:
        raise ParseError(f"struct bpf_map in this BTF lacks {', '.join(missing)}: not a "
                         "kernel bpfmem can model", section=section, offset=0)
    cpumask = sizes.pop("cpumask", None)
    struct_sizes = tuple(sorted((k, v) for k, v in sizes.items() if k in set(struct_names)))
    arch = next((a for m, a in _PT_REGS_ARCH if m in members), None)
    return KernelFacts(struct_sizes, frozenset(members), map_types,
                       cpumask * 8 if cpumask else None, None, container, arch)
