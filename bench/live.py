#!/usr/bin/env python3
"""Benchmark: `bpfmem snapshot` against `bpftool -j map show` on a node with many maps.

Creates 10,000 maps held by 100 processes (tests/mapfarm.py: forked children; removed at the
end, also on Ctrl-C), then in the same run times, as a user would run them:
  - bpftool -j map show              (Debian's bpftool: ids, info, memlock; no owners)
  - bpfmem snapshot                  (the same, plus owners, cgroups, pins, programs, model)
  - bpfmem snapshot --no-owners      (no process walk: the same work bpftool does)
  - bpfmem snapshot --owners-from iterator  (owners from the kernel's task_file iterator)
  - bpfmem snapshot --owners-from proc      (owners from the /proc walk, in a forked child
                                             beside the map walk where there are 2+ CPUs)
(the default, auto, is that /proc walk on more than one CPU, and the iterator on one CPU and
in the exporter)
and prints medians, the ratios and bpfmem's peak RSS; then runs `bpfmem export` against the
same maps, scrapes it for a while as Prometheus does (gzip) and prints its steady RSS.
Goals (issue 6): snapshot no slower than bpftool (ratio <= 1.0), peak RSS < 80 MiB,
exporter steady RSS <= 40 MiB (issue 17), and the exporter's incremental scans against its
first, full one.

usage: sudo python bench/live.py [--processes 100] [--maps 100] [--runs 7]
"""

from __future__ import annotations

import argparse
import math
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from mapfarm import MapFarm, uniform_plans  # noqa: E402
from scrape import scrape  # noqa: E402 (bench/scrape.py)

ENV = dict(os.environ, PYTHONPATH=str(ROOT / "src"))


def run_child(argv: list[str]) -> tuple[float, int]:
    """(wall seconds, peak RSS KiB) of one child process, output discarded."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} failed")
    return wall, ru.ru_maxrss


def median_of(argv: list[str], runs: int) -> tuple[float, int]:
    results = [run_child(argv) for _ in range(runs)]
    return statistics.median(w for w, _ in results), max(r for _, r in results)


def exporter_rss(seconds: float) -> tuple[float, float, int, float, float]:
    """(RSS MiB after the first scrape, RSS MiB at the end, scrapes, first scan seconds,
    median later scan seconds) of `bpfmem export`."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen([sys.executable, "-m", "bpfmem", "export", "--listen",
                          f"127.0.0.1:{port}", "--interval", "2s", "--entries"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        if "serving" not in p.stderr.readline():
            raise SystemExit("bpfmem export did not start")
        url = f"http://127.0.0.1:{port}/metrics"

        def rss() -> float:
            with open(f"/proc/{p.pid}/status") as f:
                return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024

        def scan_seconds(body: bytes) -> tuple[float, float]:
            d = re.search(rb"^bpfmem_scan_duration_seconds (\S+)$", body, re.M)
            n = re.search(rb"^bpfmem_scans_total (\S+)$", body, re.M)
            return float(d.group(1)), float(n.group(1))

        first_scan, scans_seen = scan_seconds(scrape(url, timeout=60)[1])
        first, n, later = rss(), 1, []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            took, total = scan_seconds(scrape(url, timeout=60)[1])
            if total != scans_seen:
                later.append(took)
                scans_seen = total
            n += 1
            time.sleep(0.2)
        return first, rss(), n, first_scan, statistics.median(later) if later else math.nan
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=100)
    ap.add_argument("--maps", type=int, default=100, help="maps per process")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--export-seconds", type=float, default=20)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench/live.py needs root (it creates maps and reads every process)",
              file=sys.stderr)
        return 1
    t0 = time.perf_counter()
    with MapFarm(uniform_plans(args.processes, args.maps, prefix="bl")) as farm:
        n = len(farm.maps)
        print(f"{n:,} maps held by {args.processes} processes "
              f"(created in {time.perf_counter() - t0:.1f} s); median of {args.runs} runs")
        bpfmem = [sys.executable, "-m", "bpfmem", "snapshot"]
        run_child(["bpftool", "-j", "map", "show"])  # warm caches for both
        run_child(bpfmem)
        bt, bt_rss = median_of(["bpftool", "-j", "map", "show"], args.runs)
        bm, bm_rss = median_of(bpfmem, args.runs)
        bn, bn_rss = median_of(bpfmem + ["--no-owners"], args.runs)
        bi, bi_rss = median_of(bpfmem + ["--owners-from", "iterator"], args.runs)
        bp, bp_rss = median_of(bpfmem + ["--owners-from", "proc"], args.runs)
        start, _ = median_of([sys.executable, "-m", "bpfmem", "--version"], args.runs)
        print(f"  bpftool -j map show          {bt * 1000:7.0f} ms   RSS {bt_rss / 1024:5.1f} MiB")
        print(f"  bpfmem snapshot              {bm * 1000:7.0f} ms   RSS {bm_rss / 1024:5.1f} MiB"
              f"   ratio {bm / bt:.2f}")
        print(f"  bpfmem snapshot --no-owners  {bn * 1000:7.0f} ms   RSS {bn_rss / 1024:5.1f} MiB"
              f"   ratio {bn / bt:.2f}")
        print(f"  bpfmem snapshot --owners-from iterator  {bi * 1000:7.0f} ms   RSS "
              f"{bi_rss / 1024:5.1f} MiB   ratio {bi / bt:.2f}")
        print(f"  bpfmem snapshot --owners-from proc      {bp * 1000:7.0f} ms   RSS "
              f"{bp_rss / 1024:5.1f} MiB   ratio {bp / bt:.2f}")
        print(f"  (the default, auto, walks /proc in a forked child beside the map walk on "
              f"{os.cpu_count()} CPUs; the iterator on one CPU and in the exporter)")
        print(f"  (bpfmem --version: {start * 1000:.0f} ms of interpreter start and CLI import "
              f"in every bpfmem figure)")
        first, last, scrapes, full, inc = exporter_rss(args.export_seconds)
        print(f"  bpfmem export: RSS {first:.1f} MiB after the first scrape, {last:.1f} MiB "
              f"after {scrapes} scrapes over {args.export_seconds:.0f} s")
        print(f"  bpfmem export scans: first (full) {full * 1000:.0f} ms, incremental median "
              f"{inc * 1000:.0f} ms, ratio {inc / full:.2f}")
        goals = [("snapshot ratio <= 1.0", bm / bt <= 1.0),
                 ("snapshot peak RSS < 80 MiB", bm_rss / 1024 < 80),
                 ("exporter steady RSS <= 40 MiB", last <= 40)]
        print("goals: " + ", ".join(f"{g}: {'met' if ok else 'NOT met'}" for g, ok in goals))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
