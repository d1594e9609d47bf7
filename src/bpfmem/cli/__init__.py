"""The ``bpfmem`` command: a thin shell over :mod:`bpfmem.api`.

One module per command (``maps.py``, ``check.py``, ...), each a :class:`~.command.Command`
object with its name, help, arguments and ``run``; :data:`COMMANDS` lists them in the order
``bpfmem --help`` shows. Shared argument types and option groups are in ``args.py``, what
commands make of them (config, loader, kernels) in ``common.py``, "a file or stdout" in
``output.py``, and the one mapping of exceptions to exit codes (0 ok, 1 error or over budget,
2 usage) in ``exits.py``.
"""

from __future__ import annotations

import argparse
from importlib import import_module

from .. import __version__
from .command import EXIT_ERROR, EXIT_OK, EXIT_USAGE, Command, HelpFormatter

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Sequence

__all__ = ["main", "COMMANDS", "NAMES", "command", "Command", "EXIT_OK", "EXIT_ERROR",
           "EXIT_USAGE"]

# The commands in the order `bpfmem --help` lists them; each is the module cli/<name>.py
# with its COMMAND. Only the one being run is imported and given its arguments: building
# all eleven parsers cost more than reading a small object.
NAMES: tuple[str, ...] = ("maps", "estimate", "check", "diff", "advise", "measure",
                          "snapshot", "top", "export", "pod", "size")


def command(name: str) -> Command:
    """The :class:`Command` ``bpfmem NAME`` runs (its module is imported now)."""
    return import_module(f"{__name__}.{name}").COMMAND


def __getattr__(name: str):
    if name == "COMMANDS":       # every command, imported: for --help, docs and tests
        return tuple(command(n) for n in NAMES)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

DESCRIPTION = ("What eBPF maps cost in memory, before the kernel charges it: read compiled "
               "BPF objects, model the kernel's accounting, measure real maps, gate CI.")

EPILOG = """start here:
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
"""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``bpfmem``: one subparser per command of :data:`NAMES`, or, with
    ``only``, the subparser of that one command (what ``main`` parses a command line with:
    the others would parse nothing of it)."""
    p = argparse.ArgumentParser(prog="bpfmem", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=HelpFormatter)
    p.add_argument("--version", action="version", version=f"bpfmem {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in NAMES if only is None else (only,):
        command(name).add_parser(sub)
    return p


def chosen_command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs, when it names one before anything the top-level parser
    itself answers (``--help``, ``--version``, no command, an unknown one): None then, and
    ``main`` builds the whole parser for the help or the error."""
    if not argv or argv[0].startswith("-"):   # bpfmem's own options come first, and exit
        return None
    return argv[0] if argv[0] in NAMES else None


_parser = build_parser      # (the name tests and the README check use)


def main(argv: Sequence[str] | None = None) -> int:
    """``bpfmem ARGS``: the exit status."""
    import sys
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(chosen_command(argv))
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    from .exits import run_guarded
    # What start-up made (modules, classes, the parser) lives until exit: frozen, no garbage
    # collection walks it again, the last one at exit included (17 M instructions of a
    # `maps` start-up of 170 M).
    import gc
    gc.freeze()
    command: Command = args.command_object
    if getattr(args, "kernel", None):
        from .common import unmodelled_releases
        from .output import warn
        from .args import comma_list
        warn(args.command, unmodelled_releases(comma_list(args.kernel)))
    return run_guarded(args.command, lambda: command.run(args))
