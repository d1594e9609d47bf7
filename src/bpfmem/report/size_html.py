"""A self-contained HTML page of a ``bpfmem size diff`` (a
:class:`~bpfmem.analysis.size.SizeDiff`): a treemap of the new build (module -> package, sized
by file bytes, coloured by growth since the old build) and the table of changes."""

from __future__ import annotations

from ..units import count

from typing import Any

from ..units import format_delta, format_size
from .html import _esc, _layout, _plot_div, _plotly, page
from .size import chain_words, shown_deltas, treemap_rows, why_note

__all__ = ["render_size_diff_html", "SIZE_TREEMAP_ID"]

SIZE_TREEMAP_ID = "bpfmem-size-treemap"


def _growth(old: int, new: int) -> float:
    """-1 (gone to nothing) .. 0 (same) .. +1 (new or doubled and more)."""
    if old == 0:
        return 1.0 if new else 0.0
    return max(-1.0, min(1.0, (new - old) / old))


def _treemap(go: Any, tree: list[dict[str, Any]]) -> Any:
    ids, labels, parents, values, colors, hover = [], [], [], [], [], []
    mods: dict[str, list[int]] = {}
    for r in tree:
        m = mods.setdefault(r["module"], [0, 0])
        m[0] += r["file"]
        m[1] += r["old"]
    for name, (new, old) in mods.items():
        ids.append(f"m:{name}")
        labels.append(name)
        parents.append("")
        values.append(new)
        colors.append(_growth(old, new))
        hover.append(f"<b>{_esc(name)}</b><br>{format_size(old)} → {format_size(new)} "
                     f"({format_delta(new - old)})")
    for r in tree:
        ids.append(f"p:{r['package']}")
        labels.append(r["package"])
        parents.append(f"m:{r['module']}")
        values.append(r["file"])
        colors.append(_growth(r["old"], r["file"]))
        hover.append(f"<b>{_esc(r['package'])}</b><br>{format_size(r['old'])} → "
                     f"{format_size(r['file'])} ({format_delta(r['file'] - r['old'])})")
    fig = go.Figure(go.Treemap(
        ids=ids, labels=labels, parents=parents, values=values, branchvalues="total",
        hovertext=hover, hoverinfo="text",
        marker=dict(colors=colors, cmin=-1, cmax=1, colorscale=[
            [0, "#2e7d32"], [0.5, "#eef1f4"], [0.75, "#f2c94c"], [1, "#c62828"]],
            showscale=True, colorbar=dict(title="growth", tickformat=".0%", len=0.6)),
        pathbar=dict(visible=True)))
    fig.update_layout(**_layout())
    return fig


def render_size_diff_html(diff, *, title: str = "bpfmem: binary size diff") -> str:
    go, pio, _ = _plotly()
    tdiv, tjs = _plot_div(pio, _treemap(go, treemap_rows(diff)), SIZE_TREEMAP_ID, 620)
    old, new = diff.old.file_size, diff.new.file_size
    delta = new - old
    facts = [("old", diff.old.path), ("new", diff.new.path),
             ("size", f"{format_size(old)} → {format_size(new)}"),
             ("change", format_delta(delta))]
    dl = "".join(f"<div><dt>{_esc(a)}</dt><dd>{_esc(b)}</dd></div>" for a, b in facts)
    cls = "fail" if delta > 0 else "pass"
    header = (f'<header><h1>{_esc(title)}</h1><span class="verdict {cls}">'
              f'{_esc(format_delta(delta))}</span><dl class="facts">{dl}</dl></header>')
    shown, _rest = shown_deltas(diff)
    rows = "".join(
        f"<tr><td><code>{_esc(r.name)}</code></td>"
        f"<td class=\"num\">{format_size(r.old)}</td>"
        f"<td class=\"num\">{format_size(r.new)}</td>"
        f"<td class=\"num\">{format_delta(r.delta)}</td>"
        "</tr>" for r in shown if r.delta)
    table = (f'<table class="diff"><tr><th>{_esc(diff.by)}</th><th class="num">old</th>'
             f'<th class="num">new</th><th class="num">change</th></tr>{rows}</table>')
    if diff.why:
        items = "".join(
            f"<li>dropping the import <code>{_esc(s.importer)} → {_esc(s.imported)}"
            f"</code> saves <b>{format_size(s.saves)}</b> ({count(s.count, 'package')}); "
            f"chain <code>{_esc(chain_words(s.chain, ' → '))}</code></li>" for s in diff.why.savings)
        why_html = f'<ul class="offenders">{items}</ul>'
    else:
        why_html = f'<p class="note">{_esc(why_note(diff.why, diff.new) or "")}</p>'
    sections = [
        '<section class="card"><h2>The new build by module and package</h2>'
        '<p class="note">Cell size: file bytes in the new build; colour: growth since the old '
        f'build (red grew, green shrank). Click a module to zoom.</p>{tdiv}</section>',
        '<div class="grid">'
        f'<section class="card"><h2>What changed</h2><div class="table-wrap">{table}</div>'
        f'</section><section class="card"><h2>Why it is linked</h2>{why_html}</section></div>']
    return page(title, header, sections, [tjs])
