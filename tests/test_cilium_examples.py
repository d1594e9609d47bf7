"""cilium/ebpf's own example objects (tests/data/cilium_examples) through the commands: no
false refusals, the loader each object was read with, both loaders side by side."""

from __future__ import annotations

import json

import pytest

from conftest import CILIUM_EXAMPLES
from bpfmem.api import load_object
from bpfmem.cli import main
from bpfmem.model.estimate import estimate_spec
from bpfmem.api import profile
from bpfmem.uapi import MapType

EXAMPLES = sorted(CILIUM_EXAMPLES.glob("*.o"))
RINGBUF = str(CILIUM_EXAMPLES / "ringbuffer_bpfel.o")
SOCKOPS = str(CILIUM_EXAMPLES / "tcprtt_sockops_bpfel.o")
K = ["--kernel", "6.18", "--cpus", "4"]


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_no_false_refusal(path):
    spec = load_object(path, loader="auto")
    assert spec.loader == "cilium-ebpf" and "bpf2go" in spec.loader_reason
    prof = profile("6.18", cpus=4)
    for m in spec.maps:
        fp, why = estimate_spec(m, prof)
        assert not m.refused, (m.name, m.refused)
        if m.type == MapType.STRUCT_OPS:      # sched_ext: the kernel's struct decides
            assert fp is None and "kernel's struct" in why
            continue
        assert fp is not None and not fp.rejected, (m.name, fp and fp.rejected)


def test_maps_reports_the_loader_and_no_refused_ring_buffer(capsys):
    rc, out, _ = run(capsys, "maps", RINGBUF, "--format", "json", *K)
    o = json.loads(out)["objects"][0]
    assert rc == 0 and o["loader"]["name"] == "cilium-ebpf"
    assert "bpf2go" in o["loader"]["why"]
    assert o["memory"]["refused"] == [] and o["memory"]["charged_at_create"] > 1 << 24
    rc, out, _ = run(capsys, "maps", RINGBUF, "--format", "json", "--loader", "libbpf", *K)
    o = json.loads(out)["objects"][0]
    assert o["loader"] == {"name": "libbpf", "why": "--loader libbpf"}
    assert o["memory"]["refused"] == ["events"] and o["memory"]["charged_at_create"] == 0
    rc, out, _ = run(capsys, "maps", RINGBUF, "--loader", "libbpf", *K, "--width", "160")
    assert "1 refused, not created: events" in out and "loader: libbpf" in out


def test_check_passes_with_cilium_and_fails_with_libbpf(capsys):
    assert run(capsys, "check", SOCKOPS, "--limit", "128Mi", *K)[0] == 0
    rc, out, _ = run(capsys, "check", SOCKOPS, "--limit", "128Mi", "--loader", "libbpf", *K)
    assert rc == 1 and "refused" in out
    rc, out, _ = run(capsys, "check", SOCKOPS, "--limit", "128Mi", "--loader",
                     "libbpf,cilium-ebpf", "--format", "json", *K)
    doc = json.loads(out)
    assert rc == 1 and not doc["pass"]
    assert [(r["loader"], r["pass"], r["refused"]) for r in doc["results"]] == [
        ("libbpf", False, ["tcprtt_sockops_/rtt_events"]), ("cilium-ebpf", True, [])]
    assert [o["loader"]["name"] for r in doc["results"] for o in r["objects"]] == \
        ["libbpf", "cilium-ebpf"]


def test_diff_one_object_under_both_loaders(capsys):
    rc, out, _ = run(capsys, "diff", RINGBUF, RINGBUF, "--old-loader", "libbpf",
                     "--new-loader", "cilium-ebpf", "--format", "json", *K)
    doc = json.loads(out)
    assert rc == 0
    assert (doc["old"]["loaders"], doc["new"]["loaders"]) == (["libbpf"], ["cilium-ebpf"])
    assert (doc["old"]["refused"], doc["new"]["refused"]) == (["events"], [])
    row = next(r for r in doc["maps"] if r["map"] == "events")
    assert row["changes"] == ["value_size: 20 -> 0"] and row["delta_at_create"] > 1 << 24
    rc, out, _ = run(capsys, "diff", RINGBUF, RINGBUF, "--old-loader", "libbpf",
                     "--new-loader", "cilium-ebpf", *K)
    assert "loaders: libbpf -> cilium-ebpf" in out and "old: refused maps" in out


def test_loader_from_config_and_bad_loader(capsys, tmp_path):
    cfg = tmp_path / "bpfmem.toml"
    cfg.write_text('limit = "128Mi"\nloader = "libbpf"\n')
    rc, out, _ = run(capsys, "check", SOCKOPS, "--config", str(cfg), "--format", "json", *K)
    assert rc == 1 and json.loads(out)["results"][0]["loader"] == "libbpf"
    rc, _out, err = run(capsys, "maps", RINGBUF, "--loader", "bcc")
    assert rc == 2 and "unknown loader 'bcc'" in err
    cfg.write_text('loader = "bcc"\n')
    rc, _out, err = run(capsys, "check", SOCKOPS, "--config", str(cfg), "--limit", "1Gi")
    assert rc == 1 and "unknown loader" in err


def test_advise_records_the_loader(capsys):
    rc, out, _ = run(capsys, "advise", SOCKOPS, "--format", "json", *K)
    assert rc == 0 and json.loads(out)["objects"][0]["loader"]["name"] == "cilium-ebpf"
