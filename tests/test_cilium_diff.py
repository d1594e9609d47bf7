"""bpfmem's ``cilium-ebpf@0.9`` view against cilium/ebpf 0.9.1 itself, field for field, on every
fixture (tests/harness/cilium_maps.go, built offline with Debian's Go against Debian's
golang-github-cilium-ebpf-dev).

``spec`` compares what ``LoadCollectionSpec`` returns with bpfmem's spec (which maps exist,
their names and attributes, inner map templates, objects refused as a whole); ``create``
(root) also creates every map with ``NewMap`` and checks the kernel's view (``Map.Info()``)
and the fdinfo memlock against the model, and that the maps cilium/ebpf fails to create are
exactly those bpfmem marks as refused.
"""

from __future__ import annotations

import sys

import pytest

import cilium_harness
from conftest import CILIUM_EXAMPLES, FIXTURES, fixture_objects, is_root
from bpfmem.api import example_object_path, load_object
from bpfmem.errors import ParseError
from bpfmem.model.estimate import created_attrs, estimate_spec
from bpfmem.host.profile import host_possible_cpus, host_profile
from bpfmem.parse.loader import CILIUM_09
from bpfmem.uapi import MapType

pytestmark = pytest.mark.cilium

# every fixture (the synthetic benchmark object is made to be large, not loadable), the
# bpf2go-style fixtures and cilium/ebpf's own example objects
OBJECTS = ([p for p in fixture_objects() if "synthetic" not in p.name] + [example_object_path()]
           + sorted((FIXTURES / "bpf2go").glob("*.o")) + sorted(CILIUM_EXAMPLES.glob("*.o")))
HOST_LITTLE = sys.byteorder == "little"


@pytest.fixture(scope="module")
def harness():
    if cilium_harness.ensure_built() is None:
        pytest.skip("go or golang-github-cilium-ebpf-dev missing: cannot build the harness")
    return cilium_harness


@pytest.fixture(scope="module")
def spec_lines(harness):
    rc, out = harness.run("spec", *map(str, OBJECTS))
    assert rc == 0
    return out


@pytest.fixture(scope="module")
def create_lines(harness):
    if not is_root():
        pytest.skip("creating maps needs root")
    rc, out = harness.run("create", *map(str, OBJECTS))
    assert rc == 0
    return out


def _ours_or_error(path):
    try:
        return load_object(path, loader=CILIUM_09), None
    except ParseError as e:
        return None, e


def _spec_view(m, cpus: int) -> dict:
    # 0.9.1 map.go clampPerfEventArraySize: LoadCollectionSpec already cuts a perf event
    # array's max_entries to the possible CPUs (0 stays 0 until createMap)
    me = m.max_entries
    if m.type == MapType.PERF_EVENT_ARRAY and me > cpus:
        me = cpus
    return {"type": m.type, "key_size": m.key_size if m.type != MapType.PERF_EVENT_ARRAY
            else None, "value_size": m.value_size if m.type != MapType.PERF_EVENT_ARRAY
            else None, "max_entries": me, "flags": m.map_flags, "pinning": m.pinning,
            "inner": _spec_view(m.inner, cpus) if m.inner is not None else None}


def _their_spec(t: dict) -> dict:
    v = {k: t[k] for k in ("type", "key_size", "value_size", "max_entries", "flags",
                           "pinning")}
    if t["type"] == MapType.PERF_EVENT_ARRAY:
        # createMap (not LoadCollectionSpec) sets a perf event array's sizes to 4
        v["key_size"] = v["value_size"] = None
    v["inner"] = _their_spec(t["inner"]) if t.get("inner") else None
    return v


@pytest.mark.parametrize("path", OBJECTS, ids=[p.name for p in OBJECTS])
def test_spec_matches_cilium_ebpf_09(spec_lines, path):
    lines = spec_lines[str(path)]
    ours, err = _ours_or_error(path)
    theirs_err = next((x for x in lines if x["kind"] == "error"), None)
    if theirs_err is not None:
        assert ours is None, f"cilium/ebpf 0.9.1 refuses it: {theirs_err['message']}"
        return
    assert err is None, f"cilium/ebpf 0.9.1 opens it, bpfmem refuses it: {err}"
    cpus = host_possible_cpus()
    theirs = {x["name"]: x for x in lines if x["kind"] == "map"}
    assert sorted(theirs) == sorted(m.name for m in ours.maps)
    for m in ours.maps:
        t = theirs[m.name]
        assert t["spec_name"] == m.name
        assert _spec_view(m, cpus) == _their_spec(t["spec"]), m.name
        if m.inner is not None:
            assert t["spec"]["inner_name"] == m.inner.name
    assert ours.loader == CILIUM_09


@pytest.mark.kernel
@pytest.mark.parametrize("path", OBJECTS, ids=[p.name for p in OBJECTS])
def test_kernel_view_and_memlock_match_cilium_ebpf_09(create_lines, path):
    lines = create_lines[str(path)]
    ours, _err = _ours_or_error(path)
    if ours is None:
        assert any(x["kind"] == "error" for x in lines)
        return
    if ours.little_endian != HOST_LITTLE:
        # cilium/ebpf cannot load BTF of the other byte order: bpf2go's other twin is for
        # the other architectures; the spec test covers it
        pytest.skip("object of the other byte order")
    prof = host_profile()
    theirs = {x["name"]: x for x in lines if x["kind"] == "map"}
    created = refused = 0
    for m in ours.maps:
        t = theirs[m.name]
        fp, why = estimate_spec(m, prof)
        if t["error"] is not None:
            assert fp is not None and fp.rejected, \
                f"{m.name}: cilium/ebpf fails ({t['error']}), bpfmem creates it"
            refused += 1
            continue
        assert not m.refused, f"{m.name}: bpfmem says refused ({m.refused}), cilium creates it"
        assert fp is not None and not fp.rejected, (m.name, why, fp and fp.rejected)
        k = t["kernel"]
        want = created_attrs(fp.shape, prof)
        assert k["name"] == m.kernel_name
        assert (k["type"], k["key_size"], k["value_size"]) == \
            (m.type, fp.shape.key_size, fp.shape.value_size), m.name
        assert k["max_entries"] == want.max_entries, m.name
        assert k["flags"] == want.map_flags, m.name
        assert k["memlock"] == fp.memlock_at_create, m.name
        created += 1
    assert created + refused == len(ours.maps)
