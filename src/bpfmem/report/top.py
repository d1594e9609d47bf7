"""The ``bpfmem top`` frame: a header with totals and the largest maps, from a
:class:`~bpfmem.analysis.live.SnapshotView` (never from the kernel)."""

from __future__ import annotations

import time
from typing import Any

from .escape import markup
from ..units import count, format_share, format_size
from .snapshot import SORTS, _cgroup, _entries, _owner_text, _tail, table_rows
from .snapshot import _pressure as _press
from ..uapi import map_type_name

__all__ = ["top_view", "SORTS"]


def _pressure(p: float | None) -> str:
    if p is None:
        return "-"
    text = f"{p:.0%}"
    if p >= 0.9:
        return f"[bold white on red]{text}[/]"
    if p >= 0.75:
        return f"[black on yellow]{text}[/]"
    return text


def _programs_line(view) -> str:
    """The programs beside the maps (a scan that listed them): count, memlock, JIT images,
    and the JIT's vmalloc against bpf_jit_limit."""
    t = view.programs
    if t is None:
        return ""
    j = view.snapshot.jit
    jit = (f"   JIT vmalloc {format_size(j.in_use)} of {format_size(j.limit)}"
           if j is not None and j.in_use is not None and j.limit else "")
    return (f"\nprograms [bold]{t.node.programs:,}[/]   memlock "
            f"[bold]{format_size(t.node.memlock)}[/]   JIT images {format_size(t.node.jited)}"
            f"{jit}   BTF loaded {format_size(t.btf_bytes)} in {count(t.btf_objects, 'object')}")


def top_view(view, *, total_maps: int, rows: int, filters: dict[str, Any],
             interval: float, sort: str = "memlock", keys: bool = False,
             clock: str | None = None):
    """A rich renderable: header (totals, filters, scan time) and the top ``rows`` maps;
    ``clock`` the time it shows (default: now, as HH:MM:SS)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    s = view.snapshot
    shown = len(view.maps)
    flt = "  ".join(f"{k}={v}" for k, v in filters.items())
    hot = sum(1 for m in view.maps if (_press(m) or 0) >= 0.9)
    mism = dict(view.model_status).get("mismatch", 0)
    head = Text.from_markup(
        f"[bold]bpfmem top[/]  {s.hostname}  kernel {s.kernel}  "
        f"{clock or time.strftime('%H:%M:%S')}  every {interval:g}s  "
        f"scan {round(s.duration, 3) * 1000:.0f} ms\n"
        f"maps [bold]{shown:,}[/]" + (f" of {total_maps:,}" if shown != total_maps else "") +
        f"   memlock [bold]{format_size(view.memlock)}[/]"
        + (f"   model charge {format_size(view.charged_model)}" if view.charged_model else "")
        + (f"   [bold red]{count(hot, 'map')} ≥90% full[/]" if hot else "")
        + (f"   [red]{mism} model mismatches[/]" if mism else "")
        + _programs_line(view)
        + (f"\nfilter: {flt}" if flt else "")
        + f"\nsort: {sort}" + ("   [dim](s: sort by memlock/pressure/entries/name, q: quit)[/]"
                                if keys else ""))
    table = Table(expand=True, box=None, header_style="bold reverse", pad_edge=False)
    total = view.memlock or 1
    rows_ = []
    for m, _check in table_rows(view, rows, sort):
        rows_.append((str(m.id), markup(m.name), map_type_name(m.type), f"{m.max_entries:,}",
                      _entries(m), _pressure(_press(m)), format_size(m.memlock),
                      format_share((m.memlock or 0) / total), markup(_owner_text(m)),
                      markup(_tail(_cgroup(m), 48))))
    for i, (col, just) in enumerate((("ID", "right"), ("NAME", "left"), ("TYPE", "left"),
                                     ("MAX", "right"), ("ENTRIES", "right"),
                                     ("PRESS", "right"), ("MEMLOCK", "right"),
                                     ("SHARE", "right"), ("OWNER", "left"),
                                     ("CGROUP", "left"))):
        widest = max([len(col)] + [Text.from_markup(row[i]).cell_len for row in rows_])
        flexible = col == "CGROUP"   # a path's end ("…/pod…/cri-containerd-…"); the rest
        #                              whole, or the rows drawn as blocks
        table.add_column(col, justify=just, no_wrap=True, overflow="ellipsis",
                         min_width=min(widest, 12) if flexible else widest,
                         ratio=1 if col == "CGROUP" else None)
    for row in rows_:
        table.add_row(*row)
    by_cg = view.cgroups[:3]
    foot = Text("top cgroups: " + "   ".join(
        f"{_tail(c.cgroup or '(unheld)', 40)} {format_size(c.memlock)} ({c.maps})"
        for c in by_cg), style="dim") if by_cg else Text("")
    from .tables import Fitted
    return Fitted(Group(head, table, foot))
