"""measure runs its probe as root: a cached binary it did not build (another user's, or one
changed since) must never run. Planted binaries here write a marker file when executed."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, is_root
from bpfmem.errors import HostError
from bpfmem.host.probe import PROBE_SOURCES, build_probe, open_probe

SRC = str(Path(__file__).resolve().parent.parent / "src")
NOBODY = 65534
pytestmark = [pytest.mark.skipif(not is_root(), reason="needs root (chown, measure)"),
              pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")]


def _name() -> str:
    # named by the probe's source and the counter header it includes
    return "probe-" + hashlib.sha256(b"".join(p.read_bytes() for p in PROBE_SOURCES)
                                     ).hexdigest()[:16]


def _plant(directory: Path, marker: Path, owner: int) -> Path:
    """A probe-named script that leaves ``marker`` when run, with a matching sha256 beside."""
    directory.mkdir(parents=True, exist_ok=True)
    evil = directory / _name()
    evil.write_text(f"#!/bin/sh\ntouch {marker}\n")
    evil.chmod(0o755)
    side = directory / (_name() + ".sha256")
    side.write_text(hashlib.sha256(evil.read_bytes()).hexdigest() + "\n")
    for p in (evil, side):
        os.chown(p, owner, owner)
    return evil


def test_a_cache_directory_of_another_user_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "ran"
    cache = tmp_path / "xdg"
    probe_dir = cache / "bpfmem" / "probe"
    _plant(probe_dir, marker, NOBODY)
    os.chown(probe_dir, NOBODY, NOBODY)
    p = subprocess.run([sys.executable, "-m", "bpfmem", "measure",
                        str(FIXTURES / "hash_basic.o")], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=SRC, XDG_CACHE_HOME=str(cache)),
                       timeout=120)
    assert not marker.exists()
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == [
        f"bpfmem: error: refusing the probe cache {probe_dir}: owned by uid {NOBODY}, not 0; "
        "remove it, or point XDG_CACHE_HOME at a directory of yours"]


def test_a_planted_binary_in_our_directory_is_rebuilt_not_run(tmp_path):
    marker = tmp_path / "ran"
    cache = tmp_path / "probe"
    cache.mkdir(mode=0o700)
    evil = _plant(cache, marker, NOBODY)
    with pytest.raises(HostError, match="owned by uid 65534"):
        open_probe(evil)
    built = build_probe(cache)
    st = built.stat()
    assert built == evil and st.st_uid == 0 and st.st_mode & 0o777 == 0o700
    assert built.read_bytes()[:4] == b"\x7fELF"
    assert (cache.stat().st_mode & 0o777) == 0o700
    os.close(open_probe(built))
    assert not marker.exists()


def test_a_changed_binary_fails_its_recorded_hash_and_is_rebuilt(tmp_path):
    built = build_probe(tmp_path / "c")
    good = built.read_bytes()
    with open(built, "ab") as f:
        f.write(b"\0")                  # root's own file, changed after the build
    with pytest.raises(HostError, match="not the one recorded"):
        open_probe(built)
    assert build_probe(tmp_path / "c").read_bytes() == good or \
        hashlib.sha256(built.read_bytes()).hexdigest() == \
        (built.parent / (built.name + ".sha256")).read_text().strip()
    os.close(open_probe(built))
    link = tmp_path / "c" / "link"
    link.symlink_to(built)
    with pytest.raises(HostError):
        open_probe(link)                # a symlink is not followed


def test_one_rule_for_the_cache_a_directory_others_can_write_is_refused(tmp_path):
    """The probe's cache and the facts cache trust a directory by one rule
    (host/cache.private_dir): ours, no symlink, writable by nobody else."""
    from bpfmem.host import cache as facts
    d = tmp_path / "probe"
    d.mkdir(mode=0o700)
    os.chmod(d, 0o777)
    with pytest.raises(HostError, match=r"writable by others \(mode 0777\)"):
        build_probe(d)
    assert facts.private_dir(d) == "writable by others (mode 0777)"
    os.chmod(d, 0o700)
    assert facts.private_dir(d) is None
    link = tmp_path / "link"
    link.symlink_to(d)
    assert facts.private_dir(link) == "not a directory (a symlink?)"
    with pytest.raises(HostError, match="not a directory"):
        build_probe(link)


def test_a_cached_layout_is_used_whole_or_built_again(tmp_path, monkeypatch):
    """The iterators' kernel layouts go through one door (host/cache.layout): a stored entry
    that reads back whole is used without building; a malformed one is built again and
    replaced; what the build raises reaches the caller."""
    from bpfmem.host import cache
    from bpfmem.values import dataclass

    @dataclass(frozen=True)
    class Lay:
        a: int
        b: int

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    built = []

    def build():
        built.append(1)
        return Lay(1, 2)
    assert cache.layout("t-layout", "k", Lay, build) == Lay(1, 2) and len(built) == 1
    assert cache.layout("t-layout", "k", Lay, build) == Lay(1, 2) and len(built) == 1
    cache.store("t-layout", "k", {"a": 1})                  # a field missing
    assert cache.layout("t-layout", "k", Lay, build) == Lay(1, 2) and len(built) == 2
    assert cache.load("t-layout", "k") == {"a": 1, "b": 2}

    def broken():
        raise OSError("no BTF")
    with pytest.raises(OSError, match="no BTF"):
        cache.layout("t-layout", "other", Lay, broken)
