"""A writer for small synthetic Go-like ELF executables: .text, a pclntab of the Go 1.18 or
1.20 layout, a Go 1.18+ build info and a .bss. For the bad-input and fuzz tests, which need
binaries no toolchain would write (corrupt tables, unknown pclntab versions) and small seeds.
The layouts follow runtime/symtab.go and debug/buildinfo; the real-binary tests in
test_size_go.py check the same parser against the Go toolchain.
"""

from __future__ import annotations

import struct

TEXT_ADDR = 0x401000
PCLN_ADDR = 0x500000
INFO_ADDR = 0x600000


def pclntab(names: list[str], sizes: list[int], *, magic: int = 0xFFFFFFF1,
            text_start: int = TEXT_ADDR) -> bytes:
    """A pclntab for functions ``names`` laid out back to back with ``sizes``."""
    nfunc = len(names)
    hdr_size = 8 + 8 * 8
    funcnames = b""
    name_offs = []
    for n in names:
        name_offs.append(len(funcnames))
        funcnames += n.encode() + b"\0"
    cutab = b"\0\0\0\0"
    filetab = b"a.go\0"
    pctab = b"\0" * 8
    funcname_off = hdr_size
    cu_off = funcname_off + len(funcnames)
    file_off = cu_off + len(cutab)
    pc_off = file_off + len(filetab)
    pcln_off = pc_off + len(pctab)
    rec_size = 44 if magic == 0xFFFFFFF1 else 40
    functab = b""
    records = b""
    entry = 0
    first_rec = (nfunc + 1) * 8
    for i, (name_off, size) in enumerate(zip(name_offs, sizes)):
        functab += struct.pack("<II", entry, first_rec + i * rec_size)
        rec = struct.pack("<Ii", entry, name_off) + b"\0" * (rec_size - 8)
        records += rec
        entry += size
    functab += struct.pack("<II", entry, 0)
    header = struct.pack("<IBBBBQQQQQQQQ", magic, 0, 0, 1, 8, nfunc, 1,
                         text_start if magic == 0xFFFFFFF0 else 0,
                         funcname_off, cu_off, file_off, pc_off, pcln_off)
    return header + funcnames + cutab + filetab + pctab + functab + records


def _varint(n: int) -> bytes:
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def buildinfo(go_version: str = "go1.22.0", path: str = "example.com/agent",
              deps: tuple[tuple[str, str], ...] = (("k8s.io/api", "v0.29.0"),)) -> bytes:
    mod = f"path\t{path}\nmod\t{path}\t(devel)\t\n" + "".join(
        f"dep\t{p}\t{v}\th1:x=\n" for p, v in deps)
    mod = "0" * 16 + mod + "1" * 16          # 16-byte sentinels around the text
    blob = b"\xff Go buildinf:" + bytes([8, 2]) + b"\0" * 16
    s = _varint(len(go_version)) + go_version.encode() + _varint(len(mod)) + mod.encode()
    return blob + s


def go_elf(names: list[str] | None = None, sizes: list[int] | None = None, *,
           magic: int = 0xFFFFFFF1, pcln: bytes | None = None, info: bytes | None = None,
           bss: int = 0x1000) -> bytes:
    """An ELF64 x86-64 executable with .text, .gopclntab, .go.buildinfo, .bss, .shstrtab."""
    names = names or ["main.main", "k8s.io/api/core/v1.(*Pod).Reset", "runtime.main",
                      "net/http.(*Client).Do"]
    sizes = sizes or [64, 96, 32, 128]
    text = b"\xcc" * sum(sizes)
    pcln = pcln if pcln is not None else pclntab(names, sizes, magic=magic)
    info = info if info is not None else buildinfo()
    # (name, type, flags, addr, data or NOBITS size)
    secs = [(".text", 1, 6, TEXT_ADDR, text), (".gopclntab", 1, 2, PCLN_ADDR, pcln),
            (".go.buildinfo", 1, 3, INFO_ADDR, info), (".bss", 8, 3, INFO_ADDR + 0x1000, bss)]
    shstr = b"\0"
    name_offs = []
    for n, *_ in secs + [(".shstrtab",)]:
        name_offs.append(len(shstr))
        shstr += n.encode() + b"\0"
    body, offs, off = b"", [], 64
    for _n, typ, _f, _a, data in secs + [(".shstrtab", 3, 0, 0, shstr)]:
        pad = (-off) % 16
        body += b"\0" * pad
        off += pad
        offs.append(off)
        if typ != 8:
            body += data
            off += len(data)
    pad = (-off) % 8
    body += b"\0" * pad
    shoff = off + pad
    shdrs = b"\0" * 64
    for (n_off, (_n, typ, flags, addr, data), o) in zip(
            name_offs, secs + [(".shstrtab", 3, 0, 0, shstr)], offs):
        size = data if typ == 8 else len(data)
        shdrs += struct.pack("<IIQQQQIIQQ", n_off, typ, flags, addr, o, size, 0, 0, 16, 0)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    hdr = ident + struct.pack("<HHIQQQIHHHHHH", 2, 62, 1, TEXT_ADDR, 0, shoff, 0, 64, 0, 0,
                              64, len(secs) + 2, len(secs) + 1)
    return hdr + body + shdrs


def pclntab_old(names: list[str], sizes: list[int], *, layout: str = "1.16",
                text_start: int = TEXT_ADDR) -> bytes:
    """A pclntab of the Go 1.16-1.17 (0xfffffffa) or 1.2-1.15 (0xfffffffb) layout: functab
    pairs of pointer-sized (entry address, record offset)."""
    nfunc = len(names)
    entries, e = [], text_start
    for size in sizes:
        entries.append(e)
        e += size
    if layout == "1.16":
        hdr_size = 8 + 7 * 8
        funcnames = b""
        name_offs = []
        for n in names:
            name_offs.append(len(funcnames))
            funcnames += n.encode() + b"\0"
        cu_off = hdr_size + len(funcnames)
        file_off = cu_off + 4
        pc_off = file_off + 5
        pcln_off = pc_off + 8
        first_rec = nfunc * 16 + 8
        functab = b"".join(struct.pack("<QQ", a, first_rec + i * 44)
                           for i, a in enumerate(entries)) + struct.pack("<Q", e)
        records = b"".join(struct.pack("<Qi", a, no) + b"\0" * 32
                           for a, no in zip(entries, name_offs))
        header = struct.pack("<IBBBBQQQQQQQ", 0xFFFFFFFA, 0, 0, 1, 8, nfunc, 1, hdr_size,
                             cu_off, file_off, pc_off, pcln_off)
        return header + funcnames + b"\0" * 4 + b"a.go\0" + b"\0" * 8 + functab + records
    # 1.2: header, nfunc, functab, end pc, filetab offset, records, names
    functab_end = 16 + nfunc * 16 + 8 + 4
    rec_base = functab_end + (-functab_end) % 8
    rec_size = 8 + 4 + 28
    names_base = rec_base + nfunc * rec_size
    blob, name_offs = b"", []
    for n in names:
        name_offs.append(names_base + len(blob))
        blob += n.encode() + b"\0"
    functab = b"".join(struct.pack("<QQ", a, rec_base + i * rec_size)
                       for i, a in enumerate(entries)) + struct.pack("<Q", e)
    head = struct.pack("<IBBBBQ", 0xFFFFFFFB, 0, 0, 1, 8, nfunc) + functab + \
        struct.pack("<I", names_base + len(blob))
    head += b"\0" * (rec_base - len(head))
    records = b"".join(struct.pack("<Qi", a, no) + b"\0" * 28
                       for a, no in zip(entries, name_offs))
    return head + records + blob + b"a.go\0"
