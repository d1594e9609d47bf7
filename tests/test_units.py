"""One unit style in, one out (src/bpfmem/units.py): every string a formatter prints is read
back by the parser, to within the precision it was printed with, and printing what was read
gives the same string again. Kubernetes' meaning of the suffixes: M is 10^6, Mi is 2^20."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings, strategies as st

from bpfmem.units import (BINARY, format_bytes, format_delta, format_gomemlimit, format_size,
                          parse_gomemlimit, parse_size)

# every unit boundary and its neighbours (up to u64, what a kernel size can be), round
# figures, the values of the seed case
EDGES = sorted({v + d for u in (1, *BINARY.values()) for k in (1, 9.99, 99.9, 99.95, 100, 1023.5)
                for v in (int(u * k),) for d in (-1, 0, 1) if 0 <= v + d < 1 << 64}
               | {0, 1, 999, 62488136, 37014528, 71386504, 134217728, 53687091, 1056768})
_PRINTED = re.compile(r"^(?P<n>\d+(?:\.\d)?)(?P<unit>Ki|Mi|Gi|Ti|Pi|Ei)?$")


def _step(text: str) -> float:
    """Half of the last printed digit, in bytes: how far the figure may be from the truth."""
    m = _PRINTED.match(text.lstrip("+-"))
    assert m, text
    unit = BINARY.get(m.group("unit") or "", 1)
    return 0.5 * unit * (0.1 if "." in m.group("n") else 1) if m.group("unit") else 0


def _check_size(n: int) -> None:
    text = format_size(n)
    m = _PRINTED.match(text)
    assert m, (n, text)                                   # one style: 59.6Mi, 128Mi, 900
    number = m.group("n")
    assert not number.endswith(".0"), text                # no trailing .0
    if "." in number:
        assert float(number) < 100, text                  # one decimal only below 100
    if m.group("unit") is None:
        assert n < 1024 and text == str(n)                # bytes are exact
    back = parse_size(text)
    assert abs(back - n) <= _step(text) + 1, (n, text, back)   # +1: int() of the product
    assert format_size(back) == text, (n, text, back)           # printing it again: same


@pytest.mark.parametrize("n", EDGES)
def test_size_round_trip_edges(n):
    _check_size(n)


@settings(max_examples=1000, deadline=None)
@given(st.one_of(st.integers(0, 1 << 20), st.integers(0, 1 << 40), st.integers(0, 1 << 62)))
def test_size_round_trip(n):
    _check_size(n)


@settings(max_examples=500, deadline=None)
@given(st.integers(-(1 << 50), 1 << 50))
def test_delta_and_exact_bytes_round_trip(n):
    d = format_delta(n)
    assert d == "0" if n == 0 else d[0] == ("+" if n > 0 else "-"), d
    back = parse_size(d, signed=True)
    assert abs(back - n) <= _step(d) + 1 and format_delta(back) == d, (n, d, back)
    assert parse_size(format_bytes(n, signed=True), signed=True) == n
    if n >= 0:
        assert parse_size(format_bytes(n)) == n and format_bytes(n) == str(n)


@settings(max_examples=1000, deadline=None)
@given(st.integers(0, 1 << 45))
def test_gomemlimit_is_exact_and_go_shaped(n):
    text = format_gomemlimit(n)
    assert re.fullmatch(r"\d+(B|KiB|MiB|GiB|TiB)", text), text  # Go takes whole numbers only
    assert parse_gomemlimit(text) == n


def test_the_style_users_paste_back():
    assert [format_size(v) for v in (62495129, 128 << 20, 2 << 30, 512 << 10, 900, None)] == \
        ["59.6Mi", "128Mi", "2Gi", "512Ki", "900", "?"]
    assert format_delta(int(24.3 * (1 << 20))) == "+24.3Mi"
    assert format_delta(-int(1.2 * (1 << 20))) == "-1.2Mi" and format_delta(0) == "0"
    assert format_size((1 << 20) - 300) == "1Mi"           # 1023.7Ki reads as 1Mi
    assert format_gomemlimit(512 << 20) == "512MiB" and format_gomemlimit(1536 << 20) == "1536MiB"


def test_kubernetes_semantics_and_hints():
    assert parse_size("500M") == 500 * 10**6 and parse_size("500Mi") == 500 << 20
    assert parse_size("1.5Gi") == 3 << 29 and parse_size("64k") == 64000
    assert parse_size("1e9") == 10**9 and parse_size("4096") == 4096
    assert parse_size("+24.3Mi") == int(24.3 * (1 << 20))
    for bad, hint in (("500MB", "write 500Mi (524,288,000 bytes) or 500M (500,000,000 bytes)"),
                      ("500mb", "write 500Mi"), ("500 Mi", "no space")):
        with pytest.raises(ValueError, match=re.escape(hint)):
            parse_size(bad)
    for negative in ("-1.2Mi", "-5", -5):
        with pytest.raises(ValueError, match="negative size"):
            parse_size(negative)
    assert parse_size("-1.2Mi", signed=True) == -int(1.2 * (1 << 20))


@pytest.mark.parametrize("text", ["128Mi", "1Gi", "+4096", "-3k", "0", "007Ki", "999999Ei",
                                  "100000000000000000000", "1000000000000000000000", "-0"])
def test_whole_numbers_parse_as_decimal_does(text):
    """A whole number of a unit is parsed without Decimal: the same bytes (or the same
    refusal) as the Decimal path, which a fraction still takes."""
    from decimal import Decimal
    from bpfmem import units
    m = re.match(units._QUANTITY, text)
    suffix = m.group("suffix") or ""
    n = Decimal(m.group("number"))
    mult = units.BINARY.get(suffix) or units.DECIMAL[suffix]
    want = None if n.adjusted() > 20 or abs(int(n * mult)) >= 1 << 64 else int(n * mult)
    try:
        got = units.parse_size(text, signed=True)
    except ValueError:
        got = None
    assert got == want
    frac = m.group("number") + ".0" + suffix       # the same size, through Decimal
    try:
        slow = units.parse_size(frac, signed=True)
    except ValueError:
        slow = None
    assert slow == got
