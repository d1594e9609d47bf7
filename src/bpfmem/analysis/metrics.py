"""The exporter's figures of one scan, as rows (pure: a snapshot and the cgroups' memory in,
tuples out; :mod:`bpfmem.report.prometheus` writes them as metric families)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Iterator

from .live import cgroup_sums, check_map, primary_owner
from ..uapi import map_type_name

__all__ = ["map_rows", "maps_rows", "CgroupRow", "cgroup_rows", "prog_rows", "progs_rows",
           "ProgNode", "prog_node"]


def map_rows(snap, profile=None, charged_of: dict | None = None) -> Iterator[tuple]:
    """Per map of ``snap``, one at a time: (label values, memlock, charged, max_entries,
    entries, pressure), a value None where the map has none. The label values are the map's
    id, name, type, and its primary owner's comm and cgroup. ``charged_of`` caches the
    model's charge by map shape and entries across scans (maps of one shape are common)."""
    return maps_rows(snap.maps, profile, charged_of)


def maps_rows(maps, profile=None, charged_of: dict | None = None) -> Iterator[tuple]:
    """:func:`map_rows` of some maps (a part of a scan)."""
    for m in maps:
        o = primary_owner(m)
        labels = (str(m.id), m.name, _type(m.type), o.comm if o else "",
                  (o.cgroup or "") if o else "")
        charged = None
        if profile is not None:
            key = (m.type, m.key_size, m.value_size, m.max_entries, m.map_flags, m.map_extra,
                   m.entries)
            if charged_of is not None and key in charged_of:
                charged = charged_of[key]
            else:
                charged = check_map(m, profile).charged
                if charged_of is not None:
                    charged_of[key] = charged
        yield (labels, m.memlock, charged, m.max_entries, m.entries, m.pressure)


@functools.lru_cache(maxsize=None)
def _type(t: int) -> str:
    return map_type_name(t)


@dataclass(frozen=True)
class CgroupRow:
    """One cgroup holding maps (through their primary owner; "" for maps nobody holds): the
    maps' memlock and count, and the memory cgroup's usage, limit and the maps' share of the
    usage (None where the cgroup's memory is not known, the limit None when unlimited)."""
    cgroup: str
    memlock: int
    maps: int
    usage: int | None
    limit: int | None
    share: float | None


def cgroup_rows(snap, cgroups: dict, sums=None) -> list[CgroupRow]:
    """The cgroups of ``snap``'s maps, largest memlock first; ``cgroups`` maps a cgroup path
    to its :class:`~bpfmem.records.CgroupMemory` (or anything with its ``usage`` and ``limit``:
    the exporter's host.cgroup.CgroupUsage); ``sums`` the maps' ``cgroup_sums`` when
    the caller has them."""
    out = []
    for s in (cgroup_sums(snap.maps) if sums is None else sums):
        mem = cgroups.get(s.cgroup)
        usage = mem.usage if mem is not None else None
        out.append(CgroupRow(
            cgroup=s.cgroup or "", memlock=s.memlock, maps=s.maps, usage=usage,
            limit=mem.limit if mem is not None else None,
            share=s.memlock / usage if usage else None))
    return out


def prog_rows(snap) -> list[tuple]:
    """Per program of ``snap`` (a scan that listed programs): (label values, memlock, JIT
    bytes, xlated bytes); the labels are the maps' (id, name, type, owner_comm, cgroup: its
    first program-fd holder, else its first link holder; "" when none)."""
    return progs_rows(snap.progs or ())


def progs_rows(progs) -> list[tuple]:
    """:func:`prog_rows` of some programs."""
    from ..uapi import prog_type_name
    from .progs import prog_holder
    out = []
    for p in progs:
        o = prog_holder(p)
        labels = (str(p.id), p.name, prog_type_name(p.type), o.comm if o else "",
                  (o.cgroup or "") if o else "")
        out.append((labels, p.memlock, p.jited_prog_len, p.xlated_prog_len))
    return out


@dataclass(frozen=True)
class ProgNode:
    """The node's programs summed, per cgroup, its BTF and the JIT against its limit."""
    programs: int
    memlock: int
    jited: int
    cgroups: tuple          # analysis.progs.ProgSum per cgroup
    btf_bytes: int          # BTF loaded by processes
    jit_limit: int | None
    jit_in_use: int | None


def prog_node(snap) -> ProgNode | None:
    """None for a scan that did not list programs."""
    if snap.progs is None:
        return None
    from .progs import program_totals
    t = program_totals(snap.progs, snap.btfs or ())
    j = snap.jit
    return ProgNode(t.node.programs, t.node.memlock, t.node.jited, t.cgroups, t.btf_bytes,
                    j.limit if j else None, j.in_use if j else None)
