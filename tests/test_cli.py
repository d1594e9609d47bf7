"""The `bpfmem maps` command as people and scripts use it."""

from __future__ import annotations

import io
import json

import pytest

from conftest import FIXTURES
from bpfmem import cli
from bpfmem.api import example_object_path, load_object
from bpfmem.report.maps import SCHEMA, build_maps_report, render_table


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
