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
(the default, auto, is the iterator wherever it can run)
and prints medians, the ratios (the commands run in turn, run by run: the median of each
run's ratio) and bpfmem's peak RSS; then runs `bpfmem export` against the
same maps, scrapes it for a while as Prometheus does (gzip) and prints its steady RSS.
and the exporter's CPU per scan (user + system of its process over several intervals, one
scrape per interval, divided by the scans it made: 30 by default, with the slices of maps
that come due for checking again among them, as in the exporter's own average), on an
unchanged node (at a scan a second, and with the share of checks a scan carries at the
default --interval 15s and --recheck 15m: a sixtieth of the maps) and on a node where
1% of the maps change per interval (half of them closed and made anew by this process, half
of the farm's hash maps given an entry more or less), against the CPU of one
`bpftool -j map show` listing, measured in the same run; and `snapshot` against bpftool
again with two busy loops running beside them (a loaded node). With --programs (default
1,000: tests/progfarm.py) the node also has programs, which the exporter lists.
Goals: snapshot ratio <= 1.5 quiet and busy; exporter CPU per scan <= 0.1x bpftool's listing
unchanged, <= 0.3x at 1% churn; snapshot peak RSS < 80 MiB; exporter RSS <= 40 MiB.
Measured (2 CPUs, load 0.2, --runs 7, before and after issue 31's snapshot work one after the
other, ``--src`` the one before): bpftool 105 / 103 ms; snapshot 204 -> 165 ms (ratio
1.95 -> 1.59), --no-owners 1.68 -> 1.33, beside two busy loops 1.43 -> 1.53 (that ratio
moved between 0.97 and 1.96 from run to run before); exporter CPU per scan unchanged
0.21 -> 0.19x, at 1% churn 0.32 -> 0.26x; exporter RSS 38.7 -> 38.5 MiB. (The snapshot
RSS of that run, 28.6 -> 28.4 MiB, was the bench's own: see bench/_child.peak_rss_kib.)
Interpreter start and CLI import (--version) took 42-45 ms of each.
At the end of issue 31's session (load 2.0, --runs 7): bpftool 101 ms, 2.1 MiB; snapshot
154 ms (1.53), 27.0 MiB; --no-owners 1.37; beside two busy loops 1.60; exporter CPU per scan
over 30 scans (one full rescan among them) 18 ms unchanged (0.18x), 28 ms at 1% churn
(0.27x); exporter RSS 38.5 / 37.8 MiB. An unchanged scan alone is 7-14 ms in the exporter
(its kernel iterators about 7 ms of that, the map listing 5 ms: the 10,000 maps' structs are
cold after a second's sleep, 3.4 ms back to back); the full rescan 108-120 ms.
(Those figures ran bpfmem with an interpreter whose site-packages imported certifi at every
start, some 20 ms: the benches now run it from the checkout's venv, bench/_child.py.)
After the rolling checks (--recheck) took the full rescan's place and the exporter's loop
stopped waking between scrapes (load 0.5, --runs 11): bpftool 90 ms, CPU 90 ms, 2.2 MiB;
snapshot 130 ms (1.44), 26.2 MiB; --no-owners 1.29; beside two busy loops 1.50; exporter
CPU per scan over 30 scans at a scan a second 9 ms unchanged (0.10x; the kernel's own walk
of the 10,000 maps is some 5 ms of it, the program and task walks 2 ms more), 12 ms with the
checks a scan carries at the default interval (0.13x), 21 ms at 1% churn (0.23x); RSS
35.9 / 36.1 MiB.
On another machine of this kind (a shared VM whose speed drifted by half within minutes:
bpftool's listing 115 to 204 ms of CPU in one hour), after the checks' default went to
--recheck 15m, the program listing to a light one and the ratios to run-by-run medians
(two runs, --runs 11): bpftool 156-202 ms; snapshot 1.42 / 1.43 quiet, 1.38 / 1.11 beside
two busy loops, its CPU 1.44 / 1.50x bpftool's (the wall-time ratio where no CPU is
spare); exporter CPU per scan 9.7 / 10.3 ms unchanged (0.053 / 0.070x), 10.7 / 12.3 ms with
the default interval's checks (0.062 / 0.065x), 30 ms at 1% churn (0.15 / 0.14x); RSS
36.1 MiB.

Every bpfmem child runs from byte-compiled modules (compiled once into a temporary cache, as
an installed package runs), whatever PYTHONDONTWRITEBYTECODE says. ``--src OTHER/src``
measures another checkout's bpfmem with this checkout's farms (the one before a change).

usage: sudo python bench/live.py [--processes 100] [--maps 100] [--runs 7] [--programs 1000]
                                 [--src DIR]
"""

from __future__ import annotations

import argparse
import math
import os
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from mapfarm import MapFarm, uniform_plans  # noqa: E402
from progfarm import ProgFarm  # noqa: E402
from scrape import scrape  # noqa: E402 (bench/scrape.py)
from _child import bpfmem_python, peak_rss_kib, stop  # noqa: E402 (bench/_child.py)

ENV = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
PY = bpfmem_python()     # the interpreter bpfmem runs with (bench/_child.py)
DEFAULT_INTERVAL, DEFAULT_RECHECK = 15.0, 900.0     # bpfmem export's defaults, seconds


def bytecode_env(src: str, cache_dir: str) -> None:
    """Run bpfmem from ``src`` as an installed package runs: from byte-compiled modules
    (written once into ``cache_dir``, a directory this script made and removes), not compiled
    again at every start because the caller's environment says PYTHONDONTWRITEBYTECODE."""
    import compileall
    ENV.pop("PYTHONDONTWRITEBYTECODE", None)
    ENV.update(PYTHONPATH=src, PYTHONPYCACHEPREFIX=cache_dir)
    subprocess.run([PY, "-m", "compileall", "-q", src], env=ENV, check=True,
                   stdout=subprocess.DEVNULL)
    del compileall


def _node_maps() -> int:
    """Every map on the node (another's maps beside the farm's are listed too)."""
    from bpfmem.host import bpfsys
    return sum(1 for _ in bpfsys.map_ids())


def run_child(argv: list[str]) -> tuple[float, int]:
    """(wall seconds, peak RSS KiB) of one child process, output discarded."""
    wall, rss, _cpu = run_child_cpu(argv)
    return wall, rss


def run_child_cpu(argv: list[str]) -> tuple[float, int, float]:
    """(wall seconds, peak RSS KiB, CPU seconds: user + system) of one child process."""
    import tempfile
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=ENV)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise SystemExit(f"{argv} failed: {err.read().decode(errors='replace')[-2000:]}")
    return wall, ru.ru_maxrss, ru.ru_utime + ru.ru_stime


class BusyLoops:
    """Two processes spinning beside the measured ones (a loaded node); killed by pid."""

    def __init__(self, n: int = 2):
        self.n, self.procs = n, []

    def __enter__(self):
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                      for _ in range(self.n)]
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


def interleaved(cmds: list[list[str]], runs: int) -> tuple[list[float], list[float]]:
    """(median wall seconds of each command, median of each command's run-by-run ratio to
    the first's), the commands run in turn run by run: a host whose speed drifts (a busy
    or shared one) slows a run's commands alike, and the run-by-run ratio cancels the drift
    that a ratio of medians keeps."""
    walls: list[list[float]] = [[] for _ in cmds]
    for _ in range(runs):
        for i, c in enumerate(cmds):
            walls[i].append(run_child(c)[0])
    return ([statistics.median(w) for w in walls],
            [statistics.median(a / b for a, b in zip(w, walls[0])) for w in walls])


def bpftool_cpu(runs: int) -> float:
    """Median CPU seconds of ``runs`` `bpftool -j map show` listings."""
    return statistics.median(run_child_cpu(["bpftool", "-j", "map", "show"])[2]
                             for _ in range(runs))


class Churn:
    """1% of the node's maps changing per call: half closed and made anew by this process,
    half of the farm's hash maps given an entry more (or one less)."""

    def __init__(self, farm_ids: list[int], total: int):
        from bpfmem.host import bpfsys
        self.bpfsys = bpfsys
        n = max(2, total // 100)
        self.mine: list[int] = []
        self.made = 0
        self.remake = n // 2
        self.hashes = farm_ids[:n - self.remake]
        self.flip = 0
        for _ in range(self.remake):
            self._make()

    def _make(self) -> None:
        self.made += 1
        self.mine.append(self.bpfsys.map_create(1, 4, 8, 64, 0, f"churn{self.made}"[:15]))

    def __call__(self) -> None:
        import struct
        for _ in range(self.remake):
            os.close(self.mine.pop(0))
            self._make()
        self.flip ^= 1
        for mid in self.hashes:
            try:
                fd = self.bpfsys.map_fd_by_id(mid, 0)
            except Exception:   # noqa: BLE001 - a farm map gone: nothing to change
                continue
            try:
                key = struct.pack("<I", 1000)
                if self.flip:
                    self.bpfsys.map_update(fd, key, bytes(8))
                else:
                    self.bpfsys.map_delete(fd, key)
            finally:
                os.close(fd)

    def close(self) -> None:
        while self.mine:
            os.close(self.mine.pop())


def _ticks(pid: int) -> float:
    """CPU seconds (user + system) of a process so far."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        rest = f.read().rsplit(b")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def exporter_cpu(scans: int, interval: float, churn=None, entries: bool = False,
                 recheck: float | None = None) -> tuple[float, float, int]:
    """(CPU seconds per scan, RSS MiB at the end, scans) of `bpfmem export` scraped once per
    ``interval`` (each scrape makes one scan), ``churn()`` called before each; ``recheck``:
    its --recheck (seconds)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [PY, "-m", "bpfmem", "export", "--listen", f"127.0.0.1:{port}",
            "--interval", f"{interval}s"] + (["--entries"] if entries else []) + (
            ["--recheck", f"{recheck}s"] if recheck else [])
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env=ENV)
    try:
        if "serving" not in p.stderr.readline():
            raise SystemExit("bpfmem export did not start")
        url = f"http://127.0.0.1:{port}/metrics"

        def total(body: bytes) -> float:
            return float(re.search(rb"^bpfmem_scans_total (\S+)$", body, re.M).group(1))

        for _ in range(2):                      # warm: the first incremental scans
            time.sleep(interval + 0.05)
            if churn is not None:
                churn()
            scrape(url, timeout=120)
        time.sleep(interval + 0.05)
        n0, c0 = total(scrape(url, timeout=120)[1]), _ticks(p.pid)
        for _ in range(scans):
            if churn is not None:
                churn()
            time.sleep(interval + 0.05)
            n1 = total(scrape(url, timeout=120)[1])
        c1 = _ticks(p.pid)
        with open(f"/proc/{p.pid}/status") as f:
            rss = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024
        return (c1 - c0) / max(1, n1 - n0), rss, int(n1 - n0)
    finally:
        stop(p)


def exporter_rss(seconds: float) -> tuple[float, float, int, float, float]:
    """(RSS MiB after the first scrape, RSS MiB at the end, scrapes, first scan seconds,
    median later scan seconds) of `bpfmem export`."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen([PY, "-m", "bpfmem", "export", "--listen",
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
        stop(p)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=100)
    ap.add_argument("--maps", type=int, default=100, help="maps per process")
    ap.add_argument("--programs", type=int, default=1000,
                    help="programs loaded beside the maps (10 processes; 0: none)")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--export-seconds", type=float, default=20)
    ap.add_argument("--scans", type=int, default=30,
                    help="exporter scans measured per case (default 30: at a scan a second "
                         "two of the 64 slices of the maps come due for checking in them, "
                         "the share of the default --recheck 15m)")
    ap.add_argument("--interval", type=float, default=1.0, help="exporter interval, seconds")
    ap.add_argument("--src", default=str(ROOT / "src"),
                    help="the bpfmem sources to measure (another checkout's src: the one "
                         "before a change), with this checkout's farms")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench/live.py needs root (it creates maps and reads every process)",
              file=sys.stderr)
        return 1
    import shutil
    import tempfile
    cache_dir = tempfile.mkdtemp(prefix="bpfmem-bench-pyc-")
    try:
        bytecode_env(os.path.abspath(args.src), cache_dir)
        return _measure(args)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)


def _measure(args) -> int:
    t0 = time.perf_counter()
    plans = uniform_plans(args.processes, args.maps, prefix="bl")
    per_child = 100 if args.programs >= 100 else max(args.programs, 1)
    with MapFarm(plans) as farm, ProgFarm(args.programs // per_child if args.programs else 0,
                                          per_child) as pfarm:
        n = len(farm.maps)
        print(f"{n:,} maps held by {args.processes} processes, "
              f"{sum(len(ids) for _pid, ids in pfarm.children):,} programs "
              f"(created in {time.perf_counter() - t0:.1f} s); median of {args.runs} runs; "
              f"load average {os.getloadavg()[0]:.2f}; {_node_maps():,} maps on the node; "
              f"bpfmem from {ENV['PYTHONPATH']} (byte-compiled), run by {PY}")
        bpftool = ["bpftool", "-j", "map", "show"]
        bpfmem = [PY, "-m", "bpfmem", "snapshot"]
        run_child(bpftool)  # warm caches for both
        run_child(bpfmem)
        # the commands in turn run by run: the ratios are the medians of each run's (a
        # shared host's speed drifts by half within minutes: seen here, bpftool 115 to
        # 204 ms in one hour; a ratio of medians taken one command after the other keeps it)
        cases = [bpftool, bpfmem, bpfmem + ["--no-owners"], bpfmem + ["--owners-from", "iterator"],
                 bpfmem + ["--owners-from", "proc"], [PY, "-m", "bpfmem", "--version"]]
        (bt, bm, bn, bi, bp, start), (_one, rm, rn, ri, rp, _rv) = interleaved(cases, args.runs)
        bt_rss, bm_rss, bn_rss, bi_rss, bp_rss = (peak_rss_kib(c, env=ENV) for c in cases[:5])
        bt_cpu = bpftool_cpu(args.runs)
        pairs = [(run_child_cpu(bpftool)[2], run_child_cpu(bpfmem)[2]) for _ in range(args.runs)]
        cpu_ratio = statistics.median(m / t for t, m in pairs)
        with BusyLoops(2):
            (bt_busy, bm_busy, bi_busy), (_one, rm_busy, ri_busy) = interleaved(
                [bpftool, bpfmem, bpfmem + ["--owners-from", "iterator"]], args.runs)
        print(f"  bpftool -j map show          {bt * 1000:7.0f} ms   RSS {bt_rss / 1024:5.1f} MiB"
              f"   CPU {bt_cpu * 1000:.0f} ms (bpfmem snapshot's CPU, run by run: {cpu_ratio:.2f}x: "
              f"what the wall-time ratio tends to where no CPU is spare)")
        print("  (ratio: the median of run-by-run ratios to bpftool; beside it the ratio of "
              "the medians)")
        print(f"  bpfmem snapshot              {bm * 1000:7.0f} ms   RSS {bm_rss / 1024:5.1f} MiB"
              f"   ratio {rm:.2f} ({bm / bt:.2f})")
        print(f"  bpfmem snapshot --no-owners  {bn * 1000:7.0f} ms   RSS {bn_rss / 1024:5.1f} MiB"
              f"   ratio {rn:.2f} ({bn / bt:.2f})")
        print(f"  bpfmem snapshot --owners-from iterator  {bi * 1000:7.0f} ms   RSS "
              f"{bi_rss / 1024:5.1f} MiB   ratio {ri:.2f} ({bi / bt:.2f})")
        print(f"  bpfmem snapshot --owners-from proc      {bp * 1000:7.0f} ms   RSS "
              f"{bp_rss / 1024:5.1f} MiB   ratio {rp:.2f} ({bp / bt:.2f})")
        print("  (the default, auto, is the kernel iterator wherever it runs; proc walks /proc "
              "in a child process beside the map listing)")
        print(f"  with two busy loops beside: bpftool {bt_busy * 1000:.0f} ms, bpfmem snapshot "
              f"{bm_busy * 1000:.0f} ms (ratio of medians {bm_busy / bt_busy:.2f}, median of "
              f"run-by-run ratios {rm_busy:.2f}), --owners-from iterator "
              f"{bi_busy * 1000:.0f} ms ({bi_busy / bt_busy:.2f}, {ri_busy:.2f})")
        print(f"  (bpfmem --version: {start * 1000:.0f} ms of interpreter start and CLI import "
              f"in every bpfmem figure)")
        # each exporter case against bpftool's CPU measured just before and after it (a
        # shared host's speed drifts over the minutes the cases take)
        around = [bpftool_cpu(5)]
        idle, idle_rss, idle_n = exporter_cpu(args.scans, args.interval)
        around.append(bpftool_cpu(5))
        # the share of checking a scan carries at the default --interval (15 s) and
        # --recheck (15 m): a sixtieth of the maps; at --interval 1s, --recheck 60s
        share = DEFAULT_RECHECK / DEFAULT_INTERVAL
        idle15, _rss15, idle15_n = exporter_cpu(args.scans, args.interval,
                                                recheck=share * args.interval)
        around.append(bpftool_cpu(5))
        hashes = [m.id for c, row in zip(farm.children, plans) for m, plan in zip(c.maps, row)
                  if plan.type == 1 and plan.key_size == 4 and plan.value_size == 8]
        churn = Churn(hashes, n)
        try:
            busy, busy_rss, busy_n = exporter_cpu(args.scans, args.interval, churn)
        finally:
            churn.close()
        around.append(bpftool_cpu(5))
        bt_idle, bt_idle15, bt_churn = ((a + b) / 2 for a, b in zip(around, around[1:]))
        print(f"  bpftool -j map show CPU around the exporter cases: "
              f"{', '.join(f'{a * 1000:.0f}' for a in around)} ms")
        print(f"  bpfmem export, CPU per scan (one scrape per {args.interval:g}s interval): "
              f"unchanged node {idle * 1000:.1f} ms over {idle_n} scans "
              f"(ratio to bpftool's listing {idle / bt_idle:.3f}), "
              f"1% of maps changing {busy * 1000:.0f} ms over {busy_n} scans "
              f"(ratio {busy / bt_churn:.3f}); RSS {idle_rss:.1f} / {busy_rss:.1f} MiB")
        print(f"  bpfmem export, unchanged node, with the share of checks a scan carries at the "
              f"default --interval {DEFAULT_INTERVAL:g}s and --recheck {DEFAULT_RECHECK:g}s "
              f"(1/{share:g} of the maps a scan: --recheck {share * args.interval:g}s): "
              f"{idle15 * 1000:.1f} ms over {idle15_n} scans (ratio {idle15 / bt_idle15:.3f})")
        first, last, scrapes, full, inc = exporter_rss(args.export_seconds)
        print(f"  bpfmem export --entries: RSS {first:.1f} MiB after the first scrape, "
              f"{last:.1f} MiB after {scrapes} scrapes over {args.export_seconds:.0f} s")
        print(f"  bpfmem export --entries scans: first (full) {full * 1000:.0f} ms, "
              f"incremental median {inc * 1000:.0f} ms, ratio {inc / full:.2f}")
        rss = max(last, idle_rss, busy_rss)
        goals = [("snapshot ratio <= 1.5 (run by run)", rm, 1.5),
                 ("snapshot ratio <= 1.5 beside two busy loops (run by run)", rm_busy, 1.5),
                 ("snapshot peak RSS < 80 MiB", bm_rss / 1024, 80),
                 ("exporter CPU per scan unchanged <= 0.1x bpftool", idle / bt_idle, 0.1),
                 ("the same with the checks of the default interval", idle15 / bt_idle15, 0.1),
                 ("exporter CPU per scan at 1% churn <= 0.3x bpftool", busy / bt_churn, 0.3),
                 ("exporter RSS <= 40 MiB", rss, 40)]
        print("goals: " + ", ".join(f"{g}: {'met' if x <= bound else 'NOT met'} ({x:.3g})"
                                    for g, x, bound in goals))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
