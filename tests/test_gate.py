"""check, diff and what-if: the CI gate and the build-to-build story."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

import elfgen
from bpfmem import api, cli
from bpfmem.units import format_size, parse_size
from bpfmem.analysis.whatif import DynamicSizing, parse_setting
from bpfmem.config import ConfigError, load_config
from bpfmem.testing import MapsDoNotFit, assert_maps_fit

EXAMPLE = str(api.example_object_path())


def run(capsys, *argv):
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("text,n", [("128Mi", 128 << 20), ("1.5Gi", 3 << 29), ("500M", 500_000_000),
                                    ("4096", 4096), ("64Ki", 65536), (1000, 1000), ("2G", 2 * 10**9)])
def test_sizes(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("bad", ["", "12 parsecs", "-5", "Mi"])
def test_bad_sizes(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


def test_format_size():
    assert format_size(128 << 20) == "128Mi" and format_size(-2048) == "-2Ki"


def test_settings_parse_and_apply():
    spec = api.load_object(EXAMPLE)
    wi = api.make_whatif(["service_*_table.flags+=no_prealloc", "service_reverse_table.flags-=no_prealloc",
                          "conntrack_table.max_entries=1000", "metrics_map.count=3"])
    after = {m.name: (m, c) for m, c in wi.apply([m for m in spec.maps])}
    assert after["service_route_table"][0].map_flags & 1
    assert not after["service_reverse_table"][0].map_flags & 1
    assert after["conntrack_table"][0].max_entries == 1000
    assert after["metrics_map"][1] == 3 and after["events"][1] == 1
    assert wi.unmatched([m.name for m in spec.maps]) == []
    assert api.make_whatif(["nope_*.count=2"]).unmatched(["a"]) == ["nope_*.count=2"]
    for bad in ("x.max_entries+=3", "x.colour=red", "x.max_entries=-1", "flags+=no_prealloc",
                "x.flags+=bogus"):
        with pytest.raises(ValueError):
            parse_setting(bad)


def test_dynamic_sizing_is_cilium_arithmetic():
    # entries = default * ratio * memory / sum(default_i * entry_size_i), clamped
    d = DynamicSizing(0.0025, 16 << 30, {"ct": (524288, 131072), "nat": (524288, 131072)})
    got = d.entries({"ct": 56, "nat": 40})
    expected = 524288 * int((16 << 30) * 0.0025) // (524288 * 56 + 524288 * 40)
    assert got == {"ct": expected, "nat": expected}
    small = DynamicSizing(0.0025, 512 << 20, {"ct": (524288, 131072)}).entries({"ct": 56})
    assert small == {"ct": 131072}        # clamped to the minimum
    big = DynamicSizing(0.5, 1 << 40, {"ct": (524288, 0)}, maximum=1 << 24).entries({"ct": 56})
    assert big == {"ct": 1 << 24}         # clamped to the maximum


def test_check_exit_codes_and_offenders(capsys):
    rc, out, _ = run(capsys, "check", EXAMPLE, "--limit", "128Mi", "--max-fraction", "0.5",
                     "--kernel", "6.18", "--cpus", "2", "--format", "json")
    doc = json.loads(out)
    assert rc == 1 and not doc["pass"]
    r = doc["results"][0]
    assert r["total"] > doc["budget"] == 64 << 20
    assert r["offenders"][0]["map"] == "conntrack_table"
    assert abs(sum(m["share"] for o in r["objects"] for m in o["maps"]) - 1) < 1e-9
    rc, _, _ = run(capsys, "check", EXAMPLE, "--limit", "256Mi", "--max-fraction", "0.5",
                   "--kernel", "6.18", "--cpus", "2")
    assert rc == 0


def test_check_matrix_and_full(capsys):
    rc, out, _ = run(capsys, "check", EXAMPLE, "--limit", "1Gi", "--kernel", "5.10,6.1,6.18",
                     "--cpus", "2,64", "--format", "json", "--full")
    doc = json.loads(out)
    assert rc == 0 and len(doc["results"]) == 6 and doc["measure"] == "charged_full"
    versions = {(r["kernel"]["version"], r["kernel"]["possible_cpus"]) for r in doc["results"]}
    assert ("5.10.0", 64) in versions
    # 5.10 charges nothing of a map to the memory cgroup
    assert all(r["total"] < 1 << 20 for r in doc["results"] if r["kernel"]["version"] == "5.10.0")


def test_whatif_that_the_kernel_refuses_fails_the_gate(capsys):
    rc, out, _ = run(capsys, "check", EXAMPLE, "--limit", "1Gi", "--kernel", "6.18", "--cpus",
                     "2", "--set", "service_*.flags+=no_prealloc", "--format", "json")
    doc = json.loads(out)
    assert rc == 1
    assert any("service_reverse_table" in f and "ENOTSUPP" in f
               for f in doc["results"][0]["failures"])


def test_config_file_and_caps(capsys, tmp_path, monkeypatch):
    (tmp_path / "bpfmem.toml").write_text(
        'limit = "512Mi"\nmax_fraction = 0.5\nkernels = ["6.18"]\ncpus = [2]\n'
        '[maps]\nconntrack_table = "8Mi"\n')
    monkeypatch.chdir(tmp_path)
    rc, out, _ = run(capsys, "check", EXAMPLE, "--format", "json")
    doc = json.loads(out)
    assert rc == 1 and doc["limit"] == 512 << 20
    assert any("conntrack_table" in f and "cap" in f for f in doc["results"][0]["failures"])
    (tmp_path / "bpfmem.toml").write_text('limitt = "1Gi"\n')
    with pytest.raises(ConfigError, match="unknown setting"):
        load_config(tmp_path / "bpfmem.toml")
    (tmp_path / "bpfmem.toml").unlink()
    (tmp_path / "pyproject.toml").write_text('[tool.bpfmem]\nlimit = "2Gi"\n')
    assert load_config().limit == 2 << 30


def test_check_needs_a_limit(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, _, err = run(capsys, "check", EXAMPLE)
    assert rc == 2 and "--limit" in err


def test_junit_and_markdown(capsys):
    rc, out, _ = run(capsys, "check", EXAMPLE, "--limit", "128Mi", "--max-fraction", "0.5",
                     "--kernel", "6.18", "--cpus", "2,4", "--format", "junit")
    root = ET.fromstring(out)
    assert root.tag == "testsuites" and int(root.get("failures")) >= 2
    assert len(root.findall(".//testcase")) == 4
    rc, out, _ = run(capsys, "check", EXAMPLE, "--limit", "128Mi", "--max-fraction", "0.5",
                     "--kernel", "6.18", "--cpus", "2", "--format", "markdown")
    assert "bpfmem check" in out and "fail" in out and "| `cni_datapath/conntrack_table` |" in out


def _pinned(max_entries: int, flags: int = 0) -> bytes:
    return elfgen.btf_map_object([
        ("policy", {"type": 1, "max_entries": max_entries, "map_flags": flags, "pinning": 1}, 8, 16),
        ("scratch", {"type": 2, "max_entries": 10}, 4, 8)])


def test_diff_pins_and_upgrade_charge(tmp_path, capsys):
    old, same, grown = (tmp_path / "old.o", tmp_path / "same.o", tmp_path / "grown.o")
    old.write_bytes(_pinned(1000))
    same.write_bytes(_pinned(1000))
    grown.write_bytes(_pinned(4000, flags=1))
    rc, out, _ = run(capsys, "diff", str(old), str(same), "--kernel", "6.18", "--cpus", "2",
                     "--format", "json")
    d = json.loads(out)
    policy = next(m for m in d["maps"] if m["map"] == "policy")
    assert policy["status"] == "unchanged" and policy["pin_reused"]
    # the reused pin is charged to the old pod: only the unpinned map is charged anew
    scratch = next(m for m in d["maps"] if m["map"] == "scratch")
    assert d["upgrade_charge"] == scratch["new"]["charged_at_create"]
    rc, out, _ = run(capsys, "diff", str(old), str(grown), "--kernel", "6.18", "--cpus", "2",
                     "--limit", "128Mi", "--format", "json")
    d = json.loads(out)
    policy = next(m for m in d["maps"] if m["map"] == "policy")
    assert policy["status"] == "changed" and policy["pin_incompatible"]
    assert d["pin_incompatible"] == ["policy"]
    assert "max_entries: 1000 -> 4000" in policy["changes"]
    assert d["newly_charged"] == policy["new"]["charged_at_create"]
    assert d["new_share_of_limit"] == d["upgrade_charge"] / (128 << 20)
    rc, md, _ = run(capsys, "diff", str(old), str(grown), "--format", "markdown")
    assert "incompatible" in md and "`policy`" in md


def test_diff_accepts_globs_and_several_objects(capsys):
    from conftest import FIXTURES
    rc, out, _ = run(capsys, "diff", str(FIXTURES / "hash_basic.o"),
                     f"{FIXTURES}/hash_basic.o {FIXTURES}/array_basic.o", "--format", "json")
    d = json.loads(out)
    assert rc == 0 and len(d["new"]["paths"]) == 2
    assert {m["status"] for m in d["maps"]} == {"unchanged", "added"}


def test_output_file(capsys, tmp_path):
    out = tmp_path / "c.md"
    rc, stdout, _ = run(capsys, "check", EXAMPLE, "--limit", "1Gi", "--format", "markdown",
                        "-o", str(out))
    assert rc == 0 and stdout == "" and "pass" in out.read_text()


def test_testing_helper():
    doc = assert_maps_fit(EXAMPLE, limit="1Gi", fraction=0.5, kernel="6.18", cpus=2)
    assert doc["pass"]
    with pytest.raises(MapsDoNotFit) as e:
        assert_maps_fit([EXAMPLE], limit="128Mi", fraction=0.5, kernel=["6.18"], cpus=[2, 8])
    assert "conntrack_table" in str(e.value) and "FAIL" in str(e.value)
    assert isinstance(e.value, AssertionError)


def test_maps_whatif_shows_before_and_after(capsys):
    rc, out, _ = run(capsys, "maps", "--format", "json", "--kernel", "6.18", "--cpus", "2",
                     "--set", "service_route_table.flags+=no_prealloc",
                     "--set", "metrics_map.count=10", "--set", "no_such_map.count=2")
    o = json.loads(out)["objects"][0]
    route = next(m for m in o["maps"] if m["name"] == "service_route_table")
    metrics = next(m for m in o["maps"] if m["name"] == "metrics_map")
    assert "no_prealloc" in route["flags"] and metrics["count"] == 10
    assert o["memory"]["charged_at_create"] < o["memory_before"]["charged_at_create"]
    assert o["unmatched_settings"] == ["no_such_map.count=2"]


def test_check_whatif_before_and_after(capsys):
    rc, out, _ = run(capsys, "check", EXAMPLE, "--limit", "1Gi", "--kernel", "6.18", "--cpus",
                     "2", "--set", "service_route_table.flags+=no_prealloc", "--format", "json")
    r = json.loads(out)["results"][0]
    assert r["total_before_whatif"] > r["total"]
    rc, out, _ = run(capsys, "check", EXAMPLE, "--limit", "1Gi", "--format", "json")
    assert json.loads(out)["results"][0]["total_before_whatif"] is None


def test_maps_markdown(capsys):
    rc, out, _ = run(capsys, "maps", EXAMPLE, "--format", "markdown", "--kernel", "6.18",
                     "--cpus", "2", "--set", "service_*.flags+=no_prealloc")
    assert rc == 0 and "| `conntrack_table` | hash |" in out and "**total**" in out
    assert "refused, not created" in out and "what-if" in out
    # the what-if makes the LRU map invalid: the total says it leaves it out, by name
    assert "(refused, not counted: service_reverse_table)" in out


def test_whatif_errors_are_values_the_cli_words():
    """analysis names no CLI flag: a bad setting is a WhatIfError(kind, problem, setting),
    and the CLI says --set (and which options dynamic sizing needs)."""
    from bpfmem.errors import WhatIfError
    with pytest.raises(WhatIfError) as e:
        parse_setting("x.max_entries=abc")
    assert e.value.kind == WhatIfError.SETTING and e.value.setting == "x.max_entries=abc"
    assert "--set" not in str(e.value) and "not a number" in e.value.problem
    with pytest.raises(WhatIfError) as e:
        api.make_whatif([], 0.0025, None, {})
    assert e.value.kind == WhatIfError.DYNAMIC and "--" not in str(e.value)

    for argv, said in ((["--set", "x.max_entries=abc"],
                        "bad --set 'x.max_entries=abc': 'abc' is not a number"),
                       (["--size-ratio", "0.0025"],
                        "dynamic sizing needs both --size-ratio and --node-memory")):
        import contextlib
        import io
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = cli.main(["check", EXAMPLE, "--limit", "128Mi", "--kernel", "6.18", *argv])
        assert rc == 2 and said in err.getvalue(), err.getvalue()
