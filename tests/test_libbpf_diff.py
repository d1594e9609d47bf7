"""bpfmem's specs against Debian's libbpf (tests/harness), field for field, on every fixture.

``open`` compares what libbpf decides when it opens an object; ``load`` (root) also creates the
maps, so the kernel's own view (bpf_map_get_info_by_fd) is checked too. Objects libbpf 1.x
refuses (legacy SEC("maps")) are checked against the kernel instead: the maps bpfmem reports
are created as specified and the kernel must accept them and report the same attributes.
"""

from __future__ import annotations

import json

import pytest

import libbpf_harness
from conftest import FIXTURES, fixture_objects, is_root
from bpfmem.api import example_object_path, load_object, profile
from bpfmem.host.profile import host_possible_cpus
from bpfmem.model.estimate import created_attrs, shape_of_spec
from bpfmem.model.shape import MapShape
from bpfmem.parse.objspec import MapSpec
from bpfmem.uapi import MapType

pytestmark = pytest.mark.libbpf

OBJECTS = fixture_objects() + [example_object_path()]

# What Debian's libbpf 1.1 cannot do that newer libbpf (which bpfmem mirrors) or other loaders
# can; such objects are checked against the kernel instead. Each entry is a pattern of
# libbpf's own warning and why.
LIBBPF_11_OPEN_LIMITS = {
    "legacy map definitions in 'maps' section are not supported":
        "libbpf 1.0+ refuses SEC(\"maps\"); libbpf 0.x, iproute2 and cilium/ebpf load it",
    "attr 'map_extra': expected PTR, got enum":
        "__ulong(map_extra, ...) (an ENUM/ENUM64 member) is read by libbpf 1.4+",
    "endianness mismatch":
        "libbpf 1.1 opens only objects of the host's byte order (newer libbpf opens both)",
}
LIBBPF_11_LOAD_LIMITS = {
    "failed to initialize slot":
        "libbpf 1.1 fills prog array slots at load even when autoload is off",
}

@pytest.fixture(scope="module")
def harness():
    if libbpf_harness.ensure_built() is None:
        pytest.skip("gcc or libbpf-dev missing: cannot build tests/harness")
    return libbpf_harness


def _open_view(m: MapSpec) -> dict:
    return {"name": m.name, "type": m.type, "key_size": m.key_size,
            "value_size": m.value_size, "max_entries": m.max_entries,
            "map_flags": m.map_flags, "map_extra": m.map_extra, "numa_node": m.numa_node,
            "pinned": m.pinning == 1}


def _theirs(d: dict) -> dict:
    return {k: d[k] for k in ("name", "type", "key_size", "value_size", "max_entries",
                              "map_flags", "map_extra", "numa_node", "pinned")}


def _ids(paths):
    return [p.name for p in paths]


def _known_limit(lines: list[dict], limits: dict[str, str]) -> str | None:
    err = next((x for x in lines if x["kind"] == "error"), None)
    if err is None:
        return None
    text = " ".join(err.get("warnings", [])) + " " + err.get("message", "")
    for pattern, why in limits.items():
        if pattern in text:
            return why
    pytest.fail(f"libbpf failed for a reason not known to be a libbpf 1.1 limit: {err}")


def _given(m: MapSpec, prof) -> MapShape:
    """The shape the kernel is given for ``m``: bpfmem's one door (shape_of_spec, what
    `bpfmem maps` models), or the spec as written where that door says the loader decides at
    load time (then the loader, like this harness, passes the spec's own fields)."""
    shape, _why = shape_of_spec(m, prof)
    return shape if shape is not None else MapShape(
        int(m.type), m.key_size, m.value_size, m.max_entries, m.map_flags, m.map_extra)


def _create_spec(m: MapSpec, prof) -> dict:
    sh = _given(m, prof)
    return {"name": m.kernel_name, "type": sh.type, "key_size": sh.key_size,
            "value_size": sh.value_size,
            "max_entries": sh.max_entries,
            "map_flags": sh.map_flags, "map_extra": sh.map_extra, "numa_node": m.numa_node,
            "inner": _create_spec(m.inner, prof) if m.inner is not None else None}


def _check_against_kernel(harness, maps: list[MapSpec], cpus: int = 2) -> None:
    """Create ``maps`` as bpfmem specifies them; the kernel must accept each one and report
    the same attributes."""
    maps = [m for m in maps if m.type != MapType.STRUCT_OPS and
            m.type not in (MapType.SK_STORAGE, MapType.INODE_STORAGE, MapType.TASK_STORAGE,
                           MapType.CGRP_STORAGE)]   # these need BTF, which create mode lacks
    prof = profile(cpus=cpus)
    stdin = "".join(json.dumps(_create_spec(m, prof)) + "\n" for m in maps)
    rc, lines = harness.run("create", stdin=stdin)
    assert rc == 0, lines
    out = [x for x in lines if x["kind"] in ("created", "rejected")]
    assert [x["kind"] for x in out] == ["created"] * len(maps), out
    for m, c in zip(maps, out):
        k = c["kernel"]
        want = created_attrs(_given(m, prof), prof)
        assert (k["name"], k["type"], k["key_size"], k["value_size"], k["map_flags"],
                k["map_extra"]) == (m.kernel_name, m.type, m.key_size, m.value_size,
                                    want.map_flags, m.map_extra), m.name
        if not m.max_entries_set_at_load:
            assert k["max_entries"] == want.max_entries, m.name


OPENABLE = OBJECTS


@pytest.mark.parametrize("path", OPENABLE, ids=_ids(OPENABLE))
def test_open_view_matches_libbpf(harness, path):
    rc, lines = harness.run("open", str(path))
    ours = load_object(path)
    if rc != 0:
        why = _known_limit(lines, LIBBPF_11_OPEN_LIMITS)
        if not is_root():
            pytest.skip(f"libbpf 1.1 cannot open it ({why}); the kernel check needs root")
        _check_against_kernel(harness, list(ours.maps), host_possible_cpus())   # instead of libbpf
        return
    their_maps = [line for line in lines if line["kind"] == "map"]
    assert [m["name"] for m in their_maps] == [m.name for m in ours.maps]
    for m, t in zip(ours.maps, their_maps):
        assert _open_view(m) == _theirs(t), m.name
        if t.get("inner") is not None or m.inner is not None:
            assert m.inner is not None and t.get("inner") is not None, m.name
            assert _open_view(m.inner) == _theirs(t["inner"]), m.name + ".inner"
    their_progs = [(p["name"], p["section"], p["type"], p["expected_attach_type"], p["autoload"])
                   for p in lines if p["kind"] == "prog"]
    assert their_progs == [(p.name, p.section, p.type, p.expected_attach_type, p.autoload)
                           for p in ours.programs]
    obj = next(line for line in lines if line["kind"] == "object")
    assert obj["name"] == ours.name


# The synthetic benchmark object is made to be large, not loadable (its random shapes include
# specs the kernel rejects, e.g. NUMA_NODE on per-CPU hashes).
LOADABLE = [p for p in OPENABLE if "synthetic" not in p.name]


@pytest.mark.kernel
@pytest.mark.skipif(not is_root(), reason="creating maps needs root")
@pytest.mark.parametrize("path", LOADABLE, ids=_ids(LOADABLE))
def test_kernel_view_matches_spec(harness, path):
    rc, lines = harness.run("load", str(path))
    spec = load_object(path)
    if rc != 0:
        why = _known_limit(lines, {**LIBBPF_11_OPEN_LIMITS, **LIBBPF_11_LOAD_LIMITS})
        assert why
        _check_against_kernel(harness, list(spec.maps), host_possible_cpus())   # instead of libbpf
        return
    ours = {m.name: m for m in spec.maps}
    obj = next(line for line in lines if line["kind"] == "object")
    cpus = obj["possible_cpus"]
    prof = profile(cpus=cpus)
    for line in (x for x in lines if x["kind"] == "map"):
        m = ours[line["open"]["name"]]
        if not m.autocreate:
            continue
        k = line["kernel"]
        want = created_attrs(_given(m, prof), prof)
        assert k["name"] == m.kernel_name
        assert k["type"] == m.type
        assert k["key_size"] == m.key_size
        assert k["map_flags"] == want.map_flags
        assert k["map_extra"] == m.map_extra
        assert k["max_entries"] == want.max_entries
        if m.value_size_set_at_load:
            assert m.type == MapType.STRUCT_OPS
        else:
            assert k["value_size"] == m.value_size
        for slot in line.get("slots", []):
            target = dict(m.init_slots)[slot["index"]]
            assert slot["map"]["name"] == ours[target].kernel_name


def test_big_endian_twin_gives_the_same_spec():
    little = load_object(FIXTURES / "hash_basic.o")
    big = load_object(FIXTURES / "hash_basic.bpfeb.o")
    assert little.little_endian and not big.little_endian
    assert big.maps == little.maps
    assert [(p.name, p.section, p.type, p.maps) for p in big.programs] == \
        [(p.name, p.section, p.type, p.maps) for p in little.programs]
