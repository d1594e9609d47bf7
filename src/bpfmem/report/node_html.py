"""A self-contained HTML page of a node snapshot (``bpfmem snapshot --format html``): a treemap
cgroup → holder → map sized by memlock and coloured by pressure, the largest maps, and the
sums per cgroup. Pure: it draws a :class:`~bpfmem.analysis.live.SnapshotView`, nothing else."""

from __future__ import annotations

from typing import IO, Any

from ..units import format_size, in_mi
from .html import _esc, _layout, _plot_div, _plotly, page
from .snapshot import _pressure
from ..uapi import flag_names, map_type_name

__all__ = ["render_html", "render_snapshot_html", "NODE_TREEMAP_ID", "NODE_TOP_ID"]

NODE_TREEMAP_ID = "bpfmem-node-treemap"
NODE_TOP_ID = "bpfmem-node-top"

_UNHELD = "(held by no process: pinned or programs only)"


def _holder(m) -> tuple[str, str]:
    """(cgroup label, holder label) of a map."""
    if not m.owners:
        return _UNHELD, "pinned" if m.pins else "programs"
    o = m.owners[0]
    return o.cgroup or "(no memory cgroup)", f"{o.comm}[{o.pid}]"


def _treemap(go: Any, view) -> Any:
    ids, labels, parents, values, colors, hover, sizes = [], [], [], [], [], [], []
    sums: dict[str, int] = {}
    nodes: dict[str, tuple[str, str]] = {}
    for m, model in zip(view.maps, view.checks):
        cg, holder = _holder(m)
        cg_id, h_id = f"cg:{cg}", f"h:{cg}/{holder}"
        nodes.setdefault(cg_id, (cg, ""))
        nodes.setdefault(h_id, (holder, cg_id))
        size = m.memlock or 0
        for key in (cg_id, h_id):
            sums[key] = sums.get(key, 0) + size
        p = _pressure(m)
        flags = flag_names(m.map_flags)
        ids.append(f"m:{m.id}")
        labels.append(m.name or f"id {m.id}")
        parents.append(h_id)
        values.append(size)
        sizes.append(format_size(size))
        colors.append(p if p is not None else -0.1)
        hover.append(
            f"<b>{_esc(m.name)}</b> (id {m.id})<br>{map_type_name(m.type)} "
            f"{m.key_size}/{m.value_size} × {m.max_entries:,}"
            f"{' ' + ','.join(flags) if flags else ''}<br>"
            f"memlock {format_size(m.memlock)}"
            + (f" · model charge {format_size(model.charged)} ({model.status})"
               if model is not None else "")
            + ("<br>entries " + f"{m.entries:,}" + (f" ({p:.0%} full)" if p is not None
                                                     else "") if m.entries is not None
               else "")
            + (f"<br>pinned {_esc(', '.join(m.pins))}" if m.pins else "")
            + (f"<br>used by {_esc(', '.join(x.name for x in m.programs))}"
               if m.programs else ""))
    for key, (label, parent) in nodes.items():
        ids.append(key)
        labels.append(label.rsplit("/", 1)[-1] if key.startswith("cg:") and "/" in label
                      else label)
        parents.append(parent)
        values.append(sums[key])
        sizes.append(format_size(sums[key]))
        colors.append(-0.1)
        hover.append(f"<b>{_esc(label)}</b><br>memlock {format_size(sums[key])}")
    counted = view.snapshot.entries_counted
    fig = go.Figure(go.Treemap(
        ids=ids, labels=labels, parents=parents, values=values, branchvalues="total",
        hovertext=hover, hoverinfo="text", customdata=sizes,
        texttemplate="%{label}<br>%{customdata}",
        marker=dict(colors=colors, cmin=-0.1, cmax=1.0,
                    colorscale=[[0, "#cfd8e3"], [0.0909, "#cfd8e3"], [0.0910, "#d6eadf"],
                                [0.77, "#f2c94c"], [0.91, "#e4572e"], [1, "#b71c1c"]],
                    showscale=bool(counted),
                    colorbar=dict(title="pressure", tickformat=".0%", len=0.6)),
        pathbar=dict(visible=True)))
    fig.update_layout(**_layout())
    return fig


def _top(go: Any, view, n: int = 20) -> Any:
    rows = sorted(view.maps, key=lambda m: -(m.memlock or 0))[:n][::-1]
    fig = go.Figure(go.Bar(
        x=[in_mi(m.memlock or 0) for m in rows],
        y=[f"{m.name} ({m.id})" for m in rows], orientation="h",
        marker_color=["#e4572e" if (_pressure(m) or 0) >= 0.9 else "#4c78a8" for m in rows],
        hovertemplate="%{y}: %{x:.2f}Mi<extra></extra>"))
    fig.update_layout(**_layout(xaxis=dict(title="memlock (Mi)", gridcolor="#e3e8ee"),
                                yaxis=dict(automargin=True),
                                margin=dict(l=10, r=10, t=10, b=40)))
    return fig


def _cgroup_table(view) -> str:
    rows = "".join(
        f"<tr><td><code>{_esc(c.cgroup or _UNHELD)}</code></td>"
        f"<td class=\"num\">{c.maps:,}</td>"
        f"<td class=\"num\">{format_size(c.memlock)}</td></tr>"
        for c in view.cgroups[:30])
    return ('<table class="diff"><tr><th>cgroup (of each map\'s lowest-pid holder)</th>'
            f'<th class="num">maps</th><th class="num">memlock</th></tr>{rows}</table>')


def render_html(view, out: IO[str], **_options: Any) -> None:
    """The renderer (formats.py): the page of ``view`` on ``out``."""
    out.write(render_snapshot_html(view))


def render_snapshot_html(view, *, title: str = "bpfmem: BPF maps on a node") -> str:
    from .documents import iso_time
    go, pio, _ = _plotly()
    s = view.snapshot
    tdiv, tjs = _plot_div(pio, _treemap(go, view), NODE_TREEMAP_ID, 620)
    n_top = min(20, len(view.maps))
    bdiv, bjs = _plot_div(pio, _top(go, view), NODE_TOP_ID, max(160, 26 * n_top + 60))
    status = dict(view.model_status)
    facts = [("node", s.hostname or "?"), ("kernel", s.kernel or "?"),
             ("taken", iso_time(s.taken_at) or "?"), ("maps", f"{len(view.maps):,}"),
             ("memlock", format_size(view.memlock))]
    if view.charged_model is not None:
        facts.append(("model charge", format_size(view.charged_model)))
    if status:
        facts.append(("model vs kernel", ", ".join(f"{n} {k}" for k, n in sorted(status.items()))))
    hot = sum(1 for m in view.maps if (_pressure(m) or 0) >= 0.9)
    verdict = (f'<span class="verdict fail">{hot} ≥90% full</span>' if hot else
               '<span class="verdict none">NODE</span>')
    dl = "".join(f"<div><dt>{_esc(a)}</dt><dd>{_esc(b)}</dd></div>" for a, b in facts)
    header = f'<header><h1>{_esc(title)}</h1>{verdict}<dl class="facts">{dl}</dl></header>'
    note = ("Colour: entries / max_entries (grey: not counted or an array)." if
            s.entries_counted else
            "Entries were not counted (bpfmem snapshot --entries shows pressure).")
    sections = [
        '<section class="card"><h2>Where the maps\' memory is</h2>'
        f'<p class="note">cgroup → holding process → map, sized by memlock. {note} '
        f'Click to zoom; hover for shape, model, pins and programs.</p>{tdiv}</section>',
        '<div class="grid">'
        f'<section class="card"><h2>Largest maps</h2>{bdiv}</section>'
        f'<section class="card"><h2>Per cgroup</h2><div class="table-wrap">'
        f'{_cgroup_table(view)}</div></section></div>']
    return page(title, header, sections, [tjs, bjs])
