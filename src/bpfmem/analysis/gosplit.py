"""A Go process's memory split into what the runtime does with it, reconciled with smaps
(pure: a :class:`bpfmem.host.goproc.ProcDetail` in).

With the runtime's own figures (``/metrics``), the parts, which add up to the process's RSS
(the sum of its smaps mappings' Rss) exactly:

==============  ===========================================================================
heap_inuse      ``HeapInuse``: bytes in spans with live objects (and their fragmentation)
heap_free       ``HeapIdle - HeapReleased``: freed spans the runtime keeps, not yet returned
                to the OS (the scavenger returns them in the background, or at the limit)
stacks          ``StackInuse`` (goroutine stacks, inside the arenas) + the main thread's
                ``[stack]`` + thread stacks smaps shows (cgo/pthread, guard-page heuristic)
runtime         the runtime's off-heap metadata: ``MSpanSys + MCacheSys + BuckHashSys +
                GCSys + OtherSys`` (what it mapped), but no more than the anonymous memory
                smaps shows outside the heap arenas (what is resident of it)
binary          the executable's resident pages: text, rodata, data, bss
other           other file-backed mappings (shared libraries, mapped files) and the
                anonymous memory outside the arenas that is not runtime metadata (C malloc)
unexplained     the heap arenas' resident bytes (smaps) minus heap_inuse + heap_free +
                StackInuse: positive when released pages stay resident (MADV_FREE, i.e.
                GODEBUG=madvdontneed=0, or the readings moved apart); negative when the
                runtime counts spans never touched (fresh large allocations are not
                written, so not resident)
==============  ===========================================================================

Without the runtime's figures (no endpoint), the smaps view alone: ``go_arenas`` (the heap
arenas' resident bytes: heap in use, free and goroutine stacks together), stacks, binary,
other.

The figures and smaps are read a few milliseconds apart; a busy heap moves in between.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..units import format_gomemlimit, parse_gomemlimit

__all__ = ["GoSettings", "go_settings", "GoSplit", "go_split", "PARTS"]

PARTS = (("heap_inuse", "Go heap in use"), ("heap_free", "Go heap freed, not returned"),
         ("go_arenas", "Go heap arenas (no runtime figures)"), ("stacks", "stacks"),
         ("runtime", "Go runtime metadata"), ("binary", "binary (text, rodata, data)"),
         ("other", "other (libraries, files, other anon)"), ("unexplained", "unexplained"))

def _version(v: str | None) -> tuple[int, int] | None:
    m = re.match(r"go(\d+)\.(\d+)", v or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


@dataclass(frozen=True)
class GoSettings:
    gogc: int | None             # percent; None: off
    gogc_source: str             # "default", "GOGC", "runtime"
    memlimit: int | None         # bytes; None: no limit
    memlimit_source: str
    madvdontneed: bool | None    # None: unknown (version unknown)
    implications: tuple[str, ...]


def go_settings(env: dict, version: str | None = None, figures=None) -> GoSettings:
    """What GOGC, GOMEMLIMIT and GODEBUG=madvdontneed in the process's environment (or the
    runtime's own figures, which see debug.SetGCPercent/SetMemoryLimit) mean for its memory."""
    out: list[str] = []
    ver = _version(version)
    gogc: int | None = 100
    src = "default"
    raw = env.get("GOGC")
    if raw is not None:
        src = "GOGC"
        if raw.strip().lower() == "off":
            gogc = None
        else:
            # the runtime's atoi32: a value past int32 (or no number) is the default
            digits = raw.strip()
            try:
                gogc = int(digits) if len(digits) <= 11 else None
            except ValueError:
                gogc = None
            if gogc is None or not -(1 << 31) <= gogc < (1 << 31):
                gogc, src = 100, "default (GOGC unreadable)"
            elif gogc < 0:
                gogc = None
    if figures is not None and figures.gogc_percent is not None:
        gogc, src = (figures.gogc_percent if figures.gogc_percent >= 0 else None), "runtime"
    limit = None
    lsrc = "default"
    raw = env.get("GOMEMLIMIT")
    if raw is not None and raw.strip().lower() != "off":
        limit, lsrc = parse_gomemlimit(raw), "GOMEMLIMIT"
    if figures is not None and figures.gomemlimit is not None:
        limit, lsrc = (figures.gomemlimit if figures.gomemlimit < (1 << 62) else None), "runtime"
    if gogc is None:
        out.append("GOGC=off: no GC by heap growth" + (
            f"; the heap grows until GOMEMLIMIT ({format_gomemlimit(limit)}) forces a collection"
            if limit else ": the heap grows without bound (no GOMEMLIMIT)"))
    else:
        out.append(f"GOGC={gogc}: the heap may grow to {1 + gogc / 100:g}x the live heap "
                   "before the next GC")
    if limit is not None:
        if ver is not None and ver < (1, 19):
            out.append(f"GOMEMLIMIT={format_gomemlimit(limit)} is ignored before Go 1.19")
        else:
            out.append(f"GOMEMLIMIT={format_gomemlimit(limit)}: near it the runtime collects "
                       "more often and returns freed memory to the OS sooner (a soft limit: it "
                       "can be exceeded)")
    godebug = {k: v for k, _, v in (x.partition("=") for x in
                                    env.get("GODEBUG", "").split(",")) if k}
    mdn: bool | None
    if "madvdontneed" in godebug:
        mdn = godebug["madvdontneed"].strip() != "0"
    elif ver is not None:
        mdn = not ((1, 12) <= ver < (1, 16))      # MADV_FREE was the default in 1.12-1.15
    else:
        mdn = None
    if mdn is False:
        out.append("returned memory is given back with MADV_FREE (GODEBUG=madvdontneed=0 or "
                   "Go 1.12-1.15): it stays in RSS until the kernel needs it")
    elif mdn:
        out.append("returned memory is given back with MADV_DONTNEED: RSS drops at once")
    return GoSettings(gogc, src, limit, lsrc, mdn, tuple(out))


@dataclass(frozen=True)
class GoSplit:
    pid: int
    version: str | None
    rss: int
    parts: tuple[tuple[str, int], ...]    # (key, bytes) in PARTS order; sum == rss
    source: str                           # where the runtime figures came from, or "smaps"
    settings: GoSettings
    notes: tuple[str, ...]

    def part(self, key: str) -> int | None:
        return next((b for k, b in self.parts if k == key), None)

    @property
    def go_heap(self) -> int:
        """Heap in use + freed not returned (or the arenas, without runtime figures)."""
        return (self.part("heap_inuse") or 0) + (self.part("heap_free") or 0) + (
            self.part("go_arenas") or 0)


def go_split(detail) -> GoSplit | None:
    """The split of one Go process (None: not a Go process or its smaps unreadable)."""
    c = detail.classes
    if detail.go is None or c is None:
        return None
    fig = detail.figures
    version = detail.go.version or (fig.version if fig is not None else None)
    notes: list[str] = []
    files = c.files + c.special
    stacks = c.stack
    if fig is not None and fig.heap_inuse is not None:
        h = fig.heap_inuse
        f = fig.heap_free or 0
        s = fig.stack_inuse or 0
        meta = fig.runtime_metadata or 0
        claim = h + f + s
        if c.go_arenas > 0:
            runtime = min(meta, c.anon_other)
            other = files + c.anon_other - runtime
            unexplained = c.go_arenas - claim
        else:
            notes.append("no heap arena at Go's hint addresses: the heap is taken out of "
                         "the other anonymous memory")
            rest = c.anon_other - claim
            runtime = min(meta, max(0, rest))
            other = files + max(0, rest - runtime)
            unexplained = min(0, rest)
        parts = [("heap_inuse", h), ("heap_free", f), ("stacks", stacks + s),
                 ("runtime", runtime), ("binary", c.binary), ("other", other),
                 ("unexplained", unexplained)]
        source = detail.metrics_url or "runtime"
        if unexplained < -max(c.rss // 50, 1 << 20):
            notes.append("the runtime counts more heap than is resident: spans allocated "
                         "but never written (a large fresh allocation is not touched until "
                         "used)")
        elif unexplained > max(c.rss // 50, 1 << 20):
            notes.append("the arenas hold more than the runtime uses or keeps: released "
                         "pages still resident (MADV_FREE) or the heap moved between the "
                         "two readings")
    else:
        parts = [("go_arenas", c.go_arenas), ("stacks", stacks), ("binary", c.binary),
                 ("other", files + c.anon_other), ("unexplained", 0)]
        source = "smaps"
        notes.append("no runtime figures (no Go /metrics endpoint of it answered"
                     + (f": {detail.metrics_url} gave none" if detail.metrics_url else "")
                     + "): the heap arenas are shown whole (heap in use, free and goroutine "
                     "stacks)")
    settings = go_settings(detail.env, version, fig)
    return GoSplit(detail.pid, version, c.rss, tuple(parts), source, settings, tuple(notes))
