#!/usr/bin/env python3
"""Benchmark: `bpfmem export` for a long while on a node of many maps with churn.

Creates 10,000 maps held by 100 processes (tests/mapfarm.py) and one more process that keeps
creating and closing maps (--churn maps a second, each living --churn-life seconds), starts
`bpfmem export --entries --interval 2s`, scrapes it every --scrape-every seconds (as
Prometheus does: its Accept header and gzip; --plain: without gzip) for
--minutes, and prints, at the start, every --report-every minutes and at the end:
  - the exporter's RSS (VmRSS) and its peak (VmHWM),
  - the scrape latency (median and max over the last period),
  - the scan durations the exporter reports (bpfmem_scan_duration_seconds): the first scan,
    a full one, against the incremental ones after it (their ratio is the idle-scan saving),
  - how many maps the page had.
Every process and map it made is removed at the end, also on Ctrl-C and SIGTERM.

usage: sudo python3 bench/export_soak.py [--minutes 30] [--processes 100] [--maps 100]
"""

from __future__ import annotations

import argparse
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


def churn(rate: float, life: float) -> int:
    """A child that creates ``rate`` maps a second and closes each after ``life`` seconds."""
    pid = os.fork()
    if pid:
        return pid
    code = 0
    try:
        from bpfmem.host import bpfsys
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        live: list[tuple[float, int]] = []
        n = 0
        while True:
            now = time.monotonic()
            while live and live[0][0] <= now:
                os.close(live.pop(0)[1])
            fd = bpfsys.map_create(1, 8, 16, 64, 1 if n % 2 else 0, f"churn{n % 100000}")
            live.append((now + life, fd))
            n += 1
            time.sleep(1 / rate)
    except BaseException:  # noqa: BLE001 - a bench child: exit quietly
        code = 1
    finally:
        os._exit(code)


def vm(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MiB."""
    with open(f"/proc/{pid}/status") as f:
        text = f.read()
    rss = int(re.search(r"VmRSS:\s+(\d+)", text).group(1)) / 1024
    hwm = int(re.search(r"VmHWM:\s+(\d+)", text).group(1)) / 1024
    return rss, hwm


def metric(body: bytes, name: str) -> float | None:
    m = re.search(rb"^" + name.encode() + rb" (\S+)$", body, re.M)
    return float(m.group(1)) if m else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--processes", type=int, default=100)
    ap.add_argument("--maps", type=int, default=100, help="maps per process")
    ap.add_argument("--churn", type=float, default=5, help="maps created a second")
    ap.add_argument("--churn-life", type=float, default=20, help="seconds each churn map lives")
    ap.add_argument("--scrape-every", type=float, default=2)
    ap.add_argument("--report-every", type=float, default=5, help="minutes")
    ap.add_argument("--plain", action="store_true",
                    help="scrape without gzip (curl's way; the exporter inflates the page "
                         "for such clients) instead of as Prometheus does")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench/export_soak.py needs root (it creates maps and reads every process)",
              file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/metrics"
    churner = exporter = None
    with MapFarm(uniform_plans(args.processes, args.maps, prefix="soak")) as farm:
        try:
            churner = churn(args.churn, args.churn_life)
            exporter = subprocess.Popen(
                [sys.executable, "-m", "bpfmem", "export", "--listen", f"127.0.0.1:{port}",
                 "--interval", "2s", "--entries"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
            if "serving" not in exporter.stderr.readline():
                raise SystemExit("bpfmem export did not start")
            first_scan = None
            t_start = time.monotonic()
            end = t_start + args.minutes * 60
            next_report = t_start
            lat: list[float] = []
            scans: list[float] = []
            last_scans = None
            print(f"{len(farm.maps):,} farm maps, churn {args.churn:g} maps/s living "
                  f"{args.churn_life:g} s; {args.minutes:g} min; scraped "
                  f"{'without gzip' if args.plain else 'as Prometheus does (gzip)'}",
                  flush=True)
            print("  minute   RSS MiB  peak MiB  scrape p50 ms  max ms  scan s (incremental)"
                  "  maps", flush=True)
            while True:
                took, body = scrape(url, args.plain)
                lat.append(took)
                dur, total = (metric(body, "bpfmem_scan_duration_seconds"),
                              metric(body, "bpfmem_scans_total"))
                if first_scan is None:
                    first_scan = dur
                elif total != last_scans and dur is not None:
                    scans.append(dur)
                last_scans = total
                now = time.monotonic()
                if now >= next_report or now >= end:
                    rss, hwm = vm(exporter.pid)
                    maps = metric(body, "bpfmem_node_maps")
                    inc = statistics.median(scans) if scans else float("nan")
                    print(f"  {(now - t_start) / 60:6.1f}  {rss:8.1f}  {hwm:8.1f}  "
                          f"{statistics.median(lat) * 1000:13.0f}  {max(lat) * 1000:6.0f}  "
                          f"{inc:8.3f}            {maps:,.0f}", flush=True)
                    lat, scans = [], []
                    next_report = now + args.report_every * 60
                if now >= end:
                    break
                time.sleep(max(0.0, args.scrape_every - took))
            print(f"first (full) scan {first_scan:.3f} s; the exporter reads what it keeps "
                  f"on trust again at least every --recheck (15m)", flush=True)
        finally:
            for p in (exporter.pid if exporter else None, churner):
                if p:
                    try:
                        os.kill(p, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
            if exporter:
                try:
                    exporter.wait(15)
                except subprocess.TimeoutExpired:
                    exporter.kill()
                    exporter.wait()
            if churner:
                try:
                    os.waitpid(churner, 0)
                except ChildProcessError:
                    pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
