"""Create map shapes for real and read what the kernel says they cost: on this host in a
scratch memory cgroup (:func:`bpfmem.host.probe.run_local`), or in another Debian kernel
booted under qemu (:mod:`bpfmem.host.vm`)."""

from __future__ import annotations

from typing import Iterable, Sequence

from ..model.kernel import KernelProfile
from ..model.shape import MapShape
from ..model.structs import STRUCT_NAMES
from . import probe, vm
from .profile import profile_from_probe


def measure_maps(maps: Iterable[tuple[str, MapShape, Sequence[int]]], *,
                 vm_kernel: str | None = None, cpus: int = 2,
                 timeout: float = 1800) -> tuple[KernelProfile | None, list[dict]]:
    """Create each ``(id, shape, fill levels)`` and read memlock and the memory cgroup's
    charge at create and after each fill. Returns ``(profile, results)``: the probe's result
    lines (``id``, ``ok``, ``errno``, ``memlock``, ``charged``, ``fills``) and, in a VM,
    the profile of the kernel measured (None on this host). Needs root; everything created
    is removed afterwards, also on errors and Ctrl-C."""
    specs = [probe.shape_spec(sid, shape, fills) for sid, shape, fills in maps]
    if vm_kernel is None:
        _header, results = probe.run_local(specs, "v1", timeout=timeout)
        return None, results
    kernel = vm.fetch_kernel(vm_kernel)
    text = probe.format_specs(specs, sizes=STRUCT_NAMES)
    header, results = vm.run_vm(kernel, text, cpus=cpus, timeout=timeout)
    sizes = next((r["sizes"] for r in results if "sizes" in r), {})
    return profile_from_probe(header, sizes), results
