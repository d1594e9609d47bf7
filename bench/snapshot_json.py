#!/usr/bin/env python3
"""Benchmark: the size of `bpfmem snapshot --format json` against `bpftool -j map show`.

Creates 10,000 maps held by 100 processes (tests/mapfarm.py: forked children; removed at the
end, also on Ctrl-C) and prints, in the same run, the bytes per map of
  - bpftool -j map show             (ids, info, memlock; Debian's build lists no owners)
  - bpfmem snapshot --format json   (the same, plus owners, cgroups, pins, programs, model;
                                     schema bpfmem/snapshot/v2, one compact line)
  - bpfmem snapshot -o FILE         (the file: one line per map, process and program)
with their ratio, and the median time bpfmem spends making and encoding the document of
one scan in process (report.formats.render, after the scan).

usage: sudo python bench/snapshot_json.py [--processes 100] [--maps 100] [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from mapfarm import MapFarm, uniform_plans  # noqa: E402

ENV = dict(os.environ, PYTHONPATH=str(ROOT / "src"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=100)
    ap.add_argument("--maps", type=int, default=100, help="maps per process")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench/snapshot_json.py needs root (it creates maps and reads every process)",
              file=sys.stderr)
        return 1
    with MapFarm(uniform_plans(args.processes, args.maps, prefix="bj")) as farm, \
            tempfile.TemporaryDirectory() as tmp:
        bt = subprocess.run(["bpftool", "-j", "map", "show"], capture_output=True,
                            check=True).stdout
        ours = subprocess.run([sys.executable, "-m", "bpfmem", "snapshot", "--format", "json"],
                              capture_output=True, check=True, env=ENV).stdout
        path = os.path.join(tmp, "node.json")
        subprocess.run([sys.executable, "-m", "bpfmem", "snapshot", "-o", path],
                       capture_output=True, check=True, env=ENV)
        file_size = os.path.getsize(path)
        n_bt, doc = len(json.loads(bt)), json.loads(ours)
        n = len(doc["maps"])
        print(f"{len(farm.maps):,} farm maps held by {args.processes} processes "
              f"({n:,} maps on the host)")
        print(f"  bpftool -j map show          {len(bt):>10,} B  {len(bt) / n_bt:5.0f} B/map")
        print(f"  bpfmem snapshot (stdout)     {len(ours):>10,} B  {len(ours) / n:5.0f} B/map"
              f"   ratio {len(ours) / n / (len(bt) / n_bt):.2f}   ({doc['schema']})")
        print(f"  bpfmem snapshot -o FILE      {file_size:>10,} B  {file_size / n:5.0f} B/map")
        from bpfmem import api
        from bpfmem.host import live
        from bpfmem.report.formats import render
        view = api.snapshot_view(live.scan_maps(), api.profile())
        took = []
        with open(os.devnull, "w") as devnull:
            for _ in range(args.runs):
                t0 = time.perf_counter()
                render(view, "json", devnull, indent=None)
                took.append(time.perf_counter() - t0)
        print(f"  document + encoding of one scan, in process: median "
              f"{statistics.median(took) * 1000:.0f} ms of {args.runs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
