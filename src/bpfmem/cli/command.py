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
        return "\n".join(fill_help(text, width, indent))


def _lead(line: str) -> int:
    return len(line) - len(line.lstrip())


_EXAMPLE = ("bpfmem ", "$ ", "python3 ", "sudo ", "curl ", "kubectl ")


def fill_help(text: str, width: int, indent: str = "") -> list[str]:
    """The description or epilog of a command, fitted to ``width`` without cutting a word:

    - a heading (``examples:``) and a blank line stay as they are;
    - an example (``bpfmem ...``) keeps its line; when too long, its comment (after two or
      more spaces) goes on the next line, and what still does not fit wraps under it;
    - a definition (``  memlock  what fdinfo shows``) wraps under its text;
    - prose is one paragraph per run of lines at one indent, refilled to the width (lines
      wrapped by hand at another width are joined first, so nothing is broken twice)."""
    import re
    import textwrap

    def wrap(words: str, first: str, rest: str) -> list[str]:
        return textwrap.wrap(words, width, initial_indent=first, subsequent_indent=rest,
                             break_on_hyphens=False, break_long_words=False) or [first.rstrip()]

    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        body = line.strip()
        lead = indent + line[:_lead(line)]
        if not body or (body.endswith(":") and _lead(line) == 0 and len(body) < 60):
            out.append((indent + line) if body else "")
            i += 1
            continue
        # the lines that continue this one: indented deeper, not an example of their own
        j = i + 1
        while j < len(lines) and lines[j].strip() and _lead(lines[j]) > _lead(line) \
                and not lines[j].strip().startswith(_EXAMPLE):
            j += 1
        more = [x.strip() for x in lines[i + 1:j]]
        if body.startswith(_EXAMPLE):
            m = re.match(r"(.*?\S)\s{2,}(\S.*)$", body)
            cmd, comment = (m.group(1), m.group(2)) if m else (body, "")
            comment = " ".join([comment, *more]).strip()
            whole = lead + line.strip() if not more else None
            if whole is not None and len(whole) <= width:
                out.append(whole)
            else:
                out += wrap(cmd, lead, lead + "    ")
                if comment:
                    out += wrap(comment, lead + "    ", lead + "    ")
            i = j
            continue
        m = re.match(r"(\S+(?: \S+)?)(\s{2,})(\S.*)$", body)
        if m and len(m.group(1)) <= 18 and _lead(line) > 0:      # a definition
            term, gap, text_ = m.groups()
            col = len(lead) + len(term) + len(gap)
            under = " " * col if col <= width // 2 else lead + "    "
            out += wrap(" ".join([text_, *more]), lead + term + gap, under)
            i = j
            continue
        # prose: this line and the next ones at the same indent
        k = i + 1
        while k < len(lines) and lines[k].strip() and _lead(lines[k]) == _lead(line) \
                and not lines[k].strip().startswith(_EXAMPLE) \
                and not (lines[k].strip().endswith(":") and _lead(lines[k]) == 0):
            k += 1
        para = [x.strip() for x in lines[i:k]]
        if all(len(lead + x) <= width for x in para):
            out += [lead + x for x in para]       # every line fits as written
        else:
            out += wrap(" ".join(para), lead, lead)
        i = k
    return out


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
