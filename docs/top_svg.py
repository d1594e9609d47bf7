#!/usr/bin/env python3
"""Regenerate docs/top.svg: `bpfmem top` over a small CNI-like set of real maps (as root).

The maps are created by forked children (tests/mapfarm.py) and removed afterwards."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from rich.console import Console  # noqa: E402

from mapfarm import MapFarm, MapPlan  # noqa: E402
from bpfmem import api  # noqa: E402
from bpfmem.host.profile import host_profile  # noqa: E402
from bpfmem.report.top import top_view  # noqa: E402
from dataclasses import replace  # noqa: E402

PLANS = [
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

if __name__ == "__main__":
    with MapFarm(PLANS, comms=["cni-agent", "flow-exporter"]) as farm:
        names = {m.name for m in farm.maps}
        snap = api.scan_node(entries=True)
        snap = replace(snap, maps=tuple(m for m in snap.maps if m.name in names),
                       hostname="node-a")
        view = api.snapshot_view(snap, host_profile())
        console = Console(record=True, width=118, force_terminal=True)
        console.print(top_view(view, total_maps=len(snap.maps), rows=12, filters={},
                               interval=2.0))
        console.save_svg(str(ROOT / "docs" / "top.svg"), title="bpfmem top")
        print("wrote docs/top.svg")
