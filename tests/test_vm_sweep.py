"""The sweep on other kernels: Debian 5.10, 6.1 and 6.12 booted under qemu (TCG) with the
probe as /init. memlock must equal the model to the byte, and the kernel must refuse exactly
what the model refuses. BPFMEM_VM_KERNELS picks the kernels (default "6.1"; CI runs 6.1).
BPFMEM_RECORD=1 writes the truth table to tests/kernels/<release>.json and the probe's raw
readings to tests/data/sweeps/<release>.json.xz (checked on every run by test_sweep_data)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from vm_sweep import (SIZES, compare, object_specs, outside_summary, probe_specs,
                      save_readings, vm_specs)

KERNELS = [k.strip() for k in os.environ.get("BPFMEM_VM_KERNELS", "6.1").split(",")
           if k.strip()]
RECORD_DIR = Path(__file__).resolve().parent / "kernels"
SWEEP_DIR = Path(__file__).resolve().parent / "data" / "sweeps"

pytestmark = [pytest.mark.vm,
              pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None,
                                 reason="qemu-system-x86 is not installed")]


@pytest.mark.parametrize("series", KERNELS)
def test_sweep_on_kernel(series):
    from bpfmem.errors import HostError
    from bpfmem.host.probe import format_specs
    from bpfmem.host.vm import fetch_kernel, run_vm
    try:
        kernel = fetch_kernel(series)
    except HostError as e:
        pytest.skip(f"cannot fetch Debian's {series} kernel: {e}")
    specs = vm_specs() + object_specs()     # the sweep, the example's and the seed's maps
    text = format_specs(probe_specs(specs), sizes=SIZES)
    header, results = run_vm(kernel, text, cpus=2, timeout=1500)
    report = compare(specs, header, results)
    if os.environ.get("BPFMEM_RECORD"):
        release = header["kernel"]
        (RECORD_DIR / f"{release}.json").write_text(json.dumps(report, indent=1) + "\n")
        save_readings(SWEEP_DIR / f"{release}.json.xz", specs, header, results)
    print(outside_summary(report))
    # every spec in a cgroup of its own: an earlier map's late freeing stays out of it
    assert header["spec_cgroups"] is True
    c = report["counts"]
    assert c["specs"] == len(specs)
    assert c["created"] >= 400
    assert not report["mismatches"], "\n".join(map(str, report["mismatches"][:40]))
    assert c["memlock_equal"] == c["memlock_readings"]
    assert c["charge_within"] == c["charge_readings"]
