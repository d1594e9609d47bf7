"""``bpfmem advise``: which maps to change, and what each change saves."""

from __future__ import annotations

import argparse

from . import args as a
from .command import EXIT_OK, Command

EPILOG = """examples:
  bpfmem advise agent.bpf.o
  bpfmem advise agent.bpf.o --occupancy peak.json     {"map name": entries, ...}
  bpfmem advise agent.bpf.o --apply                   the --set line for check/diff
"""


class Advise(Command):
    name = "advise"
    help = "which maps to change, and what each change saves"
    description = ("Read the programs' bytecode: per map, whether the datapath writes it, only "
                   "reads it, or never touches it; then recommend changes (BPF_F_NO_PREALLOC "
                   "for maps the datapath only reads, dropping unused maps, sizes from an "
                   "occupancy snapshot, per-CPU costs) with the bytes each saves.")
    epilog = EPILOG

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("objects", nargs="*", metavar="OBJ",
                       help="compiled BPF object(s), binaries or container images carrying "
                            "them, or quoted globs; default: the bundled example")
        p.add_argument("--occupancy", metavar="SNAPSHOT.json",
                       help="entries per map from a live node: {map: entries} or a bpfmem "
                            "snapshot")
        p.add_argument("--apply", action="store_true",
                       help="print the what-if (--set ...) that `bpfmem check`/`diff` accept")
        a.add_kernels(p)
        a.add_loader(p)
        a.add_platform(p)
        a.add_output(p, ("table", "json", "markdown"))

    def run(self, args: argparse.Namespace) -> int:
        from .. import api
        from .common import as_usage, config_of, default_objects, kernels_of, loader_of
        from .output import emit_results
        with as_usage():
            occ = api.load_occupancy(args.occupancy) if args.occupancy else None
        paths = default_objects(args.objects)
        cfg = config_of(args)
        loader = loader_of(args.loader, cfg)
        results = [api.advise_objects(paths, profile=p, occupancy=occ, loader=loader,
                                      platform=args.platform)
                   for p in kernels_of(args, cfg)]
        if args.apply:
            sets = list(dict.fromkeys(s for r in results for o in r.objects for s in o.apply))
            import shlex      # unquoted where safe, so $(bpfmem advise ... --apply) works too
            print(" ".join(f"--set {shlex.quote(s)}" for s in sets))
            return EXIT_OK
        emit_results(results, args.format, args.output)
        return EXIT_OK


COMMAND = Advise()
