#!/usr/bin/env python3
"""Every picture the README shows, drawn again from fixed inputs (the same bytes every run):

    .venv/bin/python docs/pictures.py [OUTDIR]      (default: docs/)

- top.svg         `bpfmem top` over docs/inputs/node-a.json (a scan of real maps, recorded);
- pod-trace.png   `bpfmem pod --from docs/inputs/startup.jsonl --plot` (a recorded trace);
- seed-report.png `bpfmem check --format html` + `diff` of the seed objects (examples/seed).

It needs the package with its `html` extra (plotly) and Chromium for the PNGs (the same
headless Chromium `--plot FILE.png` uses); tests/test_pictures.py runs it and compares with
the committed pictures. The inputs were recorded on a real kernel, as root, with

    .venv/bin/python docs/pictures.py --record

(a CNI-like set of maps held by two processes and 24 programs, scanned with their entries; the v0.6.0 start-up
of the seed case traced from its first instruction). Recording changes the pictures: commit
the inputs with them."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INPUTS = ROOT / "docs" / "inputs"
NODE = INPUTS / "node-a.json"
TRACE = INPUTS / "startup.jsonl"
SEED = ROOT / "examples" / "seed"
PICTURES = ("top.svg", "pod-trace.png", "seed-report.png")

TOP_WIDTH, TOP_ROWS, TOP_CLOCK = 128, 12, "14:02:17"
SEED_SIZE = (1280, 1500)
TRACE_LABEL = ["galactic-cni", "(v0.6.0 start-up, simulated: 48 MiB config, "
               "then the seed's maps)"]


def top_svg(out: Path) -> None:
    from rich.console import Console
    from bpfmem import api
    from bpfmem.report.top import top_view
    snap = api.load_snapshot(str(NODE))
    view = api.snapshot_view(snap, api.profile(snap.kernel, cpus=snap.possible_cpus))
    console = Console(record=True, width=TOP_WIDTH, force_terminal=True, color_system="truecolor",
                      file=io.StringIO())
    console.print(top_view(view, total_maps=len(snap.maps), rows=TOP_ROWS, filters={},
                           interval=2.0, clock=TOP_CLOCK))
    # rich names the SVG's CSS classes after a hash of the page: the same input, the same name
    out.write_text(console.export_svg(title="bpfmem top"), encoding="utf-8")


def pod_trace_png(out: Path) -> None:
    from bpfmem import api
    api.write_trace_plot(api.load_trace(str(TRACE)), str(out))


def seed_report_png(out: Path) -> None:
    from bpfmem import api
    from bpfmem.host.browser import screenshot_html
    from bpfmem.report import html as report_html
    before, after = (f"examples/seed/cni_v060_{v}.bpf.o" for v in ("before", "after"))
    check = api.check_objects([before], limit=128 << 20, max_fraction=0.4,
                              profiles=api.profiles(["6.1", "6.18"], [2, 64]))
    diff = api.diff_objects([before], [after], profile=api.profile("6.18", cpus=2),
                            limit=128 << 20)
    width, height = SEED_SIZE
    screenshot_html(report_html.render_html(check, diff), str(out), width=width,
                    height=height)


DRAW = {"top.svg": top_svg, "pod-trace.png": pod_trace_png,
        "seed-report.png": seed_report_png}


def draw(outdir: Path, names=PICTURES) -> list[Path]:
    """Draw the pictures ``names`` into ``outdir`` (paths in the checkout are relative to
    it, as a user types them)."""
    outdir = outdir.resolve()
    outdir.mkdir(parents=True, exist_ok=True)
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        for name in names:
            DRAW[name](outdir / name)
        return [outdir / name for name in names]
    finally:
        os.chdir(here)


# ---- recording the inputs (root, a real kernel) ----

_STARTUP = r"""
import json, sys, time
from bpfmem.host import bpfsys
maps = json.loads(sys.argv[1])
time.sleep(0.4)                                   # the runtime starts
buf = []                                          # start-up: read and index the config
for i in range(6):
    buf.append(bytearray(b"\x01") * (8 << 20))
    time.sleep(0.08)
fds = []
for t, k, v, m, flags, name in maps:              # then create the datapath's maps
    fds.append(bpfsys.map_create(t, k, v, m, flags, name))
    time.sleep(0.12)
time.sleep(0.3)
del buf                                           # and give the start-up memory back
time.sleep(2.0)
"""


def record_trace() -> None:
    from bpfmem import api
    from bpfmem.model.estimate import shape_of_spec
    from bpfmem.report.documents import document
    from bpfmem.report.pod import render_jsonl
    prof = api.profile()
    plan = []
    for m in api.load_object(str(SEED / "cni_v060_before.bpf.o")).maps:
        sh, _ = shape_of_spec(m, prof)
        plan.append([sh.type, sh.key_size, sh.value_size, sh.max_entries, sh.map_flags,
                     m.name[:15]])
    env_path = str(ROOT / "src")
    os.environ["PYTHONPATH"] = env_path + os.pathsep + os.environ.get("PYTHONPATH", "")
    doc = document(api.pod_trace(command=[sys.executable, "-c", _STARTUP, json.dumps(plan)],
                                 duration=10, interval=0.05, limit=128 << 20,
                                 command_output=subprocess.DEVNULL, profile=prof))
    doc["command"] = TRACE_LABEL
    with open(TRACE, "w", encoding="utf-8") as f:
        render_jsonl(doc, f)


def record_node() -> None:
    from dataclasses import replace
    sys.path.insert(0, str(ROOT / "tests"))
    from mapfarm import MapFarm, MapPlan
    from progfarm import ProgFarm
    from bpfmem import api
    from bpfmem.report import formats
    plans = [
        [MapPlan("lb4_services", 1, 12, 12, 65536, fill=61000),
         MapPlan("lb4_backends", 1, 4, 16, 65536, fill=30500),
         MapPlan("ct4_global", 9, 14, 56, 262144, fill=98000),
         MapPlan("snat_v4", 9, 14, 40, 131072, fill=118500),
         MapPlan("policy_00412", 1, 12, 8, 16384, fill=15900),
         MapPlan("metrics", 5, 8, 16, 65536, map_flags=1, fill=1200),
         MapPlan("ipcache", 11, 24, 16, 512000, map_flags=1, fill=4000)],
        [MapPlan("hubble_flows", 9, 16, 64, 32768, fill=8000),
         MapPlan("events_cfg", 2, 4, 64, 64)],
    ]
    with MapFarm(plans, comms=["cni-agent", "flow-exporter"]) as farm, \
            ProgFarm(children=1, per_child=24, insns=200) as progs:
        ids = {m.id for m in farm.maps}
        prog_ids = {i for _pid, held in progs.children for i in held}
        snap = api.scan_node(entries=True, programs=True)
    # as on a Kubernetes node: each agent in its pod's cgroup (this host's own path says
    # nothing about the picture)
    pods = {"cni-agent": "/kubepods/pod5e2b7a90/3f1c09",
            "flow-exporter": "/kubepods/pod81d4c6e3/a47be5"}
    maps = tuple(replace(m, owners=tuple(replace(o, cgroup=pods.get(o.comm, o.cgroup))
                                          for o in m.owners))
                 for m in snap.maps if m.id in ids)
    # the agent's programs (socket filters the recorder loaded in a child of its own): owned
    # by the agent's pod; no BTF loaded by these processes; the JIT's vmalloc is the host's
    agent = next(o for m in maps for o in m.owners if o.comm == "cni-agent")
    owned = tuple(replace(p, owners=tuple(replace(o, comm=agent.comm, cgroup=agent.cgroup)
                                          for o in p.owners))
                  for p in snap.progs or () if p.id in prog_ids)
    snap = replace(snap, maps=maps, hostname="node-a", progs=owned, btfs=())
    out = io.StringIO()
    formats.render(api.snapshot_view(snap, None), "json", out)
    NODE.write_text(out.getvalue(), encoding="utf-8")


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT / "src"))
    if argv[:1] == ["--record"]:
        INPUTS.mkdir(parents=True, exist_ok=True)
        record_node()
        record_trace()
        print(f"recorded {NODE.relative_to(ROOT)} and {TRACE.relative_to(ROOT)}")
        argv = argv[1:]
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        print("usage: docs/pictures.py [--record] [OUTDIR]", file=sys.stderr)
        return 2
    from bpfmem.errors import BpfmemError
    try:
        for p in draw(Path(argv[0]) if argv else ROOT / "docs"):
            print(f"wrote {p}")
    except BpfmemError as e:          # no plotly, no Chromium, ...: one line
        print(f"docs/pictures.py: {e}", file=sys.stderr)
        return 1
    except ImportError as e:
        print(f"docs/pictures.py: no module {e.name}: run it with the checkout's "
              f".venv/bin/python (bash tests/run makes it), or pip install '.[html]'",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
