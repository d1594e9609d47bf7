"""The live-node report: a scan as the stable JSON document ``bpfmem/snapshot/v1``, read back,
imported from ``bpftool -j map show``, and rendered as a table.

The document carries, per map, the kernel's figures and the model's prediction for the
scanning kernel (``model``): a mismatch is shown because it means that either the model or
the map's state is not what we think.
"""

from __future__ import annotations

import datetime as _dt
import json
from functools import lru_cache
from typing import IO, Any, Iterable

from ..analysis.live import cgroup_sums, check_map
from ..records import LiveMap, Snapshot
from .escape import markup, md_code, md_text, term
from ..uapi import flag_names, map_type_name, prog_type_name
from ..units import format_delta, format_size

SCHEMA = "bpfmem/snapshot/v1"


def _iso(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).isoformat(timespec="seconds")


@lru_cache(maxsize=256)
def _type_name(t: int) -> str:
    return map_type_name(t)


@lru_cache(maxsize=1024)
def _flags(value: int) -> tuple[str, ...]:
    return tuple(flag_names(value))


def map_record(m: LiveMap, profile=None) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "id": m.id, "name": m.name, "type": _type_name(m.type), "type_id": m.type,
        "key_size": m.key_size, "value_size": m.value_size, "max_entries": m.max_entries,
        "map_flags": m.map_flags, "flags": list(_flags(m.map_flags)), "map_extra": m.map_extra,
        "btf_id": m.btf_id, "memlock": m.memlock, "frozen": m.frozen,
        "entries": m.entries, "entries_complete": m.entries_complete,
        "entries_method": m.entries_method,
        "pressure": None if m.pressure is None else round(m.pressure, 6),
        "owners": [{"pid": o.pid, "comm": o.comm, "cgroup": o.cgroup, "fds": o.fds}
                   for o in m.owners],
        "programs": [{"id": p.id, "name": p.name, "type": prog_type_name(p.type)}
                     for p in m.programs],
        "pins": list(m.pins),
    }
    if profile is not None:
        rec["model"] = _model_record(check_map(m, profile))
    return rec


@lru_cache(maxsize=1 << 14)
def _model_record(c) -> dict[str, Any]:
    # shared between maps with the same check (the caller never mutates it)
    return {"memlock": c.memlock, "memlock_full": c.memlock_full, "charged": c.charged,
            "charged_full": c.charged_full, "status": c.status, "delta": c.delta,
            "note": c.note}


def build_snapshot_report(snap: Snapshot, profile=None) -> dict[str, Any]:
    """The JSON document; ``profile`` (the scanning kernel's) adds the model's figures."""
    maps = [map_record(m, profile) for m in sorted(snap.maps, key=lambda m: m.id)]
    statuses: dict[str, int] = {}
    for r in maps:
        if "model" in r:
            statuses[r["model"]["status"]] = statuses.get(r["model"]["status"], 0) + 1
    return {
        "schema": SCHEMA,
        "taken_at": _iso(snap.taken_at),
        "host": {"hostname": snap.hostname, "kernel": snap.kernel,
                 "possible_cpus": snap.possible_cpus},
        "model_kernel": None if profile is None else profile.version,
        "duration_s": round(snap.duration, 3),
        "entries_counted": snap.entries_counted,
        "skipped": snap.skipped,
        "errors": list(snap.errors),
        "bpffs": list(snap.bpffs),
        "owners_from": snap.owners_from,
        "totals": {
            "maps": len(maps),
            "memlock": sum(m.memlock or 0 for m in snap.maps),
            "charged_model": sum((r.get("model") or {}).get("charged") or 0 for r in maps)
            if profile is not None else None,
            "model_status": statuses,
        },
        "cgroups": [{"cgroup": s.cgroup, "maps": s.maps, "memlock": s.memlock}
                    for s in cgroup_sums(snap.maps)],
        "maps": maps,
    }


def render_json(doc: dict, out: IO[str], indent: int | None = 2) -> None:
    """Write the document. With ``indent`` the top level is indented and every map is one
    line (readable, diffable with line tools, and fast: each line goes through the C
    encoder); without, one compact line."""
    if indent is None:
        out.write(json.dumps(doc))
        out.write("\n")
        return
    pad = " " * indent
    parts = [f"{pad}{json.dumps(k)}: {json.dumps(v)}" for k, v in doc.items() if k != "maps"]
    maps = f",\n{pad}{pad}".join(json.dumps(m) for m in doc.get("maps", []))
    parts.append(f"{pad}\"maps\": [" + (f"\n{pad}{pad}{maps}\n{pad}" if maps else "") + "]")
    out.write("{\n" + ",\n".join(parts) + "\n}\n")


# ---- table ----

def _owner_text(rec: dict) -> str:
    owners = rec["owners"]
    if not owners:
        if rec["pins"]:
            return "(pinned)"
        return "(programs)" if rec["programs"] else "-"
    first = owners[0]
    more = f" +{len(owners) - 1}" if len(owners) > 1 else ""
    return f"{first['comm']}[{first['pid']}]{more}"


def _tail(text: str | None, n: int) -> str:
    """The end of a long path, which is the part that tells cgroups and pins apart."""
    if not text:
        return "-"
    return text if len(text) <= n else "…" + text[-(n - 1):]


SORTS = {
    "memlock": lambda r: (-(r["memlock"] or 0), r["id"]),
    "pressure": lambda r: (-(r["pressure"] if r["pressure"] is not None else -1),
                           -(r["memlock"] or 0), r["id"]),
    "entries": lambda r: (-(r["entries"] if r["entries"] is not None else -1), r["id"]),
    "name": lambda r: (r["name"], r["id"]),
}


def table_rows(doc: dict, limit: int | None = None, sort: str = "memlock") -> Iterable[dict]:
    rows = sorted(doc["maps"], key=SORTS[sort])
    return rows[:limit] if limit else rows


def render_table(doc: dict, out: IO[str], *, limit: int | None = None,
                 width: int | None = None) -> None:
    from .escape import console as Console
    from rich.table import Table
    console = Console(file=out, width=width or (None if out.isatty() else 160),
                      highlight=False, soft_wrap=False)
    t = Table(title=f"{doc['totals']['maps']} maps on {doc['host']['hostname'] or 'the node'} "
                    f"({doc['host']['kernel'] or 'kernel unknown'}), "
                    f"memlock {format_size(doc['totals']['memlock'])}",
              title_justify="left")
    cols = (("id", "right"), ("name", "left"), ("type", "left"), ("key/value", "right"),
            ("max", "right"), ("entries", "right"), ("pressure", "right"),
            ("memlock", "right"), ("model", "right"), ("owner", "left"), ("cgroup", "left"),
            ("pins", "left"))
    rows = []
    for r in table_rows(doc, limit):
        p = r["pressure"]
        pressure = "-" if p is None else f"{p:.0%}"
        if p is not None and p >= 0.9:
            pressure = f"[bold red]{pressure}[/]"
        elif p is not None and p >= 0.75:
            pressure = f"[yellow]{pressure}[/]"
        model = r.get("model")
        mtxt = "-"
        if model:
            mtxt = {"match": "=", "in-range": "~", "unknown": "?"}.get(model["status"], "")
            if model["status"] == "mismatch":
                mtxt = f"[red]≠ {model['delta']:+,}[/]" if model["delta"] is not None else "≠"
        cg = r["owners"][0]["cgroup"] if r["owners"] else None
        entries = "-" if r["entries"] is None else (
            f"{r['entries']:,}" + ("" if r["entries_complete"] else "+"))
        rows.append((str(r["id"]), markup(r["name"]), r["type"],
                     f"{r['key_size']}/{r['value_size']}", f"{r['max_entries']:,}", entries,
                     pressure, format_size(r["memlock"]), mtxt, markup(_owner_text(r)),
                     markup(cg or "-"), markup(", ".join(r["pins"]) or "-")))
    from rich.text import Text
    for i, (col, just) in enumerate(cols):
        widest = max([len(col)] + [Text.from_markup(row[i]).cell_len for row in rows])
        t.add_column(col, justify=just, no_wrap=True, min_width=widest)
    for row in rows:
        t.add_row(*row)
    console.print(t)
    if doc["cgroups"]:
        c = Table(title="memlock per cgroup (of each map's lowest-pid holder)",
                  title_justify="left")
        c.add_column("cgroup", overflow="fold")
        c.add_column("maps", justify="right")
        c.add_column("memlock", justify="right")
        for s in doc["cgroups"][:15]:
            c.add_row(term(s["cgroup"] or "(no process holds them)"), str(s["maps"]),
                      format_size(s["memlock"]))
        console.print(c)
    st = doc["totals"].get("model_status") or {}
    if st:
        console.print("model vs kernel memlock: " + ", ".join(
            f"{n} {k}" for k, n in sorted(st.items())) +
            ("  (= equal, ~ within empty..full, ≠ differs, ? not modelled)"))
    if doc["skipped"]:
        console.print(f"{doc['skipped']} maps or processes vanished during the scan (skipped)")
    for e in doc["errors"][:10]:
        console.print(f"[yellow]warning:[/] {e}")


# ---- two moments of a node ----

def _owner_of(side: dict | None) -> str:
    o = (side or {}).get("owner")
    return f"{o['comm']}[{o['pid']}]" if o else "-"


def _diff_rows(doc: dict):
    """The cells of every map that moved: name, type, status, memlock, Δ memlock, Δ entries,
    owner."""
    for r in doc["maps"]:
        if r["status"] == "unchanged":
            continue
        side = r["new"] or r["old"]
        de = "" if r["delta_entries"] is None else f"{r['delta_entries']:+,}"
        yield (r["name"], r["type"], r["status"], format_size(side["memlock"]),
               format_delta(r["delta_memlock"]), de, _owner_of(side))


def snapshot_diff_markdown(doc: dict) -> str:
    c = doc["counts"]
    lines = [f"### bpfmem: node maps {format_size(doc['old']['memlock'])} → "
             f"{format_size(doc['new']['memlock'])} ({format_delta(doc['delta_memlock'])})", "",
             f"{c['added']} added, {c['removed']} removed, {c['recreated']} recreated, "
             f"{c['changed']} changed, {c['unchanged']} unchanged", "",
             "| map | type | status | memlock | Δ memlock | Δ entries | owner |",
             "|---|---|---|---:|---:|---:|---|"]
    for name, type_, status, memlock, dm, de, owner in _diff_rows(doc):
        lines.append(f"| {md_code(name)} | {type_} | {status} | {memlock} | {dm} | {de} | "
                     f"{md_text(owner)} |")
    return "\n".join(lines) + "\n"


def render_snapshot_diff(doc: dict, fmt: str, out: IO[str]) -> None:
    if fmt == "json":
        render_json(doc, out)
        return
    if fmt == "markdown":
        out.write(snapshot_diff_markdown(doc))
        return
    from .escape import console as Console
    from rich.table import Table
    console = Console(file=out, width=None if out.isatty() else 140, highlight=False)
    c = doc["counts"]
    t = Table(title=f"node maps {format_size(doc['old']['memlock'])} -> "
                    f"{format_size(doc['new']['memlock'])} ({format_delta(doc['delta_memlock'])}): "
                    f"{c['added']} added, {c['removed']} removed, {c['recreated']} recreated, "
                    f"{c['changed']} changed, {c['unchanged']} unchanged", title_justify="left")
    for col in ("map", "type", "status", "memlock", "Δ memlock", "Δ entries", "owner"):
        t.add_column(col, justify="right" if col.startswith(("memlock", "Δ")) else "left",
                     no_wrap=True)
    for row in _diff_rows(doc):
        t.add_row(*map(term, row))
    console.print(t)
    moved = [g for g in doc["cgroups"] if g["delta"]][:10]
    if moved:
        g = Table(title="memlock per cgroup", title_justify="left")
        for col in ("cgroup", "old", "new", "Δ"):
            g.add_column(col, justify="left" if col == "cgroup" else "right")
        for r in moved:
            g.add_row(term(r["cgroup"] or "(no process holds them)"), format_size(r["old"]),
                      format_size(r["new"]), format_delta(r["delta"]))
        console.print(g)
