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


def build_progprobe(cache_dir: str | os.PathLike | None = None, *,
                    static: bool = False) -> Path:
    """The program probe, compiled once per content of its sources into the private probe
    cache (as :func:`bpfmem.host.probe.build_probe`; dynamically linked: it needs libbpf,
    Debian packages libbpf-dev to build and libbpf1 to run). ``static``: linked statically
    with libbpf, libelf and zlib, to run in a VM's initramfs (Debian: libbpf-dev, libelf-dev,
    zlib1g-dev)."""
    def explain(err: str) -> str | None:
        if "bpf/libbpf.h" in err or "-lbpf" in err:
            return ("measuring programs needs libbpf to build its loader "
                    f"(Debian package libbpf-dev): {err[-300:]}")
        if static and ("-lelf" in err or "-lz" in err or "libc.a" in err):
            return ("measuring programs in a VM links its loader statically: it needs "
                    f"libelf-dev, zlib1g-dev and libc6-dev: {err[-300:]}")
        return None
    return build_helper("progprobe-static" if static else "progprobe", PROGPROBE_SOURCES,
                        "gcc", ["-O2", "-Wall"] + (["-static"] if static else []),
                        ["-lbpf"] + (["-lelf", "-lz"] if static else []),
                        cache_dir=cache_dir, explain=explain,
                        missing="measuring programs builds a small libbpf loader: it needs "
                                "gcc (Debian packages gcc libbpf-dev)")


def measure_programs(obj: str | os.PathLike, *, timeout: float = 1800,
                     vm_kernel: str | None = None, data: bytes | None = None,
                     cpus: int = 2) -> tuple[dict, list[dict]]:
    """Run the program probe on ``obj`` in a scratch cgroup (v1 memory, else v2 where it
    delegates memory): ``(header, result lines)`` (see the top of progprobe.c). With
    ``vm_kernel`` (a Debian release or a vmlinuz path): in that kernel under qemu instead, the
    probe as /init running the statically linked program probe on ``data`` (the object's
    bytes) in the VM's cgroup v2; the header then also says the VM's ``release``."""
    if os.geteuid() != 0:
        raise PermissionDenied("loading BPF programs", "CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN")
    if vm_kernel is not None:
        ((header, lines),) = measure_programs_in_vm([data or b""], vm_kernel, cpus=cpus,
                                                    timeout=timeout)
        return header, lines
    binary = build_progprobe()
    code, out, err = run_in_scratch_cgroups(binary, [os.fspath(obj)], None,
                                            timeout=timeout, what="the program probe")
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    errors = [x for x in lines if x.get("kind") == "error"]
    if code != 0 or errors or not lines or lines[-1].get("kind") != "done":
        raise HostError(f"the program probe failed (exit {code}): "
                        f"{(err.strip() or out.strip())[-800:]}")
    return lines[0], lines[1:-1]


def measure_programs_in_vm(objects: list[bytes], vm_kernel: str, *, cpus: int = 2,
                           timeout: float = 1800) -> list[tuple[dict, list[dict]]]:
    """The program probe on each object (its bytes) in Debian's ``vm_kernel`` (a release or
    a vmlinuz path) under qemu, in one boot: the probe as /init runs the statically linked
    program probe on each in turn in the VM's cgroup v2; per object ``(header, result
    lines)`` as :func:`measure_programs`, the header with the VM's ``release``."""
    from . import vm
    kernel = vm.fetch_kernel(vm_kernel)
    binary = build_progprobe(static=True)
    names = [f"object{i}.o" for i in range(len(objects))]
    vm_header, _results = vm.run_vm(
        kernel, "".join(f"progs /{n}\n" for n in names), cpus=cpus, timeout=timeout,
        files=[("progprobe", 0o755, binary.read_bytes())]
        + [(n, 0o644, bytes(d)) for n, d in zip(names, objects)])
    out = []
    for n in names:
        lines = [x for x in vm_header["programs"] if x.get("obj") == f"/{n}"]
        failed = [x for x in lines if "progs_error" in x or x.get("kind") == "error"]
        if failed or not lines or lines[-1].get("kind") != "done":
            raise HostError(f"the program probe failed in {kernel.name}: "
                            f"{json.dumps((failed or lines)[-3:])[-800:]}")
        header = {**lines[0], "release": vm_header.get("kernel")}
        out.append((header, lines[1:-1]))
    return out
