"""parse/access.py: what programs do with maps (the advisor's verdicts)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, fixture_objects
from bpfmem.api import example_object_path
from bpfmem.errors import ParseError
from bpfmem.inputs import read_input
from bpfmem.parse.access import analyze_object

EXAMPLE = str(example_object_path())


def analyze_file(path: str):
    """What each program does to each map of the object at ``path``."""
    return analyze_object(read_input(path, "object"), path=path)


def verdicts(path) -> dict[str, str]:
    return {n: u.verdict for n, u in analyze_file(str(path)).items()}


def test_bundled_example_the_seed_fact():
    """The fact the seed fix rested on: the five policy tables are only looked up by the
    datapath; the reverse NAT LRU and conntrack are written by it."""
    v = verdicts(EXAMPLE)
    for name in ("service_route_table", "service_access_table", "service_deny_table",
                 "service_remote_grant_table", "attachment_identity_table"):
        assert v[name] == "read_only", name
    assert v["service_reverse_table"] == "datapath_writes"
    assert v["conntrack_table"] == "datapath_writes"
    assert v["metrics_map"] == "datapath_writes"          # lookup, then v->packets++
    assert v["events"] == "datapath_writes"               # ringbuf output
    assert v["cni_data.rodata"] == "read_only"


def test_callbacks_and_map_in_map():
    v = verdicts(FIXTURES / "callbacks.o")
    assert v["walk_sums"] == "datapath_writes"            # only updated inside the callback
    assert v["walk_map"] == "read_only"
    assert v["loop_counts"] == "datapath_writes"
    m = analyze_file(str(FIXTURES / "map_in_map.o"))
    assert m["outer_arr"].verdict == "read_only"          # the datapath never changes slots
    assert "inner_lookup" in m["outer_arr"].ops
    assert m["inner_a"].verdict == m["inner_b"].verdict != "unreferenced"


def test_which_programs_and_operations():
    u = analyze_file(EXAMPLE)["conntrack_table"]
    assert u.writers["update"] == ["cni_tc_egress"]


@pytest.mark.parametrize("path", fixture_objects() + [EXAMPLE], ids=lambda p: str(p).split("/")[-1])
def test_every_fixture_analyzes_without_unknowns_it_can_explain(path):
    res = analyze_file(str(path))
    assert all(u.verdict in ("datapath_writes", "read_only", "unreferenced", "unknown")
               for u in res.values())


SEEDS = [p.read_bytes() for p in fixture_objects() if "synthetic" not in p.name]


@st.composite
def mutated_code(draw):
    """A fixture with bytes of its code sections changed (instructions, not ELF headers)."""
    from bpfmem.parse.elf import ElfFile
    data = bytearray(draw(st.sampled_from(SEEDS)))
    elf = ElfFile(bytes(data))
    secs = [s for s in elf.sections if s.is_exec and s.size >= 8]
    if not secs:
        return bytes(data)
    for _ in range(draw(st.integers(1, 10))):
        s = draw(st.sampled_from(secs))
        pos = s.offset + draw(st.integers(0, s.size - 1))
        data[pos] = draw(st.integers(0, 255))
    return bytes(data)


@settings(max_examples=300, deadline=timedelta(seconds=2),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated_code())
def test_mutated_programs_give_verdicts_or_parse_errors(data):
    try:
        analyze_object(data)
    except ParseError:
        pass
