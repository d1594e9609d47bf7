"""Run a composite GitHub Action's steps here, as a runner would: for want of a GitHub runner
(or `act`, which needs Docker) on the test machines.

What it does as GitHub does: inputs with their defaults, ``${{ ... }}`` expressions over
inputs, github.* and earlier steps' outputs, each step's ``env``, ``bash --noprofile --norc
-eo pipefail`` for ``shell: bash``, the GITHUB_OUTPUT, GITHUB_PATH, GITHUB_ENV and
GITHUB_STEP_SUMMARY files, RUNNER_TEMP, and stopping at the first failing step. What it
refuses (so a test notices instead of running something else): ``uses:`` steps, other
shells, ``if:`` conditions and expressions beyond those paths.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yaml

_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@dataclass
class StepResult:
    name: str
    returncode: int
    stdout: str
    stderr: str
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class Run:
    steps: list[StepResult]
    outputs: dict[str, str]
    summary: str

    @property
    def ok(self) -> bool:
        return all(s.returncode == 0 for s in self.steps)


def _lookup(path: str, ctx: dict) -> str:
    node = ctx
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ValueError(f"expression the runner does not know: {path}")
        node = node[part]
    return "" if node is None else str(node)


def expand(text: str, ctx: dict) -> str:
    return _EXPR.sub(lambda m: _lookup(m.group(1), ctx), str(text))


def _key_values(path: Path) -> dict[str, str]:
    out = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if "=" in line:
                k, v = line.split("=", 1)
                out[k] = v
    return out


def run_action(action_dir: Path, workspace: Path, inputs: dict[str, str], *,
               github: dict | None = None, env: dict | None = None,
               drop: tuple[str, ...] = ("PYTHONPATH",), skip: tuple[str, ...] = ()) -> Run:
    """Run ``action_dir/action.yml`` in ``workspace`` with this environment plus ``env``,
    less ``drop`` (a runner has no PYTHONPATH pointing at a checkout); ``skip`` names steps
    not to run."""
    action = yaml.safe_load((action_dir / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    temp = workspace / ".runner"
    temp.mkdir(exist_ok=True)
    files = {n: temp / n.lower() for n in ("GITHUB_PATH", "GITHUB_ENV", "GITHUB_STEP_SUMMARY")}
    for f in files.values():
        f.touch()
    ctx = {"github": {"action_path": str(action_dir), "token": "", "repository": "",
                      "event": {"pull_request": {"number": ""}}, **(github or {})},
           "steps": {}}
    ctx["inputs"] = {}
    for name, spec in action.get("inputs", {}).items():
        ctx["inputs"][name] = inputs.get(name, expand(spec.get("default", ""), ctx))
    unknown = set(inputs) - set(ctx["inputs"])
    assert not unknown, f"inputs the action does not declare: {unknown}"
    here = {k: v for k, v in os.environ.items() if k not in drop}
    base_env = dict(here, **(env or {}), RUNNER_TEMP=str(temp),
                    GITHUB_WORKSPACE=str(workspace), **{k: str(v) for k, v in files.items()})
    results = []
    for i, step in enumerate(action["runs"]["steps"]):
        name = step.get("name", f"step {i}")
        assert "uses" not in step, f"{name}: the runner runs `run:` steps only"
        assert step.get("shell") == "bash", f"{name}: shell must be bash"
        assert "if" not in step, f"{name}: the runner does not evaluate if:"
        if name in skip:
            continue
        out_file = temp / f"output-{i}"
        out_file.write_text("")
        step_env = dict(base_env, GITHUB_OUTPUT=str(out_file))
        step_env.update(_key_values(files["GITHUB_ENV"]))
        extra_path = [p for p in files["GITHUB_PATH"].read_text().splitlines() if p]
        step_env["PATH"] = os.pathsep.join([*reversed(extra_path), step_env.get("PATH", "")])
        step_env.update({k: expand(v, ctx) for k, v in (step.get("env") or {}).items()})
        script = temp / f"step-{i}.sh"
        script.write_text(expand(step["run"], ctx))
        r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                           cwd=workspace, env=step_env, capture_output=True, text=True,
                           timeout=600)
        res = StepResult(name, r.returncode, r.stdout, r.stderr, _key_values(out_file))
        results.append(res)
        if "id" in step:
            ctx["steps"][step["id"]] = {"outputs": res.outputs}
        if r.returncode != 0:
            break
    outputs = {}
    for k, v in action.get("outputs", {}).items():
        try:
            outputs[k] = expand(v["value"], ctx)
        except ValueError:             # the step that sets it did not run
            outputs[k] = ""
    return Run(results, outputs, files["GITHUB_STEP_SUMMARY"].read_text())
