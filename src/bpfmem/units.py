"""Sizes in and out: one parser and one formatter, in the style Kubernetes writes quantities
(resource.Quantity), so what bpfmem prints can be pasted back into ``--limit``, a
``bpfmem.toml`` or a pod spec.

Reading (``parse_size``): binary suffixes ``Ki Mi Gi Ti Pi Ei`` (powers of 1024), decimal
``k M G T P E`` (powers of 1000; the kilo is a lower-case ``k``), a decimal exponent
(``1e9``), or plain bytes. ``M`` is 10^6 and ``Mi`` 2^20, as in Kubernetes. What Kubernetes
rejects is rejected here too, with what was probably meant: ``128K``, ``128MB``, ``128MiB``,
``1GB``... are not quantities (``kubectl`` refuses them), and ``m`` is milli, not mega.

Writing, for people (tables, markdown, html labels, progress, messages):
- ``format_size``: ``59.6Mi``, ``128Mi``, ``2Gi``, ``512Ki``, ``900``. The rule: the largest
  binary unit the size reaches; one decimal below 100 of that unit, none from 100 on; a
  trailing ``.0`` is dropped; under 1Ki the bytes themselves. So a printed size is within
  0.05 of its unit (0.5 from 100 on) of the true one, and parsing it and printing it again
  gives the same text.
- ``format_delta``: the same with a sign, ``+24.3Mi``, ``-1.2Mi``, ``0``.
- ``format_bytes``: exact bytes as a plain integer (``1056768``), where exactness is the point
  (a map's memlock beside fdinfo's, a charge beside its tolerance); ``signed=True`` for deltas.
- ``in_mi``: bytes as a float of Mi, for charts whose axis says Mi.
- ``format_gomemlimit`` / ``parse_gomemlimit``: Go's own spelling (``512MiB``), only for
  GOMEMLIMIT values, which the Go runtime parses, not Kubernetes (it takes a whole number
  and ``B KiB MiB GiB TiB``).
JSON documents carry bytes as integers and never go through these.

Every string a ``format_*`` here prints (but ``?`` for unknown) is read back by
``parse_size`` (``signed=True`` for deltas), or for Go's spelling by ``parse_gomemlimit``."""

from __future__ import annotations

import re

__all__ = ["BINARY", "DECIMAL", "parse_size", "format_size", "format_delta", "format_bytes",
           "in_mi", "format_gomemlimit", "parse_gomemlimit"]

BINARY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50,
          "Ei": 1 << 60}
DECIMAL = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}

_NUMBER = r"(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
# patterns compiled when first used (re keeps them): compiling one costs about 1 M
# instructions, and a start-up only needs the first, if any
_QUANTITY = rf"^{_NUMBER}(?:(?P<suffix>[KMGTPE]i|[kMGTPE])|[eE](?P<exp>[+-]?\d+))?$"
_LOOSE = rf"^{_NUMBER}(?P<space>\s*)(?P<unit>[A-Za-z]+)$"
_SIZE_UNIT = r"^(?P<letter>[kKmMgGtTpPeE])(?P<i>i?)(?P<b>[bB]?)$"
_EXAMPLES = "use e.g. 128Mi, 1Gi, 500M or bytes"


def _hint(number: str, unit: str, spaced: bool) -> str:
    """What a size with a unit Kubernetes does not know probably meant."""
    from decimal import Decimal

    u = re.match(_SIZE_UNIT, unit)
    if u is None:
        return _EXAMPLES
    letter = u.group("letter").upper()
    binary, decimal = f"{letter}i", "k" if letter == "K" else letter
    b = int(Decimal(number) * BINARY[binary])
    d = int(Decimal(number) * DECIMAL[decimal])
    if spaced and unit in (binary, decimal):
        why = "no space between the number and the unit"
    elif unit == "m":
        why = "'m' is milli in Kubernetes"
    else:
        why = f"Kubernetes has no {unit!r}"
    return f"{why}: write {number}{binary} ({b:,} bytes) or {number}{decimal} ({d:,} bytes)"


def parse_size(text: str | int | float, *, signed: bool = False) -> int:
    """Bytes in ``text``, a Kubernetes quantity: '128Mi' (2^20), '128M' (10^6), '1.5Gi',
    '64k', '1e9', '4096'. A negative size is refused unless ``signed`` (a delta such as
    '-1.2Mi'). ValueError, with what was probably meant, otherwise."""
    if isinstance(text, bool):
        raise ValueError(f"not a size: {text!r}")
    if isinstance(text, (int, float)):
        if text != text or text in (float("inf"), float("-inf")):
            raise ValueError(f"not a size: {text!r}")
        if text < 0 and not signed:
            raise ValueError(f"negative size: {text}")
        return _bounded(int(text), text)
    s = text.strip()
    m = re.match(_QUANTITY, s)
    if m and m.group("exp") is None and m.group("number").lstrip("+-").isdigit():
        # a whole number of a unit (the usual '128Mi', '1Gi', '4096'): exact without Decimal
        if s.startswith("-") and not signed:
            raise ValueError(f"negative size: {text!r}")
        n = int(m.group("number"))
        if abs(n) >= 10 ** 21:
            raise ValueError(f"{text.strip()[:40]!r} is more than a size can be (16Ei)")
        suffix = m.group("suffix") or ""
        return _bounded(n * (BINARY.get(suffix) or DECIMAL[suffix]), text)
    from decimal import Decimal, InvalidOperation   # a fraction or an exponent needs Decimal

    if m:
        if s.startswith("-") and not signed:
            raise ValueError(f"negative size: {text!r}")
        try:
            n = Decimal(m.group("number"))
        except InvalidOperation:
            raise ValueError(f"not a size: {text!r}") from None
        if not n.is_finite():
            raise ValueError(f"not a size: {text!r}")
        if m.group("exp") is not None:
            e = m.group("exp")
            exp = int(e) if len(e) <= 7 else (-1 if e.startswith("-") else 1) * 10 ** 6
            if n and n.adjusted() + exp > 20:          # past 2^64 whatever the digits
                raise ValueError(f"{text.strip()[:40]!r} is more than a size can be (16Ei)")
            return _bounded(int(n.scaleb(exp)), text)
        suffix = m.group("suffix") or ""
        if n and n.adjusted() > 20:
            raise ValueError(f"{text.strip()[:40]!r} is more than a size can be (16Ei)")
        return _bounded(int(n * (BINARY.get(suffix) or DECIMAL[suffix])), text)
    if s.startswith("-") and not signed:
        raise ValueError(f"negative size: {text!r}")
    loose = re.match(_LOOSE, s)
    if loose:
        what = "a byte size" if loose.group("unit") == "m" else "a Kubernetes quantity"
        number = loose.group("number")
        raise ValueError(f"not {what}: {text!r}; "
                         f"{_hint(number, loose.group('unit'), bool(loose.group('space')))}")
    raise ValueError(f"not a size: {text!r} ({_EXAMPLES})")


def _bounded(n: int, text) -> int:
    """``n``, a size in bytes, when it fits the kernel's u64; ValueError past it."""
    if abs(n) >= 1 << 64:
        shown = str(text).strip()[:40]
        raise ValueError(f"{shown!r} is more than a size can be (16Ei)")
    return n


_UNITS = tuple(reversed(BINARY.items()))   # Ei first


def _magnitude(n: int, units: tuple[tuple[str, int], ...]) -> str:
    """``n`` >= 0 by the one rule (see the module): largest unit reached, one decimal below 100,
    none from 100 on, no trailing .0; bytes under the smallest unit."""
    for i, (unit, size) in enumerate(units):
        if n >= size:
            x = n / size
            text = f"{x:.1f}" if x < 99.95 else f"{x:.0f}"
            if text == "1024" and i > 0:            # 1023.7Ki reads better as 1Mi
                unit = units[i - 1][0]
                text = "1"
            return text[:-2] + unit if text.endswith(".0") else text + unit
    return str(int(n))


def format_size(n: int | None) -> str:
    """A size for people, as Kubernetes writes it: ``59.6Mi``, ``128Mi``, ``2Gi``, ``900``;
    ``?`` when unknown. Negative sizes keep their sign."""
    if n is None:
        return "?"
    return ("-" + _magnitude(-n, _UNITS)) if n < 0 else _magnitude(n, _UNITS)


def format_delta(n: int | None) -> str:
    """A change in size: ``+24.3Mi``, ``-1.2Mi``, ``0``; ``?`` when unknown."""
    if n is None:
        return "?"
    return "0" if n == 0 else ("+" if n > 0 else "") + format_size(n)


def format_bytes(n: int | None, *, signed: bool = False) -> str:
    """Exact bytes as a plain integer (``1056768``; ``+4096`` with ``signed``), where the exact
    figure is the point; ``?`` when unknown."""
    if n is None:
        return "?"
    return f"{n:+d}" if signed and n else str(n)


def in_mi(n: int | float | None) -> float | None:
    """``n`` bytes in Mi (2^20), for a chart's axis (the axis is titled in Mi); None stays."""
    return None if n is None else n / BINARY["Mi"]


_GO_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_GO_SIZE = r"^\s*(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|TiB)?\s*$"


def parse_gomemlimit(text: str) -> int | None:
    """A GOMEMLIMIT value as the Go runtime reads it (``512MiB``, ``1GiB``, ``1.5GiB``, bytes)
    as bytes; None when it is not one."""
    m = re.match(_GO_SIZE, text)
    if not m or len(m.group(1)) > 40:
        return None
    n = float(m.group(1)) * _GO_UNITS[m.group(2) or "B"]
    return int(n) if n < 1 << 63 else None     # past int64 the runtime refuses it


def format_gomemlimit(n: int) -> str:
    """A size as GOMEMLIMIT spells it, to paste back into it: the largest of Go's units that
    holds it exactly (``512MiB``, ``1536MiB``, ``100B``). The Go runtime takes only a whole
    number before the unit, so this is exact, not rounded."""
    for unit, size in reversed(_GO_UNITS.items()):
        if n and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 map``, ``2 maps``, ``0 maps`` (``plural`` for nouns that do not take an s)."""
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"


def format_share(f: float | None) -> str:
    """A share of a whole, one way everywhere: whole percent (``26%``), one decimal below 1%
    (``0.4%``), ``<0.1%`` for less that is not nothing; ``?`` when unknown."""
    if f is None:
        return "?"
    p = f * 100
    if p == 0:
        return "0%"
    if abs(p) >= 1:
        return f"{p:.0f}%"
    return f"{p:.1f}%" if abs(p) >= 0.1 else ("<0.1%" if p > 0 else ">-0.1%")
