"""One escaping rule per output format for text that comes from inputs (map and program
names from an object's symbols and BTF, section names, paths, comms, cgroups).

* terminal: ANSI escape sequences and every other control character are removed, and the
  text never reaches rich as markup (``[bold]`` in a map name stays ``[bold]``);
* Markdown: the terminal rule, then a code span that survives any backticks in the name
  and ``|`` escaped so a GitHub table keeps its columns; plain cells escape Markdown's
  punctuation and HTML;
* HTML and XML use the standard library's escapes where they are written (html.py, junit.py).
"""

from __future__ import annotations

import errno
import os
import re

__all__ = ["for_terminal", "term", "markup", "md_code", "md_text"]

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), and two-character escapes
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-_]?)"
                   r"|\x9b[0-?]*[ -/]*[@-~]?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def for_terminal(text: object) -> str:
    """``text`` without escape sequences or control characters (each becomes ``?``)."""
    return _CONTROL.sub("?", _ANSI.sub("", str(text)))


def term(text: object, style: str = ""):
    """A rich Text of ``text`` for a table cell: cleaned, and never read as markup."""
    from rich.text import Text
    return Text(for_terminal(text), style=style)


def markup(text: object) -> str:
    """``text`` cleaned and escaped for a string rich reads as markup."""
    from rich.markup import escape
    return escape(for_terminal(text))


def md_code(text: object) -> str:
    """``text`` as a Markdown code span inside a table cell."""
    s = for_terminal(text).replace("|", "\\|")
    longest = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or longest else ""
    return f"{fence}{pad}{s}{pad}{fence}"


_MD_SPECIAL = re.compile(r"([\\`*\[\]<|])")   # (an intraword _ is not emphasis in GFM)


def md_text(text: object) -> str:
    """``text`` as plain Markdown (a heading, a cell): punctuation and HTML escaped."""
    return _MD_SPECIAL.sub(r"\\\1", for_terminal(text)).replace("&", "&amp;")


def console(**kwargs):
    """The rich Console every terminal renderer prints through: the terminal rule is applied
    to the text of every segment it writes (its own colours are styles, kept), so no escape
    sequence or control character from an input reaches the terminal, whichever renderer
    printed it; and every table it prints follows report/tables.py (no word cut at any
    width)."""
    from rich.console import Console
    from rich.segment import Segment

    class _Console(Console):
        def print(self, *objects, **kwargs):
            from .tables import fit   # one table style: no word cut at any width
            super().print(*(fit(self, o) for o in objects), **kwargs)

        def _render_buffer(self, buffer):
            text = super()._render_buffer(
                seg if seg.control else Segment(_clean_keep_newlines(seg.text), seg.style,
                                                seg.control)
                for seg in buffer)
            # a table pads its lines to its width: no line ends in spaces (styles kept)
            return _TRAILING.sub(r"\1", text)

        def on_broken_pipe(self) -> None:
            # the reader of stdout went away (`bpfmem ... | head`): rich would exit 1 here;
            # the CLI ends quietly with 0 instead (bpfmem.cli.exits)
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    return _Console(**kwargs)


_TRAILING = re.compile(r" +((?:\x1b\[[0-9;]*m)*)$", re.M)
_CONTROL_NO_NL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _clean_keep_newlines(text: str) -> str:
    if not _CONTROL_NO_NL.search(text) and "\x1b" not in text:
        return text
    return _CONTROL_NO_NL.sub("?", _ANSI.sub("", text))
