#!/usr/bin/env python3
"""Benchmark: the program walk of `bpfmem snapshot` against `bpftool -j prog show`.

Loads 1,000 programs held by 10 processes (tests/progfarm.py: forked children, killed and
reaped at the end, also on Ctrl-C), then in the same run times
  - bpftool -j prog show          (ids, info, memlock; no owners)
  - bpfmem snapshot               (maps and programs, with owners, links, pins, BTF, JIT)
  - bpfmem snapshot --no-programs (the maps alone: what the programs add)
(interleaved, run by run) and prints medians and the ratios to bpftool, and checks that every
farm program was found with its owner. bpfmem's figure includes Python's start (~0.3 s).

usage: sudo python bench/progs.py [--processes 10] [--programs 100] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

from progfarm import ProgFarm  # noqa: E402
from _child import stop  # noqa: E402 (bench/_child.py)


def timed(cmds: list[list[str]], runs: int) -> tuple[list[float], list[str]]:
    """Median seconds of each command, the commands interleaved run by run (a busy host
    slows them alike), and each one's last output."""
    times: list[list[float]] = [[] for _ in cmds]
    outs = [""] * len(cmds)
    for _ in range(runs):
        for i, cmd in enumerate(cmds):
            t = time.monotonic()
            outs[i] = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            times[i].append(time.monotonic() - t)
    return [statistics.median(t) for t in times], outs


def exporter(extra: list[str], seconds: float) -> tuple[float, float, float, int]:
    """(RSS MiB after the first scrape, RSS MiB at the end, median scan seconds, samples of
    bpfmem_prog_memlock_bytes on the last page) of `bpfmem export EXTRA`."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen([sys.executable, "-m", "bpfmem", "export", "--listen",
                          f"127.0.0.1:{port}", "--interval", "1s", *extra],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        if "serving" not in p.stderr.readline():
            raise SystemExit("bpfmem export did not start")

        def rss() -> float:
            with open(f"/proc/{p.pid}/status") as f:
                return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024

        def page() -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
                return r.read().decode()
        body = page()
        first, scans, end = rss(), [], time.monotonic() + seconds
        while time.monotonic() < end:
            body = page()
            d = re.search(r"^bpfmem_scan_duration_seconds (\S+)$", body, re.M)
            scans.append(float(d.group(1)))
            time.sleep(0.2)
        progs = len(re.findall(r"^bpfmem_prog_memlock_bytes\{", body, re.M))
        return first, rss(), statistics.median(scans) if scans else math.nan, progs
    finally:
        stop(p)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--processes", type=int, default=10)
    ap.add_argument("--programs", type=int, default=100)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--export-seconds", type=float, default=10)
    args = ap.parse_args()
    env_py = [sys.executable, "-m", "bpfmem"]
    with ProgFarm(args.processes, args.programs) as farm:
        (tool, snap, maps_only), (_t, out, _m) = timed(
            [["bpftool", "-j", "prog", "show"], env_py + ["snapshot"],
             env_py + ["snapshot", "--no-programs"]], args.runs)
        doc = json.loads(out)
        found = sum(1 for pid, ids in farm.children for i in ids
                    if doc["programs"].get(str(i), {}).get("owners") == [{"pid": pid}])
        with_p = exporter([], args.export_seconds)
        without = exporter(["--no-programs"], args.export_seconds)
    want = args.processes * args.programs
    print(f"{want} programs in {args.processes} processes, median of {args.runs}:")
    print(f"  bpftool -j prog show        {tool:.3f} s")
    print(f"  bpfmem snapshot             {snap:.3f} s  ({snap / tool:.2f}x bpftool)")
    print(f"  bpfmem snapshot --no-programs {maps_only:.3f} s  (programs add "
          f"{snap - maps_only:.3f} s)")
    print(f"  found with their owner: {found}/{want}")
    for label, (first, last, scan, n) in (("with programs", with_p),
                                          ("--no-programs", without)):
        print(f"  bpfmem export {label}: RSS {first:.1f} MiB after the first scrape, "
              f"{last:.1f} MiB at the end; scan median {scan * 1000:.0f} ms; "
              f"{n} program samples")
    return 0 if found == want else 1


if __name__ == "__main__":
    sys.exit(main())
