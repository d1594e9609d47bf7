"""`bpfmem measure OBJ --programs` on this kernel: programs loaded for real by the system
libbpf in a scratch memory cgroup (host/progmeasure.py, progprobe.c).

Checked against the kernel itself: each loaded program's memlock is exactly the pages of
bpf_prog_size() of what the kernel kept (sizeof(struct bpf_prog) from this kernel's BTF +
xlated_prog_len, include/linux/filter.h), the relocated instruction count's bound
(analysis.progs.memlock_lower_bound) never exceeds it, the cgroup is charged at least the
program's memlock, refused programs carry the kernel's reason, and nothing is left behind.
The verifier test measures whether the verifier's working memory is charged to the loader's
cgroup here (it is on 6.18: ~47 bytes per instruction of a straight-line program, given back
when the load ends).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from conftest import CILIUM_EXAMPLES, FIXTURES, is_root
from bpfmem.analysis.progs import memlock_lower_bound
from bpfmem.host import bpfsys

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.libbpf,
    pytest.mark.skipif(not is_root(), reason="loading programs needs root"),
    pytest.mark.skipif(not os.path.exists("/usr/include/bpf/libbpf.h"),
                       reason="needs libbpf-dev"),
]

PAGE = os.sysconf("SC_PAGE_SIZE")


def sizeof_bpf_prog() -> int:
    from bpfmem.parse.kernel_btf import parse_kernel_btf
    with open("/sys/kernel/btf/vmlinux", "rb") as f:
        facts = parse_kernel_btf(f.read(), struct_names=("bpf_prog",))
    return facts.sizes["bpf_prog"]


def leftovers() -> list[str]:
    mine = f"bpfmem-measure-{os.getpid()}-"     # (other runs on this host have their own)
    return [n for n in os.listdir("/sys/fs/cgroup/memory") if n.startswith(mine)]


@pytest.mark.parametrize("obj", [FIXTURES / "callbacks.o", FIXTURES / "prog_sections.o",
                                 CILIUM_EXAMPLES / "xdp_live_frame_bpfel.o",
                                 CILIUM_EXAMPLES / "tcx_bpfel.o"],
                         ids=lambda p: p.name)
def test_measured_programs_against_the_kernel(obj):
    from bpfmem import api
    before = set(bpfsys.prog_ids())
    r = api.measure_object(str(obj), programs=True)
    pm = r.programs
    hdr = sizeof_bpf_prog()
    assert pm.programs and pm.maps.ok
    for p in pm.loaded:
        want = -(-(hdr + p.xlated_prog_len) // PAGE) * PAGE     # bpf_prog_size, in pages
        assert p.memlock == want, p
        assert memlock_lower_bound(p.insn_cnt, PAGE, hdr) <= p.memlock
        assert p.jited_prog_len > 0            # the JIT is on here (bpf_jit_enable 1)
        assert p.charged is not None and p.charged >= p.memlock
        if pm.peak_counter:                    # v1 watermarks (none on v2: null)
            assert p.peak is not None and p.peak >= p.end
    for p in pm.refused:
        assert p.errno and p.reason, p        # listed with the kernel's reason, never 0
        assert p.memlock is None
    assert pm.memlock == sum(p.memlock for p in pm.loaded)
    if pm.whole.ok:
        # the whole object's charge is its maps' plus each program's, within a page per
        # program (measured: exact for xdp_live_frame, one page over for callbacks.o)
        rest = pm.whole.charged - pm.maps.charged - pm.charged
        assert abs(rest) <= PAGE * len(pm.loaded), (pm.whole, pm.maps, pm.charged)
    # the document carries the same
    from bpfmem.report.documents import document
    doc = document(r)["programs"]
    assert doc["summary"]["loaded"] == len(pm.loaded)
    assert doc["summary"]["refused"] == len(pm.refused)
    # nothing left: no scratch cgroup, no program of the probe's
    assert not leftovers()
    names = {p.name[:15] for p in pm.programs}
    for i in set(bpfsys.prog_ids()) - before:      # programs loaded since, by anyone
        try:
            fd = bpfsys.prog_fd_by_id(i)
        except Exception:
            continue
        try:
            info = bpfsys.prog_info(fd)
        finally:
            os.close(fd)
        assert not (info.name in names and info.load_time and info.created_by_uid == 0
                    and _is_ours(info)), info


def _is_ours(info) -> bool:
    """Whether a program is still held by a process of this test run (the probe is gone)."""
    from bpfmem.host.progs import scan_bpf_fds
    return any(f.prog_id == info.id for f in scan_bpf_fds())


def test_prog_sections_refusals_are_named():
    """prog_sections.o's fentry program is refused here (EPERM: the kernel is locked down);
    it is listed as refused with errno and reason, not as a program of 0 bytes."""
    from bpfmem import api
    pm = api.measure_object(str(FIXTURES / "prog_sections.o"), programs=True).programs
    refused = {p.name: p for p in pm.refused}
    loaded = {p.name for p in pm.loaded}
    assert "sec_xdp" in loaded
    assert set(refused) | loaded == {p.name for p in pm.programs}
    for p in refused.values():
        assert p.errno > 0


VERIFIER_CHILD = textwrap.dedent("""
    import os, sys, time
    from bpfmem.host import bpfsys
    from bpfmem.parse.insn import alu64, exit_insn
    cg, n = sys.argv[1], int(sys.argv[2])
    def rd(x):
        with open(os.path.join(cg, x)) as f:
            return int(f.read())
    with open(os.path.join(cg, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))
    os.sched_setaffinity(0, {0})
    insns = alu64("mov", 0, imm=0) + alu64("add", 0, imm=1) * n + exit_insn()
    time.sleep(0.2)
    before = rd("memory.kmem.usage_in_bytes")
    with open(os.path.join(cg, "memory.kmem.max_usage_in_bytes"), "w") as f:
        f.write("0")
    fd = bpfsys.prog_load(1, insns, name="straight")
    time.sleep(0.2)
    end, peak = rd("memory.kmem.usage_in_bytes"), rd("memory.kmem.max_usage_in_bytes")
    print(end - before, peak - before)
""")


@pytest.mark.skipif(not os.path.exists("/sys/fs/cgroup/memory/memory.kmem.max_usage_in_bytes"),
                    reason="needs cgroup v1 kmem counters")
def test_verifier_memory_is_charged_to_the_loader():
    """A straight-line socket filter of n instructions loaded by a process alone in a scratch
    cgroup: the kernel-memory peak of the load above what stays charged at its end grows
    with n (the verifier's and JIT's per-instruction working memory), so the loader's
    cgroup pays it during the load."""
    from bpfmem.host.cgroup import scratch_cgroup
    got = {}
    for n in (10_000, 100_000):
        with scratch_cgroup(version=1) as cg:
            out = subprocess.run([sys.executable, "-c", VERIFIER_CHILD, cg.fs_path, str(n)],
                                 capture_output=True, text=True, timeout=120,
                                 env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
            assert out.returncode == 0, out.stderr
            end, peak = map(int, out.stdout.split())
        got[n] = (end, peak - end)
    (end1, t1), (end2, t2) = got[10_000], got[100_000]
    per_insn = (t2 - t1) / 90_000
    print(f"transient: {t1} B at 10k insns, {t2} B at 100k: {per_insn:.1f} B/insn; "
          f"end: {end1}, {end2}")
    assert per_insn > 16           # measured 47 B/insn on 6.18
    memlock = -(-(sizeof_bpf_prog() + 8 * 100_002) // PAGE) * PAGE
    assert memlock <= end2 <= memlock + 4 * PAGE


def test_probe_prog_lines_on_this_kernel():
    """The probe's `prog ID N` line (what the qemu kernels are asked, tests/vm_sweep-style):
    on this kernel a large straight-line program stays charged exactly its memlock, and its
    load peaks well above that (the verifier's working memory, in the loader's cgroup)."""
    from bpfmem.host import probe
    _h, results = probe.run_local("prog small 18\nprog big 100000\n", "v1")
    by = {r["id"]: r for r in results}
    big, small = by["big"], by["small"]
    assert big["ok"] and small["ok"]
    hdr = sizeof_bpf_prog()
    assert big["memlock"] == -(-(hdr + 8 * 100_000) // PAGE) * PAGE
    assert big["memlock"] <= big["charged"] <= big["memlock"] + 2 * PAGE
    assert big["peak"] - big["charged"] > 16 * 100_000
    assert big["peak_sampled"] <= big["peak"]
    assert small["memlock"] == PAGE
    assert not leftovers()


def test_a_verifier_refusal_carries_the_verifier_log():
    """local_storage.o's task_storage_tp is refused by the verifier here (EACCES: the task
    pointer a tracepoint has is untrusted): listed as refused with the log's last lines, the
    table's line is the verifier's complaint; the other programs of the object load."""
    import io
    from bpfmem import api
    from bpfmem.report.formats import render
    r = api.measure_object(str(FIXTURES / "local_storage.o"), programs=True)
    by = {p.name: p for p in r.programs.programs}
    bad = by["task_storage_tp"]
    assert not bad.loaded and bad.errno == 13
    assert "expected=ptr_" in bad.reason and "processed" in bad.reason
    assert by["sk_storage_egress"].loaded
    out = io.StringIO()
    render(r, "text", out, width=200)
    assert "R2 type=scalar expected=ptr_" in out.getvalue()
