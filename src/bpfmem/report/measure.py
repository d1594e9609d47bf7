"""The ``measure`` report: the kernel's figures beside the model's, per map."""

from __future__ import annotations

import json
from typing import IO, Any


SCHEMA = "bpfmem/measure/v1"


def build_measure_report(path: str, prof, comparisons) -> dict[str, Any]:
    maps = []
    for c in comparisons:
        fp, m = c.model, c.measured
        rec: dict[str, Any] = {"name": c.name}
        if m is None:
            rec["skipped"] = c.why_not_measured
            maps.append(rec)
            continue
        rec["measured"] = {"created": m.ok, "errno": m.errno, "memlock": m.memlock,
                           "charged": m.charged,
                           "fills": [{"entries": n, "memlock": ml, "charged": ch}
                                     for n, ml, ch in m.fills]}
        rec["model"] = {"rejected": fp.rejected, "memlock": fp.memlock_at_create,
                        "charged": fp.charged_at_create,
                        "charged_tolerance": fp.charged_tolerance,
                        "charged_slack": fp.charged_slack,
                        "fills": [{"entries": n, "memlock": model_ml, "charged": model_ch}
                                  for n, _ml, model_ml, _ch, model_ch in c.fill_figures()]}
        rec["memlock_match"] = c.memlock_match
        rec["rejection_match"] = c.rejection_match
        rec["charged_delta"] = c.charged_delta
        rec["charged_within_tolerance"] = c.charged_within
        maps.append(rec)
    measured = [r for r in maps if "measured" in r]
    return {"schema": SCHEMA, "path": path, "kernel": prof.describe(), "maps": maps,
            "summary": {
                "maps": len(maps), "measured": len(measured),
                "memlock_matches": sum(1 for r in measured if r["memlock_match"]),
                "rejections_match": sum(1 for r in measured if r["rejection_match"]),
                "charged_within_tolerance": sum(1 for r in measured
                                                if r["charged_within_tolerance"])}}


def _b(n: int | None) -> str:
    return "?" if n is None else f"{n:,}"


def render_json(doc: dict[str, Any], out: IO[str]) -> None:
    out.write(json.dumps(doc, indent=2) + "\n")


def render_table(doc: dict[str, Any], out: IO[str]) -> None:
    from rich import box
    from .escape import console as Console
    from rich.table import Table
    from rich.text import Text

    from .escape import markup, term
    console = Console(file=out, highlight=False)
    k = doc["kernel"]
    console.print(f"{markup(doc['path'])}: measured on Linux {k['version']} with {k['possible_cpus']} "
                  "possible CPUs, beside the model for that kernel")
    t = Table(box=box.SIMPLE_HEAD)
    longest = max((len(r["name"]) for r in doc["maps"]), default=3)
    t.add_column("map", overflow="fold", min_width=min(longest, 26))
    t.add_column("memlock", justify="right")
    t.add_column("model", justify="right")
    t.add_column("charged", justify="right")
    t.add_column("model", justify="right")

    def model_memlock(got, want):
        return Text("same", style="green") if got == want else Text(_b(want), style="bold red")

    def model_charged(got, want, tol, slack=0):
        if want is None or got is None:
            return Text(_b(want))
        ok = want - tol <= got <= want + tol + slack
        return Text(_b(want), style="green" if ok else "bold red")

    for r in doc["maps"]:
        if "skipped" in r:
            t.add_row(Text(r["name"], style="dim"),
                      Text(f"not measured: {r['skipped']}", style="dim"), "", "", "")
            continue
        me, mo = r["measured"], r["model"]
        if not me["created"] or mo["rejected"]:
            style = "green" if r["rejection_match"] else "bold red"
            t.add_row(term(r["name"]), f"refused, errno {me['errno']}" if not me["created"]
                      else "created", Text(mo["rejected"] or "created", style=style), "", "")
            continue
        tol = mo["charged_tolerance"]
        t.add_row(term(r["name"]), _b(me["memlock"]), model_memlock(me["memlock"], mo["memlock"]),
                  _b(me["charged"]), model_charged(me["charged"], mo["charged"], tol))
        for f, mf in zip(me["fills"], mo["fills"]):
            t.add_row(Text(f"  {f['entries']:,} entries", style="dim"), _b(f["memlock"]),
                      model_memlock(f["memlock"], mf["memlock"]), _b(f["charged"]),
                      model_charged(f["charged"], mf["charged"], tol, mo.get("charged_slack", 0)))
    console.print(t)
    console.print(Text("bytes. model memlock: 'same' when equal to the kernel's; model charge: "
                       "green when the kernel's is within the model's tolerance", style="dim"))
    s = doc["summary"]
    console.print(f"memlock equal to the model: {s['memlock_matches']}/{s['measured']}; "
                  f"charge within tolerance: {s['charged_within_tolerance']}/{s['measured']}")
