"""The ``maps`` tables: they draw the ``bpfmem/maps/v1`` document of an Inventory
(analysis/inventory.py computes it, report/documents.py makes the document)."""

from __future__ import annotations

import json
from typing import IO, Any

from .escape import term
from .memory import mib


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
