"""Every versioned JSON document bpfmem writes, and the one place a finished result becomes one.

A document is what ``--format json`` prints and what scripts keep: its ``schema`` names it and
its version. Results (frozen values from ``analysis/``) never carry JSON; this module turns
each into its document, field by field. To find where a document's key comes from, start at
its ``*_document`` function here (or at ``maps_json``: the maps document, a record per map
of an object, is written as JSON text directly).
"""

from __future__ import annotations

import json
from functools import lru_cache
from operator import attrgetter
from json.encoder import encode_basestring_ascii
from math import isfinite

from .. import uapi
from .hints import words

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any, Callable

# every schema bpfmem writes (a document says which in its "schema" key)
MAPS = "bpfmem/maps/v1"
ESTIMATE = "bpfmem/estimate/v1"
CHECK = "bpfmem/check/v1"
DIFF = "bpfmem/diff/v1"
ADVISE = "bpfmem/advise/v1"
MEASURE = "bpfmem/measure/v1"
MATRIX = "bpfmem/matrix/v1"
SNAPSHOT = "bpfmem/snapshot/v2"
SNAPSHOT_DIFF = "bpfmem/snapshot-diff/v1"
POD = "bpfmem/pod/v1"
POD_TRACE = "bpfmem/pod-trace/v1"
SIZE = "bpfmem/size/v1"
SIZE_DIFF = "bpfmem/size-diff/v1"
BINARY_CHECK = "bpfmem/binary-check/v1"

# result type name -> the function below that makes its document (filled as results move here)
_MAKERS: dict[str, Callable[[Any], dict[str, Any]]] = {}


def maker(result_type: str):
    """Register the decorated function as the document maker of ``result_type``."""
    def register(fn):
        _MAKERS[result_type] = fn
        return fn
    return register


def document(result: Any) -> dict[str, Any]:
    """The versioned JSON document of a finished result."""
    try:
        make = _MAKERS[type(result).__name__]
    except KeyError:
        raise TypeError(f"no document for {type(result).__name__}") from None
    return make(result)


# result type name -> the function below that writes its document as JSON text directly
# (one line, as json.dumps would): the documents of many records (the maps of an object)
_WRITERS: dict[str, Callable[[Any], str | None]] = {}


def writer(result_type: str):
    """Register the decorated function as the JSON text writer of ``result_type``."""
    def register(fn):
        _WRITERS[result_type] = fn
        return fn
    return register


# -- the memory of one map as the gates see it (check, diff) ---------------------------------
def _cost_record(c) -> dict[str, Any]:
    """A :class:`~bpfmem.analysis.footprints.MapCost`: the map's attributes and its figures
    (times the number of times the agent creates it)."""
    from ..uapi import flag_names, map_type_name
    s = c.spec
    rec = {"object": c.object, "name": s.name, "type": map_type_name(s.type),
           "key_size": s.key_size, "value_size": s.value_size,
           "max_entries": s.max_entries, "map_flags": s.map_flags,
           "flags": flag_names(s.map_flags), "pinning": s.pinning, "count": c.count,
           "memlock_at_create": c.memlock_at_create, "memlock_full": c.memlock_full,
           "charged_at_create": c.charged_at_create, "charged_full": c.charged_full}
    if c.footprint is not None and c.footprint.rejected:
        rec["rejected"] = c.footprint.rejected
    if c.unknown:
        rec["unknown"] = c.unknown
    return rec


def _loader(spec) -> dict[str, Any]:
    return {"name": spec.loader, "why": spec.loader_reason}


# -- check ----------------------------------------------------------------------------------
@maker("CheckResult")
def check_document(r) -> dict[str, Any]:
    b = r.budget
    return {"schema": CHECK, "limit": b.limit, "max_fraction": b.max_fraction,
            "budget": b.budget, "full": b.full, "measure": b.measure,
            "whatif": list(r.whatif), "pass": r.passed,
            "results": [_profile_check(p) for p in r.results]}


@maker("GateResult")
def gate_document(r) -> dict[str, Any]:
    """One gate: its own document. Both: the maps gate's ``bpfmem/check/v1`` with the binary
    gate's document under ``binary_gate`` and ``pass`` the verdict of both."""
    if len(r.parts) == 1:
        return document(r.parts[0])
    doc = check_document(r.maps)
    doc["pass"] = r.passed
    doc["binary_gate"] = document(r.binaries)
    if r.notes:
        doc["notes"] = list(r.notes)
    return doc


def _profile_check(p) -> dict[str, Any]:
    return {"kernel": p.kernel.describe(),
            "loader": p.loader if isinstance(p.loader, str) else list(p.loader),
            "refused": list(p.refused), "total": p.total,
            "total_before_whatif": p.total_before_whatif, "budget": p.budget.budget,
            "limit": p.budget.limit, "share_of_limit": p.share_of_limit,
            "pass": p.passed, "failures": list(p.failures),
            "checks": [{"name": c.name, "object": c.object, "map": c.map, "value": c.value,
                        "limit": c.limit, "pass": c.passed, "failures": list(c.failures)}
                       for c in p.checks],
            "notes": words(p.notes),
            "objects": [{"path": o.spec.path, "name": o.spec.name, "total": o.total,
                         "unknown": o.unknown, "refused": list(o.refused),
                         "loader": _loader(o.spec),
                         "maps": [{**_cost_record(m.cost), "share": m.share} for m in o.maps]}
                        for o in p.objects],
            "offenders": [{"object": o.object, "map": o.map, "charged": o.charged,
                           "share": o.share} for o in p.offenders],
            **({"programs_at_least": p.programs, "programs_lower_bound": True}
               if p.programs is not None else {})}


# -- diff -----------------------------------------------------------------------------------
@maker("DiffResult")
def diff_document(r) -> dict[str, Any]:
    return {"schema": DIFF, "kernel": r.kernel.describe(), "limit": r.limit,
            "whatif": list(r.whatif), "old": _diff_side(r.old), "new": _diff_side(r.new),
            "delta_at_create": r.delta_at_create, "delta_full": r.delta_full,
            "upgrade_charge": r.upgrade_charge, "newly_charged": r.newly_charged,
            "new_share_of_limit": r.new_share_of_limit,
            "pin_incompatible": r.pin_incompatible,
            "maps": [{"object": m.object, "map": m.map, "status": m.status,
                      "pinned": m.pinned, "pin_incompatible": m.pin_incompatible,
                      "pin_reused": m.pin_reused, "changes": list(m.changes),
                      "old": _diff_cost(m.old), "new": _diff_cost(m.new),
                      "delta_at_create": m.delta_at_create, "delta_full": m.delta_full}
                     for m in r.maps],
            "warnings": list(r.warnings),
            **({"programs": {"lower_bound": True, "programs": [
                {"object": c.object, "name": c.name, "status": c.status,
                 "old_insns": c.old_insns, "new_insns": c.new_insns,
                 "old_memlock_at_least": c.old_at_least,
                 "new_memlock_at_least": c.new_at_least,
                 "delta_at_least": c.delta_at_least} for c in r.programs]}}
               if r.programs is not None else {})}


def _diff_side(s) -> dict[str, Any]:
    return {"paths": s.paths, "loaders": s.loaders, "refused": s.refused,
            "charged_at_create": s.charged_at_create, "charged_full": s.charged_full,
            "memlock_at_create": s.memlock_at_create}


def _diff_cost(c) -> dict[str, Any] | None:
    if c is None:
        return None
    rec = _cost_record(c)
    del rec["object"]
    return rec


# -- advise ---------------------------------------------------------------------------------
@maker("AdviseResult")
def advise_document(r) -> dict[str, Any]:
    doc = {"schema": ADVISE, "kernel": r.kernel.describe(),
           "objects": [{"path": o.spec.path, "name": o.spec.name, "loader": _loader(o.spec),
                        "maps": _uses(o), "advice": [_advice(a) for a in o.advice],
                        "saves_at_create": o.saves_at_create, "apply": list(o.apply)}
                       for o in r.objects]}
    if r.warnings:
        doc["warnings"] = list(r.warnings)
    return doc


def _uses(o) -> list[dict[str, Any]]:
    """Per map: the verdict on what the programs do with it, and which programs do what."""
    out = []
    for m in o.spec.maps:
        u = o.uses.get(m.name)
        out.append({"name": m.name,
                    "verdict": u.verdict if u is not None else "unreferenced",
                    "ops": {op: sorted(p) for op, p in (u.ops.items() if u else [])}})
    return out


def _advice(a) -> dict[str, Any]:
    return {"map": a.map, "kind": a.kind, "title": a.title,
            "saves_at_create": a.saves_at_create, "saves_full": a.saves_full,
            "tradeoff": a.tradeoff, "rule": a.rule, "set": a.set,
            "saves_memlock": a.saves_memlock}


# -- maps -----------------------------------------------------------------------------------
# The maps document is written as JSON text, field by field, with no dict in between: on an
# object of 2,000 maps making the dicts and encoding them cost more than the model itself
# (~160 K instructions a map against ~50 K). The text is what json.dumps gives for the same
# document (its separators, ASCII escapes, null/true/false); document() reads it back for a
# caller that wants the dict, and a pretty (indented) rendering comes from that dict.
_q = encode_basestring_ascii          # a str as JSON (json's C encoder)
_JSON_BOOL = {True: "true", False: "false"}


def _strings(items) -> str:
    return "[" + ", ".join(map(_q, items)) + "]" if items else "[]"


@lru_cache(maxsize=1024)
def _map_type_json(t: int) -> str:
    return _q(uapi.map_type_name(t))


@lru_cache(maxsize=1024)
def _flags_json(flags: int) -> str:
    return _strings(uapi.flag_names(flags))


@lru_cache(maxsize=1024)
def _prog_type_json(t: int) -> str:
    return _q(uapi.prog_type_name(t)) if t else "null"


@lru_cache(maxsize=1024)
def _attach_type_json(t: int) -> str:
    return _q(uapi.attach_type_name(t)) if t else "null"


@maker("Inventory")
def maps_document(inv) -> dict[str, Any]:
    return json.loads(maps_json(inv))


@writer("Inventory")
def maps_json(inv) -> str:
    """The maps document of an :class:`~bpfmem.analysis.inventory.Inventory`, as JSON (its
    pieces joined once: a large object's text is copied once)."""
    parts = ['{"schema": ', _q(MAPS)]
    if inv.kernel is not None:
        parts += [', "kernel": ', json.dumps(inv.kernel.describe())]
    if inv.whatif is not None:
        parts += [', "whatif": ', _strings(inv.whatif)]
    parts.append(', "objects": [')
    for i, o in enumerate(inv.objects):
        if i:
            parts.append(", ")
        _object_json(o, parts)
    parts += ['], "errors": ', json.dumps([{"path": p, "error": e} for p, e in inv.errors])]
    if inv.binaries:     # objects embedded in binaries: each binary's together
        parts += [', "binaries": ', json.dumps([
            {"path": b.path, "objects": list(b.objects),
             **({"memory": _totals(b.memory)} if b.memory is not None else {})}
            for b in inv.binaries])]
    parts.append("}")
    return "".join(parts)


def _object_json(o, parts: list[str]) -> None:
    """One object of the maps document (an ObjectInventory), its pieces added to ``parts``."""
    s = o.spec
    head = {"path": s.path, "name": s.name, "endianness": "little" if s.little_endian else "big",
            "license": s.license, "btf": s.has_btf, "loader": _loader(s),
            **({"binary": s.carrier} if s.carrier else {})}
    parts += [json.dumps(head)[:-1], ', "maps": [', ", ".join([_map_json(m) for m in o.maps]),
              # programs null: not read (maps --no-programs)
              '], "programs": ', "null" if s.programs is None else
              "[" + ", ".join([_program_json(p) for p in s.programs]) + "]",
              ', "notes": ', _strings(s.notes)]
    tail: dict[str, Any] = {}
    if o.memory is not None:
        tail["memory"] = _totals(o.memory)
    if o.memory_before is not None:
        tail["memory_before"] = _totals(o.memory_before)
    if o.unmatched_settings is not None:
        tail["unmatched_settings"] = list(o.unmatched_settings)
    if tail:
        parts += [", ", json.dumps(tail)[1:-1]]
    if o.programs is not None:
        # before load: a lower bound (the verifier may patch in more instructions, and a
        # program costs its aux data, line info and JIT image beside: measure --programs)
        parts += [f', "program_memory": {{"memlock_at_least": '
                  f'{sum(p.memlock_at_least for p in o.programs)}, "lower_bound": true, '
                  '"programs": [', ", ".join([
                      f'{{"name": {_q(p.name)}, "insns_loaded": {p.insns}, '
                      f'"memlock_at_least": {p.memlock_at_least}}}' for p in o.programs]),
                  "]}"]
    parts.append("}")


_MEMORY_FIELDS = ("memlock_at_create", "memlock_full", "charged_at_create", "charged_full")


def _totals(t) -> dict[str, Any]:
    rec: dict[str, Any] = {f: getattr(t, f) for f in _MEMORY_FIELDS}
    rec["incomplete"] = t.incomplete
    rec["refused"] = list(t.refused)
    return rec


def _map_json(e) -> str:
    """One map of the maps document (a MapEntry): its spec, notes, inner map and memory."""
    m = e.spec
    t, f, b = m.type, m.map_flags, _JSON_BOOL
    key_type, value_type, slots = m.key_type, m.value_type, m.init_slots
    out = (f'{{"name": {_q(m.name)}, "kernel_name": {_q(m.kernel_name)}, '
           f'"type": {_map_type_json(t)}, "type_id": {t}, "key_size": {m.key_size}, '
           f'"value_size": {m.value_size}, "max_entries": {m.max_entries}, "map_flags": {f}, '
           f'"flags": {_flags_json(f)}, "map_extra": {m.map_extra}, '
           f'"numa_node": {m.numa_node}, "pinning": {m.pinning}, "kind": {_q(m.kind)}, '
           f'"section": {_q(m.section)}, '
           f'"inner": {"null" if e.inner is None else _map_json(e.inner)}, '
           f'"max_entries_set_at_load": {b[m.max_entries_set_at_load]}, '
           f'"value_size_set_at_load": {b[m.value_size_set_at_load]}, '
           f'"autocreate": {b[m.autocreate]}, '
           f'"key_type": {"null" if key_type is None else _q(key_type)}, '
           f'"value_type": {"null" if value_type is None else _q(value_type)}, '
           '"init_slots": ' + ("[" + ", ".join([f'{{"index": {i}, "target": {_q(target)}}}'
                                                for i, target in slots]) + "]"
                               if slots else "[]")
           + f', "notes": {_strings(words(e.notes)) if e.notes else "[]"}')
    if m.refused:
        out += f', "refused": {_q(m.refused)}'
    if m.instances != 1:
        out += f', "instances": {m.instances}'
    x = e.memory
    if x is not None:
        out += f', "memory": {_memory_json(x)}'
    if e.count is not None:
        out += f', "count": {e.count}'
    return out + "}"


def _memory_json(x) -> str:
    """A map's MapMemory: the four figures (null: unknown), then the tolerance of the
    charge, or why the figures are unknown."""
    a, b, c, d = x.memlock_at_create, x.memlock_full, x.charged_at_create, x.charged_full
    out = (f'{{"memlock_at_create": {"null" if a is None else a}, '
           f'"memlock_full": {"null" if b is None else b}, '
           f'"charged_at_create": {"null" if c is None else c}, '
           f'"charged_full": {"null" if d is None else d}, ')
    if x.charged_tolerance is None:
        return out + f'"unknown": {"null" if x.unknown is None else _q(x.unknown)}}}'
    if x.rejected:
        return out + f'"charged_tolerance": {x.charged_tolerance}, "rejected": {_q(x.rejected)}}}'
    return out + f'"charged_tolerance": {x.charged_tolerance}}}'


def _program_json(p) -> str:
    ms, subs, b = p.maps, p.subprograms, _JSON_BOOL
    return (f'{{"name": {_q(p.name)}, "section": {_q(p.section)}, '
            f'"type": {_prog_type_json(p.type)}, "type_id": {p.type}, '
            f'"expected_attach_type": {_attach_type_json(p.expected_attach_type)}, '
            f'"autoload": {b[p.autoload]}, "sleepable": {b[p.sleepable]}, "insns": {p.insns}, '
            f'"maps": {_strings(ms)}, "subprograms": {_strings(subs)}}}')


# -- several kernels ------------------------------------------------------------------------
@maker("Matrix")
def matrix_document(m) -> dict[str, Any]:
    return {"schema": MATRIX, "documents": [document(r) for r in m.results]}


@writer("Matrix")
def matrix_json(m) -> str | None:
    """A Matrix of results that all have a text writer, as JSON text (None: not so)."""
    write = [_WRITERS.get(type(r).__name__) for r in m.results]
    if None in write:
        return None
    return ('{"schema": ' + _q(MATRIX) + ', "documents": ['
            + ", ".join([w(r) for w, r in zip(write, m.results)]) + "]}")


# -- estimate -------------------------------------------------------------------------------
@maker("Footprint")
def estimate_document(fp) -> dict[str, Any]:
    """``bpfmem estimate`` of one map shape (a model Footprint)."""
    from ..uapi import flag_names, map_type_name
    sh = fp.shape
    return {**estimate_line(fp), "kernel": fp.kernel.describe(),
            "map": {"type": map_type_name(sh.type), "type_id": sh.type,
                    "key_size": sh.key_size, "value_size": sh.value_size,
                    "max_entries": sh.max_entries, "map_flags": sh.map_flags,
                    "flags": flag_names(sh.map_flags), "map_extra": sh.map_extra}}


def estimate_line(fp) -> dict[str, Any]:
    """A line of ``estimate --batch`` (the batch adds ``kernel``, the same on every line)."""
    return {"schema": ESTIMATE, **fp.as_dict()}


def batch_line(kernel: dict[str, Any]) -> Callable[[Any], str]:
    """The function that writes a footprint as its ``--batch`` line (JSON and a newline)
    on the kernel described by ``kernel``: the same on every line, so encoded once."""
    tail = ', "kernel": ' + json.dumps(kernel) + "}\n"
    dumps = json.dumps

    def line(fp) -> str:
        return dumps(estimate_line(fp))[:-1] + tail
    return line


def batch_error_line(lineno: int, message: str) -> str:
    """The ``--batch`` line of an input line that is no valid spec."""
    return json.dumps({"schema": ESTIMATE, "line": lineno, "error": message}) + "\n"


# -- measure --------------------------------------------------------------------------------
@maker("MeasureResult")
def measure_document(r) -> dict[str, Any]:
    maps = []
    for c in r.comparisons:
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
    doc = {"schema": MEASURE, "path": r.path, "kernel": r.kernel.describe(), "maps": maps,
           "summary": {"maps": len(maps), "measured": r.measured,
                       "memlock_matches": r.memlock_matches,
                       "rejections_match": r.rejections_match,
                       "charged_within_tolerance": r.charged_within_tolerance}}
    if r.programs is not None:
        doc["programs"] = _measured_programs(r.programs)
    return doc


def _measured_programs(pm) -> dict[str, Any]:
    """``measure --programs``: bytes; ``charged`` a program's load's charge minus the
    maps-only load's, ``peak`` the cgroup counter's peak during its load above the reading
    before it, ``transient`` = peak - end (given back by the end of the load)."""
    progs = []
    for p in pm.programs:
        if p.loaded:
            progs.append({"name": p.name, "section": p.section, "loaded": True,
                          "memlock": p.memlock, "jited_prog_len": p.jited_prog_len,
                          "xlated_prog_len": p.xlated_prog_len, "insn_cnt": p.insn_cnt,
                          "verified_insns": p.verified_insns, "charged": p.charged,
                          "end": p.end, "peak": p.peak, "transient": p.transient})
        else:
            progs.append({"name": p.name, "section": p.section, "loaded": False,
                          "errno": p.errno, "reason": p.reason})

    def phase(ph):
        return {"ok": ph.ok, "errno": ph.errno, "charged": ph.charged, "peak": ph.peak}
    return {"counter": pm.counter, "peak_counter": pm.peak_counter, "maps_only": phase(pm.maps),
            "whole_object": phase(pm.whole), "programs": progs,
            "summary": {"programs": len(pm.programs), "loaded": len(pm.loaded),
                        "refused": len(pm.refused), "memlock": pm.memlock,
                        "charged": pm.charged}}


# -- the json format ------------------------------------------------------------------------
def render_json(result: Any, out, *, indent: int | None = 2) -> None:
    """The result's document as JSON (``indent`` None: one line, written directly where the
    result has a text writer, else by json's C encoder)."""
    write = _WRITERS.get(type(result).__name__) if indent is None else None
    text = write(result) if write is not None else None
    out.write(text if text is not None else json.dumps(document(result), indent=indent))
    out.write("\n")
# -- binary size (size, size diff, the binary gate) ------------------------------------------
def _binary(rep) -> dict[str, Any]:
    """A :class:`~bpfmem.analysis.size.SizeReport`'s summary: what the binary is."""
    return {
        "path": rep.path, "file_size": rep.file_size, "vm_size": rep.vm_size,
        # memory mapped but never touched (Go's FIPS scratch buffer): only when there is some
        **({"vm_untouched": rep.vm_untouched} if rep.vm_untouched else {}),
        "kind": rep.kind, "stripped": rep.stripped, "pie": rep.pie,
        "go_version": rep.go_version,
        "pclntab": ({"layout": rep.pclntab_layout, "found_by": rep.pclntab_found_by}
                    if rep.pclntab_layout else None),
        "functions": rep.functions,
        "main_module": ({"path": rep.main_module.path, "version": rep.main_module.version}
                        if rep.main_module else None),
        "main_package": rep.main_path or None,
        "modules": [{"path": m.path, "version": m.version,
                     **({"replace": m.replace.path} if m.replace else {})}
                    for m in rep.modules],
        "notes": list(rep.notes),
    }


def _size_rows(rep, by: str, top: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from .size import shown_rows
    shown, (count, file, vm) = shown_rows(rep, by, top)
    out = []
    for r in shown:
        d = {"name": r.name, "file": r.file, "vm": r.vm}
        if by == "package":
            d["module"] = r.module
        out.append(d)
    return out, {"count": count, "file": file, "vm": vm}


def _why_linked(w) -> dict[str, Any]:
    return {
        "main": w.main,
        "savings": [{"importer": s.importer, "imported": s.imported, "saves": s.saves,
                     "packages": list(s.packages[:12]), "package_count": s.count,
                     "chain": list(s.chain)} for s in w.savings],
        "chains": [{"package": c.package, "file": c.file, "chain": list(c.chain)}
                   for c in w.chains],
        # why the graph may not be the binary's program: only when there is something
        **({"notes": list(w.notes)} if w.notes else {}),
    }


def _add_why(doc: dict[str, Any], why, rep) -> dict[str, Any]:
    from .size import why_note
    note = why_note(why, rep)
    if why is not None:
        doc["why"] = _why_linked(why)
    elif note is not None:
        doc["why"] = None
        doc["why_note"] = note
    return doc


@maker("SizeResult")
def size_document(r) -> dict[str, Any]:
    bins = []
    for rep in r.reports:
        rows, other = _size_rows(rep, r.by, r.top)
        b = _binary(rep)
        b.update(rows=rows, other=other,
                 labelled={"file": sum(p[3] for p in rep.pieces),
                           "vm": sum(p[4] for p in rep.pieces)})
        bins.append(b)
    doc: dict[str, Any] = {"schema": SIZE, "by": r.by, "binaries": bins}
    return _add_why(doc, r.why, r.reports[0] if r.reports else None)


@maker("SizeDiff")
def size_diff_document(r) -> dict[str, Any]:
    from .size import shown_deltas, treemap_rows
    old, new = r.old, r.new
    shown, (count, rest) = shown_deltas(r)
    doc: dict[str, Any] = {
        "schema": SIZE_DIFF, "by": r.by,
        "old": _binary(old), "new": _binary(new),
        "total": {"old": old.file_size, "new": new.file_size,
                  "delta": new.file_size - old.file_size,
                  "vm_old": old.vm_size, "vm_new": new.vm_size},
        "warnings": list(r.warnings),   # the builds differ in strip state, DWARF, toolchain
        "rows": [{"name": d.name, "old": d.old, "new": d.new, "delta": d.delta,
                  "vm_old": d.vm_old, "vm_new": d.vm_new, "vm_delta": d.vm_delta}
                 for d in shown],
        "other": {"count": count, "delta": rest},
        "treemap": treemap_rows(r),   # the new build's packages, each with its old size
    }
    return _add_why(doc, r.why, new)


@maker("BinaryCheck")
def binary_check_document(r) -> dict[str, Any]:
    return {
        "schema": BINARY_CHECK, "pass": r.passed,
        "binaries": [{"path": b.path, "file_size": b.file_size, "vm_size": b.vm_size,
                      "go_version": b.go_version} for b in r.reports],
        "verdicts": [{"path": v.path, "what": v.what, "size": v.size, "limit": v.limit,
                      "pass": v.ok} for v in r.verdicts],
        "failures": list(r.failures),
    }


# -- one pod: a reading (with an upgrade's headroom), a trace ---------------------------------
# Written key by key (a field added to a result is not a key added to the schema).
def smaps_record(c) -> dict[str, Any]:
    """A process's resident memory by class (:class:`~bpfmem.host.smaps.MemClasses`)."""
    return {"rss": c.rss, "anonymous": c.anonymous, "swap": c.swap,
            "binary_text": c.binary_text, "binary_rodata": c.binary_rodata,
            "binary_data": c.binary_data, "binary_bss": c.binary_bss, "files": c.files,
            "stack": c.stack, "thread_stacks": c.thread_stacks, "go_arenas": c.go_arenas,
            "go_arenas_mapped": c.go_arenas_mapped,
            "go_arenas_reserved": c.go_arenas_reserved, "anon_other": c.anon_other,
            "special": c.special, "mappings": c.mappings}


def runtime_record(f) -> dict[str, Any]:
    """What a Go runtime's /metrics says (:class:`~bpfmem.parse.gometrics.GoRuntimeFigures`)."""
    return {"heap_inuse": f.heap_inuse, "heap_idle": f.heap_idle,
            "heap_released": f.heap_released, "heap_alloc": f.heap_alloc,
            "heap_sys": f.heap_sys, "stack_inuse": f.stack_inuse, "stack_sys": f.stack_sys,
            "mspan_sys": f.mspan_sys, "mcache_sys": f.mcache_sys,
            "buck_hash_sys": f.buck_hash_sys, "gc_sys": f.gc_sys, "other_sys": f.other_sys,
            "sys": f.sys, "next_gc": f.next_gc, "gc_cycles": f.gc_cycles,
            "gogc_percent": f.gogc_percent, "gomemlimit": f.gomemlimit,
            "goroutines": f.goroutines, "threads": f.threads, "version": f.version}


def go_record(split, detail) -> dict[str, Any]:
    """One Go process: its split (parts add up to rss), settings, runtime figures, top
    allocation sites, where it all came from."""
    st = split.settings
    return {
        "pid": split.pid, "exe": detail.exe, "go_version": split.version,
        "main_package": detail.go.path if detail.go else None,
        "rss": split.rss, "parts": dict(split.parts), "source": split.source,
        "settings": {"GOGC": st.gogc, "GOGC_from": st.gogc_source,
                     "GOMEMLIMIT": st.memlimit, "GOMEMLIMIT_from": st.memlimit_source,
                     "madvdontneed": st.madvdontneed, "env": dict(detail.env),
                     "implications": list(st.implications)},
        "smaps": smaps_record(detail.classes) if detail.classes is not None else None,
        "runtime": runtime_record(detail.figures) if detail.figures is not None else None,
        "heap_profile": None if detail.top is None else {
            "url": detail.pprof_url, "inuse_space": detail.pprof_total,
            "top": [{"name": t.name, "flat": t.flat, "cum": t.cum} for t in detail.top]},
        "notes": list(split.notes) + list(detail.notes),
    }


def process_record(p) -> dict[str, Any]:
    """One process of the pod (:class:`~bpfmem.analysis.pod.ProcRow`)."""
    return {"pid": p.pid, "comm": p.comm, "rss": p.rss, "pss": p.pss, "uss": p.uss,
            "pss_anon": p.pss_anon, "swap": p.swap, "maps": p.maps}


def held_map_record(m) -> dict[str, Any]:
    """A map the pod's processes hold (:class:`~bpfmem.analysis.pod.MapRow`)."""
    return {"id": m.id, "name": m.name, "type": m.type, "key_size": m.key_size,
            "value_size": m.value_size, "max_entries": m.max_entries,
            "map_flags": m.map_flags, "map_extra": m.map_extra, "memlock": m.memlock,
            "charged": m.charged, "charged_full": m.charged_full, "tolerance": m.tolerance,
            "entries": m.entries, "holders": list(m.holders), "pins": list(m.pins),
            "charged_here": m.charged_here, "why": m.why}


def view_record(view) -> dict[str, Any]:
    return {
        "cgroup": {"path": view.path, "dir": view.fs_path, "version": view.version},
        "usage": view.usage, "limit": view.limit, "headroom": view.headroom,
        "share_of_limit": view.share, "peak": view.peak,
        "components": {c.key: c.bytes for c in view.components},
        "kernel_kinds": dict(view.kernel_kinds),
        "processes": [process_record(p) for p in view.processes],
        "process_totals": view.totals,
        "maps": [held_map_record(m) for m in view.maps],
        "maps_charged_here": view.maps_here, "maps_charged_elsewhere": view.maps_elsewhere,
        "maps_not_modelled": view.maps_unknown,
        "shared_elsewhere": dict(view.shared_elsewhere),
        "go": [go_record(x, view.details[x.pid]) for x in view.go],
        "notes": list(view.notes),
    }


def headroom_record(h, after: list[str], before: list[str] | None) -> dict[str, Any]:
    return {"after": after, "before": before, "usage_now": h.usage, "limit": h.limit,
            "upgrade_charge": h.upgrade_charge, "diff_upgrade_charge": h.diff_upgrade_charge,
            "released": h.released, "projected": h.projected, "share_of_limit": h.share,
            "headroom": h.headroom,
            "lines": [{"map": x.map, "action": x.action, "bytes": x.bytes, "why": x.why}
                      for x in h.lines],
            "notes": list(h.notes)}


def build_pod_report(view, kernel: dict | None, *,
                     headroom: dict | None = None) -> dict[str, Any]:
    doc = {"schema": POD, "kernel": kernel} | view_record(view)
    if headroom is not None:
        doc["upgrade"] = headroom
    return doc


def point_record(p) -> dict[str, Any]:
    return {"t": round(p.t, 4), "usage": p.usage, "limit": p.limit, "parts": p.parts,
            "procs": p.procs, "maps": p.maps, "kernel_peak": p.kernel_peak}


def summary_record(s) -> dict[str, Any]:
    """A trace's :class:`~bpfmem.analysis.pod.TraceSummary`."""
    p = s.peak
    return {"samples": s.samples, "duration": s.duration, "interval": s.interval,
            "peak": None if p is None else {"t": p.t, "usage": p.usage, "index": p.index,
                                            "parts": dict(p.parts)},
            "kernel_peak": s.kernel_peak, "kernel_peak_between": s.kernel_peak_between,
            "start": s.start, "settled": s.settled, "above_settled": s.above_settled,
            "limit": s.limit, "peak_share": s.peak_share, "notes": words(s.notes),
            "asked_interval": s.asked_interval, "behind": s.behind, "reading": s.reading,
            "processes": s.processes, "left": [list(x) for x in s.left],
            "peak_go_heap": s.peak_go_heap, "peak_garbage": s.peak_garbage,
            "peak_gc_at": s.peak_gc_at}


def build_trace_report(points, summary, *, cgroup: dict, kernel: dict | None,
                       command: list[str] | None, interval: float, interrupted: bool,
                       exit_code: int | None = None, peak_view=None) -> dict[str, Any]:
    return {"schema": POD_TRACE, "kernel": kernel, "cgroup": cgroup, "command": command,
            "exit_code": exit_code, "interval": interval, "interrupted": interrupted,
            "summary": summary_record(summary),
            "at_peak": view_record(peak_view) if peak_view is not None else None,
            "samples": [point_record(p) for p in points]}


def _kernel(profile) -> dict[str, Any] | None:
    return None if profile is None else profile.describe()


@maker("PodView")
def pod_document(v) -> dict[str, Any]:
    up = v.upgrade
    return build_pod_report(v, _kernel(v.kernel), headroom=None if up is None else
                            headroom_record(up.headroom, list(up.after),
                                            None if up.before is None else list(up.before)))


@maker("PodTrace")
def trace_document(t) -> dict[str, Any]:
    cg = t.cgroup
    doc = build_trace_report(t.points, t.summary,
                             cgroup={"path": cg.path, "dir": cg.dir, "version": cg.version,
                                     "scratch": cg.scratch},
                             kernel=_kernel(t.kernel),
                             command=None if t.command is None else list(t.command),
                             interval=t.interval, interrupted=t.interrupted,
                             exit_code=t.exit_code, peak_view=t.at_peak)
    doc["t0_monotonic"] = t.t0_monotonic
    return doc


# -- snapshot (the live node) ---------------------------------------------------------------
@maker("SnapshotView")
def snapshot_document(v) -> dict[str, Any]:
    """``bpfmem/snapshot/v2``: the scan's host and totals, the sums per cgroup, every process
    that holds a map and every program that uses one (once each) and every map (by id) with
    the model's figures when a profile was given (``model``).

    ``processes`` maps a pid (as a decimal string, JSON's only key type) to ``{"comm",
    "cgroup"}``; ``programs`` maps a program id to ``{"name", "type"}`` (and ``type_id`` for a
    type bpfmem has no name for). A map refers to them: ``owners`` is a list of ``{"pid"}``
    (with ``"fds"`` when the process holds more than one fd of it), ``programs`` a list of
    program ids. With jq: ``.processes as $p | .maps[] | [.name, (.owners[]? |
    $p[.pid|tostring].comm)]``.

    Per map, ``id``, ``name``, ``type``, ``key_size``, ``value_size``, ``max_entries`` and
    ``memlock`` (null: the kernel gave none) are always there. Every other key is left out
    when it has its default, so **a key absent means**:

    - ``type_id``: the number of ``type`` (written only for a type that reads
      ``unknown(N)``);
    - ``map_flags``: 0 and ``flags``: [] (both written when any flag is set);
    - ``map_extra``, ``btf_id``: 0;
    - ``frozen``: false (written true, or null when the kernel does not say);
    - ``entries``, ``entries_complete``, ``entries_method``: entries were not counted (the
      three come together); ``pressure``: not counted, or an array (whose slots always
      exist);
    - ``owners``, ``programs``, ``pins``: [] (nobody holds it / no program uses it / not
      pinned); an owner's ``fds``: 1;
    - ``model``: no model was asked for. Inside it ``memlock_full`` / ``charged_full``
      absent: the same as ``memlock`` / ``charged`` (the map does not grow with entries:
      jq ``.model.memlock_full // .model.memlock``); ``memlock``, ``charged``: the model has
      no figure; ``note``: none; ``delta`` (kernel memlock - model memlock) is written only
      for a ``mismatch`` (``match`` means 0).

    The document is written compact (no blank after ``,`` and ``:``).

    An owner may carry its own ``comm``/``cgroup``, which then win over ``processes``
    (never written by a single scan, where a pid has one of each); likewise a program given
    as an object (``id``, ``name``, ``type``) instead of an id. Every reader takes v1 too
    (every key on every map, owners and programs inline, as bpfmem wrote snapshots before):
    :func:`bpfmem.parse.snapshot.snapshot_from_dict` reads either.
    """
    doc, lines = snapshot_parts(v)
    doc["programs"] = {i: json.loads(text) for i, text in doc["programs"].items()}
    doc["maps"] = [json.loads(line) for line in lines]
    return doc


def snapshot_parts(v) -> tuple[dict[str, Any], list[str]]:
    """:func:`snapshot_document` as (the document without ``maps`` and with each entry of
    ``programs`` as its compact JSON text, each map's compact JSON text in order): a node's
    10,000 maps and 1,000 programs are written as text, without a dict each (the text is
    what ``json.dumps(x, separators=(",", ":"))`` of the document's map or program writes;
    the document takes each dict from its text)."""
    procs: dict[int, tuple[str, str | None]] = {}
    progs: dict[int, tuple[str, int]] = {}
    lines = _live_map_lines(v.maps, v.checks, procs, progs)
    doc = _snapshot_head(v, SNAPSHOT)
    doc["processes"] = {str(pid): {"comm": comm, "cgroup": cg}
                        for pid, (comm, cg) in sorted(procs.items())}
    doc["programs"] = {str(i): _program_head(name, t) + "}"
                       for i, (name, t) in sorted(progs.items())}
    if v.snapshot.progs is not None:
        _live_programs(doc, v)
    return doc, lines


def _live_programs(doc: dict[str, Any], v) -> None:
    """The programs a scan listed (``snapshot --programs``, the default of a live scan):
    each program's entry in ``programs`` gets the kernel's figures (``memlock``: fdinfo,
    bytes; ``xlated_prog_len``, ``jited_prog_len``: bpf_prog_info, bytes; ``map_ids``,
    ``tag``, ``verified_insns``, ``load_time`` (ns since boot), ``created_by_uid``;
    ``btf_id``, ``owners``, ``links``, ``link_owners``,
    ``pins`` left out when 0 or []), its holders join ``processes``; ``totals.programs``
    and ``totals.btf`` sum them, ``program_cgroups`` and ``program_processes`` per holder
    (a program is counted for its first program-fd holder, else its first link holder),
    ``btf`` lists the BTF objects and ``jit`` is bpf_jit_limit against the JIT's vmalloc
    (null: unreadable). A document without these keys was written without programs.
    (Each program's entry is written as text: :func:`snapshot_parts`.)"""
    s, t = v.snapshot, v.programs
    procs, table = doc["processes"], doc["programs"]

    def holders(owners) -> str:         # as text; each joins processes
        for o in owners:
            if (pid := str(o.pid)) not in procs:
                procs[pid] = {"comm": o.comm, "cgroup": o.cgroup}
        return "[" + ",".join([_owner_json(o.pid, o.fds) for o in owners]) + "]"

    for p in sorted(s.progs, key=_ID):
        # (a program's figures are ints, or None where said: an f-string writes an int as
        # json does)
        memlock, verified = p.memlock, p.verified_insns
        text = (f'{_program_head(p.name, p.type)},"tag":{_q(p.tag)},"memlock":'
                f'{"null" if memlock is None else memlock},'
                f'"xlated_prog_len":{p.xlated_prog_len},"jited_prog_len":{p.jited_prog_len},'
                f'"map_ids":[{",".join(map(str, p.map_ids))}],"verified_insns":'
                f'{"null" if verified is None else verified},"load_time":{p.load_time},'
                f'"created_by_uid":{p.created_by_uid}')
        if p.btf_id:
            text += f',"btf_id":{p.btf_id}'
        if p.owners:
            text += ',"owners":' + holders(p.owners)
        if p.links:
            text += f',"links":[{",".join(map(str, p.links))}]'
        if p.link_owners:
            text += ',"link_owners":' + holders(p.link_owners)
        if p.pins:
            text += f',"pins":[{",".join(map(_q, p.pins))}]'
        table[str(p.id)] = text + "}"
    btfs = []
    for b in sorted(s.btfs or (), key=_ID):
        entry = {"id": b.id, "name": b.name, "btf_size": b.btf_size, "kernel_btf": b.kernel_btf}
        if b.owners:
            holders(b.owners)           # (its holders join processes too)
            entry["owners"] = [_owner_ref(o.pid, o.fds) for o in b.owners]
        btfs.append(entry)
    doc["programs"] = {k: table[k] for k in sorted(table, key=int)}
    doc["processes"] = {k: procs[k] for k in sorted(procs, key=int)}
    doc["totals"]["programs"] = _prog_sum(t.node)
    doc["totals"]["btf"] = {"objects": t.btf_objects, "btf_size": t.btf_bytes,
                            "kernel_btf_size": t.kernel_btf_bytes}
    doc["program_cgroups"] = [{"cgroup": g.key, **_prog_sum(g)} for g in t.cgroups]
    doc["program_processes"] = [{"pid": g.key, **_prog_sum(g)} for g in t.processes]
    doc["btf"] = btfs
    j = s.jit
    doc["jit"] = {"bpf_jit_limit": j.limit if j else None, "in_use": j.in_use if j else None,
                  "packs": j.packs if j else None}


_ID = attrgetter("id")


def _prog_sum(g) -> dict[str, Any]:
    return {"programs": g.programs, "memlock": g.memlock, "jited_prog_len": g.jited,
            "xlated_prog_len": g.xlated}


def _snapshot_head(v, schema: str) -> dict[str, Any]:
    """Everything of a snapshot document before its tables and maps (the same in v1 and
    v2)."""
    s = v.snapshot
    return {
        "schema": schema,
        "taken_at": iso_time(s.taken_at),
        "host": {"hostname": s.hostname, "kernel": s.kernel, "possible_cpus": s.possible_cpus},
        "model_kernel": v.model_kernel,
        "duration_s": round(s.duration, 3),
        "entries_counted": s.entries_counted,
        "skipped": s.skipped,
        "errors": list(s.errors),
        "bpffs": list(s.bpffs),
        "owners_from": s.owners_from,
        "totals": {"maps": len(v.maps), "memlock": v.memlock, "charged_model": v.charged_model,
                   "model_status": dict(v.model_status)},
        "cgroups": [{"cgroup": c.cgroup, "maps": c.maps, "memlock": c.memlock}
                    for c in v.cgroups],
    }


def iso_time(t: float) -> str:
    """A time.time() value as the documents write it (UTC, ISO 8601, seconds): what
    ``datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")`` writes (the
    microseconds rounded half to even first, as it does), without importing datetime
    (a millisecond of every snapshot's start-up)."""
    import math
    import time
    frac, whole = math.modf(t)
    us = round(frac * 1e6)
    if us >= 1_000_000:
        whole += 1
    elif us < 0:
        whole -= 1
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(whole))


@lru_cache(maxsize=256)
def _map_type(t: int) -> str:
    return uapi.map_type_name(t)


@lru_cache(maxsize=256)
def _named_map_type(t: int) -> bool:
    """Whether map type ``t`` has a name that reads back as ``t``."""
    try:
        return int(uapi.MapType.from_name(uapi.map_type_name(t))) == t
    except (KeyError, ValueError):
        return False


@lru_cache(maxsize=1024)
def _flag_list(value: int) -> tuple[str, ...]:
    return tuple(uapi.flag_names(value))


@lru_cache(maxsize=256)
def _program_ref(name: str, t: int) -> dict[str, Any]:
    # shared between equal programs (the document is never mutated)
    ref: dict[str, Any] = {"name": name, "type": uapi.prog_type_name(t)}
    try:
        known = int(uapi.ProgType.from_name(ref["type"])) == t
    except (KeyError, ValueError):
        known = False
    if not known:
        ref["type_id"] = t
    return ref


@lru_cache(maxsize=1 << 12)
def _owner_ref(pid: int, fds: int) -> dict[str, Any]:
    return {"pid": pid} if fds == 1 else {"pid": pid, "fds": fds}


@lru_cache(maxsize=256)
def _program_head(name: str, t: int) -> str:
    """A program's ``name``, ``type`` (and ``type_id``) as JSON text, its closing brace left
    off (the rest of its entry follows)."""
    return _JSON_COMPACT(_program_ref(name, t))[:-1]


@lru_cache(maxsize=1 << 12)
def _owner_json(pid: int, fds: int) -> str:
    return _JSON_COMPACT(_owner_ref(pid, fds))


_JSON_COMPACT = json.JSONEncoder(separators=(",", ":")).encode
_JSON_INT = int.__repr__          # what json writes for an int, and for a finite float:
_JSON_FLOAT = float.__repr__
_JSON_CONST = {None: "null", True: "true", False: "false"}


def _json_value(x) -> str:
    """A scalar (None, bool, int, float, str) as compact json.dumps writes it."""
    if x is None or x is True or x is False:
        return _JSON_CONST[x]
    if isinstance(x, str):
        return _q(x)
    if type(x) is int:
        return _JSON_INT(x)
    if type(x) is float and isfinite(x):
        return _JSON_FLOAT(x)
    return _JSON_COMPACT(x)                 # NaN, Infinity, int and float subclasses


def _shape_json(m) -> str:
    """The keys of a map from ``type`` to ``btf_id`` (after its name), as text."""
    out = [',"type":', _q(_map_type(m.type))]
    if not _named_map_type(m.type):
        out += [',"type_id":', _JSON_INT(m.type)]
    out += [',"key_size":', _JSON_INT(m.key_size), ',"value_size":', _JSON_INT(m.value_size),
            ',"max_entries":', _JSON_INT(m.max_entries)]
    if m.map_flags:
        out += [',"map_flags":', _JSON_INT(m.map_flags), ',"flags":',
                _JSON_COMPACT(list(_flag_list(m.map_flags)))]
    if m.map_extra:
        out += [',"map_extra":', _JSON_INT(m.map_extra)]
    if m.btf_id:
        out += [',"btf_id":', _JSON_INT(m.btf_id)]
    return "".join(out)


def _live_map_lines(maps, checks, procs: dict, progs: dict) -> list[str]:
    """Each map of ``bpfmem/snapshot/v2`` as compact JSON text (the keys left out are listed
    in :func:`snapshot_document`); their owners and programs are added to ``procs``/
    ``progs``. A node's maps come in few shapes, held by few holder lists (a holder's maps
    share one), checked by few model checks: each is written once, into ``shapes`` (the
    keys from ``type`` to ``btf_id``), ``holders`` and ``models`` (these two by the id of
    the object, kept beside its text so that the id stays its own) and ``states`` (frozen and
    entry count), and a map costs its id, name and memlock, three look-ups, and its state,
    programs and pins when it has any. (A LiveMap is a tuple: its fields are read at once.)"""
    shapes: dict[tuple, str] = {}
    holders: dict[int, tuple[str, tuple]] = {}
    models: dict[int, tuple[str, object]] = {}
    states: dict[tuple, str] = {}
    lines: list[str] = []
    add = lines.append
    for m, check in zip(maps, checks):
        (mid, name, t, k, v, e, f, x, b, memlock, frozen, owners, programs, pins,
         entries, complete, method) = m
        shape = shapes.get((t, k, v, e, f, x, b))
        if shape is None:
            shape = shapes[(t, k, v, e, f, x, b)] = _shape_json(m)
        held = holders.get(id(owners))
        if held is None:
            held = holders[id(owners)] = (_owners_json(owners, procs), owners)
        model = models.get(id(check))
        if model is None:
            model = models[id(check)] = (
                "}" if check is None else f',"model":{_JSON_COMPACT(_model_check(check))}}}',
                check)
        if frozen is False and entries is None:
            state = ""
        else:       # counted maps of one shape often hold as many entries (0, or full)
            state = states.get((frozen, entries, complete, method, e))
            if state is None:
                state = states[(frozen, entries, complete, method, e)] = _state_json(m)
        used = _programs_json(programs, progs) if programs else ""
        pinned = _pins_json(pins) if pins else ""
        # (an id and a memlock are ints: an f-string writes an int as json does)
        add(f'{{"id":{mid},"name":{_q(name)}{shape},"memlock":'
            f'{"null" if memlock is None else memlock}'
            f'{state}{held[0]}{used}{pinned}{model[0]}')
    return lines


def _state_json(m) -> str:
    """A map's ``frozen`` (when not false) and entry count (when counted), as text (what
    ``frozen``, ``entries``, ``entries_complete``, ``entries_method`` and ``max_entries``
    make it)."""
    text = "" if m.frozen is False else ',"frozen":' + _json_value(m.frozen)
    if m.entries is not None:
        text += (f',"entries":{_json_value(m.entries)},"entries_complete":'
                 f'{_json_value(m.entries_complete)},"entries_method":'
                 f'{_json_value(m.entries_method)}')
        if (p := m.pressure) is not None:
            text += ',"pressure":' + _json_value(round(p, 6))
    return text


def _owners_json(owners, procs: dict) -> str:
    """A map's ``owners`` key as text ("" for none). A holder is written by reference, into
    ``procs``, unless its pid was first seen with another comm or cgroup: then inline
    (``procs`` only grows, so a holder list written again would be written the same)."""
    if not owners:
        return ""
    refs = []
    for o in owners:
        seen = procs.setdefault(o.pid, (o.comm, o.cgroup))
        if seen == (o.comm, o.cgroup):
            refs.append(_owner_ref(o.pid, o.fds))
        else:   # the same pid seen with another comm or cgroup: said inline
            refs.append({**_owner_ref(o.pid, o.fds), "comm": o.comm, "cgroup": o.cgroup})
    return ',"owners":' + _JSON_COMPACT(refs)


def _programs_json(programs, progs: dict) -> str:
    """A map's ``programs`` key as text: program ids, into ``progs``, but a program inline
    when its id was first seen with another name or type."""
    ids = []
    for p in programs:
        seen = progs.setdefault(p.id, (p.name, p.type))
        ids.append(_JSON_INT(p.id) if seen == (p.name, p.type) else
                   _JSON_COMPACT({"id": p.id, **_program_ref(p.name, p.type)}))
    return ',"programs":[' + ",".join(ids) + "]"


def _pins_json(pins) -> str:
    return ',"pins":[' + ",".join(map(_q, pins)) + "]"


def _model_check(c) -> dict[str, Any]:
    rec: dict[str, Any] = {}
    if c.memlock is not None:
        rec["memlock"] = c.memlock
    if c.memlock_full is not None and c.memlock_full != c.memlock:
        rec["memlock_full"] = c.memlock_full
    if c.charged is not None:
        rec["charged"] = c.charged
    if c.charged_full is not None and c.charged_full != c.charged:
        rec["charged_full"] = c.charged_full
    rec["status"] = c.status
    if c.status == "mismatch" and c.delta is not None:
        rec["delta"] = c.delta
    if c.note is not None:
        rec["note"] = c.note
    elif c.status == "in-range":
        rec["note"] = IN_RANGE_NOTE
    return rec


IN_RANGE_NOTE = "count entries (--entries) for an exact comparison"


@maker("SnapshotDiff")
def snapshot_diff_document(d) -> dict[str, Any]:
    """``bpfmem/snapshot-diff/v1``: both sides' totals, the change in memlock, the maps by
    status and the cgroups whose memlock moved."""
    def side(s):
        return None if s is None else {
            "id": s.id, "memlock": s.memlock, "entries": s.entries,
            "owner": None if s.owner is None else {"pid": s.owner.pid, "comm": s.owner.comm,
                                                   "cgroup": s.owner.cgroup}}

    def totals(t):
        return {"taken_at": t.taken_at, "hostname": t.hostname, "maps": t.maps,
                "memlock": t.memlock}

    return {"schema": SNAPSHOT_DIFF, "old": totals(d.old), "new": totals(d.new),
            "delta_memlock": d.delta_memlock, "counts": dict(d.counts),
            "cgroups": [{"cgroup": c.cgroup, "old": c.old, "new": c.new, "delta": c.delta}
                        for c in d.cgroups],
            "maps": [{"name": r.name, "type": _map_type(r.type), "status": r.status,
                      "old": side(r.old), "new": side(r.new),
                      "delta_memlock": r.delta_memlock, "delta_entries": r.delta_entries}
                     for r in d.maps]}
