"""The ``bpfmem/pod/v1`` and ``bpfmem/pod-trace/v1`` documents (the trace's JSON lines, and the
tables of both) of
fixed samples, byte for byte against tests/data/golden/ (as test_golden_json.py does for the
file commands): a pod reading with a Go process (its smaps classes, runtime figures and heap
profile), a held map and an upgrade's headroom; a trace of readings with and without it.

To record a new golden file after a deliberate schema change (say so in the commit):
    BPFMEM_GOLDEN_UPDATE=1 python3 -m pytest tests/test_golden_pod.py
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from test_gomem import detail
from test_pod import cg_v1
from test_renderers_pod_size import _reading

from bpfmem import api
from bpfmem.analysis import pod as ap
from bpfmem.parse.pprof import TopFunction
from bpfmem.records import LiveMap, Owner, PodSample, ProcMem
from bpfmem.report import formats
from bpfmem.uapi import MapType

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "data" / "golden"
MiB = 1 << 20
PROF = api.profile("6.18", cpus=2)
# paths as a user in the checkout types them: the pages do not depend on where it is
V054, BEFORE = (f"examples/seed/cni_{v}.bpf.o" for v in ("v054", "v060_before"))


def _go_reading(t: float = 0.0) -> PodSample:
    d = replace(detail(env={"GOGC": "50", "GOMEMLIMIT": "200MiB"}),
                top=(TopFunction("main.fill", 40 * MiB, 48 * MiB),
                     TopFunction("runtime.malg", MiB, MiB)),
                pprof_url="http://127.0.0.1:9/debug/pprof/heap", pprof_total=60 * MiB)
    cg = cg_v1(usage=300 * MiB, anon=150 * MiB, cache=60 * MiB, kmem=20 * MiB,
               path="/agent-pod", peak=310 * MiB, procs=(7,))
    rss = d.classes.rss
    procs = (ProcMem(7, "agent", rss, rss, rss - MiB, rss - 2 * MiB, 4 * MiB, 2 * MiB, 0,
                     100.0),)
    maps = (LiveMap(id=9, name="conntrack_table", type=int(MapType.LRU_HASH), key_size=16,
                    value_size=40, max_entries=65536, map_flags=0, map_extra=0, btf_id=0,
                    memlock=5 << 20, frozen=False, owners=(Owner(7, "agent", "/agent-pod"),),
                    entries=1000, entries_complete=True, entries_method="batch"),)
    return PodSample(t, 0.0, 0.0, cg, procs, maps, {}, details={7: d})


def _pod() -> ap.PodView:
    view = ap.pod_view(_go_reading(), PROF)
    headroom, _diff = api.pod_headroom(view, [BEFORE], [V054], profile=PROF)
    return api.pod_result(view, PROF, headroom=headroom, after=[BEFORE], before=[V054])


def _trace() -> ap.PodTrace:
    b = ap.TraceBuilder(PROF)
    for i, u in enumerate((20, 70, 90, 50)):
        b.add(_reading(u * MiB, 10.0 + i * 0.25), i * 0.25)
    b.add(_go_reading(11.0), 1.0)
    cg = ap.TraceCgroup("/agent-pod", "/sys/fs/cgroup/memory/p", 1, True)
    return b.finish(cgroup=cg, kernel_peak_before=64 * MiB, command=["agent", "--run"],
                    exit_code=-9, interval=0.25, interrupted=True, t0_monotonic=10.0)


RUNS = {   # golden name -> (sample, format)
    "pod-view": (_pod, "json"),
    "pod-trace": (_trace, "json"),
    "pod-trace-jsonl": (_trace, "jsonl"),
    "pod-view-text": (_pod, "text"),       # the tables too: drawn from the results
    "pod-trace-text": (_trace, "text"),
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_document_as_recorded(name, monkeypatch):
    monkeypatch.chdir(REPO)
    make, fmt = RUNS[name]
    out = io.StringIO()
    formats.render(make(), fmt, out)
    text = out.getvalue()
    path = GOLDEN / f"{name}.out"
    if os.environ.get("BPFMEM_GOLDEN_UPDATE"):
        path.write_text(text)
    assert text == path.read_text(), f"{name}: output differs from {path.relative_to(REPO)}"


def test_the_samples_reach_every_part_of_the_documents():
    view = json.loads((GOLDEN / "pod-view.out").read_text())
    g = view["go"][0]
    assert g["smaps"] and g["runtime"] and g["heap_profile"]["top"]
    assert view["maps"] and view["processes"] and view["upgrade"]["lines"]
    trace = json.loads((GOLDEN / "pod-trace.out").read_text())
    assert trace["at_peak"] and trace["summary"]["notes"] is not None
    assert len(trace["samples"]) == 5


def test_a_saved_trace_is_drawn_again_as_it_was(tmp_path, capsys):
    """`pod --from FILE` reads a trace saved as JSON lines or JSON back (the input door) and
    draws the same table the trace had; files that are no trace are one-line errors."""
    from bpfmem import cli
    saved = {"t.jsonl": (GOLDEN / "pod-trace-jsonl.out").read_text(),
             "t.json": (GOLDEN / "pod-trace.out").read_text()}
    want = (GOLDEN / "pod-trace-text.out").read_text()
    for name, text in saved.items():
        (tmp_path / name).write_text(text)
        assert cli.main(["pod", "--from", str(tmp_path / name)]) == 0
        out, _err = capsys.readouterr()
        assert out == want, name
    pytest.importorskip("plotly")
    page = tmp_path / "t.html"
    assert cli.main(["pod", "--from", str(tmp_path / "t.jsonl"), "--plot", str(page)]) == 0
    assert "Plotly.newPlot" in page.read_text()
    capsys.readouterr()
    (tmp_path / "bad.jsonl").write_text('{"kind": "header", "schema": "bpfmem/pod/v1"}\n')
    (tmp_path / "cut.json").write_text('{"schema": "bpfmem/pod-trace/v1", "cgroup": {}, '
                                       '"summary": {"peak": {"t": 1}}, "samples": []}')
    for bad in ("bad.jsonl", "cut.json"):
        assert cli.main(["pod", "--from", str(tmp_path / bad)]) == 1
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "not a" in err and "Traceback" not in err
    assert cli.main(["pod", "--from", str(tmp_path / "t.json"), "--pid", "1"]) == 2
    assert "leave out --pid" in capsys.readouterr().err
