"""``bpfmem diff``: what changes between two builds (or two snapshots of a node)."""

from __future__ import annotations

import argparse

from . import args as a
from .command import EXIT_OK, Command

EPILOG = """examples:
  bpfmem diff old/agent.o new/agent.o --limit 128Mi
  bpfmem diff 'base/*.o' 'build/*.o' --format markdown -o comment.md
  bpfmem diff before.json after.json     two `bpfmem snapshot`s (or bpftool dumps) of a node:
                                         maps added, removed, recreated, grown
  bpfmem diff agent.o agent.o --old-loader libbpf --new-loader cilium-ebpf
                                         the same object moved from libbpf to cilium/ebpf
"""


class Diff(Command):
    name = "diff"
    help = "what changes between two builds: maps, memory, upgrade charge, pins"
    description = ("Maps added, removed and changed between OLD and NEW (each one object or a "
                   "quoted list of several), with memory at create and when full on both "
                   "sides; what the first start after an upgrade charges; and the pinned maps "
                   "whose state is lost because they are incompatible (type, key/value size, "
                   "max_entries, flags or map_extra changed).")
    epilog = EPILOG

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("old", metavar="OLD", help="object(s) of the old build (globs allowed), "
                                                  "or its binary or container image")
        p.add_argument("new", metavar="NEW", help="object(s) of the new build (globs allowed), "
                                                  "or its binary or container image")
        p.add_argument("unquoted", nargs="*", help=argparse.SUPPRESS)
        p.add_argument("--limit", metavar="SIZE",
                       help="memory limit, to show the share of it (128Mi; M is 10^6)")
        a.add_kernels(p)
        a.add_loader(p)
        a.add_platform(p)
        p.add_argument("--programs", action="store_true",
                       help="also each program's instructions (after the loader's "
                            "relocations) and the memlock they imply, a lower bound")
        p.add_argument("--old-loader", metavar="LOADER",
                       help="the loader of the OLD side (default: --loader)")
        p.add_argument("--new-loader", metavar="LOADER",
                       help="the loader of the NEW side (default: --loader)")
        a.add_whatif(p)
        a.add_output(p, ("table", "json", "markdown", "html"))

    def run(self, args: argparse.Namespace) -> int:
        from .. import api
        from ..errors import UsageError
        from .common import (as_usage, config_of, expand_objects, kernels_of, loader_of, size_of,
                             whatif_of)
        from .output import emit_results, warn

        if args.unquoted:
            n = 2 + len(args.unquoted)
            raise UsageError(f"diff takes OLD and NEW, got {n} arguments: if the shell expanded "
                             "a glob, quote each side so bpfmem expands it: "
                             "bpfmem diff 'base/*.o' 'build/*.o'")
        old_snap, new_snap = api.is_snapshot_file(args.old), api.is_snapshot_file(args.new)
        if (old_snap or str(args.old).endswith(".json")) and \
                (new_snap or str(args.new).endswith(".json")) and (old_snap or new_snap):
            # two snapshots (one of them may be the bad file: its error names it)
            return self.run_snapshots(args)
        with as_usage():
            cfg = config_of(args)
            # the limit by the gate's own rule (--limit over bpfmem.toml's), shown as a share
            limit = api.gate_settings(
                limit=size_of(args.limit, "--limit") if args.limit is not None else None,
                config=cfg).limit
            whatif = whatif_of(args, cfg)
            old, new = expand_objects([args.old]), expand_objects([args.new])
            both = loader_of(args.loader, cfg)
            old_loader = loader_of(args.old_loader or both)
            new_loader = loader_of(args.new_loader or both)
            results = [api.diff_objects(old, new, profile=p, whatif=whatif, limit=limit,
                                        old_loader=old_loader, new_loader=new_loader,
                                        platform=args.platform, programs=args.programs)
                       for p in kernels_of(args, cfg)]
        warn("diff", list(results[0].warnings) if results else [])
        emit_results(results, args.format, args.output)
        return EXIT_OK

    def run_snapshots(self, args: argparse.Namespace) -> int:
        """Two snapshots of a node: maps added, removed, recreated, grown."""
        from .. import api
        from ..errors import UsageError
        from .common import as_usage
        from .output import emit_result
        if args.format not in ("table", "json", "markdown"):
            raise UsageError(f"two snapshots diff as table, json or markdown, not {args.format}")
        with as_usage():
            diff = api.diff_snapshots(args.old, args.new)
        emit_result(diff, args.format, args.output)
        return EXIT_OK


COMMAND = Diff()
