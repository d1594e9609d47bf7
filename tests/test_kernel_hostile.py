"""Hostile kernel files (issue 30): decompression bombs, BTF with millions of types, tars
built to exhaust, forged struct sizes. Each is made here at test time (tests/kernelgen.py)
and must end in one ParseError line naming the file, within the one budget a file may
unpack to; bench/kernel_inputs.py prints the time and peak RSS of the worst of each kind."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import kernelgen
from bpfmem import api
from bpfmem.errors import ParseError
from bpfmem.parse import btf as btf_mod
from bpfmem.parse import kernel_btf as kb

SRC = str(Path(__file__).resolve().parent.parent / "src")
MiB = 1 << 20


def bpfmem_rss(*args: str) -> tuple[subprocess.CompletedProcess, int]:
    """The CLI's result and its peak RSS in bytes (GNU time: a child forked from pytest
    would inherit pytest's high-water mark)."""
    with tempfile.NamedTemporaryFile("r", prefix="bpfmem-rss-") as out:
        proc = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", out.name, sys.executable,
                               "-m", "bpfmem", *args], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": SRC}, timeout=300)
        rss = int(out.read().split()[-1]) * 1024
    return proc, rss


def one_line_naming(proc: subprocess.CompletedProcess, path: Path, words: str) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, proc.stderr
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert str(path) in lines[0] and words in lines[0], lines[0]
    return lines[0]


def maps_with(path: Path) -> list[str]:
    return ["maps", str(api.example_object_path()), "--kernel-btf", str(path)]


@pytest.fixture
def small_budget(monkeypatch):
    monkeypatch.setattr(kb, "BUDGET", 8 * MiB)
    return 8 * MiB


# ---- the budget -------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["gzip", "xz", "bz2", "zstd"])
def test_each_codec_stops_at_the_budget(kind, small_budget):
    bomb = getattr(kernelgen, f"{kind}_bomb")(12)
    budget = kb.Budget()
    with pytest.raises(ParseError, match="unpacks to more than 8Mi"):
        kb._decompress(bomb, 0, budget)
    # stopped within one chunk past the limit (zstd: one slice's output, 4-byte RLE blocks
    # of 128 KiB each)
    chunk = kb._ZSTD_SLICE // 4 * (128 << 10) if kind == "zstd" else kb._CHUNK
    assert -chunk <= budget.left < 0 and chunk <= 4 * MiB


def test_candidates_of_one_bzimage_share_the_budget(small_budget):
    """Two payloads of 5 MiB each: either alone fits in 8 MiB (and is no ELF); together
    they pass it, and the second is not unpacked past the budget's end."""
    image = kernelgen.bzimage(kernelgen.gzip_bomb(5), kernelgen.zstd_bomb(5))
    with pytest.raises(ParseError, match="unpacks to more than 8Mi"):
        kb.unwrap(image, "two.bzImage")
    with pytest.raises(ParseError, match="not an ELF vmlinux"):
        kb.unwrap(kernelgen.bzimage(kernelgen.gzip_bomb(5)), "one.bzImage")


def test_layers_share_the_budget(small_budget):
    """xz of a gzip of 6 MiB of zeros, gzipped again: 6 MiB of the inner gzip stream plus
    the layers above pass 8 MiB only together."""
    inner = kernelgen.gzip_bomb(6)
    with pytest.raises(ParseError, match="not a kernel BTF"):
        kb.unwrap(kernelgen.xz(inner), "layer.xz")       # 6 MiB of zeros: fits
    layered = kernelgen.xz(kernelgen.gz(kernelgen.xz(kernelgen.gz(bytes(3 * MiB)) * 2)))
    budget = kb.Budget()
    with pytest.raises(ParseError):
        kb.unwrap(layered, "layers.xz", budget=budget)
    assert budget.limit - budget.left > 3 * MiB       # every layer drew on the one budget


def test_bz2_in_bzimage_stops_at_the_budget(small_budget):
    with pytest.raises(ParseError, match="unpacks to more than 8Mi"):
        kb.unwrap(kernelgen.bzimage(kernelgen.bz2_bomb(12)), "bz2.bzImage")


def test_xz_of_gzip_bomb_is_one_line(tmp_path):
    """Full size: past 256 MiB (a 1 GiB-per-layer bound let it reach 3 GiB)."""
    path = kernelgen.write(tmp_path, "gzip.btf.xz", kernelgen.xz(kernelgen.gzip_bomb(300)))
    proc, rss = bpfmem_rss(*maps_with(path))
    one_line_naming(proc, path, "unpacks to more than 256Mi")
    assert rss < 450 * MiB, rss


def test_zstd_and_two_bomb_bzimage_are_bounded(tmp_path):
    """zstd was not bounded at all (49 KB held 1.5 GiB); a bzImage with two bomb payloads
    unpacked both."""
    zst = kernelgen.write(tmp_path, "vmlinux.zst", kernelgen.zstd_bomb(1536))
    two = kernelgen.write(tmp_path, "two.bzImage",
                          kernelgen.bzimage(kernelgen.gzip_bomb(300), kernelgen.zstd_bomb(300)))
    for path in (zst, two):
        proc, rss = bpfmem_rss(*maps_with(path))
        one_line_naming(proc, path, "unpacks to more than 256Mi")
        assert rss < 450 * MiB, rss


def test_lz4_blocks_are_charged(small_budget):
    lz4 = pytest.importorskip("lz4.block")
    block = lz4.compress(bytes(8 * MiB), store_size=False)      # lz4 -l: 8 MiB blocks
    stream = kb._LZ4_LEGACY + (len(block).to_bytes(4, "little") + block) * 3
    with pytest.raises(ParseError, match="unpacks to more than 8Mi"):
        kb._decompress(stream, 0)
    tiny = lz4.compress(b"x", store_size=False)
    many = kb._LZ4_LEGACY + (len(tiny).to_bytes(4, "little") + tiny) * 1_000_000
    assert kb._decompress(many, 0) == b"x"      # a short block is the last one
    with pytest.raises(ParseError, match="more than 64 frames"):
        kb._decompress(kb._LZ4_LEGACY * 1_000_000, 0)


# ---- BTF --------------------------------------------------------------------------------------
def test_btf_type_count_is_bounded(monkeypatch):
    assert btf_mod.MAX_TYPES == 0xFFFFF          # BTF_MAX_TYPE, include/uapi/linux/btf.h
    monkeypatch.setattr(btf_mod, "MAX_TYPES", 1000)
    assert btf_mod.Btf(kernelgen.many_types_btf(1000)).count == 1001
    with pytest.raises(ParseError, match="more than 1,000 types"):
        btf_mod.Btf(kernelgen.many_types_btf(1001))


def test_millions_of_types_in_xz_are_one_line(tmp_path):
    path = kernelgen.write(tmp_path, "types.btf.xz",
                           kernelgen.xz(kernelgen.many_types_btf(3_000_000)))
    proc, rss = bpfmem_rss(*maps_with(path))
    one_line_naming(proc, path, "more than 1,048,575 types")
    assert rss < 450 * MiB, rss


@pytest.mark.parametrize("sizes, name", [
    ({"htab_elem": 0, "bucket": 0, "bpf_map": 0}, "bpf_map"),
    ({"htab_elem": 0}, "htab_elem"),
    ({"bucket": 1}, "bucket"),
    ({"bpf_htab": 1 << 30}, "bpf_htab"),
])
def test_forged_struct_sizes_are_refused(sizes, name, tmp_path):
    """0-byte htab_elem/bucket/bpf_map made a gate pass too low with "exact": true."""
    path = kernelgen.write(tmp_path, f"{kernelgen.RELEASE}.btf",
                           kernelgen.forged_sizes_btf(sizes))
    with pytest.raises(ParseError, match=f"struct {name} is {sizes[name]} bytes in this BTF"):
        api.profile(btf=path, cpus=2)
    proc = subprocess.run([sys.executable, "-m", "bpfmem", "check",
                           str(api.example_object_path()), "--limit", "1Gi", "--kernel-btf",
                           str(path), "--format", "json"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": SRC}, timeout=120)
    one_line_naming(proc, path, f"struct {name} is")


def test_real_struct_sizes_pass_the_check():
    """The committed Debian BTFs (nobody here wrote them) and this host's: every struct the
    model reads holds its members with less than a page of tail padding."""
    from bpfmem.model.structs import STRUCT_NAMES
    blobs = [kernelgen.real_btf(p.name[:-len(".btf.xz")])
             for p in sorted(kernelgen.BTF_DIR.glob("*.btf.xz"))]
    if os.path.exists("/sys/kernel/btf/vmlinux"):
        blobs.append(Path("/sys/kernel/btf/vmlinux").read_bytes())
    for blob in blobs:
        facts = kb.facts_from_btf(blob, STRUCT_NAMES)
        assert facts.sizes["bpf_htab"] > 0 and facts.sizes["htab_elem"] > 0


# ---- tars -------------------------------------------------------------------------------------
def test_sparse_members_are_not_read_whole(tmp_path):
    """GNU-sparse members of 4 GiB holes: each member's first bytes are looked at, not the
    4 GiB (55 s and 3 GiB before)."""
    path = kernelgen.write(tmp_path, "sparse.btf.tar", kernelgen.sparse_tar(3))
    proc, rss = bpfmem_rss(*maps_with(path))
    one_line_naming(proc, path, "archive holds no BTF")
    assert rss < 200 * MiB, rss
    btf_head = kernelgen.write(tmp_path, "head.btf.tar",
                               kernelgen.sparse_tar(1, head=kernelgen.real_btf()[:4096]))
    with pytest.raises(ParseError, match="unpacks to more than 256Mi"):
        api.profile(btf=btf_head, cpus=2)


def test_member_count_is_bounded(tmp_path):
    """200,000 empty members took 8 s; past MAX_TAR_MEMBERS the archive is no BTFHub one."""
    path = kernelgen.write(tmp_path, "empty.btf.tar.gz",
                           kernelgen.gz(kernelgen.empty_members_tar(kb.MAX_TAR_MEMBERS + 1)))
    with pytest.raises(ParseError, match=f"more than {kb.MAX_TAR_MEMBERS} members"):
        api.profile(btf=path, cpus=2)


def test_bad_pax_sparse_map_names_the_file(tmp_path):
    """Was a ValueError with no file named (exit 2: 'invalid literal for int()')."""
    path = kernelgen.write(tmp_path, "badmap.btf.tar", kernelgen.bad_sparse_map_tar())
    proc = subprocess.run([sys.executable, "-m", "bpfmem", *maps_with(path)],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": SRC},
                          timeout=120)
    one_line_naming(proc, path, "corrupt tar archive")


def test_long_member_name_runs_no_quadratic_pattern(tmp_path):
    """A 40 KB member name built for the release pattern's backtracking (16-68 s before):
    the pattern runs on the name's last 255 characters (a file name's most)."""
    name = "-1.1" * 10_000 + "!"
    assert kb.release_from_name(name) is None
    assert kb.release_from_name("x" * 40_000 + "/5.4.0-1009-aws.btf") == "5.4.0-1009-aws"
    path = kernelgen.write(tmp_path, "longname.btf.tar", kernelgen.long_name_tar())
    prof = api.profile("6.1", btf=path, cpus=2)
    assert prof.build == "6.1"
    banner = b"Linux version 6.1" * 20_000     # no " (" after any: each attempt fails late
    assert kb.release_from_banner(banner) is None


def test_sparse_kernel_file_is_not_read_whole(tmp_path):
    """A sparse 511 MiB file (under the kernel input limit) was read whole: 1 GiB RSS."""
    path = kernelgen.sparse_file(tmp_path, "sparse.btf", 511 * MiB)
    proc, rss = bpfmem_rss(*maps_with(path))
    one_line_naming(proc, path, "not a kernel BTF")
    assert rss < 200 * MiB, rss


def test_arm64_image_of_btf_magics_is_refused_quickly():
    """An arm64 Image header followed by 64 MiB of BTF magic numbers: each one was looked
    at (83 s); past MAX_BTF_CANDIDATES it is no kernel's Image."""
    header = bytearray(0x40)
    header[0x38:0x3C] = b"ARM\x64"
    image = bytes(header) + b"\x9f\xeb\x01\x00" * (16 * MiB)
    with pytest.raises(ParseError, match=f"more than {kb.MAX_BTF_CANDIDATES} BTF magic"):
        kb.unwrap(image, "Image")
