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


# the chart's colours, one a part (analysis.pod.COMPONENTS, stacked in that order; sockets go
# with kernel, unexplained on top): no two alike (at least 60 apart in RGB, also from the
# limit's red and the usage line), the Go runtime's parts in browns and greens so none is
# taken for "processes (anon)"
PART_COLORS = {"processes": "#4C78A8", "go_heap": "#8C564B", "go_free": "#C49C94",
               "go_arenas": "#BCBD22", "go_stacks": "#2CA02C", "go_runtime": "#98DF8A",
               "thp_residue": "#DBDB8D", "binary": "#E377C2", "open_files": "#9EDAE5",
               "page_cache": "#72B7B2", "kernel": "#9467BD", "maps": "#F58518",
               "programs": "#17BECF",
               "unexplained": "#D9D9D9"}
LIMIT_COLOR, USAGE_COLOR = "#D62728", "#222222"
_OTHER_COLOR = "#7F7F7F"        # a part this table does not know yet
# BTF is charged to no cgroup (always 0 bytes: no band)
_PLOT_PARTS = tuple((k, label) for k, label in COMPONENTS
                    if k not in ("sock", "unexplained", "btf")) \
    + (("unexplained", "unexplained"),)


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
    ended = command_end(doc)
    if ended:
        con.print(ended)


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


def _series(samples: list, key: str) -> list[float]:
    """One part of every sample, in Mi (sockets counted with the kernel)."""
    ys = []
    for s in samples:
        v = s["parts"].get(key) or 0
        if key == "kernel":
            v += s["parts"].get("sock") or 0
        ys.append(in_mi(max(v, 0)))
    return ys


def command_end(doc: dict) -> str | None:
    """How a traced command ended, as the chart says it at the trace's end: exited (with its
    code), killed by a signal, or still running and stopped when the trace ended (bpfmem
    kills what it started); None when no command was traced."""
    if not doc.get("command"):
        return None
    code = doc.get("exit_code")
    if code is None:
        return ("trace interrupted: command stopped" if doc.get("interrupted")
                else "command stopped at the end of the trace")
    if code >= 0:
        return f"command exited with {code}"
    import signal
    try:
        name = f" ({signal.Signals(-code).name})"
    except ValueError:
        name = ""
    return f"command killed by signal {-code}{name}"


_VISIBLE = 0.05     # Mi: a part never above this is not drawn (nor put in the legend)


def trace_figure(doc: dict, *, width: int = 1100, height: int = 560):
    """The stacked chart of a trace: usage split into its parts over time (a part that is
    0 throughout is left out), the limit, the peak marked (its label above it, clear of the
    axes; what made it, for a Go process, under the title) and how a traced command ended.
    The time axis is the trace's span."""
    go, _pio, _ = _plotly()
    samples = doc["samples"]
    ts = [s["t"] for s in samples]
    fig = go.Figure()
    for key, label in _PLOT_PARTS:
        ys = _series(samples, key)
        if not any(y > _VISIBLE for y in ys):
            continue
        color = PART_COLORS.get(key, _OTHER_COLOR)
        fig.add_trace(go.Scatter(
            x=ts, y=ys, name=label + (" + sockets" if key == "kernel" and any(
                s["parts"].get("sock") for s in samples) else ""),
            mode="lines", line=dict(width=0.5, color=color), stackgroup="usage",
            fillcolor=color, hovertemplate="%{y:.1f}Mi<extra>" + label + "</extra>"))
    fig.add_trace(go.Scatter(x=ts, y=[in_mi(s["usage"]) for s in samples], name="usage",
                             mode="lines", line=dict(width=1.5, color=USAGE_COLOR),
                             hovertemplate="%{y:.1f}Mi<extra>usage</extra>"))
    s = doc["summary"] or {}
    start = min(ts[0], 0.0) if ts else 0.0
    end = ts[-1] if ts and ts[-1] > start else start + max(doc.get("interval") or 0, 1.0)
    limit = s.get("limit") or next((x["limit"] for x in samples if x.get("limit")), None)
    top = in_mi(max([x["usage"] for x in samples] + [0]))
    if limit:
        fig.add_trace(go.Scatter(x=[start, end], y=[in_mi(limit)] * 2,
                                 name=f"limit {format_size(limit)}", mode="lines",
                                 line=dict(color=LIMIT_COLOR, width=2, dash="dash"),
                                 hoverinfo="skip"))
        top = max(top, in_mi(limit))
    ceiling = top * 1.12 if top else 1.0
    pk = s.get("peak")
    why = ""
    if pk:
        share = f" ({s['peak_share'] * 100:.0f}% of limit)" if s.get("peak_share") else ""
        peak = in_mi(pk["usage"])
        fig.add_trace(go.Scatter(
            x=[pk["t"]], y=[peak], name="peak", mode="markers",
            marker=dict(size=11, color=LIMIT_COLOR, symbol="diamond",
                        line=dict(color="white", width=1.5)),
            hovertemplate="peak %{y:.1f}Mi at %{x:.2f}s<extra></extra>"))
        # one line, above the peak (nothing of the stack is higher): the y axis leaves room
        # for it, and it leans to the side of the plot with more room
        ceiling = max(ceiling, peak * 1.3)
        left = pk["t"] - start > 0.6 * (end - start)
        fig.add_annotation(x=pk["t"], y=peak, ax=-40 if left else 40, ay=-34,
                           text=f"peak {format_size(pk['usage'])} at {pk['t']:.2f}s{share}",
                           align="left", showarrow=True, arrowhead=2, arrowcolor=LIMIT_COLOR,
                           font=dict(color=LIMIT_COLOR, size=13),
                           bgcolor="rgba(255,255,255,0.9)", bordercolor=LIMIT_COLOR,
                           borderpad=3, xanchor="right" if left else "left",
                           yanchor="bottom")
        if any(k.startswith("go_") for k in pk.get("parts", {})):
            why = peak_explained(doc) or ""
            why = why[why.find(": ") + 2:]
    ended = command_end(doc)
    if ended and ts:
        fig.add_vline(x=end, line=dict(color="#888", width=1, dash="dot"))
        fig.add_annotation(x=end, y=1, yref="paper", text=ended, showarrow=False,
                           xanchor="right", yanchor="top", font=dict(color="#666", size=12))
    cg = doc.get("cgroup") or {}
    cmd = " ".join(doc.get("command") or [])
    title = f"bpfmem pod --trace: {cmd or cg.get('path', '')}"
    if len(title) > 110:
        title = title[:107] + "..."
    import html as _html
    sub = [_html.escape(trace_headline(doc))]
    if why:
        sub.append(_wrap("at the peak: " + why, 150))
    lines = sum(x.count("<br>") + 1 for x in sub)
    title = (_html.escape(title) + "<br><span style='font-size:13px;color:#555'>"
             + "<br>".join(sub) + "</span>")
    fig.update_layout(
        template="none", width=width, height=height, paper_bgcolor="white",
        plot_bgcolor="white",
        font=dict(family="Inter, Segoe UI, Helvetica, Arial, sans-serif", size=13,
                  color="#222"),
        title=dict(text=title, x=0.01, xanchor="left", y=0.955, yanchor="top",
                   font=dict(size=16)),
        margin=dict(l=70, r=20, t=70 + 18 * lines, b=90),
        xaxis=dict(title=dict(text="seconds since the trace started", standoff=6),
                   range=[start, end], autorange=False,
                   showgrid=True, gridcolor="#eee", zeroline=False),
        yaxis=dict(title="Mi", range=[0, ceiling], autorange=False,
                   showgrid=True, gridcolor="#eee", zeroline=False),
        legend=dict(orientation="h", x=0, y=-0.13, xanchor="left", yanchor="top",
                    traceorder="normal"),
        hovermode="x unified")
    return fig


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data: blob:; font-src data:; connect-src 'none'">
<style>html,body{{margin:0;padding:0;background:white;font-family:Inter,Segoe UI,Helvetica,Arial,sans-serif;color:#222}}</style>
<script>window.PlotlyConfig={{MathJaxConfig:"local"}};</script>
<script>{plotlyjs}</script></head>
<body><div id="bpfmem-pod-trace" style="width:{width}px;height:{height}px"></div>
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
    """A self-contained page (plotly.js inline: works offline) with the trace's chart (its
    title says the summary, once); ``static`` leaves out the plot's toolbar (for a PNG)."""
    go, pio, get_plotlyjs = _plotly()
    fig = trace_figure(doc, width=width, height=height)
    config = {"displaylogo": False, "responsive": False, "staticPlot": static,
              "displayModeBar": not static}
    return _PAGE.format(title="bpfmem pod trace", plotlyjs=get_plotlyjs(),
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
