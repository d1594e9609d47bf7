"""The live-node analysis and reports on constructed snapshots (no kernel needed)."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from bpfmem.analysis.live import (cgroup_sums, check_map, diff_snapshots, filter_maps,
                                  primary_owner, snapshot_view)
from bpfmem.records import LiveMap, Owner, Snapshot
from bpfmem.model.estimate import estimate
from bpfmem.model.kernel import KernelProfile
from bpfmem.model.shape import MapShape
from bpfmem.parse.snapshot import snapshot_from_bpftool, snapshot_from_dict
from bpfmem.report import snapshot as report
from bpfmem.report.documents import document
from bpfmem.uapi import MapType as T

PROF = KernelProfile.for_release("6.18", 4)


def _m(i, name, *, type=T.HASH, k=4, v=8, max_entries=1000, flags=0, memlock=None,
       entries=None, owners=(("agent", 100, "/kubepods/pod1/c1"),), pins=()):
    return LiveMap(id=i, name=name, type=type, key_size=k, value_size=v,
                   max_entries=max_entries, map_flags=flags, map_extra=0, btf_id=0,
                   memlock=memlock, frozen=False,
                   owners=tuple(Owner(pid, comm, cg) for comm, pid, cg in owners),
                   pins=tuple(pins), entries=entries,
                   entries_complete=None if entries is None else True,
                   entries_method=None if entries is None else "batch")


def _snap(maps, t=1000.0):
    return Snapshot(taken_at=t, duration=0.1, hostname="node", kernel="6.18.0",
                    possible_cpus=4, maps=tuple(maps), entries_counted=True)


def _model_memlock(shape: MapShape, entries: int = 0) -> int:
    return estimate(shape, PROF, entries).memlock


def test_check_map_statuses():
    pre = MapShape(T.HASH, 4, 8, 1000)
    ok = _m(1, "a", memlock=_model_memlock(pre))
    assert check_map(ok, PROF).status == "match" and check_map(ok, PROF).delta == 0
    off = _m(2, "b", memlock=_model_memlock(pre) + 64)
    c = check_map(off, PROF)
    assert c.status == "mismatch" and c.delta == 64
    # a NO_PREALLOC hash grows with entries: not counted -> range check, counted -> exact
    nopre = MapShape(T.HASH, 4, 8, 1000, 1)
    lo, mid = _model_memlock(nopre, 0), _model_memlock(nopre, 300)
    assert lo < mid
    assert check_map(_m(3, "c", flags=1, memlock=mid), PROF).status == "in-range"
    assert check_map(_m(4, "d", flags=1, memlock=mid, entries=300), PROF).status == "match"
    assert check_map(_m(5, "e", flags=1, memlock=mid, entries=299), PROF).status == "mismatch"
    unknown = check_map(_m(6, "f", type=250, memlock=1), PROF)
    assert unknown.status == "unknown" and "not modelled" in unknown.note


def test_filters_and_cgroup_sums():
    maps = [_m(1, "lb_a", memlock=100),
            _m(2, "lb_b", type=T.LRU_HASH, memlock=50,
               owners=(("other", 7, "/system/x"), ("agent", 100, "/kubepods/pod1/c1"))),
            _m(3, "pinned", memlock=5, owners=(), pins=("/sys/fs/bpf/p",))]
    assert [m.name for m in filter_maps(maps, name="lb_*", type="lru_hash")] == ["lb_b"]
    assert [m.name for m in filter_maps(maps, owner="ag*")] == ["lb_a", "lb_b"]
    assert [m.name for m in filter_maps(maps, cgroup="system")] == ["lb_b"]
    assert primary_owner(maps[1]).comm == "other"      # lowest pid is the one summed
    sums = {s.cgroup: (s.maps, s.memlock) for s in cgroup_sums(maps)}
    assert sums == {"/kubepods/pod1/c1": (1, 100), "/system/x": (1, 50), None: (1, 5)}


def test_snapshot_document_round_trips():
    snap = _snap([_m(1, "a", memlock=_model_memlock(MapShape(T.HASH, 4, 8, 1000)),
                     entries=10, pins=("/sys/fs/bpf/a",))])
    view = snapshot_view(snap, PROF)
    doc = document(view)
    assert doc["schema"] == "bpfmem/snapshot/v2"
    assert doc["totals"]["model_status"] == {"match": 1}
    for indent in (None, 2):
        out = io.StringIO()
        report.render_json(view, out, indent=indent)
        back = snapshot_from_dict(json.loads(out.getvalue()))
        assert back.maps == snap.maps
        assert back.hostname == "node" and back.possible_cpus == 4


def test_bpftool_dump_is_read_with_pids_and_pins():
    dump = [{"id": 7, "type": "lru_hash", "name": "ct", "flags": 0, "bytes_key": 16,
             "bytes_value": 40, "max_entries": 4096, "bytes_memlock": 123, "frozen": 0,
             "btf_id": 3, "pids": [{"pid": 9, "comm": "b"}, {"pid": 2, "comm": "a"}],
             "pinned": ["/sys/fs/bpf/ct"]},
            {"id": 8, "type": 33, "name": "new_kind", "flags": 0, "bytes_key": 0,
             "bytes_value": 0, "max_entries": 1, "bytes_memlock": 4096}]
    snap = snapshot_from_bpftool(dump)
    ct = snap.maps[0]
    assert (ct.type, ct.key_size, ct.value_size, ct.memlock, ct.btf_id) == (
        T.LRU_HASH, 16, 40, 123, 3)
    assert [o.pid for o in ct.owners] == [2, 9] and ct.pins == ("/sys/fs/bpf/ct",)
    assert snap.maps[1].type == 33 and snap.maps[1].frozen is None
    with pytest.raises(ValueError, match="bpftool map #0"):
        snapshot_from_bpftool([{"type": "hash"}])
    with pytest.raises(ValueError, match="JSON list"):
        snapshot_from_bpftool({"id": 1})


def test_diff_two_moments():
    old = _snap([_m(1, "keep", memlock=100, entries=10), _m(2, "grow", memlock=100, entries=5),
                 _m(3, "gone", memlock=40), _m(4, "restarted", memlock=70, entries=1)])
    new = _snap([_m(1, "keep", memlock=100, entries=10), _m(2, "grow", memlock=180, entries=50),
                 _m(9, "restarted", memlock=70, entries=3, owners=(("agent", 200, "/k/p2"),)),
                 _m(10, "fresh", memlock=500)], t=2000.0)
    diff = diff_snapshots(old, new)
    d = document(diff)
    by = {r["name"]: r for r in d["maps"]}
    assert {n: r["status"] for n, r in by.items()} == {
        "keep": "unchanged", "grow": "changed", "gone": "removed", "restarted": "recreated",
        "fresh": "added"}
    assert by["grow"]["delta_memlock"] == 80 and by["grow"]["delta_entries"] == 45
    assert by["restarted"]["old"]["id"] == 4 and by["restarted"]["new"]["id"] == 9
    assert d["delta_memlock"] == (100 + 180 + 70 + 500) - (100 + 100 + 40 + 70)
    assert d["counts"] == {"added": 1, "removed": 1, "recreated": 1, "changed": 1,
                           "unchanged": 1}
    out = io.StringIO()
    report.render_diff_markdown(diff, out)
    md = out.getvalue()
    assert "| `fresh` | hash | added |" in md and "keep" not in md


def test_diff_cli_on_saved_snapshots(tmp_path):
    old = _snap([_m(1, "a", memlock=100)])
    new = _snap([_m(1, "a", memlock=100), _m(2, "b", memlock=4096)])
    for name, snap in (("old.json", old), ("new.json", new)):
        with open(tmp_path / name, "w") as f:
            report.render_json(snapshot_view(snap), f)
    r = subprocess.run([sys.executable, "-m", "bpfmem", "diff", str(tmp_path / "old.json"),
                        str(tmp_path / "new.json"), "--format", "json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "bpfmem/snapshot-diff/v1" and doc["delta_memlock"] == 4096
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "bpfmem/snapshot/v1", "maps": [{"id": 1}]}')
    r = subprocess.run([sys.executable, "-m", "bpfmem", "diff", str(bad),
                        str(tmp_path / "new.json")], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_maps_from_bpftool_bad_file_is_one_line(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("not json")
    r = subprocess.run([sys.executable, "-m", "bpfmem", "maps", "--from-bpftool", str(p)],
                       capture_output=True, text=True)
    assert r.returncode == 1      # a file that is not JSON: an input error, as a bad object
    assert len(r.stderr.strip().splitlines()) == 1 and "not JSON" in r.stderr


def test_snapshot_html_page_is_self_contained_and_shows_every_map():
    pytest.importorskip("plotly")
    from bpfmem.report.node_html import NODE_TOP_ID, NODE_TREEMAP_ID, render_snapshot_html
    snap = _snap([_m(1, "lb_services", memlock=7 << 20, entries=990, max_entries=1000),
                  _m(2, "ct", memlock=3 << 20, owners=(("agent", 5, "/kubepods/p/c"),)),
                  _m(3, "orphan", memlock=4096, owners=(), pins=("/sys/fs/bpf/o",))])
    page = render_snapshot_html(snapshot_view(snap, PROF))
    assert NODE_TREEMAP_ID in page and NODE_TOP_ID in page
    from bpfmem.units import format_size as _bytes
    for name in ("lb_services", "ct", "orphan", _bytes(7 << 20), "1 ≥90% full"):
        assert name in page
    assert "(held by no process: pinned or programs only)" in page
    # nothing to fetch: no http(s) URL outside plotly.js's own strings is loaded
    assert 'src="http' not in page and "<link" not in page


def test_snapshot_html_needs_an_output_file():
    r = subprocess.run([sys.executable, "-m", "bpfmem", "snapshot", "--format", "html"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "-o FILE.html" in r.stderr


def test_rejections_are_values_branched_on_by_kind():
    """A refusal is a Rejection(errno, reason, kind): the live check tells a map type the
    model does not know from a shape the kernel refuses by its kind, not by its words."""
    import pickle
    from bpfmem.model.estimate import estimate_spec
    from bpfmem.model.limits import KERNEL, LOADER, UNKNOWN_TYPE, Rejection
    unknown = estimate(MapShape(250, 4, 8, 10), PROF).rejected
    assert unknown.kind == UNKNOWN_TYPE and unknown.errno == "EINVAL"
    refused = estimate(MapShape(T.HASH, 0, 8, 10), PROF).rejected
    assert refused.kind == KERNEL and str(refused) == f"{refused.errno}: {refused.reason}"
    # the words a kernel refusal had before, whatever they say: the check branches on kind
    worded_alike = Rejection("EINVAL", "unknown map type 1", KERNEL)
    assert worded_alike.kind == KERNEL and "unknown map type" in worded_alike
    assert "not modelled" in check_map(_m(1, "x", type=250, memlock=1), PROF).note
    assert "refuses this shape" in check_map(_m(2, "y", k=0, memlock=1), PROF).note

    class Spec:
        type, key_size, value_size, max_entries, map_flags, map_extra = T.HASH, 4, 8, 10, 0, 0
        refused = "cilium/ebpf: a legacy definition it does not take"
    fp, _ = estimate_spec(Spec(), PROF)
    assert fp.rejected.kind == LOADER and fp.rejected == Spec.refused
    assert pickle.loads(pickle.dumps(refused)).kind == KERNEL
    assert json.dumps({"r": refused}) == json.dumps({"r": str(refused)})


def test_program_totals_per_holder():
    """analysis.progs.program_totals in one pass against the sums written out: a program
    counted for its first program-fd holder, else its first link holder, else no one
    (cgroup None, no pid); groups largest memlock first, ties by key then first seen;
    memlock None counts 0."""
    import random
    from bpfmem.analysis.progs import ProgSum, program_totals
    from bpfmem.records import LiveBtf, LiveProg
    rng = random.Random(3)
    people = [Owner(1, "a", "/g/a"), Owner(2, "b", "/g/b"), Owner(3, "c", None),
              Owner(4, "d", "/g/a")]
    progs = tuple(LiveProg(
        id=i, name="p", type=6, tag="", memlock=rng.choice([None, 4096, 8192]),
        xlated_prog_len=rng.randrange(100), jited_prog_len=rng.randrange(100), map_ids=(),
        btf_id=0, verified_insns=None, load_time=0, created_by_uid=0,
        owners=tuple(rng.sample(people, rng.randrange(0, 3))),
        link_owners=tuple(rng.sample(people, rng.randrange(0, 2)))) for i in range(200))
    btfs = (LiveBtf(1, "vmlinux", 100, True), LiveBtf(2, "x", 7, False),
            LiveBtf(3, "y", 5, False))

    def holder(p):
        return (p.owners or p.link_owners or (None,))[0]

    def sums(key_of, ps):
        keys = list(dict.fromkeys(key_of(p) for p in ps))
        out = [ProgSum(k, len(g), sum(p.memlock or 0 for p in g),
                       sum(p.jited_prog_len for p in g), sum(p.xlated_prog_len for p in g))
               for k in keys for g in [[p for p in ps if key_of(p) == k]]]
        return tuple(sorted(out, key=lambda s: (-s.memlock, str(s.key))))

    t = program_totals(progs, btfs)
    assert t.node == sums(lambda p: None, progs)[0]
    assert t.cgroups == sums(lambda p: holder(p) and holder(p).cgroup, progs)
    assert t.processes == sums(lambda p: holder(p).pid,
                               [p for p in progs if holder(p) is not None])
    assert None in [g.key for g in t.cgroups] and len(t.processes) == 4
    assert (t.btf_objects, t.btf_bytes, t.kernel_btf_bytes) == (2, 12, 100)
    assert program_totals((), ()).node == ProgSum(None, 0, 0, 0, 0)
