"""The node's input documents, decoded: a saved ``bpfmem snapshot`` (schema
``bpfmem/snapshot/v2``, or the older ``v1``) and the output of ``bpftool -j map show`` become a
:class:`~bpfmem.records.Snapshot` of :class:`~bpfmem.records.LiveMap` records; an occupancy file
(``{map name: entries}``, or a snapshot) becomes ``{map name: entries}``.

Pure: every function takes the decoded JSON value (or the first bytes of a file, as text) and
raises ValueError naming the field that is missing or of the wrong type
(``maps[3].key_size``). Reading the files is :mod:`bpfmem.inputs`' job.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from .document import Fields
from ..records import JitMemory, LiveBtf, LiveMap, LiveProg, Owner, ProgRef, Snapshot
from ..uapi import MapType, ProgType

__all__ = ["snapshot_from_dict", "snapshot_from_bpftool", "occupancy_from",
           "looks_like_snapshot", "SNAPSHOT_SCHEMA_PREFIX", "SNAPSHOT_VERSIONS"]

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


SNAPSHOT_VERSIONS = ("v1", "v2")


def _version(doc: Any) -> str:
    """``v1`` or ``v2`` of a snapshot document; ValueError for anything else."""
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if not isinstance(schema, str) or not schema.startswith(SNAPSHOT_SCHEMA_PREFIX):
        raise ValueError("not a bpfmem snapshot (no \"schema\": \"bpfmem/snapshot/v2\")")
    version = schema[len(SNAPSHOT_SCHEMA_PREFIX):]
    if version not in SNAPSHOT_VERSIONS:
        raise ValueError(f"schema: {schema!r:.60} is not one this bpfmem reads "
                         f"(bpfmem/snapshot/v1 or v2)")
    return version


def _pid_key(key: str, where: str) -> int:
    if not (key.isascii() and key.isdigit()) or not 0 <= int(key) < 1 << U32:
        raise ValueError(f"{where}: key {key!r:.40} is not a pid or id (a decimal number)")
    return int(key)


def _processes(d: Fields) -> dict[int, tuple[str, str | None]]:
    """v2's ``processes``: pid -> (comm, cgroup)."""
    out = {}
    table = d.object("processes")
    for key, raw in table.value.items():
        where = table._name(key)
        p = Fields(raw, where)
        out[_pid_key(key, "processes")] = (p.text("comm", ""), p.text("cgroup", None))
    return out


def _programs(d: Fields) -> dict[int, ProgRef]:
    """v2's ``programs``: id -> ProgRef."""
    out = {}
    table = d.object("programs")
    for key, raw in table.value.items():
        p = Fields(raw, table._name(key))
        pid = _pid_key(key, "programs")
        out[pid] = _prog_ref(p, pid)
    return out


def _prog_ref(p: Fields, prog_id: int) -> ProgRef:
    t = (p.uint("type_id", bits=U32) if p.has("type_id") and p.value["type_id"] is not None
         else _prog_type_id(p.value.get("type")))
    return ProgRef(prog_id, p.text("name", ""), t)


def _frozen(r: Fields, v2: bool) -> bool | None:
    """v2 leaves ``frozen`` out when false and writes null when the kernel did not say;
    v1 wrote it always (a missing one: not known)."""
    if "frozen" in r.value and r.value["frozen"] is None:
        return None
    return r.flag("frozen", False if v2 else None)


def snapshot_from_dict(doc: Any) -> Snapshot:
    """A :class:`Snapshot` from a ``bpfmem/snapshot/v2`` or ``v1`` document (as written by
    snapshot; v2's keys left out at their defaults are read back as those, see
    :func:`bpfmem.report.documents.snapshot_document`). ValueError names the field that is
    missing or of the wrong type (``maps[3].key_size``)."""
    v2 = _version(doc) == "v2"
    d = Fields(doc)
    procs = _processes(d) if v2 else {}
    progs = _programs(d) if v2 else {}
    owners_seen: dict[tuple, Owner] = {}   # one Owner per (pid, comm, cgroup, fds), shared

    def owner(o: Fields) -> Owner:
        pid = o.uint("pid", bits=U32)
        known = procs.get(pid)
        if known is None:
            if v2 and not (o.has("comm") or o.has("cgroup")):
                raise ValueError(f"{o._name('pid')}: {pid} is not in processes")
            known = ("", None)
        comm = o.text("comm", known[0]) if o.has("comm") else known[0]
        cgroup = o.text("cgroup", None) if o.has("cgroup") else known[1]
        key = (pid, comm, cgroup, o.uint("fds", 1, U32))
        got = owners_seen.get(key)
        if got is None:
            got = owners_seen[key] = Owner(*key)
        return got

    def program(r: Fields, i: int, raw: Any) -> ProgRef:
        where = f"{r._name('programs')}[{i}]"
        if isinstance(raw, int) and not isinstance(raw, bool) and v2:
            if raw not in progs:
                raise ValueError(f"{where}: program {raw} is not in programs")
            return progs[raw]
        p = Fields(raw, where)
        return _prog_ref(p, p.uint("id", bits=U32))

    maps = []
    for r in d.objects("maps"):
        counted = r.uint("entries", None, U32)
        maps.append(LiveMap(
            id=r.uint("id", bits=U32), name=r.text("name", ""),
            type=(r.uint("type_id", bits=U32) if r.has("type_id") and
                  r.value["type_id"] is not None else _type_id(r, "type")),
            key_size=r.uint("key_size", bits=U32), value_size=r.uint("value_size", bits=U32),
            max_entries=r.uint("max_entries", bits=U32),
            map_flags=r.uint("map_flags", 0, U32), map_extra=r.uint("map_extra", 0),
            btf_id=r.uint("btf_id", 0, U32), memlock=r.uint("memlock", None),
            frozen=_frozen(r, v2), owners=tuple(owner(o) for o in r.objects("owners")),
            programs=tuple(program(r, i, p) for i, p in enumerate(r.items("programs"))),
            pins=tuple(r.texts("pins")), entries=counted,
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
                    owners_from=d.text("owners_from", ""),
                    **(_live_programs(d, owner) if v2 and d.has("jit") else {}))


def _ids(r: Fields, key: str) -> tuple[int, ...]:
    out = r.items(key)
    for i, v in enumerate(out):
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << U32:
            raise ValueError(f"{r._name(key)}[{i}]: expected an id")
    return tuple(out)


def _live_programs(d: Fields, owner) -> dict[str, Any]:
    """The programs, BTF objects and JIT figures of a snapshot taken with programs (the
    ``jit`` key says so; see report.documents._live_programs)."""
    progs = []
    table = d.object("programs")
    for key, raw in table.value.items():
        p = Fields(raw, table._name(key))
        if not p.has("xlated_prog_len"):
            continue            # a program that uses a map, from a scan of maps only
        ref = _prog_ref(p, _pid_key(key, "programs"))
        progs.append(LiveProg(
            id=ref.id, name=ref.name, type=ref.type, tag=p.text("tag", ""),
            memlock=p.uint("memlock", None), xlated_prog_len=p.uint("xlated_prog_len", 0, U32),
            jited_prog_len=p.uint("jited_prog_len", 0, U32), map_ids=_ids(p, "map_ids"),
            btf_id=p.uint("btf_id", 0, U32), verified_insns=p.uint("verified_insns", None, U32),
            load_time=p.uint("load_time", 0), created_by_uid=p.uint("created_by_uid", 0, U32),
            owners=tuple(owner(o) for o in p.objects("owners")), links=_ids(p, "links"),
            link_owners=tuple(owner(o) for o in p.objects("link_owners")),
            pins=tuple(p.texts("pins"))))
    btfs = tuple(LiveBtf(id=b.uint("id", bits=U32), name=b.text("name", ""),
                         btf_size=b.uint("btf_size", 0, U32),
                         kernel_btf=bool(b.flag("kernel_btf", False)),
                         owners=tuple(owner(o) for o in b.objects("owners")))
                 for b in d.objects("btf"))
    j = d.object("jit")
    return {"progs": tuple(progs), "btfs": btfs,
            "jit": JitMemory(limit=j.uint("bpf_jit_limit", None),
                             in_use=j.uint("in_use", None), packs=j.uint("packs", None))}


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
    # owners are known only where bpftool's pid iterator ran (its maps carry "pids")
    with_pids = isinstance(data, list) and any(isinstance(r, dict) and "pids" in r
                                               for r in data)
    return Snapshot(taken_at=0.0, duration=0.0, hostname="", kernel=kernel, possible_cpus=cpus,
                    maps=tuple(maps), entries_counted=False,
                    owners_from="bpftool pids" if with_pids else "")


def looks_like_snapshot(head: str) -> bool:
    """Whether the first bytes of a .json file (as text) are a saved ``bpfmem snapshot`` or
    ``bpftool -j map show`` output (a JSON list)."""
    head = head.lstrip()
    return head.startswith("[") or SNAPSHOT_SCHEMA_PREFIX in head


class Occupancy(dict):
    """``{map name: entries}``, and ``uncounted``: the names of a snapshot's maps whose
    entries were not counted (a snapshot taken without ``--entries`` has only those)."""
    uncounted: tuple[str, ...] = ()


def occupancy_from(data: Any) -> dict[str, int]:
    """``{map name: entries}`` from a decoded occupancy file: that mapping itself, or a bpfmem
    snapshot's maps with their entry counts (v1 or v2: a map whose entries were not counted
    has none; a name seen on several maps, one per pod...: the fullest). ValueError names the
    field that is wrong."""
    if isinstance(data, dict) and str(data.get("schema", "")).startswith("bpfmem/snapshot"):
        peaks = Occupancy()
        uncounted = []
        for m in Fields(data).objects("maps"):
            n = m.uint("entries", None, 32)
            name = m.text("name")
            if n is not None:
                peaks[name] = max(peaks.get(name, 0), n)
            else:
                uncounted.append(name)
        peaks.uncounted = tuple(dict.fromkeys(n for n in uncounted if n not in peaks))
        return peaks
    if not isinstance(data, dict):
        raise ValueError("expected {\"map name\": entries, ...}")
    for k, v in data.items():
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << 32:
            raise ValueError(f"{k}: expected entries as an integer in 0..2^32-1, "
                             f"not {v!r:.40}")
    return data
