"""The input documents of the live node's records are decoded in parse/ (no kernel needed);
that the records sit on the ground floor is the layer contract's (tests/test_layers.py)."""

from __future__ import annotations

import pytest

from bpfmem.parse.snapshot import looks_like_snapshot, occupancy_from


def test_looks_like_snapshot():
    assert looks_like_snapshot('  {"schema": "bpfmem/snapshot/v1", "maps": []}')
    assert looks_like_snapshot('\n[{"id": 1}]')          # bpftool -j map show
    assert not looks_like_snapshot('{"map_a": 10}')      # an occupancy mapping
    assert not looks_like_snapshot('{"schema": "bpfmem/maps/v1"}')


def test_occupancy_from_a_mapping_and_a_snapshot():
    assert occupancy_from({"a": 3, "b": 0}) == {"a": 3, "b": 0}
    snap = {"schema": "bpfmem/snapshot/v1", "maps": [
        {"name": "ct", "entries": 5}, {"name": "ct", "entries": 9}, {"name": "x"}]}
    assert occupancy_from(snap) == {"ct": 9}    # the fullest of two maps of one name
    with pytest.raises(ValueError, match="b: expected entries"):
        occupancy_from({"a": 1, "b": True})
    with pytest.raises(ValueError, match="map name"):
        occupancy_from([1, 2])
