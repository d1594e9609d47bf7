"""The chart of a trace (`bpfmem pod --trace --plot`), from documents of fixed samples: the
time axis is the trace's span, the peak's label sits above the peak (clear of the x axis, its
ticks and title), the page says its summary once, no two parts look alike, a part that is 0
throughout stays out of the legend, and the chart says how a traced command ended."""

from __future__ import annotations

import itertools

import pytest

from bpfmem import api
from bpfmem.analysis import pod as ap
from bpfmem.report import documents as docs
from bpfmem.report import pod as rp

pytest.importorskip("plotly")

MiB = 1 << 20
PROF = api.profile("6.18", cpus=2)


def trace_doc(us=(5, 30, 70, 90, 60, 45, 45, 45), *, step=0.25, parts=None, command=("agent",),
              exit_code=0, interrupted=False, limit=128 * MiB):
    def split(u):
        if parts is not None:
            return parts(u)
        return {"processes": (u - 12) * MiB, "page_cache": 0, "kernel": MiB,
                "maps": 10 * MiB, "unexplained": 0, "sock": 0}
    points = [ap.TracePoint(i * step, u * MiB, limit, split(u), 1, 3, u * MiB)
              for i, u in enumerate(us)]
    s = ap.summarize_trace(points, fresh_cgroup=True)
    return docs.build_trace_report(points, s, cgroup={"path": "/x", "version": 1},
                                   kernel=PROF.describe(),
                                   command=list(command) if command else None,
                                   interval=step, interrupted=interrupted, exit_code=exit_code)


def _peak_note(fig):
    return next(a for a in fig.layout.annotations if a.text.startswith("peak "))


def test_the_time_axis_is_the_traces_span():
    doc = trace_doc(us=[20] * 21, step=0.25)            # 0 .. 5.0 s
    fig = rp.trace_figure(doc)
    assert tuple(fig.layout.xaxis.range) == (0.0, 5.0)
    assert fig.layout.xaxis.autorange is False
    limit = next(t for t in fig.data if t.name.startswith("limit"))
    assert tuple(limit.x) == (0.0, 5.0)                # the limit line spans it, no further


@pytest.mark.parametrize("us", [(5, 30, 70, 90, 60, 45), (5, 10, 20, 40, 60, 127),
                                (127, 20, 20, 20, 20, 20)])
def test_the_peak_label_is_one_line_above_the_peak(us):
    """Above the peak nothing of the stack is drawn: the label's box has its bottom edge
    above the peak (yanchor bottom, a negative pixel offset), so it can never reach the x
    axis below; the y axis leaves room above the highest point for it; it leans towards the
    side with more room."""
    doc = trace_doc(us=us)
    fig = rp.trace_figure(doc)
    note = _peak_note(fig)
    pk = doc["summary"]["peak"]
    assert "<br>" not in note.text and note.yanchor == "bottom" and note.ay < 0
    assert note.y == pytest.approx(pk["usage"] / MiB)
    assert fig.layout.yaxis.range[1] >= 1.3 * pk["usage"] / MiB
    late = pk["t"] > 0.6 * doc["samples"][-1]["t"]
    assert (note.xanchor, note.ax < 0) == (("right", True) if late else ("left", False))


def test_a_go_peak_is_explained_under_the_title_not_in_the_box():
    def go_parts(u):
        return {"go_heap": (u - 20) * MiB, "go_free": 4 * MiB, "go_stacks": MiB,
                "processes": 10 * MiB, "kernel": MiB, "maps": 4 * MiB, "unexplained": 0}
    doc = trace_doc(parts=go_parts)
    fig = rp.trace_figure(doc)
    assert "<br>" not in _peak_note(fig).text
    assert "at the peak: Go heap" in fig.layout.title.text
    assert fig.layout.margin.t > rp.trace_figure(trace_doc()).layout.margin.t


def test_the_page_says_its_summary_once():
    for static in (False, True):
        page = rp.render_trace_html(trace_doc(), static=static)
        assert page.count("samples over") == 1, static


def test_no_two_parts_look_alike():
    def rgb(c):
        return tuple(int(c[i:i + 2], 16) for i in (1, 3, 5))
    # sockets are drawn with kernel; BTF objects are 0 bytes exactly and draw no band
    keys = {k for k, _ in ap.COMPONENTS} - {"sock", "btf"}
    assert keys <= set(rp.PART_COLORS), keys - set(rp.PART_COLORS)
    colors = dict(rp.PART_COLORS, LIMIT=rp.LIMIT_COLOR, USAGE=rp.USAGE_COLOR)
    for (a, x), (b, y) in itertools.combinations(colors.items(), 2):
        d = sum((p - q) ** 2 for p, q in zip(rgb(x), rgb(y))) ** 0.5
        assert d >= 60, f"{a} {x} and {b} {y} are {d:.0f} apart"


def test_every_part_is_stacked_and_zero_parts_stay_out_of_the_legend():
    def parts(u):
        return {"processes": (u - 14) * MiB, "thp_residue": MiB, "open_files": 0,
                "page_cache": 0, "kernel": MiB, "sock": 0, "maps": 12 * MiB,
                "unexplained": 0}
    fig = rp.trace_figure(trace_doc(us=(20, 30, 70, 90, 60, 45), parts=parts))
    names = [t.name for t in fig.data if t.stackgroup]
    assert names == ["processes (anon)", "huge-page residue (reclaimable)",
                     "kernel (not maps)", "BPF maps"], names
    # the stack adds up to usage: no part of the samples left out of it
    usage = next(t for t in fig.data if t.name == "usage")
    stacked = [sum(t.y[i] for t in fig.data if t.stackgroup) for i in range(len(usage.y))]
    assert stacked == pytest.approx(list(usage.y))


@pytest.mark.parametrize("kw,said", [
    (dict(exit_code=None), "command stopped at the end of the trace"),
    (dict(exit_code=None, interrupted=True), "trace interrupted: command stopped"),
    (dict(exit_code=0), "command exited with 0"),
    (dict(exit_code=3), "command exited with 3"),
    (dict(exit_code=-9), "command killed by signal 9 (SIGKILL)"),
    (dict(exit_code=-200), "command killed by signal 200"),
    (dict(command=None, exit_code=None), None),
])
def test_the_chart_says_how_the_command_ended(kw, said):
    doc = trace_doc(**kw)
    fig = rp.trace_figure(doc)
    texts = [a.text for a in fig.layout.annotations if not a.text.startswith("peak ")]
    assert texts == ([said] if said else [])
    assert rp.command_end(doc) == said
    end = doc["samples"][-1]["t"]
    assert [s.x0 for s in fig.layout.shapes] == ([end] if said else [])
