"""``bpfmem check``: the CI gate. Do the maps (or the binaries) fit the memory budget?"""

from __future__ import annotations

import argparse

from . import args as a
from .command import EXIT_ERROR, EXIT_OK, Command

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
                       help="compiled BPF object(s), or quoted globs bpfmem expands "
                            "('build/*.o')")
        p.add_argument("--limit", metavar="SIZE",
                       help="the container's memory limit, a Kubernetes quantity: 128Mi "
                            "(Mi = 2^20), 500M (M = 10^6)")
        p.add_argument("--max-fraction", type=a.fraction, metavar="F",
                       help="share of the limit the maps may take (default 1.0)")
        p.add_argument("--full", action="store_true", default=None,
                       help="judge the maps when full instead of at create")
        a.add_kernels(p)
        a.add_loader(p, several=True)
        a.add_whatif(p)
        a.add_output(p, ("table", "json", "markdown", "junit", "html"))
        from .size import add_binary_gate
        add_binary_gate(p)

    def run(self, args: argparse.Namespace) -> int:
        import time
        from datetime import datetime, timezone

        from .. import api
        from ..errors import UsageError
        from .common import as_usage, config_of, expand_objects, loader_of, size_of, whatif_of
        from .output import emit_result

        started = datetime.now(timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds")
        t0 = time.monotonic()
        with as_usage(argparse.ArgumentTypeError):
            cfg = config_of(args)
            from .size import binary_gate_applies, check_binaries
            paths = expand_objects(args.objects)
            if binary_gate_applies(args, cfg, paths):
                return check_binaries(args, cfg, paths)
            limit = size_of(args.limit) if args.limit is not None else cfg.limit
            if limit is None:
                raise UsageError("check needs --limit (or `limit` in bpfmem.toml)")
            if limit <= 0:
                raise UsageError(f"--limit must be more than 0 bytes, not {args.limit or limit!r}")
            cpus = [a.positive(c) for c in a.comma_list(args.cpus)] or cfg.cpus
            kernels = a.comma_list(args.kernel)
            configured = () if (kernels or args.kernel_btf) else cfg.kernel_entries
            profiles = api.profiles(kernels or ([] if args.kernel_btf else cfg.kernels), cpus,
                                    args.kernel_btf, configured,
                                    page_size=args.page_size, arch=args.arch)
            fraction = args.max_fraction if args.max_fraction is not None else (
                cfg.max_fraction if cfg.max_fraction is not None else 1.0)
            if not 0 < fraction <= 1:
                raise UsageError(f"--max-fraction must be in (0, 1], not {fraction}")
            result = api.check_objects(
                paths, limit=limit, profiles=profiles, max_fraction=fraction,
                full=bool(args.full if args.full is not None else cfg.full),
                whatif=whatif_of(args, cfg), object_limits=cfg.object_limits,
                map_caps=cfg.map_caps, config=cfg.path,
                loader=[loader_of(x, cfg) for x in (a.comma_list(args.loader) or [None])])
        junit = ({"timestamp": started, "seconds": time.monotonic() - t0}
                 if args.format == "junit" else {})
        emit_result(result, args.format, args.output, **junit)
        return EXIT_OK if result.passed else EXIT_ERROR


COMMAND = Check()
