"""``bpfmem estimate --batch``: one map spec per line in, one estimate per line out, in order.

Capacity plans repeat shapes, so a line's text is made once per distinct spec (up to
:data:`MEMO` of them) and written again for every repeat. The caller decodes the lines
(:func:`bpfmem.parse.jsonlines.parse_json_lines`) and says how a result and an error become
text; this loop only checks each spec, estimates it and keeps order."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from ..model.estimate import Footprint, estimate
from ..model.kernel import KernelProfile
from ..model.shape import MapShape
from ..uapi import MapType, parse_flags

MEMO = 1 << 16
_U32 = 0xFFFFFFFF


def _check_u32(name: str, val: Any) -> None:
    if isinstance(val, bool) or not isinstance(val, int) or not 0 <= val <= _U32:
        raise ValueError(f"{name} must be an integer in 0..2^32-1, not {val!r:.40}")


def batch_shape(key: tuple, type_ids: dict[str, int]) -> tuple[MapShape, int]:
    """The shape and entries of a spec key (see :func:`run_batch`); ValueError names the
    field that is wrong. ``type_ids`` caches map type names already looked up."""
    t, k, v, m, flags, extra, entries = key
    if t not in type_ids:
        type_ids[t] = int(MapType.from_name(t))
    if isinstance(flags, str):
        flags = parse_flags(flags)
    for name, val in (("key_size", k), ("value_size", v), ("max_entries", m),
                      ("map_flags", flags), ("entries", entries)):
        _check_u32(name, val)
    if isinstance(extra, bool) or not isinstance(extra, int) or not 0 <= extra < 1 << 64:
        raise ValueError(f"map_extra must be an integer in 0..2^64-1, not {extra!r:.40}")
    return MapShape(type_ids[t], k, v, m, flags, extra), entries


def run_batch(decoded: Iterable[tuple[int, Any]], profile: KernelProfile, write: Callable[[str], Any],
              *, result_text: Callable[[Footprint], str],
              error_text: Callable[[int, str], str]) -> int:
    """Estimate each decoded line (``(line number, spec dict or the exception decoding it
    raised)``) on ``profile`` and ``write`` its text, in order: ``result_text(footprint)``,
    or ``error_text(line number, message)`` for a line that is no valid spec. Returns the
    exit status: 1 when any line was bad, else 0."""
    type_ids: dict[str, int] = {}
    done: dict[tuple, str] = {}
    status = 0
    for lineno, d in decoded:
        try:
            if isinstance(d, Exception):
                raise d
            key = (d["type"], d.get("key_size", 0), d.get("value_size", 0),
                   d.get("max_entries", 0), d.get("map_flags", 0) or 0,
                   d.get("map_extra", 0) or 0, d.get("entries", 0) or 0)
            text = done.get(key)
            if text is None:
                shape, entries = batch_shape(key, type_ids)
                text = result_text(estimate(shape, profile, entries))
                if len(done) < MEMO:
                    done[key] = text
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            status = 1
            text = error_text(lineno, f"line {lineno}: {e.__class__.__name__}: {e}")
        write(text)
    return status
