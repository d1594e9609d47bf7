"""Load an object's programs for real and read what the kernel charged for them: the
program probe (``progprobe.c``, built against the system libbpf) in a scratch memory cgroup
and its flush sibling, both removed afterwards, also on errors and Ctrl-C."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from contextlib import ExitStack
from pathlib import Path

from bpfmem.errors import HostError, PermissionDenied

from . import cache
from .cgroup import scratch_cgroup
from .cleanup import scratch_name
from .probe import _end, _private_dir, _start, install_built, open_probe

__all__ = ["PROGPROBE_SOURCE", "build_progprobe", "measure_programs"]

PROGPROBE_SOURCE = Path(__file__).with_name("progprobe.c")


def build_progprobe(cache_dir: str | os.PathLike | None = None) -> Path:
    """The program probe, compiled once per source into the private probe cache (as
    :func:`bpfmem.host.probe.build_probe`; dynamically linked: it needs libbpf, Debian
    packages libbpf-dev to build and libbpf1 to run)."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise HostError("measuring programs builds a small libbpf loader: it needs gcc "
                        "(Debian packages gcc libbpf-dev)")
    source = PROGPROBE_SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    out_dir = Path(cache_dir) if cache_dir is not None else Path(cache.root()) / "probe"
    _private_dir(out_dir)
    target = out_dir / f"progprobe-{digest}"
    try:
        os.close(open_probe(target))
        return target
    except HostError:
        pass
    fd, tmp = tempfile.mkstemp(prefix=".progprobe-", dir=out_dir)
    os.close(fd)
    try:
        proc = subprocess.run([gcc, "-O2", "-Wall", "-o", tmp, str(PROGPROBE_SOURCE), "-lbpf"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            err = proc.stderr.strip()
            if "bpf/libbpf.h" in err or "-lbpf" in err:
                raise HostError("measuring programs needs libbpf to build its loader "
                                f"(Debian package libbpf-dev): {err[-300:]}")
            raise HostError(f"compiling {PROGPROBE_SOURCE} failed: {err[-1500:]}")
        install_built(tmp, target)
    finally:
        for leftover in (tmp, f"{tmp}.sha256"):
            if os.path.lexists(leftover):
                os.unlink(leftover)
    os.close(open_probe(target))
    return target


def measure_programs(obj: str | os.PathLike, *, timeout: float = 1800
                     ) -> tuple[dict, list[dict]]:
    """Run the program probe on ``obj`` in a scratch cgroup (v1 memory, else v2 where it
    delegates memory): ``(header, result lines)`` (see the top of progprobe.c)."""
    if os.geteuid() != 0:
        raise PermissionDenied("loading BPF programs", "CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN")
    binary = build_progprobe()
    proc: subprocess.Popen | None = None
    try:
        with ExitStack() as stack:
            name = scratch_name("measure")
            cg = stack.enter_context(scratch_cgroup(name=name))
            flush = stack.enter_context(scratch_cgroup(version=cg.version,
                                                       name=f"{name}-flush"))
            stack.callback(_end, lambda: proc)   # the probe goes before its cgroups
            kind = "--cgroup-v1" if cg.version == 1 else "--cgroup-v2"
            proc = _start(binary, ["PROGPROBE", os.fspath(obj), kind, cg.fs_path,
                                   "--flush-cgroup", flush.fs_path])
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                raise HostError(f"the program probe did not finish within {timeout} s") from None
    finally:
        _end(lambda: proc)
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    errors = [x for x in lines if x.get("kind") == "error"]
    if proc.returncode != 0 or errors or not lines or lines[-1].get("kind") != "done":
        raise HostError(f"the program probe failed (exit {proc.returncode}): "
                        f"{(err.strip() or out.strip())[-800:]}")
    return lines[0], lines[1:-1]
