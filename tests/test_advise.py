"""bpfmem advise: verdicts against a truth table, recommendations and their byte claims."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES, is_root
from bpfmem import api, cli
from bpfmem.report.documents import document
from bpfmem.host.profile import host_profile
from bpfmem.model.shape import MapShape

SEED = Path(__file__).resolve().parent.parent / "examples" / "seed"
FIVE = {"service_route_table", "service_access_table", "service_deny_table",
        "service_remote_grant_table", "attachment_identity_table"}


def run(capsys, *argv):
    rc = cli.main(list(argv))
    return rc, capsys.readouterr().out


def test_truth_table():
    truth = pytest.importorskip("advise_truth").TRUTH
    bad = []
    for obj, maps in truth.items():
        doc = document(api.advise_objects([str(FIXTURES / obj)], profile=api.profile()))
        got = {m["name"]: m for m in doc["objects"][0]["maps"]}
        for name, want in maps.items():
            g = got.get(name)
            if g is None or g["verdict"] != want["verdict"]:
                bad.append((obj, name, want["verdict"], g and g["verdict"], g and g["ops"]))
                continue
            for op in want.get("ops", []):
                if op not in g["ops"]:
                    bad.append((obj, name, "missing op", op, g["ops"]))
    assert not bad, "\n".join(map(str, bad))


def test_seed_advice_is_the_seed_fix(capsys):
    rc, out = run(capsys, "advise", str(SEED / "cni_v060_before.bpf.o"), "--kernel", "6.18",
                  "--cpus", "2", "--format", "json")
    o = json.loads(out)["objects"][0]
    no_prealloc = {a["map"] for a in o["advice"] if a["kind"] == "no_prealloc"}
    assert no_prealloc == FIVE
    # the saving equals the model's difference between the two releases
    before = document(api.check_objects([str(SEED / "cni_v060_before.bpf.o")], limit=1 << 40,
                               profiles=api.profiles(["6.18"], [2])))["results"][0]["total"]
    after = document(api.check_objects([str(SEED / "cni_v060_after.bpf.o")], limit=1 << 40,
                              profiles=api.profiles(["6.18"], [2])))["results"][0]["total"]
    assert o["saves_at_create"] == before - after
    keep = {a["map"] for a in o["advice"] if a["kind"] == "lru_resize"}
    assert "service_reverse_table" in keep                # LRU: resizing is the only lever
    rc, line = run(capsys, "advise", str(SEED / "cni_v060_before.bpf.o"), "--apply")
    assert line.count("flags+=no_prealloc") == 5
    rc, out = run(capsys, "check", str(SEED / "cni_v060_before.bpf.o"), "--limit", "128Mi",
                  "--max-fraction", "0.4", "--kernel", "6.18", "--cpus", "2",
                  *[a.strip("'") for a in line.split()])
    assert rc == 0                                        # the advice makes it fit


def test_bundled_example_finds_the_seed_saving(capsys):
    rc, out = run(capsys, "advise", "--format", "json", str(api.example_object_path()))
    o = json.loads(out)["objects"][0]
    assert {a["map"] for a in o["advice"] if a["kind"] == "no_prealloc"} == FIVE
    assert o["saves_at_create"] > 20 << 20


def test_occupancy_resize(tmp_path, capsys):
    occ = tmp_path / "occ.json"
    occ.write_text(json.dumps({"conntrack_table": 1000}))
    rc, out = run(capsys, "advise", str(api.example_object_path()), "--occupancy", str(occ),
                  "--format", "json", "--kernel", "6.18", "--cpus", "2")
    a = next(a for a in json.loads(out)["objects"][0]["advice"] if a["kind"] == "resize")
    assert a["map"] == "conntrack_table" and a["set"] == "conntrack_table.max_entries=2048"
    assert a["saves_at_create"] > 0
    occ.write_text("[1, 2]")
    assert cli.main(["advise", str(api.example_object_path()), "--occupancy", str(occ)]) == 2


@pytest.mark.kernel
@pytest.mark.skipif(not is_root() or shutil.which("gcc") is None, reason="needs root and gcc")
def test_no_prealloc_savings_match_the_kernel():
    """For every NO_PREALLOC recommendation, create the map before and after for real: the
    memlock saving the advisor claims equals the kernel's difference, and the charge saving is
    within two pages."""
    from bpfmem.host import probe as hp
    prof = host_profile()
    paths = [str(api.example_object_path()), str(SEED / "cni_v060_before.bpf.o")]
    paths += [str(p) for p in sorted(FIXTURES.glob("*.o")) if "synthetic" not in p.name]
    claims = []
    for path in paths:
        try:
            doc = document(api.advise_objects([path], profile=api.profile()))
        except Exception:
            continue
        spec = api.load_object(path)
        for a in doc["objects"][0]["advice"]:
            if a["kind"] == "no_prealloc":
                m = spec.map(a["map"])
                claims.append((MapShape(m.type, m.key_size, m.value_size, m.max_entries,
                                        m.map_flags, m.map_extra), a))
    assert len(claims) >= 10
    from dataclasses import replace
    specs = []
    for i, (s, _a) in enumerate(claims):
        specs.append(hp.shape_spec(f"b{i}", s))
        specs.append(hp.shape_spec(f"a{i}", replace(s, map_flags=s.map_flags | 1)))
    _h, results = hp.run_local(specs, "v1")
    r = {x["id"]: x for x in results if "id" in x}
    for i, (s, a) in enumerate(claims):
        before, after = r[f"b{i}"], r[f"a{i}"]
        assert before["ok"] and after["ok"]
        assert before["memlock"] - after["memlock"] == a["saves_memlock"], a["map"]
        got = before["charged"] - after["charged"]
        assert abs(got - a["saves_at_create"]) <= 2 * prof.page_size, (a["map"], got)
