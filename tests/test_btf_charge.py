"""What the kernel charges for a loaded BTF object, measured on the running kernel: no memory
cgroup pays for it. kernel/bpf/btf.c allocates a BTF object (struct btf, the copy of the
blob, its type tables) with GFP_KERNEL and no __GFP_ACCOUNT, and it has no memlock either
(fdinfo says only btf_id); so `pod` shows BPF BTF objects as a part of exactly 0 bytes and
their size, node memory, in a note.

Proof on this kernel: a child in a scratch cgroup loads the kernel's own vmlinux BTF (a blob
nobody here wrote, 5Mi and more) 16 times and holds the 16 objects: the cgroup's kernel memory
grows by less than a page a load (their fds' files), not by the ~85Mi the kernel keeps; the
pod view of that cgroup says 0 for BTF and names the 16 objects' size, each equal to bpftool's.
The child is killed by pid and the cgroup removed afterwards, also on failure."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from conftest import is_root

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not is_root(), reason="loading BTF needs root"),
    pytest.mark.skipif(not os.path.exists("/sys/kernel/btf/vmlinux"), reason="no vmlinux BTF"),
    pytest.mark.skipif(shutil.which("bpftool") is None, reason="needs bpftool"),
]

LOADS = 16
# the child: load vmlinux's BTF once (first-use allocations), say so, wait; then LOADS more,
# print their ids, and hold them until stdin closes
CHILD = f"""
import os, sys
from bpfmem.host import bpfsys
blob = open("/sys/kernel/btf/vmlinux", "rb").read()
os.close(bpfsys.btf_load(blob))
print("warm", flush=True)
sys.stdin.readline()
fds = [bpfsys.btf_load(blob) for _ in range({LOADS})]
print(" ".join(str(bpfsys.btf_info(fd).id) for fd in fds), flush=True)
sys.stdin.readline()
"""


def _kernel_memory(cg) -> int:
    """The cgroup's kernel memory: v1 memory.kmem.usage_in_bytes, v2 memory.stat kernel."""
    if cg.version == 1:
        with open(os.path.join(cg.fs_path, "memory.kmem.usage_in_bytes")) as f:
            return int(f.read())
    with open(os.path.join(cg.fs_path, "memory.stat")) as f:
        stat = dict(line.split() for line in f)
    return int(stat["kernel"])


def _settled(cg) -> int:
    """The kernel memory once two readings 50 ms apart agree (at most 2 s)."""
    last = _kernel_memory(cg)
    for _ in range(40):
        time.sleep(0.05)
        now = _kernel_memory(cg)
        if now == last:
            return now
        last = now
    return last


def test_a_loaded_btf_object_is_charged_to_no_cgroup():
    from bpfmem import api
    from bpfmem.host.cgroup import scratch_cgroup
    from bpfmem.units import format_size
    size = os.path.getsize("/sys/kernel/btf/vmlinux")
    with scratch_cgroup(kind="pod") as cg:
        procs = os.path.join(cg.fs_path, "cgroup.procs")

        def enter():
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        p = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, preexec_fn=enter)
        try:
            assert p.stdout.readline().strip() == "warm"
            before = _settled(cg)
            p.stdin.write("go\n")
            p.stdin.flush()
            ids = [int(x) for x in p.stdout.readline().split()]
            after = _settled(cg)
            view = api.pod_view(cgroup=cg.fs_path, profile=api.profile(), go=False)
            tool = {b["id"]: b for b in json.loads(subprocess.run(
                ["bpftool", "-j", "btf", "show"], check=True, capture_output=True,
                text=True).stdout)}
        finally:
            p.kill()
            p.wait()
    assert len(set(ids)) == LOADS
    # the kernel keeps each blob whole: bpftool's size of each object is the file's
    assert all(tool[i]["size"] == size for i in ids)
    kept = LOADS * size
    grew = after - before
    # what the cgroup paid: less than a page a load (the fds' files; per-CPU charge batches
    # of 64 pages may sit on either reading), nowhere near the blobs the kernel keeps
    slack = LOADS * 4096 + 2 * 64 * 4096 * (os.cpu_count() or 1)
    print(f"BTF: {LOADS} x {size} B kept, the cgroup grew {grew} B")
    assert grew < slack < kept // 16, (grew, kept)
    assert view.component("btf") == 0
    assert sum(c.bytes or 0 for c in view.components) == view.usage
    (note,) = [n for n in view.notes if "BTF object" in n]
    assert note.startswith(f"{LOADS} BTF object(s) held here") and format_size(kept) in note
