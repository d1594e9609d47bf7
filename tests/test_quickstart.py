"""The README's first command, exactly as written, in a fresh copy of the checkout, with
Debian's own (externally managed, PEP 668) /usr/bin/python3 first on PATH, as root: what a
newcomer on a fresh Debian 12 machine types. It needs apt (the command installs python3-venv)
and PyPI (pip installs rich and setuptools)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import is_root
from readme_blocks import ROOT, quickstart_commands

DEBIAN_PYTHON = Path("/usr/bin/python3")
DEBIAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _externally_managed(python: Path) -> bool:
    stdlib = subprocess.run([str(python), "-c",
                             "import sysconfig; print(sysconfig.get_path('stdlib'))"],
                            capture_output=True, text=True, check=True).stdout.strip()
    return (Path(stdlib) / "EXTERNALLY-MANAGED").is_file()


def _copy_checkout(dest: Path) -> None:
    """The checkout's tracked files as they are now (a clone would miss uncommitted work)."""
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True,
                           check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def test_the_quickstart_is_two_commands_and_the_first_uses_a_venv():
    first, second = quickstart_commands()
    assert second == "bash tests/run"
    # not `pip install .` into the system Python: PEP 668 refuses that on Debian 12
    assert "python3 -m venv .venv" in first and ".venv/bin/pip install ." in first
    assert "apt-get install -y python3-venv" in first     # Debian ships venv apart


@pytest.mark.skipif(not is_root() or not DEBIAN_PYTHON.exists() or shutil.which("apt-get") is None
                    or shutil.which("git") is None, reason="needs root, apt-get, git and "
                    "Debian's /usr/bin/python3")
def test_first_command_as_written_with_debians_python(tmp_path):
    if not _externally_managed(DEBIAN_PYTHON):
        pytest.skip("/usr/bin/python3 is not an externally managed (Debian) Python")
    first = quickstart_commands()[0]
    work = tmp_path / "bpfmem"
    _copy_checkout(work)
    apt_conf = tmp_path / "apt.conf"     # other jobs on the machine may hold the apt lock
    apt_conf.write_text('DPkg::Lock::Timeout "600";\n')
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYENV", "PYTHON", "VIRTUAL_ENV", "CONDA"))}
    env.update(PATH=DEBIAN_PATH, HOME=str(tmp_path), APT_CONFIG=str(apt_conf),
               DEBIAN_FRONTEND="noninteractive")
    assert shutil.which("python3", path=DEBIAN_PATH) == str(DEBIAN_PYTHON)
    r = subprocess.run(["sh", "-c", first], cwd=work, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    cfg = (work / ".venv" / "pyvenv.cfg").read_text()
    assert "home = /usr/bin" in cfg, cfg             # the venv is Debian's Python's
    # what it printed is the bundled example's maps and programs
    sys.path.insert(0, str(ROOT / "src"))
    from bpfmem import api
    spec = api.load_object(api.example_object_path())
    for m in spec.maps:
        assert m.name in r.stdout, (m.name, r.stdout[-2000:])
    for p in spec.programs:
        assert p.name in r.stdout, (p.name, r.stdout[-2000:])
    assert "Traceback" not in r.stderr
    assert "bundled example" in r.stderr
