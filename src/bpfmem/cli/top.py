"""``bpfmem top``: a refreshing view of the node's maps, largest first."""

from __future__ import annotations

import argparse
import sys

from . import args as a
from .command import EXIT_OK, Command

EPILOG = """examples:
  bpfmem top
  bpfmem top --entries --owner cilium-agent
  bpfmem top --cgroup kubepods --type lru_hash --interval 5s
"""


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


class Top(Command):
    name = "top"
    help = "live view of the node's maps, largest first (root)"
    description = ("A refreshing terminal view of every BPF map on this host, sorted by "
                   "memlock, with totals, owners, cgroups and (with --entries) pressure "
                   "highlighted: yellow from 75%, red from 90%. Keys: s changes the order "
                   "(memlock, pressure, entries, name), q quits.")
    epilog = EPILOG

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        a.add_scan(p, programs=True)
        a.add_live_filters(p)
        p.add_argument("--interval", type=a.duration, default=2.0, metavar="DUR",
                       help="time between refreshes (default 2s)")
        p.add_argument("--sort", choices=("memlock", "pressure", "entries", "name"),
                       default="memlock", help="order of the rows (default memlock; the s key "
                                               "cycles through them)")
        p.add_argument("--rows", type=int, default=None, metavar="N",
                       help="rows to show (default: what fits the terminal)")
        p.add_argument("--once", action="store_true", help="print one frame and exit")
        p.add_argument("-n", "--iterations", type=int, default=None, metavar="N",
                       help="frames to show, then exit (default: until q or Ctrl-C). When "
                            "stdout is not a terminal, frames are printed one after another, "
                            "as `top -b`")

    def run(self, args: argparse.Namespace) -> int:
        import time

        from rich.live import Live

        from .. import api
        from ..report.escape import console as Console
        from ..report.top import SORTS, top_view
        from .snapshot import filtered, scan
        prof = api.profile()
        console = Console()
        sorts = list(SORTS)
        state = {"sort": args.sort, "view": None, "total": 0}

        # refreshes are incremental scans, as the exporter's: what cannot have changed
        # since the last frame is not read again (10,000 maps: a refresh some 10 ms,
        # where a full scan is some 100); one frame is a single scan, as `snapshot`'s
        one_frame = args.once or args.iterations == 1
        memo = None if one_frame else api.scan_memo(prof)
        try:
            def rescan() -> None:
                snap = scan(args, memo=memo)
                state["view"] = api.snapshot_view(filtered(snap, args), prof)
                state["total"] = len(snap.maps)

            def frame(keys: bool = False):
                rows = args.rows or max(console.size.height - 10, 5)
                return top_view(state["view"], total_maps=state["total"], rows=rows,
                                filters=a.live_filters(args), interval=args.interval,
                                sort=state["sort"], keys=keys)

            rescan()
            if args.once or not console.is_terminal:
                # not a terminal (a pipe, a file, CI): frames one after another, as
                # `top -b` does, every --interval until --iterations (or Ctrl-C); --once
                # prints one
                n = 1
                console.print(frame())
                while not args.once and (args.iterations is None or n < args.iterations):
                    sys.stdout.flush()
                    time.sleep(args.interval)
                    rescan()
                    console.print()
                    console.print(frame())
                    n += 1
                return EXIT_OK
            n = 0
            with _Keys() as keys, Live(frame(keys.fd is not None), console=console,
                                       screen=True, auto_refresh=False) as live:
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
                    rescan()
                    live.update(frame(keys.fd is not None), refresh=True)
                    due = time.monotonic() + args.interval
                    n += 1
            return EXIT_OK
        finally:
            if memo is not None:
                memo.close()    # the kernel iterators the scans kept loaded


COMMAND = Top()
