"""The one table style of the terminal renderers: a rich table whose words are never cut.

A map name, a path, a type, a flag or a figure is either printed whole or not at all, at any
width: rich, given a table wider than the terminal, shrinks its columns below their longest
word and folds (``service_route_`` / ``table``) or crops (``mmapab``, ``…``) what no longer
fits. So, before a table is drawn:
- a column's ``max_width`` never cuts a word: it grows to the column's longest word (its whole
  cell when the column does not wrap);
- a table whose columns fit the width (each at its longest word) is drawn as it is, cells
  wrapping at spaces where they must;
- a table that cannot fit is drawn one row per block: the row's first cell on its own line
  (after its header), then ``header value`` pairs below it, indented, as many to a line as fit (a pair is never
  split; one longer than a line wraps at its spaces).

``escape.console`` applies this to every table any renderer prints (also inside a Group), so
renderers build ordinary rich tables and never meet the rule; ``Fitted`` applies it to a
frame drawn by something else (``bpfmem top``'s Live view)."""

from __future__ import annotations

from typing import Any

__all__ = ["fit", "Fitted"]

_INDENT = 4


def _text(console, cell: Any):
    """A cell as rich Text (a table reads str cells as markup: so does this)."""
    from rich.text import Text
    if isinstance(cell, Text):
        return cell
    if isinstance(cell, str):
        return console.render_str(cell)
    return None


def _widest(console, column) -> int:
    """The width a column needs so that none of its words (or cells, if it does not wrap) is
    cut: its header and cells at their longest word, or whole."""
    from rich.cells import cell_len
    need = 0
    for cell in (column.header, *column._cells):
        text = _text(console, cell)
        if text is None:
            continue
        if column.no_wrap:
            need = max(need, max((cell_len(line) for line in text.plain.splitlines()), default=0))
        else:
            need = max(need, max((cell_len(w) for w in text.plain.split()), default=0))
    return need


def _blocks(console, table, width: int):
    """The rows of ``table`` as blocks: the first non-empty cell, then the others under it as
    ``header value`` pairs."""
    from rich.console import Group
    from rich.padding import Padding
    from rich.text import Text

    out: list = []
    if table.title:
        out.append(_text(console, table.title) or table.title)
    headers = [(_text(console, c.header) or Text(str(c.header))).plain.strip()
               for c in table.columns]
    rows = max((len(c._cells) for c in table.columns), default=0)
    for i in range(rows):
        cells = [(_text(console, c._cells[i]) if i < len(c._cells) else None)
                 for c in table.columns]
        filled = [(h, t) for h, t in zip(headers, cells) if t is not None and t.plain.strip()]
        if not filled:
            continue
        h, head = filled[0]
        out.append(Text(h + " ", style="dim").append_text(head) if h else head)
        pairs = []
        for h, t in filled[1:]:
            pair = Text(h + " ", style="dim") if h else Text()
            pairs.append(pair.append_text(t))
        line, room = Text(), width - _INDENT
        for pair in pairs:                       # a header and its value stay on one line
            if line.plain and line.cell_len + 3 + pair.cell_len > room:
                out.append(Padding(line, (0, 0, 0, _INDENT)))
                line = Text()
            if line.plain:
                line.append("   ")
            line.append_text(pair)
        if line.plain:
            out.append(Padding(line, (0, 0, 0, _INDENT)))
    out.append(Text(""))
    return Group(*out)


def fit(console, renderable, width: int | None = None):
    """``renderable`` drawn by the rule above for ``width`` columns (the console's): tables
    (also inside a Group) kept whole or turned into blocks; anything else as it is."""
    from rich.console import Group
    from rich.measure import Measurement
    from rich.table import Table

    if isinstance(renderable, Group):
        return Group(*(fit(console, r, width) for r in renderable.renderables))
    if not isinstance(renderable, Table):
        return renderable
    for column in renderable.columns:
        if column.max_width is not None:
            column.max_width = max(column.max_width, _widest(console, column))
    width = width or console.width
    wide = console.options.update_width(1 << 16)   # measured unclamped, then compared
    if Measurement.get(console, wide, renderable).minimum <= width:
        return renderable
    return _blocks(console, renderable, width)


class Fitted:
    """A renderable drawn by the rule at whatever width it is given (a Live view's frame)."""

    def __init__(self, renderable):
        self.renderable = renderable

    def __rich_console__(self, console, options):
        yield fit(console, self.renderable, options.max_width)
