"""The maps document is written as JSON text (report/documents.maps_json), with no dict in
between: it must be byte for byte what json.dumps gives for the document as the dict makers
built it before (kept here as the reference), on every committed object, with and without a
kernel, with a what-if, for several kernels (a Matrix), for objects carried by a binary, with
loader errors, and pretty-printed (a terminal's indent=2, from the dict document() reads back).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from bpfmem import api, uapi
from bpfmem.report.documents import MAPS, MATRIX, document, maps_json, render_json
from bpfmem.report.hints import words
from bpfmem.values import replace

from conftest import CILIUM_EXAMPLES, fixture_objects

REPO = Path(__file__).resolve().parent.parent
OBJECTS = fixture_objects() + sorted((REPO / "examples").rglob("*.o")) + \
    sorted((REPO / "src" / "bpfmem" / "examples").glob("*.o")) + \
    sorted(CILIUM_EXAMPLES.glob("*.o"))
KERNELS = [api.profile("6.18", cpus=4), api.profile("5.10", cpus=64)]


# -- the reference: the dict makers the writer replaced ---------------------------------------
def _totals(t):
    rec = {f: getattr(t, f) for f in ("memlock_at_create", "memlock_full",
                                      "charged_at_create", "charged_full")}
    rec["incomplete"] = t.incomplete
    rec["refused"] = list(t.refused)
    return rec


def _map_entry(e):
    m = e.spec
    rec = {
        "name": m.name, "kernel_name": m.kernel_name, "type": uapi.map_type_name(m.type),
        "type_id": m.type, "key_size": m.key_size, "value_size": m.value_size,
        "max_entries": m.max_entries, "map_flags": m.map_flags,
        "flags": uapi.flag_names(m.map_flags), "map_extra": m.map_extra,
        "numa_node": m.numa_node, "pinning": m.pinning, "kind": m.kind,
        "section": m.section, "inner": _map_entry(e.inner) if e.inner is not None else None,
        "max_entries_set_at_load": m.max_entries_set_at_load,
        "value_size_set_at_load": m.value_size_set_at_load, "autocreate": m.autocreate,
        "key_type": m.key_type, "value_type": m.value_type,
        "init_slots": [{"index": i, "target": t} for i, t in m.init_slots],
        "notes": words(e.notes)}
    if m.refused:
        rec["refused"] = m.refused
    if m.instances != 1:
        rec["instances"] = m.instances
    if e.memory is not None:
        x = e.memory
        mem = {f: getattr(x, f) for f in ("memlock_at_create", "memlock_full",
                                          "charged_at_create", "charged_full")}
        if x.charged_tolerance is None:
            mem["unknown"] = x.unknown
        else:
            mem["charged_tolerance"] = x.charged_tolerance
            if x.rejected:
                mem["rejected"] = x.rejected
        rec["memory"] = mem
    if e.count is not None:
        rec["count"] = e.count
    return rec


def _program(p):
    return {"name": p.name, "section": p.section,
            "type": uapi.prog_type_name(p.type) if p.type else None, "type_id": p.type,
            "expected_attach_type": uapi.attach_type_name(p.expected_attach_type)
            if p.expected_attach_type else None,
            "autoload": p.autoload, "sleepable": p.sleepable, "insns": p.insns,
            "maps": list(p.maps), "subprograms": list(p.subprograms)}


def _object(o):
    s = o.spec
    rec = {"path": s.path, "name": s.name, "endianness": "little" if s.little_endian else "big",
           "license": s.license, "btf": s.has_btf,
           "loader": {"name": s.loader, "why": s.loader_reason},
           **({"binary": s.carrier} if s.carrier else {}),
           "maps": [_map_entry(m) for m in o.maps],
           "programs": None if s.programs is None else [_program(p) for p in s.programs],
           "notes": list(s.notes)}
    if o.memory is not None:
        rec["memory"] = _totals(o.memory)
    if o.memory_before is not None:
        rec["memory_before"] = _totals(o.memory_before)
    if o.unmatched_settings is not None:
        rec["unmatched_settings"] = list(o.unmatched_settings)
    if o.programs is not None:
        rec["program_memory"] = {
            "memlock_at_least": sum(p.memlock_at_least for p in o.programs),
            "lower_bound": True,
            "programs": [{"name": p.name, "insns_loaded": p.insns,
                          "memlock_at_least": p.memlock_at_least} for p in o.programs]}
    return rec


def reference(inv) -> dict:
    doc = {"schema": MAPS}
    if inv.kernel is not None:
        doc["kernel"] = inv.kernel.describe()
    if inv.whatif is not None:
        doc["whatif"] = list(inv.whatif)
    doc["objects"] = [_object(o) for o in inv.objects]
    doc["errors"] = [{"path": p, "error": e} for p, e in inv.errors]
    if inv.binaries:
        doc["binaries"] = [{"path": b.path, "objects": list(b.objects),
                            **({"memory": _totals(b.memory)} if b.memory is not None else {})}
                           for b in inv.binaries]
    return doc


# -- the checks -------------------------------------------------------------------------------
def _same(result, ref: dict) -> None:
    """The result written compactly (as for a pipe or a file) and pretty (a terminal) is
    json.dumps of the reference; document() gives the reference back."""
    for indent in (None, 2):
        out = io.StringIO()
        render_json(result, out, indent=indent)
        assert out.getvalue() == json.dumps(ref, indent=indent) + "\n"
    assert document(result) == ref


def _load(path: Path, loader: str = "auto"):
    objects, _skipped = api.load_objects(str(path), loader=loader)
    return objects


@pytest.mark.parametrize("path", OBJECTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_object_with_and_without_a_kernel(path):
    for loader in ("libbpf", "cilium-ebpf"):
        try:
            objects = _load(path, loader)
        except Exception as e:   # an object the loader refuses: an error entry instead
            inv = api.inventory([], [(str(path), str(e))], profile=KERNELS[0])
            _same(inv, reference(inv))
            continue
        for profile in (None, *KERNELS):
            inv = api.inventory(objects, profile=profile)
            _same(inv, reference(inv))
    no_programs = api.load_objects(str(path), programs=False)[0]
    inv = api.inventory(no_programs, profile=KERNELS[0])
    assert '"programs": null' in maps_json(inv)
    _same(inv, reference(inv))


def test_several_objects_what_if_errors_and_kernels():
    objects = [o for p in OBJECTS[:12] for o in _load(p)]
    whatif = api.make_whatif(["*.max_entries=4096", "h*.flags+=no_prealloc", "a*.count=3",
                              "nomatch.count=2"])
    results = [api.inventory(objects, [("missing.o", "missing.o: no such file")],
                             profile=k, whatif=whatif) for k in KERNELS]
    for inv in results:
        assert inv.whatif and any(o.memory_before is not None for o in inv.objects)
        assert any(m.count == 3 for o in inv.objects for m in o.maps)
        _same(inv, reference(inv))
    matrix = api.one_or_matrix(results)
    ref = {"schema": MATRIX, "documents": [reference(r) for r in results]}
    _same(matrix, ref)


def test_objects_a_binary_carries():
    """Embedded objects name their binary, and the binary's totals follow the objects."""
    objects = [replace(o, carrier="/usr/bin/agent", path=f"/usr/bin/agent:{o.name}")
               for p in OBJECTS[:3] for o in _load(p)]
    for profile in (None, KERNELS[0]):
        inv = api.inventory(objects, profile=profile)
        assert inv.binaries
        _same(inv, reference(inv))


def test_text_that_needs_escaping():
    """Names, notes and errors with quotes, backslashes, control and non-ASCII characters
    are escaped as json.dumps escapes them."""
    odd = 'm"\\\n\x01é\u2028😀'
    objects = _load(OBJECTS[0])
    o = objects[0]
    maps = tuple(replace(m, name=odd + m.name, section=odd, key_type=odd, notes=(odd,),
                         instances=1 + i % 3, refused=odd if i % 2 else None)
                 for i, m in enumerate(o.maps))
    o = replace(o, path=odd, license=odd, maps=maps, notes=(odd,))
    inv = api.inventory([o], [(odd, odd)], profile=KERNELS[0])
    _same(inv, reference(inv))
    assert '"instances": 2' in maps_json(inv) and '"refused": ' in maps_json(inv)
    assert json.loads(maps_json(inv))["objects"][0]["maps"][0]["section"] == odd
