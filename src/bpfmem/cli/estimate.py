"""``bpfmem estimate``: what one map shape (or thousands, --batch) costs on a kernel."""

from __future__ import annotations

import argparse
import sys

from . import args as a
from .command import EXIT_OK, Command

EPILOG = """one map:
  bpfmem estimate --type lru_hash --key-size 16 --value-size 40 --max-entries 65536
  bpfmem estimate --type hash --key-size 8 --value-size 8 --max-entries 131072 \\
      --flags no_prealloc --entries 20000 --kernel 6.1 --cpus 96 --format json

many (capacity planning): one JSON spec per line in, one JSON result per line out:
  {"type": "lru_hash", "key_size": 16, "value_size": 40, "max_entries": 65536,
   "map_flags": 0, "map_extra": 0, "entries": 0, "cpus": 96}
  ("cpus" and "name" are optional: the line's possible CPUs, a label; any other key is an
  error on that line)
  bpfmem estimate --batch specs.jsonl > results.jsonl      (--batch - reads stdin)

Map types are the kernel's names (hash, lru_percpu_hash, ...); flags the kernel's without
BPF_F_, lower case (no_prealloc, mmapable, no_common_lru, zero_seed, numa_node, ...).
A map the kernel would refuse is reported with the kernel's errno and reason.
"""


class Estimate(Command):
    name = "estimate"
    help = "what one map shape (or thousands) costs on a kernel"
    description = ("Estimate memlock and the memory cgroup charge of a map, at create, with "
                   "some entries, and full.")
    epilog = EPILOG

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--type", help="map type, e.g. hash, lru_hash, percpu_array, ringbuf")
        p.add_argument("--key-size", type=a.u32, default=None, metavar="K",
                       help="key size in bytes (required but for maps without keys: "
                            "ringbuf, user_ringbuf, queue, stack, bloom_filter)")
        p.add_argument("--value-size", type=a.u32, default=None, metavar="V",
                       help="value size in bytes (required but for ring buffers)")
        p.add_argument("--max-entries", type=a.u32, default=None, metavar="N",
                       help="max_entries (required; for a ring buffer, its size in bytes)")
        p.add_argument("--flags", default="", metavar="a,b",
                       help="map flags, e.g. no_prealloc,numa_node (or a number)")
        p.add_argument("--map-extra", type=a.u64, default=0, metavar="X",
                       help="bloom filter hash count, arena address")
        p.add_argument("--entries", type=a.u32, default=0, metavar="E",
                       help="entries present, for the `memlock`/`charged` figures (default 0)")
        p.add_argument("--batch", metavar="SPECS.jsonl",
                       help="estimate one JSON spec per line ('-' for stdin); JSON lines out")
        a.add_format(p, ("table", "json"), help=None)
        a.add_output_file(p)
        a.add_kernel(p)

    def run(self, args: argparse.Namespace) -> int:
        from .. import api
        from ..errors import UsageError
        from .common import as_usage, profile_of
        from .output import emit, render

        prof = profile_of(args)
        if args.batch:
            lines = sys.stdin if args.batch == "-" else api.read_lines(args.batch)
            if args.output:
                from ..report.output import emit as emit_to
                status = []
                emit_to(args.output,
                        lambda out: status.append(api.estimate_batch_stream(lines, out, prof)))
                return status[0]
            return api.estimate_batch_stream(lines, sys.stdout, prof)
        if not args.type:
            raise UsageError("estimate needs --type (or --batch FILE)")
        with as_usage():
            shape = api.shape_from_args(args.type, args.key_size or 0, args.value_size or 0,
                                        args.max_entries or 0, args.flags, args.map_extra)
        kind = args.type.strip().lower()
        keyless = kind in ("ringbuf", "user_ringbuf", "queue", "stack", "bloom_filter")
        if args.key_size is None and not keyless:
            raise UsageError(f"estimate needs --key-size BYTES for a {args.type} map")
        if args.value_size is None and kind not in ("ringbuf", "user_ringbuf"):
            raise UsageError(f"estimate needs --value-size BYTES for a {args.type} map")
        if args.max_entries is None:
            raise UsageError("estimate needs --max-entries N (for a ring buffer its size in "
                             "bytes, e.g. 262144)")
        fp = api.estimate_map(shape, prof, args.entries)
        emit(args.output, lambda out: render(fp, args.format, out))
        return EXIT_OK


COMMAND = Estimate()
