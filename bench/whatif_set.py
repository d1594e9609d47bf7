#!/usr/bin/env python3
"""Benchmark: --set expressions parse in linear time (issue 18: a 40k-character value took
8.6 s with the old backtracking regex). Prints the time per expression for values of 4k and
40k characters shaped like the old worst case (spaces, then a non-space), and their ratio
(linear: about 10; quadratic: about 100).

usage: python bench/whatif_set.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from bpfmem.analysis.whatif import parse_setting  # noqa: E402


def seconds(n: int, repeat: int = 20) -> float:
    texts = [f"m.max_entries=1{' ' * n}x", f"m.flags+={'no_prealloc,' * (n // 12)}x",
             f"{'*' * n}.count=1"]
    t0 = time.perf_counter()
    for _ in range(repeat):
        for t in texts:
            try:
                parse_setting(t)
            except ValueError:
                pass
    return (time.perf_counter() - t0) / repeat / len(texts)


def main() -> None:
    small, large = seconds(4_000), seconds(40_000)
    print(f"--set, 4k characters: {small * 1e6:.0f} us; 40k: {large * 1e6:.0f} us; "
          f"ratio {large / small:.1f} (linear ~10, quadratic ~100)")


if __name__ == "__main__":
    main()
