#!/usr/bin/env python3
"""Benchmark: `bpfmem maps --format json` against libbpf's C open of the same object.

Both are measured in this run, on this machine: the ratio is what matters, not seconds.
For each object it prints
  - process: median wall time of `bpfmem maps --format json OBJ` vs `libbpf_maps open OBJ`
    (what a user waits for, interpreter start included), and bpfmem's peak RSS;
  - in-process: median time of bpfmem.parse_object(bytes) vs one bpf_object__open_file +
    close inside the harness (`libbpf_maps bench OBJ N`), i.e. parser against parser.
Goal (issue 2): within 3x of libbpf on objects over 1 MB, peak RSS under 80 MiB.

usage: python bench/parse.py [--runs N] [OBJ...]   (default: largest fixture + synthetic)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

import libbpf_harness  # noqa: E402
from bpfmem.parse.objspec import parse_object  # noqa: E402


def run_child(argv: list[str]) -> tuple[float, int]:
    """(wall seconds, peak RSS KiB) of one child process, output discarded."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{argv} failed with {p.returncode}")
    return wall, ru.ru_maxrss


def default_objects() -> list[Path]:
    objs = sorted((ROOT / "tests" / "bpf" / "obj").glob("*.o"), key=lambda p: p.stat().st_size)
    synthetic = [p for p in objs if "synthetic" in p.name]
    fixtures = [p for p in objs if "synthetic" not in p.name]
    return fixtures[-1:] + synthetic


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("objects", nargs="*", type=Path)
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    if libbpf_harness.ensure_built() is None:
        print("cannot build tests/harness (gcc, libbpf-dev)", file=sys.stderr)
        return 1
    harness = str(libbpf_harness.BINARY)
    objects = args.objects or default_objects()
    baseline = statistics.median(run_child([sys.executable, "-c", "pass"])[0]
                                 for _ in range(args.runs))
    print(f"interpreter start on this machine (python3 -c pass): {baseline * 1000:.1f}ms, "
          "included in every bpfmem process time below\n")
    print("columns: bpfmem = `bpfmem maps --format json` (with the memory model); spec = the "
          "same with --no-memory;\nlibbpf = `libbpf_maps open` (bpf_object__open_file); parse "
          "= bpfmem's parse_object in-process;\nopen = one libbpf open+close in-process\n")
    print(f"{'object':24} {'size':>8}  {'bpfmem':>8} {'spec':>8} {'libbpf':>8} {'ratio':>6} "
          f"{'spec':>5}  {'parse':>8} {'open':>8} {'ratio':>5}  {'RSS MiB':>7}")
    worst = 0.0
    big: list[tuple[float, float, float]] = []
    for obj in objects:
        data = obj.read_bytes()
        ours, spec_only, theirs, rss = [], [], [], []
        for _ in range(args.runs):
            w, r = run_child([sys.executable, "-m", "bpfmem", "maps", "--format", "json",
                              str(obj)])
            ours.append(w)
            rss.append(r)
            w, r = run_child([sys.executable, "-m", "bpfmem", "maps", "--format", "json",
                              "--no-memory", str(obj)])
            spec_only.append(w)
            rss.append(r)
            theirs.append(run_child([harness, "open", str(obj)])[0])
        parse_times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            parse_object(data, path=str(obj))
            parse_times.append(time.perf_counter() - t0)
        n = max(3, args.runs)
        out = subprocess.run([harness, "bench", str(obj), str(n)], capture_output=True,
                             text=True, check=True).stdout
        bench = json.loads(out.strip().splitlines()[-1])
        open_time = bench["seconds"] / bench["opens"]
        o, t = statistics.median(ours), statistics.median(theirs)
        so = statistics.median(spec_only)
        p = statistics.median(parse_times)
        ratio, sratio, pratio = o / t, so / t, p / open_time
        if len(data) > 1 << 20:
            worst = max(worst, ratio)
            big.append((ratio, sratio, pratio))
        print(f"{obj.name[:24]:24} {len(data) / 1024:7.0f}K  {o * 1000:6.1f}ms {so * 1000:6.1f}ms "
              f"{t * 1000:6.1f}ms {ratio:5.1f}x {sratio:4.1f}x  {p * 1000:6.1f}ms "
              f"{open_time * 1000:6.2f}ms {pratio:4.1f}x  {max(rss) / 1024:7.1f}")
    for ratio, sratio, pratio in big:
        print(f"\nobjects over 1 MB: process {ratio:.2f}x with memory, {sratio:.2f}x spec only, "
              f"parser against parser {pratio:.2f}x (goal: 3x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
