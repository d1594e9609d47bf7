"""The model against every reading of the full qemu sweeps, kept as test data.

Each file under tests/data/sweeps/ is what the probe answered in one Debian kernel booted
under qemu (tests/vm_sweep.py's specs, created and filled in a fresh memory cgroup), with the
specs it was given; ``BPFMEM_RECORD=1`` on tests/test_vm_sweep.py (and tests/test_vm_arm64.py)
writes them. On every run the model is held to them: memlock to the byte, the kernel's
refusals, and every charge reading inside the tolerance the model states for that map. The
tolerance's median over the readings is printed, so a tolerance grown to pass shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from vm_sweep import compare, load_readings, tolerance_median

DATA = Path(__file__).resolve().parent / "data" / "sweeps"
FILES = sorted(DATA.glob("*.json.xz"))


def test_there_are_recorded_sweeps():
    kernels = {p.name.split(".json")[0] for p in FILES}
    assert any(k.startswith("6.1.") for k in kernels), kernels
    assert any(k.startswith("6.12.") for k in kernels), kernels


@pytest.mark.parametrize("path", FILES, ids=[p.name.split(".json")[0] for p in FILES])
def test_model_holds_on_recorded_sweep(path, capsys):
    specs, header, results = load_readings(path)
    report = compare(specs, header, results)
    c = report["counts"]
    median = tolerance_median(report)
    with capsys.disabled():
        print(f"\n{path.name}: {c['charge_within']}/{c['charge_readings']} charge readings "
              f"inside, tolerance median {median} B; memlock {c['memlock_equal']}/"
              f"{c['memlock_readings']} exact; refusals {c['refusals_agree']}/{c['specs']}")
    assert c["specs"] == len(specs) and c["created"] >= 400
    assert c["charge_readings"] >= 0.95 * c["memlock_readings"]
    assert not report["mismatches"], "\n".join(map(str, report["mismatches"][:40]))
    assert c["memlock_equal"] == c["memlock_readings"]
    assert c["charge_within"] == c["charge_readings"]
    # the tolerance is a page or two, not the charge itself
    assert median is not None and median <= 2 * int(header.get("page_size", 4096))
