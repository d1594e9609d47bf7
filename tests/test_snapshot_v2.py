"""``bpfmem/snapshot/v2``: processes and programs once each, maps without their defaults; read
back to the same records, and v1 (saved files, ``maps --from-bpftool``) still read everywhere.

The pure tests build snapshots by hand; the live one scans real maps (tests/mapfarm.py).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import bpffs, is_root
from mapfarm import MapFarm, MapPlan

from bpfmem.analysis.live import snapshot_view
from bpfmem.model.estimate import estimate
from bpfmem.model.kernel import KernelProfile
from bpfmem.model.shape import MapShape
from bpfmem.parse.snapshot import occupancy_from, snapshot_from_dict
from bpfmem.records import LiveMap, Owner, ProgRef, Snapshot
from bpfmem.report import snapshot as report
from bpfmem.report.documents import document, iso_time
from bpfmem.uapi import flag_names, map_type_name, prog_type_name
from bpfmem.uapi import MapType as T

PROF = KernelProfile.for_release("6.18", 4)
REPO = Path(__file__).resolve().parent.parent
V1_FIXTURE = REPO / "tests" / "data" / "inputs" / "snapshot.json"
ALWAYS = {"id", "name", "type", "key_size", "value_size", "max_entries", "memlock"}


def snapshot_document_v1(v) -> dict:
    """A view as ``bpfmem/snapshot/v1``, the schema bpfmem wrote before v2 (every key on every
    map, owners and programs inline): the documents saved by older releases, which every
    reader still takes."""
    s = v.snapshot
    maps = []
    for m, c in zip(v.maps, v.checks):
        rec = {
            "id": m.id, "name": m.name, "type": map_type_name(m.type), "type_id": m.type,
            "key_size": m.key_size, "value_size": m.value_size, "max_entries": m.max_entries,
            "map_flags": m.map_flags, "flags": list(flag_names(m.map_flags)),
            "map_extra": m.map_extra, "btf_id": m.btf_id, "memlock": m.memlock,
            "frozen": m.frozen, "entries": m.entries, "entries_complete": m.entries_complete,
            "entries_method": m.entries_method,
            "pressure": None if m.pressure is None else round(m.pressure, 6),
            "owners": [{"pid": o.pid, "comm": o.comm, "cgroup": o.cgroup, "fds": o.fds}
                       for o in m.owners],
            "programs": [{"id": p.id, "name": p.name, "type": prog_type_name(p.type)}
                         for p in m.programs],
            "pins": list(m.pins)}
        if c is not None:
            rec["model"] = {"memlock": c.memlock, "memlock_full": c.memlock_full,
                            "charged": c.charged, "charged_full": c.charged_full,
                            "status": c.status, "delta": c.delta, "note": c.note}
        maps.append(rec)
    return {"schema": "bpfmem/snapshot/v1", "taken_at": iso_time(s.taken_at),
            "host": {"hostname": s.hostname, "kernel": s.kernel,
                     "possible_cpus": s.possible_cpus},
            "model_kernel": v.model_kernel, "duration_s": round(s.duration, 3),
            "entries_counted": s.entries_counted, "skipped": s.skipped,
            "errors": list(s.errors), "bpffs": list(s.bpffs), "owners_from": s.owners_from,
            "totals": {"maps": len(v.maps), "memlock": v.memlock,
                       "charged_model": v.charged_model, "model_status": dict(v.model_status)},
            "cgroups": [{"cgroup": c.cgroup, "maps": c.maps, "memlock": c.memlock}
                        for c in v.cgroups],
            "maps": maps}
AGENT = Owner(100, "agent", "/kubepods/pod1/c1")


def _m(i, name="m", *, type=T.HASH, k=4, v=8, max_entries=1000, flags=0, memlock=None,
       owners=(AGENT,), programs=(), pins=(), entries=None, complete=True, method="batch",
       frozen=False, map_extra=0, btf_id=0):
    return LiveMap(id=i, name=name, type=type, key_size=k, value_size=v,
                   max_entries=max_entries, map_flags=flags, map_extra=map_extra,
                   btf_id=btf_id, memlock=memlock, frozen=frozen, owners=tuple(owners),
                   programs=tuple(programs), pins=tuple(pins), entries=entries,
                   entries_complete=None if entries is None else complete,
                   entries_method=None if entries is None else method)


def _snap(maps):
    return Snapshot(taken_at=1_796_117_146.0, duration=0.25, hostname="node", kernel="6.18.0",
                    possible_cpus=4, maps=tuple(maps), entries_counted=True,
                    errors=("one warning",), bpffs=("/sys/fs/bpf",),
                    owners_from="kernel iterator")


def _memlock(shape: MapShape, entries: int = 0) -> int:
    return estimate(shape, PROF, entries).memlock


def _written(view, indent) -> str:
    out = io.StringIO()
    report.render_json(view, out, indent=indent)
    return out.getvalue()


XDP = ProgRef(31, "xdp_in", 6)          # BPF_PROG_TYPE_XDP
ODD_PROG = ProgRef(32, "future", 250)   # a program type bpfmem has no name for

EVERY_KIND = [
    _m(1, "plain", memlock=_memlock(MapShape(T.HASH, 4, 8, 1000))),
    _m(2, "flagged", flags=1, memlock=_memlock(MapShape(T.HASH, 4, 8, 1000, 1), 10),
       entries=10, pins=("/sys/fs/bpf/b", "/sys/fs/bpf/c")),
    _m(3, "cut_short", flags=1, memlock=_memlock(MapShape(T.HASH, 4, 8, 1000, 1), 50),
       entries=40, complete=False, method="next_key", frozen=None),
    _m(4, "ro_array", type=T.ARRAY, max_entries=16, memlock=999, entries=16, method="array",
       frozen=True, btf_id=7, owners=(Owner(7, "other", None, 3), AGENT)),
    _m(5, "bloom", type=T.BLOOM_FILTER, k=0, max_entries=100, map_extra=3, memlock=None,
       owners=(), programs=(XDP, ODD_PROG)),
    _m(6, "newer", type=250, memlock=4096, owners=(), programs=(XDP,), pins=("/p",)),
    _m(7, "held_twice", memlock=5, owners=(Owner(7, "other", None, 1),)),
]


def test_a_plain_map_is_only_its_identity_sizes_memlock_and_owner():
    view = snapshot_view(_snap(EVERY_KIND[:1]), PROF)
    doc = document(view)
    assert doc["schema"] == "bpfmem/snapshot/v2"
    (m,) = doc["maps"]
    assert set(m) == ALWAYS | {"owners", "model"}
    assert m["owners"] == [{"pid": 100}]          # fds: 1
    assert doc["processes"] == {"100": {"comm": "agent", "cgroup": "/kubepods/pod1/c1"}}
    assert doc["programs"] == {}
    # the model's match of a preallocated hash: full is as empty (so left out), no zero
    # delta, no null note
    c = view.checks[0]
    assert (c.memlock_full, c.charged_full, c.delta, c.note) == (m["memlock"], c.charged, 0,
                                                                 None)
    assert m["model"] == {"memlock": m["memlock"], "charged": c.charged, "status": "match"}
    # without a profile there is no model block at all
    assert "model" not in document(snapshot_view(_snap(EVERY_KIND[:1])))["maps"][0]


def test_what_differs_from_the_default_is_written():
    doc = document(snapshot_view(_snap(EVERY_KIND), PROF))
    by = {m["name"]: m for m in doc["maps"]}
    assert by["flagged"]["map_flags"] == 1 and by["flagged"]["flags"] == ["no_prealloc"]
    assert (by["flagged"]["entries"], by["flagged"]["entries_complete"],
            by["flagged"]["entries_method"], by["flagged"]["pressure"]) == (
        10, True, "batch", 0.01)
    assert by["flagged"]["pins"] == ["/sys/fs/bpf/b", "/sys/fs/bpf/c"]
    assert by["cut_short"]["entries_complete"] is False
    assert by["cut_short"]["frozen"] is None and "frozen" in by["cut_short"]
    # an array counted: entries, but no pressure (its slots always exist)
    assert by["ro_array"]["entries"] == 16 and "pressure" not in by["ro_array"]
    assert by["ro_array"]["frozen"] is True and by["ro_array"]["btf_id"] == 7
    assert by["ro_array"]["owners"] == [{"pid": 7, "fds": 3}, {"pid": 100}]
    assert by["bloom"]["map_extra"] == 3 and by["bloom"]["memlock"] is None
    assert by["bloom"]["programs"] == [31, 32] and "owners" not in by["bloom"]
    assert by["newer"]["type"] == "unknown(250)" and by["newer"]["type_id"] == 250
    assert all("type_id" not in m for n, m in by.items() if n != "newer")
    # the tables: each process and program once
    assert doc["processes"] == {"7": {"comm": "other", "cgroup": None},
                                "100": {"comm": "agent", "cgroup": "/kubepods/pod1/c1"}}
    assert doc["programs"] == {"31": {"name": "xdp_in", "type": "xdp"},
                               "32": {"name": "future", "type": "unknown(250)",
                                      "type_id": 250}}
    # the model: a mismatch says its delta; an unknown has no null figures, only its note
    assert by["cut_short"]["model"]["status"] == "mismatch"
    assert by["cut_short"]["model"]["delta"] == (
        by["cut_short"]["memlock"] - by["cut_short"]["model"]["memlock"])
    assert set(by["newer"]["model"]) == {"status", "note"}
    assert all("delta" not in m["model"] for m in doc["maps"]
               if m["model"]["status"] != "mismatch")
    # a map that grows with entries: its full figures differ, so they are written
    flagged = snapshot_view(_snap(EVERY_KIND), PROF).checks[1]
    assert by["flagged"]["model"]["memlock_full"] == flagged.memlock_full != flagged.memlock
    assert by["flagged"]["model"]["charged_full"] == flagged.charged_full


@pytest.mark.parametrize("indent", [None, 2])
def test_v2_reads_back_to_the_same_records(indent):
    snap = _snap(EVERY_KIND)
    text = _written(snapshot_view(snap, PROF), indent)
    back = snapshot_from_dict(json.loads(text))
    assert back.maps == snap.maps
    assert (back.hostname, back.kernel, back.possible_cpus, back.entries_counted,
            back.errors, back.bpffs, back.owners_from, back.taken_at, back.duration) == (
        "node", "6.18.0", 4, True, ("one warning",), ("/sys/fs/bpf",), "kernel iterator",
        snap.taken_at, snap.duration)
    if indent:   # a file: every map and every table entry is a line of its own
        lines = text.splitlines()
        assert sum(1 for line in lines if line.startswith('    {"id":')) == len(snap.maps)
        assert '    "100": {"comm":"agent","cgroup":"/kubepods/pod1/c1"}' in lines
        assert json.loads(text) == document(snapshot_view(snap, PROF))


def test_a_pid_seen_with_two_names_keeps_both():
    """Never in one scan; a merged or edited snapshot may: the second is said inline."""
    snap = _snap([_m(1, owners=(AGENT,)), _m(2, owners=(Owner(100, "renamed", "/x", 2),)),
                  _m(3, owners=(), programs=(XDP,)),
                  _m(4, owners=(), programs=(ProgRef(31, "xdp_other", 6),))])
    doc = document(snapshot_view(snap))
    assert doc["maps"][1]["owners"] == [{"pid": 100, "fds": 2, "comm": "renamed",
                                         "cgroup": "/x"}]
    assert doc["processes"] == {"100": {"comm": "agent", "cgroup": "/kubepods/pod1/c1"}}
    assert doc["maps"][3]["programs"] == [{"id": 31, "name": "xdp_other", "type": "xdp"}]
    assert snapshot_from_dict(json.loads(json.dumps(doc))).maps == snap.maps


def test_v2_is_much_smaller_than_v1_on_many_maps_of_few_processes():
    """The farm's shape: 100 processes holding 100 maps each, long cgroup paths."""
    owners = [Owner(30000 + p, "python3", f"/process_api/{p:032x}") for p in range(100)]
    maps = [_m(7_000_000 + i, f"om{i // 100}_{i % 100}", memlock=6224,
               owners=(owners[i // 100],)) for i in range(10_000)]
    view = snapshot_view(_snap(maps), PROF)
    v1 = json.dumps(snapshot_document_v1(view))
    v2 = _written(view, None)
    print(f"bytes per map: v1 {len(v1) / 1e4:.0f}, v2 {len(v2) / 1e4:.0f}")
    assert len(v2) < 0.4 * len(v1)
    assert snapshot_from_dict(json.loads(v2)).maps == snapshot_from_dict(json.loads(v1)).maps


def test_the_readme_shows_a_map_as_v2_writes_it():
    """The README's sample map (a hash of the 10,000-map farm) is what v2 writes for it."""
    text = (REPO / "README.md").read_text()
    line = next(x for x in text.splitlines() if x.startswith('{"id":7147549,'))
    sample = json.loads(line)
    doc = {"schema": "bpfmem/snapshot/v2", "maps": [sample],
           "processes": {"30237": {"comm": "python3", "cgroup": "/process_api/x"}}}
    (m,) = snapshot_from_dict(doc).maps
    assert sample["model"]["status"] == "match" and sample["model"]["memlock"] == m.memlock
    # the sample's figures are this machine's (6.18.44, 2 CPUs); the release table's 6.18
    # models the shape with a memlock of its own: the same map there is written the same
    prof = KernelProfile.for_release("6.18", 2)
    fp = estimate(MapShape(m.type, m.key_size, m.value_size, m.max_entries), prof, 0)
    there = replace(m, memlock=fp.memlock)
    (written,) = json.loads(_written(snapshot_view(_snap([there]), prof), None))["maps"]
    want = dict(sample, memlock=fp.memlock,
                model=dict(sample["model"], memlock=fp.memlock, charged=fp.charged))
    assert written == want and list(written) == list(sample)


# ---- v1 is still read ----

def test_the_saved_v1_fixture_is_still_read():
    doc = json.loads(V1_FIXTURE.read_text())
    assert doc["schema"] == "bpfmem/snapshot/v1"
    snap = snapshot_from_dict(doc)
    raw = {m["id"]: m for m in doc["maps"]}
    assert {m.id for m in snap.maps} == set(raw)
    for m in snap.maps:
        r = raw[m.id]
        assert (m.name, m.key_size, m.value_size, m.max_entries, m.map_flags, m.memlock,
                m.frozen, m.entries, m.entries_complete, m.entries_method) == (
            r["name"], r["key_size"], r["value_size"], r["max_entries"], r["map_flags"],
            r["memlock"], r["frozen"], r["entries"], r["entries_complete"],
            r["entries_method"])
        assert [(o.pid, o.comm, o.cgroup, o.fds) for o in m.owners] == [
            (o["pid"], o["comm"], o["cgroup"], o["fds"]) for o in r["owners"]]
    # written again as v2 and read back: the same records
    again = json.loads(_written(snapshot_view(snap, PROF), None))
    assert again["schema"] == "bpfmem/snapshot/v2"
    assert snapshot_from_dict(again).maps == snap.maps
    assert occupancy_from(again) == occupancy_from(doc)


def test_v1_written_and_v2_written_read_the_same():
    # (v1 wrote an unnamed program type as "unknown(N)", which reads back as 0: v2 adds
    # its type_id, so only v2 keeps ODD_PROG)
    kinds = [_m(5, "bloom", type=T.BLOOM_FILTER, k=0, max_entries=100, map_extra=3,
                owners=(), programs=(XDP,)) if m.id == 5 else m for m in EVERY_KIND]
    view = snapshot_view(_snap(kinds), PROF)
    v1 = json.loads(json.dumps(snapshot_document_v1(view)))
    v2 = json.loads(_written(view, None))
    assert v1["schema"] == "bpfmem/snapshot/v1"
    assert snapshot_from_dict(v1).maps == snapshot_from_dict(v2).maps == view.maps
    # a map whose entries were not counted gives no occupancy in either
    assert occupancy_from(v1) == occupancy_from(v2) == {"flagged": 10, "cut_short": 40,
                                                         "ro_array": 16}


def test_a_minimal_v1_map_keeps_v1s_defaults():
    """v1 wrote every key; one left out of a hand-written v1 file reads as v1 always did
    (frozen: not known), where v2 reads it as its default (not frozen)."""
    m = {"id": 1, "type": "hash", "key_size": 4, "value_size": 8, "max_entries": 1}
    assert snapshot_from_dict({"schema": "bpfmem/snapshot/v1", "maps": [m]}).maps[0].frozen \
        is None
    assert snapshot_from_dict({"schema": "bpfmem/snapshot/v2", "maps": [m]}).maps[0].frozen \
        is False


@pytest.mark.parametrize("doc, message", [
    ({"schema": "bpfmem/snapshot/v3", "maps": []}, "bpfmem/snapshot/v1 or v2"),
    ({"schema": "bpfmem/snapshot/v2", "processes": {"abc": {"comm": "x"}}, "maps": []},
     "processes: key 'abc'"),
    ({"schema": "bpfmem/snapshot/v2", "processes": [], "maps": []}, "processes: expected"),
    ({"schema": "bpfmem/snapshot/v2", "maps": [
        {"id": 1, "type": "hash", "key_size": 4, "value_size": 8, "max_entries": 1,
         "owners": [{"pid": 5, "fds": 1}]}]}, r"maps\[0\].owners\[0\].pid: 5 is not in"),
    ({"schema": "bpfmem/snapshot/v2", "maps": [
        {"id": 1, "type": "hash", "key_size": 4, "value_size": 8, "max_entries": 1,
         "programs": [9]}]}, r"maps\[0\].programs\[0\]: program 9 is not in programs"),
    ({"schema": "bpfmem/snapshot/v2", "programs": {"9": {"name": 3}}, "maps": []},
     r"programs.9.name: expected a string"),
])
def test_a_broken_v2_document_names_the_field(doc, message):
    with pytest.raises(ValueError, match=message):
        snapshot_from_dict(doc)


def test_the_cli_reads_both_schemas(tmp_path):
    """diff of a v1 and a v2 file of the same node: nothing changed; advise takes both as
    occupancy."""
    snap = _snap(EVERY_KIND)
    view = snapshot_view(snap, PROF)
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(snapshot_document_v1(view)))
    new.write_text(_written(view, 2))
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    r = subprocess.run([sys.executable, "-m", "bpfmem", "diff", str(old), str(new),
                        "--format", "json"], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["counts"]["unchanged"] == len(EVERY_KIND) and d["delta_memlock"] == 0
    r = subprocess.run([sys.executable, "-m", "bpfmem", "maps", "--from-bpftool", str(new),
                        "--format", "json", "--kernel", "6.18", "--cpus", "4"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert [m["id"] for m in json.loads(r.stdout)["maps"]] == [m.id for m in EVERY_KIND]


# ---- real maps ----

PLANS = [
    [MapPlan("sv_hash", T.HASH, 8, 16, 1000, fill=123, pin=True),
     MapPlan("sv_array", T.ARRAY, 4, 64, 32),
     MapPlan("sv_nopre", T.HASH, 4, 100, 4096, map_flags=1, fill=10)],
    [MapPlan("sv_lru", T.LRU_HASH, 16, 40, 2048, fill=50, pin=True),
     MapPlan("sv_pcpu", T.PERCPU_HASH, 4, 8, 256, fill=7)],
]


@pytest.mark.kernel
@pytest.mark.skipif(not is_root(), reason="needs root (CAP_SYS_ADMIN)")
def test_a_live_scan_reads_back_from_v2_to_the_same_records(tmp_path):
    from bpfmem.host import live
    from bpfmem.host.profile import host_profile
    with bpffs() as pins, MapFarm(PLANS, pin_dir=pins, comms=["sv_one", "sv_two"]) as farm:
        snap = live.scan_maps(entries=True)
        ids = {m.id for m in farm.maps}
        view = snapshot_view(snap, host_profile())
        text = _written(view, 2)
        back = snapshot_from_dict(json.loads(text))
        assert back.maps == view.maps           # every map on the host, not only the farm's
        ours = {m.id: m for m in back.maps if m.id in ids}
        assert len(ours) == len(ids)
        for child, comm in zip(farm.children, ["sv_one", "sv_two"]):
            for fm in child.maps:
                m = ours[fm.id]
                assert [(o.pid, o.comm) for o in m.owners] == [(child.pid, comm)]
                assert m.entries == (fm.fill if m.type != T.ARRAY else 32)
                assert m.pins == ((fm.pin,) if fm.pin else ())
        doc = json.loads(text)
        assert doc["processes"][str(farm.children[0].pid)]["comm"] == "sv_one"
        # the CLI's file is the same document and reads back the same
        out = tmp_path / "node.json"
        r = subprocess.run([sys.executable, "-m", "bpfmem", "snapshot", "--entries",
                            "--name", "sv_*", "-o", str(out)], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=str(REPO / "src")), timeout=120)
        assert r.returncode == 0, r.stderr
        saved = snapshot_from_dict(json.loads(out.read_text()))
        assert {m.id: m for m in saved.maps} == ours


def _oracle_map(m, check, procs: dict, progs: dict) -> dict:
    """A map of v2 as the document's dict was built before the maps were written as text
    (kept here as the oracle the text is compared with)."""
    from bpfmem.report.documents import (_flag_list, _map_type, _model_check,
                                         _named_map_type, _owner_ref, _program_ref)
    rec = {"id": m.id, "name": m.name, "type": _map_type(m.type)}
    if not _named_map_type(m.type):
        rec["type_id"] = m.type
    rec["key_size"] = m.key_size
    rec["value_size"] = m.value_size
    rec["max_entries"] = m.max_entries
    if m.map_flags:
        rec["map_flags"] = m.map_flags
        rec["flags"] = list(_flag_list(m.map_flags))
    if m.map_extra:
        rec["map_extra"] = m.map_extra
    if m.btf_id:
        rec["btf_id"] = m.btf_id
    rec["memlock"] = m.memlock
    if m.frozen is not False:
        rec["frozen"] = m.frozen
    if m.entries is not None:
        rec["entries"] = m.entries
        rec["entries_complete"] = m.entries_complete
        rec["entries_method"] = m.entries_method
        if (p := m.pressure) is not None:
            rec["pressure"] = round(p, 6)
    if m.owners:
        owners = []
        for o in m.owners:
            seen = procs.setdefault(o.pid, (o.comm, o.cgroup))
            if seen == (o.comm, o.cgroup):
                owners.append(_owner_ref(o.pid, o.fds))
            else:
                owners.append({**_owner_ref(o.pid, o.fds), "comm": o.comm, "cgroup": o.cgroup})
        rec["owners"] = owners
    if m.programs:
        ids = []
        for p in m.programs:
            seen = progs.setdefault(p.id, (p.name, p.type))
            ids.append(p.id if seen == (p.name, p.type) else
                       {"id": p.id, **_program_ref(p.name, p.type)})
        rec["programs"] = ids
    if m.pins:
        rec["pins"] = list(m.pins)
    if check is not None:
        rec["model"] = _model_check(check)
    return rec


@pytest.mark.parametrize("indent", [None, 2])
def test_each_map_written_as_text_is_what_json_dumps_writes(indent):
    """The maps are written as text without a dict each: on maps with every optional key
    (unknown types, flags, map_extra, BTF, frozen true and unknown, entries cut short,
    pressure, a pid seen with two names, programs of unknown types, unicode pins, no model
    figure), each map's text is json.dumps of the dict the document had before, and the
    whole page is the one the dict document writes."""
    import random
    rng = random.Random(31)
    a = Owner(10, "agent", "/kubepods/a")
    a2 = Owner(10, "agent-renamed", "/kubepods/a", 2)
    b = Owner(11, "ñame\n\"q\"", None, 3)
    progs_ = [ProgRef(5, "xdp_prog", 6), ProgRef(6, "odd", 999), ProgRef(5, "xdp_prog2", 6)]
    maps = []
    for i in range(400):
        t = rng.choice([T.HASH, T.ARRAY, T.LPM_TRIE, T.RINGBUF, T.PERCPU_HASH, 250, T.QUEUE])
        counted = rng.random() < 0.5
        n = rng.randrange(0, 64) if counted else None
        maps.append(LiveMap(
            id=100 + i, name=rng.choice(["m", "map_é", "x" * 15, 'q"uote', ""]), type=t,
            key_size=rng.choice([0, 4, 8]), value_size=rng.choice([4, 8, 100]),
            max_entries=rng.choice([1, 64, 4096]), map_flags=rng.choice([0, 0, 1, 1024, 5]),
            map_extra=rng.choice([0, 0, 3]), btf_id=rng.choice([0, 7]),
            memlock=rng.choice([None, 4096, 123456]), frozen=rng.choice([False, True, None]),
            owners=tuple(rng.sample([a, a2, b], rng.randrange(0, 3))),
            programs=tuple(rng.sample(progs_, rng.randrange(0, 3))),
            pins=tuple(rng.sample(["/sys/fs/bpf/p", "/sys/fs/bpf/ü/x"], rng.randrange(0, 3))),
            entries=n, entries_complete=None if n is None else rng.random() < 0.8,
            entries_method=None if n is None else rng.choice(["batch", "kernel", "array"])))
    snap = Snapshot(taken_at=1.7e9, duration=0.5, hostname="h", kernel="6.18", possible_cpus=4,
                    maps=tuple(maps), entries_counted=True, owners_from="kernel iterator")
    for prof in (PROF, None):
        v = snapshot_view(snap, prof)
        from bpfmem.report.documents import snapshot_parts
        doc, lines = snapshot_parts(v)
        procs, progs = {}, {}
        for m, c, line in zip(v.maps, v.checks, lines):
            assert line == json.dumps(_oracle_map(m, c, procs, progs), separators=(",", ":"))
        text, whole = _rendered(v, indent)
        assert whole["processes"] == {str(p): {"comm": c, "cgroup": g}
                                      for p, (c, g) in sorted(procs.items())}
        if indent is not None:
            assert all(ln.startswith('    {"id":') for ln in text.splitlines()
                       if '"id":' in ln and '"memlock"' in ln)



def _rendered(v, indent) -> tuple[str, dict]:
    """(the page render_json writes of view ``v``, the document): compact, the bytes
    json.dumps writes of the document; indented, the document when read back."""
    whole = document(v)
    out = io.StringIO()
    report.render_json(v, out, indent=indent)
    if indent is None:
        assert out.getvalue() == json.dumps(whole, separators=(",", ":")) + "\n"
    else:
        assert json.loads(out.getvalue()) == whole
    return out.getvalue(), whole

def test_maps_sharing_holders_checks_and_fills_are_written_as_each_alone():
    """What maps share is written once (a holder list by its object, a model check, a shape,
    a fill: documents._live_map_lines): maps sharing one holder list (as a scan's maps of
    one holder do), among them a pid first seen under another name (inline each time),
    owners with several fds, counts alike but for max_entries or method (pressure differs)
    or complete, frozen true and unknown beside counts, pins with escapes and programs are
    each what the oracle writes for the map alone."""
    import random
    rng = random.Random(7)
    first = (Owner(20, "agent", "/kubepods/a"), Owner(21, "ñ\t\"x\"", None, 4))
    renamed = (Owner(20, "agent-new", "/kubepods/b", 2),)
    lists = [first, renamed, (), first[1:]]
    progs_ = [ProgRef(5, "xdp", 6), ProgRef(6, "tc", 3), ProgRef(5, "xdp2", 6)]
    maps = []
    for i in range(300):
        counted = rng.random() < 0.7
        method = rng.choice(["kernel", "array", "batch"])
        maps.append(LiveMap(
            id=1 + i, name=rng.choice(["a", "é", 'q"\\', "\x01"]),
            type=rng.choice([T.HASH, T.ARRAY, 240]), key_size=4, value_size=8,
            max_entries=rng.choice([1, 3, 64]), map_flags=rng.choice([0, 1]), map_extra=0,
            btf_id=rng.choice([0, 2]), memlock=rng.choice([None, 4096, 8192]),
            frozen=rng.choice([False, False, True, None]), owners=rng.choice(lists),
            programs=tuple(rng.sample(progs_, rng.randrange(0, 3))),
            pins=rng.choice([(), ("/sys/fs/bpf/\u00fc\"p",)]),
            entries=rng.choice([0, 1, 3]) if counted else None,
            entries_complete=rng.choice([True, False]) if counted else None,
            entries_method=method if counted else None))
    snap = Snapshot(taken_at=1.7e9, duration=0.5, hostname="h", kernel="6.18", possible_cpus=4,
                    maps=tuple(maps), entries_counted=True)
    from bpfmem.report.documents import snapshot_parts
    for prof in (PROF, None):
        v = snapshot_view(snap, prof)
        doc, lines = snapshot_parts(v)
        procs, progs = {}, {}
        inline = 0
        for m, c, line in zip(v.maps, v.checks, lines):
            want = _oracle_map(m, c, procs, progs)
            assert line == json.dumps(want, separators=(",", ":"))
            inline += any("comm" in o for o in want.get("owners", ()))
        assert inline > 10             # the renamed pid, written inline each time
        back = snapshot_from_dict(json.loads(json.dumps(document(v))))
        assert [m.owners for m in back.maps] == [m.owners for m in v.maps]
        assert [m.entries for m in back.maps] == [m.entries for m in v.maps]


def _oracle_programs(doc: dict, v) -> None:
    """The programs of a scan as the document's dicts were built before each program was
    written as text (kept as the oracle the text is compared with)."""
    from bpfmem.report.documents import _owner_ref, _program_ref
    s = v.snapshot
    procs, table = doc["processes"], doc["programs"]

    def holders(owners):
        out = []
        for o in owners:
            procs.setdefault(str(o.pid), {"comm": o.comm, "cgroup": o.cgroup})
            out.append(_owner_ref(o.pid, o.fds))
        return out

    for p in sorted(s.progs, key=lambda p: p.id):
        rec = dict(_program_ref(p.name, p.type))
        rec.update({"tag": p.tag, "memlock": p.memlock, "xlated_prog_len": p.xlated_prog_len,
                    "jited_prog_len": p.jited_prog_len, "map_ids": list(p.map_ids),
                    "verified_insns": p.verified_insns, "load_time": p.load_time,
                    "created_by_uid": p.created_by_uid})
        if p.btf_id:
            rec["btf_id"] = p.btf_id
        if p.owners:
            rec["owners"] = holders(p.owners)
        if p.links:
            rec["links"] = list(p.links)
        if p.link_owners:
            rec["link_owners"] = holders(p.link_owners)
        if p.pins:
            rec["pins"] = list(p.pins)
        table[str(p.id)] = rec
    doc["btf"] = [{"id": b.id, "name": b.name, "btf_size": b.btf_size,
                   "kernel_btf": b.kernel_btf, **({"owners": holders(b.owners)}
                                                 if b.owners else {})}
                  for b in sorted(s.btfs or (), key=lambda b: b.id)]
    doc["programs"] = {k: table[k] for k in sorted(table, key=int)}
    doc["processes"] = {k: procs[k] for k in sorted(procs, key=int)}   # (BTF holders too)


@pytest.mark.parametrize("indent", [None, 2])
def test_each_program_written_as_text_is_what_json_dumps_writes(indent):
    """The programs of a scan are written as text without a dict each: on programs with
    every optional key (BTF, program-fd holders with several fds, links and their
    holders, unicode and quoted pins and names, no memlock or verified count, a type with
    no name), beside maps that use some of them and one the listing missed, the programs
    table is the one the dicts made, and the whole page the one the dict document writes."""
    from bpfmem.records import JitMemory, LiveBtf, LiveProg
    from bpfmem.report.documents import snapshot_parts
    import random
    rng = random.Random(5)
    agent = Owner(10, "agent", "/kubepods/a")
    other = Owner(12, 'tc "loader"\tñ', None, 3)
    late = Owner(14, "late", "/x")            # holds a program only
    linker = Owner(15, "linker", "/z")        # holds a link only
    btfer = Owner(16, "btfer", "/b")          # holds a BTF object only
    progs_ = []
    for i in range(60):
        progs_.append(LiveProg(
            id=200 + 3 * i, name=rng.choice(["xdp", "é\"n", ""]), type=rng.choice([6, 3, 999]),
            tag=rng.choice(["b435f44616e08069", "00" * 8]),
            memlock=rng.choice([None, 4096]), xlated_prog_len=rng.randrange(0, 10**6),
            jited_prog_len=rng.choice([0, 28]), map_ids=tuple(rng.sample([1, 2, 3], 2)),
            btf_id=rng.choice([0, 9]), verified_insns=rng.choice([None, 0, 12]),
            load_time=rng.randrange(1 << 50), created_by_uid=rng.choice([0, 1000]),
            owners=tuple(rng.sample([agent, other, late], rng.randrange(0, 3))),
            links=tuple(rng.sample([7, 8], rng.randrange(0, 3))),
            link_owners=tuple(rng.sample([other, linker], rng.randrange(0, 3))),
            pins=tuple(rng.sample(["/sys/fs/bpf/ü", '/sys/fs/bpf/"q"'], rng.randrange(0, 3)))))
    users = (ProgRef(200, progs_[0].name, progs_[0].type), ProgRef(1, "gone", 2))
    maps = tuple(LiveMap(id=i, name="m", type=T.HASH, key_size=4, value_size=8,
                         max_entries=64, map_flags=0, map_extra=0, btf_id=0, memlock=4096,
                         frozen=False, owners=(agent,), programs=users[: i % 3])
                 for i in range(1, 4))
    btfs = (LiveBtf(9, "b", 100, False, (late, agent, btfer)),
            LiveBtf(1, "vmlinux", 5 << 20, True))
    snap = Snapshot(taken_at=1.7e9, duration=0.5, hostname="h", kernel="6.18",
                    possible_cpus=4, maps=maps, entries_counted=False, progs=tuple(progs_),
                    btfs=btfs, jit=JitMemory(1 << 20, 8192, None))
    for prof in (PROF, None):
        v = snapshot_view(snap, prof)
        doc, lines = snapshot_parts(v)
        want = dict(doc)
        procs = {}
        for m, c in zip(v.maps, v.checks):       # the maps' holders and programs first
            _oracle_map(m, c, procs, {})
        want["processes"] = {str(p): {"comm": c, "cgroup": g}
                             for p, (c, g) in sorted(procs.items())}
        want["programs"] = {"1": {"name": "gone", "type": prog_type_name(2)}}
        _oracle_programs(want, v)
        assert doc["processes"] == want["processes"] and "15" in want["processes"]
        assert want["processes"]["16"] == {"comm": "btfer", "cgroup": "/b"}
        assert list(doc["programs"]) == list(want["programs"])
        for k, text in doc["programs"].items():
            assert text == json.dumps(want["programs"][k], separators=(",", ":")), k
        assert doc["btf"] == want["btf"]
        text, whole = _rendered(v, indent)
        assert whole["programs"] == want["programs"]
        if indent is not None:
            shown = set(text.splitlines())    # a program a line
            assert all(f'    "{k}": ' + json.dumps(e, separators=(",", ":")) + "," in shown
                       for k, e in list(whole["programs"].items())[:-1])
        back = snapshot_from_dict(json.loads(text))
        assert back.progs == snap.progs and back.btfs == tuple(sorted(btfs, key=lambda b: b.id))
        #            (a BTF-only holder was left out of processes: the page was unreadable)


def test_scalars_are_written_as_json_dumps_writes_them():
    """documents._json_value (entries, pressure, frozen...) against json.dumps, on floats
    json writes in its own words (NaN, Infinity) and int and float subclasses."""
    from bpfmem.report.documents import _json_value
    from bpfmem.uapi import MapType
    for x in (None, True, False, 0, -3, 2**70, 0.5, 1e-7, 1/3, 1e300, float("nan"),
              float("inf"), -float("inf"), "é\n", "", MapType.HASH, type("F", (float,), {})(2.5)):
        assert _json_value(x) == json.dumps(x, separators=(",", ":")), x


def test_taken_at_is_written_as_datetime_writes_it():
    """documents.iso_time (no datetime import on a snapshot's start-up) against datetime's
    isoformat, at the microsecond rounding that carries into the next second too."""
    import datetime
    import random
    from bpfmem.report.documents import iso_time
    rng = random.Random(31)
    times = [0.0, 1.9999995, 1.9999994999, 1e9 + 0.9999996, 1764683000.4999995, -0.5,
             -1.0000001] + [rng.uniform(0, 4e9) for _ in range(2000)]
    times += [rng.randrange(4_000_000_000) + f for f in (0.9999995, 0.9999994, 0.9999996)
              for _ in range(300)]
    for t in times:
        assert iso_time(t) == datetime.datetime.fromtimestamp(
            t, datetime.timezone.utc).isoformat(timespec="seconds"), t
