#!/usr/bin/env python3
"""Benchmark: one sample of `bpfmem pod --trace` on a pod of many Go processes, against
reading the same things with public tools.

Starts N copies of tests/go/memdemo (built here with Debian's golang-go, offline) in one
scratch memory cgroup (each serves /metrics on loopback; all killed and the cgroup removed at
the end, also on Ctrl-C), then in the same run times:
  - peer: `cat` of every process's /proc/PID/smaps_rollup and `curl` of every /metrics
          (what a shell script watching the pod would read), one run each
  - bpfmem, the trace's reading (PodSampler with the trace's detail budget: every process's
          counters and smaps_rollup, their smaps by class, page owners and endpoints in
          turns), median of --samples readings after a warm-up
  - bpfmem, every process in full each time (no budget: a one-time `bpfmem pod` reading)
and prints the medians and their ratios against the peer. Goal (issue 32): a trace sample
under a second for 200 processes, whatever the peer takes.

usage: sudo python bench/pod_trace.py [--processes 200] [--samples 10]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "src"))

from bpfmem.host.cgroup import read_subtree_procs  # noqa: E402
from bpfmem.host.goproc import GoProber  # noqa: E402
from bpfmem.host.listeners import read_listeners  # noqa: E402
from bpfmem.host.podscan import PodSampler, launched  # noqa: E402
from bpfmem.host.trace import detail_budget  # noqa: E402


def build(tmp: Path) -> Path:
    go = shutil.which("go")
    if go is None:
        sys.exit("needs Debian's golang-go")
    env = os.environ | {"GO111MODULE": "off", "GOPROXY": "off", "GOFLAGS": "",
                        "GOPATH": str(tmp / "gopath"), "GOCACHE": str(tmp / "gocache"),
                        "CGO_ENABLED": "0", "HOME": str(tmp)}
    out = tmp / "memdemo"
    subprocess.run([go, "build", "-o", str(out), "."], cwd=HERE / "tests" / "go" / "memdemo",
                   env=env, check=True)
    return out


def peer(pids: list[int]) -> float:
    urls = []
    for pid in pids:
        try:
            urls += [f"http://127.0.0.1:{x.port}/metrics" for x in read_listeners(pid)]
        except OSError:
            pass
    t = time.perf_counter()
    subprocess.run(["cat"] + [f"/proc/{p}/smaps_rollup" for p in pids],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if urls:
        subprocess.run(["curl", "-s", "-o", "/dev/null", "--max-time", "2"] + urls,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=200)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--interval", type=float, default=0.1)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(Path(tmp))
        cmd = ["sh", "-c", f"for i in $(seq {a.processes}); do {exe} & done; wait"]
        with launched(cmd, limit=8 << 30, stdout=subprocess.DEVNULL) as job:
            fs = job.cgroup.fs_path
            while len(read_subtree_procs(fs)) < a.processes + 1:
                time.sleep(0.1)
            time.sleep(2)
            pids = [p for p in read_subtree_procs(fs) if p != job.pid]
            peer_s = peer(pids)
            prober = GoProber()
            trace = PodSampler(fs, go=prober, budget=lambda n: detail_budget(a.interval, n))
            for _ in range(3):
                trace.sample()
            times = []
            for _ in range(a.samples):
                t = time.perf_counter()
                trace.sample()
                times.append(time.perf_counter() - t)
                time.sleep(a.interval)
            prober.close()
            full = PodSampler(fs, go=GoProber())
            full_times = []
            for _ in range(3):
                t = time.perf_counter()
                full.sample()
                full_times.append(time.perf_counter() - t)
    med, fmed = statistics.median(times), statistics.median(full_times)
    print(f"{a.processes} Go processes")
    print(f"  peer (cat smaps_rollup + curl /metrics, all): {peer_s:.3f} s")
    print(f"  bpfmem trace sample (budget {detail_budget(a.interval, a.processes):.2f} s): "
          f"median {med:.3f} s, max {max(times):.3f} s  = {med / peer_s:.2f}x the peer")
    print(f"  bpfmem every process in full:               median {fmed:.3f} s"
          f"  = {fmed / peer_s:.2f}x the peer")
    print(f"  goal: a trace sample under 1 s: {'met' if max(times) < 1.0 else 'NOT met'}")


if __name__ == "__main__":
    main()
