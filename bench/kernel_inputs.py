#!/usr/bin/env python3
"""Benchmark: peak RSS and time of ``bpfmem maps OBJ --kernel-btf FILE`` on the worst hostile
kernel file of each kind, against the same command on a real kernel's BTF (Debian 6.1's,
xz-compressed as committed) measured in the same run.

Kinds (tests/kernelgen.py makes each at run time, in a temporary directory removed after):
decompression bombs (bz2 in a bzImage, xz of gzip, two bomb payloads in one bzImage, zstd
unpacking to 1.5 GiB), a raw BTF of 20 M types (xz), BTFHub-style tars (GNU-sparse members of
4 GiB holes, 200,000 empty members, a bad pax sparse map, a 40 KB member name), a sparse
511 MiB file, a real BTF whose htab_elem, bucket and bpf_map are 0 bytes.

Each child runs under GNU time (peak RSS) with an address-space limit (--limit-gib, default
4) and a timeout (--timeout, default 120 s), so a regression shows as "killed" rather than
taking the machine. Printed per kind: exit status, wall seconds, peak RSS, both as ratios to
the real BTF's run, and the first line bpfmem printed on stderr.

Goal: every hostile kind ends in one line, exit 1 or 2, within a few times the real BTF's
time, peak RSS under 256 MiB plus the file itself.

Run against another checkout (say the one before the fix) with ``--src OTHER/src``.

usage: python bench/kernel_inputs.py [--runs N] [--only KIND] [--image VMLINUZ] [--src DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import kernelgen  # noqa: E402
from bpfmem import api  # noqa: E402
from bpfmem.units import format_size  # noqa: E402
from _child import measured  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def run(path: Path, limit_gib: float, timeout: float) -> tuple[str, float, int, str]:
    """(status, wall seconds, peak RSS bytes, first stderr line) of one child."""
    argv = [sys.executable, "-m", "bpfmem", "maps", str(api.example_object_path()),
            "--kernel-btf", str(path)]
    return measured(argv, limit_gib=limit_gib, timeout=timeout, env=ENV)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--limit-gib", type=float, default=4.0)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--src", default=str(ROOT / "src"),
                    help="the bpfmem sources to measure (default: this checkout's)")
    ap.add_argument("--image", action="append", default=[],
                    help="a real kernel image to measure beside the peer (a Debian vmlinuz)")
    args = ap.parse_args()
    ENV["PYTHONPATH"] = args.src
    with tempfile.TemporaryDirectory(prefix="bpfmem-bench-kernel-") as tmp:
        t0 = time.perf_counter()
        kinds = kernelgen.hostile(tmp)
        print(f"inputs made in {time.perf_counter() - t0:.1f} s")
        peer = kernelgen.BTF_DIR / f"{kernelgen.RELEASE}.btf.xz"
        rows = [("real BTF (peer)", peer)] + [(f"real {Path(i).name}"[:26], Path(i))
                                               for i in args.image]
        rows += [(k, p) for k, p in kinds.items() if not args.only or k in args.only]
        base = None
        print(f"{'kind':26} {'file':>8} {'status':>8} {'time':>7} {'x':>6} {'RSS':>8} "
              f"{'x':>5}  first line")
        for kind, path in rows:
            got = [run(path, args.limit_gib, args.timeout) for _ in range(args.runs)]
            status = got[-1][0]
            wall = statistics.median(g[1] for g in got)
            rss = max(g[2] for g in got)
            if base is None:
                base = (wall, rss)
            size = format_size(path.stat().st_size)
            print(f"{kind:26} {size:>8} {status:>8} {wall:6.2f}s {wall / base[0]:5.1f}x "
                  f"{format_size(rss):>8} {rss / base[1]:4.1f}x  {got[-1][3][:150]}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
