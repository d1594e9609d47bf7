"""host/cgroup.py on captured v1 (this host) and v2 (5.10, 6.1, 6.12 under qemu) cgroup trees,
and one live test with a scratch cgroup on this host."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import is_root
from bpfmem.errors import HostError
from bpfmem.host import cgroup as cg

DATA = Path(__file__).resolve().parent / "data" / "cgroup"
CAPTURES = sorted(p.name for p in DATA.iterdir() if (p / "meta.json").is_file())
MIB = 1 << 20


def test_all_captures_present():
    assert {"v1", "v2-5.10", "v2-6.1", "v2-6.12"} <= set(CAPTURES)


@pytest.fixture(params=CAPTURES)
def cap(request):
    d = DATA / request.param
    meta = json.loads((d / "meta.json").read_text())
    meta["root"] = str(d / "root")
    return meta


def _file(cap, kernel_path, name):
    p = Path(cap["root"]) / cap["mount"].lstrip("/") / kernel_path.lstrip("/") / name
    return p.read_text() if p.exists() else None


def _release(cap):
    return tuple(int(x) for x in cap["kernel"].split("-")[0].split(".")[:2])


# ---- pure parsers ----

def test_parse_limit():
    assert cg.parse_limit("max\n") is None
    assert cg.parse_limit("9223372036854771712\n") is None        # v1, 4 KiB pages
    assert cg.parse_limit("9223372036854710272\n") is None        # v1, 64 KiB pages
    assert cg.parse_limit("268435456\n") == 268435456
    assert cg.parse_limit("0") == 0
    with pytest.raises(ValueError):
        cg.parse_limit("lots")


def test_parse_proc_cgroup():
    lines = cg.parse_proc_cgroup("12:cpu,cpuacct:/a\n4:memory:/k/p:x\n1:name=systemd:/\n"
                                 "0::/kubepods.slice\ngarbage\n")
    assert [(l.hierarchy_id, l.controllers, l.path) for l in lines] == [
        (12, ("cpu", "cpuacct"), "/a"), (4, ("memory",), "/k/p:x"),
        (1, ("name=systemd",), "/"), (0, (), "/kubepods.slice")]


def test_parse_memory_stat_every_captured_file():
    files = list(DATA.glob("*/root/**/memory.stat"))
    assert len(files) > 20
    for f in files:
        text = f.read_text()
        stat = cg.parse_memory_stat(text)
        rows = [line.split() for line in text.splitlines()]
        assert len(stat) == len(rows), f
        for key, value in rows:
            assert stat[key] == int(value)


def test_unknown_version():
    with pytest.raises(ValueError):
        cg.parse_cgroup_memory(3, {"memory.stat": ""}, path="/", fs_path="/")


# ---- the captured trees ----

def test_hierarchies(cap):
    found = cg.memory_hierarchies(cap["root"])
    assert [(v, m.mount_point) for v, m in found] == [(cap["version"], cap["mount"])]


def test_container_memory(cap):
    path = cap["cgroups"]["container"]
    m = cg.read_cgroup_memory(path, root=cap["root"])
    stat = cg.parse_memory_stat(_file(cap, path, "memory.stat"))
    assert (m.version, m.path, m.fs_path) == (cap["version"], path, cap["mount"] + path)
    assert m.stat == stat
    assert m.procs == (cap["pid"],)
    assert m.limit == cap["limits"][path]
    usage_file = "memory.current" if m.version == 2 else "memory.usage_in_bytes"
    assert m.usage == int(_file(cap, path, usage_file))
    # the child touched alloc_bytes; 5.10 batches stat updates per CPU (up to 32 pages each)
    assert cap["alloc_bytes"] - 64 * 4096 <= m.anon <= cap["alloc_bytes"] + 16 * MIB
    assert m.usage >= m.anon
    # the breakdown stacks up to the usage (per-CPU charge stocks make up the rest)
    parts = m.anon + m.file + m.kernel + (m.sock or 0)
    assert abs(m.usage - parts) <= MIB, (m.usage, parts)
    if m.version == 1:
        assert m.anon == stat["total_rss"] and m.file == stat["total_cache"]
        assert m.kernel == int(_file(cap, path, "memory.kmem.usage_in_bytes"))
        assert m.peak == int(_file(cap, path, "memory.max_usage_in_bytes"))
        assert m.swap == stat["total_swap"]
        for name in ("kernel_stack", "slab_reclaimable", "slab_unreclaimable", "percpu",
                     "sock", "vmalloc"):
            assert getattr(m, name) is None, name
        assert m.counters["memory.kmem.tcp.usage_in_bytes"] == int(
            _file(cap, path, "memory.kmem.tcp.usage_in_bytes"))
    else:
        assert (m.anon, m.file, m.sock) == (stat["anon"], stat["file"], stat["sock"])
        for name in ("kernel_stack", "slab_reclaimable", "slab_unreclaimable", "percpu",
                     "vmalloc"):
            assert getattr(m, name) == stat.get(name), name
        peak = _file(cap, path, "memory.peak")
        assert m.peak == (int(peak) if peak is not None else None)
        assert m.swap == int(_file(cap, path, "memory.swap.current"))
        if "kernel" in stat:
            assert m.kernel == stat["kernel"]
        else:
            assert m.kernel == sum(stat.get(k, 0) for k in (
                "kernel_stack", "pagetables", "sec_pagetables", "percpu",
                "slab_reclaimable", "slab_unreclaimable", "vmalloc"))
    # a BPF map is charged to the memory cgroup from 5.11 (before: RLIMIT_MEMLOCK)
    assert cap["map_errno"] == 0
    if _release(cap) >= (5, 11):
        assert m.kernel >= cap["map_bytes"]
        if m.vmalloc is not None:
            assert m.vmalloc >= cap["map_bytes"]
    else:
        assert m.kernel < cap["map_bytes"]


def test_fields_absent_on_old_kernels(cap):
    m = cg.read_cgroup_memory(cap["cgroups"]["container"], root=cap["root"])
    if cap["kernel"].startswith("5.10."):
        assert m.peak is None and m.vmalloc is None
        assert "kernel" not in m.stat and "memory.peak" not in m.counters
    elif m.version == 2:
        assert m.peak is not None and m.peak >= m.usage and m.vmalloc is not None
        assert "kernel" in m.stat
    else:
        assert m.peak is not None and m.peak >= m.usage


def test_hierarchy_sums(cap):
    c = cg.read_cgroup_memory(cap["cgroups"]["container"], root=cap["root"])
    pod = cg.read_cgroup_memory(cap["cgroups"]["pod"], root=cap["root"])
    top = cg.read_cgroup_memory(cap["cgroups"]["kubepods"], root=cap["root"])
    assert pod.limit == cap["limits"][cap["cgroups"]["pod"]]
    assert top.limit is None  # v1 PAGE_COUNTER_MAX, v2 "max"
    assert cg.read_cgroup_memory(cap["cgroups"]["sibling"], root=cap["root"]).limit is None
    assert top.usage >= pod.usage >= c.usage
    assert top.anon >= pod.anon >= c.anon  # v1: total_rss covers the subtree
    assert pod.procs == () and top.procs == ()
    assert cg.read_subtree_procs(pod.fs_path, root=cap["root"]) == [cap["pid"]]
    assert cg.read_subtree_procs(top.fs_path, root=cap["root"]) == [cap["pid"]]
    assert cg.read_cgroup_procs(c.fs_path, root=cap["root"]) == [cap["pid"]]


def test_directory_or_kernel_path(cap):
    path = cap["cgroups"]["pod"]
    by_path = cg.read_cgroup_memory(path, root=cap["root"])
    by_dir = cg.read_cgroup_memory(cap["mount"] + path, root=cap["root"])
    assert by_path == by_dir
    with pytest.raises(HostError, match="no memory cgroup"):
        cg.read_cgroup_memory(path + "-gone", root=cap["root"])


def test_cgroup_of_pid(cap):
    want = cap["mount"] + cap["cgroups"]["container"]
    assert cg.cgroup_of_pid(cap["pid"], root=cap["root"]) == want
    assert cg.resolve_cgroup(pid=cap["pid"], root=cap["root"]) == want
    with pytest.raises(HostError, match="no process 999999"):
        cg.cgroup_of_pid(999999, root=cap["root"])


def test_v1_falls_back_from_cgroup2_without_memory():
    meta = json.loads((DATA / "v1" / "meta.json").read_text())
    root = DATA / "v1" / "root"
    lines = cg.parse_proc_cgroup((root / f"proc/{meta['pid']}/cgroup").read_text())
    assert any(l.hierarchy_id == 0 for l in lines)  # a v2 line, but without memory
    ctrls = (root / "sys/fs/cgroup/unified/cgroup.controllers").read_text().split()
    assert "memory" not in ctrls
    assert cg.cgroup_of_pid(meta["pid"], root=root).startswith(meta["mount"] + "/kubepods/")


def test_cgroup_of_pid_v1_ignores_the_v2_line_order(tmp_path):
    # the v1 host's lines with "0::/" first: the memory line still decides
    meta = json.loads((DATA / "v1" / "meta.json").read_text())
    src = DATA / "v1" / "root"
    lines = (src / f"proc/{meta['pid']}/cgroup").read_text().splitlines()
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/7").mkdir()
    (tmp_path / "proc/7/cgroup").write_text("\n".join(sorted(lines)) + "\n")
    assert sorted(lines)[0].startswith("0::")
    (tmp_path / "proc/self/mountinfo").write_text((src / "proc/self/mountinfo").read_text())
    (tmp_path / "sys").symlink_to(src / "sys")
    assert cg.cgroup_of_pid(7, root=tmp_path) == meta["mount"] + meta["cgroups"]["container"]


def test_find_container(cap):
    root, ids, cgs, mount = cap["root"], cap["ids"], cap["cgroups"], cap["mount"]
    want = mount + cgs["container"]
    assert cg.find_container(ids["container"], root=root) == want
    assert cg.find_container(ids["container"][:20], root=root) == want
    assert cg.find_container("containerd://" + ids["container"].upper(), root=root) == want
    assert cg.resolve_cgroup(container=ids["container"][:17], root=root) == want
    assert cg.find_container(ids["sibling"][:17], root=root) == mount + cgs["sibling"]
    assert cg.find_container(ids["docker"][:12], root=root) == mount + cgs["docker"]
    if "crio" in cgs:  # crio-conmon-<id>.scope is not the container
        assert cg.find_container(ids["crio"], root=root) == mount + cgs["crio"]
    assert ids["container"][:16] == ids["sibling"][:16]
    with pytest.raises(HostError, match="ambiguous: 2 cgroups"):
        cg.find_container(ids["container"][:16], root=root)
    missing = "f" * 12 if not any(i.startswith("f" * 12) for i in ids.values()) else "0" * 12
    with pytest.raises(HostError, match="no memory cgroup for container"):
        cg.find_container(missing, root=root)
    for bad in ("abc", ids["container"][:11], "xyz" * 8, ids["container"] + "0"):
        with pytest.raises(HostError, match="not a container id"):
            cg.find_container(bad, root=root)


def test_resolve_needs_exactly_one(cap):
    with pytest.raises(ValueError):
        cg.resolve_cgroup(root=cap["root"])
    with pytest.raises(ValueError):
        cg.resolve_cgroup(cgroup="/", pid=1, root=cap["root"])
    path = cap["cgroups"]["container"]
    assert cg.resolve_cgroup(cgroup=path, root=cap["root"]) == cap["mount"] + path


# ---- live ----

CHILD = r"""
import sys
sys.stdin.readline()
buf = bytearray(b"\x01") * (int(sys.argv[1]) << 20)
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.mark.kernel
@pytest.mark.skipif(not is_root(), reason="creating a cgroup needs root")
def test_scratch_cgroup_live():
    n, limit = 32, 256 * MIB
    with cg.scratch_cgroup(limit=limit) as scratch:
        where = scratch.fs_path
        assert os.path.isdir(where)
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(n)], text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            scratch.add_pid(child.pid)
            child.stdin.write("go\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "ready"
            m = scratch.read()
            assert m.version == scratch.version
            assert m.fs_path == where
            assert m.limit == limit
            assert m.procs == (child.pid,)
            assert m.usage >= n * MIB
            assert abs(m.anon - n * MIB) <= 8 * MIB, m.anon
            assert m.peak is None or m.peak >= m.usage
            assert cg.cgroup_of_pid(child.pid) == where
            assert cg.resolve_cgroup(cgroup=where) == where
            assert scratch.procs() == [child.pid]
        finally:
            child.stdin.close()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
    assert not os.path.exists(where)


@pytest.mark.kernel
@pytest.mark.skipif(not is_root(), reason="creating a cgroup needs root")
def test_scratch_cgroup_removed_on_error():
    with pytest.raises(RuntimeError):
        with cg.scratch_cgroup(prefix="bpfmem-test-") as scratch:
            where = scratch.fs_path
            assert os.path.basename(where).startswith("bpfmem-test-")
            raise RuntimeError("boom")
    assert not os.path.exists(where)


@pytest.mark.kernel
@pytest.mark.skipif(not is_root(), reason="creating a cgroup needs root")
def test_scratch_cgroup_is_named_for_the_sweep_and_removed_on_sigterm():
    """The one scratch-cgroup maker: ``bpfmem-<kind>-<pid>-<random>`` (what the next run's
    sweep attributes to a pid), removed when SIGTERM ends the command."""
    import re
    import signal
    from bpfmem.host.cleanup import _NAME
    with cg.scratch_cgroup(kind="measure") as scratch:
        name = os.path.basename(scratch.fs_path)
        assert re.fullmatch(rf"bpfmem-measure-{os.getpid()}-[0-9a-f]+", name)
        assert re.match(_NAME, name)
    code = ("import sys, time\n"
            "from bpfmem.host.cgroup import scratch_cgroup\n"
            "from bpfmem.host.cleanup import signals_interrupt\n"
            "try:\n"
            "    with signals_interrupt(), scratch_cgroup(kind='pod') as c:\n"
            "        print(c.fs_path, flush=True)\n"
            "        time.sleep(60)\n"
            "except KeyboardInterrupt:\n"
            "    sys.exit(3)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(Path(cg.__file__).parents[2])})
    try:
        where = child.stdout.readline().strip()
        assert os.path.isdir(where) and f"bpfmem-pod-{child.pid}-" in where
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=20) == 3
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert not os.path.exists(where)


def test_scratch_parent_for_an_absent_hierarchy_says_which():
    versions = {v for v, _m in cg.memory_hierarchies("/")}
    for version, what in ((1, "v1 memory"), (2, "cgroup2")):
        if version not in versions:
            with pytest.raises(HostError, match=what):
                cg.scratch_parent(version)
        elif version == 1:     # (a cgroup2 mount may hold memory without delegating it)
            assert cg.scratch_parent(1)[0] == 1
