"""arm64 kernels: Debian's linux-image-*-cloud-arm64 (apt-get download, unpacked, never
installed) read by --kernel-btf as a raw Image, gzip-compressed and inside an EFI zboot
container; its architecture, page size and kmalloc alignment in the profile and the model.

The truth for the struct sizes is what the probe read from /sys/kernel/btf/vmlinux inside that
kernel booted under qemu-system-aarch64 (tests/data/sweeps/<release>.json.xz, the arm64
sweep); for the page size, file(1)'s reading of the Image header."""

from __future__ import annotations

import gzip
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from bpfmem import api
from bpfmem.errors import HostError
from bpfmem.model.estimate import estimate
from bpfmem.model.formulas import kmalloc_classes, kmalloc_size
from bpfmem.model.shape import MapShape
from bpfmem.model.structs import STRUCT_NAMES
from bpfmem.parse.kernel_btf import parse_kernel_btf
from bpfmem.uapi import MapFlag as F, MapType as T
from vm_sweep import load_readings

SWEEPS = Path(__file__).resolve().parent / "data" / "sweeps"


@pytest.fixture(scope="module")
def image() -> Path:
    from bpfmem.host.vm import fetch_kernel
    try:
        return fetch_kernel("6.1-arm64")
    except HostError as e:
        pytest.skip(f"cannot fetch Debian's arm64 6.1 kernel: {e}")


@pytest.fixture(scope="module")
def facts(image):
    return parse_kernel_btf(image.read_bytes(), name=image.name, struct_names=STRUCT_NAMES)


def zboot(payload: bytes, kind: bytes = b"gzip") -> bytes:
    """An EFI zboot container as drivers/firmware/efi/libstub/zboot-header.S lays it out:
    'MZ', 'zimg', payload offset and size, the compression's name at 0x18 (the PE/EFI
    decompressor stub that follows in a real one is not needed to find the payload)."""
    head = bytearray(0x200)
    head[0:2], head[4:8] = b"MZ", b"zimg"
    struct.pack_into("<II", head, 8, len(head), len(payload))
    head[0x18:0x18 + len(kind)] = kind
    return bytes(head) + payload


def test_debian_arm64_image_is_read(image, facts):
    assert facts.release == image.name[len("vmlinuz-"):]
    assert facts.container == "arm64 Image" and facts.arch == "aarch64"
    # file(1) reads the same header: "Linux kernel ARM64 boot executable Image, ..., 4K pages"
    if shutil.which("file"):
        said = subprocess.run(["file", "-b", str(image)], capture_output=True,
                              text=True).stdout
        assert "ARM64" in said and f"{facts.page_size // 1024}K pages" in said, said
    assert facts.page_size == 4096
    assert facts.nr_cpus and facts.nr_cpus >= 2


def test_image_btf_is_the_running_kernels(facts):
    """The BTF found in the Image is the one the kernel serves at /sys/kernel/btf/vmlinux:
    every struct size equals what the probe read there under qemu-system-aarch64."""
    path = SWEEPS / f"{facts.release}.json.xz"
    if not path.exists():
        pytest.skip(f"no arm64 sweep recorded for {facts.release}")
    _specs, header, _results = load_readings(path)
    assert header["machine"] == "aarch64" and header["kernel"] == facts.release
    probed = {k: v for k, v in header["sizes"].items() if v is not None}
    assert probed and facts.sizes == {k: v for k, v in facts.sizes.items() if k in probed}
    assert {k: facts.sizes[k] for k in probed} == probed


def test_gzip_and_zboot_images_give_the_same_facts(image, facts):
    packed = gzip.compress(image.read_bytes(), 1)
    for data, container in ((packed, "gzip-compressed arm64 Image"),
                            (zboot(packed), "EFI zboot arm64 Image")):
        got = parse_kernel_btf(data, name=image.name, struct_names=STRUCT_NAMES)
        assert got.container == container
        assert (got.sizes, got.release, got.arch, got.page_size, got.nr_cpus) == \
               (facts.sizes, facts.release, facts.arch, facts.page_size, facts.nr_cpus)


def test_arm64_profile_and_flags(image, tmp_path):
    prof = api.profile(btf=image, cpus=2)
    assert (prof.arch, prof.page_size, prof.kmalloc_min) == ("aarch64", 4096, 128)
    assert prof.describe()["kmalloc_min_align"] == 128
    assert any(n.startswith("aarch64, 4096-byte pages (the file)") for n in prof.notes)
    with pytest.raises(ValueError, match="4096-byte pages, not 16384"):
        api.profile(btf=image, cpus=2, page_size=16384)
    with pytest.raises(ValueError, match="for aarch64, not x86_64"):
        api.profile(btf=image, cpus=2, arch="amd64")
    # the raw BTF alone says arm64 (struct pt_regs) but not the page size: assumed, or given
    from bpfmem.parse.kernel_btf import unwrap
    raw = tmp_path / "vmlinux.btf"
    raw.write_bytes(unwrap(image.read_bytes())[0])
    prof = api.profile(prof.build, btf=raw, cpus=2)
    assert prof.arch == "aarch64" and prof.page_size == 4096
    assert any("page size not stated by the file: 4096 assumed" in n for n in prof.notes)
    big = api.profile(prof.build, btf=raw, cpus=2, page_size=65536)
    assert big.page_size == 65536 and any("--page-size" in n for n in big.notes)
    # 64 KiB pages: a 40 KiB area is kmalloc'd (under 8 pages) from a 64 KiB page, not vmalloc'd
    sh = MapShape(T.ARRAY, 4, 40, 1000)
    assert estimate(sh, big).charged_at_create > estimate(sh, prof).charged_at_create


def test_cli_reads_the_arm64_image(image):
    obj = Path(__file__).resolve().parent / "bpf" / "obj" / "advise_indirect.o"
    out = subprocess.run([sys.executable, "-m", "bpfmem", "maps", "--kernel-btf", str(image),
                          "--cpus", "2", str(obj)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "aarch64, 4096-byte pages" in out.stdout and "not a kernel BTF" not in out.stderr


def test_kmalloc_caches_by_minimum_alignment():
    """mm/slab_common.c: with ARCH_KMALLOC_MINALIGN 128 (arm64 before 6.5) there is no
    kmalloc-8..96 and no kmalloc-192; 72..128 B land in kmalloc-128, 136..256 in -256."""
    assert kmalloc_classes(8)[:7] == (8, 16, 32, 64, 96, 128, 192)
    assert kmalloc_classes(64)[:4] == (64, 128, 192, 256)
    assert kmalloc_classes(128)[:3] == (128, 256, 512)
    assert [kmalloc_size(n, 128) for n in (8, 72, 129, 193)] == [128, 128, 256, 256]
    x86 = api.profile("6.1", cpus=2)
    assert x86.kmalloc_min == 8
    np_hash = MapShape(T.HASH, 4, 8, 1000, int(F.NO_PREALLOC))
    # a 4/8 hash element is 64 + 8 B from bpf_mem_alloc: kmalloc-96 on x86_64, -128 on arm64
    from dataclasses import replace
    arm = replace(x86, arch="aarch64", kmalloc_min=128)
    per = estimate(np_hash, arm, 1000).charged - estimate(np_hash, arm).charged
    assert per == 1000 * (128 + 8)
    assert estimate(np_hash, x86, 1000).charged - estimate(np_hash, x86).charged \
        == 1000 * (96 + 8)
