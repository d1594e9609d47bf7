"""Measuring real maps: create an object's maps in a scratch memory cgroup (or in another
kernel under qemu) and set the kernel's figures beside the model's."""

from __future__ import annotations

import os

from ..analysis.measure import MeasureResult, compare, plan_measure, release_guess
from ..host.measure import measure_maps
from ..host.profile import host_profile
from ..model.kernel import KernelProfile
from .objects import load_object, load_objects


def measure_object(source, *, vm_kernel: str | None = None, fill: bool = False,
                   cpus: int = 2, timeout: float = 1800,
                   loader: str | None = None, programs: bool = False) -> MeasureResult:
    """Create every map of an object for real (on this host in a scratch memory cgroup, or
    in a Debian kernel under qemu with ``vm_kernel``), read memlock and the memory cgroup's
    charge per map, and compare them with the model for that kernel.

    Returns a :class:`~bpfmem.analysis.measure.MeasureResult` (the kernel measured and one
    Comparison per map). Needs root (CAP_BPF, CAP_SYS_ADMIN).
    Everything created is removed afterwards, also on errors and Ctrl-C.

    ``programs`` also loads the object's programs for real with the system libbpf (on this
    host, or in the VM with ``vm_kernel``: libbpf linked into the program probe): the
    result's ``programs`` (:class:`~bpfmem.analysis.progs.ProgramsMeasured`).
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        spec = load_object(source, loader=loader, programs=False)   # maps only
    else:
        spec = _one_spec(source, loader)
    draft = host_profile() if vm_kernel is None else KernelProfile.for_release(
        release_guess(vm_kernel), cpus)
    plan = plan_measure(spec, draft, fill=fill)
    measured, results = measure_maps([(m.id, m.shape, m.fills) for m in plan.maps],
                                     vm_kernel=vm_kernel, cpus=cpus, timeout=timeout)
    prof = draft if measured is None else measured
    path = "<bytes>" if isinstance(source, (bytes, bytearray, memoryview)) else os.fspath(source)
    progs = None
    if programs:
        from ..analysis.progs import programs_measured
        from ..host.progmeasure import measure_programs
        if vm_kernel is None:
            header, lines = measure_programs(path)
        else:
            from ..inputs import read_input
            data = (bytes(source) if isinstance(source, (bytes, bytearray, memoryview))
                    else read_input(source, "object"))
            header, lines = measure_programs(path, vm_kernel=vm_kernel, data=data, cpus=cpus,
                                             timeout=timeout)
        progs = programs_measured(header, lines)
    return MeasureResult(path, prof, tuple(compare(plan, results, prof)), progs)


def _one_spec(source, loader):
    """The object's spec; a binary's embedded objects as one (each map named
    ``<where>/<map>`` when it carries several), so one run measures the agent."""
    from dataclasses import replace
    specs, _ = load_objects(source, loader=loader, programs=False)
    if len(specs) == 1:
        return specs[0]
    maps = tuple(replace(m, name=f"{s.path.rsplit(':', 1)[-1]}/{m.name}",
                         kernel_name=m.kernel_name) for s in specs for m in s.maps)
    return replace(specs[0], path=os.fspath(source), maps=maps,
                   notes=tuple(n for s in specs for n in s.notes))
