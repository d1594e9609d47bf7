"""Sampling one memory cgroup over time: an existing one, or a scratch cgroup made for a
command started in it (:func:`bpfmem.host.podscan.launched`). What the samples mean is
computed by the caller's ``on_sample`` as they arrive (:class:`bpfmem.analysis.pod.TraceBuilder`);
this module only reads, on the monotonic clock, and cleans up."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

from .goproc import GoProber
from .podscan import PodSample, PodSampler, launched, sample_loop


@dataclass(frozen=True)
class TraceRun:
    """How a trace went: its first sample (the cgroup as it was), t = 0 on this host's
    CLOCK_MONOTONIC, whether Ctrl-C ended it, and a launched command's exit code."""
    first: PodSample
    origin: float
    scratch: bool                # the cgroup was made for the command
    interrupted: bool
    exit_code: int | None = None


OnSample = Callable[[PodSample, float], None]   # (sample, seconds since the origin)


def detail_budget(interval: float, procs: int) -> float:
    """Seconds of one sample spent reading processes in detail (smaps by class, page
    owners, Go endpoints): half the interval, and 2.5 ms more per process, at most 0.3 s;
    a third of it more for their smaps_rollup. A pod with more processes than fit is read
    in turns, least recently read first (a process's figures are then as old as a turn);
    the cgroup's counters and its list of processes are read every time. One sample then
    stays under a second for a few hundred processes, and the trace says when it falls
    behind the interval."""
    return min(0.3, max(0.5 * interval, 0.0025 * procs))


def _sample(fs: str, origin: float, *, duration: float, interval: float, entries: bool,
            go: GoProber | None, on_sample: OnSample, stop=None) -> tuple[PodSample, bool]:
    sampler = PodSampler(fs, entries=entries, go=go, budget=lambda n: detail_budget(interval, n))
    try:
        return _loop(sampler, origin, duration=duration, interval=interval,
                     on_sample=on_sample, stop=stop)
    finally:
        if go is not None:
            go.close()


def _loop(sampler, origin, *, duration, interval, on_sample, stop) -> tuple[PodSample, bool]:
    firsts: list[PodSample] = []

    def each(s: PodSample) -> None:
        if not firsts:
            firsts.append(s)
        on_sample(s, s.t - origin)

    _samples, interrupted = sample_loop(sampler.sample, duration, interval, stop=stop,
                                        on_sample=each)
    if not firsts:            # Ctrl-C before the first sample: nothing to report
        raise KeyboardInterrupt
    return firsts[0], interrupted


def trace_cgroup(fs: str, *, duration: float, interval: float, on_sample: OnSample,
                 entries: bool = False, go: GoProber | None = None) -> TraceRun:
    """Sample the cgroup directory ``fs`` every ``interval`` seconds for ``duration``
    seconds (Ctrl-C ends it early, keeping the samples)."""
    origin = time.monotonic()
    first, interrupted = _sample(fs, origin, duration=duration, interval=interval,
                                 entries=entries, go=go, on_sample=on_sample)
    return TraceRun(first, origin, False, interrupted)


def trace_command(argv: Sequence[str], *, duration: float, interval: float,
                  on_sample: OnSample, limit: int | None = None, entries: bool = False,
                  stop_on_exit: bool = True, output=None,
                  go: GoProber | None = None) -> TraceRun:
    """Start ``argv`` in a fresh scratch memory cgroup (``limit`` bytes) and sample it from
    its first instruction, until ``duration`` or (``stop_on_exit``) until it exits; its
    stdout and stderr go to ``output``. Whatever it left running is killed and the cgroup
    removed on the way out, also on errors and Ctrl-C."""
    with launched(list(argv), limit=limit, stdout=output, stderr=output) as job:
        first, interrupted = _sample(job.cgroup.fs_path, job.started, duration=duration,
                                     interval=interval, entries=entries, go=go,
                                     on_sample=on_sample,
                                     stop=job.exited if stop_on_exit else None)
        code = job.proc.poll()
    return TraceRun(first, job.started, True, interrupted, code)
