"""Every JSON/TOML input fuzzed from real documents (tests/data/inputs: a `bpfmem snapshot` and
a `bpftool -j -f map show` of maps made on a real kernel, bpfmem.toml with every setting, an
occupancy file, estimate --batch specs): structure-aware mutations of the decoded document
(a value swapped for a hostile one, a key dropped or added) and of its text, through the
decoder and everything downstream (model, report, advise, what-if, estimate). Every input
gives a result or a one-line InputError/ValueError, never another exception."""

from __future__ import annotations

import copy
import io
import json
import math
import os
from datetime import timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpfmem import api
from bpfmem.analysis.advise import advise_all
from bpfmem.report.documents import document
from bpfmem.config import ConfigError, parse_config
from bpfmem.errors import BpfmemError, InputError
from bpfmem.parse.document import parse_json
from bpfmem import api as _api
from bpfmem.parse.access import analyze_code
from bpfmem.parse.objspec import parse_object_code
from bpfmem.report import snapshot as snapshot_report
from bpfmem.parse.snapshot import snapshot_from_bpftool, snapshot_from_dict

DATA = Path(__file__).resolve().parent / "data" / "inputs"
PROFILE = _api.profile("6.18", cpus=4)
EXAMPLES = int(os.environ.get("BPFMEM_FUZZ_EXAMPLES", "100"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=timedelta(seconds=2), database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

HOSTILE = [None, True, False, -1, 0, 2 ** 32, 2 ** 64, 2 ** 200, 1.5, -0.0, math.nan, math.inf,
           "", "x", "\x1b[31mred", "a|b`c", "9" * 50, [], {}, [[[[]]]], {"a": {"b": {}}},
           "1Mi", "6.1", ["6.1"], [1, "two"], {"id": 1}]


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def _set(node, path, value):
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value


@st.composite
def mutated_json(draw, seed_text: str):
    doc = json.loads(seed_text)
    for _ in range(draw(st.integers(1, 4))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(["value", "value", "drop", "add"]))
        parent = doc
        for p in path[:-1]:
            parent = parent[p]
        if op == "drop":
            del parent[path[-1]]
        elif op == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "id", "type", "maps"]))] = \
                copy.deepcopy(draw(st.sampled_from(HOSTILE)))
        else:
            _set(doc, path, copy.deepcopy(draw(st.sampled_from(HOSTILE))))
    text = json.dumps(doc)   # NaN and Infinity as JSON's non-standard tokens
    if draw(st.integers(0, 4)) == 0:   # and sometimes the text itself
        cut = draw(st.integers(0, len(text)))
        text = text[:cut] + draw(st.sampled_from(["", "]", "}", "[" * 5000, ",", "\x00",
                                                  "1e999", "-"])) + text[cut:]
    return text


def _seed(name: str) -> str:
    return (DATA / name).read_text()


def _render_snapshot(snap) -> None:
    view = api.snapshot_view(snap, PROFILE)
    snapshot_report.render_json(view, io.StringIO())
    snapshot_report.render_table(view, io.StringIO())


@SETTINGS
@given(mutated_json(_seed("snapshot.json")))
def test_snapshot_documents(text):
    try:
        snap = snapshot_from_dict(parse_json(text, "s.json"))
    except (InputError, ValueError) as e:
        assert "\n" not in str(e)
        return
    _render_snapshot(snap)


@SETTINGS
@given(mutated_json(_seed("bpftool-map-show.json")))
def test_bpftool_documents(text):
    try:
        snap = snapshot_from_bpftool(parse_json(text, "b.json"), kernel="6.18", cpus=4)
    except (InputError, ValueError) as e:
        assert "\n" not in str(e)
        return
    _render_snapshot(snap)


_EXAMPLE = parse_object_code(api.example_object_path().read_bytes(), path="example.o")
_USES = analyze_code(_EXAMPLE)


@SETTINGS
@given(st.one_of(mutated_json(_seed("occupancy.json")), mutated_json(_seed("snapshot.json"))))
def test_occupancy_documents(text):
    try:
        occ = api.occupancy_from(parse_json(text, "o.json"))
    except (InputError, ValueError) as e:
        assert "\n" not in str(e)
        return
    document(advise_all([(_EXAMPLE.spec, _USES)], PROFILE, occ))


TOML_VALUES = ["nan", "inf", "-inf", "-1", "0", "99999999999999999999", '"x"', '""', "[]",
               "{}", "[[[[1]]]]", "true", "1979-05-27T07:32:00Z", "07:32:00", '"1Mi"',
               "[1, 2]", '["a", 1]', "{ default = -1 }", "{ default = \"x\", min = [] }",
               "1.5", '"6.1"', "[" * 3000]


@st.composite
def mutated_toml(draw):
    lines = _seed("bpfmem.toml").splitlines()
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        line = lines[i]
        op = draw(st.sampled_from(["value", "value", "drop", "header", "key"]))
        if op == "value" and "=" in line:
            key = line.split("=", 1)[0]
            lines[i] = f"{key}= {draw(st.sampled_from(TOML_VALUES))}"
        elif op == "drop":
            del lines[i]
            if not lines:
                lines = [""]
        elif op == "header":
            lines.insert(i, draw(st.sampled_from(["[dynamic]", "[maps]", "[objects]",
                                                  "[dynamic.maps]", "[nonsense]", "[[set]]"])))
        else:
            lines.insert(i, f"{draw(st.sampled_from(['limit', 'x', 'ct', 'max']))} = "
                            f"{draw(st.sampled_from(TOML_VALUES))}")
    return "\n".join(lines) + "\n"


@SETTINGS
@given(mutated_toml())
def test_config_documents(text):
    try:
        cfg = parse_config(text, "bpfmem.toml")
    except ConfigError as e:
        assert "\n" not in str(e).strip() or "not valid TOML" in str(e)
        return
    try:
        api.make_whatif(cfg.sets, None, None, cfg.dynamic)
    except ValueError:
        pass


@SETTINGS
@given(st.lists(mutated_json(_seed("batch.jsonl").splitlines()[0]), min_size=1, max_size=4))
def test_batch_lines(lines):
    out = io.StringIO()
    status = api.estimate_batch_stream([ln + "\n" for ln in lines], out, PROFILE)
    records = [json.loads(r) for r in out.getvalue().splitlines()]
    assert len(records) == len([ln for ln in lines if ln.strip()])
    assert status == (1 if any("error" in r for r in records) else 0)


def test_every_seed_decodes():
    assert snapshot_from_dict(parse_json(_seed("snapshot.json"), "s")).maps
    assert snapshot_from_bpftool(parse_json(_seed("bpftool-map-show.json"), "b")).maps
    assert api.occupancy_from(parse_json(_seed("occupancy.json"), "o"))
    cfg = parse_config(_seed("bpfmem.toml"))
    assert cfg.limit == 128 << 20 and cfg.dynamic["maps"]["ct_tcp"]["min"] == 131072
    out = io.StringIO()
    lines = _seed("batch.jsonl").splitlines(True)
    assert api.estimate_batch_stream(lines, out, PROFILE) == 0
    assert issubclass(InputError, BpfmemError)
