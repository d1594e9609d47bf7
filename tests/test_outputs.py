"""-o and --plot: written through a temporary file and a rename (no partial or empty file on
error), never through a symlink another user owns; --set expressions parse in linear time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import is_root
from bpfmem.analysis.whatif import parse_setting
from bpfmem.outputs import OutputError, output_file

SRC = str(Path(__file__).resolve().parent.parent / "src")
EXAMPLE = str(Path(SRC) / "bpfmem" / "examples" / "cni_datapath.bpf.o")


def _check(*extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bpfmem", "check", EXAMPLE, "--limit",
                           "128Mi", *extra], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=SRC))


def test_a_failed_write_leaves_nothing(tmp_path):
    out = tmp_path / "report.md"
    out.write_text("old\n")
    with pytest.raises(RuntimeError):
        with output_file(out) as f:
            f.write("half")
            raise RuntimeError("the render failed")
    assert out.read_text() == "old\n" and os.listdir(tmp_path) == ["report.md"]
    with output_file(tmp_path / "new.md") as f:
        f.write("whole\n")
    assert (tmp_path / "new.md").read_text() == "whole\n"
    assert sorted(os.listdir(tmp_path)) == ["new.md", "report.md"]


def test_own_symlinks_are_followed_and_the_link_kept(tmp_path):
    target = tmp_path / "real.md"
    target.write_text("old\n")
    (tmp_path / "link.md").symlink_to("real.md")
    p = _check("-o", str(tmp_path / "link.md"), "--format", "markdown")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "link.md").is_symlink() and "bpfmem" in target.read_text()


@pytest.mark.skipif(not is_root(), reason="needs root to plant another user's symlink")
def test_a_symlink_planted_by_another_user_is_refused(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    link = tmp_path / "out.md"
    link.symlink_to(victim)
    os.chown(link, 65534, 65534, follow_symlinks=False)
    p = _check("-o", str(link))
    assert p.returncode == 1 and victim.read_text() == "precious\n"
    assert p.stderr.strip().splitlines() == [
        f"bpfmem: error: {link}: refusing to write through a symlink owned by uid 65534 "
        "(neither this user, 0, nor its directory's owner)"]
    with pytest.raises(OutputError):
        with output_file(link):
            pass


def test_devices_are_written_directly():
    p = _check("-o", "/dev/null")
    assert p.returncode == 0 and p.stderr == ""


def test_a_directory_is_refused(tmp_path):
    p = _check("-o", str(tmp_path))
    assert p.returncode == 1 and "is a directory" in p.stderr


def test_long_set_values_are_refused_quickly_and_named_short():
    """The old pattern backtracked quadratically on spaces then a non-space (8.6 s at 40k
    characters); bench/whatif_set.py prints the scaling. Here: the answers."""
    with pytest.raises(ValueError) as e:
        parse_setting("m.max_entries=1" + " " * 40_000 + "x")
    assert len(str(e.value)) < 300
    assert str(parse_setting(" service_*.flags += no_prealloc ")) == \
        "service_*.flags+=no_prealloc"
    assert str(parse_setting("a.b.map_extra=0x10")) == "a.b.map_extra=16"
    for bad in ("x=1", ".max_entries=1", "m.nope=1", "m.max_entries=", "=m.count=1"):
        with pytest.raises(ValueError):
            parse_setting(bad)


@pytest.mark.skipif(not is_root(), reason="needs root to plant another user's symlink")
def test_a_directory_symlink_planted_by_another_user_is_refused(tmp_path):
    """issue 30: `-o /tmp/x/report.json` with /tmp/x a directory symlink nobody planted in a
    sticky directory: root wrote its report where nobody pointed it."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    aimed = tmp_path / "aimed"
    aimed.mkdir()
    link = shared / "x"
    link.symlink_to(aimed)
    os.chown(link, 65534, 65534, follow_symlinks=False)
    p = _check("-o", str(link / "report.md"), "--format", "markdown")
    assert p.returncode == 1 and os.listdir(aimed) == []
    assert p.stderr.strip().splitlines() == [
        f"bpfmem: error: {link}/report.md: refusing to write through a directory symlink "
        f"{link} owned by uid 65534 (neither this user, 0, nor its directory's owner)"]
    # x/.. is where x points, then up: the link is checked before the .. is taken
    up = f"{link}/../report.md"
    p = _check("-o", up, "--format", "markdown")
    assert p.returncode == 1 and "refusing to write through a directory symlink" in p.stderr
    assert not (tmp_path / "report.md").exists()
    # the same link of this user's own is followed
    os.chown(link, 0, 0, follow_symlinks=False)
    p = _check("-o", str(link / "report.md"), "--format", "markdown")
    assert p.returncode == 0 and os.listdir(aimed) == ["report.md"]


def test_a_fifo_nobody_reads_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "out.md"
    os.mkfifo(fifo)
    p = _check("-o", str(fifo))            # opened for writing without O_NONBLOCK: a hang
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == [f"bpfmem: error: {fifo}: a FIFO nobody reads"]


@pytest.mark.skipif(not is_root(), reason="needs root to plant another user's FIFO")
def test_another_users_fifo_is_refused_own_one_with_a_reader_written(tmp_path):
    os.chmod(tmp_path, 0o1777)
    fifo = tmp_path / "out.md"
    os.mkfifo(fifo)
    os.chown(fifo, 65534, 65534)
    p = _check("-o", str(fifo))
    assert p.returncode == 1 and "refusing to write into a FIFO owned by uid 65534" in p.stderr
    os.chown(fifo, 0, 0)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    try:
        import time
        for _ in range(200):               # until cat has the FIFO open
            if any(os.path.realpath(f"/proc/{reader.pid}/fd/{n}") == str(fifo)
                   for n in os.listdir(f"/proc/{reader.pid}/fd")):
                break
            time.sleep(0.05)
        p = _check("-o", str(fifo), "--format", "markdown")
        out, _ = reader.communicate(timeout=60)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    assert p.returncode == 0 and b"cni_datapath" in out
