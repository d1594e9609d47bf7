"""Terminal tables (rich) of the file-reading commands' results: ``maps`` (Inventory),
``estimate`` (Footprint), ``check`` (CheckResult), ``diff`` (DiffResult), ``advise``
(AdviseResult), ``measure`` (MeasureResult) and a Matrix of per-kernel results. Each renderer
draws a finished result's fields on ``out``; it computes nothing of the model."""

from __future__ import annotations

from ..units import format_share

from ..units import count

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import IO, Any

from ..units import format_bytes, format_delta as delta, format_size as fs
from .escape import markup, term
from .hints import word


def _console(out: IO[str], width: int | None = None):
    from .escape import console
    if width:
        return console(file=out, width=width, highlight=False, soft_wrap=False)
    return console(file=out, highlight=False)


def _say(console, lead: str, text: str, style: str = "") -> None:
    """A note or a warning at the console's width, its lines after the first indented under
    its text (a hanging indent), wrapped at spaces only: a path or a name is never broken."""
    import textwrap

    from rich.text import Text
    from .escape import for_terminal
    width = max(40, console.width)
    under = " " * min(len(lead), width // 3)
    lines = textwrap.wrap(for_terminal(text), width, initial_indent=lead,
                          subsequent_indent=under, break_long_words=False,
                          break_on_hyphens=False) or [lead.rstrip()]
    for line in lines:
        console.print(Text(line, style=style), soft_wrap=True)


def kernel_label(k) -> str:
    """'Linux 6.1.0-57-cloud-amd64, 2 CPUs' for a kernel's own BTF, 'Linux 6.1.0 (release
    table), 2 CPUs' for a release number (``k``: a KernelProfile); a [[kernels]] entry of
    bpfmem.toml by its name first ('prod-6.1: Linux ...')."""
    named = f"{k.name}: " if getattr(k, "name", "") else ""
    if k.build and k.exact:
        return f"{named}Linux {k.build}, {k.possible_cpus} CPUs"
    return (f"{named}Linux {k.version}{'' if k.exact else ' (release table)'}, "
            f"{k.possible_cpus} CPUs")


# -- check ----------------------------------------------------------------------------------
def _grid_row_label(p, several_loaders: bool) -> str:
    k = p.kernel
    label = f"Linux {k.build}" if (k.build and k.exact) else f"Linux {k.version}"
    if getattr(k, "name", ""):
        label = f"{k.name}: {label}"
    if several_loaders:
        lo = p.loader
        label += f" [{lo if isinstance(lo, str) else ', '.join(lo)}]"
    return label


def check_grid(r, console) -> None:
    """The matrix at a glance: a row per kernel (and loader), a column per CPU count; each
    cell the verdict, the maps' charge and the headroom left in the budget (or, on a
    kernel that charges maps to no memory cgroup, the memlock RLIMIT_MEMLOCK must fit)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    loaders = {p.loader if isinstance(p.loader, str) else tuple(p.loader) for p in r.results}
    rows: dict[str, dict[int, object]] = {}
    for p in r.results:
        rows.setdefault(_grid_row_label(p, len(loaders) > 1), {})[p.kernel.possible_cpus] = p
    cpus = sorted({p.kernel.possible_cpus for p in r.results})
    t = Table(box=box.SIMPLE_HEAD, title_justify="left",
              title=f"budget {fs(r.budget.budget)} at {'full' if r.budget.full else 'start'}"
                    f"; each cell: verdict, maps charge, headroom")
    t.add_column("kernel")
    for c in cpus:
        t.add_column(f"{c} CPUs", justify="right")
    for label, cells in rows.items():
        row = [term(label)]
        for c in cpus:
            p = cells.get(c)
            if p is None:
                row.append("-")
                continue
            verdict = Text("PASS" if p.passed else "FAIL",
                           style="bold green" if p.passed else "bold red")
            room = (f"{fs(p.headroom)} left" if p.headroom >= 0 else
                    f"over by {fs(-p.headroom)}")
            what = (f" {fs(p.total)}, {room}" if p.charged_to_memcg else
                    f" {fs(p.total)}; memlock {fs(p.memlock)}*")
            row.append(Text.assemble(verdict, what))
        t.add_row(*row)
    if not all(p.charged_to_memcg for p in r.results):
        t.caption = ("* this kernel charges maps to no memory cgroup (before 5.11): their "
                     "memlock counts against RLIMIT_MEMLOCK instead")
        t.caption_justify = "left"
    console.print(t)


def check_text(r, out: IO[str], *, width: int | None = None) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    console = _console(out, width)
    b = r.budget
    when = "full" if b.full else "start"
    shown = list(r.results)
    if len(r.results) > 1:
        check_grid(r, console)
        # below the grid: every profile that fails, or the worst one when all pass
        failing = [p for p in r.results if not p.passed]
        shown = failing or [max(r.results, key=lambda p: p.total)]
        rest = len(r.results) - len(shown)
        console.print(Text(f"{len(r.results)} profiles, {len(failing)} failing; below: "
                           + ("each failing one" if failing else "the worst case")
                           + (f" ({rest} more in the grid; --format json has every one)"
                              if rest else ""), style="bold"))
    for p in shown:
        verdict = Text("PASS", style="bold green") if p.passed else Text("FAIL", style="bold red")
        lo = p.loader
        loader = f" [{lo if isinstance(lo, str) else ', '.join(lo)}]" if lo else ""
        of = "" if b.max_fraction == 1 else f" ({b.max_fraction:g} of the limit {fs(b.limit)})"
        what = "maps and programs" if p.programs is not None else "maps"
        console.print(Text.assemble(verdict, f"  {kernel_label(p.kernel)}{loader}: {what} charge "
                                    f"{fs(p.total)} at {when}, budget {fs(b.budget)}{of}, "
                                    f"{p.share_of_limit:.0%} of the limit"))
        t = Table(box=box.SIMPLE_HEAD)
        t.add_column("top maps")
        t.add_column("charge", justify="right")
        t.add_column("share", justify="right")
        for o in p.offenders:
            t.add_row(term(f"{o.object}/{o.map}"), fs(o.charged), format_share(o.share))
        console.print(t)
        for f in p.failures:
            console.print(Text(f"  - {f}", style="red"))
        if p.refused:
            console.print(Text(f"  the total leaves out {count(len(p.refused), 'refused map')}, "
                               f"not created: {', '.join(p.refused)}", style="red"))
        for n in p.notes:
            _say(console, "  note: ", word(n), "yellow")
        if p.total_before_whatif is not None:
            console.print(Text(f"  what-if: {fs(p.total_before_whatif)} before -> "
                               f"{fs(p.total)} after", style="yellow"))
    if r.whatif:
        console.print(Text("what-if: " + "; ".join(r.whatif), style="yellow"))


# -- diff -----------------------------------------------------------------------------------
def map_label(r):
    """'map' when every map comes from one object, else 'object/map' (of a MapChange)."""
    single = len({m.object for m in r.maps}) <= 1
    return (lambda m: m.map) if single else (lambda m: f"{m.object}/{m.map}")


def diff_text(r, out: IO[str], *, width: int | None = None) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    console = _console(out, width)
    old, new = r.old, r.new
    console.print(f"maps at start: {fs(old.charged_at_create)} -> "
                  f"{fs(new.charged_at_create)} ({delta(r.delta_at_create)}); "
                  f"when full {fs(old.charged_full)} -> "
                  f"{fs(new.charged_full)}  {markup('[' + kernel_label(r.kernel) + ']')}")
    share = (f" = {r.new_share_of_limit:.0%} of the {fs(r.limit)} limit" if r.limit else "")
    console.print(f"first start after upgrading: {fs(r.upgrade_charge)} charged to the "
                  f"new pod{share}; {fs(r.newly_charged)} for new or recreated maps")
    if old.loaders != new.loaders:
        console.print(f"loaders: {', '.join(old.loaders)} -> {', '.join(new.loaders)}")
    for name, side in (("old", old), ("new", new)):
        if side.refused:
            console.print(Text(f"{name}: refused maps, not created and not counted in the "
                               f"totals: {', '.join(side.refused)}", style="red"))
    label = map_label(r)
    t = Table(box=box.SIMPLE_HEAD)
    for col, j in (("map", "left"), ("status", "left"), ("at start", "right"),
                   ("delta", "right"), ("full", "right"), ("delta", "right")):
        t.add_column(col, justify=j, overflow="fold")
    style = {"added": "green", "removed": "red", "changed": "yellow"}
    for m in r.maps:
        if m.status == "unchanged":
            continue
        status = m.status + (" (pin incompatible)" if m.pin_incompatible else "")
        if m.changes:
            status += ": " + "; ".join(m.changes)
        at_start = fs(m.new.charged_at_create) if m.new is not None else fs(None)
        full = fs(m.new.charged_full) if m.new is not None else fs(None)
        t.add_row(term(label(m)), Text(status, style=style.get(m.status, "")),
                  at_start, delta(m.delta_at_create), full, delta(m.delta_full))
    if t.row_count:
        console.print(t)
    else:
        console.print(f"no map changed: {count(len(r.maps), 'map')}, the same on both sides")
    if r.programs is not None:
        moved = [c for c in r.programs if c.status != "unchanged"]
        old_b = sum(c.old_at_least or 0 for c in r.programs)
        new_b = sum(c.new_at_least or 0 for c in r.programs)
        console.print(f"programs: memlock at least {fs(old_b)} -> {fs(new_b)} "
                      f"({delta(new_b - old_b)}; lower bounds)")
        for c in moved:
            console.print(f"  {term(c.object + '/' + c.name)}: {c.status}, instructions "
                          f"{c.old_insns if c.old_insns is not None else '-'} -> "
                          f"{c.new_insns if c.new_insns is not None else '-'}, at least "
                          f"{fs(c.old_at_least) if c.old_at_least is not None else '-'} -> "
                          f"{fs(c.new_at_least) if c.new_at_least is not None else '-'}")
    renamed = [(m.old.name, m.new.name) for m in r.maps
               if m.old is not None and m.new is not None and m.old.name != m.new.name]
    if renamed:
        console.print(Text("named differently by the two loaders (matched by section): "
                           + ", ".join(f"{a} -> {b}" for a, b in renamed)), overflow="fold")


# -- advise ---------------------------------------------------------------------------------
_VERDICT_STYLE = {"datapath_writes": "yellow", "read_only": "green", "unknown": "red"}


def map_uses(o) -> list[tuple[str, str, dict]]:
    """(map name, verdict, {op: sorted programs}) for each map of an ObjectAdvice."""
    out = []
    for m in o.spec.maps:
        u = o.uses.get(m.name)
        out.append((m.name, u.verdict if u is not None else "unreferenced",
                    {op: sorted(p) for op, p in (u.ops.items() if u else [])}))
    return out


def advise_text(r, out: IO[str], *, width: int | None = None) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    console = _console(out, width)
    said: dict[tuple[str, str], str] = {}      # (trade-off, kernel rule) -> first map
    for o in r.objects:
        console.print(term(f"{o.spec.path or o.spec.name} on {kernel_label(r.kernel)}"))
        t = Table(box=box.SIMPLE_HEAD)
        t.add_column("map")
        t.add_column("what the programs do", overflow="fold")
        t.add_column("verdict")
        for name, verdict, ops in map_uses(o):
            t.add_row(term(name), ", ".join(ops) or "-",
                      Text(verdict, style=_VERDICT_STYLE.get(verdict, "dim")))
        console.print(t)
        for a in o.advice:
            full = a.saves_full
            saving = (f"saves {fs(a.saves_at_create)} at start"
                      + ("" if full is None else
                         f"; when full {'saves ' + fs(full) if full >= 0 else 'costs ' + fs(-full) + ' more'}"))
            console.print(Text(f"* {a.title}", style="bold"))
            if a.kind not in ("keep_prealloc", "percpu"):
                console.print(f"  {saving}")
            first = said.setdefault((a.tradeoff, a.rule), a.map)
            if first != a.map:       # the same paragraph again: once is enough
                console.print(Text(f"  trade-off and kernel: as for {first} above",
                                   style="dim"), overflow="fold")
                continue
            _say(console, "  trade-off: ", a.tradeoff, "dim")
            _say(console, "  kernel: ", a.rule, "dim")
        console.print(Text(f"total saving at start from the recommended changes (--apply): "
                           f"{fs(o.saves_at_create)}", style="bold green"))
        if o.saves_if_dropped:
            console.print(Text(f"dropping the maps no program references would save "
                               f"{fs(o.saves_if_dropped)} more (if userspace does not need "
                               f"them: --set 'MAP.count=0' to see it)", style="green"),
                          overflow="fold")
    for w in r.warnings:
        _say(console, "warning: ", w, "yellow")


# -- maps -----------------------------------------------------------------------------------


def maps_text(inv, out: IO[str], *, width: int | None = None) -> None:
    """Per object, its maps and its programs (and with a kernel, their memory). Fits 100
    columns."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from ..uapi import flag_names, map_type_name, prog_type_name
    console = _console(out, width)
    k = inv.kernel
    if k is not None:
        console.print(Text(f"memory for Linux {k.version} with {k.possible_cpus} possible "
                           f"CPUs: memlock as fdinfo reports it, charged = what the creating "
                           f"process's memory cgroup pays (at create, and when full)",
                           style="dim"), overflow="fold")
        src = k.sizes_source
        console.print(Text(f"kernel {k.build or k.version}: "
                           + (f"struct sizes and eras from the {src}" if k.exact else
                              f"a release table, struct sizes from the {src}"),
                           style="dim"), overflow="fold")
        for note in k.notes:
            _say(console, "  note: ", note, "dim")
    for o in inv.objects:
        s = o.spec
        title = f"{s.path or s.name}: {count(len(o.maps), 'map')}" + (
            f", {len(s.programs)} programs" if s.programs is not None else "")
        t = Table(title=term(title), title_justify="left", expand=False, box=box.SIMPLE_HEAD)
        longest = max((len(m.spec.name) for m in o.maps), default=3)
        t.add_column("map", overflow="fold", min_width=min(longest, 28))
        t.add_column("type", overflow="fold", max_width=16)
        t.add_column("key", justify="right")
        t.add_column("value", justify="right")
        t.add_column("max_entries", justify="right")
        t.add_column("flags", overflow="fold", max_width=16)
        t.add_column("kind")
        for e in o.maps:
            m = e.spec
            max_e = f"{m.max_entries:,}"
            if m.max_entries_set_at_load:
                max_e = "at load" if m.max_entries == 0 else max_e + "*"
            vs = str(m.value_size) + ("*" if m.value_size_set_at_load else "")
            flags = " ".join(flag_names(m.map_flags)) or "-"
            if m.pinning:
                flags = "pinned" if flags == "-" else flags + " pinned"
            t.add_row(term(m.name), map_type_name(m.type), str(m.key_size), vs, max_e, flags,
                      m.kind)
            if m.inner is not None:
                i = m.inner
                t.add_row(Text("  inner", style="dim"), map_type_name(i.type), str(i.key_size),
                          str(i.value_size), f"{i.max_entries:,}",
                          " ".join(flag_names(i.map_flags)) or "-", "")
        console.print(t)
        if s.loader:
            console.print(Text(f"  loader: {s.loader} ({s.loader_reason or 'as asked'})",
                               style="cyan"), overflow="fold")
        if o.memory is not None:
            console.print(_memory_table(o))
        notes = [(e.spec.name, word(n)) for e in o.maps for n in e.notes]
        notes += [(e.spec.name, e.memory.rejected) for e in o.maps
                  if e.memory is not None and e.memory.rejected]
        notes += [(e.spec.name, e.memory.unknown) for e in o.maps
                  if e.memory is not None and e.memory.unknown]
        for name, n in notes:
            console.print(Text(f"  * {name}: {n}", style="dim"), overflow="fold")
        for n in s.notes:
            _say(console, "  note: ", n, "yellow")
        if o.memory_before is not None:
            b, a = o.memory_before, o.memory
            console.print(Text(f"  what-if ({'; '.join(inv.whatif or ())}): charged at create "
                               f"{fs(b.charged_at_create)} -> {fs(a.charged_at_create)}, "
                               f"when full {fs(b.charged_full)} -> {fs(a.charged_full)}", style="bold yellow"),
                          overflow="fold")
        for u in o.unmatched_settings or ():
            console.print(Text(f"  what-if {u} matches no map", style="red"))
        if s.programs:
            p = Table(expand=False, box=box.SIMPLE_HEAD)
            p.add_column("program", overflow="fold", max_width=24)
            p.add_column("section", overflow="fold", max_width=24)
            p.add_column("type", overflow="fold", max_width=14)
            p.add_column("maps", overflow="fold")
            bounds = {b.name: b for b in o.programs or ()}
            if bounds:
                p.add_column("insns", justify="right")
                p.add_column("memlock ≥", justify="right")
            for prog in s.programs:
                row = [term(prog.name), term(prog.section),
                       (prog_type_name(prog.type) if prog.type else None) or "unknown",
                       term(", ".join(prog.maps) or "-")]
                if bounds:
                    b = bounds[prog.name]
                    row += [str(b.insns), fs(b.memlock_at_least)]
                p.add_row(*row)
            console.print(p)
            if bounds:
                _say(console, "  programs: ",
                     f"memlock at least {fs(sum(b.memlock_at_least for b in bounds.values()))} "
                     "(a lower bound: the pages of the instructions the loader hands over; "
                     "measure --programs for what they cost)", "dim")
        console.print()
    if inv.binaries:
        _binaries_table(console, inv)


def _binaries_table(console, inv) -> None:
    """Per binary carrying objects: how many, and their maps' memory together."""
    from rich import box
    from rich.table import Table
    with_memory = inv.kernel is not None
    t = Table(title="per binary", title_justify="left", box=box.SIMPLE_HEAD, expand=False)
    t.add_column("binary", overflow="fold")
    t.add_column("objects", justify="right")
    if with_memory:
        t.add_column("memlock", justify="right")
        t.add_column("charged", justify="right")
        t.add_column("full", justify="right")
    for b in inv.binaries:
        row = [term(b.path), str(len(b.objects))]
        if with_memory and b.memory is not None:
            m = b.memory
            row += [fs(m.memlock_at_create), fs(m.charged_at_create), fs(m.charged_full)]
        t.add_row(*row)
    console.print(t)


def _memory_table(o):
    """Per map: memlock and charge at create, charge when full, and share of the total."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    t = Table(box=box.SIMPLE_HEAD, expand=False)
    longest = max((len(e.spec.name) for e in o.maps), default=3)
    t.add_column("map", overflow="fold", min_width=min(longest, 28))
    t.add_column("memlock", justify="right")
    t.add_column("charged", justify="right")
    t.add_column("full", justify="right")
    t.add_column("share", justify="right")
    tot = o.memory
    total_create = tot.charged_at_create or 0
    for e in o.maps:
        mem = e.memory
        if mem.rejected:
            t.add_row(term(e.spec.name), Text("refused: not created", style="red"), "", "", "")
            continue
        ch = mem.charged_at_create
        share = format_share(ch / total_create) if ch is not None and total_create else ""
        style = "dim" if not e.spec.autocreate else None
        t.add_row(Text(e.spec.name, style=style or ""), fs(mem.memlock_at_create), fs(ch),
                  fs(mem.charged_full), share)
    t.add_section()
    refused = tot.refused
    unknown = tot.incomplete - len(refused)
    why = ([f"{unknown} unknown"] if unknown else []) + (
        [f"{len(refused)} refused, not created: {', '.join(refused)}"] if refused else [])
    incomplete = f" ({'; '.join(why)})" if why else ""
    t.add_row(Text("total" + incomplete, style="bold"),
              Text(fs(tot.memlock_at_create), style="bold"),
              Text(fs(tot.charged_at_create), style="bold"),
              Text(fs(tot.charged_full), style="bold"), "")
    return t


# -- estimate -------------------------------------------------------------------------------
def _bytes(n: int | None) -> str:
    """The exact bytes (what fdinfo says) and the same as a quantity: ``1056768 (1Mi)``."""
    return "?" if n is None else f"{format_bytes(n)} ({fs(n)})"


def estimate_text(fp, out: IO[str], *, width: int | None = None) -> None:
    """One map shape's Footprint: memlock and charge at create, with entries, and full."""
    from rich.table import Table
    from rich.text import Text

    from ..uapi import flag_names, map_type_name
    console = _console(out, width)
    k, m = fp.kernel, fp.shape
    flags = ",".join(flag_names(m.map_flags)) or "no flags"
    console.print(f"{map_type_name(m.type)} key {m.key_size} value {m.value_size} max_entries "
                  f"{m.max_entries:,} ({flags}) on Linux {k.version}, "
                  f"{k.possible_cpus} possible CPUs")
    if fp.rejected:
        console.print(Text(f"refused by the kernel: {fp.rejected}", style="bold red"))
        return
    t = Table(show_header=True, header_style="bold")
    t.add_column("")
    t.add_column("memlock (fdinfo)", justify="right")
    t.add_column("charged (memcg)", justify="right")
    t.add_row("at create", _bytes(fp.memlock_at_create), _bytes(fp.charged_at_create))
    if fp.entries:
        t.add_row(f"{fp.entries:,} entries", _bytes(fp.memlock), _bytes(fp.charged))
    cap = fp.capacity
    t.add_row("full" + (f" ({cap:,} entries)" if cap is not None else ""),
              _bytes(fp.memlock_full), _bytes(fp.charged_full))
    console.print(t)
    console.print(Text(f"charged figures are good to +-{format_bytes(fp.charged_tolerance)} bytes "
                       f"(memory cgroups charge in pages); memlock is exact", style="dim"))
    for n in fp.notes:
        console.print(Text(f"note: {n}", style="yellow"))


# -- measure --------------------------------------------------------------------------------
def measure_text(r, out: IO[str], *, width: int | None = None) -> None:
    """The kernel's figures beside the model's, per map (a MeasureResult)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    console = _console(out, width)
    k = r.kernel
    console.print(f"{markup(r.path)}: measured on Linux {k.version} with {k.possible_cpus} "
                  "possible CPUs, beside the model for that kernel")
    t = Table(box=box.SIMPLE_HEAD)
    longest = max((len(c.name) for c in r.comparisons), default=3)
    t.add_column("map", overflow="fold", min_width=min(longest, 26))
    t.add_column("memlock", justify="right")
    t.add_column("model", justify="right")
    t.add_column("charged", justify="right")
    t.add_column("model", justify="right")

    def model_memlock(got, want):
        return Text("same", style="green") if got == want else Text(format_bytes(want), style="bold red")

    def model_charged(got, want, tol, slack=0):
        if want is None or got is None:
            return Text(format_bytes(want))
        ok = want - tol <= got <= want + tol + slack
        return Text(format_bytes(want), style="green" if ok else "bold red")

    for c in r.comparisons:
        me, mo = c.measured, c.model
        if me is None:
            t.add_row(Text(c.name, style="dim"),
                      Text(f"not measured: {c.why_not_measured}", style="dim"), "", "", "")
            continue
        if not me.ok or mo.rejected:
            style = "green" if c.rejection_match else "bold red"
            t.add_row(term(c.name), f"refused, errno {me.errno}" if not me.ok else "created",
                      Text(mo.rejected or "created", style=style), "", "")
            continue
        tol = mo.charged_tolerance
        t.add_row(term(c.name), format_bytes(me.memlock), model_memlock(me.memlock, mo.memlock_at_create),
                  format_bytes(me.charged), model_charged(me.charged, mo.charged_at_create, tol))
        for n, ml, model_ml, ch, model_ch in c.fill_figures():
            t.add_row(Text(f"  {n:,} entries", style="dim"), format_bytes(ml),
                      model_memlock(ml, model_ml), format_bytes(ch),
                      model_charged(ch, model_ch, tol, mo.charged_slack))
    console.print(t)
    console.print(Text("bytes. model memlock: 'same' when equal to the kernel's; model charge: "
                       "green when the kernel's is within the model's tolerance", style="dim"))
    console.print(f"memlock equal to the model: {r.memlock_matches}/{r.measured}; "
                  f"charge within tolerance: {r.charged_within_tolerance}/{r.measured}")
    if r.programs is not None:
        _measured_programs_text(r.programs, console)


def _why(reason: str | None) -> str:
    """The telling line of a refusal: the verifier's last, not libbpf's closing one."""
    lines = [x.strip() for x in (reason or "").splitlines() if x.strip()]
    told = [x for x in lines if "failed to load object" not in x and "PROG LOAD LOG" not in x
            and not x.startswith("processed ")]
    return (told or lines or ["no reason given"])[-1]


def _measured_programs_text(pm, console) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text
    t = Table(box=box.SIMPLE_HEAD, title="programs, each loaded alone", title_justify="left")
    for col in ("program", "insns", "memlock", "jited", "charged", "peak"):
        t.add_column(col, justify="left" if col == "program" else "right",
                     overflow="fold" if col == "program" else None)
    for p in pm.programs:
        if not p.loaded:
            t.add_row(term(p.name), Text(f"refused (errno {p.errno}): {_why(p.reason)}",
                                         style="bold red"), "", "", "", "")
            continue
        t.add_row(term(p.name), str(p.insn_cnt), format_bytes(p.memlock),
                  format_bytes(p.jited_prog_len), format_bytes(p.charged), format_bytes(p.peak))
    console.print(t)
    w, m = pm.whole, pm.maps
    whole = (f"the whole object charged {format_bytes(w.charged)} (peak "
             f"{format_bytes(w.peak)}), its maps alone {format_bytes(m.charged)}" if w.ok else
             f"the whole object did not load (errno {w.errno}); its maps alone charged "
             f"{format_bytes(m.charged)}")
    console.print(f"{len(pm.loaded)} loaded, {len(pm.refused)} refused; memlock "
                  f"{format_bytes(pm.memlock)}, charged {format_bytes(pm.charged)} "
                  f"(each program's load minus the maps-only load); {whole}")
    console.print(Text(f"bytes of {pm.counter}; peak: its highest reading during the load "
                       f"({pm.peak_counter or 'not kept by this kernel'}) above the one "
                       "before: the verifier's working memory shows there", style="dim"))


# -- several kernels ------------------------------------------------------------------------
def matrix_text(m, out: IO[str], **options: Any) -> None:
    """Each kernel's result, one after the other."""
    from .formats import render
    for r in m.results:
        render(r, "text", out, **options)
