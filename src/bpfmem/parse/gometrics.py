"""The Go runtime's own memory figures from a Prometheus ``/metrics`` text (pure: str in).

Parsed with ``prometheus_client``'s text parser (the ``export`` extra). The names are
client_golang's Go collector's: ``go_memstats_*_bytes`` mirror ``runtime.MemStats`` (HeapInuse,
HeapIdle, HeapReleased, StackInuse, StackSys, MSpanSys, MCacheSys, BuckHashSys, GCSys,
OtherSys, Sys, NextGC), ``go_gc_duration_seconds`` counts GC cycles, and newer collectors add
``go_gc_gogc_percent`` / ``go_gc_gomemlimit_bytes`` (the settings in force).
"""

from __future__ import annotations

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


def _families(text: str) -> dict:
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        raise UnsupportedError(HINT) from None
    out = {}
    try:
        for fam in text_string_to_metric_families(text):
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
    as_int = {k: None if v is None else int(v) for k, v in vals.items()}
    cycles = _value(fams, "go_gc_duration_seconds", "go_gc_duration_seconds_count")
    gogc = _value(fams, "go_gc_gogc_percent")
    limit = _value(fams, "go_gc_gomemlimit_bytes")
    goroutines = _value(fams, "go_goroutines")
    threads = _value(fams, "go_threads")
    version = None
    info = fams.get("go_info")
    if info is not None:
        version = next((s.labels.get("version") for s in info.samples
                        if "version" in s.labels), None)
    return GoRuntimeFigures(
        **as_int, gc_cycles=None if cycles is None else int(cycles),
        gogc_percent=None if gogc is None else int(gogc),
        gomemlimit=None if limit is None else int(limit),
        goroutines=None if goroutines is None else int(goroutines),
        threads=None if threads is None else int(threads), version=version)
