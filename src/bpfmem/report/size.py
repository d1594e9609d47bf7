"""Documents and renderers of ``bpfmem size``, ``size diff`` and the binary-size gate:
``bpfmem/size/v1``, ``bpfmem/size-diff/v1``, ``bpfmem/binary-check/v1``; table (rich), json,
markdown, junit (the gate) and html (a treemap of the new build coloured by growth). Builders
take analysis results; renderers read only the documents."""

from __future__ import annotations

import json
from typing import IO, Any
from xml.sax.saxutils import escape, quoteattr

from ..units import format_bytes, format_delta as _delta, format_size as fs
from .documents import BINARY_CHECK as CHECK_SCHEMA, SIZE as SIZE_SCHEMA, SIZE_DIFF as DIFF_SCHEMA
from .documents import document


# --- text ---------------------------------------------------------------------------------

def _title(b: dict) -> str:
    bits = [b["kind"] == "go" and (b["go_version"] or "Go") or "ELF"]
    if b["stripped"]:
        bits.append("stripped")
    if b["pie"]:
        bits.append("PIE")
    if b["pclntab"]:
        bits.append(f"pclntab {b['pclntab']['layout']}+ ({b['pclntab']['found_by']})")
    return ", ".join(bits)


def _why_lines(why: dict | None, note: str | None, md: bool = False) -> list[str]:
    if why is None:
        return [f"_{note}_" if md else note] if note else []
    out = []
    for s in why["savings"]:
        imp = f"{s['importer']} -> {s['imported']}"
        chain = " -> ".join(s["chain"])
        pk = ", ".join(s["packages"][:5]) + (" ..." if s["package_count"] > 5 else "")
        n = s["package_count"]
        npk = f"{n} package{'s' if n != 1 else ''}"
        if md:
            out.append(f"- dropping the import `{imp}` saves **{fs(s['saves'])}** "
                       f"({npk}: {pk}); chain: `{chain}`")
        else:
            out.append(f"dropping the import {imp} saves {fs(s['saves'])}")
            out.append(f"    chain: {chain}")
            out.append(f"    {npk}: {pk}")
    return out


def size_table(doc: dict, out: IO[str]) -> None:
    from rich import box
    from .escape import console as Console
    from rich.table import Table
    from rich.text import Text
    con = Console(file=out, highlight=False)
    for b in doc["binaries"]:
        con.print(Text(f"{b['path']}: {fs(b['file_size'])} file "
                       f"({format_bytes(b['file_size'])} bytes), "
                       f"{fs(b['vm_size'])} in memory; {_title(b)}", style="bold"))
        if b["main_module"] or b["main_package"]:
            m = b["main_module"]
            con.print(f"  main: {m['path'] + ' ' + m['version'] if m else b['main_package']}"
                      f", {len(b['modules'])} dependency modules")
        t = Table(box=box.SIMPLE_HEAD)
        t.add_column(doc["by"])
        if doc["by"] == "package":
            t.add_column("module")
        t.add_column("file", justify="right")
        t.add_column("share", justify="right")
        t.add_column("memory", justify="right")
        for r in b["rows"]:
            mod = r.get("module", "")
            cells = [r["name"]] + ([mod if mod != r["name"] else ""]
                                   if doc["by"] == "package" else [])
            t.add_row(*cells, fs(r["file"]), f"{r['file'] / max(b['file_size'], 1):.1%}",
                      fs(r["vm"]))
        o = b["other"]
        if o["count"]:
            cells = [f"({o['count']} more)"] + ([""] if doc["by"] == "package" else [])
            t.add_row(*cells, fs(o["file"]), f"{o['file'] / max(b['file_size'], 1):.1%}",
                      fs(o["vm"]))
        con.print(t)
        for n in b["notes"]:
            con.print(Text(f"  note: {n}", style="yellow"))
    for line in _why_lines(doc.get("why"), doc.get("why_note")):
        out.write(line + "\n")        # plain lines: never wrapped, easy to grep


def size_markdown(doc: dict) -> str:
    lines = []
    for b in doc["binaries"]:
        lines += [f"### `{b['path']}`: {fs(b['file_size'])} ({_title(b)})", "",
                  f"| {doc['by']} | file | share | memory |", "|---|---:|---:|---:|"]
        for r in b["rows"]:
            lines.append(f"| `{r['name']}` | {fs(r['file'])} | "
                         f"{r['file'] / max(b['file_size'], 1):.1%} | {fs(r['vm'])} |")
        if b["other"]["count"]:
            lines.append(f"| ({b['other']['count']} more) | {fs(b['other']['file'])} | | |")
        lines.append("")
    lines += _why_lines(doc.get("why"), doc.get("why_note"), md=True)
    return "\n".join(lines) + "\n"


def diff_table(doc: dict, out: IO[str]) -> None:
    from rich import box
    from .escape import console as Console
    from rich.table import Table
    from rich.text import Text
    con = Console(file=out, highlight=False)
    t = doc["total"]
    con.print(Text(f"{doc['old']['path']} -> {doc['new']['path']}: {fs(t['old'])} -> "
                   f"{fs(t['new'])} ({_delta(t['delta'])}, "
                   f"{format_bytes(t['delta'], signed=True)} bytes)",
                   style="bold"))
    tab = Table(box=box.SIMPLE_HEAD)
    for c, j in ((doc["by"], "left"), ("old", "right"), ("new", "right"),
                 ("change", "right")):
        tab.add_column(c, justify=j)
    for r in doc["rows"]:
        if r["delta"] == 0:
            continue
        style = "red" if r["delta"] > 0 else "green"
        tab.add_row(r["name"], fs(r["old"]), fs(r["new"]), Text(_delta(r["delta"]), style=style))
    if doc["other"]["count"]:
        tab.add_row(f"({doc['other']['count']} more)", "", "", _delta(doc["other"]["delta"]))
    con.print(tab)
    for line in _why_lines(doc.get("why"), doc.get("why_note")):
        out.write(line + "\n")        # plain lines: never wrapped, easy to grep


def diff_markdown(doc: dict) -> str:
    t = doc["total"]
    lines = [f"### bpfmem size diff: {fs(t['old'])} → {fs(t['new'])} "
             f"(**{_delta(t['delta'])}**)", "",
             f"| {doc['by']} | old | new | change |", "|---|---:|---:|---:|"]
    for r in doc["rows"]:
        if r["delta"]:
            lines.append(f"| `{r['name']}` | {fs(r['old'])} | {fs(r['new'])} | "
                         f"{_delta(r['delta'])} |")
    if doc["other"]["count"]:
        lines.append(f"| ({doc['other']['count']} more) | | | {_delta(doc['other']['delta'])} |")
    lines.append("")
    lines += _why_lines(doc.get("why"), doc.get("why_note"), md=True)
    return "\n".join(lines) + "\n"


def check_table(doc: dict, out: IO[str]) -> None:
    verdict = "PASS" if doc["pass"] else "FAIL"
    out.write(f"{verdict}  binary size\n")
    for v in doc["verdicts"]:
        what = "file" if v["what"] == "file" else f"modules {v['what']}"
        out.write(f"  {'ok  ' if v['pass'] else 'OVER'}  {v['path']}: {what} {fs(v['size'])}"
                  f" (limit {fs(v['limit'])})\n")
    for f in doc["failures"]:
        out.write(f"  - {f}\n")


def check_markdown(doc: dict) -> str:
    lines = [f"### bpfmem binary size: {'✅ **pass**' if doc['pass'] else '❌ **fail**'}", "",
             "| binary | what | size | limit | verdict |", "|---|---|---:|---:|---|"]
    for v in doc["verdicts"]:
        lines.append(f"| `{v['path']}` | {v['what']} | {fs(v['size'])} | {fs(v['limit'])} | "
                     f"{'pass' if v['pass'] else '**fail**'} |")
    return "\n".join(lines) + "\n"


def check_junit(doc: dict) -> str:
    cases = doc["verdicts"]
    fails = sum(1 for v in cases if not v["pass"])
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuites name="bpfmem binary size" tests="{len(cases)}" failures="{fails}">',
           f'  <testsuite name="binary-size" tests="{len(cases)}" failures="{fails}">']
    for v in cases:
        name = f"{v['path']} {v['what']} within {fs(v['limit'])}"
        out.append(f'    <testcase classname="bpfmem.binary-size" name={quoteattr(name)}>')
        text = f"{v['what']} {format_bytes(v['size'])} bytes"
        out.append(f"      <system-out>{escape(text)}</system-out>")
        if not v["pass"]:
            msg = f"{fs(v['size'])} > {fs(v['limit'])}"
            out.append(f"      <failure message={quoteattr(msg)}>{escape(msg)}</failure>")
        out.append("    </testcase>")
    out += ["  </testsuite>", "</testsuites>"]
    return "\n".join(out) + "\n"


def render(doc: dict, fmt: str, out: IO[str]) -> None:
    """Any of the three documents in ``fmt``."""
    schema = doc["schema"]
    if fmt == "json":
        out.write(json.dumps(doc, indent=2) + "\n")
        return
    if schema == SIZE_SCHEMA:
        table, md = size_table, size_markdown
    elif schema == DIFF_SCHEMA:
        table, md = diff_table, diff_markdown
        if fmt == "html":
            from .size_html import render_size_diff_html
            out.write(render_size_diff_html(doc))
            return
    else:
        table, md = check_table, check_markdown
        if fmt == "junit":
            out.write(check_junit(doc))
            return
    if fmt == "markdown":
        out.write(md(doc))
    elif fmt == "table":
        table(doc, out)
    else:
        raise ValueError(f"{schema} does not render as {fmt}")


# ---- the renderers of the table (report/formats.py): SizeResult, SizeDiff, BinaryCheck, each
# drawn from its document (by ``render`` above, as the command prints it) ----

def size_text(result, out: IO[str]) -> None:
    render(document(result), "table", out)


def size_markdown_of(result, out: IO[str]) -> None:
    render(document(result), "markdown", out)


def size_html(result, out: IO[str]) -> None:
    render(document(result), "html", out)


def size_junit(result, out: IO[str]) -> None:
    render(document(result), "junit", out)
