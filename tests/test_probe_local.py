"""The measuring probe on this host's kernel (bpfmem.host.probe).

The memlock assertions use the ≥ 6.4 formulas (each map type's ``map_mem_usage``, exact on
6.18), with struct sizes read from the running kernel's BTF by the probe itself; the charge
assertions use the memory cgroup's own counter (cgroup v1 ``memory.kmem.usage_in_bytes``
moves in whole pages).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bpfmem.errors import HostError, PermissionDenied
from bpfmem.host import probe as probe_mod
from bpfmem.host.probe import build_probe, format_specs, parse_output, run_local

PAGE = 4096
V1_ROOT = Path("/sys/fs/cgroup/memory")

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (CAP_BPF, CAP_SYS_ADMIN)")
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
needs_v1 = pytest.mark.skipif(not (V1_ROOT / "memory.usage_in_bytes").exists(),
                              reason="needs the cgroup v1 memory controller")

NO_PREALLOC = 1
SIZES = ["bpf_htab", "bucket", "htab_elem", "bpf_array", "lpm_trie_node", "bpf_queue_stack"]
# 6.18 values from kernel-map-memory.md §2: data of one build (6.18.44-fc-v857), never
# compared with this host's kernel
DOC_SIZES_6_18 = {"bpf_htab": 832, "bucket": 16, "htab_elem": 48, "bpf_array": 312,
                  "lpm_trie_node": 24, "bpf_queue_stack": 312}

SPECS = [
    dict(id="hash", type="hash", key_size=4, value_size=8, max_entries=1000, fills=[0, 500, 1000]),
    dict(id="hash_np", type="hash", key_size=4, value_size=8, max_entries=1000,
         map_flags=NO_PREALLOC, fills=[0, 500, 1000]),
    dict(id="array", type="array", key_size=4, value_size=8, max_entries=1000),
    dict(id="pcpu_array", type="percpu_array", key_size=4, value_size=1000, max_entries=1024),
    dict(id="lru", type="lru_hash", key_size=4, value_size=8, max_entries=1000, fills=[1000]),
    dict(id="lpm", type="lpm_trie", key_size=8, value_size=8, max_entries=1000,
         map_flags=NO_PREALLOC, fills=[500, 1000]),
    dict(id="bad_array", type="array", key_size=8, value_size=8, max_entries=1000),
    dict(id="sk_storage", type="sk_storage", key_size=4, value_size=16, max_entries=0,
         map_flags=NO_PREALLOC, fills=[1]),
    dict(id="queue", type="queue", key_size=0, value_size=8, max_entries=100, fills=[100]),
]


def p2(x: int) -> int:
    return 1 << (x - 1).bit_length()


def r8(x: int) -> int:
    return (x + 7) & ~7


def kernel_version(release: str) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", release)
    return (int(m.group(1)), int(m.group(2)))


def our_cgroups() -> list[str]:
    if not V1_ROOT.is_dir():
        return []
    return [p.name for p in V1_ROOT.iterdir() if p.name.startswith(f"bpfmem-measure-{os.getpid()}-")]


# ---- no kernel needed ----

def test_format_specs():
    text = format_specs([
        dict(type="hash", key_size=4, value_size=8, max_entries=10, map_flags="no_prealloc",
             fills=[0, 5]),
        dict(id="x.1", type=2, key_size=4, value_size=4, max_entries=1),
    ], sizes=["bpf_htab", "bpf_array"])
    lines = [l for l in text.splitlines() if not l.startswith("#")]
    assert lines == ["sizes bpf_htab,bpf_array",
                     "s0 1 4 8 10 0x1 0x0 0,5",
                     "x.1 2 4 4 1 0x0 0x0 -"]
    with pytest.raises(ValueError):
        format_specs([dict(id="has space", type=1, key_size=4, value_size=4, max_entries=1)])
    with pytest.raises(ValueError):
        format_specs([dict(type=1, key_size=-1, value_size=4, max_entries=1)])
    with pytest.raises(ValueError):
        format_specs([dict(id="a", type=1, key_size=4, value_size=4, max_entries=1)] * 2)


def test_run_local_needs_root(monkeypatch):
    monkeypatch.setattr(probe_mod.os, "geteuid", lambda: 1000)
    with pytest.raises(PermissionDenied) as exc:
        run_local(SPECS[:1])
    assert "CAP_BPF and CAP_SYS_ADMIN" in str(exc.value)


@needs_gcc
def test_build_probe_cached(tmp_path):
    a = build_probe(tmp_path)
    b = build_probe(tmp_path)
    assert a == b and a.parent == tmp_path and os.access(a, os.X_OK)
    assert a.read_bytes()[:4] == b"\x7fELF"


# ---- this kernel ----

@pytest.fixture(scope="module")
def measured():
    if os.geteuid() != 0:
        pytest.skip("needs root (CAP_BPF, CAP_SYS_ADMIN)")
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    if not (V1_ROOT / "memory.usage_in_bytes").exists():
        pytest.skip("needs the cgroup v1 memory controller")
    header, results = run_local(SPECS, "v1", sizes=SIZES)
    return header, {r["id"]: r for r in results}


@pytest.mark.kernel
def test_header(measured):
    header, results = measured
    assert header["probe"] == "bpfmem"
    assert header["kernel"] == os.uname().release
    assert header["cgroup"] == "v1" and header["counter"] == "memory.kmem.usage_in_bytes"
    assert header["possible_cpus"] >= 1 and header["page_size"] == PAGE
    assert header["done"] and not header["spec_errors"]
    # no transparent huge pages for the probe: /proc/self/status says so (khugepaged would
    # charge a collapsed 2 MiB page of the probe's own to whichever spec's cgroup it is in)
    assert header["thp_enabled"] is False
    assert set(results) == {s["id"] for s in SPECS}
    assert all(v is not None and v > 0 for v in header["sizes"].values()), header["sizes"]
    # the probe (C, its own BTF walk) and bpfmem's BTF parser (Python)
    # agree on the running kernel's struct sizes, whatever its build
    assert header["sizes"] == host_btf_sizes(SIZES)


@pytest.mark.kernel
def test_memlock_matches_6_4_formulas(measured):
    header, r = measured
    if kernel_version(header["kernel"]) < (6, 13):
        pytest.skip("the §3 formulas with lpm_trie_node from BTF hold from 6.13 on")
    s, c = header["sizes"], header["possible_cpus"]
    htab_base = s["bpf_htab"] + s["bucket"] * p2(1000) + 32 * c
    e = s["htab_elem"] + r8(4) + r8(8)
    hash_prealloc = htab_base + e * (1000 + c) + 8 * c
    if (s, c) == (DOC_SIZES_6_18, 2):   # the doc's worked example (that build only)
        assert hash_prealloc == 832 + 16 * 1024 + 32 * 2 + (48 + 8 + 8) * (1000 + 2) + 8 * 2

    assert r["hash"]["ok"] and r["hash"]["memlock"] == hash_prealloc
    assert [f["memlock"] for f in r["hash"]["fills"]] == [hash_prealloc] * 3
    assert [f["inserted"] for f in r["hash"]["fills"]] == [0, 500, 1000]

    assert r["hash_np"]["memlock"] == htab_base
    assert [f["memlock"] for f in r["hash_np"]["fills"]] == [htab_base + (e + 8) * n
                                                            for n in (0, 500, 1000)]
    assert r["array"]["memlock"] == s["bpf_array"] + 1000 * 8
    assert r["pcpu_array"]["memlock"] == s["bpf_array"] + 8 * 1024 + r8(1000) * c * 1024
    assert r["lru"]["memlock"] == htab_base + e * 1000
    assert r["lru"]["fills"][0]["memlock"] == htab_base + e * 1000
    lpm_node = s["lpm_trie_node"] + (8 - 4) + 8
    assert r["lpm"]["memlock"] == 0
    assert [f["memlock"] for f in r["lpm"]["fills"]] == [lpm_node * 500, lpm_node * 1000]
    assert r["queue"]["memlock"] == s["bpf_queue_stack"] + (100 + 1) * 8
    assert r["queue"]["fills"][0]["inserted"] == 100


@pytest.mark.kernel
def test_rejected_and_unfillable(measured):
    _, r = measured
    assert r["bad_array"]["ok"] is False and r["bad_array"]["errno"] == 22
    assert r["sk_storage"]["ok"] is True  # needs the probe's BTF blob
    assert r["sk_storage"]["fill_error"] == "unsupported" and r["sk_storage"]["fills"] == []


@pytest.mark.kernel
def test_charges(measured):
    _, r = measured
    for rid, res in r.items():
        if res["ok"]:
            assert res["charged"] % PAGE == 0, (rid, res["charged"])
            for f in res["fills"]:
                assert f["charged"] % PAGE == 0, (rid, f)
    # §5 rule 1: array 1000x8 -> memlock 8312, kmalloc_large -> memcg 16384 (±1 page)
    assert r["array"]["charged"] > 0
    assert abs(r["array"]["charged"] - 16384) <= PAGE
    # §5 rule 2: percpu values allocated at create are charged to nobody (6.0+)
    assert r["pcpu_array"]["charged"] < r["pcpu_array"]["memlock"] // 10
    # §5 rule 3: no-prealloc elements are charged as they are inserted (about 104 B each)
    fills = r["hash_np"]["fills"]
    per_elem = (fills[2]["charged"] - fills[0]["charged"]) / 1000
    assert 72 <= per_elem <= 160, per_elem
    assert all(f["errno"] == 0 for f in fills) and r["hash_np"]["fill_enomem_retries"] >= 0


@pytest.mark.kernel
@pytest.mark.kernel
@needs_root
@needs_gcc
@needs_v1
def test_probe_cgroups_come_from_the_one_scratch_cgroup(monkeypatch):
    """run_local makes its cgroups with host.cgroup.scratch_cgroup (no second copy)."""
    from bpfmem.host import cgroup as cgroup_mod
    made = []

    def recording(**kw):
        made.append(kw)
        return cgroup_mod.scratch_cgroup(**kw)
    monkeypatch.setattr(probe_mod, "scratch_cgroup", recording)
    header, results = run_local(SPECS[2:3], "v1")
    assert header["cgroup"] == "v1" and results[0]["ok"] and results[0]["charged"] > 0
    names = [kw["name"] for kw in made]
    assert len(names) == 2 and names[1] == names[0] + "-flush"
    assert names[0].startswith(f"bpfmem-measure-{os.getpid()}-")
    assert all(kw["version"] == 1 for kw in made)
    assert our_cgroups() == []


def test_no_cgroup_left(measured):
    assert our_cgroups() == []


@pytest.mark.kernel
@needs_root
@needs_gcc
@needs_v1
def test_cleanup_on_timeout():
    # a fill that takes far longer than the timeout: the probe is killed, cgroups removed
    big = [dict(id="big", type="hash", key_size=8, value_size=8, max_entries=2_000_000,
                map_flags=NO_PREALLOC, fills=[2_000_000])]
    with pytest.raises(HostError, match="did not finish"):
        run_local(big, "v1", timeout=0.3)
    assert our_cgroups() == []


@pytest.mark.kernel
@needs_root
@needs_gcc
@needs_v1
def test_a_late_free_stays_out_of_the_next_spec():
    """A map freed while the next spec is being measured (--overlap-frees closes each map
    only after the next spec's first reading and waits there for its freeing to show): in
    one shared cgroup the whole earlier map comes off the next reading (the arm64 sweep read
    a 4 MB mmapable array 636 KiB short so, an earlier map's vfree running late under
    load); in the probe's per-spec cgroups the reading is the one taken without overlap."""
    big = dict(type="array", key_size=4, value_size=4096, max_entries=1000)
    small = dict(type="array", key_size=4, value_size=8, max_entries=10)
    specs = [dict(id="big", **big), dict(id="small", **small),
             dict(id="big2", **big), dict(id="small2", **small)]
    runs = {}
    for opts in ((), ("--overlap-frees",), ("--one-cgroup", "--overlap-frees")):
        header, results = run_local(specs, "v1", options=opts)
        assert header["spec_cgroups"] is ("--one-cgroup" not in opts)
        runs[opts] = {r["id"]: r["charged"] for r in results}
        if opts == ("--overlap-frees",):
            outside = {r["id"]: r["outside"] for r in results}
        elif "--one-cgroup" in opts:
            assert all(r["outside"] is None for r in results)
    plain, isolated, shared = (runs[()], runs[("--overlap-frees",)],
                               runs[("--one-cgroup", "--overlap-frees")])
    slack = PAGE * (os.cpu_count() + 1)     # a stock page per CPU either way
    assert plain["big"] >= 1000 * PAGE and isolated["big"] >= 1000 * PAGE
    for sid in ("small", "small2"):
        assert shared[sid] < plain[sid] - plain["big"] + slack, (sid, shared, plain)
        assert abs(isolated[sid] - plain[sid]) <= slack, (sid, isolated, plain)
        # ... while the cgroup given, which counts every spec's, saw the earlier map go
        assert outside[sid] < -plain["big"] + slack, (sid, outside)
    assert our_cgroups() == []
    with pytest.raises(ValueError, match="unknown probe option"):
        run_local(specs, "v1", options=("--bogus",))


@pytest.mark.kernel
@needs_root
@needs_gcc
def test_no_cgroup_mode():
    header, results = run_local(SPECS[2:3], "none")
    assert header["cgroup"] == "none" and header["counter"] is None
    assert results[0]["ok"] and results[0]["charged"] is None


@needs_gcc
def test_btf_sizes_mode():
    if not Path("/sys/kernel/btf/vmlinux").exists():
        pytest.skip("no /sys/kernel/btf/vmlinux")
    out = subprocess.run([str(build_probe()), "--btf-sizes", "bpf_htab,no_such_struct_x"],
                         capture_output=True, text=True, check=True).stdout
    header, results = parse_output(out)
    assert header is None and results == []
    import json
    sizes = json.loads(out)["sizes"]
    assert sizes["no_such_struct_x"] is None and sizes["bpf_htab"] > 0
    assert sizes["bpf_htab"] == host_btf_sizes(["bpf_htab"])["bpf_htab"]


def host_btf_sizes(names):
    """The running kernel's struct sizes as bpfmem's own BTF parser reads them."""
    from bpfmem.model.structs import STRUCT_NAMES
    from bpfmem.parse.kernel_btf import facts_from_btf
    data = Path("/sys/kernel/btf/vmlinux").read_bytes()
    sizes = facts_from_btf(data, STRUCT_NAMES).sizes
    return {n: sizes[n] for n in names}


def test_doc_sizes_are_the_6_18_table():
    """kernel-map-memory.md §2's figures are the 6.18 release table (data, one build)."""
    from bpfmem.model.structs import LINUX_6_18
    assert {n: getattr(LINUX_6_18, n) for n in DOC_SIZES_6_18} == DOC_SIZES_6_18
    assert "6.18.44-fc-v857" in LINUX_6_18.name
