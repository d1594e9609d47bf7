"""The ``estimate`` report: ``"schema": "bpfmem/estimate/v1"``."""

from __future__ import annotations

import json
from typing import IO, Any

from ..model.estimate import Footprint
from ..uapi import flag_names, map_type_name
from .memory import mib

SCHEMA = "bpfmem/estimate/v1"


def batch_record(fp: Footprint) -> dict[str, Any]:
    """The per-line result of ``--batch`` (the caller adds ``kernel``)."""
    return {"schema": SCHEMA, **fp.as_dict()}


def estimate_record(fp: Footprint) -> dict[str, Any]:
    sh = fp.shape
    rec = batch_record(fp)
    rec["kernel"] = fp.kernel.describe()
    rec["map"] = {"type": map_type_name(sh.type), "type_id": sh.type, "key_size": sh.key_size,
                  "value_size": sh.value_size, "max_entries": sh.max_entries,
                  "map_flags": sh.map_flags, "flags": flag_names(sh.map_flags),
                  "map_extra": sh.map_extra}
    return rec


def render_json(doc: dict[str, Any], out: IO[str]) -> None:
    out.write(json.dumps(doc, indent=2) + "\n")


def _bytes(n: int | None) -> str:
    return "?" if n is None else f"{n:,} B ({mib(n)} MiB)"


def render_table(doc: dict[str, Any], out: IO[str]) -> None:
    from .escape import console as Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=out, highlight=False)
    k, m = doc["kernel"], doc["map"]
    flags = ",".join(m["flags"]) or "no flags"
    console.print(f"{m['type']} key {m['key_size']} value {m['value_size']} max_entries "
                  f"{m['max_entries']:,} ({flags}) on Linux {k['version']}, "
                  f"{k['possible_cpus']} possible CPUs")
    if doc["rejected"]:
        console.print(Text(f"refused by the kernel: {doc['rejected']}", style="bold red"))
        return
    t = Table(show_header=True, header_style="bold")
    t.add_column("")
    t.add_column("memlock (fdinfo)", justify="right")
    t.add_column("charged (memcg)", justify="right")
    t.add_row("at create", _bytes(doc["memlock_at_create"]), _bytes(doc["charged_at_create"]))
    if doc["entries"]:
        t.add_row(f"{doc['entries']:,} entries", _bytes(doc["memlock"]), _bytes(doc["charged"]))
    cap = doc["capacity"]
    t.add_row("full" + (f" ({cap:,} entries)" if cap is not None else ""),
              _bytes(doc["memlock_full"]), _bytes(doc["charged_full"]))
    console.print(t)
    console.print(Text(f"charged figures are good to +-{doc['charged_tolerance']:,} bytes "
                       f"(memory cgroups charge in pages); memlock is exact", style="dim"))
    for n in doc["notes"]:
        console.print(Text(f"note: {n}", style="yellow"))
