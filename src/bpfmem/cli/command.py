"""What a ``bpfmem`` command is: a name, the help that teaches it, its arguments and ``run``.

Each command module defines one :class:`Command` subclass and an instance of it, ``COMMAND``;
:mod:`bpfmem.cli` lists them in the order ``bpfmem --help`` shows them. A command module
imports only light modules at the top (argparse, this package): what ``run`` needs is
imported inside it, so ``bpfmem --help`` and ``bpfmem maps`` import no other command's
dependencies.
"""

from __future__ import annotations

import argparse

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


class Command:
    """One ``bpfmem NAME``. Subclasses set the texts and implement the two methods."""

    name: str = ""
    help: str = ""            # the line in `bpfmem --help`'s command list
    description: str = ""     # the paragraph at the top of `bpfmem NAME --help`
    epilog: str | None = None  # what you see, examples (printed as written)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Declare the command's arguments on its subparser."""
        raise NotImplementedError

    def run(self, args: argparse.Namespace) -> int:
        """Do the command: call :mod:`bpfmem.api`, render the result; the exit status (0 ok,
        1 error or over budget). Usage problems raise :class:`bpfmem.errors.UsageError`."""
        raise NotImplementedError

    def add_parser(self, subparsers) -> argparse.ArgumentParser:
        """The command's subparser, with its arguments, that dispatches to this object."""
        p = subparsers.add_parser(self.name, help=self.help, description=self.description,
                                  epilog=self.epilog,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        self.add_arguments(p)
        p.set_defaults(command_object=self)
        return p
