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
from typing import Sequence

from .. import __version__
from . import (advise, check, diff, estimate, export, maps, measure, pod, size, snapshot,
               top)
from .command import EXIT_ERROR, EXIT_OK, EXIT_USAGE, Command, HelpFormatter

__all__ = ["main", "COMMANDS", "Command", "EXIT_OK", "EXIT_ERROR", "EXIT_USAGE"]

COMMANDS: tuple[Command, ...] = (
    maps.COMMAND, estimate.COMMAND, check.COMMAND, diff.COMMAND, advise.COMMAND,
    measure.COMMAND, snapshot.COMMAND, top.COMMAND, export.COMMAND, pod.COMMAND,
    size.COMMAND,
)

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


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``bpfmem``: one subparser per command of :data:`COMMANDS`."""
    p = argparse.ArgumentParser(prog="bpfmem", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=HelpFormatter)
    p.add_argument("--version", action="version", version=f"bpfmem {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    return p


_parser = build_parser      # (the name tests and the README check use)


def main(argv: Sequence[str] | None = None) -> int:
    """``bpfmem ARGS``: the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    from .exits import run_guarded
    command: Command = args.command_object
    if getattr(args, "kernel", None):
        from .common import unmodelled_releases
        from .output import warn
        from .args import comma_list
        warn(args.command, unmodelled_releases(comma_list(args.kernel)))
    return run_guarded(args.command, lambda: command.run(args))
