"""Programs before load (`maps`): the instruction count a loader hands the kernel, and the
memlock it implies as a lower bound, against libbpf and the kernel on this machine, and the
struct size table against each release's BTF."""

from __future__ import annotations

import json
import lzma
import os
import subprocess

import pytest

import libbpf_harness
from conftest import CILIUM_EXAMPLES, FIXTURES, HERE, is_root
from bpfmem.analysis.progs import BPF_PROG_HEADER, bpf_prog_header, memlock_lower_bound
from bpfmem.api import load_object
from bpfmem.model.kernel import parse_release
from bpfmem.parse.kernel_btf import parse_kernel_btf

BTF_DIR = HERE / "data" / "btf"


@pytest.mark.parametrize("path", sorted(BTF_DIR.glob("*.btf.xz")), ids=lambda p: p.name)
def test_header_table_is_each_release_btf(path):
    facts = parse_kernel_btf(lzma.decompress(path.read_bytes()), struct_names=("bpf_prog",))
    release = parse_release(path.name.split(".btf")[0])
    assert bpf_prog_header(release) == facts.sizes["bpf_prog"]
    assert release[:2] in dict(BPF_PROG_HEADER)


@pytest.mark.skipif(not os.path.exists("/sys/kernel/btf/vmlinux"), reason="no kernel BTF")
def test_header_table_is_this_kernel_btf():
    with open("/sys/kernel/btf/vmlinux", "rb") as f:
        facts = parse_kernel_btf(f.read(), struct_names=("bpf_prog",))
    assert bpf_prog_header(parse_release(os.uname().release)) == facts.sizes["bpf_prog"]


def test_lower_bound_pages():
    assert memlock_lower_bound(1, 4096, 96) == 4096
    assert memlock_lower_bound(500, 4096, 96) == 4096      # 96 + 4000 <= 4096
    assert memlock_lower_bound(501, 4096, 96) == 8192


OBJECTS = [FIXTURES / n for n in ("callbacks.o", "prog_sections.o", "global_data.o",
                                  "map_in_map.o", "prog_array.o", "static_globals.o")] + \
    [CILIUM_EXAMPLES / n for n in ("variables_bpfel.o", "xdp_bpfel.o", "tcx_bpfel.o",
                                   "counter_bpfel.o", "kprobe_bpfel.o", "bpf2go_test_bpfel.o",
                                   "xdp_live_frame_bpfel.o", "cgroup_skb_bpfel.o")]


@pytest.mark.kernel
@pytest.mark.libbpf
@pytest.mark.skipif(not is_root(), reason="loading programs needs root")
def test_relocated_insns_equal_libbpf_and_bound_the_kernel_memlock():
    """For every program libbpf loads: bpfmem's count (own + subprograms once each) equals
    bpf_program__insn_cnt after libbpf's relocations, and the lower bound on this kernel
    never exceeds the fdinfo memlock the kernel reports."""
    from bpfmem.host import bpfsys, progs
    binary = libbpf_harness.ensure_built()
    if binary is None:
        pytest.skip("the libbpf harness cannot be built here")
    header = bpf_prog_header(parse_release(os.uname().release))
    page = os.sysconf("SC_PAGE_SIZE")
    checked = 0
    for obj in OBJECTS:
        spec = {p.name: p for p in load_object(str(obj)).programs}
        p = subprocess.Popen([str(binary), "hold", str(obj)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            recs = []
            for line in p.stdout:
                rec = json.loads(line)
                if rec["kind"] == "ready":
                    break
                recs.append(rec)
            for rec in recs:
                s = spec[rec["name"]]
                assert s.insns + s.subprogram_insns == rec["insn_cnt"], (obj.name, rec)
                fd = bpfsys.prog_fd_by_id(rec["id"])
                try:
                    memlock = progs.prog_fdinfo(fd)
                finally:
                    os.close(fd)
                assert memlock_lower_bound(rec["insn_cnt"], page, header) <= memlock
                checked += 1
        finally:
            p.kill()
            p.wait()
    assert checked >= 20


def test_check_programs_adds_the_lower_bound():
    """`check --programs`: the gate's total is the maps' charge plus each program's memlock
    lower bound (what `maps` reports), said to be one; a limit between the two fails only
    with it; on 5.10 (maps and programs charged to no memory cgroup) nothing is added."""
    from bpfmem import api
    from bpfmem.model.kernel import KernelProfile
    from bpfmem.report.documents import document
    obj = str(FIXTURES / "callbacks.o")
    prof = KernelProfile.for_release("6.18", 2)
    plain = api.check_objects([obj], limit=1 << 30, profiles=[prof]).results[0]
    with_p = api.check_gates([obj], api.gate_settings(limit=1 << 30, programs=True),
                             profiles=[prof]).maps.results[0]
    spec = load_object(obj)
    want = sum(memlock_lower_bound(p.insns + p.subprogram_insns, 4096, 96)
               for p in spec.programs)
    assert with_p.programs == want == 3 * 4096
    assert with_p.total == plain.total + want
    doc = document(api.check_gates([obj], api.gate_settings(limit=1 << 30, programs=True),
                                   profiles=[prof]))
    text = json.dumps(doc)
    assert '"programs_at_least": 12288' in text and '"programs_lower_bound": true' in text
    between = plain.total + want // 2
    assert api.check_gates([obj], api.gate_settings(limit=between), profiles=[prof]).passed
    assert not api.check_gates([obj], api.gate_settings(limit=between, programs=True),
                               profiles=[prof]).passed
    old = api.check_gates([obj], api.gate_settings(limit=1 << 30, programs=True),
                          profiles=[KernelProfile.for_release("5.10", 2)]).maps.results[0]
    assert old.programs is None


def test_diff_programs():
    """`diff --programs`: programs matched by object and name, each side's relocated count
    and bound as `maps` gives them; the same object on both sides changes nothing."""
    from bpfmem import api
    from bpfmem.model.kernel import KernelProfile
    from bpfmem.report.documents import document
    prof = KernelProfile.for_release("6.18", 2)
    a, b = str(FIXTURES / "callbacks.o"), str(FIXTURES / "prog_sections.o")
    same = api.diff_objects([a], [a], profile=prof, programs=True)
    assert {c.status for c in same.programs} == {"unchanged"}
    assert all(c.delta_at_least == 0 for c in same.programs)
    moved = api.diff_objects([a], [b], profile=prof, programs=True)
    old = {p.name: p for p in load_object(a).programs}
    new = {p.name: p for p in load_object(b).programs}
    by = {c.name: c for c in moved.programs}
    assert {n for n, c in by.items() if c.status == "removed"} == set(old)
    assert {n for n, c in by.items() if c.status == "added"} == set(new)
    for n, p in new.items():
        assert by[n].new_insns == p.insns + p.subprogram_insns
        assert by[n].new_at_least == memlock_lower_bound(by[n].new_insns, 4096, 96)
    doc = document(moved)["programs"]
    assert doc["lower_bound"] is True and len(doc["programs"]) == len(old) + len(new)
    assert api.diff_objects([a], [b], profile=prof).programs is None
