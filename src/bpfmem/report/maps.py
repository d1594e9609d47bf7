"""The ``maps`` report: one document built once from specs, then rendered as JSON or a table.

The document is the stable JSON API (``"schema": "bpfmem/maps/v1"``); the table renderer reads
only the document, never a spec, a file or the kernel.
"""

from __future__ import annotations

import json
from typing import IO, Any, Iterable

from ..analysis.placeholders import placeholder_note
from ..parse.objspec import MapSpec, ObjectSpec, ProgramSpec
from ..uapi import attach_type_name, flag_names, map_type_name, prog_type_name
from .escape import term
from .memory import memory_record, mib, totals

SCHEMA = "bpfmem/maps/v1"


def map_record(m: MapSpec, profile=None) -> dict[str, Any]:
    rec = {
        "name": m.name,
        "kernel_name": m.kernel_name,
        "type": map_type_name(m.type),
        "type_id": m.type,
        "key_size": m.key_size,
        "value_size": m.value_size,
        "max_entries": m.max_entries,
        "map_flags": m.map_flags,
        "flags": flag_names(m.map_flags),
        "map_extra": m.map_extra,
        "numa_node": m.numa_node,
        "pinning": m.pinning,
        "kind": m.kind,
        "section": m.section,
        "inner": map_record(m.inner) if m.inner is not None else None,
        "max_entries_set_at_load": m.max_entries_set_at_load,
        "value_size_set_at_load": m.value_size_set_at_load,
        "autocreate": m.autocreate,
        "key_type": m.key_type,
        "value_type": m.value_type,
        "init_slots": [{"index": i, "target": t} for i, t in m.init_slots],
        "notes": list(m.notes) + [n for n in (placeholder_note(m),) if n],
    }
    if m.refused:
        rec["refused"] = m.refused
    if m.instances != 1:
        rec["instances"] = m.instances
    if profile is not None:
        from ..model.estimate import estimate_spec
        fp, why = estimate_spec(m, profile)
        mem = memory_record(fp, why)
        if m.instances != 1:
            mem = {k: (v * m.instances if isinstance(v, int) and k != "charged_tolerance"
                       else v) for k, v in mem.items()}
        rec["memory"] = mem
    return rec


def program_record(p: ProgramSpec) -> dict[str, Any]:
    return {
        "name": p.name,
        "section": p.section,
        "type": prog_type_name(p.type) if p.type else None,
        "type_id": p.type,
        "expected_attach_type": attach_type_name(p.expected_attach_type)
        if p.expected_attach_type else None,
        "autoload": p.autoload,
        "sleepable": p.sleepable,
        "insns": p.insns,
        "maps": list(p.maps),
        "subprograms": list(p.subprograms),
    }


def object_record(o: ObjectSpec, profile=None) -> dict[str, Any]:
    maps = [map_record(m, profile) for m in o.maps]
    rec = {
        "path": o.path,
        "name": o.name,
        "endianness": "little" if o.little_endian else "big",
        "license": o.license,
        "btf": o.has_btf,
        "loader": {"name": o.loader, "why": o.loader_reason},
        "maps": maps,
        "programs": [program_record(p) for p in o.programs],
        "notes": list(o.notes),
    }
    if profile is not None:
        rec["memory"] = object_totals(maps)
    return rec


def object_totals(maps: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals over the maps created at start; ``refused`` names the maps the loader or the
    kernel refuses (never counted, as 0 or otherwise: the total is then what the rest costs,
    and the object does not start as it is)."""
    created = [m for m in maps if m["autocreate"]]
    t = totals(m["memory"] for m in created)
    t["refused"] = [m["name"] for m in created if m["memory"].get("rejected")]
    return t


def build_maps_report(objects: Iterable[ObjectSpec], errors: Iterable[tuple[str, str]] = (),
                      profile=None, whatif=None) -> dict[str, Any]:
    """The ``maps`` document for ``objects``; ``errors`` are (path, message) of failed ones.
    With a KernelProfile, every map gets its ``memory`` and every object its totals."""
    doc: dict[str, Any] = {"schema": SCHEMA}
    if profile is not None:
        doc["kernel"] = profile.describe()
    objects = list(objects)
    if whatif:
        from dataclasses import replace as _replace
        doc["whatif"] = whatif.describe()
        recs = []
        for o in objects:
            before = object_record(o, profile)
            pairs = whatif.apply(list(o.maps))
            after = object_record(_replace(o, maps=tuple(m for m, _c in pairs)), profile)
            for m, (_spec, count) in zip(after["maps"], pairs):
                m["count"] = count
                if count != 1 and "memory" in m:
                    m["memory"] = {k: (v * count if isinstance(v, int) and k != "charged_tolerance"
                                       else v) for k, v in m["memory"].items()}
            if profile is not None:
                after["memory"] = object_totals(after["maps"])
                after["memory_before"] = before["memory"]
            after["unmatched_settings"] = whatif.unmatched([m.name for m in o.maps])
            recs.append(after)
        doc["objects"] = recs
    else:
        doc["objects"] = [object_record(o, profile) for o in objects]
    doc["errors"] = [{"path": p, "error": e} for p, e in errors]
    return doc


def render_json(doc: dict[str, Any], out: IO[str], *, indent: int | None = None) -> None:
    """JSON, one line by default (json's C encoder); ``indent`` for people."""
    out.write(json.dumps(doc, indent=indent))
    out.write("\n")


def _size(n: int) -> str:
    return f"{n:,}"


def render_table(doc: dict[str, Any], out: IO[str], *, width: int | None = None) -> None:
    """Human tables (rich): per object, its maps and its programs. Fits 100 columns."""
    from rich import box
    from .escape import console as Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=out, width=width, highlight=False,
                      soft_wrap=False) if width else Console(file=out, highlight=False)
    if "kernel" in doc:
        k = doc["kernel"]
        console.print(Text(f"memory for Linux {k['version']} with {k['possible_cpus']} possible "
                           f"CPUs: memlock as fdinfo reports it, charged = what the creating "
                           f"process's memory cgroup pays (at create, and when full)",
                           style="dim"), overflow="fold")
        src = k.get("struct_sizes_source", k["struct_sizes"])
        console.print(Text(f"kernel {k.get('build', k['version'])}: "
                           + (f"struct sizes and eras from the {src}" if k.get("exact") else
                              f"a release table, struct sizes from the {src}"),
                           style="dim"), overflow="fold")
        for note in k.get("notes", ()):
            console.print(Text(f"  note: {note}", style="dim"), overflow="fold")
    for o in doc["objects"]:
        title = f"{o['path'] or o['name']}: {len(o['maps'])} maps, {len(o['programs'])} programs"
        t = Table(title=term(title), title_justify="left", expand=False, box=box.SIMPLE_HEAD)
        longest = max((len(m["name"]) for m in o["maps"]), default=3)
        t.add_column("map", overflow="fold", min_width=min(longest, 28))
        t.add_column("type", overflow="fold", max_width=16)
        t.add_column("key", justify="right")
        t.add_column("value", justify="right")
        t.add_column("max_entries", justify="right")
        t.add_column("flags", overflow="fold", max_width=16)
        with_memory = "memory" in o
        t.add_column("kind")
        for m in o["maps"]:
            max_e = _size(m["max_entries"])
            if m["max_entries_set_at_load"]:
                max_e = "at load" if m["max_entries"] == 0 else max_e + "*"
            vs = _size(m["value_size"]) + ("*" if m["value_size_set_at_load"] else "")
            flags = " ".join(m["flags"]) or "-"
            if m["pinning"]:
                flags = "pinned" if flags == "-" else flags + " pinned"
            tail = [m["kind"]]
            t.add_row(term(m["name"]), m["type"], _size(m["key_size"]), vs, max_e, flags, *tail)
            if m["inner"] is not None:
                i = m["inner"]
                t.add_row(Text("  inner", style="dim"), i["type"], _size(i["key_size"]),
                          _size(i["value_size"]), _size(i["max_entries"]),
                          " ".join(i["flags"]) or "-", *([""] * len(tail)))
        console.print(t)
        lo = o.get("loader") or {}
        if lo.get("name"):
            console.print(Text(f"  loader: {lo['name']} ({lo.get('why') or 'as asked'})",
                               style="cyan"), overflow="fold")
        if with_memory:
            console.print(_memory_table(o))
        notes = [(m["name"], n) for m in o["maps"] for n in m["notes"]]
        notes += [(m["name"], m["memory"]["rejected"]) for m in o["maps"]
                  if m.get("memory", {}).get("rejected")]
        notes += [(m["name"], m["memory"]["unknown"]) for m in o["maps"]
                  if m.get("memory", {}).get("unknown")]
        for name, n in notes:
            console.print(Text(f"  * {name}: {n}", style="dim"), overflow="fold")
        for n in o["notes"]:
            console.print(Text(f"  note: {n}", style="yellow"), overflow="fold")
        if "memory_before" in o:
            b, a = o["memory_before"], o["memory"]
            console.print(Text(f"  what-if ({'; '.join(doc['whatif'])}): charged at create "
                               f"{mib(b['charged_at_create'])} -> {mib(a['charged_at_create'])} "
                               f"MiB, when full {mib(b['charged_full'])} -> "
                               f"{mib(a['charged_full'])} MiB", style="bold yellow"),
                          overflow="fold")
        for u in o.get("unmatched_settings", []):
            console.print(Text(f"  what-if {u} matches no map", style="red"))
        if o["programs"]:
            p = Table(expand=False, box=box.SIMPLE_HEAD)
            p.add_column("program", overflow="fold", max_width=24)
            p.add_column("section", overflow="fold", max_width=24)
            p.add_column("type", overflow="fold", max_width=14)
            p.add_column("maps", overflow="fold")
            for prog in o["programs"]:
                p.add_row(term(prog["name"]), term(prog["section"]), prog["type"] or "unknown",
                          term(", ".join(prog["maps"]) or "-"))
            console.print(p)
        console.print()


def _memory_table(o: dict[str, Any]):
    """Per map: memlock and charge at create, charge when full, and share of the total."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    t = Table(box=box.SIMPLE_HEAD, expand=False)
    longest = max((len(m["name"]) for m in o["maps"]), default=3)
    t.add_column("map", overflow="fold", min_width=min(longest, 28))
    t.add_column("memlock MiB", justify="right")
    t.add_column("charged MiB", justify="right")
    t.add_column("full MiB", justify="right")
    t.add_column("share", justify="right")
    tot = o["memory"]
    total_create = tot["charged_at_create"] or 0
    for m in o["maps"]:
        mem = m["memory"]
        if mem.get("rejected"):
            t.add_row(term(m["name"]), Text("refused: not created", style="red"), "", "", "")
            continue
        ch = mem["charged_at_create"]
        share = f"{100 * ch / total_create:.0f}%" if ch is not None and total_create else ""
        style = "dim" if not m["autocreate"] else None
        t.add_row(Text(m["name"], style=style or ""), mib(mem["memlock_at_create"]), mib(ch),
                  mib(mem["charged_full"]), share)
    t.add_section()
    refused = tot.get("refused", [])
    unknown = tot["incomplete"] - len(refused)
    why = ([f"{unknown} unknown"] if unknown else []) + (
        [f"{len(refused)} refused, not created: {', '.join(refused)}"] if refused else [])
    incomplete = f" ({'; '.join(why)})" if why else ""
    t.add_row(Text("total" + incomplete, style="bold"),
              Text(mib(tot["memlock_at_create"]), style="bold"),
              Text(mib(tot["charged_at_create"]), style="bold"),
              Text(mib(tot["charged_full"]), style="bold"), "")
    return t
