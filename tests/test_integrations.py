"""What other repositories use: the pre-commit hook (.pre-commit-hooks.yaml at the root),
the GitHub Action (action.yml at the root, run step by step by tests/gha_runner.py for want
of a GitHub runner), and the package itself (`python -m build`, `twine check`)."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

from gha_runner import run_action          # noqa: E402
from readme_blocks import ROOT, read_blocks  # noqa: E402

SEED = ROOT / "examples" / "seed"
HOOKS = ROOT / ".pre-commit-hooks.yaml"
TOML = 'limit = "128Mi"\nmax_fraction = 0.5\nkernels = ["6.18"]\ncpus = [2]\n'


def _hook() -> dict:
    (hook,) = yaml.safe_load(HOOKS.read_text())
    return hook


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org",
                            GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org"))


@pytest.fixture
def agent_repo(tmp_path):
    """A project with a clang object, a bpf2go object and an object no hook should see: the
    two BPF objects fit the 64 MiB budget alone (59.6 and 11.8 MiB) but not together."""
    repo = tmp_path / "agent"
    (repo / "build").mkdir(parents=True)
    (repo / "gen").mkdir()
    shutil.copy(SEED / "cni_v060_before.bpf.o", repo / "build" / "agent.bpf.o")
    shutil.copy(SEED / "cni_v054.bpf.o", repo / "gen" / "cni_bpfel.o")
    (repo / "gen" / "notbpf.o").write_bytes(b"not an ELF object")
    (repo / "bpfmem.toml").write_text(TOML)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "objects")
    return repo


def test_the_hook_is_where_pre_commit_looks_and_matches_bpf_objects():
    hook = _hook()
    assert hook["id"] == "bpfmem-check" and hook["language"] == "python"
    assert hook["require_serial"] is True            # one budget over all the objects
    assert "--limit" not in hook["entry"]             # bpfmem.toml (or args) decides
    files = re.compile(hook["files"])
    for name in ("agent.bpf.o", "build/x/agent.bpf.o", "gen/cni_bpfel.o", "gen/cni_bpfeb.o"):
        assert files.search(name), name
    for name in ("agent.o", "cni_bpfel.go", "agent.bpf.c", "agent.bpf.o.sha256"):
        assert not files.search(name), name


def _run_entry(repo: Path, extra: list[str]) -> subprocess.CompletedProcess:
    """The hook's entry on the files pre-commit would pass it: tracked, matching `files:`."""
    hook = _hook()
    tracked = subprocess.run(["git", "-C", str(repo), "ls-files"], capture_output=True,
                             text=True, check=True).stdout.split()
    files = [f for f in tracked if re.search(hook["files"], f)]
    argv = shlex.split(hook["entry"])
    assert argv[0] == "bpfmem"
    return subprocess.run([sys.executable, "-m", "bpfmem", *argv[1:], *extra, *files],
                          cwd=repo, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))


def test_the_hooks_entry_on_a_repository(agent_repo):
    r = _run_entry(agent_repo, [])
    assert r.returncode == 1, r.stderr                # both objects: 71.4 MiB > 64 MiB
    assert "71.4Mi" in r.stdout and "FAIL" in r.stdout
    r = _run_entry(agent_repo, ["--max-fraction", "0.6"])     # args override bpfmem.toml
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout
    (agent_repo / "bpfmem.toml").unlink()             # no limit anywhere: a usage error
    r = _run_entry(agent_repo, [])
    assert r.returncode == 2 and "--limit" in r.stderr


def test_the_examples_config_names_the_hook():
    (block,) = [b for b in read_blocks(ROOT / "examples" / "pre-commit" / "README.md")
                if b.lang == "yaml"]
    cfg = yaml.safe_load(block.body)
    (repo,) = cfg["repos"]
    (hook,) = repo["hooks"]
    assert hook["id"] == _hook()["id"]
    from bpfmem import cli                             # its args are check's options
    cli._parser().parse_args(["check", "x.bpf.o", *hook["args"]])


@pytest.mark.skipif(shutil.which("pre-commit") is None and
                    subprocess.run([sys.executable, "-m", "pre_commit", "--version"],
                                   capture_output=True).returncode != 0,
                    reason="pre-commit is not installed (pyproject's test extra has it)")
def test_pre_commit_try_repo_runs_the_hook(agent_repo, tmp_path):
    """pre-commit itself: clones this checkout (uncommitted changes included), installs
    bpfmem into its own virtualenv from it, and runs the hook on the fixture repository."""
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"))
    env.pop("PYTHONPATH", None)

    def try_repo(*args):
        return subprocess.run([sys.executable, "-m", "pre_commit", "try-repo", str(ROOT),
                               "bpfmem-check", "--verbose", *args], cwd=agent_repo,
                              capture_output=True, text=True, env=env, timeout=600)
    r = try_repo("--all-files")        # both BPF objects, not notbpf.o: 71.4 MiB > 64 MiB
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    assert "71.4Mi" in r.stdout and "Failed" in r.stdout and "notbpf" not in r.stdout


# -- the GitHub Action ------------------------------------------------------------------------
FAKE_GH = """#!/bin/sh
# a stand-in for the GitHub CLI: records its arguments, has no comments to list
printf '%s\\n' "$*" >> "$GH_LOG"
for a in "$@"; do case "$a" in body=*) printf '%s' "${a#body=}" > "$GH_LOG.body";; esac; done
exit 0
"""


@pytest.fixture
def workspace(tmp_path):
    ws = tmp_path / "ws"
    (ws / "build").mkdir(parents=True)
    (ws / "base" / "build").mkdir(parents=True)
    shutil.copy(SEED / "cni_v060_before.bpf.o", ws / "build" / "agent.bpf.o")
    shutil.copy(SEED / "cni_v054.bpf.o", ws / "base" / "build" / "agent.bpf.o")
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "gh").write_text(FAKE_GH)
    (fake / "gh").chmod(0o755)
    return ws


def test_the_action_gates_reports_and_comments(workspace, tmp_path):
    lxml = pytest.importorskip("lxml.etree")
    log = tmp_path / "gh.log"
    env = {"PATH": f"{tmp_path / 'fakebin'}{os.pathsep}{os.environ['PATH']}",
           "GH_LOG": str(log)}
    inputs = {"objects": "build/*.o", "base-objects": "base/build/*.o", "limit": "128Mi",
              "max-fraction": "0.4", "args": "--kernel 6.18 --cpus 2"}
    github = {"event": {"pull_request": {"number": "7"}}, "repository": "o/agent",
              "token": "t0ken"}
    run = run_action(ROOT, workspace, inputs, github=github, env=env)
    names = [s.name for s in run.steps]
    assert names[-1] == "Fail when the maps do not fit the budget", names
    assert all(s.returncode == 0 for s in run.steps[:-1]), [(s.name, s.stderr) for s in run.steps]
    assert run.steps[-1].returncode == 1 and "::error::" in run.steps[-1].stdout
    assert run.outputs == {"pass": "false"}           # 59.6 MiB > 0.4 x 128 MiB
    venv = workspace / ".runner" / "bpfmem-venv"
    assert (venv / "bin" / "bpfmem").exists()         # installed from the action's checkout
    schema = lxml.XMLSchema(lxml.parse(str(ROOT / "tests" / "data" / "junit-10.xsd")))
    assert schema.validate(lxml.parse(str(workspace / "bpfmem-junit.xml")))
    diff = (workspace / "bpfmem-diff.md").read_text()
    assert diff.startswith("### bpfmem diff") and diff in run.summary
    assert "bpfmem check: ❌ **fail**" in run.summary
    calls = log.read_text().splitlines()
    assert calls[0].startswith("api repos/o/agent/issues/7/comments --paginate")
    assert calls[1].startswith("api --method POST repos/o/agent/issues/7/comments")
    body = Path(f"{log}.body").read_text()
    assert body.startswith("<!-- bpfmem diff -->") and diff.strip() in body

    # within the budget, no comment wanted: the job passes (bpfmem already installed)
    (workspace / ".runner" / "github_path").write_text(f"{venv / 'bin'}\n")
    log.unlink()
    run = run_action(ROOT, workspace, dict(inputs, **{"max-fraction": "0.5", "comment": "false"}),
                     github=github, env=env, skip=("Install bpfmem from the action's checkout",))
    assert run.ok and run.outputs == {"pass": "true"}, [(s.name, s.stderr) for s in run.steps]
    assert not log.exists()


def test_the_workflow_example_uses_the_action():
    wf = yaml.safe_load((ROOT / "examples" / "github-actions" / "bpfmem.yml").read_text())
    steps = wf["jobs"]["map-memory"]["steps"]
    uses = [s["uses"] for s in steps if "uses" in s]
    assert any(re.fullmatch(r"[\w.-]+/bpfmem@[\w.-]+", u) for u in uses), uses
    assert not any("pip install bpfmem" in s.get("run", "") for s in steps)
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    for s in steps:
        if s.get("uses", "").split("@")[0].endswith("/bpfmem"):
            assert set(s.get("with", {})) <= set(action["inputs"]), s["with"]


# -- the package ---------------------------------------------------------------------------------
def test_the_package_builds_and_passes_twine_check(tmp_path):
    pytest.importorskip("build")
    pytest.importorskip("twine")
    src = tmp_path / "src"
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True,
                           check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    r = subprocess.run([sys.executable, "-m", "build", "--outdir", str(tmp_path / "dist"),
                        str(src)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "deprecated" not in (r.stdout + r.stderr).lower()
    dist = sorted((tmp_path / "dist").iterdir())
    assert sorted(p.suffix for p in dist) == [".gz", ".whl"]
    r = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dist)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.count("PASSED") == 2, r.stdout + r.stderr
    import zipfile
    names = zipfile.ZipFile(next(p for p in dist if p.suffix == ".whl")).namelist()
    assert "bpfmem/examples/cni_datapath.bpf.o" in names and "bpfmem/host/probe.c" in names
    # the program loader builds from the wheel too: its source and the header both include
    assert {"bpfmem/host/progprobe.c", "bpfmem/host/cgcounter.h"} <= set(names)
    # the probe is compiled with the wheel (setup.py), not on first use: a static program,
    # with the sha256 bpfmem checks before it runs one, in a wheel tagged for this platform
    wheel = next(p for p in dist if p.suffix == ".whl")
    assert {"bpfmem/host/probe", "bpfmem/host/probe.sha256"} <= set(names)
    assert wheel.name.endswith(f"-py3-none-{sysconfig.get_platform().replace('-', '_')}.whl")
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    probe = site / "bpfmem" / "host" / "probe"
    probe.chmod(0o755)
    assert probe.read_bytes()[:4] == b"\x7fELF"
    assert hashlib.sha256(probe.read_bytes()).hexdigest() == \
        (site / "bpfmem" / "host" / "probe.sha256").read_text().strip()
    r = subprocess.run([sys.executable, "-c", "from bpfmem.host import probe; "
                        "print(probe.build_probe())"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(site),
                                XDG_CACHE_HOME=str(tmp_path / "cache")))
    assert r.returncode == 0 and r.stdout.strip() == str(probe), r.stdout + r.stderr
    assert not (tmp_path / "cache" / "bpfmem" / "probe").exists()   # nothing compiled


def test_the_workflow_examples_inputs_run_through_the_action(workspace, tmp_path):
    """The example workflow's own `with:` (a kernel and CPU matrix and a quoted --set, for
    both check and diff) runs through the action: check and diff both take it, the quotes
    reach bpfmem as one argument, and the comment is posted."""
    wf = yaml.safe_load((ROOT / "examples" / "github-actions" / "bpfmem.yml").read_text())
    step = next(s for s in wf["jobs"]["map-memory"]["steps"]
                if s.get("uses", "").split("@")[0].endswith("/bpfmem"))
    inputs = {k: str(v) for k, v in step["with"].items() if "${{" not in str(v)}
    assert "--kernel 6.1,6.12" in inputs["args"] and "'service_*" in inputs["args"]
    inputs["base-objects"] = "base/build/*.o"
    log = tmp_path / "gh.log"
    env = {"PATH": f"{tmp_path / 'fakebin'}{os.pathsep}{os.environ['PATH']}",
           "GH_LOG": str(log)}
    github = {"event": {"pull_request": {"number": "7"}}, "repository": "o/agent",
              "token": "t0ken"}
    run = run_action(ROOT, workspace, inputs, github=github, env=env)
    by_name = {s.name: s for s in run.steps}
    diff_step = by_name["bpfmem diff against the base build"]
    assert diff_step.returncode == 0, diff_step.stderr
    diff = (workspace / "bpfmem-diff.md").read_text()
    # one diff per kernel and CPU count, each with the what-if applied to NEW
    assert diff.count("### bpfmem diff") == 4, diff
    assert "service_*.flags+=no_prealloc" in diff
    assert "| 6.1.0 | 64 |" in run.summary and "| 6.12.0 | 2 |" in run.summary
    assert Path(f"{log}.body").read_text().startswith("<!-- bpfmem diff -->")

    # unbalanced quotes: a usage error of the step, not a silent split
    bad = dict(inputs, args="--set 'service_*.flags+=no_prealloc")
    venv = workspace / ".runner" / "bpfmem-venv"
    (workspace / ".runner" / "github_path").write_text(f"{venv / 'bin'}\n")
    run = run_action(ROOT, workspace, bad, github=github, env=env,
                     skip=("Install bpfmem from the action's checkout",))
    check = next(s for s in run.steps if s.name == "bpfmem check")
    assert check.returncode == 2 and "unbalanced quotes" in check.stdout
