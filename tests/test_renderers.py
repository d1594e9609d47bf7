"""Every (result type, format) of the renderer table draws a result made from the seed
objects: the result's maps appear in what it prints, JSON is exactly the result's document,
and a result type without a sample here (a new table entry) fails the test."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from bpfmem import api
from bpfmem.analysis.inventory import inventory
from bpfmem.analysis.matrix import Matrix
from bpfmem.analysis.measure import Comparison, Measured, MeasureResult
from bpfmem.report import formats
from bpfmem.report.documents import document

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "examples" / "seed"
V054, BEFORE, AFTER = (str(SEED / f"cni_{v}.bpf.o") for v in ("v054", "v060_before",
                                                              "v060_after"))
PROF = api.profile("6.18", cpus=2)
LIMIT = 128 << 20


def _measured(path: str) -> MeasureResult:
    """A measure result whose 'kernel' figures are the model's own (this test draws results,
    it does not measure); one map as the probe not reaching it."""
    spec = api.load_object(path)
    comps = []
    for m in spec.maps[:-1]:
        fp = api.estimate_map(api.shape_from_args(m.type_name, m.key_size, m.value_size,
                                                  m.max_entries, m.map_flags), PROF)
        comps.append(Comparison(m.name, fp, Measured(m.name, not fp.rejected, None,
                                                     fp.memlock_at_create,
                                                     fp.charged_at_create)))
    comps.append(Comparison(spec.maps[-1].name, None, None, "the probe gave no result"))
    return MeasureResult(path, PROF, tuple(comps))


def _samples() -> dict[str, tuple[object, list[str]]]:
    """result type name -> (a result on the seed objects, map names it must show)."""
    objs = [api.load_object(p) for p in (V054, BEFORE)]
    whatif = api.make_whatif(["service_*.flags+=no_prealloc"])
    check = api.check_objects([V054, AFTER], limit=LIMIT, max_fraction=0.4,
                              profiles=api.profiles(["6.1", "6.18"], [2, 64]), whatif=whatif)
    diff = api.diff_objects([V054], [BEFORE], profile=PROF, limit=LIMIT)
    advise = api.advise_objects([BEFORE], profile=PROF)
    inv = inventory(objs, [("broken.o", "broken.o: not an ELF file")], profile=PROF,
                    whatif=whatif)
    shape = api.shape_from_args("lru_hash", 16, 40, 65536)
    return {
        "Inventory": (inv, ["conntrack_table", "service_route_table"]),
        "Footprint": (api.estimate_map(shape, PROF, 1000), ["lru_hash"]),
        "CheckResult": (check, ["conntrack_table"]),
        "DiffResult": (diff, ["service_route_table"]),
        "AdviseResult": (advise, ["service_route_table"]),
        "MeasureResult": (_measured(BEFORE), ["conntrack_table"]),
        "Matrix": (Matrix((inventory(objs, profile=PROF),
                           inventory(objs, profile=api.profile("6.1", cpus=64)))),
                   ["conntrack_table"]),
    }


SAMPLES = _samples()
OPTIONS = {"junit": {"timestamp": "2026-01-01T00:00:00", "seconds": 1.0}}


def test_every_result_type_of_the_table_has_a_sample():
    kinds = {kind for kind, _fmt in formats.RENDERERS}
    file_reading = {"Inventory", "Footprint", "CheckResult", "DiffResult", "AdviseResult",
                    "MeasureResult", "Matrix"}
    assert file_reading <= kinds
    assert {type(r).__name__ for r, _ in SAMPLES.values()} == set(SAMPLES)


@pytest.mark.parametrize("kind,fmt", [k for k in formats.RENDERERS if k[0] in SAMPLES])
def test_renders(kind, fmt):
    result, names = SAMPLES[kind]
    if fmt == "html":
        pytest.importorskip("plotly")
    out = io.StringIO()
    formats.render(result, fmt, out, **OPTIONS.get(fmt, {}))
    text = out.getvalue()
    assert text.endswith("\n") and len(text.splitlines()) > 3
    for name in (["cni_v054: the kernel accepts every map"] if fmt == "junit" else names):
        assert name in text, (kind, fmt, name)
    if fmt == "json":
        assert json.loads(text) == json.loads(json.dumps(document(result)))
        assert json.loads(text)["schema"].startswith("bpfmem/")
    if fmt == "junit":
        import xml.etree.ElementTree as ET
        root = ET.fromstring(text)
        assert int(root.get("tests")) == sum(len(p.checks) for p in result.results)
    if fmt == "html":
        assert text.lstrip().lower().startswith("<!doctype html>")


def test_formats_of_and_an_unknown_format():
    assert formats.formats_of("CheckResult") == ("text", "json", "markdown", "junit", "html")
    with pytest.raises(ValueError, match="AdviseResult has no junit renderer"):
        formats.render(SAMPLES["AdviseResult"][0], "junit", io.StringIO())
    with pytest.raises(TypeError, match="no document for dict"):
        document({})
