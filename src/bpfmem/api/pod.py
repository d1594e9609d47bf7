"""One pod (a memory cgroup): what it uses now, over time, and after an upgrade."""

from __future__ import annotations

import os

from dataclasses import replace

from ..analysis.pod import (Headroom, PodTrace, PodView, TraceBuilder, TraceCgroup, Upgrade,
                            headroom_after)
from ..analysis.diff import DiffResult
from ..analysis.pod import pod_view as split
from ..host import httpget
from ..host.browser import screenshot_html
from ..host.cgroup import parse_container_id as _parse_container_id
from ..host.cgroup import resolve_cgroup
from ..host.goproc import Endpoints, GoProber
from ..host.podscan import PodSampler
from ..host.trace import trace_cgroup, trace_command
from ..inputs import InputError, input_lines, load_json
from ..outputs import output_file
from ..parse.jsonlines import parse_trace_jsonl
from ..report.documents import POD_TRACE, document
from ..report.pod import plot_format, render_trace_html
from .gate import diff_objects


def pod_cgroup(*, cgroup: str | None = None, pid: int | None = None,
               container: str | None = None) -> str:
    """The memory cgroup directory named by exactly one of a cgroup, a pid, a container id."""
    return resolve_cgroup(cgroup=cgroup, pid=pid, container=container)


def go_prober(endpoints=None, *, go: bool = True, discover: bool = True,
              pprof: bool = False, timeout: float | None = None) -> GoProber | None:
    """What reads each process of a pod in detail (smaps by class; for Go programs the
    runtime's /metrics and heap profile): ``endpoints`` maps a pid (or None: the pod's Go
    process) to :class:`bpfmem.host.goproc.Endpoints`; ``discover`` looks for a loopback
    listener serving /metrics; None when ``go`` is false."""
    if not go:
        return None
    return GoProber(endpoints, discover=discover, pprof=pprof,
                    timeout=httpget.TIMEOUT if timeout is None else timeout)


def pod_view(*, cgroup: str | None = None, pid: int | None = None,
             container: str | None = None, entries: bool = True, time_bound: float = 0.5,
             profile, go: bool = True, endpoints=None, discover: bool = True,
             pprof: bool = True) -> PodView:
    """One reading of a pod's memory cgroup split into parts that add up to its usage
    (:class:`bpfmem.analysis.pod.PodView`): processes with RSS/PSS/USS, page cache, kernel
    memory, the BPF maps its processes hold (model charge; which are charged elsewhere) and
    what remains unexplained; for Go processes, their memory split into heap in use, freed
    not returned, stacks, runtime metadata, binary and other (``go``; endpoints as in
    :func:`go_prober`). Reading other processes' maps and smaps needs root."""
    fs = pod_cgroup(cgroup=cgroup, pid=pid, container=container)
    prober = go_prober(endpoints, go=go, discover=discover, pprof=pprof)
    sample = PodSampler(fs, entries=entries, entry_time_bound=time_bound, go=prober,
                        files=True).sample()
    return split(sample, profile)


def pod_headroom(view: PodView, after, before=None, *, profile,
                 whatif=None) -> tuple[Headroom, DiffResult]:
    """What the pod's usage becomes when its processes are replaced by the objects ``after``
    (OLD ``before``, when given, decides which pinned maps are reused, as ``bpfmem diff``
    does). Returns (Headroom, the :class:`~bpfmem.analysis.diff.DiffResult` it used)."""
    result = diff_objects(list(before or []), list(after), profile=profile, whatif=whatif,
                          limit=view.limit)
    return headroom_after(view, result, before_given=bool(before)), result


def pod_result(view: PodView, profile, *, headroom: Headroom | None = None, after=None,
               before=None) -> PodView:
    """The view as modelled on ``profile``, with the upgrade to ``after`` (from ``before``)
    that ``headroom`` (:func:`pod_headroom`) measured: what the pod commands render (its
    document is ``bpfmem/pod/v1``)."""
    up = None if headroom is None else Upgrade(
        headroom, tuple(str(p) for p in after or []),
        tuple(str(p) for p in before) if before else None)
    return replace(view, kernel=profile, upgrade=up)


def pod_trace(*, cgroup: str | None = None, pid: int | None = None,
              container: str | None = None, command=None, duration: float = 60.0,
              interval: float = 0.1, limit: int | None = None, entries: bool = False,
              stop_on_exit: bool = True, command_output=None, on_sample=None,
              profile, go: bool = True, endpoints=None, discover: bool = True) -> PodTrace:
    """Sample a pod's memory every ``interval`` seconds for ``duration`` seconds: the
    :class:`~bpfmem.analysis.pod.PodTrace` (a point per sample, the peak and when it
    happened, what it settled at).

    With ``command`` (argv), it is started in a fresh scratch memory cgroup (``limit`` bytes)
    from its first instruction and traced from then on; the trace ends early when it exits
    (``stop_on_exit``). Whatever it left running is killed and the cgroup removed on the way
    out, also on errors and Ctrl-C (which ends the trace early, keeping the samples).
    ``on_sample(PodView, t)`` is called after each sample. Go processes are split at every
    sample as in :func:`pod_view` (``go``, ``endpoints``, ``discover``; no heap profile).
    Its document is ``bpfmem/pod-trace/v1`` (``t0_monotonic``: t = 0 on this host's
    CLOCK_MONOTONIC)."""
    trace = TraceBuilder(profile, on_sample)
    prober = go_prober(endpoints, go=go, discover=discover)
    if command:
        run = trace_command(command, duration=duration, interval=interval,
                            on_sample=trace.add, limit=limit, entries=entries,
                            stop_on_exit=stop_on_exit, output=command_output, go=prober)
    else:
        run = trace_cgroup(pod_cgroup(cgroup=cgroup, pid=pid, container=container),
                           duration=duration, interval=interval, on_sample=trace.add,
                           entries=entries, go=prober)
    cg = run.first.cgroup
    return trace.finish(cgroup=TraceCgroup(cg.path, cg.fs_path, cg.version, run.scratch),
                        kernel_peak_before=cg.peak, command=command, exit_code=run.exit_code,
                        interval=interval, interrupted=run.interrupted,
                        t0_monotonic=run.origin)


def write_trace_plot(trace: PodTrace | dict, path: str, *, width: int = 1100,
                     height: int = 560) -> None:
    """The trace's stacked chart: ``.html`` a self-contained interactive page, ``.png`` the
    same chart rendered by headless Chromium. ``trace``: a :class:`PodTrace`, or the
    ``bpfmem/pod-trace/v1`` document of one saved before (JSON, or JSON lines read back by
    :func:`bpfmem.parse.jsonlines.parse_trace_jsonl`): the chart is drawn from the document."""
    doc = trace if isinstance(trace, dict) else document(trace)
    p = os.fspath(path)
    fmt = plot_format(p)
    page = render_trace_html(doc, width=width, height=height, static=fmt == "png")
    if fmt == "png":
        screenshot_html(page, p, width=width, height=height)
    else:
        with output_file(p) as f:
            f.write(page)


def load_trace(path: str) -> dict:
    """A trace saved with ``bpfmem pod --trace -o FILE`` (``FILE.jsonl``: JSON lines; any
    other name: the JSON document) as its ``bpfmem/pod-trace/v1`` document, the one the
    trace's pages are drawn from (:func:`write_trace_plot`, the table of report.pod).
    InputError when it is none."""
    name = os.fspath(path)
    if name.endswith(".jsonl"):
        try:
            doc = parse_trace_jsonl(input_lines(name, "trace"))
        except (ValueError, RecursionError) as e:
            raise InputError(f"{name}: not JSON lines: {str(e)[:200]}") from None
    else:
        doc = load_json(name, "trace")
    if not (isinstance(doc, dict) and doc.get("schema") == POD_TRACE
            and isinstance(doc.get("summary"), dict) and isinstance(doc.get("samples"), list)
            and isinstance(doc.get("cgroup"), dict)):
        raise InputError(f"{name}: not a bpfmem pod trace ({POD_TRACE}, as pod --trace -o "
                         "writes it)")
    return doc


def parse_container_id(text: str) -> str:
    """The container id of ``text`` (12+ hex digits; ``docker://``, ``containerd://`` ok);
    ValueError otherwise."""
    return _parse_container_id(text)


def go_endpoints(metrics: str | None = None, pprof: str | None = None) -> Endpoints:
    """Where a Go process serves its runtime's /metrics and /debug/pprof/heap. UsageError
    for a URL that is no http(s) URL (a bad host name, port or bracket)."""
    from ..errors import HostError, UsageError
    for url in (metrics, pprof):
        if url is not None:
            try:
                httpget.split_url(url)
            except HostError as e:
                raise UsageError(str(e)) from None
    return Endpoints(metrics=metrics, pprof=pprof)
