"""A max_entries that looks like a placeholder the agent resizes at load (NetObserv declares
16,777,216) gets a note pointing at --set, in `maps` and in `check`."""

from __future__ import annotations

import json

import elfgen
from bpfmem import cli
from bpfmem.analysis.placeholders import PLACEHOLDER_MIN


def run(capsys, *argv):
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def _object(tmp_path):
    p = tmp_path / "flows.bpf.o"
    p.write_bytes(elfgen.btf_map_object([
        ("flows", {"type": 1, "max_entries": PLACEHOLDER_MIN}, 40, 64),       # hash
        ("almost", {"type": 1, "max_entries": PLACEHOLDER_MIN - 1}, 8, 8),
        ("ring", {"type": 27, "max_entries": PLACEHOLDER_MIN}, 0, 0)]))      # bytes: real
    return str(p)


def _placeholder_notes(notes):
    return [n for n in notes if "placeholder" in n]


def test_maps_notes_a_placeholder_size(capsys, tmp_path):
    obj = _object(tmp_path)
    rc, out, _ = run(capsys, "maps", obj, "--kernel", "6.18", "--cpus", "2", "--format", "json")
    maps = {m["name"]: m for m in json.loads(out)["objects"][0]["maps"]}
    (note,) = _placeholder_notes(maps["flows"]["notes"])
    assert "16,777,216" in note and "--set 'flows.max_entries=N'" in note
    assert not _placeholder_notes(maps["almost"]["notes"] + maps["ring"]["notes"])
    rc, out, _ = run(capsys, "maps", obj, "--kernel", "6.18", "--cpus", "2")
    assert "looks like a placeholder" in " ".join(out.split())
    # priced at the real size, the note goes
    rc, out, _ = run(capsys, "maps", obj, "--kernel", "6.18", "--cpus", "2", "--format", "json",
                     "--set", "flows.max_entries=65536")
    maps = {m["name"]: m for m in json.loads(out)["objects"][0]["maps"]}
    assert not _placeholder_notes(maps["flows"]["notes"])


def test_check_notes_it_beside_the_verdict(capsys, tmp_path):
    obj = _object(tmp_path)
    rc, out, _ = run(capsys, "check", obj, "--limit", "128Mi", "--kernel", "6.18", "--cpus",
                     "2", "--format", "json")
    r = json.loads(out)["results"][0]
    assert rc == 1 and [n.split(":")[0] for n in r["notes"]] == ["flows/flows"]
    rc, out, _ = run(capsys, "check", obj, "--limit", "128Mi", "--kernel", "6.18", "--cpus",
                     "2", "--format", "markdown")
    assert "> note: flows/flows: max_entries 16,777,216 looks like a placeholder" in out
    rc, out, _ = run(capsys, "check", obj, "--limit", "64Gi", "--kernel", "6.18", "--cpus",
                     "2", "--set", "flows.max_entries=65536", "--format", "json")
    assert json.loads(out)["results"][0]["notes"] == []
