"""A what-if, a map cap or an object limit that names nothing: an error in `check` (a gate
must not pass on a typo), a warning in `maps` and `diff`."""

from __future__ import annotations

import pytest

from bpfmem import api, cli

EXAMPLE = str(api.example_object_path())


def run(capsys, *argv):
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture
def nowhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)          # no bpfmem.toml found by accident
    return tmp_path


@pytest.mark.parametrize("expr,hint", [("nosuchmap.max_entries=10", None),
                                        ("conntrak_table.max_entries=10", "conntrack_table"),
                                        ("servce_*.flags+=no_prealloc", None)])
def test_check_refuses_a_setting_that_matches_no_map(capsys, nowhere, expr, hint):
    rc, out, err = run(capsys, "check", EXAMPLE, "--limit", "1Gi", "--set", expr)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "matches no map" in err and expr.split(".")[0] in err
    if hint:
        assert f"did you mean {hint}?" in err


def test_check_still_takes_a_setting_that_matches(capsys, nowhere):
    rc, _, err = run(capsys, "check", EXAMPLE, "--limit", "1Gi", "--set",
                     "conntrack_table.max_entries=10")
    assert rc == 0 and err == ""


def test_check_refuses_misspelt_caps_and_limits_in_the_config(capsys, nowhere):
    (nowhere / "bpfmem.toml").write_text(
        'limit = "1Gi"\nset = ["nosuch_*.flags+=no_prealloc"]\n'
        '[maps]\nconntrak_table = "1Mi"\n[objects]\ncni_datapth = "1Mi"\n')
    rc, out, err = run(capsys, "check", EXAMPLE)
    assert rc == 2 and out == ""
    assert "'conntrak_table' is no map" in err and "did you mean conntrack_table?" in err
    assert "'cni_datapth' is none of the objects" in err and "did you mean cni_datapath?" in err
    assert "nosuch_*" in err and str(nowhere / "bpfmem.toml") in err
    # spelt right, the same caps bite: the 1 MiB cap fails the gate (exit 1, not a usage error)
    (nowhere / "bpfmem.toml").write_text(
        'limit = "1Gi"\n[maps]\nconntrack_table = "1Mi"\n[objects]\ncni_datapath = "1Mi"\n')
    rc, out, _ = run(capsys, "check", EXAMPLE)
    assert rc == 1 and "over its cap" in out and "over its own limit" in out


@pytest.mark.parametrize("cmd", [["maps", EXAMPLE], ["diff", EXAMPLE, EXAMPLE]])
def test_other_commands_warn(capsys, nowhere, cmd):
    rc, out, err = run(capsys, *cmd, "--set", "nosuchmap.max_entries=10")
    assert rc == 0 and out
    assert "warning: what-if 'nosuchmap.max_entries=10' matches no map" in err
