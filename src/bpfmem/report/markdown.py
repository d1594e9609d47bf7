"""Markdown (a pull request comment, a job summary) of the file-reading commands' results:
``maps`` (Inventory), ``check`` (CheckResult), ``diff`` (DiffResult), ``advise``
(AdviseResult) and a Matrix of per-kernel results. Each renderer draws a finished result's
fields; text from inputs is escaped by :mod:`.escape`'s Markdown rule."""

from __future__ import annotations

from ..units import format_share

from ..units import count

from typing import IO, Any

from ..units import format_delta as delta, format_size as fs
from .escape import md_code, md_text
from .hints import word
from .text import kernel_label, map_label


# -- check ----------------------------------------------------------------------------------
def check_markdown(r, out: IO[str]) -> None:
    b = r.budget
    verdict = "✅ **pass**" if r.passed else "❌ **fail**"
    worst = max(r.results, key=lambda p: p.total)
    lines = [f"### bpfmem check: {verdict}",
             f"eBPF maps charge **{fs(worst.total)}** at "
             f"{'full' if b.full else 'start'} ({worst.share_of_limit:.0%} of the "
             f"{fs(b.limit)} limit; budget {fs(b.budget)} = "
             f"{b.max_fraction:g} of it), worst case {kernel_label(worst.kernel)}.", ""]
    whatif = bool(r.whatif)
    lines += ["| kernel | CPUs | " + ("before what-if | " if whatif else "") +
              "maps charge | budget | headroom | verdict |",
              "|---|---:|" + ("---:|" if whatif else "") + "---:|---:|---:|---|"]

    def loader(p) -> str:      # as the check document writes it
        return p.loader if isinstance(p.loader, str) else str(list(p.loader))
    loaders = {loader(p) for p in r.results}
    for p in r.results:
        before = f"{fs(p.total_before_whatif)} | " if whatif else ""
        lo = f" ({loader(p)})" if len(loaders) > 1 else ""
        room = fs(p.headroom) if p.charged_to_memcg else f"memlock {fs(p.memlock)}*"
        lines.append(f"| {p.kernel.version}{lo} | {p.kernel.possible_cpus} | {before}"
                     f"{fs(p.total)} | {fs(b.budget)} | {room} | "
                     f"{'pass' if p.passed else '**fail**'} |")
    if not all(p.charged_to_memcg for p in r.results):
        lines += ["", "\\* this kernel charges maps to no memory cgroup (before 5.11): their "
                  "memlock counts against RLIMIT_MEMLOCK instead"]
    lines += ["", "| top maps | charge | share |", "|---|---:|---:|"]
    for o in worst.offenders:
        lines.append(f"| {md_code(o.object + '/' + o.map)} | {fs(o.charged)} | "
                     f"{format_share(o.share)} |")
    refused = [m for p in r.results for m in p.refused]
    if refused:
        lines += ["", "refused maps, not created and left out of the totals: "
                  + ", ".join(md_code(m) for m in dict.fromkeys(refused))]
    fails = [f for p in r.results for f in p.failures]
    if fails:
        lines += ["", "<details><summary>failures</summary>", ""]
        lines += [f"- {md_text(f)}" for f in dict.fromkeys(fails)] + ["", "</details>"]
    if r.whatif:
        lines += ["", "what-if: " + "; ".join(md_code(w) for w in r.whatif)]
    notes = dict.fromkeys(word(n) for p in r.results for n in p.notes)
    lines += [""] + [f"> note: {md_text(n)}" for n in notes] if notes else []
    out.write("\n".join(lines) + "\n")


# -- diff -----------------------------------------------------------------------------------
def diff_markdown(r, out: IO[str]) -> None:
    label = map_label(r)
    changed = [m for m in r.maps if m.status != "unchanged"]
    old, new = r.old, r.new
    head = (f"### bpfmem diff: maps at start {fs(old.charged_at_create)} → "
            f"**{fs(new.charged_at_create)}** ({delta(r.delta_at_create)})")
    lines = [head, ""]
    if old.loaders != new.loaders:
        lines += [f"Loaders: {', '.join(old.loaders)} → {', '.join(new.loaders)}.", ""]
    summary = (f"On the first start after the upgrade the new pod is charged "
               f"**{fs(r.upgrade_charge)}** of maps, {fs(r.newly_charged)} of them "
               "for maps the old release did not have (or pinned maps that must be recreated)")
    if r.limit:
        summary += f": **{r.new_share_of_limit:.0%}** of the {fs(r.limit)} limit"
    lines += [summary + f" ({kernel_label(r.kernel)}).", ""]
    if r.pin_incompatible:
        lines += ["⚠️ pinned maps incompatible with the running release (their state is lost on "
                  "upgrade): " + ", ".join(md_code(n) for n in r.pin_incompatible), ""]
    if changed:
        lines += ["| map | change | at start | delta | when full | delta |",
                  "|---|---|---:|---:|---:|---:|"]
        for m in changed:
            what = m.status if not m.changes else "; ".join(m.changes)
            at_start = fs(m.new.charged_at_create) if m.new is not None else "—"
            full = fs(m.new.charged_full if m.new is not None else None)
            lines.append(f"| {md_code(label(m))} | {md_text(what)} | "
                         f"{at_start} | {delta(m.delta_at_create)} | "
                         f"{full} | {delta(m.delta_full)} |")
    else:
        lines.append("No map changed.")
    lines += ["", "<details><summary>totals</summary>", "",
              "| | old | new | delta |", "|---|---:|---:|---:|"]
    for f, name in (("charged_at_create", "charged at start"),
                    ("charged_full", "charged when full"),
                    ("memlock_at_create", "memlock at start")):
        a, b = getattr(old, f), getattr(new, f)
        lines.append(f"| {name} | {fs(a)} | {fs(b)} | {delta(b - a)} |")
    lines += ["", "</details>"]
    for name, side in (("old", old), ("new", new)):
        if side.refused:
            lines += ["", f"⚠️ {name}: refused maps, not created and not counted in the "
                      f"totals: " + ", ".join(md_code(n) for n in side.refused)]
    if r.whatif:
        lines += ["", "what-if on the new side: " + "; ".join(md_code(w) for w in r.whatif)]
    out.write("\n".join(lines) + "\n")


# -- maps -----------------------------------------------------------------------------------
def maps_markdown(inv, out: IO[str]) -> None:
    """Per object, its maps and their memory."""
    from ..uapi import flag_names, map_type_name
    lines = []
    k = inv.kernel
    for o in inv.objects:
        lines.append(f"### {md_text(o.spec.path or o.spec.name)}: {count(len(o.maps), 'map')}"
                     + (f" (Linux {k.version}, {k.possible_cpus} CPUs)" if k else ""))
        mem = o.memory is not None
        lines += ["", "| map | type | key | value | max_entries | flags" +
                  (" | memlock | charged | full |" if mem else " |"),
                  "|---|---|---:|---:|---:|---" + ("|---:|---:|---:|" if mem else "|")]
        for e in o.maps:
            m = e.spec
            row = (f"| {md_code(m.name)} | {map_type_name(m.type)} | {m.key_size} | "
                   f"{m.value_size} | {m.max_entries:,} | "
                   f"{' '.join(flag_names(m.map_flags)) or '-'}")
            if mem:
                x = e.memory
                row += (" | refused, not created | | |" if x.rejected else
                        f" | {fs(x.memlock_at_create)} | {fs(x.charged_at_create)} | "
                        f"{fs(x.charged_full)} |")
            lines.append(row + ("" if mem else " |"))
        if mem:
            t = o.memory
            label = "**total**" + (f" (refused, not counted: {', '.join(t.refused)})"
                                   if t.refused else "")
            lines.append(f"| {label} | | | | | | {fs(t.memlock_at_create)} | "
                         f"**{fs(t.charged_at_create)}** | {fs(t.charged_full)} |")
            if o.memory_before is not None:
                b = o.memory_before
                lines += ["", f"what-if ({'; '.join(map(md_code, inv.whatif or ()))}): "
                          "charged at create "
                          f"{fs(b.charged_at_create)} → {fs(t.charged_at_create)}"]
        lines.append("")
    out.write("\n".join(lines))


# -- advise ---------------------------------------------------------------------------------
def advise_markdown(r, out: IO[str]) -> None:
    lines = []
    for o in r.objects:
        lines += [f"### bpfmem advise: {md_text(o.spec.path or o.spec.name)} "
                  f"({kernel_label(r.kernel)})", "",
                  f"Changes that save **{fs(o.saves_at_create)}** charged at start:", "",
                  "| map | advice | saves at start | saves when full |", "|---|---|---:|---:|"]
        for a in o.advice:
            full = "—" if a.saves_full is None else fs(a.saves_full)
            lines.append(f"| {md_code(a.map)} | {md_text(a.title.split(': ', 1)[-1])} | "
                         f"{fs(a.saves_at_create)} | {full} |")
        if o.apply:
            lines += ["", "what-if: " + md_code("bpfmem check ... " +
                                                " ".join(f"--set '{s}'" for s in o.apply))]
        lines.append("")
    lines += [f"> warning: {md_text(w)}" for w in r.warnings]
    out.write("\n".join(lines) + ("\n" if r.warnings else ""))


# -- several kernels ------------------------------------------------------------------------
def matrix_markdown(m, out: IO[str], **options: Any) -> None:
    """Each kernel's result, one after the other."""
    from .formats import render
    for r in m.results:
        render(r, "markdown", out, **options)
