"""No kill leaves state behind unnoticed: each command that creates scratch state (measure:
two cgroups and a probe directory; pod --trace -- CMD: a cgroup and the command) is killed
mid-run with SIGINT, SIGTERM and SIGKILL. After SIGINT/SIGTERM nothing is left; after
SIGKILL the children die with bpfmem (PR_SET_PDEATHSIG) and the next run removes and names
what is left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import elfgen
from conftest import FIXTURES, is_root

SRC = str(Path(__file__).resolve().parent.parent / "src")
V1 = Path("/sys/fs/cgroup/memory")
pytestmark = [pytest.mark.kernel,
              pytest.mark.skipif(not is_root(), reason="needs root (cgroups, BPF maps)")]


def _start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bpfmem", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=SRC))


def _state(pid: int) -> list[str]:
    """Scratch cgroups and directories named with ``pid``."""
    from bpfmem.host.cleanup import _cgroup_roots
    out = []
    for root in [*_cgroup_roots(), Path(tempfile.gettempdir())]:
        try:
            out += [str(p) for p in root.iterdir() if p.name.startswith("bpfmem-")
                    and f"-{pid}-" in p.name]
        except OSError:
            pass
    return sorted(out)


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:   # a zombie waiting for its (gone) parent's reaper counts as dead
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


def _wait(cond, timeout: float = 20.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return False


def _cgroup_procs(paths: list[str]) -> list[int]:
    pids = []
    for p in paths:
        try:
            pids += [int(x) for x in Path(p, "cgroup.procs").read_text().split()]
        except OSError:
            pass
    return pids


@pytest.fixture(scope="module")
def slow_object(tmp_path_factory) -> Path:
    """One hash map of 1M entries: `measure --fill` spends seconds filling it."""
    p = tmp_path_factory.mktemp("kill") / "big.o"
    p.write_bytes(elfgen.btf_map_object([("big", {"type": 1, "max_entries": 1 << 20}, 8, 8)]))
    return p


def _measure(obj: Path) -> tuple[subprocess.Popen, list[str], list[int]]:
    proc = _start("measure", str(obj), "--fill")
    assert _wait(lambda: len(_state(proc.pid)) == 3 and _children(proc.pid), 60), \
        (proc.poll(), _state(proc.pid))
    return proc, _state(proc.pid), _children(proc.pid)


def _trace(*cmd: str) -> tuple[subprocess.Popen, list[str], list[int]]:
    proc = _start("pod", "--trace", "60s", "--", *cmd)
    assert _wait(lambda: _state(proc.pid) and len(_cgroup_procs(_state(proc.pid))) >= 1, 30)
    time.sleep(0.3)   # the command's own children start
    return proc, _state(proc.pid), _cgroup_procs(_state(proc.pid))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("command", ["measure", "pod --trace"])
def test_an_interrupt_or_terminate_removes_everything(sig, command, slow_object):
    if command == "measure":
        proc, state, kids = _measure(slow_object)
    else:
        proc, state, kids = _trace("sh", "-c", "sleep 60 & sleep 60; wait")
    assert state and kids
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, 130), err    # a trace reports what it saw; measure stops
    assert "Traceback" not in err
    assert _state(proc.pid) == [], err
    assert _wait(lambda: not any(_alive(k) for k in kids), 10), kids


@pytest.mark.parametrize("command", ["measure", "pod --trace"])
def test_after_sigkill_the_children_die_and_the_next_run_cleans_up(command, slow_object):
    if command == "measure":
        proc, state, kids = _measure(slow_object)
    else:   # sh dies with bpfmem; its own child sleep does not, but stays in the cgroup
        proc, state, kids = _trace("sh", "-c", "sleep 60 & sleep 60; wait")
    proc.kill()
    proc.wait(30)   # (not communicate: an orphaned grandchild still holds the stderr pipe)
    proc.stdout.close()
    proc.stderr.close()
    direct = kids if command == "measure" else [k for k in kids if _children(k)]
    assert _wait(lambda: not any(_alive(k) for k in direct), 10), "a child outlived bpfmem"
    left = _state(proc.pid)
    assert left, "SIGKILL gave no chance to clean up: something must be left"
    nxt = _start(*(["measure", str(FIXTURES / "hash_basic.o")] if command == "measure"
                   else ["pod", "--trace", "0.3s", "--", "true"]))
    _, err = nxt.communicate(timeout=120)
    assert nxt.returncode == 0, err
    note = [ln for ln in err.splitlines() if "earlier run" in ln]
    assert len(note) == 1 and all(p in note[0] for p in left), err
    try:
        assert _state(proc.pid) == []
        assert not any(_alive(k) for k in kids)     # the orphaned grandchild was killed too
    finally:
        for k in kids:
            if _alive(k):
                os.kill(k, signal.SIGKILL)
