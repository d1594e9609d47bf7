"""The model against this machine's kernel: every sweep spec is created for real (through
Debian's libbpf, tests/harness create mode), and memlock must equal the model to the byte,
and the kernel must refuse exactly the specs the model says it refuses."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import pytest

import libbpf_harness
from conftest import is_root
from sweep import sweep_specs
from bpfmem.model.estimate import estimate
from bpfmem.host.profile import host_profile
from bpfmem.model.limits import ERRNO
from bpfmem.uapi import MapType as T

pytestmark = [pytest.mark.kernel,
              pytest.mark.skipif(not is_root(), reason="creating maps needs root")]

SPECS = sweep_specs()
# Local storages need BTF, which the harness' create mode does not build; struct_ops needs a
# kernel struct. The probe tests (test_probe_local.py) create local storages.
HARNESS_SPECS = [s for s in SPECS if s.type not in
                 (T.SK_STORAGE, T.INODE_STORAGE, T.TASK_STORAGE, T.CGRP_STORAGE, T.STRUCT_OPS)]


@pytest.fixture(scope="module")
def created():
    if libbpf_harness.ensure_built() is None:
        pytest.skip("cannot build tests/harness")
    lines = []
    for i, s in enumerate(HARNESS_SPECS):
        inner = ({"name": "inner", "type": 2, "key_size": 4, "value_size": 4, "max_entries": 1,
                  "map_flags": 0, "map_extra": 0, "numa_node": 0, "inner": None}
                 if s.type in (T.ARRAY_OF_MAPS, T.HASH_OF_MAPS) else None)
        lines.append(json.dumps({"name": f"s{i}", "type": s.type, "key_size": s.key_size,
                                 "value_size": s.value_size, "max_entries": s.max_entries,
                                 "map_flags": s.map_flags, "map_extra": s.map_extra,
                                 "numa_node": 0, "inner": inner}))
    rc, out = libbpf_harness.run("create", stdin="\n".join(lines) + "\n")
    assert rc == 0, out[-3:]
    results = [x for x in out if x["kind"] in ("created", "rejected")]
    assert len(results) == len(HARNESS_SPECS)
    return results


def test_sweep_is_big_enough():
    assert len(SPECS) >= 500
    assert len({s.type for s in HARNESS_SPECS}) >= 28


def test_memlock_equals_kernel_to_the_byte(created):
    prof = host_profile()
    mismatches = []
    n_created = 0
    for spec, res in zip(HARNESS_SPECS, created):
        fp = estimate(spec, prof)
        if res["kind"] == "created":
            n_created += 1
            if fp.rejected is not None:
                mismatches.append((spec, "model rejects, kernel creates", fp.rejected))
            elif fp.memlock_at_create != res["kernel"]["memlock"]:
                mismatches.append((spec, fp.memlock_at_create, res["kernel"]["memlock"]))
        else:
            if fp.rejected is None:
                mismatches.append((spec, "kernel rejects", res["errno"], res["message"]))
            elif ERRNO[fp.rejected.split(":")[0]] != res["errno"]:
                mismatches.append((spec, fp.rejected, "kernel errno", res["errno"]))
    if os.environ.get("BPFMEM_RECORD"):
        _record(prof, created)
    assert not mismatches, "\n".join(map(str, mismatches[:40])) + f"\n({len(mismatches)} total)"
    assert n_created >= 400


def _record(prof, created) -> None:
    """tests/kernels/<release>.json: this kernel's answers beside the model's."""
    rows = []
    for spec, res in zip(HARNESS_SPECS, created):
        fp = estimate(spec, prof)
        rows.append({"type": spec.type_name, "key_size": spec.key_size,
                     "value_size": spec.value_size, "max_entries": spec.max_entries,
                     "map_flags": spec.map_flags, "map_extra": spec.map_extra,
                     "kernel_ok": res["kind"] == "created",
                     "kernel_errno": res.get("errno"),
                     "memlock": res["kernel"]["memlock"] if res["kind"] == "created" else None,
                     "model_memlock": fp.memlock_at_create, "model_rejected": fp.rejected})
    ok = [r for r in rows if r["kernel_ok"]]
    counts = {"specs": len(rows), "created": len(ok), "refused": len(rows) - len(ok),
              "memlock_equal": sum(r["memlock"] == r["model_memlock"] for r in ok),
              "refusals_agree": sum(r["kernel_ok"] == (r["model_rejected"] is None)
                                    for r in rows)}
    out = Path(__file__).resolve().parent / "kernels" / f"{platform.release()}.json"
    out.write_text(json.dumps({"kernel": platform.release(), "profile": prof.describe(),
                               "source": "tests/harness create mode (libbpf 1.1)",
                               "counts": counts, "specs": rows}, indent=1) + "\n")
