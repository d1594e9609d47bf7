"""The Go split of the pod view, pure parts and bad endpoints: smaps parsing and classes, Go
build info, GOGC/GOMEMLIMIT/GODEBUG, /metrics through prometheus_client's parser, the pprof
decoder, the split's arithmetic, the pod-level carve-out, and the bounded HTTP fetch against
servers that are down, slow, dripping, garbage or huge. Live Go programs: test_gomem_live.py.
"""

from __future__ import annotations

import gzip
import socket
import struct
import sys
import threading
import time

import pytest
from hypothesis import given, settings, strategies as st

from bpfmem.analysis import gosplit as gs
from bpfmem.analysis import pod as ap
from bpfmem.errors import HostError, ParseError, UnsupportedError
from bpfmem.host import httpget
from bpfmem.host.goproc import Endpoints, GoProber, ProcDetail
from bpfmem.host.listeners import parse_proc_net_tcp
from bpfmem.records import PodSample, ProcMem
from bpfmem.host.smaps import classify_mappings, parse_environ, parse_smaps
from bpfmem.parse.gobin import GoBuildInfo, MAGIC, parse_go_buildinfo
from bpfmem.parse.gometrics import parse_go_metrics
from bpfmem.parse.pprof import parse_pprof, top_functions
from bpfmem.units import format_size, parse_gomemlimit
from bpfmem.report import documents as docs
from bpfmem.report import pod as rp

from test_pod import PROF, cg_v1, cg_v2

KiB, MiB = 1 << 10, 1 << 20


# ---- smaps ----

def smaps_entry(start, end, perms, path="", rss=0, anon=None, inode=None, dev=None):
    inode = inode if inode is not None else (77 if path.startswith("/") else 0)
    dev = dev or ("fe:00" if inode else "00:00")
    anon = rss if anon is None and not path.startswith("/") else (anon or 0)
    return (f"{start:08x}-{end:08x} {perms} 00000000 {dev} {inode}"
            + (f"                  {path}" if path else " ") + "\n"
            f"Size:           {(end - start) // 1024:8d} kB\nKernelPageSize:        4 kB\n"
            f"Rss:            {rss // 1024:8d} kB\nPss:            {rss // 1024:8d} kB\n"
            f"Private_Clean:         0 kB\nPrivate_Dirty:  {rss // 1024:8d} kB\n"
            f"Anonymous:      {anon // 1024:8d} kB\nSwap:                  0 kB\n"
            "THPeligible:    0\nVmFlags: rd wr mr mw me ac sd\n")


EXE = "/opt/agent/bin/cilium agent"        # a space in the path: smaps keeps it
GO_SMAPS = "".join([
    smaps_entry(0x400000, 0x1400000, "r-xp", EXE, 12 * MiB),
    smaps_entry(0x1400000, 0x2400000, "r--p", EXE, 9 * MiB),
    smaps_entry(0x2400000, 0x2480000, "rw-p", EXE, 256 * KiB),
    smaps_entry(0x2480000, 0x2500000, "rw-p", "", 300 * KiB),               # .bss
    smaps_entry(0xc000000000, 0xc008000000, "rw-p", "", 100 * MiB),        # arena
    smaps_entry(0xc008000000, 0xc00c000000, "---p", "", 0),                # reserved
    smaps_entry(0x7f0000000000, 0x7f0000001000, "---p", "", 0),            # guard
    smaps_entry(0x7f0000001000, 0x7f0000801000, "rw-p", "", 64 * KiB),     # pthread stack
    smaps_entry(0x7f0001000000, 0x7f0001400000, "rw-p", "", 3 * MiB),      # runtime meta
    smaps_entry(0x7f0002000000, 0x7f0002200000, "r-xp", "/usr/lib/libc.so.6", MiB, inode=88),
    smaps_entry(0x7f0003000000, 0x7f0003002000, "r-xp", "[vdso]", 8 * KiB, inode=0),
    smaps_entry(0x7ffc00000000, 0x7ffc00021000, "rw-p", "[stack]", 32 * KiB),
])


def test_parse_smaps_fields_and_paths():
    maps = parse_smaps(GO_SMAPS)
    assert len(maps) == 12
    m = maps[0]
    assert (m.start, m.end, m.perms, m.path, m.rss, m.inode) == (
        0x400000, 0x1400000, "r-xp", EXE, 12 * MiB, 77)
    assert m.file_backed and not maps[3].file_backed and maps[3].anonymous == 300 * KiB
    assert maps[4].size == 128 * MiB and maps[11].path == "[stack]"
    assert parse_smaps("garbage\nRss: x kB\n") == ()


def test_classes_add_up_and_find_the_binary_stacks_and_arenas():
    maps = parse_smaps(GO_SMAPS)
    c, kinds = classify_mappings(maps, EXE, go=True)
    assert c.rss == sum(m.rss for m in maps)
    assert (c.binary_text, c.binary_rodata, c.binary_data, c.binary_bss) == (
        12 * MiB, 9 * MiB, 256 * KiB, 300 * KiB)
    assert c.go_arenas == 100 * MiB and c.go_arenas_reserved == 64 * MiB
    assert c.go_arenas_mapped == 128 * MiB
    assert c.stack == 32 * KiB + 64 * KiB and c.thread_stacks == 1
    assert c.anon_other == 3 * MiB and c.files == MiB and c.special == 8 * KiB
    assert kinds[:6] == ["binary_text", "binary_rodata", "binary_data", "binary_bss",
                         "go_arenas", "go_arenas"]
    # not a Go binary: no arenas; another executable: its pages are "files"
    c2, _ = classify_mappings(maps, EXE, go=False)
    assert c2.go_arenas == 0 and c2.anon_other == 103 * MiB and c2.rss == c.rss
    c3, _ = classify_mappings(maps, "/bin/other", go=True)
    assert c3.binary == 0 and c3.files == MiB + 21 * MiB + 256 * KiB


def test_exe_known_by_inode_when_the_path_differs():
    maps = parse_smaps(GO_SMAPS)
    import os
    c, _ = classify_mappings(maps, "/overlay/merged/agent", (os.makedev(0xfe, 0), 77))
    assert c.binary_text == 12 * MiB


def test_environ():
    env = parse_environ(b"GOGC=50\0PATH=/bin\0GODEBUG=madvdontneed=0,gctrace=1\0junk\0")
    assert env == {"GOGC": "50", "PATH": "/bin", "GODEBUG": "madvdontneed=0,gctrace=1"}


# ---- Go build info ----

def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def buildinfo_blob(version="go1.21.3", path="github.com/cilium/cilium/daemon",
                   pad=48) -> bytes:
    mod = (f"path\t{path}\nmod\tgithub.com/cilium/cilium\t(devel)\t\n"
           "build\tCGO_ENABLED=1\nbuild\tGOARCH=amd64\n")
    sentinel = bytes(range(16))
    modinfo = sentinel + mod.encode() + b"\n"[:0] + sentinel
    modinfo = sentinel + mod.encode() + sentinel        # ends "\n" + 16 bytes
    head = MAGIC + bytes([8, 2]) + bytes(16)
    return (b"\x7fELF" + bytes(pad - 4) + head + uvarint(len(version)) + version.encode()
            + uvarint(len(modinfo)) + modinfo)


def test_buildinfo_inline_format():
    info = parse_go_buildinfo(buildinfo_blob())
    assert info == GoBuildInfo("go1.21.3", "github.com/cilium/cilium/daemon",
                               "github.com/cilium/cilium (devel)",
                               {"CGO_ENABLED": "1", "GOARCH": "amd64"}, 48, 8, False)


def test_buildinfo_absent_unaligned_old_and_broken():
    assert parse_go_buildinfo(b"\x7fELF" + bytes(100)) is None
    # the magic at an unaligned offset is not the header
    assert parse_go_buildinfo(bytes(3) + MAGIC + bytes(40)) is None
    old = bytes(32) + MAGIC + bytes([8, 0]) + bytes(16) + bytes(32)
    info = parse_go_buildinfo(old)
    assert info is not None and info.version is None
    blob = buildinfo_blob()
    with pytest.raises(ParseError):
        parse_go_buildinfo(blob[:48 + 32 + 4])       # the version string cut
    with pytest.raises(ParseError):
        parse_go_buildinfo(bytes(16) + MAGIC + bytes([3, 2]) + bytes(16))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_buildinfo_fuzz(tail):
    try:
        parse_go_buildinfo(bytes(16) + MAGIC + tail)
    except ParseError:
        pass


# ---- settings and what they imply ----

def test_go_settings():
    s = gs.go_settings({}, "go1.19.8")
    assert s.gogc == 100 and s.memlimit is None and s.madvdontneed
    assert "the heap may grow to 2x the live heap" in s.implications[0]
    s = gs.go_settings({"GOGC": "off", "GOMEMLIMIT": "512MiB"}, "go1.21.0")
    assert s.gogc is None and s.memlimit == 512 * MiB
    assert "grows until GOMEMLIMIT (512MiB)" in s.implications[0]
    assert any("soft limit" in x for x in s.implications)
    s = gs.go_settings({"GOGC": "50", "GODEBUG": "gctrace=1,madvdontneed=0"}, "go1.20")
    assert "1.5x" in s.implications[0] and s.madvdontneed is False
    assert any("MADV_FREE" in x and "stays in RSS" in x for x in s.implications)
    assert gs.go_settings({}, "go1.14.2").madvdontneed is False   # MADV_FREE then
    s = gs.go_settings({"GOMEMLIMIT": "1GiB"}, "go1.18.1")
    assert any("ignored before Go 1.19" in x for x in s.implications)
    assert parse_gomemlimit("1.5GiB") == 3 * (1 << 29) and parse_gomemlimit("128Mi") is None


# ---- /metrics ----

def metrics_text(**kw) -> str:
    vals = dict(heap_inuse=60 * MiB, heap_idle=40 * MiB, heap_released=30 * MiB,
                heap_alloc=58 * MiB, heap_sys=100 * MiB, stack_inuse=MiB, stack_sys=MiB,
                mspan_sys=200 * KiB, mcache_sys=16 * KiB, buck_hash_sys=KiB,
                gc_sys=5 * MiB, other_sys=MiB, sys=110 * MiB, next_gc=120 * MiB) | kw
    out = []
    for k, v in vals.items():
        n = f"go_memstats_{k}_bytes"
        out.append(f"# HELP {n} x\n# TYPE {n} gauge\n{n} {v:.6e}\n")
    out.append("# HELP go_gc_duration_seconds x\n# TYPE go_gc_duration_seconds summary\n"
               'go_gc_duration_seconds{quantile="0.5"} 0.0001\n'
               "go_gc_duration_seconds_sum 0.5\ngo_gc_duration_seconds_count 42\n"
               "# TYPE go_goroutines gauge\ngo_goroutines 17\n"
               '# TYPE go_info gauge\ngo_info{version="go1.21.3"} 1\n'
               "# TYPE go_gc_gogc_percent gauge\ngo_gc_gogc_percent 75\n")
    return "".join(out)


def test_parse_go_metrics():
    f = parse_go_metrics(metrics_text())
    assert (f.heap_inuse, f.heap_free, f.stack_inuse) == (60 * MiB, 10 * MiB, MiB)
    assert f.runtime_metadata == 200 * KiB + 16 * KiB + KiB + 6 * MiB
    assert f.gc_cycles == 42 and f.goroutines == 17 and f.version == "go1.21.3"
    assert f.gogc_percent == 75 and f.gomemlimit is None
    assert gs.go_settings({"GOGC": "200"}, "go1.21", f).gogc == 75   # the runtime's word


@pytest.mark.parametrize("text", ["<html><body>404</body></html>", "\x00\xff\x10garbage",
                                  "foo_bar 1\n", "", "go_memstats_heap_inuse_bytes abc\n"])
def test_garbage_metrics_are_parse_errors(text):
    with pytest.raises(ParseError) as e:
        parse_go_metrics(text)
    assert e.value.args[0].isprintable()


def test_metrics_without_prometheus_client(monkeypatch):
    import os
    import bpfmem.host.goproc as goproc
    monkeypatch.setitem(sys.modules, "prometheus_client.parser", None)
    with pytest.raises(UnsupportedError, match="pip install prometheus_client"):
        parse_go_metrics(metrics_text())
    # in the pod view: one line saying what to install, the smaps split still there
    monkeypatch.setattr(goproc, "read_go_buildinfo", lambda path: GoBuildInfo("go1.21", "x",
                                                                             None))
    d = GoProber({os.getpid(): Endpoints(metrics="http://127.0.0.1:9/metrics")}).read(
        os.getpid())
    from bpfmem.parse.gometrics import HINT
    assert d.notes == (HINT,) and "pip install prometheus_client" in HINT
    assert d.figures is None and gs.go_split(d).source == "smaps"


# ---- pprof ----

def pb_field(num: int, value) -> bytes:
    if isinstance(value, int):
        return uvarint(num << 3) + uvarint(value)
    return uvarint(num << 3 | 2) + uvarint(len(value)) + value


def packed(xs) -> bytes:
    return b"".join(uvarint(x) for x in xs)


def pprof_bytes(samples, funcs, locs, types=(("inuse_objects", "count"),
                                              ("inuse_space", "bytes")), default=None):
    """A profile.proto message: samples [(location ids, values)], funcs {id: name},
    locs {id: [function ids, innermost first]}."""
    strings = [""]

    def s(x):
        if x not in strings:
            strings.append(x)
        return strings.index(x)
    out = b""
    for t, u in types:
        out += pb_field(1, pb_field(1, s(t)) + pb_field(2, s(u)))
    for ls, vs in samples:
        out += pb_field(2, pb_field(1, packed(ls)) + pb_field(2, packed(vs)))
    for lid, fids in locs.items():
        out += pb_field(4, pb_field(1, lid) + b"".join(
            pb_field(4, pb_field(1, f) + pb_field(2, 10)) for f in fids))
    for fid, name in funcs.items():
        out += pb_field(5, pb_field(1, fid) + pb_field(2, s(name)))
    if default:
        out += pb_field(14, s(default))
    for x in strings:
        out += pb_field(6, x.encode())
    return out


def test_pprof_top_flat_and_cum():
    funcs = {1: "main.alloc", 2: "main.handler", 3: "main.inlined", 4: "runtime.main"}
    locs = {10: [1], 11: [3, 2], 12: [4]}      # 11: main.inlined inlined into main.handler
    samples = [((10, 11, 12), (1, 4000)), ((11, 12), (2, 3000)), ((12,), (1, 500)),
               ((10, 12), (1, 4000))]
    prof = parse_pprof(gzip.compress(pprof_bytes(samples, funcs, locs)))
    assert prof.sample_types == (("inuse_objects", "count"), ("inuse_space", "bytes"))
    top = top_functions(prof)
    assert [(t.name, t.flat, t.cum) for t in top] == [
        ("main.alloc", 8000, 8000), ("main.inlined", 3000, 7000),
        ("runtime.main", 500, 11500), ("main.handler", 0, 7000)]
    assert top_functions(prof, "inuse_objects", n=1)[0].name == "main.alloc"
    with pytest.raises(ParseError, match="no sample type"):
        top_functions(prof, "alloc_space")


def test_pprof_broken():
    good = pprof_bytes([((1,), (5,))], {1: "f"}, {1: [1]}, types=(("x", "y"),))
    for bad in (good[:-3], b"\x1f\x8b" + b"notgzip", b"\x0f", b""):
        with pytest.raises(ParseError):
            parse_pprof(bad)
    bomb = gzip.compress(bytes(65 << 20))
    with pytest.raises(ParseError, match="larger than"):
        parse_pprof(bomb)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_pprof_fuzz(data):
    try:
        p = parse_pprof(data)
        top_functions(p)
    except ParseError:
        pass


# ---- the split ----

def detail(figures=True, text=GO_SMAPS, env=None, **kw) -> ProcDetail:
    c, _ = classify_mappings(parse_smaps(text), EXE, go=True)
    f = parse_go_metrics(metrics_text(**kw)) if figures else None
    return ProcDetail(7, EXE, GoBuildInfo("go1.21.3", "x", None), c, env or {}, f,
                      "http://127.0.0.1:9/metrics" if figures else None)


def test_split_with_runtime_figures_adds_up_to_rss():
    d = detail()
    s = gs.go_split(d)
    p = dict(s.parts)
    assert sum(p.values()) == s.rss == d.classes.rss
    assert p["heap_inuse"] == 60 * MiB and p["heap_free"] == 10 * MiB
    assert p["stacks"] == MiB + 96 * KiB
    assert p["runtime"] == 3 * MiB          # 6.2 MiB mapped, 3 MiB resident outside arenas
    assert p["binary"] == 12 * MiB + 9 * MiB + 556 * KiB
    assert p["other"] == MiB + 8 * KiB
    assert p["unexplained"] == 100 * MiB - 60 * MiB - 10 * MiB - MiB
    assert any("more than the runtime uses" in n for n in s.notes)
    assert s.go_heap == 70 * MiB and s.source.endswith("/metrics")


def test_split_without_figures_and_without_arenas():
    s = gs.go_split(detail(figures=False))
    assert dict(s.parts)["go_arenas"] == 100 * MiB and s.source == "smaps"
    assert sum(b for _k, b in s.parts) == s.rss
    no_arena = GO_SMAPS.replace("c000000000-c008000000", "7e0000000000-7e0008000000")
    s = gs.go_split(detail(text=no_arena))
    p = dict(s.parts)
    assert sum(p.values()) == s.rss and p["unexplained"] == 0
    meta = 200 * KiB + 16 * KiB + KiB + 6 * MiB          # all of it fits in what is left
    assert p["runtime"] == meta and "no heap arena" in s.notes[0]
    assert p["other"] == MiB + 8 * KiB + (103 * MiB - 71 * MiB) - meta
    small = gs.go_split(detail(text=no_arena, heap_inuse=200 * MiB))
    assert dict(small.parts)["unexplained"] < 0 and sum(dict(small.parts).values()) == s.rss
    assert gs.go_split(ProcDetail(1, "/bin/sh", None, d_classes())) is None


def d_classes():
    return classify_mappings(parse_smaps(GO_SMAPS), "/bin/sh")[0]


def test_pod_view_carves_go_parts_and_still_adds_up():
    d = detail()
    cg = cg_v1(usage=300 * MiB, anon=150 * MiB, cache=60 * MiB, kmem=20 * MiB)
    procs = [ProcMem(7, "agent", d.classes.rss, d.classes.rss, d.classes.rss, None, None,
                     None, 0, 100.0)]
    v = ap.pod_view(PodSample(0.0, 0.0, 0.0, cg, tuple(procs), (), {}, details={7: d}), PROF)
    parts = {c.key: c.bytes for c in v.components}
    assert sum(parts.values()) == 300 * MiB
    assert parts["go_heap"] == 60 * MiB and parts["go_free"] == 10 * MiB
    assert parts["go_stacks"] == MiB + 96 * KiB and parts["go_runtime"] == 3 * MiB
    assert parts["processes"] == 150 * MiB - 60 * MiB - 10 * MiB - MiB - 96 * KiB - 3 * MiB
    assert parts["binary"] == 12 * MiB + 9 * MiB + 256 * KiB
    assert parts["page_cache"] == 60 * MiB - parts["binary"]
    assert "go_arenas" not in parts
    doc = docs.build_pod_report(v, PROF.describe())
    g = doc["go"][0]
    assert g["go_version"] == "go1.21.3" and sum(g["parts"].values()) == g["rss"]
    # a tiny cgroup: the carve-outs are capped, nothing goes negative
    cg = cg_v1(usage=30 * MiB, anon=20 * MiB, cache=5 * MiB, kmem=MiB)
    v = ap.pod_view(PodSample(0.0, 0.0, 0.0, cg, tuple(procs), (), {}, details={7: d}), PROF)
    parts = {c.key: c.bytes for c in v.components}
    assert parts["go_heap"] == 20 * MiB and parts["processes"] == 0
    assert parts["binary"] == 5 * MiB and sum(parts.values()) == 30 * MiB
    import io
    out = io.StringIO()
    rp.render_table(v, out, width=140)
    text = out.getvalue()
    assert "Go process 7" in text and "Go heap freed, not returned" in text
    assert "GOGC=75: the heap may grow to 1.75x" in text   # go_gc_gogc_percent


def test_pod_go_parts_are_resident_and_binary_pages_by_who_is_charged():
    """The runtime counts 150 MiB in use but the arenas hold 100 MiB resident: at pod level
    the heap is the resident 100 - 10 (free) - 1 (stacks), the rest named once as never
    written; the stacks and runtime metadata are not squeezed out. With pagemap read, the
    binary is the pages charged here only, the rest shared, charged elsewhere."""
    from dataclasses import replace
    from bpfmem.host.pagemap import PageOwners
    d = detail(heap_inuse=150 * MiB)
    procs = [ProcMem(7, "agent", d.classes.rss, d.classes.rss, d.classes.rss, None, None,
                     None, 0, 100.0)]
    pages = PageOwners(frozenset(range(100)), frozenset(range(100, 5000)), 3, 4096)
    files = PageOwners(frozenset(), frozenset(range(9000, 9256)), 0, 4096)
    v1 = cg_v1(usage=300 * MiB, anon=150 * MiB, cache=60 * MiB, kmem=20 * MiB)
    v2 = cg_v2(usage=300 * MiB, anon=150 * MiB, file=60 * MiB, kernel=20 * MiB, sock=0)
    for cg, owners in ((v1, None), (v1, pages), (v2, None), (v2, pages)):
        dd = d if owners is None else replace(d, binary_pages=owners, file_pages=files)
        v = ap.pod_view(PodSample(0.0, 0.0, 0.0, cg, tuple(procs), (), {},
                                  details={7: dd}), PROF)
        parts = {c.key: c.bytes for c in v.components}
        assert sum(parts.values()) == 300 * MiB
        unexplained = dict(v.go[0].parts)["unexplained"]
        assert unexplained == 100 * MiB - 150 * MiB - 10 * MiB - MiB
        assert parts["go_heap"] == 150 * MiB + unexplained == 89 * MiB
        assert parts["go_free"] == 10 * MiB and parts["go_stacks"] == MiB + 96 * KiB
        assert parts["go_runtime"] == 3 * MiB
        assert [n for n in v.notes if "allocated but never written: 61Mi" in n]
        if owners is None:
            assert parts["binary"] == 12 * MiB + 9 * MiB + 256 * KiB
            assert [n for n in v.notes if "Go binary pages are an estimate" in n]
            assert v.shared_elsewhere == {}
        else:
            assert parts["binary"] == 100 * 4096
            assert v.shared_elsewhere == {"binary": 4900 * 4096, "mapped_files": MiB}
            assert [n for n in v.notes if n.startswith("shared, charged elsewhere")]
            assert docs.build_pod_report(v, None)["shared_elsewhere"]["binary"] == 4900 * 4096


def test_peak_explained():
    doc = {"summary": {"peak": {"t": 4.12, "usage": 612 * MiB, "parts": {
        "go_heap": 230 * MiB, "go_free": 180 * MiB, "go_stacks": 2 * MiB,
        "maps": 150 * MiB, "processes": 40 * MiB, "page_cache": 10 * MiB,
        "unexplained": 0}}}}
    assert rp.peak_explained(doc) == (
        "peak 612Mi at 4.1 s: Go heap 410Mi of which 180Mi freed but not yet returned, "
        "maps 150Mi, other anon 40Mi")
    assert format_size(1536 * MiB) == "1.5Gi" and format_size(310 * KiB) == "310Ki"


# ---- listeners ----

TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:2382 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4243 1 0000000000000000 100 0 0 10 0
   2: 0100007F:2382 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 4244 1 0000000000000000 20 4 30 10 -1
   3: 0A00000A:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4245 1 0000000000000000 100 0 0 10 0
"""
TCP6 = """  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1A0A 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5001 1 0000000000000000 100 0 0 10 0
   1: 0000000000000000FFFF00000100007F:1A0B 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5002 1 0000000000000000 100 0 0 10 0
"""


def test_proc_net_tcp():
    ls = parse_proc_net_tcp(TCP)
    assert [(x.address, x.port, x.inode) for x in ls] == [
        ("127.0.0.1", 9090, 4242), ("0.0.0.0", 8080, 4243), ("10.0.0.10", 80, 4245)]
    assert [x.loopback_reachable for x in ls] == [True, True, False]
    assert ls[1].connect_host == "127.0.0.1"
    l6 = parse_proc_net_tcp(TCP6)
    assert [(x.address, x.port) for x in l6] == [("::1", 6666), ("127.0.0.1", 6667)]
    assert all(x.loopback_reachable for x in l6)


# ---- bounded fetches against bad endpoints ----

# the loopback server of the hostile-endpoint tests (tests/hostile.py)
from hostile import HostileServer as Server  # noqa: E402


def silent(conn, stop):
    stop.wait(10)


def drip(conn, stop):
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
    while not stop.wait(0.2):
        conn.sendall(b"#")


def garbage(conn, stop):
    conn.sendall(b"\x00\x01\x02 this is not http \xff\xfe\r\n\r\n")


def huge(conn, stop):
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n" + b"x" * 65536)


def endless(conn, stop):
    conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
    chunk = b"go_memstats_heap_inuse_bytes 1\n" * 4096
    while not stop.is_set():
        conn.sendall(chunk)


def not_metrics(conn, stop):
    body = b"<html>hello</html>"
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


def not_found(conn, stop):
    conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")


@pytest.mark.parametrize("behave, why", [
    (silent, "no complete answer within 0.5s"), (drip, "no complete answer within 0.5s"),
    (garbage, "not an HTTP answer"), (huge, "over the 1Mi cap"), (endless, "over the 1Mi cap"),
    (not_found, "HTTP 404"),
])
def test_bad_endpoints_fail_in_bounded_time(behave, why):
    srv = Server(behave)
    try:
        t = time.monotonic()
        with pytest.raises(HostError) as e:
            httpget.http_get(srv.url, timeout=0.5, max_bytes=MiB)
        took = time.monotonic() - t
    finally:
        srv.close()
    msg = str(e.value)
    assert why in msg and srv.url in msg and "\n" not in msg
    assert took < 1.5, took


def test_down_endpoint_and_loopback_rule():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()          # nothing listens there now
    t = time.monotonic()
    with pytest.raises(HostError, match="connection refused"):
        httpget.http_get(f"http://127.0.0.1:{port}/metrics", timeout=0.5)
    assert time.monotonic() - t < 1.0
    with pytest.raises(HostError, match="not on loopback"):
        httpget.http_get("http://192.0.2.1:9090/metrics", loopback_only=True)
    with pytest.raises(HostError, match="not an http"):
        httpget.http_get("file:///etc/passwd")


@pytest.mark.parametrize("behave", [silent, drip, garbage, huge, not_metrics, not_found])
def test_prober_turns_bad_endpoints_into_notes(behave, monkeypatch):
    """The prober reading this very process (a Python, not Go: pretend it is) with a named
    endpoint that misbehaves: a note, a bounded wait, and the next reading within the
    back-off does not wait again."""
    import os
    import bpfmem.host.goproc as goproc
    monkeypatch.setattr(goproc, "read_go_buildinfo", lambda path: GoBuildInfo("go1.21", "x",
                                                                             None))
    srv = Server(behave)
    try:
        pr = GoProber({os.getpid(): Endpoints(metrics=srv.url)}, timeout=0.5,
                      max_bytes=MiB)
        t = time.monotonic()
        d = pr.read(os.getpid())
        first = time.monotonic() - t
        t = time.monotonic()
        d2 = pr.read(os.getpid())
        second = time.monotonic() - t
    finally:
        srv.close()
    assert d.figures is None and d.notes and srv.url in d.notes[-1]
    assert first < 1.5 and second < 0.3, (first, second)
    assert "not asked again" in d2.notes[-1]
    s = gs.go_split(d)
    assert s.source == "smaps" and sum(b for _k, b in s.parts) == s.rss


# ---- the CLI's endpoint flags ----

@pytest.mark.parametrize("argv, text", [
    (["pod", "--pid", "1", "--metrics-url", "ftp://x/metrics"], "not an http:// URL"),
    (["pod", "--cgroup", "/x", "--metrics-url", "http://a/metrics", "--metrics-url",
      "http://b/metrics"], "name the process of each (PID=URL)"),
    (["pod", "--pid", "1", "--no-go", "--metrics-url", "http://a/metrics"], "--no-go"),
])
def test_endpoint_flag_errors(argv, text, capsys):
    from test_pod import run_cli
    rc, out, err = run_cli(argv, capsys)
    assert rc == 2 and text in err and len(err.strip().splitlines()) == 1


def test_endpoint_flags_map_to_processes():
    from bpfmem import cli
    from bpfmem.cli import pod as cli_pod
    p = cli._parser()
    a = p.parse_args(["pod", "--pid", "42", "--metrics-url", "http://127.0.0.1:9/metrics",
                      "--pprof-url", "7=http://10.0.0.1:6060/debug/pprof/heap"])
    assert cli_pod.endpoints(a) == {
        42: Endpoints(metrics="http://127.0.0.1:9/metrics"),
        7: Endpoints(pprof="http://10.0.0.1:6060/debug/pprof/heap")}
    a = p.parse_args(["pod", "--container", "3f2a9c1e7b4d", "--metrics-url", "http://x/m"])
    assert cli_pod.endpoints(a) == {None: Endpoints(metrics="http://x/m")}


def test_many_go_processes_are_summed_not_listed():
    """Five Go processes: the three largest drawn in full, the other two summed on a line."""
    from dataclasses import replace
    d = detail()
    ds = {pid: replace(d, pid=pid) for pid in range(7, 12)}
    cg = cg_v1(usage=900 * MiB, anon=700 * MiB, cache=150 * MiB, kmem=20 * MiB)
    procs = [ProcMem(pid, "agent", d.classes.rss, d.classes.rss, d.classes.rss, None, None,
                     None, 0, 100.0) for pid in ds]
    v = ap.pod_view(PodSample(0.0, 0.0, 0.0, cg, tuple(procs), (), {}, details=ds), PROF)
    import io
    out = io.StringIO()
    rp.pod_text(v, out, width=140)
    text = out.getvalue()
    assert text.count("Go process ") == 3, text
    assert "2 more Go processes: RSS " in text and "Go heap in use 120Mi" in text
