"""The one build step pyproject.toml cannot say: the measuring probe (src/bpfmem/host/probe.c,
a static C program bpfmem runs as root and boots as a VM's /init) is compiled when the wheel
is built, not on first use, and lands beside its source with the sha256 bpfmem checks before
running it (host/probe.open_probe). The wheel is then Linux-only (its platform tag says which);
an editable install builds nothing and bpfmem builds the probe into its private cache when
first needed, as a source checkout does."""

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


class BuildWithProbe(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        gcc = shutil.which("gcc")
        if gcc is None:
            raise SystemExit("building bpfmem's wheel compiles its probe: it needs gcc and the "
                             "static C library (Debian packages: gcc libc6-dev)")
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
        return True


class PlatformWheel(bdist_wheel):
    """A wheel for this platform, for any Python 3 (the program is no extension module)."""

    def get_tag(self):
        _python, _abi, plat = super().get_tag()
        return "py3", "none", plat


setup(distclass=WithProgram, cmdclass={"build_py": BuildWithProbe, "bdist_wheel": PlatformWheel})
