"""`bpfmem size` on bad input: one clear line and exit 1, never a traceback or a hang; and the
binary reader fuzzed like the object parser (any bytes: a SizeReport or a ParseError /
UnsupportedError, within a second)."""

from __future__ import annotations

import struct
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpfmem import api
from bpfmem.analysis.size import SizeReport
from bpfmem.cli import main
from bpfmem.errors import ParseError, UnsupportedError
from gogen import buildinfo, go_elf, pclntab, pclntab_old

NAMES = ["main.main", "k8s.io/api/core/v1.(*Pod).Reset", "runtime.main"]
SIZES = [64, 96, 32]


def _one_error_line(capsys, argv, *, code=1) -> str:
    assert main(argv) == code
    cap = capsys.readouterr()
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1, cap.err
    assert "Traceback" not in cap.err
    return lines[0]


def test_synthetic_go_binary_parses():
    for magic, layout in ((0xFFFFFFF1, "1.20"), (0xFFFFFFF0, "1.18")):
        rep = api.load_binary_size(go_elf(NAMES, SIZES, magic=magic))
        assert rep.pclntab_layout == layout and rep.functions == 3
        text = {p[1]: p[3] for p in rep.pieces if p[0] == ".text"}
        assert text == {"main": 64, "k8s.io/api/core/v1": 96, "runtime": 32}
        assert sum(p[3] for p in rep.pieces) == rep.file_size
        assert {r.name for r in rep.group("module")} >= {"k8s.io/api", "std",
                                                        "example.com/agent"}


def test_not_elf(tmp_path, capsys):
    p = tmp_path / "notes.txt"
    p.write_text("hello\n")
    line = _one_error_line(capsys, ["size", str(p)])
    assert line == f"bpfmem: error: {p}: not an ELF file (no \\x7fELF magic) (offset 0x0)"


def test_empty_and_missing(tmp_path, capsys):
    p = tmp_path / "empty"
    p.write_bytes(b"")
    assert "not an ELF file" in _one_error_line(capsys, ["size", str(p)])
    assert "No such file" in _one_error_line(capsys, ["size", str(tmp_path / "nope")])


@pytest.mark.parametrize("cut", [20, 63, 200, 700, 1000])
def test_truncated(tmp_path, capsys, cut):
    data = go_elf(NAMES, SIZES)
    p = tmp_path / "cut"
    p.write_bytes(data[:cut])
    line = _one_error_line(capsys, ["size", str(p)])
    assert line.startswith(f"bpfmem: error: {p}: ")
    assert "run past the end" in line or "cut short" in line


def test_unknown_pclntab_version(tmp_path, capsys):
    p = tmp_path / "future"
    p.write_bytes(go_elf(NAMES, SIZES, magic=0xFFFFFFF2))
    line = _one_error_line(capsys, ["size", str(p)])
    assert "unknown header (magic 0xfffffff2)" in line and str(p) in line


@pytest.mark.parametrize("what", ["nfunc", "funcoff", "nameoff", "order"])
def test_corrupt_pclntab(tmp_path, capsys, what):
    tab = bytearray(pclntab(NAMES, SIZES))
    pcln_off = struct.unpack_from("<Q", tab, 8 + 7 * 8)[0]
    if what == "nfunc":
        struct.pack_into("<Q", tab, 8, 1 << 20)
    elif what == "funcoff":
        struct.pack_into("<I", tab, pcln_off + 4, 0xFFFFFF)
    elif what == "nameoff":
        rec = pcln_off + struct.unpack_from("<I", tab, pcln_off + 4)[0]
        struct.pack_into("<i", tab, rec + 4, 0x7FFFFFF)
    else:
        struct.pack_into("<I", tab, pcln_off + 8, 0xFFFF)     # function 1 starts past 2
    p = tmp_path / "corrupt"
    p.write_bytes(go_elf(NAMES, SIZES, pcln=bytes(tab)))
    line = _one_error_line(capsys, ["size", str(p)])
    assert "pclntab" in line and "section .gopclntab" in line


def test_corrupt_buildinfo(tmp_path, capsys):
    info = bytearray(buildinfo())
    info[32] = 0xFF       # a varint that never ends inside the section
    info[33:40] = b"\xff" * 7
    p = tmp_path / "bi"
    p.write_bytes(go_elf(NAMES, SIZES, info=bytes(info)))
    assert "build info" in _one_error_line(capsys, ["size", str(p)])


def test_size_usage_errors(tmp_path, capsys):
    p = tmp_path / "b"
    p.write_bytes(go_elf(NAMES, SIZES))
    assert "exactly two" in _one_error_line(capsys, ["size", "diff", str(p)], code=2)
    assert "size diff" in _one_error_line(capsys, ["size", str(p), "--format", "html"],
                                          code=2)


SEEDS = [go_elf(NAMES, SIZES), go_elf(NAMES, SIZES, magic=0xFFFFFFF0),
         go_elf(["a.b", "c/d.e"], [16, 16], info=b""),
         go_elf(NAMES, SIZES, pcln=pclntab_old(NAMES, SIZES, layout="1.16")),
         go_elf(NAMES, SIZES, pcln=pclntab_old(NAMES, SIZES, layout="1.2"))]


def _check(data: bytes) -> None:
    try:
        rep = api.load_binary_size(data)
    except (ParseError, UnsupportedError):
        return
    assert isinstance(rep, SizeReport)
    assert sum(p[3] for p in rep.pieces) == len(data)
    assert all(p[3] >= 0 and p[4] >= 0 for p in rep.pieces)


@st.composite
def mutated(draw):
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "word", "cut"]))
        pos = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "word":
            val = draw(st.sampled_from([0, 1, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF,
                                        draw(st.integers(0, 2**32 - 1))]))
            data[pos:pos + 4] = val.to_bytes(4, "little")
        else:
            del data[pos:]
            if not data:
                break
    return bytes(data)


@settings(max_examples=300, deadline=timedelta(seconds=1),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated())
def test_fuzz_mutated_go_binaries(data):
    _check(data)


@settings(max_examples=150, deadline=timedelta(seconds=1))
@given(st.binary(max_size=1024))
def test_fuzz_arbitrary_bytes(data):
    _check(b"\x7fELF" + data if data[:1] == b"\x02" else data)


@pytest.mark.parametrize("layout", ["1.16", "1.2"])
def test_older_pclntab_layouts(layout):
    rep = api.load_binary_size(go_elf(NAMES, SIZES, pcln=pclntab_old(NAMES, SIZES,
                                                                     layout=layout)))
    assert rep.pclntab_layout == layout and rep.functions == 3
    text = {p[1]: p[3] for p in rep.pieces if p[0] == ".text"}
    assert text == {"main": 64, "k8s.io/api/core/v1": 96, "runtime": 32}
    assert sum(p[3] for p in rep.pieces) == rep.file_size


def test_binary_gate_exit_codes(tmp_path, capsys):
    """The binary gate: 0 within the limit, 1 over it, 3 when a binary cannot be read
    (missing, truncated, not ELF), 2 usage."""
    good = tmp_path / "agent"
    good.write_bytes(go_elf(NAMES, SIZES))
    size = good.stat().st_size
    assert main(["check", str(good), "--max-binary-size", str(size)]) == 0
    assert main(["check", str(good), "--max-binary-size", str(size - 1)]) == 1
    assert "exceeds its limit" in capsys.readouterr().out
    cut = tmp_path / "cut"
    cut.write_bytes(good.read_bytes()[:700])
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    for bad in (cut, text, tmp_path / "nope"):
        line = _one_error_line(capsys, ["check", str(bad), "--max-binary-size", "1Gi"],
                               code=3)
        assert line.startswith("bpfmem: error: ") and str(bad) in line
    assert main(["check", str(good), "--max-binary-size", "lots"]) == 2


def _shdrs(data: bytes):
    """{name: (index, header fields)} of a little-endian ELF64 file."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    entsize, num, strndx = struct.unpack_from("<HHH", data, 0x3a)
    head = lambda i: list(struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * entsize))
    strs = head(strndx)[4]
    out = {}
    for i in range(num):
        h = head(i)
        o = strs + h[0]
        out[data[o:data.index(b"\0", o)].decode()] = (shoff + i * entsize, h)
    return out


def test_overlapping_sections_are_each_byte_once(tmp_path, capsys):
    """issue 30: a section header claiming bytes another section has (.rodata stretched back
    over .text of a real /bin/ls) must not count them twice: the parts sum to the file, and
    .text keeps its bytes."""
    data = bytearray(open("/bin/ls", "rb").read())
    secs = _shdrs(bytes(data))
    text = secs[".text"][1]
    at, ro = secs[".rodata"]
    end = ro[4] + ro[5]
    ro[3], ro[4], ro[5] = text[3], text[4], end - text[4]
    struct.pack_into("<IIQQQQIIQQ", data, at, *ro)
    p = tmp_path / "overlap"
    p.write_bytes(bytes(data))
    rep = api.load_binary_size(str(p))
    assert sum(piece[3] for piece in rep.pieces) == rep.file_size == len(data)
    rows = {r.name: r.file for r in rep.group("section")}
    assert rows[".text"] == text[5]              # .text whole, .rodata only what is its own
    assert rows[".rodata"] <= end - (text[4] + text[5])
    assert main(["size", "--by", "section", str(p)]) == 0
    capsys.readouterr()


def test_a_sparse_symtab_of_16m_symbols_is_refused_before_it_is_read(tmp_path, capsys):
    """issue 30: a .symtab of 16 M (null) symbols in a sparse file took 2 GiB and 30 s; the
    count is bounded (1,048,576) from the section header, before a byte of it is read."""
    from elfgen import Sec, build_elf
    n = 1 << 24
    data = bytearray(build_elf([Sec(".text", flags=6, data=b"\x90" * 64),
                                Sec(".strtab", type=3, data=b"\0f\0"),
                                Sec(".symtab", type=2, link=2, entsize=24, data=bytes(24))],
                               machine=62, e_type=2))
    at, _h = _shdrs(bytes(data))[".symtab"]
    off = (len(data) + 4095) // 4096 * 4096
    struct.pack_into("<QQ", data, at + 24, off, 24 * n)
    p = tmp_path / "symbols"
    with open(p, "wb") as f:
        f.write(data)
        f.truncate(off + 24 * n)
    line = _one_error_line(capsys, ["size", str(p)])
    assert line.startswith(f"bpfmem: error: {p}: .symtab: 16777216 symbols is more than any "
                           "real binary has (at most 1048576)")
