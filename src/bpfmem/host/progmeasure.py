"""Load an object's programs for real and read what the kernel charged for them: the
program probe (``progprobe.c``, built against the system libbpf) in a scratch memory cgroup
and its flush sibling, both removed afterwards, also on errors and Ctrl-C."""

from __future__ import annotations

import json
import os
from pathlib import Path

from bpfmem.errors import HostError, PermissionDenied

from .probe import COUNTER_HEADER, build_helper, run_in_scratch_cgroups

__all__ = ["PROGPROBE_SOURCE", "build_progprobe", "measure_programs"]

PROGPROBE_SOURCE = Path(__file__).with_name("progprobe.c")
PROGPROBE_SOURCES = (PROGPROBE_SOURCE, COUNTER_HEADER)


def build_progprobe(cache_dir: str | os.PathLike | None = None) -> Path:
    """The program probe, compiled once per content of its sources into the private probe cache (as
    :func:`bpfmem.host.probe.build_probe`; dynamically linked: it needs libbpf, Debian
    packages libbpf-dev to build and libbpf1 to run)."""
    def explain(err: str) -> str | None:
        if "bpf/libbpf.h" in err or "-lbpf" in err:
            return ("measuring programs needs libbpf to build its loader "
                    f"(Debian package libbpf-dev): {err[-300:]}")
        return None
    return build_helper("progprobe", PROGPROBE_SOURCES, "gcc", ["-O2", "-Wall"], ["-lbpf"],
                        cache_dir=cache_dir, explain=explain,
                        missing="measuring programs builds a small libbpf loader: it needs "
                                "gcc (Debian packages gcc libbpf-dev)")


def measure_programs(obj: str | os.PathLike, *, timeout: float = 1800
                     ) -> tuple[dict, list[dict]]:
    """Run the program probe on ``obj`` in a scratch cgroup (v1 memory, else v2 where it
    delegates memory): ``(header, result lines)`` (see the top of progprobe.c)."""
    if os.geteuid() != 0:
        raise PermissionDenied("loading BPF programs", "CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN")
    binary = build_progprobe()
    code, out, err = run_in_scratch_cgroups(binary, [os.fspath(obj)], None, timeout=timeout,
                                            what="the program probe")
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    errors = [x for x in lines if x.get("kind") == "error"]
    if code != 0 or errors or not lines or lines[-1].get("kind") != "done":
        raise HostError(f"the program probe failed (exit {code}): "
                        f"{(err.strip() or out.strip())[-800:]}")
    return lines[0], lines[1:-1]
