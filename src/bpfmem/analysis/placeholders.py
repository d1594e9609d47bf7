"""Sizes that look like placeholders: agents such as NetObserv declare a map with a huge
``max_entries`` (16,777,216) and set the real size at load (libbpf's
``bpf_map__set_max_entries``, cilium/ebpf's ``MapSpec.MaxEntries``); priced as declared,
such a map costs gigabytes it never will."""

from __future__ import annotations

from ..uapi import MapType
from .hints import RESIZE, Hinted

PLACEHOLDER_MIN = 1 << 24          # 16,777,216 entries
# sized in bytes or pages, not entries: large values are real
_NOT_ENTRIES = frozenset({MapType.RINGBUF, MapType.USER_RINGBUF, MapType.ARENA})


def placeholder_note(spec) -> str | None:
    """A note for a map whose ``max_entries`` looks like a placeholder, pointing at pricing
    it at its real size (a :class:`~.hints.Hinted` note); None otherwise."""
    if spec.type in _NOT_ENTRIES or spec.max_entries_set_at_load:
        return None
    if spec.max_entries < PLACEHOLDER_MIN:
        return None
    return Hinted(f"max_entries {spec.max_entries:,} looks like a placeholder the agent "
                  "resizes at load; if it does, price the real size", RESIZE, spec.name)
