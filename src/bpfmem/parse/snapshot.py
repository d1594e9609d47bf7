"""The node's input documents, decoded: a saved ``bpfmem snapshot`` (schema
``bpfmem/snapshot/v1``) and the output of ``bpftool -j map show`` become a
:class:`~bpfmem.records.Snapshot` of :class:`~bpfmem.records.LiveMap` records; an occupancy file
(``{map name: entries}``, or a snapshot) becomes ``{map name: entries}``.

Pure: every function takes the decoded JSON value (or the first bytes of a file, as text) and
raises ValueError naming the field that is missing or of the wrong type
(``maps[3].key_size``). Reading the files is :mod:`bpfmem.inputs`' job.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from ..inputs import Fields
from ..records import LiveMap, Owner, ProgRef, Snapshot
from ..uapi import MapType, ProgType

__all__ = ["snapshot_from_dict", "snapshot_from_bpftool", "occupancy_from",
           "looks_like_snapshot", "SNAPSHOT_SCHEMA_PREFIX"]

SNAPSHOT_SCHEMA_PREFIX = "bpfmem/snapshot/"


def _type_id(f: Fields, key: str) -> int:
    value = f.value.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"{f._name(key)}: expected a map type name or number, not "
                         f"{value!r:.40}")
    try:
        return int(MapType.from_name(value))
    except ValueError:
        raise ValueError(f"{f._name(key)}: unknown map type {value!r:.40}") from None


def _prog_type_id(value: Any) -> int:
    try:
        return value if isinstance(value, int) else int(ProgType.from_name(str(value)))
    except (KeyError, ValueError, TypeError):
        return 0


U32 = 32


def snapshot_from_dict(doc: Any) -> Snapshot:
    """A :class:`Snapshot` from a ``bpfmem/snapshot/v1`` document (as written by snapshot).
    ValueError names the field that is missing or of the wrong type (``maps[3].key_size``)."""
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith(
            SNAPSHOT_SCHEMA_PREFIX):
        raise ValueError("not a bpfmem snapshot (no \"schema\": \"bpfmem/snapshot/v1\")")
    d = Fields(doc)
    maps = []
    for r in d.objects("maps"):
        owners = tuple(Owner(o.uint("pid", bits=U32), o.text("comm", ""),
                             o.text("cgroup", None), o.uint("fds", 1, U32))
                       for o in r.objects("owners"))
        programs = tuple(ProgRef(p.uint("id", bits=U32), p.text("name", ""),
                                 _prog_type_id(p.value.get("type")))
                         for p in r.objects("programs"))
        maps.append(LiveMap(
            id=r.uint("id", bits=U32), name=r.text("name", ""),
            type=(r.uint("type_id", bits=U32) if r.has("type_id") else _type_id(r, "type")),
            key_size=r.uint("key_size", bits=U32), value_size=r.uint("value_size", bits=U32),
            max_entries=r.uint("max_entries", bits=U32),
            map_flags=r.uint("map_flags", 0, U32), map_extra=r.uint("map_extra", 0),
            btf_id=r.uint("btf_id", 0, U32), memlock=r.uint("memlock", None),
            frozen=r.flag("frozen", None), owners=owners, programs=programs,
            pins=tuple(r.texts("pins")), entries=r.uint("entries", None, U32),
            entries_complete=r.flag("entries_complete", None),
            entries_method=r.text("entries_method", None)))
    host = d.object("host")
    taken = d.text("taken_at", None)
    try:
        t = _dt.datetime.fromisoformat(taken).timestamp() if taken else 0.0
    except ValueError:
        raise ValueError(f"taken_at: not an ISO 8601 time: {taken!r:.40}") from None
    return Snapshot(taken_at=t, duration=d.number("duration_s", 0.0),
                    hostname=host.text("hostname", ""), kernel=host.text("kernel", ""),
                    possible_cpus=host.uint("possible_cpus", 0, 32), maps=tuple(maps),
                    entries_counted=bool(d.flag("entries_counted", False)),
                    skipped=d.uint("skipped", 0), errors=tuple(d.texts("errors")),
                    bpffs=tuple(d.texts("bpffs")),
                    owners_from=d.text("owners_from", ""))


def _bpftool_frozen(r: Fields) -> bool | None:
    """bpftool prints ``"frozen": 1`` (older builds: true); absent when not frozen."""
    v = r.value.get("frozen")
    if v is None or isinstance(v, bool):
        return v
    return bool(r.uint("frozen", bits=8))


def snapshot_from_bpftool(data: Any, *, kernel: str = "", cpus: int = 0) -> Snapshot:
    """A :class:`Snapshot` from the output of ``bpftool -j map show`` (``-f`` adds pins;
    builds with the pid iterator add ``pids``). bpftool reports neither cgroups nor entries.
    ValueError names the field that is missing or of the wrong type."""
    if not isinstance(data, list):
        raise ValueError("expected the JSON list that `bpftool -j map show` prints")
    maps = []
    for i, raw in enumerate(data):
        r = Fields(raw, f"bpftool map #{i}")
        pids = sorted(r.objects("pids"), key=lambda p: p.uint("pid", bits=U32))
        maps.append(LiveMap(
            id=r.uint("id", bits=U32), name=r.text("name", ""), type=_type_id(r, "type"),
            key_size=r.uint("bytes_key", 0, U32), value_size=r.uint("bytes_value", 0, U32),
            max_entries=r.uint("max_entries", 0, U32), map_flags=r.uint("flags", 0, U32),
            map_extra=r.uint("map_extra", 0), btf_id=r.uint("btf_id", 0, U32),
            memlock=r.uint("bytes_memlock", None),
            frozen=_bpftool_frozen(r),
            owners=tuple(Owner(p.uint("pid", bits=U32), p.text("comm", ""), None)
                         for p in pids),
            pins=tuple(r.texts("pinned"))))
    return Snapshot(taken_at=0.0, duration=0.0, hostname="", kernel=kernel, possible_cpus=cpus,
                    maps=tuple(maps), entries_counted=False)


def looks_like_snapshot(head: str) -> bool:
    """Whether the first bytes of a .json file (as text) are a saved ``bpfmem snapshot`` or
    ``bpftool -j map show`` output (a JSON list)."""
    head = head.lstrip()
    return head.startswith("[") or SNAPSHOT_SCHEMA_PREFIX in head


def occupancy_from(data: Any) -> dict[str, int]:
    """``{map name: entries}`` from a decoded occupancy file: that mapping itself, or a bpfmem
    snapshot's maps with their entry counts (a name seen on several maps, one per pod...:
    the fullest). ValueError names the field that is wrong."""
    if isinstance(data, dict) and str(data.get("schema", "")).startswith("bpfmem/snapshot"):
        peaks: dict[str, int] = {}
        for m in Fields(data).objects("maps"):
            n = m.uint("entries", None, 32)
            if n is not None:
                name = m.text("name")
                peaks[name] = max(peaks.get(name, 0), n)
        return peaks
    if not isinstance(data, dict):
        raise ValueError("expected {\"map name\": entries, ...}")
    for k, v in data.items():
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << 32:
            raise ValueError(f"{k}: expected entries as an integer in 0..2^32-1, "
                             f"not {v!r:.40}")
    return data
