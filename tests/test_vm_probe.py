"""The probe as /init of Debian kernels booted under qemu TCG (bpfmem.host.vm).

BPFMEM_VM_KERNELS chooses the kernels ("6.1" by default, e.g. "5.10,6.1,6.12"). A kernel is
downloaded once (Debian's linux-image-*-cloud-amd64) and cached in ~/.cache/bpfmem/kernels.
Expected values: the kernel's own formulas per release (memlock eras, the charge at create
and per entry), as bpfmem.model.formulas writes them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bpfmem.errors import HostError
from bpfmem.host.probe import format_specs, parse_output
from bpfmem.host.vm import QEMU, build_initramfs, fetch_kernel, run_vm

PAGE = 4096
KERNELS = [k.strip() for k in os.environ.get("BPFMEM_VM_KERNELS", "6.1").split(",") if k.strip()]
NO_PREALLOC = 1

SPECS = [
    dict(id="array", type="array", key_size=4, value_size=8, max_entries=1000),
    dict(id="hash", type="hash", key_size=4, value_size=8, max_entries=1000, fills=[0, 1000]),
    dict(id="hash_np", type="hash", key_size=4, value_size=8, max_entries=1000,
         map_flags=NO_PREALLOC, fills=[0, 500, 1000]),
    dict(id="pcpu_array", type="percpu_array", key_size=4, value_size=8, max_entries=1000),
    dict(id="lru", type="lru_hash", key_size=4, value_size=8, max_entries=1000, fills=[1000]),
    dict(id="lpm", type="lpm_trie", key_size=8, value_size=8, max_entries=1000,
         map_flags=NO_PREALLOC, fills=[500, 1000]),
    dict(id="queue", type="queue", key_size=0, value_size=8, max_entries=100, fills=[100]),
    dict(id="sk_storage", type="sk_storage", key_size=4, value_size=16, max_entries=0,
         map_flags=NO_PREALLOC),
    dict(id="hom", type="hash_of_maps", key_size=4, value_size=4, max_entries=100, fills=[10]),
    dict(id="bad_array", type="array", key_size=8, value_size=8, max_entries=1000),
]
SIZES = ["bpf_htab", "bpf_array"]


def r8(x: int) -> int:
    return (x + 7) & ~7


def pa(x: int) -> int:
    return (x + PAGE - 1) // PAGE * PAGE


# ---- no qemu needed ----

def test_parse_output_tolerates_console_noise():
    text = (
        "\x1bc\x1b[?7l\x1b[2J[    0.000000] Linux version 6.1.0\r\n"
        '{"probe":"bpfmem","kernel":"6.1.0-57-cloud-amd64","possible_cpus":2}\r\n'
        '{"sizes":{"bpf_htab":832}}\r\n'
        '{"id":"a","ok":tr[   12.345678] random: crng init done\r\nue,"memlock":1}\r\n'
        '{"id":"b","ok":true,\r\nsome unstamped noise\r\n"memlock":2}\r\n'
        "[   13.000000] BUG: something {not json\r\n"
        '{"id":"c","ok":false,"errno":22}\r\n'
        '{"id":"d","ok":tru\r\n'          # cut off: dropped
        '{"done":true}\r\n'
        "[   14.000000] reboot: Power down\r\n"
    )
    header, results = parse_output(text)
    assert header["kernel"] == "6.1.0-57-cloud-amd64" and header["done"]
    assert header["sizes"] == {"bpf_htab": 832}
    assert [(r["id"], r.get("memlock")) for r in results] == [("a", 1), ("b", 2), ("c", None)]


def test_parse_output_without_header():
    assert parse_output("garbage\n[ 1.000] x\n") == (None, [])


def test_build_initramfs_lists(tmp_path):
    fake = tmp_path / "probe"
    fake.write_bytes(b"\x7fELF" + b"x" * 1001)
    blob = build_initramfs(fake, "a 2 4 8 10 0 0 -\n")
    assert blob.startswith(b"070701") and len(blob) % 512 == 0
    if shutil.which("cpio") is None:
        pytest.skip("cpio not installed")
    listing = subprocess.run(["cpio", "-itv"], input=blob, capture_output=True, check=True)
    names = [l.split()[-1] for l in listing.stdout.decode().splitlines()]
    assert {"init", "specs.txt", "dev/console", "proc", "sys"} <= set(names)
    out = tmp_path / "x"
    out.mkdir()
    subprocess.run(["cpio", "-id", "--no-absolute-filenames", "init", "specs.txt"], input=blob,
                   cwd=out, capture_output=True, check=True)
    assert (out / "init").read_bytes() == fake.read_bytes()
    assert (out / "specs.txt").read_text() == "a 2 4 8 10 0 0 -\n"
    assert os.access(out / "init", os.X_OK)


# ---- booted kernels ----

@pytest.fixture(scope="module", params=KERNELS)
def booted(request):
    version = request.param
    if shutil.which(QEMU) is None:
        pytest.skip(f"{QEMU} not installed (Debian package qemu-system-x86)")
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to build the probe")
    try:
        kernel = fetch_kernel(version)
    except HostError as e:
        pytest.skip(f"cannot fetch kernel {version}: {e}")
    pids: list[int] = []
    header, results = run_vm(kernel, format_specs(SPECS, sizes=SIZES), cpus=2, memory="2G",
                             timeout=900, on_start=pids.append)
    return version, header, {r["id"]: r for r in results}, pids


def era(version: str) -> str:
    major, minor = (int(x) for x in version.split(".")[:2])
    if (major, minor) <= (5, 10):
        return "rlimit"
    if (major, minor) <= (6, 3):
        return "footprint"
    return "mem_usage"


@pytest.mark.vm
def test_header(booted):
    version, header, results, _ = booted
    assert header["kernel"].startswith(version + ".")
    assert header["possible_cpus"] == 2 and header["page_size"] == PAGE
    assert header["pid1"] is True and header["cgroup"] == "v2"
    assert header["counter"] == "memory.current" and header["done"]
    assert header["thp_enabled"] is False      # (Debian's kernels: THP "always")
    assert set(results) == {s["id"] for s in SPECS}
    assert all(isinstance(v, int) and v > 0 for v in header["sizes"].values()), header["sizes"]


@pytest.mark.vm
def test_array_memlock_by_era(booted):
    version, header, r, _ = booted
    a = r["array"]
    assert a["ok"]
    s = header["sizes"]
    if era(version) == "rlimit":
        assert a["memlock"] == pa(s["bpf_array"] + 1000 * 8)
        if version == "5.10":
            assert s["bpf_array"] == 320 and a["memlock"] == 12288
    elif era(version) == "footprint":
        assert a["memlock"] == pa(1000 * ((4 + 8 + 7) // 8 * 8)) == 16384
    else:
        assert a["memlock"] == s["bpf_array"] + 8000
        if version == "6.12":
            assert a["memlock"] == 264 + 8000 == 8264


@pytest.mark.vm
def test_other_memlock_by_era(booted):
    version, header, r, _ = booted
    s, c = header["sizes"], header["possible_cpus"]
    if era(version) == "rlimit":
        # §6: 16·p2(M) + E·M + E·C, E = 48 + r8(K) + r8(V); memlock never moves on insert
        assert r["hash"]["memlock"] == pa(16 * 1024 + 64 * 1000 + 64 * c) == 81920
        assert all(f["memlock"] == r["hash_np"]["memlock"] for f in r["hash_np"]["fills"])
        assert r["pcpu_array"]["memlock"] == pa(s["bpf_array"] + 8 * 1000 + 8 * c * 1000)
    elif era(version) == "footprint":
        assert r["hash"]["memlock"] == pa(1000 * 16) == 16384
        # §1: round_up(M * r8(K + value_size'), PAGE), value_size' = r8(V)·C for percpu
        assert r["pcpu_array"]["memlock"] == pa(1000 * r8(4 + r8(8) * c)) == 24576
        assert r["lpm"]["memlock"] == pa(1000 * r8(8 + 8))
    else:
        base = s["bpf_htab"] + 16 * 1024 + 32 * c
        assert r["hash"]["memlock"] == base + 64 * (1000 + c) + 8 * c
        assert [f["memlock"] for f in r["hash_np"]["fills"]] == [base + 72 * n
                                                                for n in (0, 500, 1000)]


@pytest.mark.vm
def test_charges_by_era(booted):
    version, header, r, _ = booted
    for rid, res in r.items():
        if res["ok"]:
            assert res["charged"] is not None and res["charged"] % PAGE == 0, (rid, res)
    if era(version) == "rlimit":
        # §8: 5.10 charges nothing of a map, only its fd (struct file + dentry); the reading
        # stands up to a page per CPU either side (the memcg's per-CPU byte stocks)
        assert abs(r["array"]["charged"]) <= 2 * PAGE
        fills = r["hash_np"]["fills"]
        assert abs(fills[-1]["charged"] - fills[0]["charged"]) <= PAGE
    else:
        # §5 rule 1 (same since 5.11): array 1000x8 -> kmalloc_large -> 16384, + its fd
        # (464 B), within a page per CPU
        assert abs(r["array"]["charged"] - 16384 - 464) <= 2 * PAGE
        fills = r["hash_np"]["fills"]
        per_elem = (fills[-1]["charged"] - fills[0]["charged"]) / 1000
        assert 64 <= per_elem <= 200, per_elem


@pytest.mark.vm
def test_rejected_and_btf_maps(booted):
    version, header, r, _ = booted
    assert r["bad_array"]["ok"] is False and r["bad_array"]["errno"] == 22
    assert r["sk_storage"]["ok"] is True
    assert r["hom"]["ok"] is True and r["hom"]["fills"][0]["inserted"] == 10
    assert r["queue"]["ok"] is True and r["queue"]["fills"][0]["inserted"] == 100


@pytest.mark.vm
def test_qemu_gone(booted):
    *_, pids = booted
    assert len(pids) == 1
    pid = pids[0]
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return
    assert b"qemu" not in cmdline, f"qemu pid {pid} still running"
