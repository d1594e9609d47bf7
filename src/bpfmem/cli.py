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
  Every map a loader (libbpf) creates for the object: BTF-defined maps in SEC(".maps"),
  legacy SEC("maps") definitions, global data (.data, .rodata, .bss, .kconfig) as
  one-element arrays, and struct_ops maps; with the attributes the kernel will be given.
  Values a loader only knows at load time are marked: "at load" (perf event arrays get one
  slot per possible CPU), "*" (see the notes under the table).

examples:
  bpfmem maps                          the bundled example object
  bpfmem maps agent.bpf.o              one object
  bpfmem maps build/*.o --format json  several, as JSON (schema bpfmem/maps/v1)
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bpfmem",
        description="What eBPF maps cost in memory: read compiled BPF objects and list the "
                    "maps a loader creates.",
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
    m.add_argument("--format", choices=("table", "json"), default="table",
                   help="output format (default: table)")
    m.add_argument("--width", type=int, default=None, help=argparse.SUPPRESS)
    return p


def _fail(msg: str) -> None:
    print(f"bpfmem: error: {msg}", file=sys.stderr)


def cmd_maps(args: argparse.Namespace) -> int:
    from . import api
    from .errors import BpfmemError
    from .report import maps as report

    paths = list(args.objects)
    if not paths:
        paths = [str(api.example_object_path())]
        print(f"bpfmem: no object given; showing the bundled example {paths[0]}",
              file=sys.stderr)
    objects, errors = [], []
    for path in paths:
        try:
            objects.append(api.load_object(path))
        except BpfmemError as e:
            errors.append((path, str(e)))
            _fail(str(e))
        except OSError as e:
            msg = f"{path}: {e.strerror or e}"
            errors.append((path, msg))
            _fail(msg)
    doc = report.build_maps_report(objects, errors)
    if args.format == "json":
        report.render_json(doc, sys.stdout, indent=2 if sys.stdout.isatty() else None)
    else:
        report.render_table(doc, sys.stdout, width=args.width)
    return EXIT_ERROR if errors else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        if args.command == "maps":
            return cmd_maps(args)
    except KeyboardInterrupt:
        print("bpfmem: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    parser.error(f"unknown command {args.command}")
    return EXIT_USAGE


if __name__ == "__main__":
    raise SystemExit(main())
