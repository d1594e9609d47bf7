"""Any input yields a spec or a ParseError, never another exception, never more than a second."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import fixture_objects
from bpfmem.errors import ParseError
from bpfmem.parse.objspec import ObjectSpec, parse_object

SEEDS = [p.read_bytes() for p in fixture_objects()]


@st.composite
def mutated(draw):
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 8))):
        op = draw(st.sampled_from(["flip", "word", "cut", "splice"]))
        pos = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "word":
            val = draw(st.sampled_from([0, 1, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF,
                                        draw(st.integers(0, 2**32 - 1))]))
            data[pos:pos + 4] = val.to_bytes(4, "little")
        elif op == "cut":
            del data[pos:]
            if not data:
                break
        else:
            data[pos:pos] = draw(st.binary(min_size=1, max_size=64))
    return bytes(data)


def _check(data: bytes, loader: str = "libbpf") -> None:
    try:
        spec = parse_object(data, path="fuzz.o", loader=loader)
    except ParseError:
        return
    assert isinstance(spec, ObjectSpec)


@settings(max_examples=400, deadline=timedelta(seconds=1),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated())
def test_mutated_fixtures(data):
    _check(data)


@settings(max_examples=200, deadline=timedelta(seconds=1))
@given(st.binary(max_size=2048))
def test_arbitrary_bytes(data):
    _check(data)


@settings(max_examples=200, deadline=timedelta(seconds=1))
@given(st.binary(max_size=512))
def test_elf_header_prefix(data):
    _check(b"\x7fELF\x02\x01\x01\x00" + bytes(8) + b"\x01\x00\xf7\x00" + data)


@settings(max_examples=300, deadline=timedelta(seconds=1),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated(), st.sampled_from(["cilium-ebpf", "cilium-ebpf@0.9", "auto"]))
def test_mutated_fixtures_other_loaders(data, loader):
    _check(data, loader)
