"""``bpfmem pod``: one pod's memory cgroup now, over time (--trace), and after an upgrade
(--after)."""

from __future__ import annotations

import argparse
import sys

from ..errors import UsageError
from . import args as a
from .command import EXIT_ERROR, EXIT_OK, Command

EPILOG = """\
what you see:
  usage, limit and headroom of the cgroup, and its usage split into parts that add up to it:
    processes (anon)   anonymous memory of its processes (v2 anon, v1 total_rss)
    page cache         files and shmem (v2 file, v1 total_cache)
    kernel (not maps)  the cgroup's kernel memory less the maps below
    BPF maps           the model's memcg charge of the maps its processes hold
    huge-page residue  anon charged here that no process maps any more: huge pages partly
                       returned (MADV_DONTNEED); reclaimable, freed under memory pressure
    unexplained        what the counters leave over (per-CPU batching: a few pages)
  each process with RSS, PSS and USS (smaps_rollup); kernel memory by kind; each held map
  with memlock and charge. A map is charged to the cgroup of the process that CREATED it:
  a map pinned before this cgroup's processes started (left by an earlier incarnation of
  the pod) is held here but "charged elsewhere", and is not in this cgroup's usage.
  For Go processes (found from the binary's build info; Go version shown) the parts go
  further: Go heap in use, Go heap freed but not yet returned to the OS (heap_idle -
  heap_released), Go stacks and Go runtime metadata come out of processes (anon), the
  binary's resident pages out of page cache, as far as the kernel charges them to this cgroup
  (/proc/kpagecgroup: a binary another cgroup read first is "shared, charged elsewhere").
  The Go parts of the pod are resident memory: heap the runtime counts but never wrote is
  named in a note. Per Go process, the same split of
  its RSS (from /proc/PID/smaps and the runtime's /metrics, go_memstats_*), adding up to it
  with the unexplained rest; GOGC, GOMEMLIMIT, GODEBUG=madvdontneed and what they imply; the
  top allocation sites of /debug/pprof/heap. Endpoints: the ones named with --metrics-url /
  --pprof-url, else a loopback listener of the process serving /metrics (asked inside its
  network namespace). Nothing else is contacted; an endpoint that is down, slow, garbage or
  huge is a note after at most 2 s, not an error; the pod's processes are asked at once (their
  /metrics within 2 s, their heap profiles within 2 s more, however many there are).

--trace reads the cgroup's counters at every sample, its processes' smaps_rollup and detail
(smaps by class, page owners, Go endpoints) in turns within a budget per sample (half the
interval, 2.5 ms more per process, at most 0.3 s); endpoints are asked in the background,
each with its own deadline. It says when the samples fell behind the interval, when
processes left, and how much of the Go heap at the peak was garbage awaiting GC.

examples:
  bpfmem pod --pid $(pidof cilium-agent)
  bpfmem pod --container 3f2a9c1e7b4d --format json
  bpfmem pod --cgroup /kubepods/burstable/pod1234/3f2a...   (as /proc/PID/cgroup names it)
  bpfmem pod --cgroup X --after new/agent.o --before old/agent.o   headroom after upgrading
  bpfmem pod --pid 4242 --metrics-url http://127.0.0.1:9962/metrics
  bpfmem pod --container 3f2a --metrics-url 4242=http://10.0.0.7:9962/metrics
        --pprof-url 4242=http://10.0.0.7:6060/debug/pprof/heap   (PID=URL: several processes)
  bpfmem pod --pid 4242 --trace 60s --interval 100ms -o trace.jsonl --plot trace.html
  bpfmem pod --from trace.jsonl --plot trace.png     (a saved trace drawn again)
  bpfmem pod --trace 30s --limit 128Mi --plot startup.png -- ./agent --flags
        (starts ./agent in a fresh scratch cgroup and traces it from its first instant)

exit status: 0 ok; 1 error, or --after projects usage above the limit; 2 usage.
Needs root (other processes' smaps and fds; creating a cgroup for a command).
"""


class Pod(Command):
    name = "pod"
    help = "one pod's memory: processes, page cache, kernel, BPF maps (root)"
    description = ("One view of a pod's memory cgroup: limit, usage, headroom; its "
                   "processes (RSS, PSS, USS); kernel memory by kind; the BPF maps its "
                   "processes hold and what they cost; for Go processes, heap in use, heap "
                   "freed but not returned, stacks, runtime metadata and binary pages; what "
                   "remains unexplained. --trace "
                   "samples it over time and finds the peak; --after adds what a new "
                   "release's maps charge at start.")
    epilog = EPILOG

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        who = p.add_argument_group("which pod (one of these, or a command after --)")
        who.add_argument("--cgroup", metavar="PATH",
                         help="a memory cgroup directory, or a cgroup path as /proc/PID/cgroup "
                              "names it")
        who.add_argument("--pid", type=int, metavar="PID", help="the cgroup of this process")
        who.add_argument("--container", metavar="ID",
                         help="a container id (12+ hex digits; docker://, containerd:// ok)")
        p.add_argument("--format", choices=("table", "json"), default="table",
                       help="output format (default: table)")
        p.add_argument("-o", "--output", metavar="FILE",
                       help="write there instead of stdout (with --trace: FILE.jsonl gets one "
                            "JSON line per sample, anything else the JSON document)")
        p.add_argument("--no-entries", action="store_true",
                       help="do not count the maps' entries (faster; maps that allocate on "
                            "insert are then sized empty)")
        g = p.add_argument_group("Go processes (their runtime's view)")
        g.add_argument("--metrics-url", action="append", metavar="[PID=]URL",
                       help="the Go runtime's Prometheus /metrics: URL for the one --pid (or the "
                            "pod's largest Go process), PID=URL to name several (repeat)")
        g.add_argument("--pprof-url", action="append", metavar="[PID=]URL",
                       help="its /debug/pprof/heap, for the top allocation sites (default: next "
                            "to a /metrics found on loopback)")
        g.add_argument("--no-discover", action="store_true",
                       help="do not look for a loopback listener serving /metrics")
        g.add_argument("--no-go", action="store_true",
                       help="skip the per-process detail (smaps by class, Go runtime)")
        up = p.add_argument_group("headroom after an upgrade")
        up.add_argument("--after", nargs="+", metavar="NEW.o",
                        help="the new release's object(s): add what its maps charge at start")
        up.add_argument("--before", nargs="+", metavar="OLD.o",
                        help="the release running now: decides which pinned maps NEW reuses, "
                             "as `bpfmem diff OLD NEW` does (default: the pod's live pins)")
        tr = p.add_argument_group("trace over time")
        tr.add_argument("--trace", type=a.duration, metavar="DUR",
                        help="sample for this long (30s, 2m); with a command after --, until it "
                             "exits or this long")
        tr.add_argument("--interval", type=a.duration, default=None, metavar="DUR",
                        help="time between samples (default 100ms)")
        tr.add_argument("--plot", metavar="FILE",
                        help="stacked chart of the trace against the limit: FILE.html "
                             "(interactive, offline) or FILE.png (needs Chromium)")
        tr.add_argument("--from", dest="from_trace", metavar="FILE",
                        help="draw a trace saved with --trace -o FILE (.jsonl or .json) again: "
                             "its table, or its chart with --plot; nothing is sampled")
        tr.add_argument("--limit", metavar="SIZE",
                        help="memory limit of the scratch cgroup a command runs in, a "
                             "Kubernetes quantity (128Mi; M is 10^6)")
        p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD ...",
                       help="with --trace: a command to start in a fresh scratch cgroup")

    def run(self, args: argparse.Namespace) -> int:
        if args.from_trace is not None:
            return redraw(args)
        cmd = checked_command(args)
        if args.trace is not None:
            return trace(args, cmd)
        from .. import api
        from .common import as_usage, expand_objects
        prof = api.profile()
        view = api.pod_view(cgroup=args.cgroup, pid=args.pid, container=args.container,
                            entries=not args.no_entries, profile=prof, go=not args.no_go,
                            endpoints=endpoints(args), discover=not args.no_discover)
        headroom = None
        if args.after:
            args.after = expand_objects(args.after)
            args.before = expand_objects(args.before) if args.before else None
            with as_usage():
                headroom, _diff = api.pod_headroom(view, args.after, args.before, profile=prof)
        result = api.pod_result(view, prof, headroom=headroom, after=args.after,
                                before=args.before)
        _emit(result, args)
        if headroom is not None and headroom.limit is not None \
                and headroom.projected > headroom.limit:
            return EXIT_ERROR
        return EXIT_OK


def checked_command(args) -> list[str]:
    """The command after ``--`` (maybe none), once the options are known to go together."""
    cmd = list(args.argv or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    given = [n for n in ("cgroup", "pid", "container") if getattr(args, n) is not None]
    if cmd:
        if args.trace is None:
            raise UsageError("a command after -- needs --trace DUR (bpfmem pod --trace 30s -- CMD)")
        if given:
            raise UsageError(f"give either --{given[0]} or a command after --, not both")
    elif len(given) != 1:
        raise UsageError("give exactly one of --cgroup, --pid, --container" +
                         (f" (got {', '.join('--' + g for g in given)})" if given else
                          " (or --trace DUR -- CMD)"))
    if args.trace is None:
        for opt in ("interval", "plot", "limit"):
            if getattr(args, opt) is not None:
                raise UsageError(f"--{opt} goes with --trace")
    else:
        if args.after:
            raise UsageError("--after gives a headroom for one reading: leave out --trace")
        if args.plot and not args.plot.lower().endswith((".png", ".html", ".htm")):
            raise UsageError(f"--plot wants FILE.png or FILE.html, not {args.plot}")
    if args.limit is not None and not cmd:
        raise UsageError("--limit sets the scratch cgroup of a command (-- CMD); an existing "
                         "cgroup keeps its own")
    if args.before and not args.after:
        raise UsageError("--before goes with --after NEW.o")
    if args.pid is not None and args.pid < 1:
        raise UsageError(f"not a pid: {args.pid}")
    if args.container is not None:
        from .. import api
        from .common import as_usage
        with as_usage():
            api.parse_container_id(args.container)
    if args.no_go and (args.metrics_url or args.pprof_url):
        raise UsageError("--no-go leaves out the Go runtime: drop --metrics-url/--pprof-url")
    return cmd


def endpoints(args) -> dict:
    """pid (None: the pod's Go process) -> Endpoints, from --metrics-url/--pprof-url."""
    from .. import api
    found: dict = {}
    for opt, field in (("metrics_url", "metrics"), ("pprof_url", "pprof")):
        plain = []
        for item in getattr(args, opt) or []:
            head, sep, url = item.partition("=")
            if sep and head.isdigit():
                if len(head) > 10 or int(head) > 2 ** 31:
                    raise UsageError(f"--{opt.replace('_', '-')}: no process has pid "
                                     f"{head[:20]}{'...' if len(head) > 20 else ''}")
                pid = int(head)
            else:
                pid, url = None, item
                plain.append(url)
            if not url.startswith(("http://", "https://")):
                raise UsageError(f"--{opt.replace('_', '-')}: not an http:// URL: {url}")
            if pid is None and args.pid is not None:
                pid = args.pid
            cur = found.get(pid, {})
            cur[field] = url
            found[pid] = cur
        if len(plain) > 1:
            raise UsageError(f"--{opt.replace('_', '-')}: several URLs without PID=: name the "
                             "process of each (PID=URL)")
    return {pid: api.go_endpoints(**v) for pid, v in found.items()}


def _emit(result, args, trace: bool = False) -> None:
    """A pod reading or trace, through the renderer table: to -o FILE as JSON (a trace to
    FILE.jsonl one line per sample), or to stdout as --format asks."""
    from .output import emit_result
    if args.output and trace and args.output.endswith(".jsonl"):
        fmt = "jsonl"
    elif args.format == "json" or args.output:
        fmt = "json"
    else:
        fmt = "table"
    emit_result(result, fmt, args.output)


def trace(args, cmd: list[str]) -> int:
    """--trace DUR: sample the cgroup (or a command started in a scratch one) over time."""
    from .. import api
    from ..units import format_size
    from .common import note_leftovers, progress, size_of
    from .output import note
    limit = size_of(args.limit, "--limit") if args.limit is not None else None
    if limit is not None and limit <= 0:
        raise UsageError(f"--limit must be more than 0 bytes, not {args.limit!r}")
    interval = args.interval if args.interval is not None else 0.1
    status, show = progress("tracing")

    def say(view, t):
        show(f"{t:5.1f}s  usage {format_size(view.usage)}"
             + (f" of {format_size(view.limit)}" if view.limit else ""))

    if cmd:
        note_leftovers()
    try:   # SIGTERM ends the trace like Ctrl-C (cli/exits.py's one mechanism): clean up, report
        result = api.pod_trace(cgroup=args.cgroup, pid=args.pid, container=args.container,
                               command=cmd or None, duration=args.trace, interval=interval,
                               limit=limit, entries=False, command_output=_stderr_fd(),
                               on_sample=say if status is not None else None,
                               profile=api.profile(), go=not args.no_go,
                               endpoints=endpoints(args), discover=not args.no_discover)
    finally:
        if status is not None:
            status.stop()
    if args.output:
        _emit(result, args, trace=True)
        from ..report.pod import headline
        note(f"{headline(result)} -> {args.output}")
    if not args.output or args.format == "table":
        from .output import emit_result
        emit_result(result, args.format, None)   # (with -o FILE: the table, on stdout too)
    if args.plot:
        api.write_trace_plot(result, args.plot)
        note(f"plot -> {args.plot}")
    return command_status(result.exit_code)


def redraw(args) -> int:
    """--from FILE: a saved trace drawn again (the table on stdout or -o, or --plot)."""
    from .. import api
    from ..errors import BpfmemError
    from ..report.pod import render_trace_table
    from .output import emit, note
    given = [f"--{n.replace('_', '-')}" for n in ("cgroup", "pid", "container", "trace",
                                                 "after", "before", "limit", "interval")
             if getattr(args, n) is not None] + (["-- CMD"] if args.argv else [])
    if given:
        raise UsageError(f"--from draws a saved trace: leave out {', '.join(given)}")
    if args.format == "json":
        raise UsageError("--from draws a saved trace as a table or a --plot; its JSON is "
                         "the file itself")
    if args.plot and not args.plot.lower().endswith((".png", ".html", ".htm")):
        raise UsageError(f"--plot wants FILE.png or FILE.html, not {args.plot}")
    doc = api.load_trace(args.from_trace)
    try:
        if args.plot:
            api.write_trace_plot(doc, args.plot)
            note(f"plot -> {args.plot}")
        if not args.plot or args.output:
            emit(args.output, lambda out: render_trace_table(doc, out))
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise BpfmemError(f"{args.from_trace}: not a whole bpfmem pod trace "
                         f"({e.__class__.__name__}: {str(e)[:100]})") from None
    return EXIT_OK


def command_status(code: int | None) -> int:
    """bpfmem's exit status after tracing a command: the command's own, as `time` gives it
    (128 + N when signal N ended it); 0 when there was no command or it outlived the trace."""
    if code is None:
        return EXIT_OK
    return code if code >= 0 else 128 - code


def _stderr_fd() -> int | None:
    """The command's output goes to our stderr: stdout is the report's."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return 2


COMMAND = Pod()
