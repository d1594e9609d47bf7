"""The sweep as it runs in other kernels under qemu: specs, and the comparison with the model
that both the vm test and tests/kernels/record.py use."""

from __future__ import annotations

import itertools
import json
from typing import Any

from sweep import sweep_specs
from bpfmem.model.estimate import estimate
from bpfmem.model.kernel import KernelProfile
from bpfmem.model.shape import MapShape
from bpfmem.model.structs import STRUCT_NAMES
from bpfmem.uapi import MapType as T

NP = 1


def vm_specs() -> list[tuple[MapShape, list[int]]]:
    """Every sweep shape created empty, plus on-demand maps filled to half and full."""
    out = [(s, []) for s in sweep_specs()
           if s.type not in (T.STRUCT_OPS, T.ARENA) and s.max_entries <= 65536]
    for t, (k, v) in itertools.product((T.HASH, T.PERCPU_HASH),
                                       ((4, 8), (13, 100), (4, 1000))):
        out.append((MapShape(t, k, v, 1000, NP), [500, 1000]))
    for k, v in ((8, 8), (20, 100), (260, 8)):
        out.append((MapShape(T.LPM_TRIE, k, v, 1000, NP), [500, 1000]))
    for t in (T.HASH, T.LRU_HASH, T.PERCPU_HASH, T.ARRAY):
        out.append((MapShape(t, 4, 100, 2000), [2000]))
    # few entries: the allocator's first refill batch, small slab counts
    for t in (T.HASH, T.PERCPU_HASH):
        out.append((MapShape(t, 4, 8, 1000, NP), [1, 3, 128]))
    out.append((MapShape(T.LPM_TRIE, 8, 8, 1000, NP), [3, 128]))
    for t, v in ((T.DEVMAP, 4), (T.DEVMAP, 8), (T.DEVMAP_HASH, 4), (T.DEVMAP_HASH, 8)):
        out.append((MapShape(t, 4, v, 1000), [100, 1000]))
    for t in (T.SK_STORAGE, T.INODE_STORAGE, T.TASK_STORAGE, T.CGRP_STORAGE):
        out.append((MapShape(t, 4, 100, 0, NP), []))
    return out


def object_specs(cpus: int = 2) -> list[tuple[MapShape, list[int]]]:
    """The maps of the bundled example and of the seed's three releases, as the loader
    creates them on a kernel with ``cpus`` possible CPUs (each distinct shape once); maps
    that allocate on insert filled with 256 entries."""
    from pathlib import Path

    from bpfmem import api
    from bpfmem.model.estimate import shape_of_spec
    from bpfmem.model.formulas import grows_with_entries
    seed = Path(__file__).resolve().parent.parent / "examples" / "seed"
    prof = api.profile("6.1", cpus=cpus)
    out, seen = [], set()
    for path in [api.example_object_path(), *sorted(seed.glob("*.o"))]:
        for m in api.load_object(path).maps:
            shape, _why = shape_of_spec(m, prof)
            if shape is not None and shape not in seen:
                seen.add(shape)
                out.append((shape, [256] if grows_with_entries(shape) else []))
    return out


def save_readings(path, specs, header: dict, results: list[dict]) -> None:
    """The probe's raw answers, with the specs it was given, as test data (xz JSON): the
    model is checked against them on every run (tests/test_sweep_data.py)."""
    import lzma
    doc = {"header": header, "specs": probe_specs(specs), "results": results}
    with lzma.open(path, "wt") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")


def load_readings(path) -> tuple[list[tuple[MapShape, list[int]]], dict, list[dict]]:
    """(specs, header, results) of a file :func:`save_readings` wrote."""
    import lzma
    with lzma.open(path, "rt") as f:
        doc = json.load(f)
    specs = [(MapShape(d["type"], d["key_size"], d["value_size"], d["max_entries"],
                       d["map_flags"], d["map_extra"]), list(d["fills"]))
             for d in doc["specs"]]
    return specs, doc["header"], doc["results"]


def tolerance_median(report: dict) -> int | None:
    """The median, over every charge reading of a :func:`compare` report, of the tolerance
    the model stated for it (up and down): a tolerance that grows to pass shows here."""
    tols = sorted(t for row in report["specs"] for r in row.get("readings", [])
                  if (t := r.get("tolerance")) is not None)
    return tols[len(tols) // 2] if tols else None


def outside_summary(report: dict, page: int = 4096, cpus: int = 2) -> str:
    """How the other specs' cgroups moved during the charge readings: the per-CPU stocks of
    earlier cgroups drained (up to a page per CPU and one of object stock), and earlier
    maps' freeing that ran late (more than that), which per-spec cgroups keep out of
    "charged"; and the largest move."""
    moves = [r["outside"] for row in report["specs"] for r in row.get("readings", [])
             if r.get("outside") is not None and r.get("charged") is not None]
    late = [m for m in moves if abs(m) > page * (cpus + 1)]
    worst = max(moves, default=0, key=abs)
    return (f"outside: {len(moves)} readings, {sum(abs(m) >= page for m in moves)} with "
            f"earlier cgroups' stock drains, {len(late)} with more than {cpus + 1} pages "
            f"(late frees), largest {worst} B")


def probe_specs(specs) -> list[dict[str, Any]]:
    from bpfmem.host.probe import shape_spec
    return [shape_spec(f"v{i}", s, fills) for i, (s, fills) in enumerate(specs)]


def profile_from_probe(header: dict, results: list[dict]) -> KernelProfile:
    from bpfmem.host.profile import profile_from_probe as from_probe
    sizes = header.get("sizes") or next((r["sizes"] for r in results if "sizes" in r), {})
    return from_probe(header, sizes)


def compare(specs, header: dict, results: list[dict]) -> dict[str, Any]:
    """Per spec: the kernel's answer beside the model's; and the counts."""
    prof = profile_from_probe(header, results)
    by_id = {r["id"]: r for r in results if "id" in r}
    rows, mism = [], []
    counts = {"specs": 0, "created": 0, "refused": 0, "memlock_readings": 0,
              "memlock_equal": 0, "refusals_agree": 0, "charge_readings": 0,
              "charge_within": 0}
    for i, (s, _fills) in enumerate(specs):
        r = by_id.get(f"v{i}")
        if r is None:
            mism.append((s, "no result"))
            continue
        counts["specs"] += 1
        fp = estimate(s, prof)
        row = {"type": s.type_name, "key_size": s.key_size, "value_size": s.value_size,
               "max_entries": s.max_entries, "map_flags": s.map_flags,
               "map_extra": s.map_extra, "kernel_ok": bool(r["ok"]),
               "kernel_errno": r.get("errno"), "model_rejected": fp.rejected}
        agree = bool(r["ok"]) == (fp.rejected is None)
        counts["refusals_agree"] += agree
        if not agree:
            mism.append((s, "created" if r["ok"] else f"refused errno {r.get('errno')}",
                         fp.rejected))
        if not r["ok"]:
            counts["refused"] += 1
            rows.append(row)
            continue
        counts["created"] += 1
        points = [(0, r.get("memlock"), r.get("charged"), r.get("outside"))] + [
            (f["inserted"], f.get("memlock"), f.get("charged"), f.get("outside"))
            for f in r.get("fills") or []]
        row["readings"] = []
        for n, ml, ch, outside in points:
            e = estimate(s, prof, n)
            counts["memlock_readings"] += 1
            ok = ml == e.memlock
            counts["memlock_equal"] += ok
            if not ok and agree:
                mism.append((s, n, "memlock", ml, e.memlock))
            within = tol = None
            if ch is not None and e.charged is not None:
                counts["charge_readings"] += 1
                tol = e.charged_tolerance + (e.charged_slack if n else 0)
                within = e.charged - e.charged_tolerance <= ch <= e.charged + tol
                counts["charge_within"] += within
                if not within:
                    mism.append((s, n, "charge", ch, e.charged, e.charged_tolerance, tol))
            row["readings"].append({"entries": n, "memlock": ml, "model_memlock": e.memlock,
                                    "charged": ch, "model_charged": e.charged,
                                    "tolerance": tol, "charge_within_tolerance": within,
                                    "outside": outside})
        rows.append(row)
    return {"kernel": header.get("kernel"), "profile": prof.describe(), "counts": counts,
            "mismatches": [list(map(str, m)) for m in mism], "specs": rows}


SIZES = STRUCT_NAMES
