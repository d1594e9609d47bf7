"""The one build step pyproject.toml cannot say: the measuring probe (src/bpfmem/host/probe.c,
a static C program bpfmem runs as root and boots as a VM's /init) is compiled when the wheel
is built, not on first use, and lands beside its source with the sha256 bpfmem checks before
running it (host/probe.open_probe). The wheel is then for this platform (its tag says which).

Where gcc or the static C library is missing (a newcomer's fresh machine: `pip install .`
must work there), the wheel is built without it, for any platform, and `bpfmem measure`
compiles the probe into its private cache when first needed, as a source checkout and an
editable install (which build nothing) do."""

import hashlib
import os
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel

PROBE_SOURCE = os.path.join("src", "bpfmem", "host", "probe.c")


def _toolchain():
    """gcc, when it and the static C library are there; else None."""
    gcc = shutil.which("gcc")
    if gcc is None:
        return None
    libc = subprocess.run([gcc, "-print-file-name=libc.a"], capture_output=True,
                          text=True).stdout.strip()
    return gcc if os.path.isabs(libc) and os.path.isfile(libc) else None


class BuildWithProbe(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        gcc = _toolchain()
        if gcc is None:
            self.announce("no gcc with a static C library: the wheel goes without the probe "
                          "(bpfmem measure compiles it when first needed)", level=3)
            return
        out = os.path.join(self.build_lib, "bpfmem", "host", "probe")
        subprocess.run([gcc, "-O2", "-static", "-Wall", "-o", out, PROBE_SOURCE], check=True)
        os.chmod(out, 0o755)
        with open(out, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        with open(out + ".sha256", "w") as f:
            f.write(digest + "\n")


class WithProgram(Distribution):
    """A distribution that carries a compiled program: its wheel is for one platform."""

    def has_ext_modules(self):
        return _toolchain() is not None


class PlatformWheel(bdist_wheel):
    """A wheel for this platform, for any Python 3 (the program is no extension module)."""

    def get_tag(self):
        _python, _abi, plat = super().get_tag()
        return "py3", "none", plat if _toolchain() is not None else "any"


setup(distclass=WithProgram, cmdclass={"build_py": BuildWithProbe, "bdist_wheel": PlatformWheel})
