"""The pod and size families in the renderer table: every (result type, format) registered
for PodView, PodTrace, SizeResult, SizeDiff and BinaryCheck draws a result (a pod reading
and a trace built from hand-made readings, sizes of the seed objects); JSON is exactly the
result's document, and each type has a sample here."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bpfmem import api
from bpfmem.analysis import pod as ap
from bpfmem.host.cgroup import parse_cgroup_memory
from bpfmem.host.live import LiveMap, Owner
from bpfmem.host.podscan import PodSample, ProcMem
from bpfmem.parse.jsonlines import parse_trace_jsonl
from bpfmem.report import formats
from bpfmem.report.documents import document
from bpfmem.uapi import MapType

MiB = 1 << 20
REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "examples" / "seed"
V054, BEFORE, AFTER = (str(SEED / f"cni_{v}.bpf.o") for v in ("v054", "v060_before",
                                                              "v060_after"))
PROF = api.profile("6.18", cpus=2)
FAMILY = {"PodView", "PodTrace", "SizeResult", "SizeDiff", "BinaryCheck"}


def _reading(usage: int, t: float) -> PodSample:
    files = {"memory.usage_in_bytes": str(usage), "memory.limit_in_bytes": str(128 * MiB),
             "memory.stat": f"total_rss {usage // 2}\ntotal_cache {MiB}\n",
             "memory.kmem.usage_in_bytes": str(6 * MiB), "cgroup.procs": "1",
             "memory.max_usage_in_bytes": str(usage)}
    cg = parse_cgroup_memory(1, files, path="/agent-pod", fs_path="/sys/fs/cgroup/memory/p")
    m = LiveMap(id=7, name="conntrack_table", type=int(MapType.HASH), key_size=16,
                value_size=40, max_entries=65536, map_flags=0, map_extra=0, btf_id=0,
                memlock=None, frozen=None, owners=(Owner(1, "agent", "/agent-pod"),))
    p = ProcMem(1, "agent", usage // 2, usage // 2, usage // 3, usage // 3, 0, 0, 0, 100.0)
    return PodSample(t, 0.0, 0.0, cg, (p,), (m,), {})


def _pod() -> ap.PodView:
    view = ap.pod_view(_reading(60 * MiB, 0.0), PROF)
    headroom, _diff = api.pod_headroom(view, [BEFORE], [V054], profile=PROF)
    return api.pod_result(view, PROF, headroom=headroom, after=[BEFORE], before=[V054])


def _trace() -> ap.PodTrace:
    b = ap.TraceBuilder(PROF)
    for i, u in enumerate((20, 70, 90, 50, 50)):
        b.add(_reading(u * MiB, 10.0 + i * 0.25), i * 0.25)
    cg = ap.TraceCgroup("/agent-pod", "/sys/fs/cgroup/memory/p", 1, True)
    return b.finish(cgroup=cg, kernel_peak_before=None, command=["agent", "--run"],
                    exit_code=0, interval=0.25, interrupted=False, t0_monotonic=10.0)


SAMPLES = {   # result type -> (result, what it must show)
    "PodView": (_pod(), ["conntrack_table"]),
    "PodTrace": (_trace(), ["agent", "--run"]),
    "SizeResult": (api.binary_size([V054], by="section"), ["cni_v054.bpf.o"]),
    "SizeDiff": (api.binary_size_diff(V054, BEFORE, by="section"), [".BTF"]),
    "BinaryCheck": (api.check_binaries([V054, BEFORE], max_size=8 << 10, module_limits={}),
                    ["cni_v054.bpf.o"]),
}
OPTIONS = {("PodTrace", "html"): {"width": 800, "height": 400}}


def test_every_type_of_the_family_is_in_the_table_with_a_sample():
    kinds = {kind for kind, _fmt in formats.RENDERERS}
    assert FAMILY <= kinds
    assert {type(r).__name__ for r, _ in SAMPLES.values()} == set(SAMPLES) == FAMILY


@pytest.mark.parametrize("kind,fmt", [k for k in formats.RENDERERS if k[0] in FAMILY])
def test_renders(kind, fmt):
    result, shown = SAMPLES[kind]
    if fmt == "html":
        pytest.importorskip("plotly")
    out = io.StringIO()
    formats.render(result, fmt, out, **OPTIONS.get((kind, fmt), {}))
    text = out.getvalue()
    assert text.endswith("\n") and len(text.splitlines()) > 2, text
    for s in shown:
        assert s in text, (kind, fmt, s)
    if fmt == "json":
        assert json.loads(text) == json.loads(json.dumps(document(result), default=str))
        assert json.loads(text)["schema"].startswith("bpfmem/")
    if fmt == "jsonl":
        assert parse_trace_jsonl(text.splitlines()) == json.loads(json.dumps(document(result)))
    if fmt == "junit":
        root = ET.fromstring(text)
        assert int(root.get("tests")) == len(result.verdicts)
        assert int(root.get("failures")) == len(result.failures) > 0
    if fmt == "html":
        assert text.lstrip().lower().startswith("<!doctype html>")


def test_results_and_their_documents():
    view, trace = SAMPLES["PodView"][0], SAMPLES["PodTrace"][0]
    doc = document(view)
    assert doc["kernel"] == PROF.describe() and doc["upgrade"]["after"] == [BEFORE]
    assert doc["upgrade"]["projected"] == view.upgrade.headroom.projected
    t = document(trace)
    assert t["summary"]["peak"]["usage"] == 90 * MiB == trace.summary.peak.usage
    assert t["at_peak"]["usage"] == 90 * MiB and t["cgroup"]["scratch"]
    assert [s["t"] for s in t["samples"]] == [0.0, 0.25, 0.5, 0.75, 1.0]
    gate = SAMPLES["BinaryCheck"][0]
    assert not gate.passed and document(gate)["pass"] is False
    assert document(gate)["failures"] == list(gate.failures)
