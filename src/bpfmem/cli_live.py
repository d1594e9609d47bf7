"""The live-node commands of the ``bpfmem`` CLI: snapshot, top, export (thin shells over
:mod:`bpfmem.api`). Registered by :mod:`bpfmem.cli`."""

from __future__ import annotations

import argparse
import sys

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


class Usage(Exception):
    """A bad argument found after parsing: exit 2 with one line."""


def parse_duration(text: str) -> float:
    """``100ms``, ``15s``, ``2m``, ``1h`` or plain seconds -> seconds."""
    t = text.strip().lower()
    for suffix, scale in (("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)):
        if t.endswith(suffix):
            num = t[:-len(suffix)]
            break
    else:
        num, scale = t, 1
    try:
        value = float(num) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text} (e.g. 100ms, 15s, 2m)") \
            from None
    import math
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive, finite duration: {text}")
    if value > 7 * 86400:
        raise argparse.ArgumentTypeError(f"more than a week: {text}")
    return value


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, e.g. 127.0.0.1:9435: {text}")
    return host.strip("[]") or "127.0.0.1", int(port)


_FILTER_HELP = {
    "owner": "only maps held by a process whose comm matches this glob (cilium-agent, 'ci*')",
    "cgroup": "only maps held by a process whose memory cgroup path contains this text",
    "name": "only maps whose name matches this glob ('cilium_lb*')",
    "type": "only maps of this kernel type (hash, lru_hash, percpu_array, ...)",
}


def _add_scan_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--entries", action="store_true",
                   help="count each map's entries (read-only lookups; batch where the kernel "
                        "has them) to show occupancy and pressure = entries / max_entries")
    p.add_argument("--time-bound", type=parse_duration, default=0.5, metavar="DUR",
                   help="stop counting one map's entries after this long (default 500ms); "
                        "a cut-short count is shown with a '+'")
    p.add_argument("--no-pins", action="store_true", help="do not walk bpffs mounts for pins")
    p.add_argument("--no-owners", action="store_true",
                   help="do not walk the processes' fds: no owners and no cgroups, and no "
                        "need for CAP_SYS_PTRACE (memlock is read through bpfmem's own fds)")
    p.add_argument("--owners-from", choices=("auto", "iterator", "proc"), default="auto",
                   help="how owners are found: the kernel's task_file iterator (one BPF "
                        "program, needs CAP_BPF+CAP_PERFMON or CAP_SYS_ADMIN and kallsyms "
                        "addresses), the /proc walk, or auto (default): the /proc walk in a "
                        "child beside the map walk on 2+ CPUs, else the iterator where it "
                        "can run; the JSON's owners_from says which ran")


def _add_filter_args(p: argparse.ArgumentParser) -> None:
    for k, h in _FILTER_HELP.items():
        p.add_argument(f"--{k}", metavar="PATTERN", help=h)


def add_parsers(sub) -> None:
    s = sub.add_parser(
        "snapshot", help="every BPF map on this node now, as JSON (root)",
        description="Scan every BPF map on this host: id, name, type, sizes, flags, memlock "
                    "(fdinfo), the processes holding it (pid, comm, cgroup), the programs "
                    "using it, its pins on every bpffs mount, and with --entries how full it "
                    "is. Each map also gets the model's prediction for this kernel; a mismatch "
                    "is flagged. Never writes to a map. Needs CAP_SYS_ADMIN (root).",
        epilog="""examples:
  bpfmem snapshot -o node.json                    save for later (schema bpfmem/snapshot/v1)
  bpfmem snapshot --entries --format table        how full is every map, now
  bpfmem snapshot --entries --format html -o node.html    the same as a picture
  bpfmem advise agent.o --occupancy node.json     size maps from what they really hold
  bpfmem maps --from-bpftool bpftool.json         a node where only bpftool can run:
                                                  bpftool -j -f map show > bpftool.json
""", formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_scan_args(s)
    s.add_argument("--format", choices=("json", "table", "html"), default="json",
                   help="json (default), a table sorted by memlock, or a self-contained HTML "
                        "page (treemap cgroup -> process -> map; needs -o and plotly)")
    s.add_argument("-o", "--output", metavar="FILE", help="write there instead of stdout")
    _add_filter_args(s)

    t = sub.add_parser(
        "top", help="live view of the node's maps, largest first (root)",
        description="A refreshing terminal view of every BPF map on this host, sorted by "
                    "memlock, with totals, owners, cgroups and (with --entries) pressure "
                    "highlighted: yellow from 75%%, red from 90%%. Keys: s changes the order "
                    "(memlock, pressure, entries, name), q quits.",
        epilog="""examples:
  bpfmem top
  bpfmem top --entries --owner cilium-agent
  bpfmem top --cgroup kubepods --type lru_hash --interval 5s
""", formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_scan_args(t)
    _add_filter_args(t)
    t.add_argument("--interval", type=parse_duration, default=2.0, metavar="DUR",
                   help="time between refreshes (default 2s)")
    t.add_argument("--sort", choices=("memlock", "pressure", "entries", "name"),
                   default="memlock", help="order of the rows (default memlock; the s key "
                                           "cycles through them)")
    t.add_argument("--rows", type=int, default=None, metavar="N",
                   help="rows to show (default: what fits the terminal)")
    t.add_argument("--once", action="store_true", help="print one frame and exit")
    t.add_argument("-n", "--iterations", type=int, default=None, metavar="N",
                   help="frames to show, then exit (default: until q or Ctrl-C). When stdout "
                        "is not a terminal, frames are printed one after another, as `top -b`")

    e = sub.add_parser(
        "export", help="Prometheus exporter of the node's maps (root)",
        description="Serve Prometheus metrics of every BPF map on this host: memlock, model "
                    "charge, entries, max_entries and pressure per map (labelled by id, name, "
                    "type, owner comm and cgroup), sums per cgroup, the cgroup's memory usage "
                    "and limit, and the exporter's own scan duration and errors. One scan "
                    "serves every scrape within --interval.",
        epilog="""examples:
  bpfmem export                                   http://127.0.0.1:9435/metrics
  bpfmem export --listen 0.0.0.0:9435 --interval 15s --entries     (in a DaemonSet)
  deploy/ has the DaemonSet, ServiceMonitor and a Grafana dashboard.
""", formatter_class=argparse.RawDescriptionHelpFormatter)
    e.add_argument("--listen", type=_listen, default=("127.0.0.1", 9435), metavar="HOST:PORT",
                   help="address to serve /metrics on (default 127.0.0.1:9435: loopback "
                        "only unless told otherwise)")
    e.add_argument("--interval", type=parse_duration, default=15.0, metavar="DUR",
                   help="reuse a scan for this long (default 15s)")
    _add_scan_args(e)


def _filters(args) -> dict:
    return {k: getattr(args, k) for k in _FILTER_HELP if getattr(args, k, None)}


def _filtered(snap, args):
    from dataclasses import replace
    from .analysis.live import filter_maps
    f = _filters(args)
    return replace(snap, maps=tuple(filter_maps(snap.maps, **f))) if f else snap


def _progress():
    """A spinner on stderr when it is a terminal; nothing otherwise."""
    if not sys.stderr.isatty():
        return None, None
    from rich.console import Console
    status = Console(stderr=True).status("scanning")
    status.start()
    return status, (lambda what: status.update(f"scanning {what}"))


def cmd_snapshot(args) -> int:
    from . import api
    if args.format == "html" and not args.output:
        raise Usage("--format html writes a page: give -o FILE.html")
    status, say = _progress()
    try:
        snap = api.scan_node(entries=args.entries, time_bound=args.time_bound,
                             pins=not args.no_pins, owners=not args.no_owners, progress=say, parallel=True,
                             owners_method=args.owners_from)
    finally:
        if status is not None:
            status.stop()
    doc = api.snapshot_document(_filtered(snap, args), api.profile())
    from .report import snapshot as report
    from .report.output import emit

    def render(out) -> None:
        if args.format == "table":
            report.render_table(doc, out)
        elif args.format == "html":
            from .report.node_html import render_snapshot_html
            out.write(render_snapshot_html(doc))
        else:
            report.render_json(doc, out, indent=2 if out.isatty() or args.output else None)
    emit(args.output, render)
    if args.output:
        from .units import format_size
        print(f"bpfmem: {doc['totals']['maps']} maps, memlock "
              f"{format_size(doc['totals']['memlock'])} -> {args.output}", file=sys.stderr)
    return EXIT_OK


class _Keys:
    """Single key presses from a terminal (cbreak mode, restored on exit); inert otherwise."""

    def __init__(self) -> None:
        self.fd = sys.stdin.fileno() if sys.stdin.isatty() else None
        self._saved = None

    def __enter__(self) -> "_Keys":
        if self.fd is not None:
            import termios
            import tty
            self._saved = termios.tcgetattr(self.fd)
            tty.setcbreak(self.fd)
        return self

    def __exit__(self, *exc) -> None:
        if self._saved is not None:
            import termios
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)

    def wait(self, seconds: float) -> str | None:
        """A key pressed within ``seconds``, or None when the time is up."""
        import os
        import select
        import time
        if self.fd is None:
            time.sleep(seconds)
            return None
        ready, _, _ = select.select([self.fd], [], [], max(seconds, 0))
        return os.read(self.fd, 1).decode(errors="replace") if ready else None


def cmd_top(args) -> int:
    import time
    from .report.escape import console as Console
    from rich.live import Live
    from . import api
    from .report.top import SORTS, top_view
    prof = api.profile()
    console = Console()
    sorts = list(SORTS)
    state = {"sort": args.sort, "doc": None, "total": 0}

    def scan() -> None:
        snap = api.scan_node(entries=args.entries, time_bound=args.time_bound,
                             pins=not args.no_pins, owners=not args.no_owners, parallel=True,
                             owners_method=args.owners_from)
        state["doc"] = api.snapshot_document(_filtered(snap, args), prof)
        state["total"] = len(snap.maps)

    def frame(keys: bool = False):
        rows = args.rows or max(console.size.height - 10, 5)
        return top_view(state["doc"], total_maps=state["total"], rows=rows,
                        filters=_filters(args), interval=args.interval, sort=state["sort"],
                        keys=keys)

    scan()
    if args.once or not console.is_terminal:
        # not a terminal (a pipe, a file, CI): frames one after another, as `top -b` does,
        # every --interval until --iterations (or Ctrl-C); --once prints one
        n = 1
        console.print(frame())
        while not args.once and (args.iterations is None or n < args.iterations):
            sys.stdout.flush()
            time.sleep(args.interval)
            scan()
            console.print()
            console.print(frame())
            n += 1
        return EXIT_OK
    n = 0
    with _Keys() as keys, Live(frame(keys.fd is not None), console=console, screen=True,
                               auto_refresh=False) as live:
        due = time.monotonic() + args.interval
        while args.iterations is None or n < args.iterations:
            key = keys.wait(due - time.monotonic())
            if key in ("q", "Q"):
                break
            if key in ("s", "S"):   # re-sort what is on screen, no rescan
                state["sort"] = sorts[(sorts.index(state["sort"]) + 1) % len(sorts)]
                live.update(frame(True), refresh=True)
                continue
            if key is not None:
                continue
            scan()
            live.update(frame(keys.fd is not None), refresh=True)
            due = time.monotonic() + args.interval
            n += 1
    return EXIT_OK


def cmd_export(args) -> int:
    import signal
    import threading
    from . import api
    from .exporter import ScanCache, serve

    profile = api.profile()
    memo = api.scan_memo(profile)   # incremental scans: unchanged maps are not read again

    def scan():
        snap = api.scan_node(entries=args.entries, time_bound=args.time_bound,
                             pins=not args.no_pins, owners=not args.no_owners,
                             owners_method=args.owners_from, memo=memo)
        return snap, api.cgroup_memory_of(snap)

    cache = ScanCache(scan, args.interval)
    cache.get()  # fail early (e.g. without CAP_SYS_ADMIN) before listening
    if cache.last_error:
        from .errors import HostError
        raise HostError(cache.last_error)
    host, port = args.listen
    try:
        server, _thread = serve(host, port, cache, profile)
    except OSError as e:
        raise Usage(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    print(f"bpfmem: serving http://{host}:{port}/metrics "
          f"({len(cache.snapshot.maps)} maps; scans reused for {args.interval:g}s)",
          file=sys.stderr, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    finally:
        server.shutdown()
        server.server_close()
    return EXIT_OK


COMMANDS = {"snapshot": cmd_snapshot, "top": cmd_top, "export": cmd_export}
