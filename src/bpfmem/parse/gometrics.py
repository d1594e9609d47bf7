"""The Go runtime's own memory figures from a Prometheus ``/metrics`` text (pure: str in).

Parsed with ``prometheus_client``'s text parser (the ``export`` extra). The names are
client_golang's Go collector's: ``go_memstats_*_bytes`` mirror ``runtime.MemStats`` (HeapInuse,
HeapIdle, HeapReleased, StackInuse, StackSys, MSpanSys, MCacheSys, BuckHashSys, GCSys,
OtherSys, Sys, NextGC), ``go_gc_duration_seconds`` counts GC cycles, and newer collectors add
``go_gc_gogc_percent`` / ``go_gc_gomemlimit_bytes`` (the settings in force).

Any process of a pod can answer on a discovered endpoint, so the text is hostile until read:
only the lines of the families above reach the parser (picked with one regex scan: megabytes
of other label sets cost milliseconds, not seconds), a few hundred lines of at most 4 KiB,
and every figure must be finite and plausible (bytes and counts not negative, memory under
2^57 bytes, the address space of 5-level paging; a NextGC past it is "no goal", GOGC=off).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..errors import ParseError, UnsupportedError

__all__ = ["GoRuntimeFigures", "parse_go_metrics", "have_parser", "HINT"]

HINT = ("reading Go /metrics needs prometheus_client: pip install prometheus_client (in "
        "the checkout's venv: .venv/bin/pip install '.[export]')")

_MEMSTATS = {   # field -> metric family name (prometheus_client drops counters' _total)
    "heap_alloc": "go_memstats_heap_alloc_bytes",
    "heap_sys": "go_memstats_heap_sys_bytes",
    "heap_idle": "go_memstats_heap_idle_bytes",
    "heap_inuse": "go_memstats_heap_inuse_bytes",
    "heap_released": "go_memstats_heap_released_bytes",
    "stack_inuse": "go_memstats_stack_inuse_bytes",
    "stack_sys": "go_memstats_stack_sys_bytes",
    "mspan_sys": "go_memstats_mspan_sys_bytes",
    "mcache_sys": "go_memstats_mcache_sys_bytes",
    "buck_hash_sys": "go_memstats_buck_hash_sys_bytes",
    "gc_sys": "go_memstats_gc_sys_bytes",
    "other_sys": "go_memstats_other_sys_bytes",
    "sys": "go_memstats_sys_bytes",
    "next_gc": "go_memstats_next_gc_bytes",
}


@dataclass(frozen=True)
class GoRuntimeFigures:
    """What the runtime says about its memory (bytes; None when the endpoint left it out)."""
    heap_inuse: int | None
    heap_idle: int | None
    heap_released: int | None
    heap_alloc: int | None
    heap_sys: int | None
    stack_inuse: int | None
    stack_sys: int | None
    mspan_sys: int | None
    mcache_sys: int | None
    buck_hash_sys: int | None
    gc_sys: int | None
    other_sys: int | None
    sys: int | None
    next_gc: int | None
    gc_cycles: int | None         # go_gc_duration_seconds_count
    gogc_percent: int | None      # go_gc_gogc_percent (client_golang 1.12+ with runtime/metrics)
    gomemlimit: int | None        # go_gc_gomemlimit_bytes
    goroutines: int | None
    threads: int | None
    version: str | None           # go_info{version=...}

    @property
    def heap_free(self) -> int | None:
        """Freed, not yet returned to the OS: idle spans still backed by memory."""
        if self.heap_idle is None or self.heap_released is None:
            return None
        return max(0, self.heap_idle - self.heap_released)

    @property
    def runtime_metadata(self) -> int | None:
        """Memory the runtime took from the OS for itself, off the heap (mapped, not all of
        it resident): mspan + mcache + profiling buckets + GC metadata + other."""
        xs = (self.mspan_sys, self.mcache_sys, self.buck_hash_sys, self.gc_sys,
              self.other_sys)
        if all(x is None for x in xs):
            return None
        return sum(x for x in xs if x is not None)


def have_parser() -> bool:
    """Whether prometheus_client's text parser can be imported."""
    try:
        from prometheus_client.parser import text_string_to_metric_families  # noqa: F401
    except ImportError:
        return False
    return True


_OTHERS = ("go_gc_duration_seconds", "go_gc_gogc_percent", "go_gc_gomemlimit_bytes",
           "go_goroutines", "go_threads", "go_info")
_WANTED = frozenset(_MEMSTATS.values()) | frozenset(_OTHERS)
_SUFFIXES = ("_total", "_sum", "_count", "_created", "_bucket")
_LINE = re.compile(r"^(?:# (?:HELP|TYPE) )?(go_[A-Za-z0-9_:]*)[^\n]*", re.M)
MAX_LINES = 512             # lines of the wanted families
MAX_LINE = 4 << 10          # bytes of one of them
MAX_MEMORY = 1 << 57        # bytes: past any address space
_VERSION = re.compile(r"(?:go|devel )[A-Za-z0-9.+\-_ :]{0,80}")


def _wanted_lines(text: str) -> str:
    """The lines of ``text`` that belong to the families read here, in order."""
    out = []
    for m in _LINE.finditer(text):
        name = m.group(1)
        if name not in _WANTED:
            base = next((name[:-len(x)] for x in _SUFFIXES if name.endswith(x)), None)
            if base not in _WANTED:
                continue
        if m.end() - m.start() > MAX_LINE:
            raise ParseError(f"a line of {name[:60]} longer than {MAX_LINE} bytes",
                             section="/metrics")
        out.append(m.group(0))
        if len(out) > MAX_LINES:
            raise ParseError(f"over {MAX_LINES} lines of the Go runtime's families",
                             section="/metrics")
    return "\n".join(out) + "\n"


def _families(text: str) -> dict:
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        raise UnsupportedError(HINT) from None
    out = {}
    try:
        for fam in text_string_to_metric_families(_wanted_lines(text)):
            out[fam.name] = fam
    except (ValueError, TypeError, IndexError, KeyError) as e:
        why = (str(e).splitlines() or [type(e).__name__])[0][:100]
        why = "".join(c if c.isprintable() else "?" for c in why)
        raise ParseError(f"not Prometheus text: {why}", section="/metrics") from None
    return out


def _value(fams: dict, name: str, sample: str | None = None) -> float | None:
    fam = fams.get(name)
    if fam is None:
        return None
    for s in fam.samples:
        if s.name == (sample or name) or (sample is None and s.name == name + "_total"):
            return s.value
    return None


def parse_go_metrics(text: str) -> GoRuntimeFigures:
    """The Go runtime's figures in a /metrics text. ParseError when it is not Prometheus
    text or has no Go memory figures; UnsupportedError without prometheus_client."""
    fams = _families(text)
    vals = {k: _value(fams, n) for k, n in _MEMSTATS.items()}
    if vals["heap_inuse"] is None and vals["sys"] is None:
        raise ParseError("no go_memstats_* figures in it (not a Go program's client_golang "
                         "metrics)", section="/metrics")
    as_int = {k: _checked(_MEMSTATS[k], v, 0, MAX_MEMORY) for k, v in vals.items()
              if k != "next_gc"}
    next_gc = _checked(_MEMSTATS["next_gc"], vals["next_gc"], 0, 1 << 64)
    if next_gc is not None and next_gc >= MAX_MEMORY:
        next_gc = None             # no heap goal (GOGC=off: the runtime says ^uint64(0))
    cycles = _value(fams, "go_gc_duration_seconds", "go_gc_duration_seconds_count")
    version = None
    info = fams.get("go_info")
    if info is not None:
        version = next((s.labels.get("version") for s in info.samples
                        if "version" in s.labels), None)
        if version is not None and not _VERSION.fullmatch(version):
            version = None
    return GoRuntimeFigures(
        **as_int, next_gc=next_gc,
        gc_cycles=_checked("go_gc_duration_seconds_count", cycles, 0, 1 << 63),
        gogc_percent=_checked("go_gc_gogc_percent", _value(fams, "go_gc_gogc_percent"),
                              -1, 1 << 31),
        gomemlimit=_checked("go_gc_gomemlimit_bytes",
                            _value(fams, "go_gc_gomemlimit_bytes"), 0, 1 << 63),
        goroutines=_checked("go_goroutines", _value(fams, "go_goroutines"), 0, 1 << 31),
        threads=_checked("go_threads", _value(fams, "go_threads"), 0, 1 << 31),
        version=version)


def _checked(name: str, v: float | None, lo: int, hi: int) -> int | None:
    """``v`` as an int in [lo, hi]; ParseError when it is not finite or outside."""
    if v is None:
        return None
    # an integer sample stays an int (math.isfinite of a 200-digit one: OverflowError)
    if (isinstance(v, float) and not math.isfinite(v)) or not lo <= v <= hi:
        raise ParseError(f"{name} is {str(v)[:40]}: not a figure a Go runtime reports "
                         f"(finite, {lo} to {hi})", section="/metrics")
    return int(v)
