"""The `bpfmem maps` command as people and scripts use it."""

from __future__ import annotations

import io
import json

import pytest

from conftest import FIXTURES
from bpfmem import cli
from bpfmem.api import example_object_path, load_object
from bpfmem.analysis.inventory import inventory as build_maps_report
from bpfmem.report.documents import MAPS as SCHEMA
from bpfmem.report.text import maps_text as render_table


def run(capsys, *argv):
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_default_is_the_bundled_example(capsys):
    rc, out, err = run(capsys, "maps", "--format", "json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["schema"] == SCHEMA
    assert doc["objects"][0]["path"] == str(example_object_path())
    assert "bundled example" in err
    names = {m["name"] for m in doc["objects"][0]["maps"]}
    assert {"service_route_table", "service_reverse_table", "conntrack_table",
            "metrics_map", "events"} <= names


def test_json_shape_is_the_documented_api(capsys):
    rc, out, _ = run(capsys, "maps", "--format", "json", str(FIXTURES / "map_in_map.o"))
    assert rc == 0
    obj = json.loads(out)["objects"][0]
    assert set(obj) >= {"path", "maps", "programs"}
    for m in obj["maps"]:
        assert set(m) >= {"name", "type", "type_id", "key_size", "value_size", "max_entries",
                          "map_flags", "map_extra", "numa_node", "pinning", "kind", "inner",
                          "max_entries_set_at_load"}
        assert m["kind"] in ("btf", "legacy", "data", "struct_ops")
        assert isinstance(m["type"], str) and isinstance(m["type_id"], int)
    assert any(m["inner"] is not None for m in obj["maps"])
    for p in obj["programs"]:
        assert set(p) >= {"name", "section", "type", "maps"}


def test_table_fits_100_columns():
    objs = [load_object(example_object_path())] + [load_object(p) for p in
                                                    sorted(FIXTURES.glob("*.o"))[:6]]
    buf = io.StringIO()
    render_table(build_maps_report(objs), buf, width=100)
    text = buf.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 100
    header = next(line for line in text.splitlines() if line.strip().startswith("map "))
    assert header.split() == ["map", "type", "key", "value", "max_entries", "flags", "kind"]
    for o in objs:
        for m in o.maps:
            if len(m.name) <= 28:
                assert m.name in text


def test_several_objects_one_bad(capsys, tmp_path):
    bad = tmp_path / "bad.o"
    bad.write_bytes(b"garbage")
    rc, out, err = run(capsys, "maps", "--format", "json", str(example_object_path()), str(bad))
    assert rc == 1
    doc = json.loads(out)
    assert len(doc["objects"]) == 1 and doc["errors"][0]["path"] == str(bad)
    assert err.count("bpfmem: error:") == 1


def test_help_teaches(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["maps", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "--format" in out and "possible CPU" in out


def test_no_command_prints_usage(capsys):
    assert cli.main([]) == 2
    assert "maps" in capsys.readouterr().out


def test_maps_memory_and_totals(capsys):
    rc, out, _ = run(capsys, "maps", "--format", "json", "--kernel", "6.18", "--cpus", "4")
    assert rc == 0
    doc = json.loads(out)
    assert doc["kernel"]["version"] == "6.18.0" and doc["kernel"]["possible_cpus"] == 4
    obj = doc["objects"][0]
    mems = [m["memory"] for m in obj["maps"]]
    for field in ("memlock_at_create", "memlock_full", "charged_at_create", "charged_full"):
        assert obj["memory"][field] == sum(m[field] for m in mems)
    # the example is sized like a real agent: tens of MiB of maps at start
    assert 20 << 20 < obj["memory"]["charged_at_create"] < 200 << 20


def test_maps_memory_follows_kernel_and_cpus(capsys):
    def total(*argv):
        run(capsys, "maps", "--format", "json", *argv)
        rc, out, _ = run(capsys, "maps", "--format", "json", *argv)
        return json.loads(out)["objects"][0]["memory"]["memlock_at_create"]
    assert total("--kernel", "6.18", "--cpus", "2") < total("--kernel", "6.18", "--cpus", "64")
    assert total("--kernel", "5.10", "--cpus", "2") != total("--kernel", "6.18", "--cpus", "2")


def test_perf_array_memory_uses_possible_cpus(capsys):
    rc, out, _ = run(capsys, "maps", "--format", "json", "--kernel", "6.18", "--cpus", "8",
                     str(FIXTURES / "perf_ringbuf.o"))
    m = next(m for m in json.loads(out)["objects"][0]["maps"] if m["name"] == "perf_events")
    assert m["max_entries"] == 0 and m["max_entries_set_at_load"]
    assert m["memory"]["memlock_at_create"] == 312 + 8 * 8   # bpf_array + 8 slots on 6.18


def test_estimate_json(capsys):
    rc, out, _ = run(capsys, "estimate", "--type", "hash", "--key-size", "4", "--value-size",
                     "8", "--max-entries", "1000", "--kernel", "6.18", "--cpus", "2",
                     "--format", "json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["schema"] == "bpfmem/estimate/v1"
    assert doc["memlock"] == doc["memlock_at_create"] == doc["memlock_full"] == 81_424
    assert doc["rejected"] is None and doc["kernel"]["version"] == "6.18.0"


def test_estimate_rejection_and_flags(capsys):
    rc, out, _ = run(capsys, "estimate", "--type", "lru_hash", "--key-size", "4",
                     "--value-size", "8", "--max-entries", "10", "--flags", "no_prealloc",
                     "--format", "json")
    assert rc == 0 and json.loads(out)["rejected"].startswith("ENOTSUPP")
    rc, _, err = run(capsys, "estimate", "--type", "hash", "--max-entries", "10",
                     "--flags", "no_such_flag")
    assert rc == 2 and "no_such_flag" in err
    rc, _, err = run(capsys, "estimate", "--type", "nope")
    assert rc == 2 and "unknown map type" in err


def test_estimate_entries(capsys):
    rc, out, _ = run(capsys, "estimate", "--type", "hash", "--key-size", "4", "--value-size",
                     "8", "--max-entries", "65536", "--flags", "no_prealloc", "--entries",
                     "1000", "--kernel", "6.18", "--cpus", "2", "--format", "json")
    d = json.loads(out)
    assert d["memlock"] - d["memlock_at_create"] == 1000 * (48 + 8 + 8 + 8)
    assert d["memlock_full"] - d["memlock_at_create"] == 65536 * 72


def test_estimate_batch_keeps_order_and_reports_bad_lines(capsys, tmp_path, monkeypatch):
    specs = tmp_path / "s.jsonl"
    specs.write_text('{"type": "array", "key_size": 4, "value_size": 8, "max_entries": 1000}\n'
                     '\n'
                     '{"type": "lru_hash", "key_size": 4, "value_size": 8, "max_entries": 10,'
                     ' "map_flags": 1}\n'
                     'not json\n'
                     '{"type": "hash", "key_size": 4, "value_size": 8, "max_entries": 1000,'
                     ' "entries": 5}\n')
    rc, out, _ = run(capsys, "estimate", "--batch", str(specs), "--kernel", "6.18", "--cpus",
                     "2")
    lines = [json.loads(x) for x in out.splitlines()]
    assert rc == 1 and len(lines) == 4
    assert lines[0]["memlock"] == 8312
    assert lines[1]["rejected"].startswith("ENOTSUPP")
    assert lines[2]["line"] == 4 and "error" in lines[2]
    assert lines[3]["entries"] == 5 and lines[3]["kernel"]["possible_cpus"] == 2


def test_estimate_table(capsys):
    rc, out, _ = run(capsys, "estimate", "--type", "percpu_array", "--key-size", "4",
                     "--value-size", "1000", "--max-entries", "65536", "--kernel", "6.18",
                     "--cpus", "2")
    assert rc == 0 and "131596600" in out and "memlock" in out
