"""The two byte readers binary size uses on code and relocations, in parse/: the x86-64
RIP-relative reference scan (rule checked on bytes made here, then against objdump's
disassembly of a real binary) and a PIE's relocation offsets (against readelf)."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess

import pytest

from bpfmem.parse.elf import ElfImage
from bpfmem.parse.x86 import INSN_LEN, rip_relative_refs


def test_rip_relative_refs_keep_the_first_instruction_per_target():
    # lea 0x10(%rip),%rax at 0; mov 0x9(%rip),%rcx at 7 (the same target, 0x1017); a lea
    # far away at 14
    code = (b"\x48\x8d\x05" + struct.pack("<i", 0x10)
            + b"\x48\x8b\x0d" + struct.pack("<i", 0x9)
            + b"\x4c\x8d\x05" + struct.pack("<i", 0x100000) + b"\x90" * 8)
    refs = rip_relative_refs(code, 0, len(code), 0x1000, 0x1000, 0x2000)
    assert refs == {0x1017: 0}
    assert rip_relative_refs(code, 0, len(code), 0x1000, 0x1000, 0x200000) == {
        0x1017: 0, 0x1000 + 14 + INSN_LEN + 0x100000: 14}
    assert rip_relative_refs(code, 7, len(code), 0x1007, 0x1000, 0x2000) == {0x1017: 7}
    assert rip_relative_refs(code, 0, 6, 0x1000, 0, 1 << 40) == {}


def _ls() -> str:
    path = shutil.which("ls") or "/bin/ls"
    return path


@pytest.mark.skipif(shutil.which("objdump") is None, reason="needs binutils' objdump")
def test_rip_relative_refs_agree_with_objdump_on_a_real_binary():
    """Every RIP-relative lea/mov with a REX.W prefix objdump decodes in /bin/ls's .text is
    found with its target (the scan may find more: bytes inside other instructions)."""
    with open(_ls(), "rb") as f:
        data = f.read()
    img = ElfImage(data, path=_ls())
    text = img.section(".text")
    refs = rip_relative_refs(img.data, text.offset, text.offset + text.size, text.addr,
                             0, 1 << 48)
    found = {(o - text.offset + text.addr, t) for t, o in refs.items()}
    out = subprocess.run(["objdump", "-d", "-j", ".text", "--no-show-raw-insn", _ls()],
                         capture_output=True, text=True, check=True).stdout
    want = set()
    raw = subprocess.run(["objdump", "-d", "-j", ".text", _ls()], capture_output=True,
                         text=True, check=True).stdout
    for line in raw.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\s+((?:[0-9a-f]{2} )+)\s*(lea|mov)\s+.*# ([0-9a-f]+)",
                     line)
        if m and m[2].split()[:1] in (["48"], ["4c"]) and len(m[2].split()) == INSN_LEN \
                and m[2].split()[1] in ("8d", "8b"):
            want.add((int(m[1], 16), int(m[4], 16)))
    assert out and want, "objdump found no RIP-relative lea/mov"
    firsts = {}
    for at, t in sorted(want):
        firsts.setdefault(t, at)
    got = {t: at for at, t in found}
    missing = [t for t, at in firsts.items() if got.get(t, -1) > at or t not in got]
    assert not missing, missing[:5]
    print(f"\n/bin/ls: objdump {len(want)} rip-relative lea/mov to {len(firsts)} targets; "
          f"the scan {len(refs)} targets")


@pytest.mark.skipif(shutil.which("readelf") is None, reason="needs binutils' readelf")
def test_rela_offsets_equal_readelf_on_a_pie():
    with open(_ls(), "rb") as f:
        img = ElfImage(f.read(), path=_ls())
    sec = img.section(".rela.dyn")
    if sec is None:
        pytest.skip("/bin/ls has no .rela.dyn here")
    out = subprocess.run(["readelf", "-rW", _ls()], capture_output=True, text=True,
                         check=True).stdout
    part = out.split("'.rela.dyn'", 1)[1].split("Relocation section", 1)[0]
    want = sorted(int(m[1], 16) for m in re.finditer(r"^([0-9a-f]{16})\s", part, re.M))
    assert want and img.rela_offsets(sec) == want
    assert img.rela_offsets(img.section(".text")) == []
