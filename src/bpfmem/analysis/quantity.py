"""Sizes as people write them: Kubernetes quantities (128Mi, 1.5Gi, 500M) and plain bytes."""

from __future__ import annotations

import re

_UNITS = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
          "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}
_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKMGT]i?)?[bB]?\s*$")


def parse_size(text: str | int | float) -> int:
    """Bytes in ``text``: '128Mi' (MiB), '128M' (10^6), '1.5Gi', '4096'. ValueError otherwise."""
    if isinstance(text, bool):
        raise ValueError(f"not a size: {text!r}")
    if isinstance(text, (int, float)):
        if text < 0:
            raise ValueError(f"negative size: {text}")
        return int(text)
    m = _RE.match(text)
    if not m:
        raise ValueError(f"not a size: {text!r} (use e.g. 128Mi, 1Gi, 500M or bytes)")
    number, unit = m.group(1), m.group(2) or ""
    return int(float(number) * _UNITS[unit])


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
