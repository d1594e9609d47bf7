"""The commands compose the engines by one rule per concept, and their answers can be
recomputed from the rows they print (metamorphic tests across commands):

- the saving ``advise`` claims is what ``diff OBJ OBJ --set (advise --apply)`` saves, to the
  byte, per change and in total, on every fixture, the seed releases and generated
  occupancies;
- a ``check`` with gates G1..Gn fails iff one of the single-gate checks fails;
- inputs named twice (path and glob, symlink, ``./``) give the answer of naming them once;
- in every document the total equals the sum of its rows;
- ``maps``, ``check``, ``diff`` and ``advise`` resolve one ``--kernel`` to one profile;
- the pinned-map reuse rule is one function, libbpf's six attributes, for diff and pod.

And the problems found at the head before these rules, each as a regression test.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpfmem import api, cli
from bpfmem.analysis.pins import REUSE_ATTRS, differing, reusable

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "examples" / "seed"
EXAMPLE = REPO / "src" / "bpfmem" / "examples" / "cni_datapath.bpf.o"
FIXTURES = sorted((REPO / "tests" / "bpf" / "obj").glob("*.o"))
OBJECTS = [EXAMPLE, *sorted(SEED.glob("*.o")), *FIXTURES]
K = ["--kernel", "6.18", "--cpus", "2"]


def _run(argv, capsys, monkeypatch, cwd=REPO) -> tuple[int, str, str]:
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("COLUMNS", "120")
    rc = cli.main([str(a) for a in argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _json(argv, capsys, monkeypatch, cwd=REPO):
    rc, out, err = _run([*argv, "--format", "json"], capsys, monkeypatch, cwd)
    return rc, json.loads(out), err


def _opens(path) -> bool:
    try:
        api.load_object(path, programs=False)
        return True
    except Exception:       # a fixture the loader refuses: not an input for these rules
        return False


READABLE = [p for p in OBJECTS if _opens(p)]


# -- advise: the saving it prints is what --apply saves --------------------------------------

def _diff_saving(spec, sets, prof):
    """What ``diff OBJ OBJ --set ...`` saves at create (the diff engine on the parsed spec,
    as api.diff_objects runs it)."""
    from bpfmem.analysis.diff import diff
    d = diff([spec], [spec], prof, api.make_whatif(list(sets)))
    return -d.delta_at_create


def _check_advice(path, prof, occupancy=None):
    r = api.advise_objects([path], profile=prof, occupancy=occupancy)
    for o in r.objects:
        spec = o.spec
        # the total: what check/diff with --set of --apply save
        assert o.saves_at_create == _diff_saving(spec, o.apply, prof), o.apply
        # each change: on top of the changes to the same map listed before it (the diff of
        # the object reduced to that map: the same engine, without the other maps' work)
        before: dict[str, list[str]] = {}
        for a in o.advice:
            if a.set is not None:
                spec = replace(o.spec, maps=tuple(m for m in o.spec.maps if m.name == a.map))
            if a.kind in ("no_prealloc", "resize"):
                prior = before.setdefault(a.map, [])
                with_it = _diff_saving(spec, prior + [a.set], prof)
                assert a.saves_at_create == with_it - _diff_saving(spec, prior, prof), a
                prior.append(a.set)
            elif a.kind == "unused":
                assert a.saves_at_create == _diff_saving(spec, [a.set], prof), a
    return r


@pytest.mark.parametrize("path", READABLE, ids=lambda p: p.name)
def test_advise_saving_equals_what_apply_saves(path):
    prof = api.profile("6.18", cpus=2)
    try:
        _check_advice(path, prof)
    except Exception as e:                       # advise needs the programs: some refuse
        if "refus" not in str(e) and "program" not in str(e):
            raise


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_advise_with_generated_occupancy_saves_what_apply_saves(data):
    path = data.draw(st.sampled_from([EXAMPLE, *sorted(SEED.glob("*.o"))]))
    spec = api.load_object(path, programs=False)
    names = [m.name for m in spec.maps]
    occ = data.draw(st.dictionaries(st.sampled_from(names),
                                    st.integers(min_value=0, max_value=1 << 20), max_size=6))
    cpus = data.draw(st.sampled_from([2, 64]))
    release = data.draw(st.sampled_from(["5.10", "6.1", "6.12", "6.18"]))
    _check_advice(path, api.profile(release, cpus=cpus), occ)


def test_two_changes_to_one_map_are_not_both_counted_in_full():
    """service_route_table: a resize from occupancy and BPF_F_NO_PREALLOC; before, each was
    counted against the original map and the claimed total overstated --apply's saving."""
    prof = api.profile("6.18", cpus=2)
    occ = {"service_route_table": 100}
    r = _check_advice(EXAMPLE, prof, occ)
    kinds = [a.kind for a in r.objects[0].advice if a.map == "service_route_table"]
    assert kinds.count("resize") == 1 and kinds.count("no_prealloc") == 1
    resize = next(a for a in r.objects[0].advice
                  if a.map == "service_route_table" and a.kind == "no_prealloc")
    alone = api.advise_objects([EXAMPLE], profile=prof).objects[0]
    alone_np = next(a for a in alone.advice
                    if a.map == "service_route_table" and a.kind == "no_prealloc")
    assert resize.saves_at_create < alone_np.saves_at_create    # on the resized map


def test_occupancy_rows_for_unknown_maps_and_uncounted_snapshots_are_reported(
        tmp_path, capsys, monkeypatch):
    occ = tmp_path / "occ.json"
    occ.write_text(json.dumps({"service_route_table": 10, "no_such_map": 3}))
    rc, doc, _ = _json(["advise", EXAMPLE, "--occupancy", occ, *K], capsys, monkeypatch)
    assert rc == 0 and any("no_such_map" in w for w in doc["warnings"])
    # a snapshot taken without --entries: its maps have no counts
    snap = {"schema": "bpfmem/snapshot/v2", "maps": [
        {"id": 1, "name": "service_route_t", "type": "hash", "key_size": 4, "value_size": 4,
         "max_entries": 10}]}
    occ.write_text(json.dumps(snap))
    occupancy = api.load_occupancy(str(occ))
    assert occupancy == {} and occupancy.uncounted == ("service_route_t",)
    rc, out, _ = _run(["advise", EXAMPLE, "--occupancy", occ, *K], capsys, monkeypatch)
    assert rc == 0 and "no entry count for 1" in out


# -- check: every gate given is evaluated ----------------------------------------------------

def test_the_binary_gate_does_not_drop_the_maps_gate(capsys, monkeypatch):
    argv = ["check", EXAMPLE, "--limit", "1Mi", "--max-binary-size", "5Mi", *K]
    rc, out, _ = _run(argv, capsys, monkeypatch)
    assert rc == 1, out
    assert "FAIL" in out and "over the budget 1Mi by" in out and "binary size" in out
    rc, doc, _ = _json(argv, capsys, monkeypatch)
    assert rc == 1 and doc["pass"] is False and doc["binary_gate"]["pass"] is True
    assert doc["results"][0]["pass"] is False


def _gate_pass(settings_, profiles, paths=(EXAMPLE,)):
    return api.check_gates(list(map(str, paths)), settings_, profiles=profiles).passed


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(limit=st.integers(1 << 20, 256 << 20), fraction=st.sampled_from([0.25, 0.5, 1.0]),
       obj_limit=st.none() | st.integers(1 << 20, 128 << 20),
       cap=st.none() | st.integers(1 << 20, 32 << 20),
       binary=st.none() | st.integers(1 << 10, 1 << 20),
       full=st.booleans())
def test_a_check_fails_iff_one_of_its_single_gate_checks_fails(limit, fraction, obj_limit,
                                                                cap, binary, full):
    profiles = [api.profile("6.1", cpus=2), api.profile("6.18", cpus=64)]
    spec = api.load_object(EXAMPLE, programs=False)
    gates = [api.gate_settings(limit=limit, max_fraction=fraction, full=full)]
    extra = {}
    if obj_limit is not None:
        extra["object_limits"] = {spec.name: obj_limit}
    if cap is not None:
        extra["map_caps"] = {"conntrack_table": cap}
    if extra:
        # a per-object limit or a cap alone: a budget no map can exceed, beside it
        gates.append(replace(api.gate_settings(limit=1 << 40, full=full), **extra))
    if binary is not None:
        gates.append(api.gate_settings(max_binary_size=binary))
    combined = replace(gates[0], **extra,
                       binary_max=binary, binary_named=binary is not None)
    singles = [_gate_pass(g, profiles) for g in gates]
    assert _gate_pass(combined, profiles) == all(singles)


# -- inputs named twice --------------------------------------------------------------------

def test_an_input_named_twice_is_read_once(tmp_path, capsys, monkeypatch):
    d = tmp_path / "build"
    d.mkdir()
    shutil.copy(SEED / "cni_v054.bpf.o", d / "a.o")
    shutil.copy(SEED / "cni_v060_before.bpf.o", d / "b.o")
    (d / "link.o").symlink_to(d / "a.o")
    once = _json(["check", "build/a.o", "build/b.o", "--limit", "128Mi", *K], capsys,
                 monkeypatch, tmp_path)
    for twice in (["build/a.o", "build/*.o"], ["./build/a.o", "build/a.o", "build/b.o"],
                  ["build/link.o", "build/a.o", "build/b.o"], ["build/a.o build/b.o",
                                                               "build/b.o"]):
        rc, doc, err = _json(["check", *twice, "--limit", "128Mi", *K], capsys, monkeypatch,
                             tmp_path)
        assert (rc, doc["results"][0]["total"]) == (once[0], once[1]["results"][0]["total"])
        assert len(doc["results"][0]["objects"]) == 2 and "read once" in err, twice
    # the sum of two distinct objects, not one counted twice
    totals = [_json(["check", f"build/{n}", "--limit", "128Mi", *K], capsys, monkeypatch,
                    tmp_path)[1]["results"][0]["total"] for n in ("a.o", "b.o")]
    assert once[1]["results"][0]["total"] == sum(totals)


def test_expand_paths_keeps_the_first_spelling_and_says_what_was_named_again(tmp_path):
    (tmp_path / "x.o").write_bytes(b"")
    os.symlink(tmp_path / "x.o", tmp_path / "y.o")
    found = api.expand_paths([str(tmp_path / "x.o"), str(tmp_path / "*.o")])
    assert found.paths == (str(tmp_path / "x.o"),)
    assert len(found.notes) == 1 and "y.o" in found.notes[0]
    with pytest.raises(ValueError, match="no file matches"):
        api.expand_paths([str(tmp_path / "*.none")])


# -- every total is the sum of its rows ----------------------------------------------------

@pytest.mark.parametrize("path", [EXAMPLE, *sorted(SEED.glob("*.o"))], ids=lambda p: p.name)
def test_every_document_total_is_the_sum_of_its_rows(path, capsys, monkeypatch):
    _, check, _ = _json(["check", path, "--limit", "128Mi", *K], capsys, monkeypatch)
    for p in check["results"]:
        assert p["total"] == sum(o["total"] for o in p["objects"])
        for o in p["objects"]:
            assert o["total"] == sum(m["charged_at_create"] or 0 for m in o["maps"])
        assert p["pass"] == all(c["pass"] for c in p["checks"])
        assert p["total"] - p["budget"] == -(p["budget"] - p["total"])
    _, diff, _ = _json(["diff", path, path, "--set", "*.max_entries=1024", *K], capsys,
                       monkeypatch)
    for side, key in (("old", "old"), ("new", "new")):
        rows = [m[key]["charged_at_create"] or 0 for m in diff["maps"] if m.get(key)]
        assert diff[side]["charged_at_create"] == sum(rows)
    assert diff["delta_at_create"] == (diff["new"]["charged_at_create"]
                                       - diff["old"]["charged_at_create"])
    _, adv, _ = _json(["advise", path, *K], capsys, monkeypatch)
    for o in adv["objects"]:
        assert o["saves_at_create"] == sum(a["saves_at_create"] for a in o["advice"]
                                           if a["kind"] in ("no_prealloc", "resize"))


# -- one kernel rule -----------------------------------------------------------------------

CONFIG = """
[[kernels]]
name = "t612"
release = "6.12"
cpus = [64]

[[kernels]]
name = "t61"
release = "6.1"
"""


def _kernels_of(doc) -> list[tuple]:
    rows = (doc["results"] if doc["schema"] == "bpfmem/check/v1" else
            doc["documents"] if doc["schema"] == "bpfmem/matrix/v1" else [doc])
    return sorted((r["kernel"]["version"], r["kernel"]["possible_cpus"]) for r in rows)


def test_every_command_resolves_kernel_names_the_same_way(tmp_path, capsys, monkeypatch):
    (tmp_path / "bpfmem.toml").write_text(CONFIG)
    shutil.copy(EXAMPLE, tmp_path / "a.o")
    seen = {}
    for kernel in ("t612", "t61", "t612,6.18", "6.1"):
        extra = ["--cpus", "2"] if kernel == "6.1" else []
        runs = {"maps": ["maps", "a.o"], "check": ["check", "a.o", "--limit", "128Mi"],
                "diff": ["diff", "a.o", "a.o"], "advise": ["advise", "a.o"]}
        for name, argv in runs.items():
            rc, doc, err = _json([*argv, "--kernel", kernel, *extra], capsys, monkeypatch,
                                 tmp_path)
            assert rc in (0, 1), err
            seen[(kernel, name)] = _kernels_of(doc)
        assert len({tuple(seen[(kernel, n)]) for n in runs}) == 1, {
            n: seen[(kernel, n)] for n in runs}
    assert seen[("t612", "check")] == [("6.12.0", 64)]
    assert seen[("t612,6.18", "check")][0] == ("6.12.0", 64)
    # --cpus overrides an entry's own cpus, for every command alike
    rc, doc, _ = _json(["check", "a.o", "--limit", "128Mi", "--kernel", "t612", "--cpus",
                        "2,8"], capsys, monkeypatch, tmp_path)
    assert _kernels_of(doc) == [("6.12.0", 2), ("6.12.0", 8)]
    rc, out, err = _run(["check", "a.o", "--limit", "128Mi", "--kernel", "t999"], capsys,
                        monkeypatch, tmp_path)
    assert rc == 2 and "t999" in err and "t612" in err


# -- the pinned-map rule -------------------------------------------------------------------

def test_the_reuse_rule_is_libbpfs_six_attributes_for_diff_and_pod():
    assert REUSE_ATTRS == ("type", "key_size", "value_size", "max_entries", "map_flags",
                           "map_extra")
    spec = next(m for m in api.load_object(EXAMPLE, programs=False).maps
                if m.kind != "data")
    from bpfmem.analysis.pod import MapRow
    from bpfmem.uapi import map_type_name
    live = MapRow(1, spec.name, map_type_name(spec.type), spec.key_size, spec.value_size,
                  spec.max_entries, spec.map_flags, spec.map_extra, None, None, None, 0, None,
                  (), ("/sys/fs/bpf/x",), True, "")
    assert reusable(live, spec) and reusable(spec, spec)
    for attr in REUSE_ATTRS[1:]:
        other = replace(live, **{attr: getattr(live, attr) + 1})
        assert not reusable(other, spec) and differing(other, spec) == (attr,)
    # diff says the same of two specs that differ in map_extra only
    changed = replace(spec, map_extra=spec.map_extra + 1)
    assert differing(spec, changed) == ("map_extra",)


# -- check over a matrix -------------------------------------------------------------------

def test_a_matrix_check_starts_with_its_grid_and_names_the_eras_limit(capsys, monkeypatch):
    rc, out, _ = _run(["check", EXAMPLE, "--limit", "64Mi", "--kernel", "5.10,6.1,6.12",
                       "--cpus", "2,64"], capsys, monkeypatch)
    assert rc == 1
    lines = out.splitlines()
    assert "verdict, maps charge, headroom" in lines[0]
    grid = "\n".join(lines[:12])
    assert "2 CPUs" in grid and "64 CPUs" in grid and "over by" in grid
    assert "RLIMIT_MEMLOCK" in grid                   # 5.10: the limit that matters
    assert "6 profiles, 4 failing" in out
    assert "maps charge 68.6Mi, over the budget 64Mi by 4.6Mi" in out
    assert "1,048,576" not in out and "(1 of" not in out
    _, doc, _ = _json(["check", EXAMPLE, "--limit", "64Mi", "--kernel", "5.10", "--cpus",
                       "2"], capsys, monkeypatch)
    assert "RLIMIT_MEMLOCK" in doc["results"][0]["notes"][0]
