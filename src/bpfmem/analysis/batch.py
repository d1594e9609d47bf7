"""``bpfmem estimate --batch``: one map spec per line in, one estimate per line out, in order.

The caller decodes the lines (:func:`bpfmem.parse.jsonlines.parse_json_lines`) and turns the
results into text (capacity plans repeat shapes: the api makes a line's text once per
distinct spec); this only checks each spec, estimates it and keeps order."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable, Iterator

from ..model.estimate import Footprint, estimate
from ..model.kernel import KernelProfile
from ..model.shape import MapShape
from ..uapi import MapType, parse_flags

MEMO = 1 << 16
_U32 = 0xFFFFFFFF
# the keys a spec line may have: the map's attributes, entries present, the line's possible
# CPUs, and a label for the caller's own use; anything else is a typo, refused on its line
KEYS = ("type", "key_size", "value_size", "max_entries", "map_flags", "map_extra", "entries",
        "cpus", "name")


def _check_u32(name: str, val: Any) -> None:
    if isinstance(val, bool) or not isinstance(val, int) or not 0 <= val <= _U32:
        raise ValueError(f"{name} must be an integer in 0..2^32-1, not {val!r:.40}")


def batch_shape(key: tuple, type_ids: dict[str, int]) -> tuple[MapShape, int]:
    """The shape and entries of a spec key (see :func:`batch_results`); ValueError names the
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


@dataclass(frozen=True, slots=True)
class BatchError:
    """A line that is no valid spec: its number and what is wrong."""
    line: int
    message: str


def batch_results(decoded: Iterable[tuple[int, Any]], profile: KernelProfile
                  ) -> Iterator[tuple[tuple | None, Footprint | BatchError]]:
    """Per decoded line (``(line number, spec dict or the exception decoding it raised)``),
    in order: ``(spec key, its Footprint on profile)``, or ``(None, BatchError)`` for a
    line that is no valid spec. Capacity plans repeat shapes: a spec is checked and
    estimated once (up to :data:`MEMO` distinct ones), and equal specs have equal keys (a
    caller that turns results into text can make it once per key)."""
    type_ids: dict[str, int] = {}
    done: dict[tuple, Footprint] = {}
    for lineno, d in decoded:
        try:
            if isinstance(d, Exception):
                raise d
            if not isinstance(d, dict):
                raise ValueError("expected a JSON object (a map spec)")
            unknown = [k for k in d if k not in KEYS]
            if unknown:
                raise ValueError(f"unknown key{'s' if len(unknown) > 1 else ''} "
                                 f"{', '.join(map(repr, unknown[:5]))} (a spec takes "
                                 f"{', '.join(KEYS)})")
            if "type" not in d:
                raise ValueError("missing 'type' (hash, lru_hash, percpu_array, ...)")
            cpus = d.get("cpus")
            if cpus is not None and (isinstance(cpus, bool) or not isinstance(cpus, int)
                                     or not 1 <= cpus <= 1 << 16):
                raise ValueError(f"cpus must be a CPU count in 1..65536, not {cpus!r:.40}")
            key = (d["type"], d.get("key_size", 0), d.get("value_size", 0),
                   d.get("max_entries", 0), d.get("map_flags", 0) or 0,
                   d.get("map_extra", 0) or 0, d.get("entries", 0) or 0, cpus)
            fp = done.get(key)
            if fp is None:
                shape, entries = batch_shape(key[:7], type_ids)
                prof = profile if cpus is None else replace(profile, possible_cpus=cpus)
                fp = estimate(shape, prof, entries)
                if len(done) < MEMO:
                    done[key] = fp
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            what = f"missing {e}" if isinstance(e, KeyError) else str(e)
            yield None, BatchError(lineno, f"line {lineno}: {what}")
            continue
        yield key, fp
