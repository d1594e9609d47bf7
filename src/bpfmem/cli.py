"""The ``bpfmem`` command: a thin shell that parses arguments, calls :mod:`bpfmem.api` and
picks a renderer. Exit codes: 0 ok, 1 error (or budget exceeded), 2 usage."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from . import __version__

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2

_MAPS_EPILOG = """\
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

memory:
  memlock  what /proc/PID/fdinfo and bpftool show for the map on that kernel (exact)
  charged  what the memory cgroup of the process that creates the map pays: at create,
           and "full" when every entry is present (maps that allocate on insert grow)
  The kernel is the running one (or 6.18) and the CPUs this host's possible CPUs, unless
  --kernel and --cpus say otherwise: per-CPU maps scale with possible CPUs.

examples:
  bpfmem maps                          the bundled example object
  bpfmem maps agent.bpf.o              one object
  bpfmem maps agent.bpf.o --kernel 5.10 --cpus 64
  bpfmem maps build/*.o --format json  several, as JSON (schema bpfmem/maps/v1)
  bpfmem maps agent_bpfel.o --loader cilium-ebpf
"""

_ESTIMATE_EPILOG = """one map:
  bpfmem estimate --type lru_hash --key-size 16 --value-size 40 --max-entries 65536
  bpfmem estimate --type hash --key-size 8 --value-size 8 --max-entries 131072 \\
      --flags no_prealloc --entries 20000 --kernel 6.1 --cpus 96 --format json

many (capacity planning): one JSON spec per line in, one JSON result per line out:
  {"type": "lru_hash", "key_size": 16, "value_size": 40, "max_entries": 65536,
   "map_flags": 0, "map_extra": 0, "entries": 0}
  bpfmem estimate --batch specs.jsonl > results.jsonl      (--batch - reads stdin)

Map types are the kernel's names (hash, lru_percpu_hash, ...); flags the kernel's without
BPF_F_, lower case (no_prealloc, mmapable, no_common_lru, zero_seed, numa_node, ...).
A map the kernel would refuse is reported with the kernel's errno and reason.
"""


_KERNEL_BTF_HELP = ("the kernel's own BTF: /sys/kernel/btf/vmlinux copied from a node, a "
                    "vmlinux, a vmlinuz/bzImage or a BTFHub .btf.tar.xz; struct sizes, "
                    "accounting eras and map types come from it (exact for that build)")


def _add_kernel_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kernel", type=_kernel, metavar="VERSION",
                   help="kernel release to model, e.g. 5.10, 6.1, 6.12, 6.18: the release "
                        "table, measured on one build (default: the running kernel, from its "
                        "BTF); with --kernel-btf, the release of a file that does not say")
    p.add_argument("--kernel-btf", metavar="FILE", help=_KERNEL_BTF_HELP)
    p.add_argument("--cpus", type=_positive, metavar="N",
                   help="possible CPUs (default: this host's /sys/devices/system/cpu/possible)")


_LOADER_HELP = ("which loader creates the maps: libbpf, cilium-ebpf (current cilium/ebpf, Go "
                "agents, bpf2go objects), cilium-ebpf@0.9 (cilium/ebpf 0.9.1) or auto: the "
                "loader that can open the object, cilium-ebpf for bpf2go names (*_bpfel.o), "
                "else libbpf (default: auto, or `loader` in bpfmem.toml)")


def _add_loader_arg(p: argparse.ArgumentParser, several: bool = False) -> None:
    p.add_argument("--loader", metavar="L[,L...]" if several else "LOADER",
                   help=_LOADER_HELP + ("; several, comma-separated, check the objects as "
                                        "each reads them" if several else ""))


def _loader_of(args: argparse.Namespace, cfg=None) -> str:
    """--loader, else bpfmem.toml's `loader`, else auto; a bad name is a usage error."""
    from .parse.loader import get_loader
    name = getattr(args, "loader", None) or (cfg.loader if cfg is not None else None) or "auto"
    if name == "auto":
        return name
    try:
        return get_loader(name).name
    except ValueError as e:
        raise _Usage(str(e)) from None


def _add_whatif_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("what-if (changes the maps before estimating them)")
    g.add_argument("--set", action="append", default=[], metavar="EXPR",
                   help="MAP.max_entries=N, MAP.flags+=no_prealloc, MAP.flags-=..., "
                        "MAP.count=N (a map created N times); MAP may be a glob: 'service_*'")
    g.add_argument("--size-ratio", type=_fraction, metavar="R",
                   help="Cilium-style dynamic sizing: share of node memory for the maps that "
                        "[dynamic.maps] in bpfmem.toml names (e.g. 0.0025)")
    g.add_argument("--node-memory", metavar="SIZE",
                   help="node memory for --size-ratio, a quantity (64Gi)")


def _add_output_args(p: argparse.ArgumentParser, formats: tuple[str, ...]) -> None:
    p.add_argument("--format", choices=formats, default="table",
                   help="output format (default: table)")
    p.add_argument("-o", "--output", metavar="FILE", help="write there instead of stdout")
    p.add_argument("--config", metavar="FILE",
                   help="bpfmem.toml or pyproject.toml ([tool.bpfmem]); default: found from "
                        "the current directory")


def _positive(text: str) -> int:
    """A CPU count: 1..65536 (kernels allow at most NR_CPUS, 8192 on x86_64)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text[:40]}") from None
    if not 1 <= n <= 65536:
        raise argparse.ArgumentTypeError(f"must be 1..65536: {text[:40]}")
    return n


def _cpu_list(text: str) -> str:
    """A comma-separated list of CPU counts (each checked), kept as written."""
    for part in text.split(","):
        if part.strip():
            _positive(part.strip())
    return text


def _kernel(text: str) -> str:
    """A kernel release bpfmem can model (5.10, 6.1.90, 6.12.0-31-cloud-amd64; 3.18 and
    later: BPF maps came with Linux 3.18), or the name of a [[kernels]] entry of
    bpfmem.toml (looked up once the file is read: an unknown name is a usage error then)."""
    import re
    from .model.kernel import parse_release
    if len(text) > 100 or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+~-]*", text):
        raise argparse.ArgumentTypeError(f"not a kernel release or a [[kernels]] name: "
                                         f"{text[:40]!r}")
    if not text[0].isdigit():
        return text     # a name
    try:
        rel = parse_release(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if rel[:2] < (3, 18) or rel[0] > 99:
        raise argparse.ArgumentTypeError(f"not a kernel release bpfmem can model: {text[:40]!r} "
                                         "(BPF maps came with Linux 3.18)")
    return text


def _kernel_list(text: str) -> str:
    """A comma-separated list of kernel releases (each checked), kept as written."""
    for part in text.split(","):
        if part.strip():
            _kernel(part.strip())
    return text


def _fraction(text: str) -> float:
    """A share in (0, 1]."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text[:40]}") from None
    if not 0 < v <= 1:   # also refuses nan
        raise argparse.ArgumentTypeError(f"must be in (0, 1]: {text[:40]}")
    return v


def _u64(text: str) -> int:
    try:
        n = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text[:40]}") from None
    if not 0 <= n < 1 << 64:
        raise argparse.ArgumentTypeError(f"out of range for a u64: {text[:40]}")
    return n


def _count(text: str) -> int:
    try:
        n = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text}") from None
    if not 0 <= n <= 0xFFFFFFFF:
        raise argparse.ArgumentTypeError(f"out of range for a u32: {text}")
    return n


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bpfmem",
        description="What eBPF maps cost in memory, before the kernel charges it: read compiled "
                    "BPF objects, model the kernel's accounting, measure real maps, gate CI.",
        epilog="""start here:
  bpfmem maps agent.bpf.o                      maps, programs and what they cost
  bpfmem check build/*.o --limit 128Mi         does it fit the pod? (exit 1 if not)
  bpfmem diff old.o new.o --format markdown    what a release changes, as a PR comment
  bpfmem estimate --type lru_hash --key-size 16 --value-size 40 --max-entries 65536
  bpfmem measure agent.bpf.o                   the kernel's own figures (root)
  bpfmem top --entries                         every map on this node, largest first (root)
  bpfmem pod --pid PID                         where a pod's memory goes, maps included (root)
  bpfmem size ./agent                          what each Go package costs in the binary
  bpfmem COMMAND --help                        more on each

sizes are Kubernetes quantities, printed the way they are read: 128Mi, 59.6Mi, 2Gi (powers of
1024), 500M (10^6 bytes: M is not Mi), or plain bytes where the exact figure matters.
""",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"bpfmem {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    m = sub.add_parser(
        "maps", help="list the maps and programs of compiled BPF objects",
        description="List every map libbpf would create for each object, and its programs.",
        epilog=_MAPS_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    m.add_argument("objects", nargs="*", metavar="OBJ",
                   help="compiled BPF object(s) (clang -target bpf -g); "
                        "default: the bundled example")
    m.add_argument("--format", choices=("table", "json", "markdown"), default="table",
                   help="output format (default: table)")
    _add_kernel_args(m)
    _add_loader_arg(m)
    _add_whatif_args(m)
    m.add_argument("--from-bpftool", metavar="FILE",
                   help="instead of objects: a node's maps saved with `bpftool -j -f map show "
                        "> FILE` (or a bpfmem snapshot), with the model's figures beside them")
    m.add_argument("--no-memory", action="store_true",
                   help="only what the object says (the same on every host): no kernel model")
    m.add_argument("--width", type=int, default=None, help=argparse.SUPPRESS)

    e = sub.add_parser(
        "estimate", help="what one map shape (or thousands) costs on a kernel",
        description="Estimate memlock and the memory cgroup charge of a map, at create, with "
                    "some entries, and full.",
        epilog=_ESTIMATE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    e.add_argument("--type", help="map type, e.g. hash, lru_hash, percpu_array, ringbuf")
    e.add_argument("--key-size", type=_count, default=0, metavar="K")
    e.add_argument("--value-size", type=_count, default=0, metavar="V")
    e.add_argument("--max-entries", type=_count, default=None, metavar="N",
                   help="max_entries (required; for a ring buffer, its size in bytes)")
    e.add_argument("--flags", default="", metavar="a,b",
                   help="map flags, e.g. no_prealloc,numa_node (or a number)")
    e.add_argument("--map-extra", type=_u64, default=0, metavar="X",
                   help="bloom filter hash count, arena address")
    e.add_argument("--entries", type=_count, default=0, metavar="E",
                   help="entries present, for the `memlock`/`charged` figures (default 0)")
    e.add_argument("--batch", metavar="SPECS.jsonl",
                   help="estimate one JSON spec per line ('-' for stdin); JSON lines out")
    e.add_argument("--format", choices=("table", "json"), default="table")
    _add_kernel_args(e)

    c = sub.add_parser(
        "check", help="CI gate: do the maps fit the memory budget? (exit 1 if not)",
        description="Pass (exit 0) when the maps created at start (or, with --full, the maps "
                    "when full) fit the budget, limit x max-fraction, on every kernel and CPU "
                    "count asked for; fail (exit 1) otherwise, with the top offenders.",
        epilog="""examples:
  bpfmem check build/*.o --limit 128Mi --max-fraction 0.5
  bpfmem check build/*.o --limit 128Mi --kernel 5.10,6.1,6.12 --cpus 2,64,192
  bpfmem check build/*.o --limit 128Mi --set 'service_*.flags+=no_prealloc' \
      --set 'service_reverse_table.flags-=no_prealloc'     (a glob, less the LRU)
  bpfmem check build/*.o --limit 128Mi $(bpfmem advise build/*.o --apply)
  bpfmem check build/*.o --format junit -o bpfmem.xml     (limit from bpfmem.toml)
  bpfmem check agent_bpfel.o --limit 128Mi --loader libbpf,cilium-ebpf   under both loaders

sizes: 128Mi, 1.5Gi (binary), 500M, 1G (decimal) or bytes, as Kubernetes quantities;
printed the same way (59.6Mi), so a figure can be pasted back into --limit.
""", formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("objects", nargs="+", metavar="OBJ",
                   help="compiled BPF object(s), or quoted globs bpfmem expands ('build/*.o')")
    c.add_argument("--limit", metavar="SIZE",
                   help="the container's memory limit, a Kubernetes quantity: 128Mi "
                        "(Mi = 2^20), 500M (M = 10^6)")
    c.add_argument("--max-fraction", type=_fraction, metavar="F",
                   help="share of the limit the maps may take (default 1.0)")
    c.add_argument("--full", action="store_true", default=None,
                   help="judge the maps when full instead of at create")
    c.add_argument("--kernel", type=_kernel_list, metavar="V[,V...]",
                   help="kernel release(s) to check against (release tables); default: "
                        "`kernels` in bpfmem.toml, else the running kernel")
    c.add_argument("--kernel-btf", metavar="FILE", action="append", default=[],
                   help=_KERNEL_BTF_HELP + "; repeat for several kernels")
    c.add_argument("--cpus", type=_cpu_list, metavar="N[,N...]",
                   help="possible CPU count(s) to check against")
    _add_loader_arg(c, several=True)
    _add_whatif_args(c)
    _add_output_args(c, ("table", "json", "markdown", "junit", "html"))
    from . import cli_size
    cli_size.add_check_args(c)

    d = sub.add_parser(
        "diff", help="what changes between two builds: maps, memory, upgrade charge, pins",
        description="Maps added, removed and changed between OLD and NEW (each one object or a "
                    "quoted list of several), with memory at create and when full on both "
                    "sides; what the first start after an upgrade charges; and the pinned maps "
                    "whose state is lost because they are incompatible (type, key/value size, "
                    "max_entries, flags or map_extra changed).",
        epilog="""examples:
  bpfmem diff old/agent.o new/agent.o --limit 128Mi
  bpfmem diff 'base/*.o' 'build/*.o' --format markdown -o comment.md
  bpfmem diff before.json after.json     two `bpfmem snapshot`s (or bpftool dumps) of a node:
                                         maps added, removed, recreated, grown
  bpfmem diff agent.o agent.o --old-loader libbpf --new-loader cilium-ebpf
                                         the same object moved from libbpf to cilium/ebpf
""", formatter_class=argparse.RawDescriptionHelpFormatter)
    d.add_argument("old", metavar="OLD", help="object(s) of the old build (globs allowed)")
    d.add_argument("new", metavar="NEW", help="object(s) of the new build (globs allowed)")
    d.add_argument("unquoted", nargs="*", help=argparse.SUPPRESS)
    d.add_argument("--limit", metavar="SIZE",
                   help="memory limit, to show the share of it (128Mi; M is 10^6)")
    _add_kernel_args(d)
    _add_loader_arg(d)
    d.add_argument("--old-loader", metavar="LOADER",
                   help="the loader of the OLD side (default: --loader)")
    d.add_argument("--new-loader", metavar="LOADER",
                   help="the loader of the NEW side (default: --loader)")
    _add_whatif_args(d)
    _add_output_args(d, ("table", "json", "markdown", "html"))

    a = sub.add_parser(
        "advise", help="which maps to change, and what each change saves",
        description="Read the programs' bytecode: per map, whether the datapath writes it, only "
                    "reads it, or never touches it; then recommend changes (BPF_F_NO_PREALLOC "
                    "for maps the datapath only reads, dropping unused maps, sizes from an "
                    "occupancy snapshot, per-CPU costs) with the bytes each saves.",
        epilog="""examples:
  bpfmem advise agent.bpf.o
  bpfmem advise agent.bpf.o --occupancy peak.json     {"map name": entries, ...}
  bpfmem advise agent.bpf.o --apply                   the --set line for check/diff
""", formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("objects", nargs="*", metavar="OBJ",
                   help="compiled BPF object(s) or quoted globs; default: the bundled example")
    a.add_argument("--occupancy", metavar="SNAPSHOT.json",
                   help="entries per map from a live node: {map: entries} or a bpfmem snapshot")
    a.add_argument("--apply", action="store_true",
                   help="print the what-if (--set ...) that `bpfmem check`/`diff` accept")
    _add_kernel_args(a)
    _add_loader_arg(a)
    _add_output_args(a, ("table", "json", "markdown"))

    ms = sub.add_parser(
        "measure", help="create an object's maps for real and compare with the model",
        description="Create every map of the object for real in a scratch memory cgroup, "
                    "read memlock (fdinfo) and the cgroup's charge per map, print them beside "
                    "the model's prediction, and remove everything. Needs root.",
        epilog="examples:\n  bpfmem measure agent.bpf.o\n"
               "  bpfmem measure agent.bpf.o --fill            also fill maps to half and full\n"
               "  bpfmem measure agent.bpf.o --vm-kernel 6.1   on Debian's 6.1 under qemu\n"
               "  bpfmem measure agent.bpf.o --vm-kernel /boot/vmlinuz-6.12.0-x\n",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ms.add_argument("object", metavar="OBJ")
    ms.add_argument("--fill", action="store_true",
                    help="also insert entries (half, then full) and measure again")
    ms.add_argument("--vm-kernel", metavar="VERSION|VMLINUZ",
                    help="measure in a VM: 5.10, 6.1, 6.12 (Debian cloud kernels, downloaded "
                         "once and cached) or a vmlinuz path")
    ms.add_argument("--cpus", type=_positive, default=2, help="VM CPUs (default 2)")
    ms.add_argument("--format", choices=("table", "json"), default="table")
    _add_loader_arg(ms)
    from . import cli_live, cli_pod
    cli_live.add_parsers(sub)
    cli_pod.add_parsers(sub)
    cli_size.add_parsers(sub)
    return p


def _fail(msg: str) -> None:
    print(f"bpfmem: error: {msg}", file=sys.stderr)


def _unmodelled_releases(kernels: list[str]) -> list[str]:
    """A warning per release newer than the newest one bpfmem models."""
    from .model.kernel import NEWEST_MODELLED, parse_release
    newest = ".".join(map(str, NEWEST_MODELLED))
    out = []
    for k in kernels:
        try:
            rel = parse_release(k)
        except ValueError:
            continue            # a [[kernels]] name, or a usage error the model reports
        if rel[:2] > NEWEST_MODELLED:
            out.append(f"Linux {k} is newer than the newest release bpfmem models ({newest}): "
                       f"its figures are {newest}'s rules, unchecked on {k}")
    return out


def _warn(command: str, messages: list[str]) -> None:
    for m in messages:
        print(f"bpfmem {command}: warning: {m}", file=sys.stderr)


def cmd_maps(args: argparse.Namespace) -> int:
    from . import api
    from .errors import BpfmemError

    if args.from_bpftool:
        return _maps_from_saved(args)
    paths = _default_objects(args.objects)
    from .config import load_config
    cfg = load_config(None)
    loader = _loader_of(args, cfg)
    objects, errors = [], []
    for path in paths:
        try:
            objects.append(api.load_object(path, loader=loader))
        except BpfmemError as e:
            errors.append((path, str(e)))
            _fail(str(e))
        except OSError as e:
            msg = f"{path}: {e.strerror or e}"
            errors.append((path, msg))
            _fail(msg)
    profiles = [None] if args.no_memory else _kernels(args, cfg)
    whatif = _whatif(args, cfg) if (args.set or args.size_ratio is not None
                                    or args.node_memory) else None
    from .analysis.inventory import inventory
    from .analysis.matrix import one_or_matrix
    results = [inventory(objects, errors, profile=p, whatif=whatif) for p in profiles]
    if objects:
        from .analysis.typos import unmatched
        _warn("maps", unmatched(objects, whatif))
    options = ({"indent": 2 if sys.stdout.isatty() else None} if args.format == "json" else
               {"width": args.width} if args.format == "table" else {})
    _render(one_or_matrix(results), args.format, sys.stdout, **options)
    return EXIT_ERROR if errors else EXIT_OK


def _render(result, fmt: str, out, **options) -> None:
    """Draw a result as --format asks (``table`` is the text renderer)."""
    from .report import formats
    formats.render(result, "text" if fmt == "table" else fmt, out, **options)


def _kernels(args: argparse.Namespace, cfg) -> list:
    """The kernels a one-kernel command (maps, diff, advise) runs on: --kernel/--kernel-btf
    (--kernel may name a [[kernels]] entry of bpfmem.toml), else every kernel bpfmem.toml
    lists, one after the other, else this host's."""
    from dataclasses import replace

    from . import api
    btf = getattr(args, "kernel_btf", None)
    try:
        if args.kernel or btf:
            entry = next((e for e in cfg.kernel_entries if e.name == args.kernel), None)
            if entry is not None and not btf:
                cpus = (args.cpus,) if args.cpus else entry.cpus
                return api.profiles((), cfg.cpus, (), [replace(entry, cpus=cpus)])
            return [_profile(args)]
        if cfg.kernel_entries or cfg.kernels:
            return api.profiles(cfg.kernels, [args.cpus] if args.cpus else cfg.cpus, (),
                                cfg.kernel_entries)
        return [_profile(args)]
    except ValueError as e:
        raise _Usage(str(e)) from None


def _maps_from_saved(args: argparse.Namespace) -> int:
    from . import api
    from .report import snapshot as report
    if args.objects:
        raise _Usage("give either objects or --from-bpftool, not both")
    try:
        profile = None if args.no_memory else _profile(args)
        snap = api.load_snapshot(args.from_bpftool, profile=profile)
    except ValueError as e:
        raise _Usage(str(e)) from None
    if profile is not None and not args.kernel:
        print(f"bpfmem: modelling kernel {profile.version} with {profile.possible_cpus} CPUs "
              "(this host; --kernel/--cpus for the node's)", file=sys.stderr)
    doc = api.snapshot_document(snap, profile)
    if args.format == "json":
        report.render_json(doc, sys.stdout, indent=2 if sys.stdout.isatty() else None)
    else:
        report.render_table(doc, sys.stdout, width=args.width)
    return EXIT_OK


def _profile(args: argparse.Namespace):
    """The one kernel profile of a command's --kernel/--kernel-btf/--cpus (api.profile)."""
    from . import api
    try:
        return api.profile(args.kernel, btf=getattr(args, "kernel_btf", None), cpus=args.cpus)
    except ValueError as e:
        raise _Usage(str(e)) from None


class _Usage(Exception):
    """A bad argument found after parsing: exit 2 with one line."""


def cmd_estimate(args: argparse.Namespace) -> int:
    from . import api

    prof = _profile(args)
    if args.batch:
        return api.estimate_batch_stream(_open_in(args.batch), sys.stdout, prof)
    if not args.type:
        raise _Usage("estimate needs --type (or --batch FILE)")
    try:
        shape = api.shape_from_args(args.type, args.key_size, args.value_size,
                                    args.max_entries or 0, args.flags, args.map_extra)
    except ValueError as e:
        raise _Usage(str(e)) from None
    if args.max_entries is None:
        raise _Usage("estimate needs --max-entries N (for a ring buffer its size in bytes, "
                     "e.g. 262144)")
    _render(api.estimate_map(shape, prof, args.entries), args.format, sys.stdout)
    return EXIT_OK


def _config(args: argparse.Namespace):
    from .config import load_config
    return load_config(args.config)


def _whatif(args: argparse.Namespace, cfg):
    from . import api
    try:
        return api.make_whatif(list(cfg.sets) + list(args.set), args.size_ratio,
                               args.node_memory, cfg.dynamic)
    except ValueError as e:
        raise _Usage(str(e)) from None


def _emit(result, args: argparse.Namespace, **options) -> None:
    from .report.output import emit
    emit(args.output, lambda out: _render(result, args.format, out, **options))


def _emit_each(results: list, args: argparse.Namespace) -> None:
    """Results for several kernels: JSON as one matrix document, text and markdown one
    after the other; the other formats take one kernel (--kernel NAME picks it)."""
    from .analysis.matrix import one_or_matrix
    if len(results) > 1 and args.format not in ("table", "json", "markdown"):
        raise _Usage(f"--format {args.format} shows one kernel: bpfmem.toml lists "
                     f"{len(results)}; pick one with --kernel NAME or --kernel-btf FILE")
    _emit(one_or_matrix(results), args)


def _list(text: str | None) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()] if text else []


def expand_objects(arguments: Sequence[str]) -> list[str]:
    """The one rule for object arguments in every command: each argument is a path, a glob
    bpfmem expands itself when quoted ('build/*.o'), or a quoted list of them
    ('a.o b/*.o'); a glob that matches nothing is a usage error, not a silent empty list."""
    import glob
    import os
    paths: list[str] = []
    for arg in arguments:
        parts = [arg] if os.path.exists(arg) else arg.split()
        for part in parts:
            if glob.has_magic(part):
                hits = sorted(glob.glob(part))
                if not hits:
                    raise _Usage(f"no file matches {part!r}")
                paths += hits
            else:
                paths.append(part)
    return paths


def _default_objects(arguments: Sequence[str]) -> list[str]:
    """The objects given (globs expanded), or the bundled example, said on stderr."""
    from . import api
    paths = expand_objects(arguments)
    if not paths:
        paths = [str(api.example_object_path())]
        print(f"bpfmem: no object given; showing the bundled example {paths[0]}",
              file=sys.stderr)
    return paths


def cmd_check(args: argparse.Namespace) -> int:
    import time
    from datetime import datetime, timezone

    from . import api
    from .units import parse_size

    started = datetime.now(timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds")
    t0 = time.monotonic()
    try:
        cfg = _config(args)
        from . import cli_size
        if cli_size.binary_gate_applies(args, cfg, expand_objects(args.objects)):
            return cli_size.cmd_check_binaries(args, cfg, expand_objects(args.objects))
        limit = parse_size(args.limit) if args.limit is not None else cfg.limit
        if limit is None:
            raise _Usage("check needs --limit (or `limit` in bpfmem.toml)")
        if limit <= 0:
            raise _Usage(f"--limit must be more than 0 bytes, not {args.limit or limit!r}")
        cpus = [_positive(c) for c in _list(args.cpus)] or cfg.cpus
        kernels = _list(args.kernel)
        configured = () if (kernels or args.kernel_btf) else cfg.kernel_entries
        profiles = api.profiles(kernels or ([] if args.kernel_btf else cfg.kernels), cpus,
                                args.kernel_btf, configured)
        fraction = args.max_fraction if args.max_fraction is not None else (
            cfg.max_fraction if cfg.max_fraction is not None else 1.0)
        if not 0 < fraction <= 1:
            raise _Usage(f"--max-fraction must be in (0, 1], not {fraction}")
        result = api.check_objects(
            expand_objects(args.objects), limit=limit, profiles=profiles, max_fraction=fraction,
            full=bool(args.full if args.full is not None else cfg.full),
            whatif=_whatif(args, cfg), object_limits=cfg.object_limits, map_caps=cfg.map_caps,
            config=cfg.path,
            loader=[_loader_of(argparse.Namespace(loader=x), cfg)
                    for x in (_list(args.loader) or [None])])
    except (ValueError, argparse.ArgumentTypeError) as e:
        raise _Usage(str(e)) from None
    junit = ({"timestamp": started, "seconds": time.monotonic() - t0}
             if args.format == "junit" else {})
    _emit(result, args, **junit)
    return EXIT_OK if result.passed else EXIT_ERROR


def cmd_diff(args: argparse.Namespace) -> int:
    from . import api
    from .units import parse_size

    if args.unquoted:
        n = 2 + len(args.unquoted)
        raise _Usage(f"diff takes OLD and NEW, got {n} arguments: if the shell expanded a glob, "
                     "quote each side so bpfmem expands it: bpfmem diff 'base/*.o' 'build/*.o'")
    old_snap, new_snap = api.is_snapshot_file(args.old), api.is_snapshot_file(args.new)
    if (old_snap or str(args.old).endswith(".json")) and \
            (new_snap or str(args.new).endswith(".json")) and (old_snap or new_snap):
        # two snapshots (one of them may be the bad file: its error names it)
        from .report.snapshot import render_snapshot_diff
        if args.format not in ("table", "json", "markdown"):
            raise _Usage(f"two snapshots diff as table, json or markdown, not {args.format}")
        try:
            doc = api.diff_snapshots(args.old, args.new)
        except ValueError as e:
            raise _Usage(str(e)) from None
        from .report.output import emit
        emit(args.output, lambda out: render_snapshot_diff(doc, args.format, out))
        return EXIT_OK
    try:
        cfg = _config(args)
        limit = parse_size(args.limit) if args.limit is not None else cfg.limit
        if limit is not None and limit <= 0:
            raise _Usage(f"--limit must be more than 0 bytes, not {args.limit or limit!r}")
        whatif = _whatif(args, cfg)
        old, new = expand_objects([args.old]), expand_objects([args.new])
        both = _loader_of(args, cfg)
        old_loader = _loader_of(argparse.Namespace(loader=args.old_loader or both))
        new_loader = _loader_of(argparse.Namespace(loader=args.new_loader or both))
        results = [api.diff_objects(old, new, profile=p, whatif=whatif, limit=limit,
                                    old_loader=old_loader, new_loader=new_loader)
                   for p in _kernels(args, cfg)]
    except ValueError as e:
        raise _Usage(str(e)) from None
    _warn("diff", list(results[0].warnings) if results else [])
    _emit_each(results, args)
    return EXIT_OK


def cmd_advise(args: argparse.Namespace) -> int:
    from . import api
    try:
        occ = api.load_occupancy(args.occupancy) if args.occupancy else None
    except ValueError as e:
        raise _Usage(str(e)) from None
    paths = _default_objects(args.objects)
    cfg = _config(args)
    loader = _loader_of(args, cfg)
    results = [api.advise_objects(paths, profile=p, occupancy=occ, loader=loader)
               for p in _kernels(args, cfg)]
    if args.apply:
        sets = list(dict.fromkeys(s for r in results for o in r.objects for s in o.apply))
        import shlex      # unquoted where safe, so $(bpfmem advise ... --apply) works too
        print(" ".join(f"--set {shlex.quote(s)}" for s in sets))
        return EXIT_OK
    _emit_each(results, args)
    return EXIT_OK


def note_leftovers() -> None:
    """Before making scratch state: remove (and name) what killed runs left behind."""
    from . import api
    removed, failed = api.sweep_leftovers()
    if removed:
        print(f"bpfmem: removed what an earlier run killed before cleaning up left behind: "
              f"{', '.join(removed)}", file=sys.stderr)
    if failed:
        print(f"bpfmem: warning: could not remove leftovers of an earlier run: "
              f"{', '.join(failed)}", file=sys.stderr)


def cmd_measure(args: argparse.Namespace) -> int:
    from . import api
    from .config import load_config
    note_leftovers()
    result = api.measure_object(args.object, vm_kernel=args.vm_kernel, fill=args.fill,
                                cpus=args.cpus, loader=_loader_of(args, load_config(None)))
    _render(result, args.format, sys.stdout)
    return EXIT_OK


def _open_in(path: str):
    if path == "-":
        return sys.stdin
    from .inputs import input_lines
    return input_lines(path)


def _live_usage():
    from .cli_live import Usage
    return Usage


def _dispatch(parser, args) -> int:
    if args.command == "maps":
        return cmd_maps(args)
    if args.command == "estimate":
        return cmd_estimate(args)
    if args.command == "measure":
        return cmd_measure(args)
    if args.command == "check":
        return cmd_check(args)
    if args.command == "advise":
        return cmd_advise(args)
    if args.command == "diff":
        return cmd_diff(args)
    from . import cli_live, cli_pod, cli_size
    if args.command in cli_size.COMMANDS:
        return cli_size.COMMANDS[args.command](args)
    if args.command in cli_live.COMMANDS:
        return cli_live.COMMANDS[args.command](args)
    if args.command in cli_pod.COMMANDS:
        return cli_pod.COMMANDS[args.command](args)
    parser.error(f"unknown command {args.command}")
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    from .errors import BpfmemError
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if getattr(args, "kernel", None):
        _warn(args.command, _unmodelled_releases(_list(args.kernel)))
    from .host.cleanup import signals_interrupt
    try:
        with signals_interrupt():   # SIGTERM and SIGHUP end a command as Ctrl-C does
            return _dispatch(parser, args)
    except (_Usage, _live_usage()) as e:
        print(f"bpfmem {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BpfmemError as e:     # the one place errors become one-line messages
        _fail(str(e))
        return EXIT_ERROR
    except BrokenPipeError:
        # the reader went away (`bpfmem ... | head`): not an error; keep Python's exit-time
        # flush from failing on the closed pipe too
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except OSError as e:
        _fail(f"{e.filename}: {e.strerror}" if e.filename else str(e.strerror or e))
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("bpfmem: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
