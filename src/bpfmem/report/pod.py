"""The pod view as documents, tables and pictures: ``bpfmem/pod/v1`` (one reading, with an
optional upgrade headroom), ``bpfmem/pod-trace/v1`` (a trace: JSON or JSON lines), a rich
table, and a stacked chart of a trace (plotly: a self-contained HTML page, or a PNG made
from it). Pure: it reads no file and no kernel."""

from __future__ import annotations

import json
from typing import IO, Any

from ..analysis.gosplit import PARTS as GO_PARTS
from ..units import format_bytes, format_size, in_mi
from .escape import markup, term
from ..analysis.pod import COMPONENTS
from .documents import document


# the chart's parts, bottom to top (sockets go with kernel; unexplained on top)
_PLOT_PARTS = (("go_heap", "Go heap in use", "#1F4E79"),
               ("go_free", "Go heap freed, not returned", "#9ECAE9"),
               ("go_arenas", "Go heap arenas", "#2E6DA4"),
               ("go_stacks", "Go stacks", "#54A24B"),
               ("go_runtime", "Go runtime metadata", "#88D27A"),
               ("processes", "processes (anon)", "#4C78A8"),
               ("binary", "Go binary pages", "#E45756"),
               ("page_cache", "page cache", "#72B7B2"),
               ("kernel", "kernel (not maps)", "#B279A2"),
               ("maps", "BPF maps", "#F58518"),
               ("unexplained", "unexplained", "#BAB0AC"))


def _pct(x: float | None) -> str:
    return "?" if x is None else f"{x * 100:.0f}%"


def render_jsonl(doc: dict, out: IO[str]) -> None:
    """A trace as JSON lines: a header, one line per sample, the summary last."""
    head = {k: v for k, v in doc.items() if k not in ("samples", "summary", "at_peak")}
    out.write(json.dumps({"kind": "header"} | head) + "\n")
    for s in doc["samples"]:
        out.write(json.dumps({"kind": "sample"} | s) + "\n")
    out.write(json.dumps({"kind": "summary", "summary": doc["summary"],
                          "at_peak": doc.get("at_peak")}) + "\n")


# ---- tables ----

def _console(out: IO[str], width: int | None = None):
    from .escape import console as Console
    return Console(file=out, width=width or (None if out.isatty() else 100),
                   highlight=False, soft_wrap=False)


def render_table(view, out: IO[str], width: int | None = None) -> None:
    """One reading (a :class:`~bpfmem.analysis.pod.PodView`): header, the parts of usage,
    processes, maps, and the upgrade."""
    from rich.table import Table
    con = _console(out, width)
    lim = view.limit
    head = (f"{view.path}  (cgroup v{view.version}, {view.fs_path})\n"
            f"usage {format_size(view.usage)}"
            + (f" of {format_size(lim)} limit = {_pct(view.share)}, headroom "
               f"{format_size(view.headroom)}" if lim is not None else " (no limit)")
            + (f"; peak so far {format_size(view.peak)}" if view.peak is not None else ""))
    con.print(head)
    t = Table(title="where the usage goes", title_justify="left", box=None, pad_edge=False)
    t.add_column("part")
    t.add_column("bytes", justify="right")
    t.add_column("size", justify="right")
    t.add_column("of usage", justify="right")
    labels = dict(COMPONENTS)
    for c in view.components:
        val = c.bytes
        share = None if val is None or not view.usage else val / view.usage
        t.add_row(labels.get(c.key, c.key), format_bytes(val), format_size(val), _pct(share))
    t.add_row("[b]usage[/b]", f"[b]{format_bytes(view.usage)}[/b]",
              f"[b]{format_size(view.usage)}[/b]",
              "100%")
    con.print(t)
    if view.kernel_kinds:
        con.print("kernel memory by kind: " + ", ".join(
            f"{k} {format_size(v)}" for k, v in view.kernel_kinds))
    p = Table(title="processes (smaps_rollup)", title_justify="left", box=None,
              pad_edge=False)
    for c, j in (("pid", "right"), ("comm", "left"), ("RSS", "right"), ("PSS", "right"),
                 ("USS", "right"), ("anon PSS", "right"), ("maps", "right")):
        p.add_column(c, justify=j)
    for r in view.processes[:30]:
        p.add_row(str(r.pid), term(r.comm), format_size(r.rss), format_size(r.pss),
                  format_size(r.uss), format_size(r.pss_anon), str(r.maps))
    if len(view.processes) > 30:
        p.add_row("", f"... {len(view.processes) - 30} more", "", "", "", "", "")
    tot = view.totals
    p.add_row("", "[b]total[/b]", format_size(tot.get("rss")), format_size(tot.get("pss")),
              format_size(tot.get("uss")), format_size(tot.get("pss_anon")), "")
    con.print(p)
    for g in view.go[:_GO_TABLES]:
        _go_table(con, g, view.details[g.pid])
    if len(view.go) > _GO_TABLES:   # a pod of many Go processes: the largest, then a sum
        rest = view.go[_GO_TABLES:]
        sums: dict = {}
        for g in rest:
            for k, v in g.parts:
                sums[k] = sums.get(k, 0) + v
        labels = dict(GO_PARTS)
        con.print(f"{len(rest)} more Go processes: RSS {format_size(sum(g.rss for g in rest))}"
                  " (" + ", ".join(f"{labels.get(k, k)} {format_size(v)}"
                                   for k, v in sums.items() if v) + ")")
    if view.maps:
        m = Table(title="BPF maps held by these processes", title_justify="left", box=None,
                  pad_edge=False)
        for c, j in (("id", "right"), ("name", "left"), ("type", "left"),
                     ("memlock", "right"), ("charged (model)", "right"),
                     ("charged to", "left")):
            m.add_column(c, justify=j)
        for r in view.maps:
            m.add_row(str(r.id), term(r.name), r.type, format_size(r.memlock),
                      format_size(r.charged),
                      "this cgroup" if r.charged_here else "[yellow]elsewhere[/yellow]")
        con.print(m)
        con.print(f"maps charged here {format_size(view.maps_here)}"
                  + (f"; held but charged elsewhere {format_size(view.maps_elsewhere)}"
                     if view.maps_elsewhere else ""))
        for r in view.maps:
            if not r.charged_here:
                con.print(f"  [yellow]{r.name}[/yellow] (id {r.id}, "
                          f"{', '.join(r.pins)}): {r.why}")
    else:
        con.print("no BPF maps held by these processes")
    for n in view.notes:
        con.print(f"note: {markup(n)}")
    if view.upgrade:
        up, h = view.upgrade, view.upgrade.headroom
        con.print()
        con.print(f"[b]after upgrading to {', '.join(up.after)}[/b]"
                  + (f" (from {', '.join(up.before)})" if up.before else ""))
        con.print(f"  usage now {format_size(h.usage)} - maps released "
                  f"{format_size(h.released)} + charged at first start "
                  f"{format_size(h.upgrade_charge)} = [b]{format_size(h.projected)}[/b]"
                  + (f" = [b]{_pct(h.share)} of the {format_size(h.limit)} "
                     f"limit[/b], headroom {format_size(h.headroom)}"
                     if h.limit is not None else ""))
        for n in h.notes:
            con.print(f"  note: {markup(n)}")


_GO_TABLES = 3     # Go processes drawn in full (largest first); the others summed


def _go_table(con, g, detail) -> None:
    """One Go process: its split (a :class:`~bpfmem.analysis.gosplit.GoSplit`) and what was
    read of it (its :class:`~bpfmem.host.goproc.ProcDetail`)."""
    from rich.table import Table
    labels = dict(GO_PARTS)
    t = Table(title=f"Go process {g.pid} ({detail.exe or '?'}, "
                    f"{g.version or 'Go version unknown'}): RSS {format_size(g.rss)}, "
                    f"figures from {g.source}",
              title_justify="left", box=None, pad_edge=False)
    t.add_column("part")
    t.add_column("bytes", justify="right")
    t.add_column("size", justify="right")
    t.add_column("of RSS", justify="right")
    for k, v in g.parts:
        t.add_row(labels.get(k, k), format_bytes(v), format_size(v),
                  _pct(v / g.rss if g.rss else None))
    t.add_row("[b]RSS (smaps)[/b]", f"[b]{format_bytes(g.rss)}[/b]",
              f"[b]{format_size(g.rss)}[/b]", "100%")
    con.print(t)
    for line in g.settings.implications:
        con.print(f"  {line}")
    if detail.top:
        con.print(f"  top allocation sites by inuse_space ({detail.pprof_url}, "
                  f"{format_size(detail.pprof_total)} sampled):")
        for f in detail.top[:5]:
            if f.flat > 0:
                con.print(f"    {format_size(f.flat):>7}  {f.name}")
    for n in g.notes + detail.notes:
        con.print(f"  note: {markup(n)}")


def peak_explained(doc: dict) -> str | None:
    """'peak 612Mi at 4.1 s: Go heap 410Mi of which 180Mi freed but not yet returned, maps
    150Mi, ...': the largest parts of the usage at the peak."""
    pk = (doc.get("summary") or {}).get("peak")
    if not pk:
        return None
    parts = dict(pk.get("parts") or {})
    labels = dict(COMPONENTS)
    items = []
    heap = (parts.pop("go_heap", None) or 0) + (parts.pop("go_free", None) or 0)
    free = (pk.get("parts") or {}).get("go_free") or 0
    garbage = (doc.get("summary") or {}).get("peak_garbage")
    if heap:
        items.append((heap, f"Go heap {format_size(heap)}" + (
            f" of which {format_size(free)} freed but not yet returned" if free else "")
            + (f"; {format_size(garbage)} of what it held was garbage awaiting GC"
               if garbage and garbage >= (1 << 20) else "")))
    names = {"maps": "maps", "processes": "other anon", "page_cache": "page cache",
             "kernel": "kernel", "go_stacks": "Go stacks", "go_runtime": "Go runtime",
             "go_arenas": "Go heap arenas", "binary": "binary pages", "sock": "sockets",
             "thp_residue": "huge-page residue (reclaimable)"}
    for k, v in parts.items():
        if k == "unexplained" or not v or v <= 0:
            continue
        items.append((v, f"{names.get(k, labels.get(k, k))} {format_size(v)}"))
    items.sort(key=lambda x: -x[0])
    floor = pk["usage"] * 0.03
    shown = [text for v, text in items if v >= floor][:5]
    return f"peak {format_size(pk['usage'])} at {pk['t']:.1f} s: " + ", ".join(shown)


def trace_headline(doc: dict) -> str:
    s = doc["summary"]
    pk = s.get("peak")
    if not pk:
        return "no samples"
    lim = s.get("limit")
    text = (f"peak {format_size(pk['usage'])} at {pk['t']:.2f}s"
            + (f" = {_pct(s['peak_share'])} of the {format_size(lim)} limit" if lim else "")
            + f"; started at {format_size(s['start'])}, settled at {format_size(s['settled'])}"
            + f" ({s['samples']} samples over {s['duration']:.1f}s)")
    if s.get("kernel_peak_between"):
        text += f"; the kernel's high-water mark was {format_size(s['kernel_peak'])}"
    return text


def render_trace_table(doc: dict, out: IO[str], width: int | None = None) -> None:
    from rich.table import Table
    con = _console(out, width)
    cg = doc["cgroup"]
    con.print(f"{cg.get('path')} (cgroup v{cg.get('version')})"
              + (f": {' '.join(doc['command'])}" if doc.get("command") else ""))
    con.print(trace_headline(doc))
    pk = (doc["summary"] or {}).get("peak")
    why = peak_explained(doc)
    if why and any(k.startswith("go_") for k in (pk or {}).get("parts", {})):
        con.print(why)
    if pk:
        t = Table(title=f"at the peak ({pk['t']:.2f}s)", title_justify="left", box=None,
                  pad_edge=False)
        t.add_column("part")
        t.add_column("size", justify="right")
        labels = dict(COMPONENTS)
        for k, v in pk["parts"].items():
            t.add_row(labels.get(k, k), format_size(v))
        con.print(t)
    for n in (doc["summary"] or {}).get("notes", []):
        con.print(f"note: {markup(n)}")
    if doc.get("interrupted"):
        con.print("note: interrupted: the trace is shorter than asked")
    if doc.get("exit_code") is not None:
        con.print(f"the command exited with {doc['exit_code']}")


# ---- the chart ----

def _plotly():
    try:
        import plotly.graph_objects as go
        import plotly.io as pio
        from plotly.offline import get_plotlyjs
    except ImportError as e:  # pragma: no cover - depends on the environment
        from ..errors import UnsupportedError
        raise UnsupportedError("plots need plotly, the `html` extra: pip install '.[html]' in "
                               "a checkout (.venv/bin/pip ...), or pip install plotly") from e
    return go, pio, get_plotlyjs


def _wrap(text: str, width: int) -> str:
    import html as _html
    import textwrap
    return "<br>".join(_html.escape(x) for x in textwrap.wrap(text, width))


def trace_figure(doc: dict, *, width: int = 1100, height: int = 560):
    """The stacked chart of a trace: usage split into its parts over time, the limit, and
    the peak marked."""
    go, _pio, _ = _plotly()
    samples = doc["samples"]
    ts = [s["t"] for s in samples]
    fig = go.Figure()
    for key, label, color in _PLOT_PARTS:
        ys = []
        for s in samples:
            v = s["parts"].get(key) or 0
            if key == "kernel":
                v += s["parts"].get("sock") or 0
            ys.append(in_mi(max(v, 0)))
        if key == "unexplained" and not any(y > 0.05 for y in ys):
            continue
        if key not in ("processes", "page_cache", "kernel", "maps") and not any(
                key in x["parts"] for x in samples):
            continue
        fig.add_trace(go.Scatter(
            x=ts, y=ys, name=label + (" + sockets" if key == "kernel" and any(
                s["parts"].get("sock") for s in samples) else ""),
            mode="lines", line=dict(width=0.5, color=color), stackgroup="usage",
            fillcolor=color, hovertemplate="%{y:.1f}Mi<extra>" + label + "</extra>"))
    fig.add_trace(go.Scatter(x=ts, y=[in_mi(s["usage"]) for s in samples], name="usage",
                             mode="lines", line=dict(width=1.5, color="#222"),
                             hovertemplate="%{y:.1f}Mi<extra>usage</extra>"))
    s = doc["summary"] or {}
    limit = s.get("limit") or next((x["limit"] for x in samples if x.get("limit")), None)
    top = in_mi(max([x["usage"] for x in samples] + [0]))
    if limit:
        fig.add_trace(go.Scatter(x=[ts[0], ts[-1]] if ts else [0, 1],
                                 y=[in_mi(limit)] * 2, name=f"limit {format_size(limit)}",
                                 mode="lines", line=dict(color="#D62728", width=2, dash="dash"),
                                 hoverinfo="skip"))
        top = max(top, in_mi(limit))
    pk = s.get("peak")
    if pk:
        share = f" ({s['peak_share'] * 100:.0f}% of limit)" if s.get("peak_share") else ""
        fig.add_trace(go.Scatter(
            x=[pk["t"]], y=[in_mi(pk["usage"])], name="peak", mode="markers",
            marker=dict(size=11, color="#D62728", symbol="diamond",
                        line=dict(color="white", width=1.5)),
            hovertemplate="peak %{y:.1f}Mi at %{x:.2f}s<extra></extra>"))
        label = f"peak {format_size(pk['usage'])} at {pk['t']:.2f}s{share}"
        if any(k.startswith("go_") for k in pk.get("parts", {})):
            why = peak_explained(doc) or ""
            label += "<br>" + _wrap(why[why.find(": ") + 2:], 60)
        fig.add_annotation(x=pk["t"], y=in_mi(pk["usage"]), ax=70, ay=40,
                           text=label, align="left",
                           showarrow=True, arrowhead=2, arrowcolor="#D62728",
                           font=dict(color="#D62728", size=13), bgcolor="rgba(255,255,255,0.9)",
                           bordercolor="#D62728", borderpad=3, xanchor="left")
    if doc.get("exit_code") is not None and ts:
        fig.add_vline(x=ts[-1], line=dict(color="#888", width=1, dash="dot"))
        fig.add_annotation(x=ts[-1], y=1, yref="paper", text="command exited",
                           showarrow=False, xanchor="right", yanchor="top",
                           font=dict(color="#666", size=12))
    cg = doc.get("cgroup") or {}
    cmd = " ".join(doc.get("command") or [])
    title = f"bpfmem pod --trace: {cmd or cg.get('path', '')}"
    if len(title) > 110:
        title = title[:107] + "..."
    import html as _html
    title = (_html.escape(title) + "<br><span style='font-size:13px;color:#555'>"
             + _html.escape(trace_headline(doc)) + "</span>")
    fig.update_layout(
        template="none", width=width, height=height, paper_bgcolor="white",
        plot_bgcolor="white",
        font=dict(family="Inter, Segoe UI, Helvetica, Arial, sans-serif", size=13,
                  color="#222"),
        title=dict(text=title, x=0.01, xanchor="left", y=0.955, yanchor="top",
                   font=dict(size=16)),
        margin=dict(l=70, r=20, t=88, b=90),
        xaxis=dict(title=dict(text="seconds since the trace started", standoff=6),
                   rangemode="tozero",
                   showgrid=True, gridcolor="#eee", zeroline=False),
        yaxis=dict(title="Mi", rangemode="tozero", range=[0, top * 1.12 if top else 1],
                   showgrid=True, gridcolor="#eee", zeroline=False),
        legend=dict(orientation="h", x=0, y=-0.13, xanchor="left", yanchor="top",
                    traceorder="normal"),
        hovermode="x unified")
    return fig


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data: blob:; font-src data:; connect-src 'none'">
<style>html,body{{margin:0;padding:0;background:white;font-family:Inter,Segoe UI,Helvetica,Arial,sans-serif;color:#222}}
p{{margin:4px 16px 8px;font-size:14px}}</style>
<script>window.PlotlyConfig={{MathJaxConfig:"local"}};</script>
<script>{plotlyjs}</script></head>
<body>{headline}<div id="bpfmem-pod-trace" style="width:{width}px;height:{height}px"></div>
<script>(function(){{var f={fig};Plotly.newPlot("bpfmem-pod-trace",f.data,f.layout,{config});}})();</script>
</body></html>
"""


PLOT_FORMATS = {".png": "png", ".html": "html", ".htm": "html"}


def plot_format(path: str) -> str:
    """``"png"`` or ``"html"``: the picture of a trace a file name asks for (by its suffix)."""
    for suffix, fmt in PLOT_FORMATS.items():
        if path.lower().endswith(suffix):
            return fmt
    raise ValueError(f"--plot wants a .png or .html file, not {path}")


def render_trace_html(doc: dict, *, width: int = 1100, height: int = 560,
                      static: bool = False) -> str:
    """A self-contained page (plotly.js inline: works offline) with the trace's chart;
    ``static`` leaves out the headline and the plot's toolbar (for a PNG)."""
    import html as _html
    go, pio, get_plotlyjs = _plotly()
    fig = trace_figure(doc, width=width, height=height)
    config = {"displaylogo": False, "responsive": False, "staticPlot": static,
              "displayModeBar": not static}
    headline = "" if static else f"<p>{_html.escape(trace_headline(doc))}</p>"
    return _PAGE.format(title="bpfmem pod trace", plotlyjs=get_plotlyjs(), headline=headline,
                        width=width, height=height, fig=pio.to_json(fig, validate=True),
                        config=json.dumps(config))


# ---- the renderers of the table (report/formats.py). A PodView is drawn from the view; a
# PodTrace from its document, the one pages of a trace are drawn from: a trace saved as JSON
# or JSON lines is redrawn the same way (api.write_trace_plot) ----

def pod_text(view, out: IO[str], *, width: int | None = None) -> None:
    render_table(view, out, width)


def trace_text(trace, out: IO[str], *, width: int | None = None) -> None:
    render_trace_table(document(trace), out, width)


def trace_jsonl(trace, out: IO[str]) -> None:
    render_jsonl(document(trace), out)


def trace_html(trace, out: IO[str], *, width: int = 1100, height: int = 560) -> None:
    out.write(render_trace_html(document(trace), width=width, height=height))
    out.write("\n")


def headline(trace) -> str:
    """The one line that sums up a trace (:func:`trace_headline` of its document)."""
    return trace_headline(document(trace))
