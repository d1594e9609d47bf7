"""Renderers for the ``check`` and ``diff`` documents: table (rich), json, markdown (a pull
request comment) and junit (one test case per object and budget). They read only the
documents."""

from __future__ import annotations

import json
from typing import IO

from ..analysis.quantity import format_size as fs
from .escape import md_code, md_text, term


def _kernel(k: dict) -> str:
    """'Linux 6.1.0-57-cloud-amd64, 2 CPUs' for a kernel's own BTF, 'Linux 6.1.0 (release
    table), 2 CPUs' for a release number."""
    if k.get("build") and k.get("exact"):
        return f"Linux {k['build']}, {k['possible_cpus']} CPUs"
    table = " (release table)" if k.get("exact") is False else ""
    return f"Linux {k['version']}{table}, {k['possible_cpus']} CPUs"


# -- check ----------------------------------------------------------------------------------
def check_markdown(doc: dict) -> str:
    verdict = "✅ **pass**" if doc["pass"] else "❌ **fail**"
    worst = max(doc["results"], key=lambda r: r["total"])
    lines = [f"### bpfmem check: {verdict}",
             f"eBPF maps charge **{fs(worst['total'])}** at "
             f"{'full' if doc['full'] else 'start'} ({worst['share_of_limit']:.0%} of the "
             f"{fs(doc['limit'])} limit; budget {fs(doc['budget'])} = "
             f"{doc['max_fraction']:g} of it), worst case {_kernel(worst['kernel'])}.", ""]
    whatif = bool(doc["whatif"])
    lines += ["| kernel | CPUs | " + ("before what-if | " if whatif else "") +
              "maps charge | budget | verdict |",
              "|---|---:|" + ("---:|" if whatif else "") + "---:|---:|---|"]
    loaders = {str(r.get("loader")) for r in doc["results"]}
    for r in doc["results"]:
        before = f"{fs(r.get('total_before_whatif'))} | " if whatif else ""
        lo = f" ({r['loader']})" if len(loaders) > 1 else ""
        lines.append(f"| {r['kernel']['version']}{lo} | {r['kernel']['possible_cpus']} | {before}"
                     f"{fs(r['total'])} | {fs(r['budget'])} | "
                     f"{'pass' if r['pass'] else '**fail**'} |")
    lines += ["", "| top maps | charge | share |", "|---|---:|---:|"]
    for o in worst["offenders"]:
        lines.append(f"| {md_code(o['object'] + '/' + o['map'])} | {fs(o['charged'])} | "
                     f"{o['share']:.0%} |")
    refused = [m for r in doc["results"] for m in r.get("refused", [])]
    if refused:
        lines += ["", "refused maps, not created and left out of the totals: "
                  + ", ".join(md_code(m) for m in dict.fromkeys(refused))]
    fails = [f for r in doc["results"] for f in r["failures"]]
    if fails:
        lines += ["", "<details><summary>failures</summary>", ""]
        lines += [f"- {md_text(f)}" for f in dict.fromkeys(fails)] + ["", "</details>"]
    if doc["whatif"]:
        lines += ["", "what-if: " + "; ".join(md_code(w) for w in doc["whatif"])]
    notes = dict.fromkeys(n for r in doc["results"] for n in r.get("notes", []))
    lines += [""] + [f"> note: {md_text(n)}" for n in notes] if notes else []
    return "\n".join(lines) + "\n"


def check_junit(doc: dict, *, timestamp: str | None = None, seconds: float = 0.0,
                hostname: str | None = None) -> str:
    """JUnit XML that validates against Jenkins xUnit's junit-10.xsd (and carries what Ant's
    schema requires too): one suite per kernel/CPU profile, one test case per check, so a
    test case is exactly one comparison and never contradicts another. ``timestamp`` (ISO
    8601, no zone, as Ant writes it) and ``seconds`` are when and how long the check ran."""
    import socket
    import xml.etree.ElementTree as ET
    from datetime import datetime, timezone
    if timestamp is None:
        timestamp = datetime.now(timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds")
    hostname = hostname or socket.gethostname() or "localhost"
    results = doc["results"]
    per_suite = f"{seconds / max(1, len(results)):.3f}"
    root = ET.Element("testsuites", name="bpfmem check",
                      tests=str(sum(len(r["checks"]) for r in results)),
                      failures=str(sum(1 for r in results for c in r["checks"] if not c["pass"])),
                      errors="0", time=f"{seconds:.3f}")
    for i, r in enumerate(results):
        k = r["kernel"]
        suite = f"linux-{k['version']}-{k['possible_cpus']}cpus"
        ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(r["checks"])),
                           failures=str(sum(1 for c in r["checks"] if not c["pass"])),
                           errors="0", skipped="0", time=per_suite, timestamp=timestamp,
                           hostname=hostname, id=str(i), package="bpfmem")
        props = ET.SubElement(ts, "properties")
        for name, value in (("kernel", k["version"]), ("possible_cpus", k["possible_cpus"]),
                            ("limit", doc["limit"]), ("max_fraction", doc["max_fraction"]),
                            ("budget", doc["budget"]), ("measure", doc["measure"])):
            ET.SubElement(props, "property", name=name, value=str(value))
        for c in r["checks"]:
            tc = ET.SubElement(ts, "testcase", classname=f"bpfmem.{suite}", name=c["name"],
                               time="0")
            if not c["pass"]:
                msg = "; ".join(c["failures"])
                ET.SubElement(tc, "failure", message=msg, type="bpfmem.budget").text = msg
            if c["value"] is not None:
                limit = f" (limit {c['limit']:,})" if c["limit"] is not None else ""
                ET.SubElement(tc, "system-out").text = f"{c['value']:,} bytes{limit}"
        ET.SubElement(ts, "system-out").text = (f"maps charge {r['total']:,} bytes at "
                                                f"{'full' if doc['full'] else 'create'}")
        ET.SubElement(ts, "system-err").text = ""
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def check_table(doc: dict, out: IO[str]) -> None:
    from rich import box
    from .escape import console as Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=out, highlight=False)
    for r in doc["results"]:
        verdict = Text("PASS", style="bold green") if r["pass"] else Text("FAIL", style="bold red")
        loader = r.get("loader")
        loader = f" [{', '.join(loader) if isinstance(loader, list) else loader}]" if loader \
            else ""
        console.print(Text.assemble(verdict, f"  {_kernel(r['kernel'])}{loader}: maps charge "
                                    f"{fs(r['total'])} at {'full' if doc['full'] else 'start'}"
                                    f", budget {fs(r['budget'])} ({doc['max_fraction']:g} of "
                                    f"{fs(doc['limit'])}), {r['share_of_limit']:.0%} of the "
                                    "limit"))
        t = Table(box=box.SIMPLE_HEAD)
        t.add_column("top maps")
        t.add_column("charge", justify="right")
        t.add_column("share", justify="right")
        for o in r["offenders"]:
            t.add_row(term(f"{o['object']}/{o['map']}"), fs(o["charged"]), f"{o['share']:.0%}")
        console.print(t)
        for f in r["failures"]:
            console.print(Text(f"  - {f}", style="red"))
        if r.get("refused"):
            console.print(Text(f"  the total leaves out {len(r['refused'])} refused map(s), "
                               f"not created: {', '.join(r['refused'])}", style="red"))
        for n in r.get("notes", []):
            console.print(Text(f"  note: {n}", style="yellow"), overflow="fold")
        if r.get("total_before_whatif") is not None:
            console.print(Text(f"  what-if: {fs(r['total_before_whatif'])} before -> "
                               f"{fs(r['total'])} after", style="yellow"))
    if doc["whatif"]:
        console.print(Text("what-if: " + "; ".join(doc["whatif"]), style="yellow"))


# -- diff -----------------------------------------------------------------------------------
def _delta(n: int) -> str:
    return ("+" if n > 0 else "") + fs(n) if n else "0"


def _map_label(doc: dict):
    """'map' when every map comes from one object, else 'object/map'."""
    single = len({m["object"] for m in doc["maps"]}) <= 1
    return (lambda m: m["map"]) if single else (lambda m: f"{m['object']}/{m['map']}")


def diff_markdown(doc: dict) -> str:
    k = doc["kernel"]
    label = _map_label(doc)
    changed = [m for m in doc["maps"] if m["status"] != "unchanged"]
    head = (f"### bpfmem diff: maps at start {fs(doc['old']['charged_at_create'])} → "
            f"**{fs(doc['new']['charged_at_create'])}** ({_delta(doc['delta_at_create'])})")
    lines = [head, ""]
    if doc["old"].get("loaders") != doc["new"].get("loaders"):
        lines += [f"Loaders: {', '.join(doc['old'].get('loaders', []))} → "
                  f"{', '.join(doc['new'].get('loaders', []))}.", ""]
    summary = (f"On the first start after the upgrade the new pod is charged "
               f"**{fs(doc['upgrade_charge'])}** of maps, {fs(doc['newly_charged'])} of them "
               "for maps the old release did not have (or pinned maps that must be recreated)")
    if doc.get("limit"):
        summary += f": **{doc['new_share_of_limit']:.0%}** of the {fs(doc['limit'])} limit"
    lines += [summary + f" ({_kernel(k)}).", ""]
    if doc["pin_incompatible"]:
        lines += ["⚠️ pinned maps incompatible with the running release (their state is lost on "
                  "upgrade): " + ", ".join(md_code(n) for n in doc["pin_incompatible"]), ""]
    if changed:
        lines += ["| map | change | at start | delta | when full | delta |",
                  "|---|---|---:|---:|---:|---:|"]
        for m in changed:
            new = m["new"] or {}
            what = m["status"] if not m["changes"] else "; ".join(m["changes"])
            lines.append(f"| {md_code(label(m))} | {md_text(what)} | "
                         f"{fs(new.get('charged_at_create')) if new else '—'} | {_delta(m['delta_at_create'])} | "
                         f"{fs(new.get('charged_full'))} | {_delta(m['delta_full'])} |")
    else:
        lines.append("No map changed.")
    lines += ["", "<details><summary>totals</summary>", "",
              "| | old | new | delta |", "|---|---:|---:|---:|"]
    for f, label in (("charged_at_create", "charged at start"),
                     ("charged_full", "charged when full"),
                     ("memlock_at_create", "memlock at start")):
        lines.append(f"| {label} | {fs(doc['old'][f])} | {fs(doc['new'][f])} | "
                     f"{_delta(doc['new'][f] - doc['old'][f])} |")
    lines += ["", "</details>"]
    for side in ("old", "new"):
        if doc[side].get("refused"):
            lines += ["", f"⚠️ {side}: refused maps, not created and not counted in the "
                      f"totals: " + ", ".join(md_code(n) for n in doc[side]["refused"])]
    if doc["whatif"]:
        lines += ["", "what-if on the new side: " + "; ".join(md_code(w) for w in doc["whatif"])]
    return "\n".join(lines) + "\n"


def diff_table(doc: dict, out: IO[str]) -> None:
    from rich import box
    from .escape import console as Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=out, highlight=False)
    console.print(f"maps at start: {fs(doc['old']['charged_at_create'])} -> "
                  f"{fs(doc['new']['charged_at_create'])} ({_delta(doc['delta_at_create'])}); "
                  f"when full {fs(doc['old']['charged_full'])} -> "
                  f"{fs(doc['new']['charged_full'])}  [{_kernel(doc['kernel'])}]")
    share = (f" = {doc['new_share_of_limit']:.0%} of the {fs(doc['limit'])} limit"
             if doc.get("limit") else "")
    console.print(f"first start after upgrading: {fs(doc['upgrade_charge'])} charged to the "
                  f"new pod{share}; {fs(doc['newly_charged'])} for new or recreated maps")
    if doc["old"].get("loaders") != doc["new"].get("loaders"):
        console.print(f"loaders: {', '.join(doc['old'].get('loaders', []))} -> "
                      f"{', '.join(doc['new'].get('loaders', []))}")
    for side in ("old", "new"):
        if doc[side].get("refused"):
            console.print(Text(f"{side}: refused maps, not created and not counted in the "
                               f"totals: {', '.join(doc[side]['refused'])}", style="red"))
    label = _map_label(doc)
    t = Table(box=box.SIMPLE_HEAD)
    for col, j in (("map", "left"), ("status", "left"), ("at start", "right"),
                   ("delta", "right"), ("full", "right"), ("delta", "right")):
        t.add_column(col, justify=j, overflow="fold")
    style = {"added": "green", "removed": "red", "changed": "yellow"}
    for m in doc["maps"]:
        if m["status"] == "unchanged":
            continue
        new = m["new"] or {}
        status = m["status"] + (" (pin incompatible)" if m["pin_incompatible"] else "")
        if m["changes"]:
            status += ": " + "; ".join(m["changes"])
        t.add_row(term(label(m)), Text(status, style=style.get(m["status"], "")),
                  fs(new.get("charged_at_create")), _delta(m["delta_at_create"]),
                  fs(new.get("charged_full")), _delta(m["delta_full"]))
    console.print(t)


def maps_markdown(doc: dict) -> str:
    """The ``maps`` document as markdown: per object, its maps and their memory."""
    lines = []
    k = doc.get("kernel")
    for o in doc["objects"]:
        lines.append(f"### {md_text(o['path'] or o['name'])}: {len(o['maps'])} maps"
                     + (f" (Linux {k['version']}, {k['possible_cpus']} CPUs)" if k else ""))
        mem = "memory" in o
        lines += ["", "| map | type | key | value | max_entries | flags" +
                  (" | memlock | charged | full |" if mem else " |"),
                  "|---|---|---:|---:|---:|---" + ("|---:|---:|---:|" if mem else "|")]
        for m in o["maps"]:
            row = (f"| {md_code(m['name'])} | {m['type']} | {m['key_size']} | {m['value_size']} | "
                   f"{m['max_entries']:,} | {' '.join(m['flags']) or '-'}")
            if mem:
                x = m["memory"]
                row += (" | refused, not created | | |" if x.get("rejected") else
                        f" | {fs(x['memlock_at_create'])} | {fs(x['charged_at_create'])} | "
                        f"{fs(x['charged_full'])} |")
            lines.append(row + ("" if mem else " |"))
        if mem:
            t = o["memory"]
            refused = t.get("refused") or []
            label = "**total**" + (f" (refused, not counted: {', '.join(refused)})"
                                   if refused else "")
            lines.append(f"| {label} | | | | | | {fs(t['memlock_at_create'])} | "
                         f"**{fs(t['charged_at_create'])}** | {fs(t['charged_full'])} |")
            if "memory_before" in o:
                b = o["memory_before"]
                lines += ["", f"what-if ({'; '.join(map(md_code, doc.get('whatif', [])))}): "
                          "charged at create "
                          f"{fs(b['charged_at_create'])} → {fs(t['charged_at_create'])}"]
        lines.append("")
    return "\n".join(lines)


def advise_markdown(doc: dict) -> str:
    k = doc["kernel"]
    lines = []
    for o in doc["objects"]:
        lines += [f"### bpfmem advise: {md_text(o['path'] or o['name'])} ({_kernel(k)})", "",
                  f"Changes that save **{fs(o['saves_at_create'])}** charged at start:", "",
                  "| map | advice | saves at start | saves when full |", "|---|---|---:|---:|"]
        for a in o["advice"]:
            full = "—" if a["saves_full"] is None else fs(a["saves_full"])
            lines.append(f"| {md_code(a['map'])} | {md_text(a['title'].split(': ', 1)[-1])} | "
                         f"{fs(a['saves_at_create'])} | {full} |")
        if o["apply"]:
            lines += ["", "what-if: " + md_code("bpfmem check ... " +
                                                " ".join(f"--set '{s}'" for s in o["apply"]))]
        lines.append("")
    return "\n".join(lines)


def advise_table(doc: dict, out: IO[str]) -> None:
    from rich import box
    from .escape import console as Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=out, highlight=False)
    said: dict[tuple[str, str], str] = {}      # (trade-off, kernel rule) -> first map
    for o in doc["objects"]:
        console.print(term(f"{o['path'] or o['name']} on {_kernel(doc['kernel'])}"))
        t = Table(box=box.SIMPLE_HEAD)
        t.add_column("map")
        t.add_column("what the programs do", overflow="fold")
        t.add_column("verdict")
        for m in o["maps"]:
            style = {"datapath_writes": "yellow", "read_only": "green",
                     "unknown": "red"}.get(m["verdict"], "dim")
            t.add_row(term(m["name"]), ", ".join(m["ops"]) or "-", Text(m["verdict"], style=style))
        console.print(t)
        for a in o["advice"]:
            full = a["saves_full"]
            saving = (f"saves {fs(a['saves_at_create'])} at start"
                      + ("" if full is None else
                         f"; when full {'saves ' + fs(full) if full >= 0 else 'costs ' + fs(-full) + ' more'}"))
            console.print(Text(f"* {a['title']}", style="bold"))
            if a["kind"] not in ("keep_prealloc", "percpu"):
                console.print(f"  {saving}")
            first = said.setdefault((a["tradeoff"], a["rule"]), a["map"])
            if first != a["map"]:       # the same paragraph again: once is enough
                console.print(Text(f"  trade-off and kernel: as for {first} above",
                                   style="dim"), overflow="fold")
                continue
            console.print(Text(f"  trade-off: {a['tradeoff']}", style="dim"), overflow="fold")
            console.print(Text(f"  kernel: {a['rule']}", style="dim"), overflow="fold")
        console.print(Text(f"total saving at start from the recommended changes: "
                           f"{fs(o['saves_at_create'])}", style="bold green"))


def render(doc: dict, fmt: str, out: IO[str], **junit) -> None:
    """Any document, any format (``junit`` takes check_junit's timestamp and seconds)."""
    kind = doc["schema"].split("/")[1]
    if kind == "advise":
        if fmt == "json":
            out.write(json.dumps(doc, indent=2) + "\n")
        elif fmt == "markdown":
            out.write(advise_markdown(doc))
        else:
            advise_table(doc, out)
        return
    if kind == "maps":
        if fmt != "markdown":
            raise ValueError(f"maps renders {fmt} elsewhere")
        out.write(maps_markdown(doc))
        return
    if fmt == "json":
        out.write(json.dumps(doc, indent=2) + "\n")
    elif fmt == "markdown":
        out.write(check_markdown(doc) if kind == "check" else diff_markdown(doc))
    elif fmt == "junit":
        if kind != "check":
            raise ValueError("junit is for `check` (one test case per object and budget)")
        out.write(check_junit(doc, **junit))
    elif fmt == "html":
        from .html import render_html
        out.write(render_html(doc if kind == "check" else None,
                              doc if kind == "diff" else None))
    else:
        (check_table if kind == "check" else diff_table)(doc, out)


