"""``bpfmem maps``: the maps and programs of compiled BPF objects, and what they cost."""

from __future__ import annotations

import argparse
import sys

from . import args as a
from .command import EXIT_ERROR, EXIT_OK, Command

EPILOG = """\
what you see:
  Every map the loader creates for the object: BTF-defined maps in SEC(".maps"),
  legacy SEC("maps") definitions, global data (.data, .rodata, .bss, .kconfig) as
  one-element arrays, and struct_ops maps; with the attributes the kernel will be given.
  Values a loader only knows at load time are marked: "at load" (perf event arrays get one
  slot per possible CPU), "*" (see the notes under the table).

loaders:
  libbpf and cilium/ebpf (Go agents; bpf2go's *_bpfel.o) read the same object differently:
  data maps are named ".rodata" by cilium/ebpf and "<obj>.rodata" by libbpf; cilium/ebpf
  drops a ring buffer's value size, gives perf event arrays key/value size 4, does not round
  ring buffer sizes, adds BPF_F_MMAPABLE to data maps and makes .kconfig once per program.
  --loader picks one; by default (auto) an object only one of them opens is read with that
  one, a bpf2go file name with cilium/ebpf, anything else with libbpf. The table says which
  loader was assumed and why. A map the loader or the kernel refuses is listed as refused
  and left out of the total, which says so.

columns:
  kind     where the loader found the map: btf (SEC(".maps")), legacy (SEC("maps")),
           data (.data, .rodata, .bss, .kconfig: one-element arrays), struct_ops
  flags    the kernel's map flags without BPF_F_, lower case (no_prealloc, mmapable,
           rdonly_prog, ...); "-" when there are none
  memlock  what /proc/PID/fdinfo and bpftool show for the map on that kernel (exact)
  charged  what the memory cgroup of the process that creates the map pays: at create,
           and "full" when every entry is present (maps that allocate on insert grow)
  share    the map's part of the object's charge at create (whole percent; one decimal
           below 1%)
  -        nothing to show (no flags, no figure for a map the kernel refuses)
  The kernel is the running one (or 6.18) and the CPUs this host's possible CPUs, unless
  --kernel and --cpus say otherwise: per-CPU maps scale with possible CPUs.

examples:
  bpfmem maps                          the bundled example object
  bpfmem maps agent.bpf.o              one object
  bpfmem maps agent.bpf.o --kernel 5.10 --cpus 64
  bpfmem maps build/*.o --format json  several, as JSON (schema bpfmem/maps/v1)
  bpfmem maps agent_bpfel.o --loader cilium-ebpf
  bpfmem maps ./agent                  the objects embedded in a binary, its loader's way
  bpfmem maps agent-image.tar          every object and binary carrying one in an image
"""


class Maps(Command):
    name = "maps"
    help = "list the maps and programs of compiled BPF objects"
    description = "List every map libbpf would create for each object, and its programs."
    epilog = EPILOG

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("objects", nargs="*", metavar="OBJ",
                       help="compiled BPF object(s) (clang -target bpf -g), binaries that "
                            "embed them (libbpf skeletons, Go go:embed) or container images "
                            "(docker save, OCI layout); default: the bundled example")
        a.add_format(p, ("table", "json", "markdown"))
        a.add_output_file(p)
        a.add_kernels(p)
        a.add_loader(p)
        a.add_platform(p)
        a.add_whatif(p)
        p.add_argument("--from-bpftool", metavar="FILE",
                       help="instead of objects: a node's maps saved with `bpftool -j -f map "
                            "show > FILE` (or a bpfmem snapshot), with the model's figures "
                            "beside them")
        p.add_argument("--no-memory", action="store_true",
                       help="only what the object says (the same on every host): no kernel "
                            "model")
        p.add_argument("--no-programs", action="store_true",
                       help="do not read the program list (faster on big objects): the "
                            "maps, notes and totals are the same; JSON has \"programs\": null")
        p.add_argument("--width", type=int, default=None, help=argparse.SUPPRESS)

    def run(self, args: argparse.Namespace) -> int:
        if args.from_bpftool:
            return self.run_saved(args)
        from .. import api
        from ..errors import BpfmemError
        from .common import config_of, default_objects, kernels_of, loader_of, whatif_of
        from .output import emit, fail, render, warn

        paths = default_objects(args.objects)
        cfg = config_of(args)      # (maps has no --config: found from the directory)
        loader = loader_of(args.loader, cfg)
        objects, errors = [], []
        for path in paths:
            try:
                got, skipped = api.load_objects(path, loader=loader,
                                                programs=not args.no_programs,
                                                platform=args.platform)
                objects += got
                warn("maps", skipped)
            except BpfmemError as e:
                errors.append((path, str(e)))
                fail(str(e))
            except OSError as e:
                msg = f"{path}: {e.strerror or e}"
                errors.append((path, msg))
                fail(msg)
        profiles = [None] if args.no_memory else kernels_of(args, cfg)
        whatif = whatif_of(args, cfg) if (args.set or args.size_ratio is not None
                                          or args.node_memory) else None
        results = [api.inventory(objects, errors, profile=p, whatif=whatif) for p in profiles]
        if objects:
            warn("maps", api.unmatched_sets(objects, whatif))
        if not objects and args.format == "table":
            return EXIT_ERROR       # each error said on its line: no empty table under them
        to_tty = args.output is None and sys.stdout.isatty()
        options = ({"indent": 2 if to_tty else None} if args.format == "json" else
                   {"width": args.width} if args.format == "table" else {})
        emit(args.output, lambda out: render(api.one_or_matrix(results), args.format, out,
                                             **options))
        return EXIT_ERROR if errors else EXIT_OK

    def run_saved(self, args: argparse.Namespace) -> int:
        """--from-bpftool FILE: a node's saved maps beside the model's figures."""
        from .. import api
        from ..errors import UsageError
        from .common import as_usage, profile_of
        from .output import note, render
        if args.objects:
            raise UsageError("give either objects or --from-bpftool, not both")
        with as_usage():
            profile = None if args.no_memory else profile_of(args)
            snap = api.load_snapshot(args.from_bpftool, profile=profile)
        if profile is not None and not args.kernel:
            note(f"modelling kernel {profile.version} with {profile.possible_cpus} CPUs "
                 "(this host; --kernel/--cpus for the node's)")
        view = api.snapshot_view(snap, profile)
        if args.format == "json":
            render(view, "json", sys.stdout, indent=2 if sys.stdout.isatty() else None)
        else:
            render(view, "table", sys.stdout, width=args.width)
        return EXIT_OK


COMMAND = Maps()
