#!/usr/bin/env python3
"""Benchmark: peak RSS and time of ``bpfmem size`` on the worst hostile binary of each kind,
against the same command on a real binary (``/usr/sbin/bpftool``, else ``/bin/ls``) measured
in the same run; and the import analysis of ``--go-src`` on synthetic ``go list`` graphs
against decoding the same stream with ``json`` (the least any reader of it does).

Binary kinds (made at run time in a temporary directory removed after): a sparse 16 GiB ELF,
a sparse .symtab of 16 M symbols, one at the bound (1,048,576), a 400 MiB sparse ELF (one
page of data: read, its holes are not), a section stretched over others (/bin/ls's .rodata
over .text), a FIFO.

Each child runs under GNU time (peak RSS) with an address-space limit (--limit-gib, default
4) and a timeout (--timeout, default 120 s). Printed per kind: exit status, wall seconds,
peak RSS, both as ratios to the real binary's run, and the first line on stderr.

Goal: every hostile kind ends in one line (or a report), within a few times the real
binary's time and under 256 MiB; the import analysis within a small multiple of the JSON
decoding, on wide graphs and on chain-shaped ones (each package importing the next: every
saving's chain as long as its place in it) of the same size.

usage: python bench/binary_inputs.py [--limit-gib G] [--timeout S] [--packages N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from elfgen import Sec, build_elf  # noqa: E402
from bpfmem.analysis.imports import import_savings, why_linked  # noqa: E402
from bpfmem.parse.golist import parse_go_list  # noqa: E402
from bpfmem.units import format_size  # noqa: E402
from _child import measured  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def _shdr(data: bytes, want: str) -> tuple[int, list[int]]:
    shoff, = struct.unpack_from("<Q", data, 0x28)
    entsize, num, strndx = struct.unpack_from("<HHH", data, 0x3a)
    strs = struct.unpack_from("<IIQQQQIIQQ", data, shoff + strndx * entsize)[4]
    for i in range(num):
        h = list(struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * entsize))
        o = strs + h[0]
        if data[o:data.index(b"\0", o)].decode() == want:
            return shoff + i * entsize, h
    raise KeyError(want)


def _symtab(path: Path, n: int) -> Path:
    data = bytearray(build_elf([Sec(".text", flags=6, data=b"\x90" * 64),
                                Sec(".strtab", type=3, data=b"\0f\0"),
                                Sec(".symtab", type=2, link=2, entsize=24, data=bytes(24))],
                               machine=62, e_type=2))
    at, _ = _shdr(bytes(data), ".symtab")
    off = (len(data) + 4095) // 4096 * 4096
    struct.pack_into("<QQ", data, at + 24, off, 24 * n)
    with open(path, "wb") as f:
        f.write(data)
        f.truncate(off + 24 * n)
    return path


def hostile(tmp: str) -> dict[str, Path]:
    d = Path(tmp)
    ls = Path("/bin/ls").read_bytes()
    out = {}
    p = d / "sparse16g"
    with open(p, "wb") as f:
        f.write(ls[:4096])
        f.truncate(16 << 30)
    out["sparse 16 GiB ELF"] = p
    out["symtab 16 M symbols"] = _symtab(d / "sym16m", 1 << 24)
    out["symtab at the bound"] = _symtab(d / "sym1m", 1 << 20)
    p = d / "sparse400m"
    with open(p, "wb") as f:
        f.write(ls)
        f.truncate(400 << 20)
    out["sparse 400 MiB ELF"] = p
    data = bytearray(ls)
    _, text = _shdr(ls, ".text")
    at, ro = _shdr(ls, ".rodata")
    end = ro[4] + ro[5]
    ro[3], ro[4], ro[5] = text[3], text[4], end - text[4]
    struct.pack_into("<IIQQQQIIQQ", data, at, *ro)
    (d / "overlap").write_bytes(bytes(data))
    out["overlapping sections"] = d / "overlap"
    os.mkfifo(d / "fifo")
    out["FIFO"] = d / "fifo"
    return out


def run(path: Path, limit_gib: float, timeout: float) -> tuple[str, float, int, str]:
    argv = [sys.executable, "-m", "bpfmem", "size", str(path)]
    return measured(argv, limit_gib=limit_gib, timeout=timeout, env=ENV)


def go_graph(n: int, shape: str) -> tuple[str, dict[str, int]]:
    rnd = random.Random(1)
    objs = []
    for i in range(n):
        if shape == "chain":
            imps = [f"example.com/m/p{i + 1}"] if i + 1 < n else []
        else:
            imps = [f"example.com/m/p{j}" for j in rnd.sample(range(i + 1, n), min(4, n - i - 1))]
        objs.append({"ImportPath": f"example.com/m/p{i}", "Imports": imps,
                     **({"Name": "main"} if i == 0 else {})})
    text = "".join(json.dumps(o) + "\n" for o in reversed(objs))
    return text, {f"example.com/m/p{i}": 100 + i for i in range(n)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit-gib", type=float, default=4.0)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--packages", type=int, default=6000)
    args = ap.parse_args()
    peer = Path("/usr/sbin/bpftool") if Path("/usr/sbin/bpftool").exists() else Path("/bin/ls")
    with tempfile.TemporaryDirectory(prefix="bpfmem-bench-binary-") as tmp:
        rows = [(f"real {peer.name} (peer)", peer)] + list(hostile(tmp).items())
        base = None
        print(f"{'kind':26} {'file':>8} {'status':>8} {'time':>7} {'x':>6} {'RSS':>8} "
              f"{'x':>5}  first line")
        for kind, path in rows:
            status, wall, rss, first = run(path, args.limit_gib, args.timeout)
            if base is None:
                base = (wall, rss)
            size = format_size(path.stat().st_size) if path.is_file() else "-"
            print(f"{kind:26} {size:>8} {status:>8} {wall:6.2f}s {wall / base[0]:5.1f}x "
                  f"{format_size(rss):>8} {rss / base[1]:4.1f}x  {first[:150]}", flush=True)
    print()
    print(f"{'go list graph':26} {'json':>7} {'savings+why':>12} {'x':>6}")
    for shape, n in (("wide", args.packages), ("chain", args.packages)):
        text, weights = go_graph(n, shape)
        t0 = time.perf_counter()
        dec = json.JSONDecoder()
        i = 0
        while i < len(text):
            _obj, i = dec.raw_decode(text, i)
            i += 1
        peer_t = time.perf_counter() - t0
        t0 = time.perf_counter()
        g = parse_go_list(text)
        s = import_savings(g, weights)
        why_linked(g, s, weights)
        t = time.perf_counter() - t0
        print(f"{f'{n} packages, {shape}':26} {peer_t:6.2f}s {t:11.2f}s {t / peer_t:5.1f}x",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
