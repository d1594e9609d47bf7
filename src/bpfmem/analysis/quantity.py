"""Sizes as Kubernetes writes them (resource.Quantity): ``128Mi``, ``1.5Gi``, ``500M``,
``64k``, ``1e9`` or plain bytes, one grammar for every size bpfmem reads.

Kubernetes' suffixes: binary ``Ki Mi Gi Ti Pi Ei`` (powers of 1024), decimal ``k M G T P E``
(powers of 1000; the kilo is a lower-case ``k``), or a decimal exponent (``e6``/``E6``).
What Kubernetes rejects is rejected here too, with what was probably meant: ``128K``,
``128MB``, ``128MiB``, ``1GB``... are not quantities (``kubectl`` refuses them), and ``m``
is milli, not mega."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

BINARY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50,
          "Ei": 1 << 60}
DECIMAL = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}

_NUMBER = r"(?P<number>\+?(?:\d+(?:\.\d*)?|\.\d+))"
_QUANTITY = re.compile(rf"^{_NUMBER}(?:(?P<suffix>[KMGTPE]i|[kMGTPE])|[eE](?P<exp>[+-]?\d+))?$")
_LOOSE = re.compile(rf"^{_NUMBER}(?P<space>\s*)(?P<unit>[A-Za-z]+)$")


_SIZE_UNIT = re.compile(r"^(?P<letter>[kKmMgGtTpPeE])(?P<i>i?)(?P<b>[bB]?)$")


def _hint(number: str, unit: str, spaced: bool) -> str:
    """What a size with a unit Kubernetes does not know probably meant."""
    u = _SIZE_UNIT.match(unit)
    if u is None:
        return "use e.g. 128Mi, 1Gi, 500M or bytes"
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


def parse_size(text: str | int | float) -> int:
    """Bytes in ``text``, a Kubernetes quantity: '128Mi' (2^20), '128M' (10^6), '1.5Gi',
    '64k', '1e9', '4096'. ValueError, with what was probably meant, otherwise."""
    if isinstance(text, bool):
        raise ValueError(f"not a size: {text!r}")
    if isinstance(text, (int, float)):
        if text < 0:
            raise ValueError(f"negative size: {text}")
        return int(text)
    s = text.strip()
    m = _QUANTITY.match(s)
    if m:
        try:
            n = Decimal(m.group("number"))
        except InvalidOperation:
            raise ValueError(f"not a size: {text!r}") from None
        if m.group("exp") is not None:
            return int(n.scaleb(int(m.group("exp"))))
        suffix = m.group("suffix") or ""
        return int(n * (BINARY.get(suffix) or DECIMAL[suffix]))
    if s.startswith("-"):
        raise ValueError(f"negative size: {text!r}")
    loose = _LOOSE.match(s)
    if loose:
        what = "a byte size" if loose.group("unit") == "m" else "a Kubernetes quantity"
        raise ValueError(f"not {what}: {text!r}; "
                         f"{_hint(loose.group('number'), loose.group('unit'), bool(loose.group('space')))}")
    raise ValueError(f"not a size: {text!r} (use e.g. 128Mi, 1Gi, 500M or bytes)")


def format_size(n: int | None) -> str:
    """1.5 MiB style, for people."""
    if n is None:
        return "?"
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{sign}{n / size:.1f} {unit}"
    return f"{sign}{n} B"


def format_quantity(n: int | None) -> str:
    """Kubernetes-quantity style (612Mi, 1.5Gi, 310Ki, 512): what parse_size reads back."""
    if n is None:
        return "?"
    sign, n = ("-", -n) if n < 0 else ("", n)
    for unit, size in (("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if n >= size:
            x = n / size
            return sign + (f"{x:.0f}{unit}" if x >= 100 or x == int(x) else f"{x:.1f}{unit}")
    return f"{sign}{n}"
