"""What a ``bpfmem`` command is: a name, the help that teaches it, its arguments and ``run``.

Each command module defines one :class:`Command` subclass and an instance of it, ``COMMAND``;
:mod:`bpfmem.cli` lists them in the order ``bpfmem --help`` shows them. A command module
imports only light modules at the top (argparse, this package): what ``run`` needs is
imported inside it, so ``bpfmem --help`` and ``bpfmem maps`` import no other command's
dependencies.
"""

from __future__ import annotations

import argparse
import os
import sys

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
#: the binary gate: a binary could not be read (1 is "over its limit" there)
EXIT_UNREADABLE = 3


def terminal_columns(fallback: int = 80) -> int:
    """The terminal's width as ``shutil.get_terminal_size`` gives it: ``$COLUMNS``, else the
    terminal on standard output, else ``fallback``."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or fallback
    except (AttributeError, ValueError, OSError):
        return fallback


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The one help style: never a flag or a word cut. The options' help wraps at spaces only
    (textwrap breaks ``--max-entries`` after ``--max-`` by default), and the description and
    epilog keep their lines as written but wrap one wider than the terminal at its spaces
    (an indented example's continuation indented under it)."""

    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
        # argparse imports shutil (and with it bz2, lzma, fnmatch) for the terminal's width
        # every time it makes a formatter, which add_argument does for each argument
        if width is None:
            width = terminal_columns() - 2
        super().__init__(prog, indent_increment, max_help_position, width)

    def _split_lines(self, text, width):
        import textwrap
        text = self._whitespace_matcher.sub(" ", text).strip()
        return textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False)

    def _fill_text(self, text, width, indent):
        import textwrap
        lines = []
        for line in text.splitlines():
            if len(indent + line) <= width or not line.strip():
                lines.append(indent + line)
                continue
            lead = indent + line[:len(line) - len(line.lstrip())]
            under = lead + "    " if line[:1].isspace() else lead    # an example: indented
            lines += textwrap.wrap(line.strip(), width, initial_indent=lead,
                                   subsequent_indent=under, break_on_hyphens=False,
                                   break_long_words=False)
        return "\n".join(lines)


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
                                  formatter_class=HelpFormatter)
        self.add_arguments(p)
        p.set_defaults(command_object=self)
        return p
