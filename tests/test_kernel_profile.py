"""Kernel profiles from a kernel's own BTF (issue: exact on the user's kernel).

* this host: a profile from /sys/kernel/btf/vmlinux given as a file equals the host profile,
  and the kernel's own memlock agrees with it;
* Debian 5.10, 6.1 and 6.12 (their images' BTF, committed under tests/data/btf): the profile
  reproduces the VM sweeps recorded in tests/kernels/ to the byte, with the eras detected
  from the BTF equal to the release tables';
* synthetic BTF: the era markers flip the detected era;
* containers (raw, xz, ELF vmlinux, bzImage, BTFHub archive) and bad input.
"""

from __future__ import annotations

import io
import json
import lzma
import os
import platform
import shutil
import struct
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import is_root
from elfgen import BtfBuilder, Sec, build_elf
from bpfmem import api
from bpfmem.errors import ParseError
from bpfmem.model import kernel as mk
from bpfmem.model.estimate import estimate
from bpfmem.model.limits import rejection
from bpfmem.model.shape import MapShape
from bpfmem.model.structs import EXACT_RELEASES, STRUCT_NAMES
from bpfmem.parse.kernel_btf import facts_from_btf, parse_kernel_btf, release_from_name
from bpfmem.uapi import MapType as T

HERE = Path(__file__).resolve().parent
BTF_DIR = HERE / "data" / "btf"
SWEEPS = HERE / "kernels"
SRC = str(HERE.parent / "src")
HOST_BTF = Path("/sys/kernel/btf/vmlinux")
DEBIAN = sorted(p.name[:-len(".btf.xz")] for p in BTF_DIR.glob("*.btf.xz"))
needs_host_btf = pytest.mark.skipif(not HOST_BTF.exists(), reason="no /sys/kernel/btf/vmlinux")


def raw_btf(release: str) -> bytes:
    return lzma.decompress((BTF_DIR / f"{release}.btf.xz").read_bytes())


def same_kernel(a, b) -> None:
    """Everything the model reads from a profile is equal (not where it was read from)."""
    for field in ("release", "possible_cpus", "page_size", "sizes", "nr_cpus", "memlock_era",
                  "charge_era", "features", "map_types"):
        va, vb = getattr(a, field), getattr(b, field)
        if field == "sizes":
            va, vb = [getattr(va, n) for n in STRUCT_NAMES], [getattr(vb, n) for n in STRUCT_NAMES]
        assert va == vb, field


# ---- this host ----------------------------------------------------------------------------
@needs_host_btf
def test_host_btf_as_a_file_equals_the_host_profile(tmp_path):
    host = api.profile()
    assert host.source == "btf" and host.exact and host.build == platform.release()
    same_kernel(api.profile(btf=HOST_BTF), host)
    copy = tmp_path / "node-vmlinux"           # copied off the node: the release must be named
    shutil.copyfile(HOST_BTF, copy)
    with pytest.raises(ValueError, match="give --kernel"):
        api.profile(btf=copy)
    prof = api.profile(platform.release(), btf=copy, cpus=host.possible_cpus)
    same_kernel(prof, host)
    assert prof.describe()["struct_sizes_source"] == f"BTF file {copy}"
    # a raw BTF says its architecture (struct pt_regs), and x86_64 has 4 KiB pages only
    assert any("x86_64, 4096-byte pages (the file)" in n for n in prof.notes)
    # NR_CPUS from sizeof(struct cpumask) equals the kernel's own kernel_max + 1
    kmax = Path("/sys/devices/system/cpu/kernel_max").read_text()
    facts = facts_from_btf(HOST_BTF.read_bytes(), STRUCT_NAMES)
    assert facts.nr_cpus == int(kmax) + 1


@needs_host_btf
def test_host_eras_are_the_running_kernels():
    """fdinfo's memlock of a NO_PREALLOC hash grows with its entries only in the map_mem_usage
    era: the detected era says which, and the kernel answers the same."""
    if not is_root():
        pytest.skip("creating maps needs root")
    from bpfmem.host import bpfsys
    from bpfmem.host.procfs import fdinfo_field
    prof = api.profile()
    fd = bpfsys.map_create(int(T.HASH), 4, 8, 64, 1)   # BPF_F_NO_PREALLOC
    try:
        with open(f"/proc/self/fdinfo/{fd}", "rb") as f:
            before = int(fdinfo_field(f.read(), b"\nmemlock:"))
        bpfsys.map_update(fd, b"\1\0\0\0", b"\0" * 8)
        with open(f"/proc/self/fdinfo/{fd}", "rb") as f:
            after = int(fdinfo_field(f.read(), b"\nmemlock:"))
    finally:
        bpfsys.close(fd)
    assert (after > before) == (prof.memlock_era == mk.MEMLOCK_USAGE)
    shape = MapShape(int(T.HASH), 4, 8, 64, 1)
    assert estimate(shape, prof).memlock == before and estimate(shape, prof, 1).memlock == after


@pytest.mark.kernel
@needs_host_btf
def test_measure_agrees_with_the_btf_file_profile():
    if not is_root():
        pytest.skip("measure needs root")
    prof_file = api.profile(platform.release(), btf=HOST_BTF)
    result = api.measure_object(api.example_object_path())
    measured, comparisons = result.kernel, result.comparisons
    same_kernel(prof_file, measured)
    checked = 0
    for c in comparisons:
        if c.measured is None or not c.measured.ok or c.model is None:
            continue
        assert estimate(c.model.shape, prof_file).memlock == c.measured.memlock, c.name
        checked += 1
    assert checked >= 5


@pytest.mark.kernel
def test_refusals_the_model_missed_are_the_kernels():
    """fd arrays with BPF_F_RDONLY_PROG/WRONLY_PROG (EINVAL), cpumap above NR_CPUS (E2BIG):
    the model refuses what this kernel refuses, and creates what it creates."""
    if not is_root():
        pytest.skip("creating maps needs root")
    from bpfmem.errors import HostError
    from bpfmem.host import bpfsys
    prof = api.profile()
    inner = bpfsys.map_create(int(T.ARRAY), 4, 4, 1)
    cases = [MapShape(int(t), 4, 4, 4, f)
             for t in (T.PROG_ARRAY, T.PERF_EVENT_ARRAY, T.CGROUP_ARRAY, T.ARRAY_OF_MAPS,
                       T.HASH_OF_MAPS, T.ARRAY)
             for f in (0, 1 << 7, 1 << 8)]
    if prof.nr_cpus is not None:
        cases += [MapShape(int(T.CPUMAP), 4, 4, prof.nr_cpus + d, 0) for d in (0, 1)]
    try:
        for sh in cases:
            try:
                fd = bpfsys.map_create(sh.type, sh.key_size, sh.value_size, sh.max_entries,
                                       sh.map_flags, inner_map_fd=inner if sh.type in (
                                           T.ARRAY_OF_MAPS, T.HASH_OF_MAPS) else 0)
                bpfsys.close(fd)
                kernel = None
            except HostError as e:
                kernel = str(e)
            model = rejection(sh, prof)
            assert (kernel is None) == (model is None), (sh, kernel, model)
            if model is not None:
                errno = model.split(":")[0]
                want = {"EINVAL": "Invalid argument", "E2BIG": "Argument list too long"}[errno]
                assert want in kernel, (sh, kernel, model)
    finally:
        bpfsys.close(inner)


# ---- Debian's kernels: the recorded VM sweeps ---------------------------------------------
@pytest.mark.parametrize("release", DEBIAN)
def test_btf_reproduces_the_vm_sweep(release):
    """--kernel-btf on the kernel's BTF gives what that kernel answered under qemu: memlock
    to the byte, the same refusals, the charge within the model's tolerance as recorded."""
    sweep = json.loads((SWEEPS / f"{release}.json").read_text())
    rec = sweep["profile"]
    prof = api.profile(btf=BTF_DIR / f"{release}.btf.xz", cpus=rec["possible_cpus"])
    assert prof.build == release and prof.exact and prof.source == "btf"
    rel = mk.parse_release(release)
    # eras read from the BTF are those the tables give the release, and the recorded run's
    assert (prof.memlock_era, prof.charge_era) == (rec["memlock_era"], rec["charge_era"])
    assert (prof.memlock_era, prof.charge_era) == (mk._era(mk.MEMLOCK_ERAS, rel[:2]),
                                                   mk._era(mk.CHARGE_ERAS, rel[:2]))
    assert prof.features == mk.features_for_release(rel)
    assert not [n for n in prof.notes if "detected from the BTF" in n]
    readings = equal = agree = within = 0
    for row in sweep["specs"]:
        sh = MapShape(int(T.from_name(row["type"])), row["key_size"], row["value_size"],
                      row["max_entries"], row["map_flags"], row["map_extra"])
        refused = rejection(sh, prof)
        agree += (refused is None) == row["kernel_ok"]
        assert (refused is None) == row["kernel_ok"], (row, refused)
        for r in row.get("readings", []):
            fp = estimate(sh, prof, r["entries"])
            readings += 1
            assert fp.memlock == r["memlock"], (row["type"], sh, r)
            equal += 1
            ch = r["charged"]
            if ch is not None and fp.charged is not None:
                hi = fp.charged + fp.charged_tolerance + (fp.charged_slack if r["entries"] else 0)
                within += fp.charged - fp.charged_tolerance <= ch <= hi
    c = sweep["counts"]
    assert readings == c["memlock_readings"] == equal
    assert agree == c["specs"]
    assert within == c["charge_within"] == c["charge_readings"]


@pytest.mark.parametrize("release", DEBIAN)
def test_debian_tables_are_their_btf(release):
    """Each release table is the BTF of the build it names (data tested as data)."""
    facts = facts_from_btf(raw_btf(release), STRUCT_NAMES)
    table = EXACT_RELEASES[mk.parse_release(release)[:2]]
    assert release in table.name
    for name, size in facts.sizes.items():
        assert getattr(table, name) == size, name
    assert table.nr_cpus == facts.nr_cpus
    prof = api.profile(mk.parse_release(release)[:2] and ".".join(release.split(".")[:2]),
                       cpus=2)
    assert prof.source == "table" and not prof.exact
    assert any(f"table of Debian {release}" in n for n in prof.notes)


def test_the_6_18_table_reproduces_its_own_builds_sweep():
    """The 6.18 table is 6.18.44-fc-v857's (data): that build's recorded sweep (libbpf 1.1
    creating every shape) is reproduced by it, NR_CPUS (cpumap's E2BIG) included."""
    sweep = json.loads((SWEEPS / "6.18.44-fc-v857.json").read_text())
    prof = api.profile("6.18", cpus=sweep["profile"]["possible_cpus"])
    equal = agree = 0
    for row in sweep["specs"]:
        sh = MapShape(int(T.from_name(row["type"])), row["key_size"], row["value_size"],
                      row["max_entries"], row["map_flags"], row["map_extra"])
        assert (rejection(sh, prof) is None) == row["kernel_ok"], row
        agree += 1
        if row["kernel_ok"]:
            assert estimate(sh, prof).memlock == row["memlock"], row
            equal += 1
    assert (equal, agree) == (sweep["counts"]["memlock_equal"], sweep["counts"]["specs"])


def test_map_types_come_from_the_kernels_enum():
    p510 = api.profile(btf=BTF_DIR / "5.10.0-46-cloud-amd64.btf.xz", cpus=2)
    p61 = api.profile(btf=BTF_DIR / "6.1.0-57-cloud-amd64.btf.xz", cpus=2)
    bloom = MapShape(int(T.BLOOM_FILTER), 0, 8, 100, 0, 3)
    arena = MapShape(int(T.ARENA), 0, 0, 10, 1 << 10)
    assert "no map type bloom_filter" in rejection(bloom, p510)
    assert rejection(bloom, p61) is None
    assert "no map type arena" in rejection(arena, p61)
    assert p510.nr_cpus == p61.nr_cpus == 8192   # Debian's NR_CPUS, from struct cpumask


# ---- synthetic BTF: the era markers ---------------------------------------------------------
def synthetic_btf(map_members=("objcg",), ops_members=("map_mem_usage",), htab_ma=True,
                  enum=("HASH", "ARRAY")) -> bytes:
    b = BtfBuilder()
    u32 = b.int_("unsigned int", 4)
    base = ["map_type", "key_size", "value_size", "max_entries", "map_flags"]
    members = [(n, u32, 32 * i) for i, n in enumerate(base + list(map_members))]
    b.struct("bpf_map", 4 * len(members), members)
    b.struct("bpf_map_ops", 8 * max(len(ops_members), 1),
             [(n, u32, 64 * i) for i, n in enumerate(ops_members or ("map_alloc",))])
    b.struct("bpf_htab", 896, [("map", u32, 0)] + ([("ma", u32, 32)] if htab_ma else []))
    b.struct("cpumask", 32, [("bits", u32, 0)])
    e = b""
    for name in enum:
        e += struct.pack("<Ii", b.s(f"BPF_MAP_TYPE_{name}"), int(T[name]))
    b._add("bpf_map_type", 6, len(enum), 4, e)
    return b.build()


@pytest.mark.parametrize("map_members,ops,memlock,charge", [
    (("objcg",), ("map_mem_usage",), "mem_usage", "objcg"),
    (("objcg",), (), "footprint", "objcg"),
    (("memcg",), (), "footprint", "creator"),
    (("memory",), (), "rlimit", "none"),
    ((), (), "footprint", "none"),
])
def test_era_markers_flip_the_detected_era(map_members, ops, memlock, charge):
    facts = facts_from_btf(synthetic_btf(map_members, ops), STRUCT_NAMES)
    prof = mk.profile_from_facts(facts, release="6.18", possible_cpus=2)
    assert (prof.memlock_era, prof.charge_era) == (memlock, charge)
    # a release whose mainline era differs is named in the notes
    disagree = [n for n in prof.notes if "detected from the BTF" in n]
    assert bool(disagree) == ((memlock, charge) != ("mem_usage", "objcg"))


def test_a_backport_is_modelled_as_the_btf_says():
    """A distro "5.14" with the 6.4 memlock rules and bpf_mem_alloc hashes (RHEL-like):
    eras and allocator come from the BTF, not from the number."""
    facts = facts_from_btf(synthetic_btf(("objcg",), ("map_mem_usage",), True), STRUCT_NAMES)
    prof = mk.profile_from_facts(facts, release="5.14.0-427.el9", possible_cpus=4)
    assert prof.memlock_era == "mem_usage" and prof.charge_era == "objcg"
    assert prof.has("htab_mem_alloc") and not prof.has("lpm_mem_alloc")
    table = mk.KernelProfile.for_release("5.14", 4)
    sh = MapShape(int(T.HASH), 4, 8, 1000, 1)   # NO_PREALLOC: its memlock follows entries
    assert estimate(sh, prof, 500).memlock > estimate(sh, prof, 0).memlock
    assert estimate(sh, table, 500).memlock == estimate(sh, table, 0).memlock
    assert len([n for n in prof.notes if "a backport?" in n]) == 2
    assert rejection(MapShape(int(T.LRU_HASH), 4, 8, 10), prof).startswith("EINVAL: this "
                                                                            "kernel has no")


# ---- containers ------------------------------------------------------------------------------
def vmlinux_elf(btf: bytes, banner: bytes) -> bytes:
    return build_elf([Sec(".rodata", 1, 2, banner), Sec(".BTF", 1, 0, btf)], machine=62,
                     e_type=2)


def bzimage(payload: bytes, version: bytes) -> bytes:
    """An x86 boot image: setup sectors with the 'HdrS' header, a version string, and the
    compressed kernel at payload_offset in the protected-mode part."""
    setup_sects = 3
    setup = bytearray((setup_sects + 1) * 512)
    setup[0x1F1] = setup_sects
    setup[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", setup, 0x206, 0x020F)
    struct.pack_into("<H", setup, 0x20E, 0x400 - 0x200)        # kernel_version at 0x400
    setup[0x400:0x400 + len(version) + 1] = version + b"\0"
    struct.pack_into("<II", setup, 0x248, 64, len(payload))
    return bytes(setup) + b"\0" * 64 + payload + struct.pack("<I", 0) + b"\0" * 100


@pytest.mark.parametrize("wrap", ["raw", "xz", "elf", "bzimage-gz", "bzimage-xz", "btfhub"])
def test_containers_give_the_same_profile(wrap, tmp_path):
    release = "6.1.0-57-cloud-amd64"
    btf = raw_btf(release)
    banner = b"Linux version 6.1.0-57-cloud-amd64 (debian-kernel@lists.debian.org) #1 SMP\0"
    name = "vmlinux-btf"
    if wrap == "raw":
        data, name = btf, f"{release}.btf"
    elif wrap == "xz":
        data, name = lzma.compress(btf, preset=0), f"{release}.btf.xz"
    elif wrap == "elf":
        data = vmlinux_elf(btf, banner)
    elif wrap.startswith("bzimage"):
        import gzip
        elf = vmlinux_elf(btf, banner)
        payload = gzip.compress(elf, 1) if wrap.endswith("gz") else lzma.compress(elf, preset=0)
        data = bzimage(payload, release.encode() + b" (debian-kernel@lists.debian.org) #1")
    else:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:xz") as tar:
            info = tarfile.TarInfo(f"./{release}.btf")
            info.size = len(btf)
            tar.addfile(info, io.BytesIO(btf))
        data, name = buf.getvalue(), "debian-6.1.btf.tar.xz"
    path = tmp_path / name
    path.write_bytes(data)
    prof = api.profile(btf=path, cpus=2)
    assert prof.build == release
    same_kernel(prof, api.profile(btf=BTF_DIR / f"{release}.btf.xz", cpus=2))


def test_release_from_file_names():
    assert release_from_name("5.4.0-1009-aws.btf.tar.xz") == "5.4.0-1009-aws"
    assert release_from_name("btfhub/centos/8/x86_64/4.18.0-305.el8.x86_64.btf.tar.xz") == \
        "4.18.0-305.el8.x86_64"
    assert release_from_name("/boot/vmlinuz-6.12.117+deb12-cloud-amd64") == \
        "6.12.117+deb12-cloud-amd64"
    assert release_from_name("vmlinux") is None


@pytest.mark.vm
def test_debian_image_gives_its_committed_btf():
    """The real vmlinuz (LZ4 payload on 6.1) unpacks to the BTF committed for it."""
    from bpfmem.errors import HostError
    from bpfmem.host.vm import fetch_kernel
    try:
        image = fetch_kernel("6.1")
    except HostError as e:
        pytest.skip(f"cannot fetch Debian's 6.1 kernel: {e}")
    facts = parse_kernel_btf(image.read_bytes(), name=image.name)
    committed = BTF_DIR / f"{facts.release}.btf.xz"
    if not committed.exists():
        pytest.skip(f"{facts.release} is newer than the committed BTF")
    from bpfmem.parse.kernel_btf import unwrap
    assert unwrap(image.read_bytes(), image.name)[0] == raw_btf(facts.release)


# ---- bad input --------------------------------------------------------------------------------
def _tar_without_btf() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tar:
        info = tarfile.TarInfo("README")
        info.size = 2000
        tar.addfile(info, io.BytesIO(b"x" * 2000))
    return buf.getvalue()


BAD = {
    "not-btf.txt": (b"this is not a kernel\n" * 50, "not a kernel BTF"),
    "truncated.btf": (None, "BTF"),
    "no-btf.btf.tar.xz": (None, "archive holds no BTF"),
    "object.btf": (None, "lacks map_type"),
    "module.btf": (None, "without struct bpf_map"),
    "empty.btf": (b"", "empty file"),
    "corrupt.btf.xz": (b"\xfd7zXZ\x00" + b"\x01" * 300, "corrupt xz data"),
}


def _bad_bytes(name: str) -> bytes:
    data = BAD[name][0]
    if data is not None:
        return data
    if name == "truncated.btf":
        return raw_btf("6.1.0-57-cloud-amd64")[:5000]
    if name == "no-btf.btf.tar.xz":
        return _tar_without_btf()
    b = BtfBuilder()
    u32 = b.int_("unsigned int", 4)
    if name == "object.btf":          # a bpf_map without the kernel's members
        b.struct("bpf_map", 8, [("type", u32, 0), ("size", u32, 32)])
    else:
        b.struct("sk_buff", 8, [("len", u32, 0)])
    return b.build()


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_btf_is_one_clear_line(name, tmp_path):
    path = tmp_path / name
    path.write_bytes(_bad_bytes(name))
    with pytest.raises(ParseError, match=BAD[name][1]):
        api.profile("6.1", btf=path)
    proc = subprocess.run([sys.executable, "-m", "bpfmem", "maps", str(api.example_object_path()),
                           "--kernel-btf", str(path)],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": SRC})
    assert proc.returncode in (1, 2), proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "Traceback" not in proc.stderr, \
        proc.stderr


def test_not_a_regular_file_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        api.profile("6.1", btf=fifo)
    with pytest.raises(OSError):
        api.profile("6.1", btf=tmp_path)


def test_release_and_file_must_agree():
    with pytest.raises(ValueError, match="not of --kernel 6.12"):
        api.profile("6.12", btf=BTF_DIR / "6.1.0-57-cloud-amd64.btf.xz")
    with pytest.raises(ValueError, match="not a kernel release"):
        api.profile("abc")
    with pytest.raises(ValueError, match="can model"):
        api.profile("0.0")


# ---- the CLI and the fleet ---------------------------------------------------------------------
def run(*args, cwd=None):
    proc = subprocess.run([sys.executable, "-m", "bpfmem", *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env={**os.environ, "PYTHONPATH": SRC})
    return proc.returncode, proc.stdout, proc.stderr


def test_maps_json_says_where_the_sizes_come_from():
    f = BTF_DIR / "6.12.117+deb12-cloud-amd64.btf.xz"
    rc, out, err = run("maps", "--kernel-btf", f, "--cpus", "4", "--format", "json")
    assert rc == 0, err
    k = json.loads(out)["kernel"]
    assert k["build"] == "6.12.117+deb12-cloud-amd64" and k["exact"] is True
    assert k["struct_sizes_source"] == f"BTF file {f}" and k["possible_cpus"] == 4
    rc, out, err = run("maps", "--kernel", "6.12", "--cpus", "4", "--format", "json")
    k = json.loads(out)["kernel"]
    assert k["exact"] is False and "Debian 6.12.117+deb12-cloud-amd64" in k["struct_sizes_source"]
    assert any("other builds" in n for n in k["notes"])
    rc, out, err = run("maps", "--kernel", "6.12", "--cpus", "4")
    assert "other builds of 6.12 may differ" in out.replace("\n", " ")


def test_kernel_newer_than_modelled_is_named():
    rc, out, err = run("maps", "--kernel", "7.3", "--cpus", "2", "--format", "json")
    assert rc == 0
    assert "newer than the newest release modelled" in json.loads(out)["kernel"]["notes"][0]


def test_check_runs_the_fleet_from_bpfmem_toml(tmp_path):
    """[[kernels]] entries (BTF files, a release) are the gate's matrix."""
    (tmp_path / "btf").mkdir()
    for r in ("5.10.0-46-cloud-amd64", "6.12.117+deb12-cloud-amd64"):
        shutil.copyfile(BTF_DIR / f"{r}.btf.xz", tmp_path / "btf" / f"{r}.btf.xz")
    (tmp_path / "bpfmem.toml").write_text(
        'limit = "1Gi"\ncpus = [2]\n'
        '[[kernels]]\nname = "old"\nbtf = "btf/5.10.0-46-cloud-amd64.btf.xz"\n'
        '[[kernels]]\nname = "new"\nbtf = "btf/6.12.117+deb12-cloud-amd64.btf.xz"\n'
        'cpus = [2, 64]\n'
        '[[kernels]]\nrelease = "6.1"\n')
    rc, out, err = run("check", api.example_object_path(), "--format", "json", cwd=tmp_path)
    assert rc == 0, err
    kernels = [(r["kernel"].get("build", r["kernel"]["version"]), r["kernel"]["possible_cpus"])
               for r in json.loads(out)["results"]]
    assert kernels == [("5.10.0-46-cloud-amd64", 2), ("6.12.117+deb12-cloud-amd64", 2),
                       ("6.12.117+deb12-cloud-amd64", 64), ("6.1.0", 2)]
    (tmp_path / "bpfmem.toml").write_text('limit = "1Gi"\n[[kernels]]\nname = "x"\n')
    rc, out, err = run("check", api.example_object_path(), cwd=tmp_path)
    assert rc in (1, 2) and "needs btf" in err and len(err.strip().splitlines()) == 1


def test_check_takes_several_kernel_btf_files():
    files = [BTF_DIR / f"{r}.btf.xz" for r in DEBIAN]
    args = [a for f in files for a in ("--kernel-btf", f)]
    rc, out, err = run("check", api.example_object_path(), "--limit", "1Gi", "--cpus", "2",
                       *args, "--format", "json")
    assert rc == 0, err
    assert [r["kernel"]["build"] for r in json.loads(out)["results"]] == DEBIAN


def test_maps_diff_advise_run_every_configured_kernel(tmp_path):
    """bpfmem.toml's [[kernels]]: maps, diff and advise show each kernel in turn (JSON: one
    matrix document); --kernel NAME picks one entry."""
    shutil.copyfile(BTF_DIR / "6.1.0-57-cloud-amd64.btf.xz", tmp_path / "n61.btf.xz")
    (tmp_path / "bpfmem.toml").write_text(
        '[[kernels]]\nname = "n61"\nbtf = "n61.btf.xz"\nrelease = "6.1.0-57-cloud-amd64"\n'
        'cpus = [4]\n'
        '[[kernels]]\nname = "t612"\nrelease = "6.12"\ncpus = [8]\n')
    ex = api.example_object_path()
    for argv in (["maps", ex], ["diff", ex, ex], ["advise", ex]):
        rc, out, err = run(*argv, "--format", "json", cwd=tmp_path)
        assert rc == 0, err
        doc = json.loads(out)
        assert doc["schema"] == "bpfmem/matrix/v1"
        ks = [d["kernel"] for d in doc["documents"]]
        assert [(k.get("build"), k["version"], k["possible_cpus"], k["exact"]) for k in ks] == \
            [("6.1.0-57-cloud-amd64", "6.1.0", 4, True), (None, "6.12.0", 8, False)], argv
        rc, out, err = run(*argv, "--format", "table", cwd=tmp_path)
        assert rc == 0 and "6.1.0-57-cloud-amd64" in out and "6.12" in out, err
    rc, out, err = run("maps", ex, "--kernel", "n61", "--format", "json", cwd=tmp_path)
    k = json.loads(out)["kernel"]
    assert k["build"] == "6.1.0-57-cloud-amd64" and k["possible_cpus"] == 4
    rc, out, err = run("diff", ex, ex, "--format", "html", "-o", tmp_path / "x.html",
                       cwd=tmp_path)
    assert rc == 2 and "--kernel NAME" in err
    (tmp_path / "bpfmem.toml").write_text('[[kernels]]\nname = "n61"\nbtf = "n61.btf.xz"\n')
    rc, out, err = run("maps", ex, cwd=tmp_path)
    assert rc == 2 and '[[kernels]] n61: ' in err and 'add release = "VERSION"' in err


@needs_host_btf
def test_a_cache_another_user_could_write_is_not_used(tmp_path, monkeypatch):
    """Planted facts under a cache directory not ours (or world-writable) are ignored: the
    host profile is read from the kernel's BTF again."""
    from bpfmem.host import cache
    from bpfmem.host.profile import host_profile
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    want = host_profile()                        # fills the cache
    (entry,) = (tmp_path / "bpfmem" / "btf-facts").glob("*.json")
    planted = json.loads(entry.read_text())
    planted["struct_sizes"] = [[k, v + 64] for k, v in planted["struct_sizes"]]
    entry.write_text(json.dumps(planted))
    assert host_profile().sizes.bpf_htab == want.sizes.bpf_htab + 64   # our own cache: used
    os.chmod(entry.parent, 0o777)                                      # anyone could write
    same_kernel(host_profile(), want)
    os.chmod(entry.parent, 0o700)
    if is_root():
        os.chown(entry.parent, 65534, 65534)                           # not ours
        same_kernel(host_profile(), want)
    assert cache.load("btf-facts", "no such key") is None
