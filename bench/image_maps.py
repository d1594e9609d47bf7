#!/usr/bin/env python3
"""Benchmark: ``bpfmem maps IMAGE`` on a container image of Debian 12's libbpf-tools against
libbpf opening the objects cut out of those binaries one by one; and the peak RSS of
``bpfmem maps`` on a 200 MiB image (layers streamed, never unpacked to disk).

Both sides are measured in this run, interleaved (A, B, A, B, ...); medians are printed and
the ratio is what matters.

  tools      one `bpfmem maps --format json --no-programs IMAGE` (an OCI tar, one gzip layer
             holding the ~50 libbpf-tools binaries in /usr/sbin) vs `libbpf_maps open OBJ`
             (tests/harness: bpf_object__open_file + close, Debian's libbpf 1.1) for each
             object, cut out beforehand. Beside it `bpfmem maps` with the program list.
  rss        `bpfmem maps --format json --no-programs` on an image of about 200 MiB: the
             tools plus this machine's shared libraries (ELF files without BPF objects,
             each examined) in three plain tar layers. Goal: peak RSS under 100 MiB.

libbpf-tools comes from `apt-get download libbpf-tools` (unpacked with dpkg-deb -x, never
installed). Images are built with Python's tarfile in a temporary directory, removed after.

usage: python bench/image_maps.py [--runs N] [--size MiB]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

import debpkg  # noqa: E402
import imagegen  # noqa: E402
import libbpf_harness  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
BPFMEM = [sys.executable, "-m", "bpfmem"]


def run_child(argv: list[str], rss: bool = False) -> tuple[float, int, float]:
    """(wall seconds, peak RSS KiB, CPU seconds) of one child, output discarded. With
    ``rss`` the child runs under GNU time (/usr/bin/time -f %M): a child forked straight
    from this process inherits its high-water mark (Linux keeps it across exec), and this
    process holds the images it built."""
    t0 = time.perf_counter()
    out = None
    if rss and shutil.which("time") and os.path.exists("/usr/bin/time"):
        out = tempfile.NamedTemporaryFile("r", prefix="bpfmem-bench-rss-")
        argv = ["/usr/bin/time", "-f", "%M", "-o", out.name, *argv]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])}...: exit {p.returncode}")
    peak = usage.ru_maxrss
    if out is not None:
        peak = int(out.read().split()[-1])
        out.close()
    return time.perf_counter() - t0, peak, usage.ru_utime + usage.ru_stime


def cut_out(data: bytes) -> list[bytes]:
    """Every 64-bit little-endian ET_REL EM_BPF ELF in ``data``, to the end of its section
    header table."""
    out, i = [], data.find(b"\x7fELF", 1)
    while i >= 0:
        if data[i + 4] == 2 and data[i + 16:i + 20] == b"\x01\x00\xf7\x00":
            shoff, = struct.unpack_from("<Q", data, i + 0x28)
            shnum, = struct.unpack_from("<H", data, i + 0x3C)
            out.append(data[i:i + shoff + 64 * shnum])
        i = data.find(b"\x7fELF", i + 1)
    return out


def filler(limit: int) -> list[tuple[str, str, bytes]]:
    """This machine's shared libraries (ELF, no BPF inside), up to ``limit`` bytes."""
    out, total = [], 0
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib"):
        if not os.path.isdir(d):
            continue
        for p in sorted(Path(d).rglob("*.so*")):
            if total >= limit:
                return out
            if p.is_symlink() or not p.is_file() or p.stat().st_size > 64 << 20:
                continue
            data = p.read_bytes()
            out.append(("file", str(p).lstrip("/"), data))
            total += len(data)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--size", type=int, default=200, help="MiB of the large image")
    args = ap.parse_args()
    if libbpf_harness.ensure_built() is None:
        print("cannot build tests/harness (gcc, libbpf-dev)", file=sys.stderr)
        return 1
    root = debpkg.unpacked("libbpf-tools")
    if root is None:
        print("apt-get cannot fetch libbpf-tools", file=sys.stderr)
        return 1
    tools = sorted(p for p in (root / "usr" / "sbin").iterdir()
                   if p.is_file() and not p.is_symlink())
    with tempfile.TemporaryDirectory(prefix="bpfmem-bench-image-") as tmp:
        tmp = Path(tmp)
        entries = [("file", f"usr/sbin/{t.name}", t.read_bytes()) for t in tools]
        image = imagegen.oci_tar(tmp / "libbpf-tools.tar", {"linux/amd64": [entries]})
        objs = []
        for t in tools:
            for i, raw in enumerate(cut_out(t.read_bytes())):
                o = tmp / (re.sub(r"[^A-Za-z0-9_]", "_", t.name) + f"_bpf{i or ''}.o")
                o.write_bytes(raw)
                objs.append(o)
        harness = str(libbpf_harness.BINARY)
        ours, ours_progs, theirs = [], [], []
        for _ in range(args.runs):
            ours.append(run_child(BPFMEM + ["maps", "--format", "json", "--no-programs",
                                            str(image)], rss=True))
            t0 = time.perf_counter()
            cpu = sum(run_child([harness, "open", str(o)])[2] for o in objs)
            theirs.append((time.perf_counter() - t0, cpu))
            ours_progs.append(run_child(BPFMEM + ["maps", "--format", "json", str(image)]))
        def med(rows, i):
            return statistics.median(r[i] for r in rows)
        a, b, c = med(ours, 0), med(theirs, 0), med(ours_progs, 0)
        ac, bc, cc = med(ours, 2), med(theirs, 1), med(ours_progs, 2)
        print(f"tools: {len(tools)} binaries, {len(objs)} objects, image "
              f"{image.stat().st_size / 2**20:.1f}Mi (wall ms, CPU ms; the machine is shared: "
              "CPU is the steadier figure)")
        print(f"  bpfmem maps --no-programs IMAGE    {a * 1000:6.0f} {ac * 1000:6.0f}  "
              f"{a / b:.2f}x / {ac / bc:.2f}x libbpf")
        print(f"  bpfmem maps IMAGE                  {c * 1000:6.0f} {cc * 1000:6.0f}  "
              f"{c / b:.2f}x / {cc / bc:.2f}x libbpf")
        print(f"  libbpf open x {len(objs)} (one by one)    {b * 1000:6.0f} {bc * 1000:6.0f}")
        print(f"  peak RSS of bpfmem maps: {max(r[1] for r in ours) / 1024:.1f}Mi")
        # the large image: the tools, then the filler split over two more layers
        fill = filler((args.size << 20) - sum(len(e[2]) for e in entries))
        half = len(fill) // 2
        nlibs = len(fill)
        unpacked = sum(len(e[2]) for e in fill) + sum(t.stat().st_size for t in tools)
        # plain tar layers (an OCI layout may hold them): the image file is the size asked
        big = imagegen.oci_tar(tmp / "big.tar",
                               {"linux/amd64": [entries, fill[:half], fill[half:]]}, gz=False)
        del entries, fill
        size = big.stat().st_size
        rss = []
        for _ in range(max(1, args.runs // 2)):
            rss.append(run_child(BPFMEM + ["maps", "--format", "json", "--no-programs",
                                           str(big)], rss=True))
        peak = max(r[1] for r in rss) / 1024
        print(f"rss: image {size / 2**20:.1f}Mi ({unpacked / 2**20:.1f}Mi of files: the "
              f"tools and {nlibs} shared libraries, each ELF file examined), bpfmem maps "
              f"{statistics.median(r[0] for r in rss) * 1000:.0f} ms, peak RSS {peak:.1f}Mi "
              f"({'under' if peak < 100 else 'OVER'} the 100Mi goal)")
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
