"""`bpfmem measure`: real maps in a scratch memory cgroup beside the model."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import FIXTURES, is_root
from bpfmem import cli


def run(capsys, *argv):
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.kernel
@pytest.mark.skipif(not is_root(), reason="creating maps needs root")
def test_measure_matches_model(capsys):
    rc, out, err = run(capsys, "measure", str(FIXTURES / "size_only.o"), "--fill",
                       "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["schema"] == "bpfmem/measure/v1"
    s = doc["summary"]
    assert s["measured"] == 5
    assert s["memlock_matches"] == 5 and s["rejections_match"] == 5
    assert s["charged_within_tolerance"] == 5
    assert all(len(m["measured"]["fills"]) == 2 for m in doc["maps"])
    leftovers = [p.name for p in Path("/sys/fs/cgroup/memory").iterdir()
                 if p.name.startswith(f"bpfmem-measure-{os.getpid()}-")]
    assert not leftovers


def test_measure_without_root_names_the_capability(capsys, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    rc, out, err = run(capsys, "measure", str(FIXTURES / "size_only.o"))
    assert rc == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "CAP_BPF" in lines[0] and "Traceback" not in err


def test_measure_bad_object(capsys, tmp_path):
    bad = tmp_path / "x.o"
    bad.write_bytes(b"\x7fELF")
    rc, _, err = run(capsys, "measure", str(bad))
    assert rc == 1 and err.startswith("bpfmem: error: ") and len(err.strip().splitlines()) == 1
