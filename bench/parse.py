#!/usr/bin/env python3
"""Benchmark: bpfmem's start-up and object parser against the peers they stand beside.

Every pair is measured in this run, on this machine, interleaved (A, B, A, B, ...) so that
load from other processes falls on both sides; medians are printed, and the ratio is what
matters, not seconds. Rows (issue 17's table):

  start-up   `bpfmem maps --format json SMALL` vs `python3 -c pass` and vs `libbpf_maps open
             SMALL` (tests/harness, bpf_object__open_file); `bpfmem --help` beside them.
             Goals: <= 50 ms (issue 17), <= 4x python3 -c pass (issue 31).
  big        the same on the 4.8 MB synthetic object (with the memory model, and
             --no-memory) vs libbpf open. Goals: <= 2x (issue 17), <= 2.5x (issue 31). Beside it the commands that read no
             program list: `maps --no-programs` and `check`.
  parser     in process: bpfmem.parse_object(bytes) vs one bpf_object__open_file + close
             inside the harness (`libbpf_maps bench OBJ N`). Goal: <= 1.2x. Beside it
             parse_object(programs=False), what check and maps --no-programs run.
  many       one `bpfmem maps --format json` over every object libbpf opens here (the
             committed fixtures and the examples; no upstream objects are kept locally)
             vs libbpf open once per object. Goal: <= 1x.

Beside the wall times, the children's CPU time (user + system, from wait4) and its ratios:
on a loaded machine a child waits for a CPU, which its wall time counts and its CPU time
does not (other processes still disturb it through caches, less).

With --callgrind (valgrind installed) it also prints instruction counts of the same pairs,
which other processes cannot disturb: the figures to compare before/after a change.

Bytecode is compiled first (compileall on src/) and the children may write it, as an
installed bpfmem has it. Peak RSS is one more run of each under GNU time (bench/_child.py).

Measured at the end of issue 31 (load 0.0, --runs 11): start-up 39.4 ms, 3.5x python3 -c
pass (CPU 3.6x), RSS 13.0 MiB; the big object 157.1 ms, 2.42x libbpf open (CPU 2.42x), RSS
28.6 MiB; parser in process 1.14x; many objects 1.31x (goal 1x, missed: one bpfmem start
against 34 starts of the small C harness, but in process 9.5 ms of parsing against 0.7).

usage: python bench/parse.py [--runs N] [--callgrind] [--small OBJ] [--big OBJ]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

import libbpf_harness  # noqa: E402
from _child import bpfmem_python, peak_rss_kib  # noqa: E402 (bench/_child.py)
from bpfmem.parse.objspec import parse_object  # noqa: E402

FIXTURES = ROOT / "tests" / "bpf" / "obj"

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
ENV["PYTHONPATH"] = str(ROOT / "src")
PY = bpfmem_python()    # the checkout's venv where there is one (bench/_child.py)
BPFMEM = [PY, "-m", "bpfmem"]


def run_child(argv: list[str]) -> tuple[float, int]:
    """(wall seconds, peak RSS KiB) of one child process, output discarded; its CPU seconds
    (user + system, from the same wait4) are kept in ``CPU[-1]``."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV,
                         cwd="/")
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    CPU.append(ru.ru_utime + ru.ru_stime)
    code = os.waitstatus_to_exitcode(status)
    verdict = argv[:len(BPFMEM) + 1] == BPFMEM + ["check"] and code == 1   # a gate failing
    if code != 0 and not verdict:
        raise SystemExit(f"{argv} failed with {code}")
    return wall, ru.ru_maxrss


CPU: list[float] = []
CPU_MEDIAN: dict[str, float] = {}   # name -> median CPU seconds of the last interleaved()


def interleaved(cmds: dict[str, list[str]], runs: int) -> dict[str, tuple[float, int]]:
    """name -> (median wall seconds, peak RSS KiB: one more run under GNU time, as
    bench/_child.peak_rss_kib says why), the commands run in turn ``runs`` times;
    the median CPU seconds of each in :data:`CPU_MEDIAN` (what a loaded machine disturbs
    less than wall time: the time the process ran, not the time it waited for a CPU)."""
    cpu: dict[str, list[float]] = {k: [] for k in cmds}
    times: dict[str, list[float]] = {k: [] for k in cmds}
    rss: dict[str, int] = {k: 0 for k in cmds}
    for k, argv in cmds.items():   # warm the page cache and bytecode once
        run_child(argv)
    for _ in range(runs):
        for k, argv in cmds.items():
            w, _ = run_child(argv)
            times[k].append(w)
            cpu[k].append(CPU[-1])
    for k, argv in cmds.items():
        rss[k] = peak_rss_kib(argv, env=ENV, cwd="/")
    CPU_MEDIAN.clear()
    CPU_MEDIAN.update({k: statistics.median(v) for k, v in cpu.items()})
    return {k: (statistics.median(v), rss[k]) for k, v in times.items()}


def libbpf_opens(objs: list[Path]) -> list[Path]:
    harness = str(libbpf_harness.BINARY)
    return [p for p in objs if subprocess.run([harness, "open", str(p)], env=ENV,
                                              capture_output=True).returncode == 0]


def parser_pair(obj: Path, runs: int) -> tuple[float, float, float]:
    """(median parse_object seconds, the same with programs=False, median libbpf
    open+close seconds), interleaved."""
    data = obj.read_bytes()
    harness = str(libbpf_harness.BINARY)
    n = 1 if len(data) > 1 << 20 else 50
    ours, lazy, theirs = [], [], []
    parse_object(data, path=str(obj))
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(n):
            parse_object(data, path=str(obj))
        ours.append((time.perf_counter() - t0) / n)
        t0 = time.perf_counter()
        for _ in range(n):
            parse_object(data, path=str(obj), programs=False)
        lazy.append((time.perf_counter() - t0) / n)
        out = subprocess.run([harness, "bench", str(obj), str(n)], capture_output=True,
                             text=True, check=True, env=ENV).stdout
        b = json.loads(out.strip().splitlines()[-1])
        theirs.append(b["seconds"] / b["opens"])
    return statistics.median(ours), statistics.median(lazy), statistics.median(theirs)


def many_in_process(objs: list[Path], runs: int) -> tuple[float, float]:
    """(median seconds to parse every object in process, the same for libbpf), each object
    its own pair as in :func:`parser_pair`."""
    ours, theirs = [], []
    for _ in range(runs):
        o = t = 0.0
        for obj in objs:
            a, _lazy, b = parser_pair(obj, 1)
            o, t = o + a, t + b
        ours.append(o)
        theirs.append(t)
    return statistics.median(ours), statistics.median(theirs)


def instructions(argv: list[str]) -> int:
    """Instructions executed by ``argv`` (callgrind: deterministic, blind to load)."""
    p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                        *argv], capture_output=True, text=True, env=ENV, cwd="/")
    for line in p.stderr.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1])
    raise SystemExit(f"callgrind gave no count for {argv}: {p.stderr[-300:]}")


_PARSE_N = ("import sys\nfrom bpfmem.parse.objspec import parse_object\n"
            "d = open(sys.argv[1], 'rb').read()\n"
            "kw = {'programs': False} if sys.argv[3:] == ['--no-programs'] else {}\n"
            "for _ in range(int(sys.argv[2])): parse_object(d, path=sys.argv[1], **kw)\n")
CHECK = ["check", "--format", "json", "--limit", "1024Gi"]   # the synthetic's refused maps
                                                            # fail it: exit 1, the verdict


_STDLIB_OF = ("import io, sys, contextlib\nbefore = set(sys.modules)\n"
              "from bpfmem.cli import main\n"
              "with contextlib.redirect_stdout(io.StringIO()): main(sys.argv[1:])\n"
              "print(','.join(sorted(m for m in set(sys.modules) - before\n"
              "      if not m.startswith(('bpfmem', '_')) and '.' not in m)))\n")


def stdlib_of(argv: list[str]) -> list[str]:
    """The standard-library modules a bpfmem command imports (top-level names): what its
    start-up cannot go below while it uses them."""
    out = subprocess.run([PY, "-c", _STDLIB_OF, *argv], capture_output=True, text=True,
                         check=True, env=ENV, cwd="/").stdout
    return out.strip().split(",")


def ms(s: float) -> str:
    return f"{s * 1000:7.1f} ms"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--small", type=Path, default=FIXTURES / "prog_sections.o")
    ap.add_argument("--big", type=Path, default=FIXTURES / "large_synthetic.o")
    ap.add_argument("--callgrind", action="store_true",
                    help="also print instruction counts (valgrind) of the same pairs")
    args = ap.parse_args()
    if libbpf_harness.ensure_built() is None:
        print("cannot build tests/harness (gcc, libbpf-dev)", file=sys.stderr)
        return 1
    harness = str(libbpf_harness.BINARY)
    compileall.compile_dir(str(ROOT / "src"), quiet=1)
    small, big = str(args.small), str(args.big)
    print(f"bpfmem run by {PY}; {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}; medians of {args.runs} interleaved runs\n")

    stdlib = stdlib_of(["maps", "--format", "json", small])
    r = interleaved({"pass": [PY, "-c", "pass"],
                     "stdlib": [PY, "-c", "import " + ", ".join(stdlib)],
                     "maps": BPFMEM + ["maps", "--format", "json", small],
                     "help": BPFMEM + ["--help"],
                     "libbpf": [harness, "open", small]}, args.runs)
    print(f"start-up on {args.small.name} ({args.small.stat().st_size / 1024:.0f} KiB):")
    print(f"  bpfmem maps --format json  {ms(r['maps'][0])}   (goal <= 50 ms; "
          f"{r['maps'][0] / r['pass'][0]:.1f}x python3 -c pass (goal <= 4x), "
          f"{r['maps'][0] / r['libbpf'][0]:.0f}x libbpf open; RSS {r['maps'][1] / 1024:.1f} MiB)")
    print(f"  bpfmem --help              {ms(r['help'][0])}   "
          f"({r['help'][0] / r['pass'][0]:.1f}x python3 -c pass)")
    print(f"  python3 -c pass            {ms(r['pass'][0])}")
    print(f"  python3 -c 'import ...'    {ms(r['stdlib'][0])}   (the {len(stdlib)} standard "
          f"modules maps imports, alone: {' '.join(stdlib)})")
    print(f"  libbpf_maps open           {ms(r['libbpf'][0])}")
    print(f"  bpfmem above the interpreter: {ms(r['maps'][0] - r['pass'][0])}; above its "
          f"standard modules: {ms(r['maps'][0] - r['stdlib'][0])}")
    c = CPU_MEDIAN
    print(f"  CPU time (user+system): maps {ms(c['maps'])} = {c['maps'] / c['pass']:.1f}x "
          f"python3 -c pass ({ms(c['pass'])}); --help {c['help'] / c['pass']:.1f}x\n")

    r = interleaved({"maps": BPFMEM + ["maps", "--format", "json", big],
                     "spec": BPFMEM + ["maps", "--format", "json", "--no-memory", big],
                     "noprog": BPFMEM + ["maps", "--format", "json", "--no-programs", big],
                     "check": BPFMEM + [*CHECK, big],
                     "libbpf": [harness, "open", big]}, max(3, args.runs // 2))
    t = r["libbpf"][0]
    print(f"big object {args.big.name} ({args.big.stat().st_size / 2**20:.1f} MiB):")
    print(f"  bpfmem maps --format json  {ms(r['maps'][0])}  {r['maps'][0] / t:.2f}x libbpf "
          f"open (goal <= 2.5x; issue 17: 2x); RSS {r['maps'][1] / 1024:.1f} MiB")
    print(f"  ... --no-memory            {ms(r['spec'][0])}  {r['spec'][0] / t:.2f}x")
    print(f"  ... --no-programs          {ms(r['noprog'][0])}  {r['noprog'][0] / t:.2f}x")
    print(f"  bpfmem check --format json {ms(r['check'][0])}  {r['check'][0] / t:.2f}x")
    print(f"  libbpf_maps open           {ms(t)}")
    c = CPU_MEDIAN
    print(f"  CPU time (user+system): maps {ms(c['maps'])} = {c['maps'] / c['libbpf']:.2f}x "
          f"libbpf open ({ms(c['libbpf'])}); --no-memory {c['spec'] / c['libbpf']:.2f}x, "
          f"--no-programs {c['noprog'] / c['libbpf']:.2f}x, check {c['check'] / c['libbpf']:.2f}x\n")

    print("parser against parser, in process (parse_object vs bpf_object__open_file+close):")
    for obj in (args.small, args.big):
        o, z, t = parser_pair(obj, max(3, args.runs // 2))
        print(f"  {obj.name:24} {ms(o)} vs {ms(t)}  {o / t:.2f}x (goal <= 1.2x); "
              f"programs=False {ms(z)} {z / t:.2f}x")
    print()

    objs = sorted(FIXTURES.glob("*.o")) + sorted((ROOT / "examples").rglob("*.o")) + \
        sorted((ROOT / "src" / "bpfmem" / "examples").glob("*.o"))
    both = [p for p in libbpf_opens(objs) if p != args.big]
    runs = max(3, args.runs // 2)
    ours, theirs = [], []
    for _ in range(runs):
        ours.append(run_child(BPFMEM + ["maps", "--format", "json", *map(str, both)])[0])
        theirs.append(sum(run_child([harness, "open", str(p)])[0] for p in both))
    o, t = statistics.median(ours), statistics.median(theirs)
    size = sum(p.stat().st_size for p in both)
    print(f"many objects: the {len(both)} of {len(objs)} local objects libbpf opens (fixtures "
          f"and examples, {size / 1024:.0f} KiB; no upstream objects here), synthetic left out:")
    print(f"  one bpfmem maps call {ms(o)} vs libbpf open once per object {ms(t)}: "
          f"{o / t:.2f}x (goal <= 1x)")
    o, t = many_in_process(both, runs)
    print(f"  in process, no start-up: parse_object of each {ms(o)} vs bpf_object__open_file+"
          f"close of each {ms(t)}: {o / t:.2f}x")

    if args.callgrind:
        if shutil.which("valgrind") is None:
            print("\n--callgrind: valgrind is not installed", file=sys.stderr)
            return 1
        print("\ninstructions (callgrind), deterministic:")
        base = instructions([PY, "-c", "pass"])
        rows = [("python3 -c pass", base),
                ("bpfmem maps --format json SMALL",
                 instructions(BPFMEM + ["maps", "--format", "json", small])),
                ("bpfmem --help", instructions(BPFMEM + ["--help"])),
                ("libbpf_maps open SMALL", instructions([harness, "open", small])),
                ("bpfmem maps --format json BIG",
                 instructions(BPFMEM + ["maps", "--format", "json", big])),
                ("bpfmem maps ... --no-programs BIG",
                 instructions(BPFMEM + ["maps", "--format", "json", "--no-programs", big])),
                ("bpfmem check --format json BIG", instructions(BPFMEM + [*CHECK, big])),
                ("libbpf_maps open BIG", instructions([harness, "open", big]))]
        p0 = instructions([PY, "-c", _PARSE_N, big, "0"])
        p1 = instructions([PY, "-c", _PARSE_N, big, "1"])
        z1 = instructions([PY, "-c", _PARSE_N, big, "1", "--no-programs"])
        h0 = instructions([harness, "bench", big, "0"])
        h1 = instructions([harness, "bench", big, "1"])
        rows += [("parse_object(BIG) in process", p1 - p0),
                 ("parse_object(BIG, programs=False)", z1 - p0),
                 ("bpf_object__open BIG", h1 - h0)]
        for name, n in rows:
            print(f"  {name:34} {n / 1e6:9.1f} M")
        print(f"  maps SMALL above the interpreter: {(rows[1][1] - base) / 1e6:.1f} M; "
              f"parser vs parser {(p1 - p0) / (h1 - h0):.2f}x (programs=False "
              f"{(z1 - p0) / (h1 - h0):.2f}x); maps BIG vs libbpf open "
              f"{rows[4][1] / rows[7][1]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
