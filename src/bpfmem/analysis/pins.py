"""The one pinned-map rule: may a loader reuse a map already pinned, or must it recreate it
(losing its state, charging a new map)? ``diff`` asks it of OLD's and NEW's specs, ``pod``
of NEW's spec and a live pinned map."""

from __future__ import annotations

# libbpf's map_is_reuse_compat(): a pinned map is reused only when all six match the spec
REUSE_ATTRS = ("type", "key_size", "value_size", "max_entries", "map_flags", "map_extra")


def _attrs(m) -> tuple:
    """The six attributes of a spec or a live map (a live map names its type: the spec's
    number is named the same way, libbpf's name)."""
    from ..uapi import map_type_name
    kind = m.type if isinstance(m.type, str) else map_type_name(int(m.type))
    return (kind, m.key_size, m.value_size, m.max_entries, m.map_flags or 0,
            getattr(m, "map_extra", 0) or 0)


def reusable(pinned, new) -> bool:
    """Whether a loader opening ``new`` (a MapSpec) reuses the map ``pinned`` (a MapSpec, or a
    live map with the same attribute names): libbpf's six attributes all equal."""
    return _attrs(pinned) == _attrs(new)


def differing(pinned, new) -> tuple[str, ...]:
    """The attributes that keep ``new`` from reusing ``pinned`` (empty: reusable)."""
    return tuple(name for name, a, b in zip(REUSE_ATTRS, _attrs(pinned), _attrs(new))
                 if a != b)
