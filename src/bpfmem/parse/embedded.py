"""BPF objects carried inside a linked binary, and the loader the binary links.

A libbpf skeleton (C, C++, Rust) embeds its object's bytes in ``.rodata``; a Go agent embeds
its ``bpf2go`` objects with ``go:embed`` (in ``.rodata`` or ``.noptrdata``). Both are a whole
relocatable ELF file (``e_machine`` EM_BPF) inside the binary's data: found by the ELF magic,
checked through the one ELF reader (:meth:`bpfmem.parse.elf.Elf.at` over a sub-view) and cut
at the end of its section header table (where clang and ``bpftool gen object`` put it, after
every section's contents).

Each object is named by where it was found: ``.rodata+0x38240`` (the section and the offset
in it), or, for a Go binary, the file name its ``embed.FS`` records or the variable the
bytes are assigned to (``main._BpfBytes``) when the symbol table says so.

The loader comes from the binary (:func:`binary_loader`): a Go binary's build info names its
cilium/ebpf module and version; a C binary that links libbpf carries libbpf's messages
(``libbpf: ...``) and its version string (``v1.1``), or needs ``libbpf.so``.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from ..errors import ParseError
from .elf import EM_BPF, ET_REL, SHF_EXECINSTR, SHT_NOBITS, ElfFile, ElfImage
from .reader import Bytes, decoding

__all__ = ["Embedded", "find_embedded", "binary_loader", "skeleton_name", "is_bpf_object"]

_MAGIC = b"\x7fELF"
#: the most embedded objects looked at in one binary (a crafted binary full of magics must not
#: take for ever)
MAX_OBJECTS = 4096


@dataclass(frozen=True)
class Embedded:
    """One BPF object found in a binary: ``offset`` and ``size`` in the binary's file,
    ``where`` it was found (``.rodata+0x38240`` or an embedded file's name), ``section``
    the binary's section it lies in (None without section headers)."""
    offset: int
    size: int
    where: str
    section: str | None


def is_bpf_object(head: bytes) -> bool:
    """Whether ``head`` (at least 20 bytes) starts a 64-bit relocatable EM_BPF ELF."""
    if len(head) < 20 or head[:4] != _MAGIC or head[4] != 2 or head[5] not in (1, 2):
        return False
    order = "little" if head[5] == 1 else "big"
    return (int.from_bytes(head[18:20], order) == EM_BPF and
            int.from_bytes(head[16:18], order) == ET_REL)


def _ranges(img: ElfImage) -> list[tuple[int, int, str | None, int]]:
    """(file offset, size, section name, address) of the data a BPF object may hide in:
    every section with bytes in the file that is not code; without section headers, the
    whole file."""
    out = []
    for s in img.sections:
        if s.index == 0 or s.type == SHT_NOBITS or not s.in_file or s.flags & SHF_EXECINSTR:
            continue
        if s.size < 64:
            continue
        out.append((s.offset, s.size, s.name, s.addr))
    if not img.sections:
        out.append((0, img.file_size, None, 0))
    return out


def find_embedded(img: ElfImage) -> tuple[list[Embedded], list[str]]:
    """The BPF objects inside ``img`` and a line for each one skipped (cut short: its
    section header table runs past the data it lies in; not readable as an ELF file)."""
    data = img.buffer
    found: list[Embedded] = []
    skipped: list[str] = []
    for start, size, name, addr in _ranges(img):
        end = start + size
        pos = data.find(_MAGIC, start, end)
        while pos >= 0 and len(found) + len(skipped) < MAX_OBJECTS:
            head = bytes(data[pos:pos + 64])
            nxt = pos + 1
            if is_bpf_object(head):
                where = f"{name}+{pos - start:#x}" if name is not None else f"+{pos:#x}"
                got = _cut(data, pos, end, where)
                if isinstance(got, str):
                    skipped.append(got)
                else:
                    found.append(Embedded(pos, got, where, name))
                    nxt = pos + got
            pos = data.find(_MAGIC, nxt, end)
    return _named(img, found), skipped


def _cut(data, pos: int, end: int, where: str) -> int | str:
    """The size of the BPF object at ``pos`` (ends by ``end``), or why it is skipped."""
    head = bytes(data[pos:pos + 64])
    if len(head) < 64:
        return f"{where}: an embedded BPF object cut short (its ELF header runs past the data)"
    e = "<" if head[5] == 1 else ">"
    shoff, = struct.unpack_from(e + "Q", head, 0x28)
    shentsize, shnum = struct.unpack_from(e + "HH", head, 0x3A)
    if shoff == 0 or shnum == 0 or shentsize != 64:
        return f"{where}: an embedded BPF object without section headers: skipped"
    cut = shoff + shentsize * shnum
    if pos + cut > end:
        return (f"{where}: an embedded BPF object cut short: its section headers end "
                f"{cut} bytes in, {end - pos} are there: skipped")
    try:
        with decoding("embedded ELF"):
            inner = ElfFile.at(Bytes(data, None), pos, cut)
            extent = inner.extent
    except ParseError as e:
        return f"{where}: an embedded BPF object that is not a readable ELF file ({e.what}): " \
               "skipped"
    if extent > cut:
        return (f"{where}: an embedded BPF object whose sections run past its section headers "
                f"({extent} > {cut} bytes): skipped")
    return cut


# --- names --------------------------------------------------------------------------------------

def _named(img: ElfImage, found: list[Embedded]) -> list[Embedded]:
    """Go binaries: the file name an ``embed.FS`` records for the bytes, else the variable
    (symbol) whose slice or string header points at them."""
    if not found or not _is_go(img):
        return found
    w = "Q" if img.is64 else "I"
    e = img.endian
    symbols = None
    out = []
    for obj in found:
        vaddr = _vaddr(img, obj.offset)
        if vaddr is None:
            out.append(obj)
            continue
        header = struct.pack(e + w + w, vaddr, obj.size)
        name = None
        pos = img.buffer.find(header)
        while pos >= 0 and name is None:
            name = _fs_name(img, pos, e, w)
            if name is None:
                if symbols is None:
                    symbols = _data_symbols(img)
                name = symbols.get(_vaddr(img, pos))
            pos = img.buffer.find(header, pos + 1)
        out.append(Embedded(obj.offset, obj.size, name, obj.section) if name else obj)
    return out


def _is_go(img: ElfImage) -> bool:
    return any(s.name in (".go.buildinfo", ".gopclntab", ".note.go.buildid")
               for s in img.sections)


def _vaddr(img: ElfImage, offset: int) -> int | None:
    for s in img.sections:
        if s.in_file and s.addr and s.offset <= offset < s.offset + s.size:
            return s.addr + offset - s.offset
    return None


_FILE_NAME = re.compile(rb"[\x21-\x7e][\x20-\x7e]{0,254}\Z")


def _fs_name(img: ElfImage, pos: int, e: str, w: str) -> str | None:
    """embed.FS's file table: {name string, data string, hash [16]byte}: the string header
    before the data's names the file."""
    ptr = 8 if w == "Q" else 4
    if pos < 2 * ptr:
        return None
    np, nl = struct.unpack(e + w + w, bytes(img.buffer[pos - 2 * ptr:pos]))
    if not 0 < nl < 256:
        return None
    off = img.addr_to_offset(np)
    if off is None or off + nl > img.file_size:
        return None
    raw = bytes(img.buffer[off:off + nl])
    return raw.decode() if _FILE_NAME.match(raw) else None


def _data_symbols(img: ElfImage) -> dict[int, str]:
    """Address -> name of the data symbols (a []byte or string variable's header)."""
    try:
        return {t[1]: t[0] for t in img.symbol_tuples() if t[3] == 1 and t[0]}
    except ParseError:
        return {}


# --- the loader ---------------------------------------------------------------------------------

CILIUM_MODULE = "github.com/cilium/ebpf"
LIBBPFGO_MODULE = "github.com/aquasecurity/libbpfgo"
_LIBBPF_VERSION = re.compile(rb"\0v(\d+)\.(\d+)\0")
#: the cilium/ebpf releases bpfmem has rules for, and the loader of each
_CILIUM_RULES = (((0, 9), "cilium-ebpf@0.9"), ((0, 22), "cilium-ebpf"))


def _version(text: str) -> tuple[int, int] | None:
    m = re.match(r"v?(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def cilium_loader(version: str) -> tuple[str, str]:
    """(loader, note) for a cilium/ebpf module version: its own rules where bpfmem has
    them (0.9.x, 0.22 and later), else the nearest release's, said in the note."""
    v = _version(version)
    if v is None:
        return "cilium-ebpf", f"version {version!r} unknown: the current rules"
    for rel, name in _CILIUM_RULES:
        if v[:2] == rel:
            return name, ""
    newest = _CILIUM_RULES[-1]
    if v > newest[0]:
        return newest[1], ""
    ((rel, name),) = sorted(_CILIUM_RULES,
                            key=lambda r: (abs((r[0][0] * 100 + r[0][1]) - (v[0] * 100 + v[1])),
                                           -r[0][1]))[:1]
    return name, (f"bpfmem has no rules of its own for {version}: those of the nearest "
                  f"release it models, {rel[0]}.{rel[1]}")


def binary_loader(img: ElfImage) -> tuple[str | None, str]:
    """(loader name or None: nothing says, the reason) read from a binary: a Go binary's
    build info (cilium/ebpf and its version; libbpfgo: libbpf), libbpf linked in (its
    messages and version string) or needed (``libbpf.so``)."""
    from .gobin import parse_buildinfo
    try:
        info = parse_buildinfo(img)
    except ParseError:
        info = None
    if info is not None:
        got = buildinfo_loader(info)
        if got is not None:
            return got
    data = img.buffer
    needed = _needs_libbpf(img)
    linked = data.find(b"libbpf: ") >= 0
    if linked or needed:
        m = _LIBBPF_VERSION.search(data) if linked else None
        how = f"needs {needed}" if needed else "links libbpf (its messages are in the binary)"
        ver = f", version string v{m.group(1).decode()}.{m.group(2).decode()}" if m else ""
        return "libbpf", f"the binary {how}{ver}"
    if info is not None:
        return None, "a Go binary whose build info names no BPF loader"
    return None, "the binary names no BPF loader"


def buildinfo_loader(info) -> tuple[str, str] | None:
    """(loader, reason) from a Go build info's modules (a :class:`bpfmem.parse.gobin.BuildInfo`):
    cilium/ebpf at its version (a replacement's version when it names one), libbpfgo as
    libbpf; None when it names neither."""
    for dep in info.deps:
        if dep.path == CILIUM_MODULE:
            version, how = dep.version, ""
            r = dep.replace
            if r is not None and r.version and r.version != "(devel)":
                version, how = r.version, f" => {r.path} {r.version}"
            loader, note = cilium_loader(version)
            reason = f"the build info names {CILIUM_MODULE} {dep.version}{how}"
            return loader, reason + (f" ({note})" if note else "")
        if dep.path == LIBBPFGO_MODULE:
            return "libbpf", f"the build info names {LIBBPFGO_MODULE} {dep.version} (libbpf)"
    return None


def _needs_libbpf(img: ElfImage) -> str | None:
    dynstr = img.section(".dynstr")
    if dynstr is None or not dynstr.in_file:
        return None
    raw = bytes(img.section_data(dynstr))
    m = re.search(rb"\0(libbpf\.so[.\d]*)\0", raw)
    return m.group(1).decode() if m else None


_SKELETON_NAME = re.compile(rb"\0([A-Za-z_][A-Za-z0-9_]{0,62}_bpf)\0")


def skeleton_name(img: ElfImage, stem: str) -> str | None:
    """The object name a libbpf skeleton opens its object with (bpftool gen skeleton's
    ``<file stem>_bpf``, a string in ``.rodata``): the one named after the binary, else the
    only one there is; None when the binary does not say."""
    sec = img.section(".rodata")
    if sec is None or not sec.in_file:
        return None
    names = {m.group(1).decode() for m in _SKELETON_NAME.finditer(img.section_data(sec))}
    safe = re.sub(r"[^A-Za-z0-9_]", "_", stem)
    if f"{safe}_bpf" in names:
        return f"{safe}_bpf"
    names.discard("__bpf")
    return names.pop() if len(names) == 1 else None
