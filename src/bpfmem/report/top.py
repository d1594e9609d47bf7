"""The ``bpfmem top`` frame: a header with totals and the largest maps, from a snapshot
document (never from the kernel)."""

from __future__ import annotations

import time
from typing import Any

from .escape import markup
from ..units import format_size
from .snapshot import SORTS, _owner_text, _tail, table_rows

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


def top_view(doc: dict, *, total_maps: int, rows: int, filters: dict[str, Any],
             interval: float, sort: str = "memlock", keys: bool = False):
    """A rich renderable: header (totals, filters, scan time) and the top ``rows`` maps."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    t = doc["totals"]
    shown = t["maps"]
    flt = "  ".join(f"{k}={v}" for k, v in filters.items())
    hot = sum(1 for m in doc["maps"] if (m["pressure"] or 0) >= 0.9)
    mism = (t.get("model_status") or {}).get("mismatch", 0)
    head = Text.from_markup(
        f"[bold]bpfmem top[/]  {doc['host']['hostname']}  kernel {doc['host']['kernel']}  "
        f"{time.strftime('%H:%M:%S')}  every {interval:g}s  scan {doc['duration_s'] * 1000:.0f} ms\n"
        f"maps [bold]{shown:,}[/]" + (f" of {total_maps:,}" if shown != total_maps else "") +
        f"   memlock [bold]{format_size(t['memlock'])}[/]"
        + (f"   model charge {format_size(t['charged_model'])}" if t.get("charged_model") else "")
        + (f"   [bold red]{hot} maps ≥90% full[/]" if hot else "")
        + (f"   [red]{mism} model mismatches[/]" if mism else "")
        + (f"\nfilter: {flt}" if flt else "")
        + f"\nsort: {sort}" + ("   [dim](s: sort by memlock/pressure/entries/name, q: quit)[/]"
                                if keys else ""))
    table = Table(expand=True, box=None, header_style="bold reverse", pad_edge=False)
    total = t["memlock"] or 1
    rows_ = []
    for r in table_rows(doc, rows, sort):
        entries = "-" if r["entries"] is None else (
            f"{r['entries']:,}" + ("" if r["entries_complete"] else "+"))
        cg = r["owners"][0]["cgroup"] if r["owners"] else None
        rows_.append((str(r["id"]), markup(r["name"]), r["type"], f"{r['max_entries']:,}",
                      entries, _pressure(r["pressure"]), format_size(r["memlock"]),
                      f"{(r['memlock'] or 0) / total:.1%}", markup(_owner_text(r)),
                      markup(_tail(cg, 48))))
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
    by_cg = doc["cgroups"][:3]
    foot = Text("top cgroups: " + "   ".join(
        f"{_tail(c['cgroup'] or '(unheld)', 40)} {format_size(c['memlock'])} ({c['maps']})"
        for c in by_cg), style="dim") if by_cg else Text("")
    from .tables import Fitted
    return Fitted(Group(head, table, foot))
