#!/usr/bin/env python3
"""Benchmark: the worst Go endpoint of each kind (issue 30), against public tools reading
the same thing in the same run.

A hostile loopback server (tests/hostile.py: threads on 127.0.0.1) drips heads, floods
interim answers, headers and chunks; bodies carry absurd figures, 16 MiB of label sets and
pprof bombs (made here). Each case is read by bpfmem in a child process of its own, the way
`bpfmem pod` reads an endpoint (:func:`bpfmem.host.httpget.http_get`, then
:func:`bpfmem.parse.gometrics.parse_go_metrics` or :func:`bpfmem.parse.pprof.parse_pprof` and
``top_functions`` within the same bound), killed at ``--cap`` seconds; the peer is
`curl --max-time TIMEOUT` of the same URL (HTTP cases), `promtool check metrics` of the same
text and `go tool pprof -top` of the same profile (parser cases). Printed per case: wall time
and peak RSS of bpfmem's child and of the peer, their ratio, and how bpfmem ended (its
one-line error, or "killed"). Goal: every case within the documented 2 s and a note, at a
few tens of MiB.

Run against another checkout (say the one before the fix) with ``--src OTHER/src``.

A pod of N hostile processes (--processes, default 16; tests/hostile.py serve_processes: each
its own loopback listener) is read as `bpfmem pod` reads a pod's Go endpoints: each process
drips its /metrics, or serves a good one and drips its heap profile; the peer is
`curl --parallel` of the same N URLs with the same --max-time (what reading them at once
costs). Goal: one bound for the pod, not one per process.

usage: python bench/hostile.py [--timeout 2] [--cap 30] [--src DIR] [--only NAME]
                               [--processes N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "tests"))

import hostile as h  # noqa: E402

CHILD = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
from bpfmem.errors import BpfmemError
kind, arg, timeout = sys.argv[2], sys.argv[3], float(sys.argv[4])
t = time.monotonic()
try:
    if kind == "http":
        from bpfmem.host import httpget
        from bpfmem.parse.gometrics import parse_go_metrics
        body = httpget.http_get(arg, timeout=timeout)
        parse_go_metrics(body.decode(errors="replace"))
        out = "parsed"
    elif kind == "metrics":
        from bpfmem.parse.gometrics import parse_go_metrics
        f = parse_go_metrics(open(arg, "rb").read().decode(errors="replace"))
        out = f"parsed: heap in use {f.heap_inuse}"
    elif kind == "pprof":
        from bpfmem.parse.pprof import parse_pprof, top_functions
        data = open(arg, "rb").read()
        try:
            p = parse_pprof(data, deadline=t + timeout)
        except TypeError:              # a checkout without the deadline
            p = parse_pprof(data)
        try:
            top = top_functions(p, None, n=10, deadline=t + timeout)
        except TypeError:
            top = top_functions(p, None, n=10)
        idx = p.index_of(None)
        total = sum(v[idx] for _l, v in p.samples if idx < len(v))
        out = f"parsed: {len(top)} functions, {total}"
    elif kind == "gogc":
        from bpfmem.analysis.gosplit import go_settings
        out = "GOGC " + str(go_settings({"GOGC": arg}, "go1.21.3").gogc)
    elif kind == "procs":
        # the processes' endpoints read as one `bpfmem pod` reads a pod's (each taken for a
        # Go program: they are Python processes serving hostile answers)
        import bpfmem.host.goproc as goproc
        from bpfmem.parse.gobin import GoBuildInfo
        from bpfmem.records import ProcMem
        goproc.read_go_buildinfo = lambda path: GoBuildInfo("go1.21.3", "x", None)
        procs = [ProcMem(int(x), "x", 1, 1, 1, None, None, None, 0, 1.0)
                 for x in arg.split(",")]
        got = goproc.GoProber(timeout=timeout, pprof=True).read_all(procs)
        failed = sum(1 for d in got.values() if d.top is None)
        out = (f"{len(got)} read, {failed} with no heap profile; a note: "
               + (list(got.values())[0].notes or ("none",))[-1])
except BpfmemError as e:
    out = "error: " + str(e)
except Exception as e:
    out = "TRACEBACK: " + type(e).__name__ + ": " + str(e)[:80]
print(out[:110])
"""


MAKE = r"""
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
import hostile as h
tmp = Path(sys.argv[2])
for i, (name, body) in enumerate([
        ("NaN heap", lambda: h.metrics_body(heap_inuse="NaN")),
        ("1e30 heap", lambda: h.metrics_body(heap_inuse="1e30")),
        ("16 MiB of label sets", h.label_flood),
        ("16 MiB of Go label sets", h.go_label_flood)]):
    (tmp / f"m{i}.txt").write_bytes(body())
    print(f"metrics\t{name}\t{tmp}/m{i}.txt")
for i, (name, build) in enumerate(h.PPROF_BOMBS + [("no sample type", h.no_sample_type)]):
    (tmp / f"p{i}.pb.gz").write_bytes(build())
    print(f"pprof\t{name}\t{tmp}/p{i}.pb.gz")
"""


def run(argv: list[str], cap: float, **kw) -> tuple[float, int, str]:
    """(wall seconds, peak RSS bytes, last line of its output or 'killed at CAP s') of one
    child, killed (its session) at ``cap`` seconds."""
    t = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True, **kw)
    killed = threading.Event()

    def kill():
        killed.set()
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    timer = threading.Timer(cap, kill)
    timer.start()
    try:
        out = p.stdout.read()
        _pid, status, ru = os.wait4(p.pid, 0)
    finally:
        timer.cancel()
        p.stdout.close()
    p.returncode = os.waitstatus_to_exitcode(status)
    took = time.monotonic() - t
    lines = out.decode(errors="replace").strip().splitlines()
    end = f"killed at {cap:g}s" if killed.is_set() else (lines[-1] if lines else
                                                         f"exit {p.returncode}")
    return took, ru.ru_maxrss * 1024, end


def fmt_size(n: int) -> str:
    sys.path.insert(0, str(HERE / "src"))
    from bpfmem.units import format_size
    return format_size(n)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout", type=float, default=2.0)
    ap.add_argument("--cap", type=float, default=30.0)
    ap.add_argument("--src", default=str(HERE / "src"))
    ap.add_argument("--only")
    ap.add_argument("--processes", type=int, default=16)
    a = ap.parse_args()
    curl = shutil.which("curl")
    promtool = shutil.which("promtool")
    go = shutil.which("go")
    tmp = Path(tempfile.mkdtemp(prefix="bpfmem-hostile-"))
    rows = []
    try:
        # the bodies are made in a child, so that this process stays small: a child's peak
        # RSS (wait4) counts the memory of the process it was forked from
        made = subprocess.run([sys.executable, "-c", MAKE, str(HERE / "tests"), str(tmp)],
                              check=True, capture_output=True, text=True).stdout.split("\n")
        cases = [(name, "http", behave) for name, behave in h.STALLS + h.FLOODS]
        for line in made:
            if line:
                kind, name, path = line.split("\t")
                cases.append((name, kind, path))
        cases.append(("GOGC of 401 digits", "gogc", "9" * 401))
        n = a.processes
        cases += [(f"{n} processes: dripped /metrics", "procs", "drip_metrics"),
                  (f"{n} processes: dripped heap profiles", "procs", "drip_pprof")]
        print(f"{'case':42} {'bpfmem':>16} {'peer':>16} {'ratio':>6}  bpfmem's end")
        for name, kind, what in cases:
            if a.only and a.only not in name:
                continue
            srv = h.HostileServer(what) if kind == "http" else None
            pod = None
            try:
                arg = srv.url if srv else str(what)
                if kind == "procs":
                    ready = tmp / f"ready-{what}"
                    pod = subprocess.Popen([sys.executable, str(HERE / "tests" / "hostile.py"),
                                            what, str(a.processes), str(ready)])
                    listening = h.wait_ready(str(ready), a.processes)
                    arg = ",".join(str(pid) for pid, _ in listening)
                    path = "/metrics" if what == "drip_metrics" else "/debug/pprof/heap"
                    urls = [f"http://127.0.0.1:{port}{path}" for _, port in listening]
                mine = run([sys.executable, "-c", CHILD, a.src, kind, arg, str(a.timeout)],
                           a.cap)
                peer = None
                if kind == "http" and curl:
                    peer = run([curl, "-s", "-o", "/dev/null", "--max-time", str(a.timeout),
                                arg], a.cap)
                elif kind == "metrics" and promtool:
                    peer = run([promtool, "check", "metrics"], a.cap,
                               stdin=open(arg, "rb"))
                elif kind == "procs" and curl:
                    peer = run([curl, "-s", "--parallel", "--parallel-max", str(len(urls)),
                                "--max-time", str(a.timeout)]
                               + [x for u in urls for x in ("-o", "/dev/null", u)], a.cap)
                elif kind == "pprof" and go:
                    peer = run([go, "tool", "pprof", "-top", arg], a.cap,
                               env=dict(os.environ, HOME=str(tmp), GOFLAGS="-mod=mod",
                                        GOPROXY="off", PPROF_TMPDIR=str(tmp)))
            finally:
                if srv:
                    srv.close()
                if pod:
                    pod.kill()
                    pod.wait()
            p_txt = (f"{peer[0]:6.2f}s{'!' if peer[2].startswith('killed') else ' '}"
                     f"{fmt_size(peer[1]):>8}" if peer else f"{'-':>16}")
            ratio = f"{mine[0] / peer[0]:6.2f}" if peer and peer[0] > 0 else f"{'-':>6}"
            print(f"{name:42} {mine[0]:6.2f}s {fmt_size(mine[1]):>8} {p_txt} {ratio}  "
                  f"{mine[2][:70]}", flush=True)
            rows.append((name, mine))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    worst_t = max(rows, key=lambda r: r[1][0])
    worst_m = max(rows, key=lambda r: r[1][1])
    print("(! : the peer was killed at the cap)")
    print(f"slowest: {worst_t[0]} {worst_t[1][0]:.2f}s; largest: {worst_m[0]} "
          f"{fmt_size(worst_m[1][1])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
