"""The snapshot family drawn: a node's maps (:class:`~bpfmem.analysis.live.SnapshotView`) as
a terminal table or its ``bpfmem/snapshot/v2`` JSON, and what changed between two snapshots
(:class:`~bpfmem.analysis.live.SnapshotDiff`) as a table, markdown or JSON. The HTML page is
:mod:`.node_html`, the ``top`` frame :mod:`.top`; the documents are made in :mod:`.documents`.

Each map carries the model's prediction for the scanning kernel (its check): a mismatch is
shown because it means that either the model or the map's state is not what we think.
"""

from __future__ import annotations

from ..units import count

import json
from functools import partial
TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import IO

from json.encoder import encode_basestring_ascii as _q

# (the escapes of the table and markdown renderers, report.escape, are imported where they
# are used: JSON, a snapshot's default, needs none)
from .documents import SNAPSHOT, document, snapshot_parts
from ..uapi import map_type_name
from ..units import format_delta, format_size


def render_json(result, out: IO[str], indent: int | None = 2) -> None:
    """Write the result's document. With ``indent`` the top level is indented and
    every map (and every entry of v2's processes and programs tables) is one line (readable,
    diffable with line tools, and fast: each line goes through the C encoder or is written
    as text already); without, one compact line."""
    if type(result).__name__ == "SnapshotView":    # its maps and programs as text, no dicts
        doc, lines = snapshot_parts(result)
        doc["maps"] = lines
        written = _WRITTEN
    else:
        doc, written = document(result), ()
    # the snapshot is written compact, as bpftool -j is; the snapshot diff keeps the blanks
    # it was first written with
    compact = doc.get("schema") == SNAPSHOT
    dumps = partial(json.dumps, separators=(",", ":")) if compact else json.dumps
    if indent is None:
        if not written:
            out.write(dumps(doc))
            out.write("\n")
            return
        sep = "{"
        for k, v in doc.items():        # (the maps' text, megabytes, is not copied again)
            out.write(f"{sep}{_q(k)}:")
            sep = ","
            if k == "maps" and k in written:
                out.write("[")
                out.write(",".join(v))
                out.write("]")
            elif k in written:
                out.write("{" + ",".join([f"{_q(i)}:{e}" for i, e in v.items()]) + "}")
            else:
                out.write(dumps(v))
        out.write("}\n")
        return
    pad = " " * indent
    inner = pad + pad
    parts = []
    for k, v in doc.items():
        if k == "maps":
            body = f",\n{inner}".join(v if k in written else (dumps(m) for m in v))
            parts.append(f"{pad}\"maps\": [" + (f"\n{inner}{body}\n{pad}" if body else "")
                         + "]")
        elif k in _TABLES and isinstance(v, dict):
            body = f",\n{inner}".join(f"{_q(i)}: {e if k in written else dumps(e)}"
                                      for i, e in v.items())
            parts.append(f"{pad}{dumps(k)}: {{" + (f"\n{inner}{body}\n{pad}" if body else "")
                         + "}")
        else:
            parts.append(f"{pad}{dumps(k)}: {dumps(v)}")
    out.write("{\n" + ",\n".join(parts) + "\n}\n")


_WRITTEN = ("maps", "programs")   # a SnapshotView's keys written as text (snapshot_parts)
_TABLES = ("processes", "programs")   # snapshot/v2's tables: one entry a line


# ---- table ----

def _owner_text(m) -> str:
    """A map's primary holder as ``comm[pid]`` (+ how many more), or why it has none."""
    if not m.owners:
        if m.pins:
            return "(pinned)"
        return "(programs)" if m.programs else "-"
    first = m.owners[0]
    more = f" +{len(m.owners) - 1}" if len(m.owners) > 1 else ""
    return f"{first.comm}[{first.pid}]{more}"


def _tail(text: str | None, n: int) -> str:
    """The end of a long path, which is the part that tells cgroups and pins apart."""
    if not text:
        return "-"
    return text if len(text) <= n else "…" + text[-(n - 1):]


def _pressure(m) -> float | None:
    p = m.pressure
    return None if p is None else round(p, 6)   # as the document says it


SORTS = {
    "memlock": lambda m: (-(m.memlock or 0), m.id),
    "pressure": lambda m: (-(p if (p := _pressure(m)) is not None else -1),
                           -(m.memlock or 0), m.id),
    "entries": lambda m: (-(m.entries if m.entries is not None else -1), m.id),
    "name": lambda m: (m.name, m.id),
}


def table_rows(view, limit: int | None = None, sort: str = "memlock") -> list[tuple]:
    """(map, its model check or None) of ``view``, sorted by ``sort``, the first ``limit``."""
    rows = sorted(zip(view.maps, view.checks), key=lambda r: SORTS[sort](r[0]))
    return rows[:limit] if limit else rows


def _entries(m) -> str:
    return "-" if m.entries is None else f"{m.entries:,}" + ("" if m.entries_complete else "+")


def _cgroup(m) -> str | None:
    return m.owners[0].cgroup if m.owners else None


def _piped_width(out: IO[str], wide: int) -> int | None:
    """The width of a node's table: the terminal's; piped, $COLUMNS when set, else ``wide``
    (one line per map for grep and less)."""
    if out.isatty():
        return None
    import os
    cols = os.environ.get("COLUMNS", "")
    return int(cols) if cols.isdigit() and int(cols) > 0 else wide


def render_table(view, out: IO[str], *, limit: int | None = None,
                 width: int | None = None) -> None:
    from .escape import console as Console, markup, term
    from rich.table import Table
    s = view.snapshot
    console = Console(file=out, width=width or _piped_width(out, 160), highlight=False,
                      soft_wrap=False)
    t = Table(title=f"{count(len(view.maps), 'map')} on {s.hostname or 'the node'} "
                    f"({s.kernel or 'kernel unknown'}), memlock {format_size(view.memlock)}",
              title_justify="left")
    cols = (("id", "right"), ("name", "left"), ("type", "left"), ("key/value", "right"),
            ("max", "right"), ("entries", "right"), ("pressure", "right"),
            ("memlock", "right"), ("model", "right"), ("owner", "left"), ("cgroup", "left"),
            ("pins", "left"))
    rows = []
    for m, check in table_rows(view, limit):
        p = _pressure(m)
        pressure = "-" if p is None else f"{p:.0%}"
        if p is not None and p >= 0.9:
            pressure = f"[bold red]{pressure}[/]"
        elif p is not None and p >= 0.75:
            pressure = f"[yellow]{pressure}[/]"
        mtxt = "-"
        if check is not None:
            mtxt = {"match": "=", "in-range": "~", "unknown": "?"}.get(check.status, "")
            if check.status == "mismatch":
                mtxt = f"[red]≠ {check.delta:+,}[/]" if check.delta is not None else "≠"
        rows.append((str(m.id), markup(m.name), map_type_name(m.type),
                     f"{m.key_size}/{m.value_size}", f"{m.max_entries:,}", _entries(m),
                     pressure, format_size(m.memlock), mtxt, markup(_owner_text(m)),
                     markup(_cgroup(m) or "-"), markup(", ".join(m.pins) or "-")))
    from rich.text import Text
    for i, (col, just) in enumerate(cols):
        widest = max([len(col)] + [Text.from_markup(row[i]).cell_len for row in rows])
        t.add_column(col, justify=just, no_wrap=True, min_width=widest)
    for row in rows:
        t.add_row(*row)
    console.print(t)
    if view.cgroups:
        c = Table(title="memlock per cgroup (of each map's lowest-pid holder)",
                  title_justify="left")
        c.add_column("cgroup", overflow="fold")
        c.add_column("maps", justify="right")
        c.add_column("memlock", justify="right")
        for g in view.cgroups[:15]:
            nobody = ("(no process holds them)" if s.owners_from else
                      "(owners unknown: not read)")
            c.add_row(term(g.cgroup or nobody), str(g.maps),
                      format_size(g.memlock))
        console.print(c)
    if view.programs is not None:
        _programs_table(view, console)
    st = dict(view.model_status)
    if st:
        console.print("model vs kernel memlock: " + ", ".join(
            f"{n} {k}" for k, n in sorted(st.items())) +
            ("  (= equal, ~ within empty..full, ≠ differs, ? not modelled)"))
    if s.skipped:
        console.print(f"{count(s.skipped, 'map or process', 'maps or processes')} vanished during the scan (skipped)")
    for e in s.errors[:10]:
        console.print(f"[yellow]warning:[/] {e}")


def _programs_table(view, console) -> None:
    """The programs beside the maps: totals, then memlock and JIT per cgroup."""
    from .escape import term
    from rich.table import Table
    t, s = view.programs, view.snapshot
    j = s.jit
    jit = ""
    if j is not None and j.in_use is not None and j.limit:
        jit = f", JIT vmalloc {format_size(j.in_use)} of bpf_jit_limit {format_size(j.limit)}"
    console.print(f"{count(t.node.programs, 'program')}: memlock {format_size(t.node.memlock)}, "
                  f"JIT images {format_size(t.node.jited)}, instructions "
                  f"{format_size(t.node.xlated)}{jit}; BTF loaded by processes "
                  f"{format_size(t.btf_bytes)} in {count(t.btf_objects, 'object')}")
    if not t.cgroups:
        return
    c = Table(title="programs per cgroup (of each program's first holder)",
              title_justify="left")
    for col, just in (("cgroup", "left"), ("programs", "right"), ("memlock", "right"),
                      ("jited", "right")):
        c.add_column(col, justify=just, overflow="fold" if col == "cgroup" else None)
    for g in t.cgroups[:15]:
        c.add_row(term(g.key or "(no process holds them)"), str(g.programs),
                  format_size(g.memlock), format_size(g.jited))
    console.print(c)


# ---- two moments of a node ----

def _owner_of(side) -> str:
    o = side.owner if side is not None else None
    return f"{o.comm}[{o.pid}]" if o else "-"


def _diff_rows(d):
    """The cells of every map that moved: name, type, status, memlock, Δ memlock, Δ entries,
    owner."""
    for r in d.maps:
        if r.status == "unchanged":
            continue
        side = r.new or r.old
        de = "" if r.delta_entries is None else f"{r.delta_entries:+,}"
        yield (r.name, map_type_name(r.type), r.status, format_size(side.memlock),
               format_delta(r.delta_memlock), de, _owner_of(side))


def _diff_counts(d) -> str:
    c = dict(d.counts)
    return (f"{c['added']} added, {c['removed']} removed, {c['recreated']} recreated, "
            f"{c['changed']} changed, {c['unchanged']} unchanged")


def render_diff_markdown(d, out: IO[str]) -> None:
    from .escape import md_code, md_text
    lines = [f"### bpfmem: node maps {format_size(d.old.memlock)} → {format_size(d.new.memlock)} "
             f"({format_delta(d.delta_memlock)})", "", _diff_counts(d), "",
             "| map | type | status | memlock | Δ memlock | Δ entries | owner |",
             "|---|---|---|---:|---:|---:|---|"]
    for name, type_, status, memlock, dm, de, owner in _diff_rows(d):
        lines.append(f"| {md_code(name)} | {type_} | {status} | {memlock} | {dm} | {de} | "
                     f"{md_text(owner)} |")
    out.write("\n".join(lines) + "\n")


def render_diff_table(d, out: IO[str]) -> None:
    from .escape import console as Console, term
    from rich.table import Table
    console = Console(file=out, width=_piped_width(out, 140), highlight=False)
    t = Table(title=f"node maps {format_size(d.old.memlock)} -> {format_size(d.new.memlock)} "
                    f"({format_delta(d.delta_memlock)}): {_diff_counts(d)}", title_justify="left")
    for col in ("map", "type", "status", "memlock", "Δ memlock", "Δ entries", "owner"):
        t.add_column(col, justify="right" if col.startswith(("memlock", "Δ")) else "left",
                     no_wrap=True)
    for row in _diff_rows(d):
        t.add_row(*map(term, row))
    console.print(t)
    moved = [g for g in d.cgroups if g.delta][:10]
    if moved:
        g = Table(title="memlock per cgroup", title_justify="left")
        for col in ("cgroup", "old", "new", "Δ"):
            g.add_column(col, justify="left" if col == "cgroup" else "right")
        for r in moved:
            g.add_row(term(r.cgroup or "(no process holds them)"), format_size(r.old), format_size(r.new),
                      format_delta(r.delta))
        console.print(g)
