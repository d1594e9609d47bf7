"""``bpfmem snapshot``: every BPF map on this node now (JSON, a table or an HTML page)."""

from __future__ import annotations

import argparse

from . import args as a
from .command import EXIT_OK, Command

EPILOG = """examples:
  bpfmem snapshot -o node.json                    save for later (schema bpfmem/snapshot/v2)
  bpfmem snapshot --entries --format table        how full is every map, now
  bpfmem snapshot --entries --format html -o node.html    the same as a picture
  bpfmem advise agent.o --occupancy node.json     size maps from what they really hold
  bpfmem maps --from-bpftool bpftool.json         a node where only bpftool can run:
                                                  bpftool -j -f map show > bpftool.json

the JSON (bpfmem/snapshot/v2; every reader also takes v1 files):
  "processes" {"PID": {comm, cgroup}} and "programs" {"ID": {name, type}},
  once each; a map's "owners" is [{pid}] (+ fds when more than one), its
  "programs" a list of ids. Every map has id, name, type, key_size,
  value_size, max_entries and memlock (null: the kernel gave none).
  A key absent means its default: map_flags, map_extra, btf_id 0; flags,
  owners, programs, pins []; frozen false; entries, entries_complete,
  entries_method: not counted (pressure also absent for arrays); fds 1;
  in "model", memlock_full/charged_full: the same as memlock/charged;
  delta (written only for a mismatch): 0; note: none.
  A live scan also lists every program (unless --no-programs): its entry in
  "programs" gets memlock, xlated_prog_len, jited_prog_len, map_ids, owners,
  links, pins; totals.programs, totals.btf, program_cgroups,
  program_processes, btf and jit (bpf_jit_limit vs the JIT's vmalloc) sum them.
  jq '.processes as $p | .maps[] | [.name, .memlock,
      (.owners[]? | $p[.pid|tostring].comm)]' node.json
"""


def scan(args: argparse.Namespace, *, progress=None, parallel: bool = True, memo=None):
    """The node's maps as --entries/--time-bound/--no-pins/--no-owners/--owners-from ask
    (``memo``: what an earlier scan of the same process keeps, api.scan_memo)."""
    from .. import api
    return api.scan_node(entries=args.entries, time_bound=args.time_bound,
                         pins=not args.no_pins, owners=not args.no_owners, progress=progress,
                         parallel=parallel, owners_method=args.owners_from, memo=memo,
                         programs=not getattr(args, "no_programs", True))


def filtered(snap, args: argparse.Namespace):
    """``snap`` with only the maps the live filters (--owner, --cgroup, ...) let through."""
    from .. import api
    filters = a.live_filters(args)
    return api.filter_snapshot(snap, filters) if filters else snap


class Snapshot(Command):
    name = "snapshot"
    help = "every BPF map on this node now, as JSON (root)"
    description = ("Scan every BPF map on this host: id, name, type, sizes, flags, memlock "
                   "(fdinfo), the processes holding it (pid, comm, cgroup), the programs "
                   "using it, its pins on every bpffs mount, and with --entries how full it "
                   "is. Each map also gets the model's prediction for this kernel; a mismatch "
                   "is flagged. Never writes to a map. Needs CAP_SYS_ADMIN (root).")
    epilog = EPILOG

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        a.add_scan(p, programs=True)
        a.add_format(p, ("json", "table", "html"), default="json",
                     help="json (default), a table sorted by memlock, or a self-contained HTML "
                          "page (treemap cgroup -> process -> map; needs -o and plotly)")
        a.add_output_file(p)
        a.add_live_filters(p)

    def run(self, args: argparse.Namespace) -> int:
        from .. import api
        from ..errors import UsageError
        from .common import progress
        from .output import emit, note, render
        if args.format == "html" and not args.output:
            raise UsageError("--format html writes a page: give -o FILE.html")
        # A node's 10,000 maps are some 100,000 young objects (records, their owners, the
        # JSON lines) and no cycles: the collector, which walked them 46 times (7 ms of a
        # 150 ms snapshot), waits until they are written; what is left then is frozen as
        # start-up's was (cli.main), and exit does not walk it either.
        with api.collector_paused(freeze=True):
            status, say = progress("scanning")
            try:
                snap = scan(args, progress=say)
            finally:
                if status is not None:
                    status.stop()
            view = api.snapshot_view(filtered(snap, args), api.profile())

            def draw(out) -> None:
                options = ({"indent": 2 if out.isatty() or args.output else None}
                           if args.format == "json" else {})
                render(view, args.format, out, **options)
            emit(args.output, draw)
        if args.output:
            from ..units import count, format_size
            note(f"{count(len(view.maps), 'map')}, memlock {format_size(view.memlock)} -> "
                 f"{args.output}")
        return EXIT_OK


COMMAND = Snapshot()
