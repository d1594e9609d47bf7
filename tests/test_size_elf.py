"""`bpfmem size` on C and C++ binaries: every byte labelled, memory = the SHF_ALLOC sections
(readelf), symbols with nm's sizes and c++filt's names, stripped binaries by their dynamic
symbols."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from bpfmem import api
from gobuild import alloc_sizes

CXX = shutil.which("g++") or shutil.which("clang++")

SRC = r"""
#include <cstdio>
#include <vector>
namespace agent { namespace maps {
struct Table { std::vector<long> rows; long sum() const; };
long Table::sum() const { long s = 0; for (long r : rows) s += r; return s; }
} }
static char big_buffer[1 << 16];
int main(int argc, char **argv) {
    agent::maps::Table t; t.rows.assign(argc, 7);
    big_buffer[argc] = 1;
    std::printf("%ld %d\n", t.sum(), big_buffer[1]);
}
"""


def _labels(binary: Path, rep) -> None:
    assert sum(p[3] for p in rep.pieces) == rep.file_size == binary.stat().st_size
    mem, text = alloc_sizes(binary)
    assert rep.vm_size == mem
    assert sum(p[3] for p in rep.pieces if p[0] == ".text") == text


@pytest.fixture(scope="module")
def cxx_bin(tmp_path_factory):
    if CXX is None:
        pytest.skip("needs a C++ compiler (tests/run installs gcc/clang)")
    d = tmp_path_factory.mktemp("cxx")
    (d / "a.cc").write_text(SRC)
    out = d / "a.out"
    subprocess.run([CXX, "-O1", "-g", "-o", str(out), str(d / "a.cc")], check=True)
    return out


def test_cxx_symbols_demangled_with_nm_sizes(cxx_bin):
    rep = api.load_binary_size(cxx_bin)
    assert rep.kind == "elf" and not rep.stripped
    _labels(cxx_bin, rep)
    nm = subprocess.run(["nm", "-S", "-C", "--defined-only", str(cxx_bin)],
                        capture_output=True, text=True, check=True).stdout
    sizes = {}
    for line in nm.splitlines():
        f = line.split(None, 3)
        if len(f) == 4:
            sizes[f[3]] = int(f[1], 16)
    syms = {r.name: r for r in rep.group("symbol")}
    name = "agent::maps::Table::sum() const"
    assert syms[name].file == sizes[name]
    assert syms["big_buffer"].vm == sizes["big_buffer"] == 1 << 16
    assert syms["big_buffer"].file == 0            # .bss: memory only
    pk = {r.name: r for r in rep.group("package")}
    assert pk["agent"].file >= sizes[name]
    debug = sum(r.file for r in rep.group("section") if r.name.startswith(".debug"))
    assert debug > 0 and all(r.vm == 0 for r in rep.group("section")
                             if r.name.startswith(".debug"))


def test_stripped_system_binary():
    path = Path(shutil.which("ls") or "/bin/ls")
    rep = api.load_binary_size(path)
    assert rep.kind == "elf" and rep.stripped
    _labels(path, rep)
    assert any(n.startswith("stripped") for n in rep.notes) or rep.functions == 0


C_SRC = r"""
#include <stdio.h>
static int helper(int x) { return x * 3; }
int compute(int n) { int s = 0; for (int i = 0; i < n; i++) s += helper(i); return s; }
int main(int argc, char **argv) { printf("%d\n", compute(argc)); return 0; }
"""


def test_c_functions_by_compile_unit(tmp_path):
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("needs gcc (tests/run)")
    src = tmp_path / "agent.c"
    src.write_text(C_SRC)
    out = tmp_path / "agent"
    subprocess.run([cc, "-O1", "-g", "-fno-inline", "-o", str(out), str(src)], check=True)
    rep = api.load_binary_size(out)
    _labels(out, rep)
    nm = subprocess.run(["nm", "-S", "--defined-only", str(out)], capture_output=True,
                        text=True, check=True).stdout
    size = next(int(f[1], 16) for f in (ln.split() for ln in nm.splitlines())
                if len(f) == 4 and f[3] == "compute")
    by_sym = {p[2]: p for p in rep.pieces if p[0] == ".text"}
    assert by_sym["compute"][1] == f"(cu) {src}" and by_sym["compute"][3] == size
    cu = {r.name: r for r in rep.group("package")}[f"(cu) {src}"]
    assert cu.vm >= size and cu.file > cu.vm      # its code, and its DWARF (file only)


def _string_bytes_by_sweep(names, offs, pkgs):
    """The rule _string_bytes replaced (kept here as the reference): the names' byte ranges
    in string-table order, each byte to the first range that holds it."""
    lens = [len(n.encode()) for n in names]
    cur, out = 0, {}
    for k in sorted(range(len(names)), key=offs.__getitem__):
        a, b = offs[k], offs[k] + lens[k] + 1
        got = b - max(a, cur)
        if got > 0:
            out[pkgs[k]] = out.get(pkgs[k], 0) + got
            cur = b
    return out


def test_string_table_bytes_count_shared_tails_once():
    """A symbol table's names per package: a name that is the tail of another (a linker
    merges them) or a second symbol of the same name adds no bytes; the longer name's
    package has them. Random tables of ASCII, UTF-8 and undecodable names, in hash order."""
    import random
    from bpfmem.analysis.size import _string_bytes
    rnd = random.Random(29)
    for _ in range(300):
        blob, names, offs = bytearray(b"\0"), [], []
        for _ in range(rnd.randint(1, 40)):
            raw = bytes(rnd.choice(b"ab\xc3\xa9\xff") for _ in range(rnd.randint(0, 8)))
            at = len(blob)
            blob += raw + b"\0"
            for cut in [0] + [rnd.randint(0, len(raw)) for _ in range(rnd.randint(0, 3))]:
                names.append(raw[cut:].decode("utf-8", "replace"))
                offs.append(at + cut)
        order = rnd.sample(range(len(names)), len(names))
        names = [names[k] for k in order]
        offs = [offs[k] for k in order]
        pkgs = [rnd.choice("XYZ") for _ in names]
        assert _string_bytes(names, offs, pkgs) == _string_bytes_by_sweep(names, offs, pkgs)
