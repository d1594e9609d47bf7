"""A self-contained, offline HTML report of a check and/or a diff.

``render_html`` takes the results of ``bpfmem check`` (a ``CheckResult``) and ``bpfmem diff``
(a ``DiffResult``) and returns one HTML page: plotly.js is embedded whole, every figure
is inline JSON, the CSS is inline, and the page names no URL of its own, so it opens from a file
with no network. Pure: it reads no file and no kernel. plotly is imported only when rendering
(the ``html`` extra: ``pip install '.[html]'``).
"""

from __future__ import annotations

import html as _html
import json
from typing import Any, Iterable

from ..errors import UnsupportedError
from ..units import count, format_delta, format_share, format_size, in_mi

__all__ = ["render_html", "PLOTLYJS_ID", "TREEMAP_ID", "USAGE_ID", "DIFF_ID"]

#: ids of the page's elements (the tests and anyone scripting the page use them)
PLOTLYJS_ID = "bpfmem-plotlyjs"
TREEMAP_ID = "bpfmem-treemap"
USAGE_ID = "bpfmem-usage"
DIFF_ID = "bpfmem-diff-totals"

_PASS = "#2e7d32"
_FAIL = "#c62828"
_INK = "#1f2933"
_MUTED = "#66788a"
_GRID = "#e3e8ee"
_FONT = ("system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, "
         "'Noto Sans', 'Liberation Sans', sans-serif")

# Nothing that plotly.js could fetch: no MathJax, no topojson, no cloud links, no logo link.
_CONFIG = {
    "displaylogo": False,
    "showLink": False,
    "showSendToCloud": False,
    "showEditInChartStudio": False,
    "typesetMath": False,
    "plotlyServerURL": "",
    "topojsonURL": "data:,",
    "responsive": True,
    "displayModeBar": False,
}

def _num(v: Any) -> float | None:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _pct(f: Any) -> str:
    return format_share(_num(f))


def _esc(v: Any) -> str:
    return _html.escape("" if v is None else str(v), quote=True)


def _flags(flags: Any) -> str:
    if isinstance(flags, (list, tuple)):
        return ", ".join(str(f) for f in flags) or "none"
    if flags in (None, 0, ""):
        return "none"
    return str(flags)


def _kernel_label(k: Any, sep: str = " · ") -> str:
    """``6.18.0 · 2 CPUs`` for a KernelProfile."""
    if k is None:
        return "?"
    ver = k.version or "?"
    cpus = k.possible_cpus
    return f"{ver}{sep}{cpus} CPU{'s' if cpus != 1 else ''}" if cpus is not None else str(ver)


def _type(cost: Any) -> str:
    from ..uapi import map_type_name
    return map_type_name(cost.spec.type)


def _flag_names(cost: Any) -> list[str]:
    from ..uapi import flag_names
    return flag_names(cost.spec.map_flags)


def _uniq(xs: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for x in xs:
        if x is not None and x not in out:
            out.append(x)
    return out


def _plotly():
    try:
        import plotly  # noqa: F401
        import plotly.graph_objects as go
        import plotly.io as pio
        from plotly.offline import get_plotlyjs
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise UnsupportedError("HTML reports need plotly, the `html` extra: pip install '.[html]' "
                               "in a checkout (.venv/bin/pip ...), or pip install plotly") from e
    return go, pio, get_plotlyjs


def _layout(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = dict(
        template="none",
        font=dict(family=_FONT, size=13, color=_INK),
        paper_bgcolor="white",
        plot_bgcolor="white",
        margin=dict(l=10, r=10, t=10, b=10),
        hoverlabel=dict(font=dict(family=_FONT, size=12), align="left"),
    )
    base.update(kw)
    return base


# --- (a) treemap --------------------------------------------------------------------------------

def _result_rank(r: Any) -> tuple[int, float]:
    """Failing combinations first, then the largest total."""
    return (0 if r.passed is False else 1, -(_num(r.total) or 0))


_MAP_HOVER = (
    "<b>%{label}</b> in %{parent}<br>"
    "type: %{customdata[0]}<br>"
    "key / value size: %{customdata[1]} B<br>"
    "max_entries: %{customdata[2]}<br>"
    "flags: %{customdata[3]}<br>"
    "memlock at create: %{customdata[4]}<br>"
    "charged at create: %{customdata[5]}<br>"
    "charged full: %{customdata[6]}<br>"
    "%{customdata[8]} of the total"
    "<extra></extra>"
)
_GROUP_HOVER = (
    "<b>%{label}</b><br>%{customdata[0]}<br>"
    "charged at create: %{customdata[5]}<br>"
    "charged full: %{customdata[6]}<br>"
    "%{customdata[8]} of the total"
    "<extra></extra>"
)


def _shade(t: float) -> str:
    """From a light to a deep blue, t in [0, 1]."""
    lo, hi = (198, 219, 239), (8, 69, 148)
    t = min(max(t, 0.0), 1.0) ** 0.6
    return "rgb({},{},{})".format(*(round(a + (b - a) * t) for a, b in zip(lo, hi)))


_MEASURES = ("charged_at_create", "charged_full", "memlock_at_create", "memlock_full")


def _measure(check: Any) -> str:
    """The figure a check judged (``measure``): charged at create unless told otherwise."""
    m = check.budget.measure
    if m in _MEASURES:
        return m
    return "charged_full" if check.budget.full is True else "charged_at_create"


def _treemap_trace(go: Any, result: Any, visible: bool,
                   measure: str = "charged_at_create") -> Any:
    """One cell per map, grouped by object, under one root; sizes: ``measure``."""
    ids, labels, parents, values, custom, hover, colors = [], [], [], [], [], [], []
    kinds: list[str] = []

    def add(id_: str, label: str, parent: str, value: float, data: list[str], tpl: str,
            kind: str) -> int:
        ids.append(id_)
        labels.append(label)
        parents.append(parent)
        values.append(value)
        custom.append(data)
        hover.append(tpl)
        kinds.append(kind)
        return len(ids) - 1

    root_idx = add("root", f"all objects ({_kernel_label(result.kernel)})", "", 0,
                   [""] * 7, _GROUP_HOVER, "root")
    for oi, obj in enumerate(result.objects):
        oname = str(obj.spec.name or obj.spec.path or f"object {oi}")
        oid = f"o{oi}"
        maps = [m.cost for m in obj.maps]
        oidx = add(oid, oname, "root", 0, [], _GROUP_HOVER, "object")
        osum = ofull = 0
        full_known = True
        for mi, m in enumerate(maps):
            value = max(getattr(m, measure) or 0, 0)
            osum += value
            if m.charged_full is None:
                full_known = False
            else:
                ofull += m.charged_full
            s = m.spec
            add(f"{oid}/m{mi}", str(m.name or f"map {mi}"), oid, value, [
                _esc(_type(m) or "?") + (f" (× {m.count:g}: figures for all)"
                                         if m.count != 1 else ""),
                f"{s.key_size} / {s.value_size}",
                f"{s.max_entries:,}",
                _esc(_flags(_flag_names(m))),
                format_size(m.memlock_at_create),
                format_size(m.charged_at_create),
                format_size(m.charged_full),
            ], _MAP_HOVER, "map")
        values[oidx] = osum
        ocreate = sum(m.charged_at_create or 0 for m in maps)
        custom[oidx] = [_esc(f"{obj.spec.path or oname} · {len(maps)} map"
                             f"{'' if len(maps) == 1 else 's'}"),
                        "", "", "", "", format_size(ocreate),
                        format_size(ofull if full_known else None)]
    values[root_idx] = sum(v for v, k in zip(values, kinds) if k == "object")
    all_maps = [m.cost for o in result.objects for m in o.maps]

    def total(field: str) -> int | None:
        vals = [getattr(m, field) for m in all_maps]
        return None if any(v is None for v in vals) else sum(vals)  # type: ignore[arg-type]

    custom[root_idx] = [_esc(_kernel_label(result.kernel)), "", "", "", "",
                        format_size(total("charged_at_create")), format_size(total("charged_full"))]
    top = max([v for v, k in zip(values, kinds) if k == "map"] + [1])
    for v, k in zip(values, kinds):
        colors.append(_shade(v / top) if k == "map" else ("#eef1f5" if k == "object" else "white"))
    texts = [(format_size(v) if k != "root" else "") for v, k in zip(values, kinds)]
    # the share of the whole in the tool's one share style (format_share), not plotly's
    whole = values[root_idx]
    for c, t, v in zip(custom, texts, values):
        c.append(t)
        c.append(format_share(v / whole if whole else None))
    return go.Treemap(
        ids=ids, labels=labels, parents=parents, values=values, customdata=custom,
        branchvalues="total",
        texttemplate="<b>%{label}</b><br>%{customdata[7]}<br>%{customdata[8]}",
        hovertemplate=hover,
        marker=dict(colors=colors, line=dict(color="white", width=1.5)),
        pathbar=dict(visible=True, thickness=22),
        tiling=dict(pad=3),
        textfont=dict(family=_FONT, size=13),
        sort=True,
        visible=visible,
        name=_kernel_label(result.kernel),
    )


def _treemap_figure(go: Any, results: list[Any],
                    measure: str = "charged_at_create") -> Any:
    order = sorted(range(len(results)), key=lambda i: _result_rank(results[i]))
    shown = order[0]
    fig = go.Figure()
    for i, r in enumerate(results):
        fig.add_trace(_treemap_trace(go, r, visible=(i == shown), measure=measure))
    layout = _layout(height=540)
    if len(results) > 1:
        buttons = []
        for i in order:
            r = results[i]
            verdict = "pass" if r.passed else "FAIL"
            buttons.append(dict(
                label=f"{_kernel_label(r.kernel)} ({verdict})",
                method="restyle",
                args=[{"visible": [j == i for j in range(len(results))]}],
            ))
        layout["updatemenus"] = [dict(
            buttons=buttons, direction="down", showactive=True, x=1.0, xanchor="right",
            y=1.0, yanchor="bottom", pad=dict(r=0, t=0), bgcolor="white",
            bordercolor=_GRID, font=dict(size=12),
        )]
        layout["margin"] = dict(l=10, r=10, t=40, b=10)
    fig.update_layout(**layout)
    return fig, shown


# --- (b) usage against the limit ---------------------------------------------------------------

def _usage_figure(go: Any, check: Any) -> Any:
    results = check.results
    limit = _num(check.budget.limit)
    x: list[str] = []
    for r in results:  # categories must be distinct, or plotly stacks two bars in one
        label = _kernel_label(r.kernel, "<br>")
        while label in x:
            label += " "
        x.append(label)
    totals = [in_mi(r.total) or 0 for r in results]
    budgets = [in_mi(r.budget.budget) for r in results]
    colors = [_PASS if r.passed else _FAIL for r in results]
    verdicts = ["PASS" if r.passed else "FAIL" for r in results]
    text = [f"{format_size(r.total)}" for r in results]
    custom = [[verdicts[i], format_size(results[i].budget.budget),
               format_size(results[i].budget.limit),
               _pct((_num(results[i].total) or 0) / limit) if limit else "?",
               _esc(_kernel_label(results[i].kernel))]
              for i in range(len(results))]
    fig = go.Figure()
    fig.add_trace(go.Bar(
        x=x, y=totals, marker=dict(color=colors), text=text, textposition="outside",
        cliponaxis=False, name="total charged", customdata=custom, showlegend=False,
        hovertemplate=("<b>%{customdata[4]}</b>: %{customdata[0]}<br>charged %{text}"
                       " (%{customdata[3]} of the limit)<br>budget %{customdata[1]}"
                       "<br>limit %{customdata[2]}<extra></extra>"),
        width=0.55,
    ))
    for name, color in (("pass", _PASS), ("fail", _FAIL)):  # legend keys for the bar colors
        if color in colors:
            fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name,
                                     marker=dict(symbol="square", size=12, color=color),
                                     hoverinfo="skip"))
    if any(b is not None for b in budgets):
        fig.add_trace(go.Scatter(
            x=x, y=budgets, mode="markers", name="budget",
            marker=dict(symbol="line-ew", size=70, line=dict(width=3, color="#f59e0b")),
            hovertemplate="budget %{y:.1f}Mi<extra></extra>",
        ))
    ymax = max(totals + [b for b in budgets if b is not None] + [0])
    shapes, annotations = [], []
    if limit:
        ymax = max(ymax, _limit_line(limit, shapes, annotations))
    fig.update_layout(**_layout(
        height=460,
        margin=dict(l=60, r=10, t=30, b=50),
        yaxis=dict(title=dict(text="charged (Mi)"), range=[0, ymax * 1.15 or 1],
                   gridcolor=_GRID, zeroline=False),
        xaxis=dict(type="category", tickangle=0),
        showlegend=True,
        legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom"),
        shapes=shapes, annotations=annotations, bargap=0.35,
    ))
    return fig


def _limit_line(limit: int, shapes: list, annotations: list) -> float:
    """A dashed line at the memory limit, labelled; returns its height (Mi)."""
    lm = in_mi(limit)
    shapes.append(dict(type="line", xref="paper", x0=0, x1=1, y0=lm, y1=lm,
                       line=dict(color=_FAIL, width=2, dash="dash")))
    annotations.append(dict(xref="paper", x=1, y=lm, xanchor="right", yanchor="bottom",
                            text=f"limit {format_size(limit)}", showarrow=False,
                            font=dict(color=_FAIL, size=12)))
    return lm


# --- (c) diff -----------------------------------------------------------------------------------

_MEASURE_TEXT = {
    "charged_at_create": "memory charged when the maps are created",
    "charged_full": "memory charged when every map is full",
    "memlock_at_create": "memlock when the maps are created",
    "memlock_full": "memlock when every map is full",
}

_STATUS_ORDER = {"added": 0, "changed": 1, "removed": 2, "unchanged": 3}


def _diff_totals_figure(go: Any, diff: Any) -> Any:
    old, new = diff.old, diff.new
    cats = ["at create", "full"]
    fig = go.Figure()
    for name, side, color in (("old", old, "#9aa5b1"), ("new", new, "#3b6fb6")):
        ys = [in_mi(side.charged_at_create), in_mi(side.charged_full)]
        fig.add_trace(go.Bar(
            x=cats, y=ys, name=name, marker=dict(color=color),
            text=[format_size(side.charged_at_create),
                  format_size(side.charged_full)],
            textposition="outside", cliponaxis=False,
            hovertemplate=f"{name} %{{x}}: %{{text}}<extra></extra>",
        ))
    shapes, annotations = [], []
    limit = _num(diff.limit)
    ymax = max([in_mi(v) or 0 for s in (old, new)
                for v in (s.charged_at_create, s.charged_full)] + [0])
    if limit:
        ymax = max(ymax, _limit_line(limit, shapes, annotations))
    fig.update_layout(**_layout(
        height=300, barmode="group",
        margin=dict(l=55, r=10, t=30, b=30),
        yaxis=dict(title=dict(text="charged (Mi)"), range=[0, ymax * 1.18 or 1],
                   gridcolor=_GRID, zeroline=False),
        legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom"),
        shapes=shapes, annotations=annotations,
    ))
    return fig


def _diff_summary(diff: Any) -> str:
    charge = diff.upgrade_charge
    new_total = diff.new.charged_at_create
    share = diff.new_share_of_limit
    limit = _num(diff.limit)
    if share is None and limit and _num(new_total) is not None:
        share = new_total / limit
    charge_n = _num(charge)
    verb = "frees" if charge_n is not None and charge_n < 0 else "charges"
    amount = format_size(abs(charge_n)) if charge_n is not None else "?"
    text = f"upgrade {verb} {amount} at first start; new total {format_size(new_total)}"
    if limit:
        text += f" = {_pct(share)} of the {format_size(limit)} limit"
    return text


def _side_cell(side: Any, key: str) -> str:
    """A figure of one side's MapCost (``—``: the side has no such map)."""
    return format_size(getattr(side, key)) if side is not None else "—"


def _shape_text(side: Any) -> str:
    if side is None:
        return "—"
    s, flags = side.spec, _flag_names(side)
    return (f"{_esc(_type(side) or '?')} {s.key_size}/{s.value_size} × {s.max_entries}"
            + (f" [{_esc(_flags(flags))}]" if flags else ""))


def _diff_table(diff: Any) -> str:
    rows = list(diff.maps)
    rows.sort(key=lambda m: (_STATUS_ORDER.get(m.status, 9), -abs(m.delta_at_create),
                             str(m.object), str(m.map)))
    head = ("<tr><th>object</th><th>map</th><th>status</th><th>shape (new or old)</th>"
            "<th class=num>old at create</th><th class=num>new at create</th>"
            "<th class=num>Δ at create</th><th class=num>old full</th><th class=num>new full</th>"
            "<th class=num>Δ full</th><th>changes</th></tr>")
    body = []
    unchanged = 0
    for m in rows:
        status = str(m.status or "?")
        if status == "unchanged":
            unchanged += 1
        cls = [f"st-{_esc(status)}"]
        badges = ""
        if m.pinned:
            badges += ' <span class="badge pin">pinned</span>'
        if m.pin_reused:
            badges += ' <span class="badge pin">reused</span>'
        if m.pin_incompatible:
            cls.append("pin-incompatible")
            badges += ' <span class="badge bad">pin-incompatible</span>'
        old, new = m.old, m.new
        changes = m.changes
        dc, df = m.delta_at_create, m.delta_full
        body.append(
            f'<tr class="{" ".join(cls)}">'
            f"<td>{_esc(m.object)}</td>"
            f"<td><code>{_esc(m.map)}</code>{badges}</td>"
            f'<td><span class="status">{_esc(status)}</span></td>'
            f"<td>{_shape_text(new if new is not None else old)}</td>"
            f"<td class=num>{_side_cell(old, 'charged_at_create')}</td>"
            f"<td class=num>{_side_cell(new, 'charged_at_create')}</td>"
            f'<td class="num {_sign_cls(dc)}">{format_delta(dc)}</td>'
            f"<td class=num>{_side_cell(old, 'charged_full')}</td>"
            f"<td class=num>{_side_cell(new, 'charged_full')}</td>"
            f'<td class="num {_sign_cls(df)}">{format_delta(df)}</td>'
            f"<td>{'<br>'.join(_esc(c) for c in changes)}</td></tr>"
        )
    if not body:
        body.append('<tr><td colspan="11" class="muted">no maps</td></tr>')
    return (f'<table class="diff" id="bpfmem-diff-table"><thead>{head}</thead>'
            f"<tbody>{''.join(body)}</tbody></table>")


def _diff_counts(diff: Any) -> str:
    """Per status: how many maps, and what they add up to at create."""
    rows = []
    maps = diff.maps
    for status in ("added", "changed", "removed", "unchanged"):
        ms = [m for m in maps if m.status == status]
        if not ms:
            continue
        d = sum(m.delta_at_create for m in ms)
        rows.append(f'<tr class="st-{status}"><td><span class="status">{status}</span></td>'
                    f"<td class=num>{len(ms)}</td>"
                    f'<td class="num {_sign_cls(d)}">{format_delta(d)}</td></tr>')
    total = diff.delta_at_create
    rows.append(f'<tr class="total"><td>all maps</td><td class=num>{len(maps)}</td>'
                f'<td class="num {_sign_cls(_num(total))}">{format_delta(total)}</td></tr>')
    return ('<table class="diff counts"><thead><tr><th>status</th><th class=num>maps</th>'
            f'<th class=num>Δ at create</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')


def _sign_cls(n: float | None) -> str:
    if n is None or n == 0:
        return ""
    return "up" if n > 0 else "down"


# --- page ---------------------------------------------------------------------------------------

_CSS = f"""
*{{box-sizing:border-box}}
body{{margin:0;background:#f4f6f8;color:{_INK};font:14px/1.45 {_FONT}}}
main{{max-width:1280px;margin:0 auto;padding:18px 22px 40px}}
header{{display:flex;align-items:center;gap:18px;flex-wrap:wrap;background:white;
  border:1px solid {_GRID};border-radius:10px;padding:14px 18px;margin-bottom:16px}}
h1{{font-size:20px;margin:0 12px 0 0;font-weight:650}}
h2{{font-size:16px;margin:0 0 4px;font-weight:600}}
.verdict{{font-weight:800;font-size:18px;letter-spacing:.06em;color:white;border-radius:6px;
  padding:4px 14px}}
.verdict.pass{{background:{_PASS}}} .verdict.fail{{background:{_FAIL}}}
.verdict.none{{background:{_MUTED}}}
.facts{{display:flex;gap:22px;flex-wrap:wrap;margin:0}}
.facts div{{display:flex;flex-direction:column}}
.facts dt{{font-size:11px;text-transform:uppercase;letter-spacing:.05em;color:{_MUTED}}}
.facts dd{{margin:0;font-weight:600}}
.grid{{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr);gap:16px}}
.grid.diff{{grid-template-columns:380px minmax(0,1fr);margin-bottom:14px}}
table.diff.counts{{width:auto;min-width:340px;font-size:13.5px;margin-bottom:10px}}
table.counts tr.total td{{font-weight:700;border-top:2px solid {_GRID}}}
@media (max-width:1000px){{.grid,.grid.diff{{grid-template-columns:1fr}}}}
section.card{{background:white;border:1px solid {_GRID};border-radius:10px;padding:14px 16px;
  margin-bottom:16px;min-width:0}}
.note{{color:{_MUTED};font-size:12.5px;margin:0 0 8px}}
.muted{{color:{_MUTED}}}
.summary{{font-size:15px;font-weight:600;margin:4px 0 10px;padding:8px 12px;
  background:#fff8e6;border-left:4px solid #f59e0b;border-radius:4px}}
.offenders{{margin:6px 0 0;padding-left:18px;font-size:13px}}
.fails li{{color:{_FAIL}}}
table.diff{{border-collapse:collapse;width:100%;font-size:12.5px}}
table.diff th,table.diff td{{padding:5px 7px;border-bottom:1px solid {_GRID};text-align:left;
  vertical-align:top}}
table.diff th{{background:#f0f3f6;font-weight:600;position:sticky;top:0}}
td.num,th.num{{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}}
td.up{{color:{_FAIL}}} td.down{{color:{_PASS}}}
tr.st-added .status{{color:#1d4ed8;font-weight:600}}
tr.st-removed .status{{color:{_MUTED};font-weight:600}}
tr.st-changed .status{{color:#b45309;font-weight:600}}
tr.st-unchanged{{color:{_MUTED}}}
tr.pin-incompatible td{{background:#fdecea}}
tr.pin-incompatible td:first-child{{box-shadow:inset 4px 0 0 {_FAIL}}}
.badge{{display:inline-block;font-size:10.5px;font-weight:700;border-radius:3px;
  padding:0 5px;margin-left:4px;vertical-align:1px}}
.badge.pin{{background:#e0e7ff;color:#3730a3}}
.badge.bad{{background:{_FAIL};color:white}}
code{{font-family:ui-monospace,'DejaVu Sans Mono',Menlo,Consolas,monospace;font-size:12px}}
.table-wrap{{max-height:640px;overflow:auto}}
footer{{color:{_MUTED};font-size:12px;text-align:center}}
"""


def _header(title: str, check: Any, diff: Any) -> str:
    facts: list[tuple[str, str]] = []
    if check is not None:
        verdict = ("PASS", "pass") if check.passed else ("FAIL", "fail")
        b = check.budget
        kernels = _uniq(r.kernel.version for r in check.results)
        cpus = _uniq(r.kernel.possible_cpus for r in check.results)
        facts += [
            ("kernel" + ("s" if len(kernels) > 1 else ""), ", ".join(map(str, kernels)) or "?"),
            ("possible CPUs", ", ".join(map(str, cpus)) or "?"),
            ("limit", format_size(b.limit)),
            ("budget", f"{format_size(b.budget)}"
             + (f" ({_pct(b.max_fraction)})" if b.max_fraction is not None else "")),
            ("judged at", "full maps" if b.full else "create"),
        ]
        if check.whatif:
            facts.append(("what-if", "; ".join(str(w) for w in check.whatif)))
    else:
        verdict = ("DIFF", "none")
        k = diff.kernel
        facts += [("kernel", str(k.version)),
                  ("possible CPUs", str(k.possible_cpus)),
                  ("limit", format_size(diff.limit))]
    dl = "".join(f"<div><dt>{_esc(a)}</dt><dd>{_esc(b)}</dd></div>" for a, b in facts)
    return (f'<header><h1>{_esc(title)}</h1>'
            f'<span class="verdict {verdict[1]}" id="bpfmem-verdict">{verdict[0]}</span>'
            f'<dl class="facts">{dl}</dl></header>')


def _plot_div(pio: Any, fig: Any, div_id: str, height: int) -> tuple[str, str]:
    """The div and the script line that draws ``fig`` into it (the JSON is HTML-safe)."""
    fig_json = pio.to_json(fig, validate=True)
    div = f'<div id="{div_id}" class="plot" style="height:{height}px"></div>'
    js = (f"(function(){{var f={fig_json};"
          f"Plotly.newPlot({json.dumps(div_id)},f.data,f.layout,{json.dumps(_CONFIG)});}})();")
    return div, js


def render_html(check=None, diff=None, *, title: str = "bpfmem report") -> str:
    """One self-contained HTML page for a CheckResult, a DiffResult, or both."""
    if check is None and diff is None:
        raise ValueError("render_html needs a check result, a diff result, or both")
    go, pio, get_plotlyjs = _plotly()
    sections: list[str] = []
    scripts: list[str] = []

    if check is not None:
        results = list(check.results)
        if results:
            measure = _measure(check)
            tree, shown = _treemap_figure(go, results, measure)
            tdiv, tjs = _plot_div(pio, tree, TREEMAP_ID, 540)
            usage = _usage_figure(go, check)
            udiv, ujs = _plot_div(pio, usage, USAGE_ID, 460)
            scripts += [tjs, ujs]
            shown_r = results[shown]
            offenders = shown_r.offenders
            off_html = ""
            if offenders:
                items = "".join(
                    f"<li><code>{_esc(o.object)}/{_esc(o.map)}</code> "
                    f"{format_size(o.charged)} ({_pct(o.share)})</li>"
                    for o in offenders[:5])
                off_html = (f'<p class="note">largest on {_esc(_kernel_label(shown_r.kernel))}'
                            f':</p><ul class="offenders">{items}</ul>')
            unsized = [f"{o.spec.name or '?'}/{m.cost.name or '?'}"
                       for o in shown_r.objects for m in o.maps
                       if getattr(m.cost, measure) is None]
            unsized_html = (f'<p class="note">not sized (unknown to the model): '
                            f'{_esc(", ".join(unsized))}</p>') if unsized else ""
            fails = _uniq(f for r in results for f in r.failures)
            fails_html = ""
            if fails:
                items = "".join(f"<li>{_esc(f)}</li>" for f in fails[:20])
                more = f"<li>… and {len(fails) - 20} more</li>" if len(fails) > 20 else ""
                fails_html = (f'<p class="note">failures:</p><ul class="offenders fails">'
                              f"{items}{more}</ul>")
            many = " Pick another kernel/CPU combination with the menu." if len(results) > 1 else ""
            sections.append(
                '<div class="grid">'
                '<section class="card"><h2>Memory by object and map</h2>'
                f'<p class="note">Cell size: {_MEASURE_TEXT[measure]}, on '
                f'{_esc(_kernel_label(shown_r.kernel))}. Hover a cell for the map\'s '
                f'shape, memlock and charged figures; click an object to zoom.{many}</p>'
                f"{tdiv}{unsized_html}</section>"
                '<section class="card"><h2>Usage against the limit</h2>'
                '<p class="note">Total charged per kernel and CPU count; the budget is the limit × '
                f'max_fraction.</p>{udiv}{fails_html}{off_html}</section>'
                "</div>")
        else:
            sections.append('<section class="card"><h2>Check</h2>'
                            '<p class="muted">no results in the check</p></section>')

    if diff is not None:
        ddiv, djs = _plot_div(pio, _diff_totals_figure(go, diff), DIFF_ID, 300)
        scripts.append(djs)
        old, new = diff.old, diff.new
        paths = (f'<p class="note">old: {_esc(", ".join(map(str, old.paths)) or "?")}'
                 f' → new: {_esc(", ".join(map(str, new.paths)) or "?")}'
                 f' · {_esc(_kernel_label(diff.kernel))}</p>')
        n_bad = sum(1 for m in diff.maps if m.pin_incompatible)
        warn = (f'<p class="note"><span class="badge bad">pin-incompatible</span> '
                f"{count(n_bad, 'pinned map')} cannot be reused by the new object: the loader "
                "fails or must unpin them.</p>") if n_bad else ""
        sections.append(
            '<section class="card" id="bpfmem-diff"><h2>Upgrade diff</h2>'
            f'<p class="summary" id="bpfmem-diff-summary">{_esc(_diff_summary(diff))}</p>'
            f"{paths}"
            '<div class="grid diff">'
            f'<div><h2>Total charged, old vs new</h2>{ddiv}</div>'
            f'<div><h2>What changed</h2>{_diff_counts(diff)}{warn}</div>'
            "</div>"
            f'<h2>Maps</h2><div class="table-wrap">{_diff_table(diff)}</div></section>')

    return page(title, _header(title, check, diff), sections, scripts)


def page(title: str, header: str, sections: list[str], scripts: list[str]) -> str:
    """The self-contained page around ``sections`` (plotly.js inline, no URL anywhere)."""
    _go, _pio, get_plotlyjs = _plotly()
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # the page may load nothing from anywhere: scripts and styles are inline only
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
        "img-src data: blob:; font-src data:; connect-src 'none'\">"
        f"<title>{_esc(title)}</title><style>{_CSS}</style>"
        '<script>window.PlotlyConfig={MathJaxConfig:"local"};</script>'
        f'<script id="{PLOTLYJS_ID}">{get_plotlyjs()}</script>'
        "</head><body><main>"
        f"{header}"
        f"{''.join(sections)}"
        '<footer>bpfmem · self-contained report: works offline</footer>'
        f"</main><script>{''.join(scripts)}</script></body></html>\n"
    )


def check_html(result, out, *, title: str = "bpfmem report") -> None:
    """The page of a CheckResult."""
    out.write(render_html(result, None, title=title))


def diff_html(result, out, *, title: str = "bpfmem report") -> None:
    """The page of a DiffResult."""
    out.write(render_html(None, result, title=title))
