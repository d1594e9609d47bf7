"""``bpfmem check``: the CI gate. Do the maps (or the binaries) fit the memory budget?"""

from __future__ import annotations

import argparse

from . import args as a
from .command import EXIT_ERROR, EXIT_OK, EXIT_UNREADABLE, Command

EPILOG = """examples:
  bpfmem check build/*.o --limit 128Mi --max-fraction 0.5
  bpfmem check build/*.o --limit 128Mi --kernel 5.10,6.1,6.12 --cpus 2,64,192
  bpfmem check build/*.o --limit 128Mi --set 'service_*.flags+=no_prealloc' \
      --set 'service_reverse_table.flags-=no_prealloc'     (a glob, less the LRU)
  bpfmem check build/*.o --limit 128Mi $(bpfmem advise build/*.o --apply)
  bpfmem check build/*.o --format junit -o bpfmem.xml     (limit from bpfmem.toml)
  bpfmem check agent_bpfel.o --limit 128Mi --loader libbpf,cilium-ebpf   under both loaders

sizes: 128Mi, 1.5Gi (binary), 500M, 1G (decimal) or bytes, as Kubernetes quantities;
printed the same way (59.6Mi), so a figure can be pasted back into --limit.
"""


class Check(Command):
    name = "check"
    help = "CI gate: do the maps fit the memory budget? (exit 1 if not)"
    description = ("Pass (exit 0) when the maps created at start (or, with --full, the maps "
                   "when full) fit the budget, limit x max-fraction, on every kernel and CPU "
                   "count asked for; fail (exit 1) otherwise, with the top offenders.")
    epilog = EPILOG

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("objects", nargs="+", metavar="OBJ",
                       help="compiled BPF object(s), binaries or container images carrying "
                            "them, or quoted globs bpfmem expands ('build/*.o')")
        p.add_argument("--limit", metavar="SIZE",
                       help="the container's memory limit, a Kubernetes quantity: 128Mi "
                            "(Mi = 2^20), 500M (M = 10^6)")
        p.add_argument("--max-fraction", type=a.fraction, metavar="F",
                       help="share of the limit the maps may take (default 1.0)")
        p.add_argument("--full", action="store_true", default=None,
                       help="judge the maps when full instead of at create")
        a.add_kernels(p)
        a.add_loader(p, several=True)
        a.add_platform(p)
        a.add_whatif(p)
        a.add_output(p, ("table", "json", "markdown", "junit", "html"))
        p.add_argument("--programs", action="store_true",
                       help="add the programs to the maps' charge: per program the memlock "
                            "its relocated instructions imply (a lower bound; measure "
                            "--programs for what they cost)")
        p.add_argument("--max-binary-size", metavar="SIZE",
                       help="also gate binaries (Go or ELF) given as OBJ: fail when one is "
                            "larger than SIZE (40Mi; M is 10^6); limits per binary and per "
                            "module in [binary] of bpfmem.toml. Every gate given is checked; "
                            "exit 1 over a limit, 3 when a binary cannot be read, 2 usage")

    def run(self, args: argparse.Namespace) -> int:
        import time

        from .. import api
        from ..errors import UsageError
        from .common import (as_usage, config_of, expand_objects, kernels_of, loader_of,
                             size_of, whatif_of)
        from ..errors import UnreadableInput
        from .output import emit_result, fail, note

        started = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())   # UTC, as JUnit has it
        t0 = time.monotonic()
        with as_usage(argparse.ArgumentTypeError):
            cfg = config_of(args)
            settings = api.gate_settings(
                limit=size_of(args.limit, "--limit") if args.limit is not None else None,
                max_fraction=args.max_fraction, full=args.full,
                max_binary_size=(size_of(args.max_binary_size, "--max-binary-size")
                                 if args.max_binary_size else None), config=cfg,
                programs=args.programs)
            if not settings.any_gate:
                raise UsageError("check needs --limit (or `limit` in bpfmem.toml), "
                                 "--max-binary-size (or [binary] in bpfmem.toml), or both")
            paths = expand_objects(args.objects)
            try:
                result = api.check_gates(
                    paths, settings, profiles=kernels_of(args, cfg),
                    whatif=whatif_of(args, cfg),
                    loader=[loader_of(x, cfg) for x in (a.comma_list(args.loader) or [None])],
                    platform=args.platform)
            except UnreadableInput as e:
                fail(str(e))
                return EXIT_UNREADABLE
        if result.binaries is not None and args.format == "html":
            raise UsageError("the binary gate renders table, json, markdown or junit")
        for n in result.notes:
            note(n)
        junit = ({"timestamp": started, "seconds": time.monotonic() - t0}
                 if args.format == "junit" else {})
        emit_result(result, args.format, args.output, **junit)
        return EXIT_OK if result.passed else EXIT_ERROR


COMMAND = Check()
