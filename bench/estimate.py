#!/usr/bin/env python3
"""Benchmark: estimating 100,000 map specs (issue 3: under a second; prints the rate).

Measures both the library call (bpfmem.model.estimate over MapShapes) and the command a
capacity planner runs (`bpfmem estimate --batch` over JSON lines, interpreter start and JSON
included), on the same 100,000 specs of mixed types, sizes, flags and fill levels.

usage: python bench/estimate.py [--count N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from bpfmem.model.estimate import estimate  # noqa: E402
from bpfmem.model.kernel import KernelProfile  # noqa: E402
from bpfmem.model.shape import MapShape  # noqa: E402
from bpfmem.uapi import MapType  # noqa: E402

TYPES = ["hash", "percpu_hash", "lru_hash", "lru_percpu_hash", "array", "percpu_array",
         "lpm_trie", "ringbuf", "bloom_filter", "queue", "devmap_hash", "sockhash"]


def specs(count: int, seed: int = 1) -> list[dict]:
    r = random.Random(seed)
    out = []
    for _ in range(count):
        t = r.choice(TYPES)
        d = {"type": t, "key_size": r.choice([4, 8, 16, 20, 40]),
             "value_size": r.choice([4, 8, 24, 100, 1000]),
             "max_entries": r.choice([1024, 65536, 131072, 1 << 20]),
             "map_flags": r.choice([0, 0, 1]), "entries": r.choice([0, 100, 50000])}
        if t == "ringbuf":
            d.update(key_size=0, value_size=0, map_flags=0)
        if t in ("queue", "bloom_filter"):
            d.update(key_size=0)
        if t == "lpm_trie":
            d.update(map_flags=1)
        out.append(d)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=100_000)
    args = ap.parse_args()
    data = specs(args.count)
    prof = KernelProfile.for_release("6.18", 64)
    shapes = [(MapShape(int(MapType.from_name(d["type"])), d["key_size"], d["value_size"],
                        d["max_entries"], d["map_flags"]), d["entries"]) for d in data]
    t0 = time.perf_counter()
    for shape, entries in shapes:
        estimate(shape, prof, entries)
    lib = time.perf_counter() - t0
    distinct = len({s for s, _ in shapes})
    # the same count of shapes that are all different (no shape worked out twice)
    unique = [MapShape(s.type, s.key_size, s.value_size, s.max_entries + i, s.map_flags)
              for i, (s, _) in enumerate(shapes)]
    t0 = time.perf_counter()
    for shape in unique:
        estimate(shape, prof, 0)
    lib_unique = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "specs.jsonl"
        path.write_text("".join(json.dumps(d) + "\n" for d in data))
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "bpfmem", "estimate", "--batch", str(path),
                            "--kernel", "6.18", "--cpus", "64"], stdout=subprocess.PIPE,
                           env=dict(os.environ, PYTHONPATH=str(ROOT / "src")), check=True)
        cmd = time.perf_counter() - t0
        lines = p.stdout.count(b"\n")
    assert lines == args.count, (lines, args.count)
    print(f"library : {args.count:,} estimates ({distinct:,} distinct shapes) in {lib:.3f}s "
          f"= {args.count / lib:,.0f}/s")
    print(f"library : {args.count:,} estimates, every shape different, in {lib_unique:.3f}s "
          f"= {args.count / lib_unique:,.0f}/s")
    print(f"command : {args.count:,} JSON lines in {cmd:.3f}s = {args.count / cmd:,.0f}/s "
          "(bpfmem estimate --batch, start-up and JSON included)")
    print(f"goal: 100,000 in under 1 s -> library {'met' if lib * 100_000 / args.count < 1 else 'NOT met'}, "
          f"command {'met' if cmd * 100_000 / args.count < 1 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
