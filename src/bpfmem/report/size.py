"""The pages of ``bpfmem size``, ``size diff`` and the binary-size gate, drawn from their
results (:class:`~bpfmem.analysis.size.SizeResult`, ``SizeDiff``, ``BinaryCheck``): table
(rich), markdown, junit (the gate) and html (a treemap of the new build coloured by growth,
:mod:`.size_html`). Their JSON documents are made in :mod:`.documents`, from the same rows
(:func:`shown_rows`, :func:`shown_deltas`, :func:`treemap_rows`)."""

from __future__ import annotations

from ..units import format_share

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import IO, Any

from ..units import format_bytes, format_delta as _delta, format_size as fs
from .text import _say

NEEDS_GO_SRC = ("why it is linked needs the program's source: --go-src DIR (the main "
                "package's directory; bpfmem runs `go list -deps -json` there)")


# --- text ---------------------------------------------------------------------------------

def _title(rep) -> str:
    bits = [rep.kind == "go" and (rep.go_version or "Go") or "ELF"]
    if rep.stripped:
        bits.append("stripped")
    if rep.pie:
        bits.append("PIE")
    if rep.pclntab_layout:
        bits.append(f"pclntab {rep.pclntab_layout}+ ({rep.pclntab_found_by})")
    return ", ".join(bits)


def why_note(why, rep) -> str | None:
    """What to say when there is no why-linked for a Go binary (the source is needed)."""
    return NEEDS_GO_SRC if why is None and rep is not None and rep.kind == "go" else None


CHAIN_ENDS = 4   # names shown at each end of a long import chain in text and markdown


def chain_words(chain, arrow: str = " -> ") -> str:
    """An import chain as ``a -> b -> c``; one longer than twice CHAIN_ENDS names keeps its
    first and last CHAIN_ENDS with the count of those between (a chain-shaped graph of 6,000
    packages made a line of 6,000 names). JSON keeps every name."""
    n = len(chain)
    if n <= 2 * CHAIN_ENDS + 1:
        return arrow.join(chain)
    head, tail = chain[:CHAIN_ENDS], chain[n - CHAIN_ENDS:]
    return arrow.join((*head, f"... ({n - 2 * CHAIN_ENDS} more) ...", *tail))


def _why_lines(why, note: str | None, md: bool = False) -> list[str]:
    if why is None:
        return [f"_{note}_" if md else note] if note else []
    out = [f"> note: {n}" if md else f"note: {n}" for n in why.notes]
    for s in why.savings:
        imp = f"{s.importer} -> {s.imported}"
        chain = chain_words(s.chain)
        n = s.count
        pk = ", ".join(s.packages[:5]) + (" ..." if n > 5 else "")
        npk = f"{n} package{'s' if n != 1 else ''}"
        if md:
            out.append(f"- dropping the import `{imp}` saves **{fs(s.saves)}** "
                       f"({npk}: {pk}); chain: `{chain}`")
        else:
            out.append(f"dropping the import {imp} saves {fs(s.saves)}")
            out.append(f"    chain: {chain}")
            out.append(f"    {npk}: {pk}")
    return out


def shown_rows(rep, by: str, top: int):
    """(the ``top`` largest groups of ``rep`` by ``by`` (0: all), (count, file, vm) of the
    rest)."""
    rows = rep.group(by)
    shown = rows if top <= 0 else rows[:top]
    rest = rows[len(shown):]
    return shown, (len(rest), sum(r.file for r in rest), sum(r.vm for r in rest))


def shown_deltas(diff):
    """(the ``top`` largest changes of a SizeDiff (0: all), (count, delta) of the rest)."""
    shown = diff.deltas if diff.top <= 0 else diff.deltas[:diff.top]
    rest = diff.deltas[len(shown):]
    return shown, (len(rest), sum(d.delta for d in rest))


def treemap_rows(diff) -> list[dict[str, Any]]:
    """The new build's packages (file bytes > 0), each with its module and its size in the
    old build (the treemap's cells; the diff document's ``treemap``)."""
    o_pk = diff.old.package_bytes()
    return [{"package": p.name, "module": p.module, "file": p.file,
             "old": o_pk.get(p.name, 0)} for p in diff.new.group("package") if p.file > 0]


def size_table(result, out: IO[str]) -> None:
    from rich import box
    from .escape import console as Console
    from rich.table import Table
    from rich.text import Text
    con = Console(file=out, highlight=False)
    by = result.by
    for rep in result.reports:
        con.print(Text(f"{rep.path}: {fs(rep.file_size)} file "
                       f"({format_bytes(rep.file_size)} bytes), "
                       f"{fs(rep.vm_size)} in memory"
                       + (f" ({fs(rep.vm_untouched)} of it mapped, never touched)"
                          if rep.vm_untouched else "") + f"; {_title(rep)}", style="bold"))
        if rep.main_module or rep.main_path:
            m = rep.main_module
            _say(con, "  main: ", f"{m.path + ' ' + m.version if m else rep.main_path}, "
                 + _modules_said(rep, by))
        rows, (count, o_file, o_vm) = shown_rows(rep, by, result.top)
        whole = max(rep.file_size, 1)
        lines = [(r.name, r.module if by == "package" and r.module != r.name else "",
                  fs(r.file), format_share(r.file / whole), fs(r.vm)) for r in rows]
        if count:
            lines.append((f"({count} more)", "", fs(o_file), format_share(o_file / whole),
                          fs(o_vm)))
        for with_module in ((True, False) if by == "package" else (False,)):
            t = Table(box=box.SIMPLE_HEAD)
            t.add_column(by)
            if with_module:
                t.add_column("module")
            for c in ("file", "share", "memory"):
                t.add_column(c, justify="right")
            for name, module, *figures in lines:
                t.add_row(name, *([module] if with_module else []), *figures)
            if _fits(con, t):
                break
        else:
            t = _listing(by, lines, con.width)
        con.print(t)
        for n in rep.notes:
            _say(con, "  note: ", n, "yellow")
    first = result.reports[0] if result.reports else None
    for line in _why_lines(result.why, why_note(result.why, first)):
        out.write(line + "\n")        # plain lines: never wrapped, easy to grep


def _modules_said(rep, by: str) -> str:
    """How many dependency modules the build info lists; with none (a GOPATH or toolchain
    build), that the module column is read from the package paths."""
    from ..units import count
    if rep.modules:
        return count(len(rep.modules), "dependency module")
    return ("its build info lists no dependency modules"
            + ("; the module column is read from the package paths"
               if by in ("package", "module") else ""))


def _fits(con, table) -> bool:
    """Whether ``table`` fits the console with no word cut (else the module column goes, and
    then the table gives way to :func:`_listing`)."""
    from rich.measure import Measurement
    return Measurement.get(con, con.options.update_width(1 << 16), table).minimum <= con.width


def _listing(by: str, lines, width: int):
    """Narrower than a table of the longest names can be: one line a row, the figures first
    in fixed columns and the name after them; a name longer than the room left wraps at its
    ``/`` under itself (an import path keeps its parts whole)."""
    from rich.text import Text
    w = [max([len(h)] + [len(x[i]) for x in lines]) for h, i in
         (("file", 2), ("share", 3), ("memory", 4))]
    lead = sum(w) + 2 * 3
    out = Text(f"{'file':>{w[0]}}  {'share':>{w[1]}}  {'memory':>{w[2]}}  {by}\n", style="bold")
    room = max(width - lead, 20)
    for name, module, f, share, vm in lines:
        label = name + (f" ({module})" if module else "")
        parts, cur = [], ""
        for piece in label.replace("/", "/\0").split("\0"):
            if cur and len(cur) + len(piece) > room:
                parts.append(cur)
                cur = ""
            cur += piece
        parts.append(cur)
        out.append(f"{f:>{w[0]}}  {share:>{w[1]}}  {vm:>{w[2]}}  {parts[0]}\n")
        for more in parts[1:]:
            out.append(" " * (lead + 2) + more + "\n")
    return out


def size_markdown(result, out: IO[str]) -> None:
    lines = []
    by = result.by
    for rep in result.reports:
        lines += [f"### `{rep.path}`: {fs(rep.file_size)} ({_title(rep)})", "",
                  f"| {by} | file | share | memory |", "|---|---:|---:|---:|"]
        rows, (count, o_file, _o_vm) = shown_rows(rep, by, result.top)
        for r in rows:
            lines.append(f"| `{r.name}` | {fs(r.file)} | "
                         f"{format_share(r.file / max(rep.file_size, 1))} | {fs(r.vm)} |")
        if count:
            lines.append(f"| ({count} more) | {fs(o_file)} | | |")
        lines.append("")
    first = result.reports[0] if result.reports else None
    lines += _why_lines(result.why, why_note(result.why, first), md=True)
    out.write("\n".join(lines) + "\n")


def diff_table(diff, out: IO[str]) -> None:
    from rich import box
    from .escape import console as Console
    from rich.table import Table
    from rich.text import Text
    con = Console(file=out, highlight=False)
    old, new = diff.old.file_size, diff.new.file_size
    vo, vn = diff.old.vm_size, diff.new.vm_size
    con.print(Text(f"{diff.old.path} -> {diff.new.path}: {fs(old)} -> "
                   f"{fs(new)} ({_delta(new - old)}, "
                   f"{format_bytes(new - old, signed=True)} bytes); memory {fs(vo)} -> "
                   f"{fs(vn)} ({_delta(vn - vo)})",
                   style="bold"))
    for w in diff.warnings:
        _say(con, "  warning: ", w, "yellow")
    tab = Table(box=box.SIMPLE_HEAD)
    for c, j in ((diff.by, "left"), ("old", "right"), ("new", "right"),
                 ("change", "right"), ("memory change", "right")):
        tab.add_column(c, justify=j)
    rows, (count, rest) = shown_deltas(diff)
    for r in rows:
        if r.delta == 0 and r.vm_delta == 0:
            continue
        style = "red" if r.delta > 0 else "green"
        tab.add_row(r.name, fs(r.old), fs(r.new), Text(_delta(r.delta), style=style),
                    _delta(r.vm_delta))
    if count:
        tab.add_row(f"({count} more)", "", "", _delta(rest), "")
    con.print(tab)
    for line in _why_lines(diff.why, why_note(diff.why, diff.new)):
        out.write(line + "\n")        # plain lines: never wrapped, easy to grep


def diff_markdown(diff, out: IO[str]) -> None:
    old, new = diff.old.file_size, diff.new.file_size
    vo, vn = diff.old.vm_size, diff.new.vm_size
    lines = [f"### bpfmem size diff: {fs(old)} → {fs(new)} "
             f"(**{_delta(new - old)}**), memory {fs(vo)} → {fs(vn)} ({_delta(vn - vo)})", ""]
    lines += [f"> **warning:** {w}" for w in diff.warnings] + ([""] if diff.warnings else [])
    lines += [f"| {diff.by} | old | new | change | memory change |", "|---|---:|---:|---:|---:|"]
    rows, (count, rest) = shown_deltas(diff)
    for r in rows:
        if r.delta or r.vm_delta:
            lines.append(f"| `{r.name}` | {fs(r.old)} | {fs(r.new)} | {_delta(r.delta)} | "
                         f"{_delta(r.vm_delta)} |")
    if count:
        lines.append(f"| ({count} more) | | | {_delta(rest)} | |")
    lines.append("")
    lines += _why_lines(diff.why, why_note(diff.why, diff.new), md=True)
    out.write("\n".join(lines) + "\n")


def check_table(check, out: IO[str]) -> None:
    verdict = "PASS" if check.passed else "FAIL"
    out.write(f"{verdict}  binary size\n")
    for v in check.verdicts:
        what = "file" if v.what == "file" else f"modules {v.what}"
        out.write(f"  {'ok  ' if v.ok else 'OVER'}  {v.path}: {what} {fs(v.size)}"
                  f" (limit {fs(v.limit)})\n")
    for f in check.failures:
        out.write(f"  - {f}\n")


def check_markdown(check, out: IO[str]) -> None:
    lines = [f"### bpfmem binary size: {'✅ **pass**' if check.passed else '❌ **fail**'}", "",
             "| binary | what | size | limit | verdict |", "|---|---|---:|---:|---|"]
    for v in check.verdicts:
        lines.append(f"| `{v.path}` | {v.what} | {fs(v.size)} | {fs(v.limit)} | "
                     f"{'pass' if v.ok else '**fail**'} |")
    out.write("\n".join(lines) + "\n")


def check_junit(check, out: IO[str]) -> None:
    # imported here: xml.sax.saxutils pulls in urllib.request, http.client and ssl, which
    # no other size output needs (a third of `bpfmem size`'s start-up)
    from xml.sax.saxutils import escape, quoteattr
    cases = check.verdicts
    fails = sum(1 for v in cases if not v.ok)
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuites name="bpfmem binary size" tests="{len(cases)}" failures="{fails}">',
           f'  <testsuite name="binary-size" tests="{len(cases)}" failures="{fails}">']
    for v in cases:
        name = f"{v.path} {v.what} within {fs(v.limit)}"
        lines.append(f'    <testcase classname="bpfmem.binary-size" name={quoteattr(name)}>')
        text = f"{v.what} {format_bytes(v.size)} bytes"
        lines.append(f"      <system-out>{escape(text)}</system-out>")
        if not v.ok:
            msg = f"{fs(v.size)} > {fs(v.limit)}"
            lines.append(f"      <failure message={quoteattr(msg)}>{escape(msg)}</failure>")
        lines.append("    </testcase>")
    lines += ["  </testsuite>", "</testsuites>"]
    out.write("\n".join(lines) + "\n")


def size_html(diff, out: IO[str]) -> None:
    """A SizeDiff as a self-contained page (:mod:`.size_html`)."""
    from .size_html import render_size_diff_html
    out.write(render_size_diff_html(diff))
