"""The Go split on real Go programs: tests/go/memdemo (built here with Debian's golang-go,
offline: GOPATH mode, no module proxy, caches in a temp dir) and Debian's prometheus, each in
a scratch memory cgroup, read from outside through smaps and the /metrics endpoint bpfmem
finds on loopback by itself. Compared with what the program's own runtime.ReadMemStats says,
with what `go version` reads from the binary, and with `go tool pprof -top`.

Measured here (Go 1.19.8, Linux 6.18, 2 CPUs) and stated where asserted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import is_root
from bpfmem import api
from bpfmem.host import httpget
from bpfmem.host.podscan import launched
from bpfmem.report.documents import document

MiB = 1 << 20
HERE = Path(__file__).resolve().parent
GO = shutil.which("go")
HOST = api.profile()          # the running kernel (the maps' model; none are held here)
pytestmark = [pytest.mark.kernel,
              pytest.mark.skipif(not is_root(), reason="cgroups and smaps need root"),
              pytest.mark.skipif(GO is None, reason="needs Debian's golang-go (tests/run)")]


def go_env(tmp: Path) -> dict:
    return os.environ | {"GO111MODULE": "off", "GOPROXY": "off", "GOFLAGS": "",
                         "GOPATH": str(tmp / "gopath"), "GOCACHE": str(tmp / "gocache"),
                         "CGO_ENABLED": "0", "HOME": str(tmp)}


@pytest.fixture(scope="module")
def memdemo(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("memdemo")
    out = tmp / "memdemo"
    subprocess.run([GO, "build", "-o", str(out), "."], cwd=HERE / "go" / "memdemo",
                   env=go_env(tmp), check=True, timeout=300)
    return out, tmp


def wait_file(path: Path, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return path.read_text()
        time.sleep(0.02)
    raise TimeoutError(f"{path} never appeared")


def get(url: str) -> bytes:
    return httpget.http_get(url, timeout=30, max_bytes=64 * MiB)


def memstats(addr: str) -> dict:
    return json.loads(get(f"http://{addr}/memstats"))


def settled(addr: str, timeout: float = 10.0) -> dict:
    """The program's MemStats once the background scavenger stopped moving HeapReleased."""
    last = memstats(addr)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = memstats(addr)
        if abs(now["HeapReleased"] - last["HeapReleased"]) < 64 << 10:
            return now
        last = now
    return last


def quiet_view(addr: str, fs_path: str, tries: int = 10, **kw):
    """A pod view taken while the program's own MemStats did not move across it (the
    scavenger returns memory in bursts: a reading between smaps and /metrics would see a
    burst on one side only). Returns (MemStats before, view, MemStats after)."""
    for _ in range(tries):
        before = memstats(addr)
        v = api.pod_view(cgroup=fs_path, profile=HOST, **kw)
        after = memstats(addr)
        if abs(after["HeapReleased"] - before["HeapReleased"]) < 256 << 10:
            break
        time.sleep(0.5)
    return before, v, after


def go_of(view, pid: int):
    return next(g for g in view.go if g.pid == pid)


def go_version_of(path: str) -> str:
    out = subprocess.run([GO, "version", path], capture_output=True, text=True,
                         check=True).stdout
    return out.strip().rsplit(" ", 1)[-1]


def test_split_agrees_with_the_programs_own_memstats(memdemo, tmp_path):
    """memdemo holds 56 MiB (32+16+8) and churned 32 MiB of garbage; bpfmem reads it from
    outside. Measured here: heap in use equal to the program's own HeapInuse read right
    after (to the byte, when idle), HeapReleased within 0.1 MiB, the parts add up to the
    smaps RSS exactly, and the heap arenas' resident bytes are within 1 MiB of in use +
    free + goroutine stacks (the unexplained rest). Then the 32 MiB are dropped: they show
    as freed but not returned; once returned (debug.FreeOSMemory), RSS falls by what was
    freed-not-returned. "The same moment": a reading across which the program's own
    HeapReleased did not move (the scavenger works in bursts, also with GOGC=off right after
    the churn; a burst between the smaps and the /metrics reading showed as +9 MiB
    unexplained once under load). Asserted: 0.5 MiB for heap in use, 2 MiB for released,
    3 MiB for |unexplained| and for the fall in RSS."""
    exe, _tmp = memdemo
    ready = tmp_path / "ready"
    # GOGC=off: no collection but the program's own runtime.GC calls, so heap in use holds
    # still between readings (bpfmem's requests make a little garbage)
    with launched(["env", "GOGC=off", str(exe), "-ready", str(ready)],
                  limit=512 * MiB) as job:
        addr = wait_file(ready)
        get(f"http://{addr}/step?do=hold")
        settled(addr)
        before, v, own = quiet_view(addr, job.cgroup.fs_path, pprof=False)
        g = go_of(v, job.pid)
        d = v.details[job.pid]
        f = d.figures
        parts = dict(g.parts)
        assert g.source == d.metrics_url == f"http://{addr}/metrics"   # found by itself
        assert g.version == go_version_of(str(exe)) == d.go.version
        # the program's own figures just before and just after bpfmem's reading
        for key, got, tol in (("HeapInuse", f.heap_inuse, MiB // 2),
                              ("HeapReleased", f.heap_released, 2 * MiB)):
            lo, hi = sorted((before[key], own[key]))
            assert lo - tol <= got <= hi + tol, (key, got, before[key], own[key])
        assert parts["heap_inuse"] == f.heap_inuse
        assert parts["heap_free"] == f.heap_idle - f.heap_released
        assert sum(parts.values()) == g.rss
        rollup = next(p.rss for p in v.processes if p.pid == job.pid)
        assert abs(g.rss - rollup) <= MiB
        assert abs(parts["unexplained"]) <= 3 * MiB, parts
        assert parts["heap_inuse"] >= 56 * MiB
        assert parts["binary"] == d.classes.binary > 2 * MiB
        comps = {c.key: c.bytes for c in v.components}
        assert sum(comps.values()) == v.usage
        # at pod level the heap is what is resident: in use less what the runtime counts
        # but never wrote (the split's negative unexplained); the cgroup's anon holds it all
        assert comps["go_heap"] == f.heap_inuse + min(0, parts["unexplained"])
        assert d.top is None                            # pprof=False
        assert d.env == {"GOGC": "off"} and g.settings.gogc is None
        assert "GOGC=off: no GC by heap growth" in g.settings.implications[0]
        print(f"\nheld: inuse {f.heap_inuse - own['HeapInuse']:+d} B vs own "
              f"({before['HeapInuse'] - own['HeapInuse']:+d} B before-after), released "
              f"{f.heap_released - own['HeapReleased']:+d} B, unexplained "
              f"{parts['unexplained'] / MiB:+.2f} MiB, rss-rollup {(g.rss - rollup) // 1024} KiB")

        # freed: the 32 MiB are free spans until the scavenger returns them (Go 1.19 does
        # within 0.3..2 s here, whatever GOGC): read at once, and again from "hold" if the
        # program's HeapReleased moved across the reading
        for _attempt in range(3):
            get(f"http://{addr}/step?do=free")
            b1, v1, a1 = quiet_view(addr, job.cgroup.fs_path, tries=1, pprof=False)
            if abs(a1["HeapReleased"] - b1["HeapReleased"]) < 256 << 10:
                break
            get(f"http://{addr}/step?do=hold")
        g1 = go_of(v1, job.pid)
        free1 = g1.part("heap_free")
        assert free1 >= 28 * MiB, free1 / MiB
        assert abs(g1.part("unexplained")) <= 3 * MiB, g1.parts
        get(f"http://{addr}/step?do=return")
        _b, v2, _a = quiet_view(addr, job.cgroup.fs_path, pprof=False)
        g2 = go_of(v2, job.pid)
        assert g2.part("heap_free") <= MiB
        fell = g1.rss - g2.rss
        returned = g1.go_heap - g2.go_heap      # in use + freed-not-returned, before - after
        assert abs(fell - returned) <= 3 * MiB, (fell / MiB, returned / MiB)
        print(f"freed not returned {free1 / MiB:.1f} MiB; after FreeOSMemory RSS fell "
              f"{fell / MiB:.1f} MiB for {returned / MiB:.1f} MiB returned")
        where = job.cgroup.fs_path
    assert not os.path.exists(where)


_UNITS = {"B": 1, "kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}


def _pprof_size(text: str) -> float:
    m = re.match(r"^([\d.]+)([kMG]?B)?$", text)
    return float(m.group(1)) * _UNITS[m.group(2) or "B"]


def test_pprof_top_matches_go_tool_pprof(memdemo, tmp_path):
    """The heap profile memdemo serves, decoded here and by `go tool pprof -top` on the same
    file: the same functions in the same order with the same flat and cum (pprof prints
    two decimals: within 1%)."""
    exe, tmp = memdemo
    ready = tmp_path / "ready"
    with launched([str(exe), "-ready", str(ready)], limit=512 * MiB) as job:
        addr = wait_file(ready)
        get(f"http://{addr}/step?do=hold")
        raw = get(f"http://{addr}/debug/pprof/heap")
        v = api.pod_view(pid=job.pid, profile=HOST)
    path = tmp_path / "heap.pb.gz"
    path.write_bytes(raw)
    out = subprocess.run([GO, "tool", "pprof", "-top", "-nodefraction=0", "-nodecount=200",
                          "-symbolize=none", "-sample_index=inuse_space", str(path)],
                         capture_output=True, text=True, env=go_env(tmp), check=True,
                         timeout=120).stdout
    rows = []
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 6 and f[1].endswith("%") and f[4].endswith("%"):
            name = " ".join(f[5:]).removesuffix(" (inline)")
            rows.append((name, _pprof_size(f[0]), _pprof_size(f[3])))
    from bpfmem.parse.pprof import parse_pprof, top_functions
    ours = top_functions(parse_pprof(raw), "inuse_space", n=None)
    assert len(rows) >= 5
    flat_theirs = [r[0] for r in rows if r[1] > 0]
    flat_ours = [t.name for t in ours if t.flat > 0]
    assert flat_ours == flat_theirs
    assert flat_ours[:3] == ["main.holdTables", "main.holdIndex", "main.holdCache"]
    by = {t.name: t for t in ours}
    for name, flat, cum in rows:
        assert abs(by[name].flat - flat) <= max(flat * 0.01, 0.01 * MiB), name
        assert abs(by[name].cum - cum) <= max(cum * 0.01, 0.01 * MiB), name
    # the pod view fetched the same kind of profile next to the /metrics it found
    top = v.details[job.pid].top
    assert [t.name for t in top[:3]] == flat_ours[:3]


def test_trace_shows_the_go_parts_and_explains_the_peak(memdemo, tmp_path):
    """memdemo under --trace holds 56 MiB at 0.6 s, drops 32 MiB at 1.6 s and returns the
    free heap at 2.4 s: the stacked parts show heap in use, then freed not returned (until
    the runtime's background scavenger returns it: 0.3..2 s after the GC here, whatever
    GOGC), then neither; the peak is explained by its Go heap. GOGC=off keeps the
    sampler's requests' garbage from triggering other collections."""
    exe, _tmp = memdemo
    ready = tmp_path / "ready"
    doc = document(api.pod_trace(
        command=["env", "GOGC=off", str(exe), "-ready", str(ready),
                 "-script", "hold:0.6,free:1.6,return:2.4"],
        duration=3.2, interval=0.1, limit=512 * MiB, stop_on_exit=False,
        command_output=subprocess.DEVNULL, profile=HOST))
    samples = doc["samples"]
    assert all(sum(v for v in s["parts"].values() if v is not None) == s["usage"]
               for s in samples)

    def during(a, b):
        return [s for s in samples if a <= s["t"] <= b and "go_heap" in s["parts"]]
    held, freed, back = during(1.0, 1.5), during(1.7, 2.3), during(2.8, 3.2)
    assert held and freed and back, [s["t"] for s in samples if "go_heap" in s["parts"]]
    def mib(xs, key):
        return [(round(s["t"], 2), round(s["parts"][key] / MiB, 1)) for s in xs]
    assert all(s["parts"]["go_heap"] >= 56 * MiB for s in held), mib(held, "go_heap")
    # the scavenger returns free spans within 0.3..2 s: the first sample after the free
    # sees them (later ones may see fewer)
    assert freed[0]["parts"]["go_free"] >= 28 * MiB, mib(freed, "go_free")
    assert all(s["parts"]["go_heap"] <= 30 * MiB for s in freed), mib(freed, "go_heap")
    assert all(s["parts"]["go_free"] <= 2 * MiB for s in back), mib(back, "go_free")
    from bpfmem.report.pod import peak_explained, render_trace_html
    why = peak_explained(doc)
    assert why.startswith("peak ") and ": Go heap " in why, why
    page = render_trace_html(doc)
    assert "Go heap in use" in page and "Go heap freed, not returned" in page
    print("\n" + why)


def test_discovery_inside_the_pods_own_network_namespace(memdemo, tmp_path):
    """memdemo in a network namespace of its own (as in a pod), listening on that
    namespace's 127.0.0.1: the pod view finds the listener in /proc/PID/net/tcp and asks it
    from inside the namespace; this process's own namespace is left as it was."""
    exe, _tmp = memdemo
    ready = tmp_path / "ready"
    ours = os.readlink("/proc/self/ns/net")
    cmd = ["unshare", "--net", "sh", "-c",
           f"ip link set lo up && exec {exe} -ready {ready}"]
    with launched(cmd, limit=512 * MiB) as job:
        addr = wait_file(ready)
        assert os.readlink(f"/proc/{job.pid}/ns/net") != ours
        v = api.pod_view(cgroup=job.cgroup.fs_path, profile=HOST)
        g = go_of(v, job.pid)
        d = v.details[job.pid]
    assert os.readlink("/proc/self/ns/net") == ours
    assert g.source == f"http://{addr}/metrics" and d.figures.heap_inuse > 0, d.notes
    assert d.top is not None and d.pprof_url.endswith("/debug/pprof/heap")
    assert sum(b for _k, b in g.parts) == g.rss


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_prometheus_in_a_scratch_cgroup(tmp_path):
    """Debian's prometheus (Go, cgo) on loopback: the pod view finds its /metrics by itself
    and splits its memory. Measured here (prometheus 2.42, go1.19.8): RSS 41 MiB, of which
    29 MiB binary pages, 10 MiB heap in use, unexplained -1.6 MiB (4%); heap in use between
    the figures of two scrapes taken just before and after (serving /metrics allocates).
    Asserted: within 1 MiB of that bracket, |unexplained| <= 10% of RSS."""
    exe = "/usr/bin/prometheus"
    if not os.access(exe, os.X_OK):
        pytest.skip("needs Debian's prometheus (tests/run)")
    port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 1m\nscrape_configs: []\n")
    argv = [exe, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]
    with launched(argv, limit=1024 * MiB, stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL) as job:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpget.http_get(f"http://127.0.0.1:{port}/-/ready", timeout=1)
                break
            except Exception:
                if time.monotonic() > deadline or job.exited():
                    raise
                time.sleep(0.2)
        scrapes = [get(f"http://127.0.0.1:{port}/metrics").decode()]
        v = api.pod_view(cgroup=job.cgroup.fs_path, profile=HOST)
        scrapes.append(get(f"http://127.0.0.1:{port}/metrics").decode())
        where = job.cgroup.fs_path
    assert not os.path.exists(where)
    g = go_of(v, job.pid)
    parts = dict(g.parts)
    assert g.source == f"http://127.0.0.1:{port}/metrics"
    assert g.version == go_version_of(exe)
    lo, hi = sorted(float(re.search(r"^go_memstats_heap_inuse_bytes (\S+)$", x, re.M)
                          .group(1)) for x in scrapes)
    assert lo - MiB <= parts["heap_inuse"] <= hi + MiB, (lo, parts["heap_inuse"], hi)
    assert sum(parts.values()) == g.rss
    assert abs(parts["unexplained"]) <= g.rss * 0.10, parts
    assert parts["binary"] > 5 * MiB and parts["runtime"] > 0
    comps = {c.key: c.bytes for c in v.components}
    assert sum(comps.values()) == v.usage and comps["go_heap"] > 0
    print(f"\nprometheus {g.version}: rss {g.rss / MiB:.1f} MiB, " + ", ".join(
        f"{k} {b / MiB:.1f}" for k, b in g.parts) + f"; scrapes before/after: inuse "
        f"{lo / MiB:.2f}..{hi / MiB:.2f} MiB")


def test_cli_with_named_and_bad_endpoints(memdemo, tmp_path, capsys):
    """--metrics-url to a port where nothing listens: a note, exit 0, in bounded time;
    PID=URL to the real one: its figures; two plain URLs: a usage error."""
    from test_pod import run_cli
    exe, _tmp = memdemo
    ready = tmp_path / "ready"
    with launched([str(exe), "-ready", str(ready)], limit=512 * MiB) as job:
        addr = wait_file(ready)
        dead = f"http://127.0.0.1:{free_port()}/metrics"
        t = time.monotonic()
        rc, out, err = run_cli(["pod", "--pid", str(job.pid), "--metrics-url", dead,
                                "--format", "json"], capsys)
        assert rc == 0, err
        assert time.monotonic() - t < 10
        g = json.loads(out)["go"][0]
        assert g["source"] == "smaps" and any("connection refused" in n for n in g["notes"])
        rc, out, err = run_cli(["pod", "--cgroup", job.cgroup.fs_path, "--metrics-url",
                                f"{job.pid}=http://{addr}/metrics"], capsys)
        assert rc == 0, err
        assert f"figures from http://{addr}/metrics" in " ".join(out.split())
        assert "Go heap in use" in out and "GOGC=100" in out
        rc, out, err = run_cli(["pod", "--pid", str(job.pid), "--metrics-url", dead,
                                "--metrics-url", dead], capsys)
        assert rc == 2 and "PID=URL" in err


def thp_mode() -> str | None:
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return None
    m = re.search(r"\[(\w+)\]", text)
    return m.group(1) if m else None


def vmstat(key: str) -> int:
    for line in Path("/proc/vmstat").read_text().splitlines():
        k, _, v = line.partition(" ")
        if k == key:
            return int(v)
    return 0


def test_huge_page_residue_is_named_then_reclaimed(memdemo, tmp_path):
    """memdemo (GODEBUG=madvdontneed=1) writes 128 MiB of 64 KiB blocks on transparent huge
    pages (THP "madvise" here: it asks with MADV_HUGEPAGE), keeps every other block and
    returns the free half: each 64 KiB MADV_DONTNEED splits a huge page's mapping, the 2 MiB
    pages stay charged. Measured here: 62.0 MiB charged and unmapped (usage 133 MiB, anon
    70.3 MiB), named "huge-page residue"; lowering the limit by half of it reclaimed all of
    it (usage 70.8 MiB) with no OOM kill and the process alive. Asserted: >= 48 MiB named,
    |unexplained| <= 2 MiB, after the lower limit <= 4 MiB left, no OOM."""
    mode = thp_mode()
    if mode not in ("always", "madvise"):
        pytest.skip(f"transparent huge pages not available on this kernel ({mode or 'no sysfs'})")
    exe, _tmp = memdemo
    ready = tmp_path / "ready"
    with launched(["env", "GODEBUG=madvdontneed=1", str(exe), "-ready",
                   str(ready)], limit=1024 * MiB) as job:
        addr = wait_file(ready)
        faults = vmstat("thp_fault_alloc")
        get(f"http://{addr}/step?do=sparse")
        if vmstat("thp_fault_alloc") - faults < 16:
            pytest.skip("the kernel gave no transparent huge pages (memory too fragmented)")
        fs = job.cgroup.fs_path
        v = api.pod_view(cgroup=fs, profile=HOST, pprof=False)
        comps = {c.key: c.bytes for c in v.components}
        assert sum(comps.values()) == v.usage
        assert comps["thp_residue"] >= 48 * MiB, comps
        assert abs(comps["unexplained"]) <= 2 * MiB, comps
        note = next(n for n in v.notes if n.startswith("huge-page residue"))
        assert "Reclaimable" in note and "GODEBUG=disablethp=1" in note
        cut = v.usage - comps["thp_residue"] // 2
        # v1 answers EBUSY when a reclaim round freed no page it counts, although the
        # deferred split it ran (a shrinker, not counted) freed the residue: seen here once
        # in three; the second write finds usage below the limit
        for attempt in range(3):
            try:
                Path(fs, "memory.limit_in_bytes").write_text(str(cut))
                break
            except OSError:
                if attempt == 2:
                    raise
        after = api.pod_view(cgroup=fs, profile=HOST, pprof=False)
        comps2 = {c.key: c.bytes for c in after.components}
        oom = dict(line.split() for line in Path(fs, "memory.oom_control").read_text()
                   .splitlines())
        assert not job.exited() and int(oom.get("oom_kill", 0)) == 0
        assert comps2["thp_residue"] <= 4 * MiB, comps2
        assert after.usage <= v.usage - comps["thp_residue"] + 4 * MiB
    print(f"\nresidue {comps['thp_residue'] / MiB:.1f} MiB of usage {v.usage / MiB:.1f} MiB "
          f"(processes {comps['processes'] / MiB:.1f}, Go heap {comps['go_heap'] / MiB:.1f}); "
          f"limit lowered to {cut / MiB:.1f} MiB: residue {comps2['thp_residue'] / MiB:.1f} "
          f"MiB, usage {after.usage / MiB:.1f} MiB")


def test_trace_of_200_processes_keeps_up_and_fits_a_screen(memdemo, tmp_path, capsys):
    """200 Go processes (memdemo, each serving /metrics on loopback) traced for 30 s at 0.1 s
    asked: every process's counters are read every sample, its smaps_rollup and detail
    (smaps by class, page owners, endpoints) in turns within a budget, the endpoints in the
    background with their own deadline. Measured here (2 CPUs shared with other work): 59
    samples, gaps median 0.50 s, 90% 0.60 s, max 0.81 s (a reading 0.41 s; 1.9-7.3 s each
    before the budget); the trace says it fell behind the asked 0.1 s; the table 25 lines.
    Asserted: the median and 95% of the gaps between samples <= 1 s, none over 1.5 s (a
    neighbour's load), the fall behind named, every Go process in the view at the peak,
    output <= 50 lines (one screen)."""
    from bpfmem import cli
    exe, _tmp = memdemo
    out = tmp_path / "trace.json"
    argv = ["pod", "--trace", "30s", "--interval", "100ms", "--limit", "4Gi", "-o", str(out),
            "--format", "table", "--", "sh", "-c",
            f"for i in $(seq 200); do {exe} & done; wait"]
    rc = cli.main(argv)
    text, err = capsys.readouterr()
    assert rc == 0, err
    doc = json.loads(out.read_text())
    ts = [s["t"] for s in doc["samples"]]
    gaps = sorted(b - a for a, b in zip(ts, ts[1:]))
    assert len(ts) >= 20, ts
    assert gaps[len(gaps) // 2] <= 1.0 and gaps[int(len(gaps) * 0.95)] <= 1.0, gaps
    assert gaps[-1] <= 1.5, gaps
    s = doc["summary"]
    assert s["processes"] == 201                       # sh and its 200
    assert s["behind"] and s["asked_interval"] == 0.1
    assert [n for n in s["notes"] if n.startswith("the samples fell behind")]
    pk = doc["at_peak"]
    with_figures = sum(1 for g in pk["go"] if g["runtime"] is not None)
    assert len(pk["go"]) == 200
    lines = text.splitlines()
    assert len(lines) <= 50, text
    print(f"\n{len(ts)} samples, gaps median {gaps[len(gaps) // 2]:.2f}s, 90% "
          f"{gaps[int(len(gaps) * 0.9)]:.2f}s, max {gaps[-1]:.2f}s; reading "
          f"{s['reading']:.2f}s; {with_figures} of 200 with runtime figures at the peak; "
          f"{len(lines)} lines of output\n" + text)


def test_trace_peak_separates_live_heap_from_garbage(memdemo, tmp_path):
    """memdemo (GOGC=off: no collection but its own) holds 56 MiB at 0.3 s, makes 64 MiB of
    garbage at 1.0 s and collects and returns it at 2.0 s (debug.FreeOSMemory): the peak (in
    1.0..2.0 s) holds 120 MiB of
    heap, of which the GC cycle counter's next step shows 64 MiB was garbage. Measured
    here: garbage 64.0 MiB of 120.3 MiB. Asserted: garbage 60..68 MiB, the cycle seen
    after 2.0 s, and the peak's explanation says "garbage awaiting GC"."""
    exe, _tmp = memdemo
    ready = tmp_path / "ready"
    doc = document(api.pod_trace(
        command=["env", "GOGC=off", str(exe), "-ready", str(ready),
                 "-script", "hold:0.3,garbage:1.0,return:2.0"],
        duration=4.0, interval=0.1, limit=512 * MiB, stop_on_exit=False,
        command_output=subprocess.DEVNULL, profile=HOST))
    s = doc["summary"]
    assert 1.0 <= s["peak"]["t"] <= 2.6, s["peak"]["t"]     # (2.0 s, late under load)
    assert s["peak_garbage"] is not None, s["notes"]
    assert 60 * MiB <= s["peak_garbage"] <= 68 * MiB, s["peak_garbage"] / MiB
    assert s["peak_gc_at"] >= 2.0
    assert any("garbage awaiting GC" in n for n in s["notes"])
    from bpfmem.report.pod import peak_explained
    why = peak_explained(doc)
    assert "garbage awaiting GC" in why, why
    print(f"\ngarbage {s['peak_garbage'] / MiB:.1f} MiB of {s['peak_go_heap'] / MiB:.1f} MiB "
          f"at {s['peak']['t']:.2f}s; GC seen at {s['peak_gc_at']:.2f}s\n{why}")


def test_trace_does_not_wait_for_a_slow_endpoint(memdemo, tmp_path):
    """The pod's Go process named with a /metrics that answers after 1.5 s (a loopback server
    of this test): the trace keeps sampling every 0.1 s (before: one sample per 1.6 s), the
    figures arrive in the background and are used when they come, said to be late.
    Measured here: gaps median 0.10 s, max 0.20 s, the figures in samples from 1.65 s on.
    Asserted: median gap <= 0.3 s, none over 1 s, figures in the samples after 2 s, the
    summary's note of the late figures."""
    import threading
    from test_gomem import Server, metrics_text
    body = metrics_text().encode()

    def slow(conn, stop):
        if not stop.wait(1.5):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)
    srv = Server(slow)
    exe, _tmp = memdemo
    try:
        doc = document(api.pod_trace(
            command=[str(exe), "-ready", str(tmp_path / "ready")], duration=3.5,
            interval=0.1, limit=512 * MiB, stop_on_exit=False, discover=False,
            endpoints={None: api.go_endpoints(metrics=srv.url)},
            command_output=subprocess.DEVNULL, profile=HOST))
    finally:
        srv.close()
    ts = [s["t"] for s in doc["samples"]]
    gaps = sorted(b - a for a, b in zip(ts, ts[1:]))
    assert gaps[len(gaps) // 2] <= 0.3 and gaps[-1] <= 1.0, gaps
    late = [s for s in doc["samples"] if s["t"] >= 2.0]
    assert late and all("go_heap" in s["parts"] for s in late), [
        (s["t"], sorted(s["parts"])) for s in late]
    first = next(s["t"] for s in doc["samples"] if "go_heap" in s["parts"])
    assert [n for n in doc["summary"]["notes"] if "answers slower than the trace" in n]
    notes = [n for g in (doc["at_peak"] or {}).get("go", []) for n in g["notes"]]
    print(f"\ngaps median {gaps[len(gaps) // 2]:.2f}s, max {gaps[-1]:.2f}s; figures from "
          f"{first:.2f}s; notes {notes}")


def test_trace_without_an_endpoint_says_the_go_split_lacks_runtime_figures(memdemo, tmp_path):
    """memdemo traced with discovery off and no endpoint named: every sample splits the Go
    process from smaps alone. The summary says in how many samples, and the process's own
    note says no endpoint answered (it used to claim "no /metrics endpoint" even while one
    was serving). Asserted: the note counts every sample that saw the process, and no
    sample has runtime parts."""
    exe, _tmp = memdemo
    doc = document(api.pod_trace(
        command=[str(exe), "-ready", str(tmp_path / "ready")], duration=1.5,
        interval=0.1, limit=512 * MiB, stop_on_exit=False, discover=False,
        command_output=subprocess.DEVNULL, profile=HOST))
    assert not any("go_heap" in s["parts"] for s in doc["samples"])
    notes = [n for n in doc["summary"]["notes"] if "without runtime figures" in n]
    assert len(notes) == 1, doc["summary"]["notes"]
    n = int(notes[0].split(" of ")[0])
    assert 1 <= n <= len(doc["samples"]), (n, len(doc["samples"]))
    go_notes = [n for g in (doc["at_peak"] or {}).get("go", []) for n in g["notes"]]
    assert any("no Go /metrics endpoint of it answered" in n for n in go_notes), go_notes
    print(f"\n{notes[0]}")
