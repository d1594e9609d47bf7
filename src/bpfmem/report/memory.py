"""Memory figures in report tables."""

from __future__ import annotations


def mib(n: int | None) -> str:
    return "?" if n is None else f"{n / (1 << 20):,.2f}"
