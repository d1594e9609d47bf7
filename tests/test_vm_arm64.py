"""The sweep on arm64: Debian's linux-image-6.1.0-*-cloud-arm64 booted under
qemu-system-aarch64 (-M virt -cpu cortex-a72, TCG) with the probe, cross-built with
aarch64-linux-gnu-gcc, as /init. memlock must equal the model to the byte, the kernel must
refuse what the model refuses, and every charge reading must lie inside the stated tolerance
(arm64's kmalloc caches start at 128 B on 6.1).

A full sweep takes minutes under TCG, so by default this boots a subset with one spec of
every map type, flag family and fill path (bpf_mem_alloc, kmalloc'd nodes, preallocated
elements, vmalloc'd areas); the full sweep's readings are kept in tests/data/sweeps/ and the
model is checked against them on every run (tests/test_sweep_data.py). BPFMEM_VM_ARM64=full
boots the whole sweep; BPFMEM_RECORD=1 then writes tests/data/sweeps/<release>.json.xz."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from bpfmem.uapi import MapFlag as F
from vm_sweep import (SIZES, compare, object_specs, outside_summary, probe_specs,
                      save_readings, vm_specs)

SWEEP_DIR = Path(__file__).resolve().parent / "data" / "sweeps"
FULL = os.environ.get("BPFMEM_VM_ARM64") == "full"

pytestmark = [pytest.mark.vm,
              pytest.mark.skipif(shutil.which("qemu-system-aarch64") is None,
                                 reason="qemu-system-arm is not installed"),
              pytest.mark.skipif(shutil.which("aarch64-linux-gnu-gcc") is None,
                                 reason="gcc-aarch64-linux-gnu is not installed")]

_FLAG_FAMILIES = int(F.NO_PREALLOC | F.MMAPABLE | F.NO_COMMON_LRU | F.STACK_BUILD_ID)


def subset(specs):
    """One spec per (map type, allocation flags, filled or not, small or large): every map
    type and allocator path of the sweep, without its repeats over sizes."""
    seen, out = set(), []
    for shape, fills in specs:
        if shape.max_entries > 4096 and not fills:
            continue
        key = (shape.type, shape.map_flags & _FLAG_FAMILIES, bool(fills),
               shape.value_size > 256, shape.max_entries > 64)
        if key not in seen:
            seen.add(key)
            out.append((shape, fills))
    return out


def test_subset_covers_every_type_and_path():
    full, part = vm_specs(), subset(vm_specs())
    assert {s.type for s, _ in full} == {s.type for s, _ in part}
    assert {(s.type, s.map_flags & _FLAG_FAMILIES, bool(f)) for s, f in full} == \
           {(s.type, s.map_flags & _FLAG_FAMILIES, bool(f)) for s, f in part}
    assert len(part) < len(full) / 3


def test_sweep_on_arm64():
    from bpfmem.errors import HostError
    from bpfmem.host.probe import format_specs
    from bpfmem.host.vm import fetch_kernel, run_vm
    try:
        kernel = fetch_kernel("6.1-arm64")
    except HostError as e:
        pytest.skip(f"cannot fetch Debian's arm64 6.1 kernel: {e}")
    specs = (vm_specs() if FULL else subset(vm_specs())) + object_specs()
    text = format_specs(probe_specs(specs), sizes=SIZES)
    header, results = run_vm(kernel, text, cpus=2, timeout=3000, arch="arm64")
    assert header["machine"] == "aarch64" and header["page_size"] == 4096
    # every spec in a cgroup of its own: an earlier map's late freeing stays out of it
    assert header["spec_cgroups"] is True
    # no transparent huge pages for the probe: khugepaged collapsing its 4 MiB BTF buffer
    # once charged 4 MiB to a per-CPU array's cgroup (Debian's 6.1: THP "always")
    assert header["thp_enabled"] is False
    report = compare(specs, header, results)
    if FULL and os.environ.get("BPFMEM_RECORD"):
        save_readings(SWEEP_DIR / f"{header['kernel']}.json.xz", specs, header, results)
    print(outside_summary(report))
    c = report["counts"]
    assert report["profile"]["arch"] == "aarch64"
    assert report["profile"]["kmalloc_min_align"] == 128
    assert c["specs"] == len(specs)
    assert not report["mismatches"], "\n".join(map(str, report["mismatches"][:40]))
    assert c["memlock_equal"] == c["memlock_readings"]
    assert c["charge_within"] == c["charge_readings"] > 0.9 * c["memlock_readings"]
