"""The case that started bpfmem (a CNI release whose new maps took 59 MiB of a 128 MiB pod, cut
to 35 MiB by five BPF_F_NO_PREALLOC hash maps), with our
own three releases in examples/seed: v0.5.4 has none of the service route maps; v0.6.0 adds
five preallocated policy hash tables and an LRU reverse table (about 59.6 MiB at start); the
fix marks the five hashes BPF_F_NO_PREALLOC (about 35.3 MiB)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import is_root
from bpfmem import api, cli

SEED = Path(__file__).resolve().parent.parent / "examples" / "seed"
V054, BEFORE, AFTER = (str(SEED / f"cni_{v}.bpf.o") for v in ("v054", "v060_before",
                                                               "v060_after"))
FIVE = {"service_route_table", "service_access_table", "service_deny_table",
        "service_remote_grant_table", "attachment_identity_table"}
K = ["--kernel", "6.18", "--cpus", "2"]
MiB = 1 << 20


def run(capsys, *argv):
    rc = cli.main(list(argv))
    return rc, capsys.readouterr().out


def test_start_charge_before_and_after(capsys):
    totals = {}
    for name, path in (("before", BEFORE), ("after", AFTER)):
        rc, out = run(capsys, "maps", "--format", "json", path, *K)
        totals[name] = json.loads(out)["objects"][0]["memory"]["charged_at_create"]
    assert abs(totals["before"] / MiB - 59.6) < 0.3
    assert abs(totals["after"] / MiB - 35.3) < 0.3


def test_diff_tells_the_story(capsys):
    rc, out = run(capsys, "diff", V054, BEFORE, "--limit", "128Mi", "--format", "json", *K)
    d = json.loads(out)
    added = {m["map"] for m in d["maps"] if m["status"] == "added"}
    assert added == FIVE | {"service_reverse_table"}
    assert abs(d["upgrade_charge"] / MiB - 59.6) < 0.3           # the whole pod at first start
    rc, out = run(capsys, "diff", BEFORE, AFTER, "--limit", "128Mi", "--format", "json", *K)
    d = json.loads(out)
    changed = {m["map"] for m in d["maps"] if m["status"] == "changed"}
    assert changed == FIVE and set(d["pin_incompatible"]) == FIVE
    assert abs(d["delta_at_create"] / MiB + 24.3) < 0.3
    assert d["delta_full"] > 0    # rows written one by one cost more than preallocated ones
    # the LRU stays preallocated: its pin is reused
    lru = next(m for m in d["maps"] if m["map"] == "service_reverse_table")
    assert lru["status"] == "unchanged" and lru["pin_reused"]


def test_check_gates_before_and_passes_after(capsys):
    args = ["--limit", "128Mi", "--max-fraction", "0.4", *K]
    assert run(capsys, "check", BEFORE, *args)[0] == 1
    assert run(capsys, "check", AFTER, *args)[0] == 0
    assert run(capsys, "check", AFTER, *args, "--full")[0] == 1


def test_markdown_comment_reads_as_the_story(capsys):
    rc, md = run(capsys, "diff", BEFORE, AFTER, "--limit", "128Mi", "--format", "markdown", *K)
    assert "59.6Mi → **35.3Mi**" in md
    assert "map_flags: 0 -> no_prealloc" in md and "incompatible" in md


@pytest.mark.kernel
@pytest.mark.skipif(not is_root(), reason="creating maps needs root")
def test_kernel_confirms_both_releases():
    for path in (BEFORE, AFTER):
        result = api.measure_object(path)
        prof, comps = result.kernel, result.comparisons
        measured = [c for c in comps if c.measured is not None]
        assert measured and all(c.memlock_match for c in measured)
        assert all(c.charged_within for c in measured)
        total_kernel = sum(c.measured.charged for c in measured)
        total_model = sum(c.model.charged_at_create for c in measured)
        assert abs(total_kernel - total_model) <= len(measured) * 4096
