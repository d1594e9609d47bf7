"""One rule for object arguments in every command: quoted globs are expanded by bpfmem, a
glob that matches nothing is a usage error, and a glob the shell expanded for `diff` gets a
hint; `advise` defaults to the bundled example like `maps` and says each trade-off once."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bpfmem import api, cli
from bpfmem.report.documents import document

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "examples" / "seed"


def run(capsys, *argv):
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture
def builds(tmp_path, monkeypatch):
    (tmp_path / "base").mkdir()
    (tmp_path / "build").mkdir()
    shutil.copy(SEED / "cni_v054.bpf.o", tmp_path / "base" / "agent.bpf.o")
    shutil.copy(SEED / "cni_v060_before.bpf.o", tmp_path / "base" / "extra.bpf.o")
    shutil.copy(SEED / "cni_v060_after.bpf.o", tmp_path / "build" / "agent.bpf.o")
    shutil.copy(SEED / "cni_v054.bpf.o", tmp_path / "build" / "extra.bpf.o")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _paths(doc):
    return sorted(o["path"] for o in doc["objects"])


@pytest.mark.parametrize("cmd", [["maps"], ["check", "--limit", "1Gi"], ["advise"]])
def test_a_quoted_glob_is_expanded_like_the_shell_would(capsys, builds, cmd):
    name, *opts = cmd
    rc, quoted, _ = run(capsys, name, "build/*.o", *opts, "--format", "json")
    rc2, listed, _ = run(capsys, name, "build/agent.bpf.o", "build/extra.bpf.o", *opts,
                         "--format", "json")
    assert rc == rc2 == 0
    q, l = json.loads(quoted), json.loads(listed)
    if name == "check":
        q, l = q["results"][0], l["results"][0]
    assert _paths(q) == _paths(l) == ["build/agent.bpf.o", "build/extra.bpf.o"]


@pytest.mark.parametrize("cmd", [["maps"], ["check", "--limit", "1Gi"], ["advise"],
                                 ["diff", "base/*.o"]])
def test_a_glob_matching_nothing_is_a_usage_error(capsys, builds, cmd):
    name, *rest = cmd
    rc, out, err = run(capsys, name, *rest, "nothing/*.o", *(["--limit", "1Gi"]
                                                             if name == "check" else []))
    assert rc == 2 and "no file matches 'nothing/*.o'" in err and out == ""


def test_diff_quoted_globs_and_a_hint_when_the_shell_expanded_them(capsys, builds):
    rc, out, _ = run(capsys, "diff", "base/*.o", "build/*.o", "--format", "json")
    assert rc == 0
    doc = json.loads(out)
    listed = run(capsys, "diff", "base/agent.bpf.o base/extra.bpf.o",
                 "build/agent.bpf.o build/extra.bpf.o", "--format", "json")[1]
    assert json.loads(listed)["maps"] == doc["maps"]
    # what the shell passes for `bpfmem diff base/*.o build/*.o` unquoted: four paths
    rc, out, err = run(capsys, "diff", "base/agent.bpf.o", "base/extra.bpf.o",
                       "build/agent.bpf.o", "build/extra.bpf.o")
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "got 4 arguments" in err and "quote each side" in err


def test_advise_defaults_to_the_bundled_example(capsys):
    rc, out, err = run(capsys, "advise", "--format", "json")
    assert rc == 0 and "bundled example" in err
    assert _paths(json.loads(out)) == [str(api.example_object_path())]


def test_advise_says_each_trade_off_once(capsys):
    rc, out, _ = run(capsys, "advise", str(api.example_object_path()))
    assert rc == 0
    doc = document(api.advise_objects([api.example_object_path()], profile=api.profile()))
    advice = doc["objects"][0]["advice"]
    texts = {a["tradeoff"] for a in advice}
    assert len(texts) < len(advice)              # several maps share a paragraph ...
    flat = " ".join(out.split())
    for t in texts:                              # ... and it is printed once
        assert flat.count(" ".join(t.split())) == 1, t
    assert flat.count("trade-off and kernel: as for") == len(advice) - len(
        {(a["tradeoff"], a["rule"]) for a in advice})
