"""Usage errors exit 2 with the reason; sizes follow Kubernetes' grammar; what a command
cannot do without an extra says which one; a traced command's status is passed through;
`top` into a pipe prints frames; a failed render leaves no file."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bpfmem import api, cli
from bpfmem.units import parse_size
from bpfmem.cli.pod import command_status
from conftest import is_root

EXAMPLE = str(api.example_object_path())
needs_root = pytest.mark.skipif(not is_root(), reason="needs root (cgroups, bpf())")


def run(capsys, *argv):
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("text,n", [("128Mi", 128 << 20), ("128M", 128 * 10**6),
                                    ("128k", 128_000), ("128Ki", 131_072), ("1.5Gi", 3 << 29),
                                    ("1e9", 10**9), ("2E3", 2000), ("1Ei", 1 << 60),
                                    ("4096", 4096), (".5Ki", 512), (" 8Mi ", 8 << 20)])
def test_kubernetes_quantities(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("text,hint", [
    ("128K", "write 128Ki (131,072 bytes) or 128k (128,000 bytes)"),
    ("128MB", "write 128Mi (134,217,728 bytes) or 128M (128,000,000 bytes)"),
    ("128MiB", "Kubernetes has no 'MiB'"),
    ("1GB", "write 1Gi (1,073,741,824 bytes) or 1G"),
    ("128m", "'m' is milli"),
    ("128 Mi", "no space between the number and the unit"),
    ("12 parsecs", "use e.g. 128Mi"), ("-5", "negative"), ("Mi", "not a size"), ("", "not a size")])
def test_what_kubernetes_rejects_is_rejected_with_a_hint(text, hint):
    with pytest.raises(ValueError) as e:
        parse_size(text)
    assert hint in str(e.value)


@pytest.mark.parametrize("argv,why", [
    (["check", EXAMPLE, "--limit", "128MB"], "write 128Mi"),
    (["check", EXAMPLE, "--limit", "128K"], "write 128Ki"),
    (["check", EXAMPLE, "--limit", "0"], "more than 0"),
    (["diff", EXAMPLE, EXAMPLE, "--limit", "0"], "more than 0"),
    (["estimate", "--type", "hash", "--key-size", "4", "--value-size", "4"], "--max-entries"),
    (["pod", "--container", "abc"], "not a container id"),
    (["pod", "--trace", "1s", "--limit", "128K", "--", "true"], "write 128Ki"),
    (["pod", "--trace", "1s", "--limit", "0", "--", "true"], "more than 0"),
])
def test_usage_errors_exit_2_with_one_line(capsys, argv, why, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == "" and why in err and err.count("\n") == 1, err


def test_a_release_newer_than_the_model_is_named(capsys):
    rc, _, err = run(capsys, "maps", EXAMPLE, "--kernel", "7.3")
    assert rc == 0 and "Linux 7.3 is newer than the newest release bpfmem models" in err
    rc, _, err = run(capsys, "maps", EXAMPLE, "--kernel", "6.1")
    assert "newer" not in err


def test_estimate_with_max_entries_still_works(capsys):
    rc, out, _ = run(capsys, "estimate", "--type", "hash", "--key-size", "4", "--value-size",
                     "4", "--max-entries", "1024", "--format", "json")
    assert rc == 0 and '"rejected": null' in out


@pytest.mark.parametrize("code,status", [(None, 0), (0, 0), (1, 1), (7, 7), (-9, 137)])
def test_command_status_is_the_commands(code, status):
    assert command_status(code) == status


@pytest.mark.kernel
@needs_root
@pytest.mark.parametrize("cmd,status", [(["false"], 1), (["sh", "-c", "exit 7"], 7),
                                        (["true"], 0)])
def test_pod_trace_passes_the_commands_exit_status_through(capsys, cmd, status):
    if not os.path.isdir("/sys/fs/cgroup/memory") and not os.path.exists(
            "/sys/fs/cgroup/cgroup.controllers"):
        pytest.skip("no memory cgroup")
    rc, out, err = run(capsys, "pod", "--trace", "3s", "--interval", "50ms", "--", *cmd)
    assert rc == status, err
    assert f"exited with {status}" in out


def test_a_failed_html_render_leaves_no_file(capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "plotly", None)                # as if not installed
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)
    out = tmp_path / "report.html"
    rc, _, err = run(capsys, "check", EXAMPLE, "--limit", "128Mi", "--format", "html",
                     "-o", str(out))
    assert rc == 1 and "plotly" in err and "'.[html]'" in err
    assert not out.exists()


@pytest.mark.kernel
@needs_root
def test_top_into_a_pipe_prints_frames_and_ends():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-m", "bpfmem", "top", "-n", "2", "--interval", "0.2s",
                        "--no-owners"], capture_output=True, text=True, timeout=120, env=env,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("bpfmem top ") == 2, r.stdout[:2000]
    assert "\x1b[?1049h" not in r.stdout          # no alternate screen into a pipe


@pytest.mark.kernel
@needs_root
def test_top_refreshes_are_incremental_scans(monkeypatch, capsys):
    """`top`'s frames after the first come from incremental scans (the exporter's memo: what
    cannot have changed is not read again), and the kernel iterators the scans kept loaded
    are closed when it ends."""
    from bpfmem import api
    from bpfmem.cli import main
    made = []
    real = api.scan_memo

    def spy(profile, **kw):
        made.append(real(profile, **kw))
        return made[-1]
    monkeypatch.setattr(api, "scan_memo", spy)
    assert main(["top", "-n", "3", "--interval", "0.05s", "--no-owners"]) == 0
    assert capsys.readouterr().out.count("bpfmem top ") == 3
    (memo,) = made
    assert memo.scans == 3 and memo.full_scans == 1
    assert memo.iterators == {}


@pytest.mark.kernel
@needs_root
def test_top_with_one_frame_is_a_single_scan(monkeypatch, capsys):
    """`top --once` (or -n 1) scans once, as `snapshot` does: no memo, so no kernel
    iterator stays loaded while it lists the node's programs."""
    from bpfmem import api
    from bpfmem.cli import main
    made = []
    monkeypatch.setattr(api, "scan_memo", lambda *a, **k: made.append(1))
    for argv in (["top", "--once", "--no-owners"], ["top", "-n", "1", "--no-owners"]):
        assert main(argv) == 0
        assert capsys.readouterr().out.count("bpfmem top ") == 1
    assert made == []
