"""The live node view against real maps: scan_maps, snapshot, maps --from-bpftool, top.

Maps are created by forked children (tests/mapfarm.py), some pinned under a scratch bpffs
mount, some filled; every child, pin and mount is removed afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

from conftest import bpffs, is_root
from mapfarm import MapFarm, MapPlan

from bpfmem.analysis.live import check_map, filter_maps
from bpfmem.errors import ObjectGone
from bpfmem.host import bpfsys, live, procfs
from bpfmem.host.profile import host_profile
from bpfmem.uapi import MapType as T

kernel = pytest.mark.kernel
needs_root = pytest.mark.skipif(not is_root(), reason="needs root (CAP_SYS_ADMIN)")
SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
pytestmark = [kernel, needs_root]


PLANS = [
    [MapPlan("lt_hash", T.HASH, 8, 16, 1000, fill=123, pin=True),
     MapPlan("lt_array", T.ARRAY, 4, 64, 32),
     MapPlan("lt_lru", T.LRU_HASH, 16, 40, 2048, fill=500)],
    [MapPlan("lt_pcpu_hash", T.PERCPU_HASH, 4, 8, 256, fill=77, pin=True),
     MapPlan("lt_nopre", T.HASH, 4, 100, 4096, map_flags=1, fill=1000),
     MapPlan("lt_lpm", T.LPM_TRIE, 8, 8, 100, map_flags=1, fill=9),
     MapPlan("lt_queue", T.QUEUE, 0, 8, 16)],
]


@pytest.fixture(scope="module")
def farm():
    with bpffs() as pins, MapFarm(PLANS, pin_dir=pins) as f:
        yield f, pins


@pytest.fixture(scope="module")
def snap(farm):
    return live.scan_maps(entries=True)


def _fdinfo(pid: int, fd: int) -> dict:
    with open(f"/proc/{pid}/fdinfo/{fd}") as f:
        return procfs.parse_fdinfo(f.read())


def test_scan_finds_every_farm_map_with_owner_pin_memlock_entries(farm, snap):
    f, pins = farm
    by_id = {m.id: m for m in snap.maps}
    for child in f.children:
        for fm in child.maps:
            m = by_id[fm.id]
            assert m.name == fm.name
            assert [o.pid for o in m.owners] == [child.pid]
            assert m.owners[0].comm == open(f"/proc/{child.pid}/comm").read().strip()
            info = _fdinfo(child.pid, fm.fd)
            assert m.memlock == int(info["memlock"])          # equal to the kernel's fdinfo
            assert int(info["map_id"]) == m.id
            assert m.pins == ((os.path.join(pins, fm.name),) if fm.pin else ())
            if m.type in (T.ARRAY,):
                assert m.entries == m.max_entries and m.pressure is None
            elif m.type == T.QUEUE:
                assert m.entries is None                      # no keys to count
            else:
                assert m.entries == fm.fill and m.entries_complete
                assert m.pressure == pytest.approx(fm.fill / m.max_entries)
    assert set(snap.bpffs) >= {pins}


def test_owner_cgroup_is_the_processes_memory_cgroup(farm, snap):
    f, _ = farm
    pid = f.children[0].pid
    text = open(f"/proc/{pid}/cgroup").read()
    from bpfmem.host.cgroup import parse_proc_cgroup
    lines = parse_proc_cgroup(text)
    want = next((l.path for l in lines if "memory" in l.controllers),
                next(l.path for l in lines if l.hierarchy_id == 0))
    m = next(m for m in snap.maps if m.name == "lt_hash" and m.owners[0].pid == pid)
    assert m.owners[0].cgroup == want


def test_model_matches_the_kernel_for_every_farm_map(farm, snap):
    prof = host_profile()
    ids = {fm.id for fm in farm[0].maps}
    checks = {m.name: check_map(m, prof) for m in snap.maps if m.id in ids}
    assert {n: c.status for n, c in checks.items()} == {n: "match" for n in checks}
    assert all(c.charged is not None for c in checks.values())


def test_kernel_memlock_sum_equals_fdinfo_sum(farm, snap):
    ids = {fm.id: (c.pid, fm.fd) for c in farm[0].children for fm in c.maps}
    ours = sum(m.memlock for m in snap.maps if m.id in ids)
    theirs = sum(int(_fdinfo(pid, fd)["memlock"]) for pid, fd in ids.values())
    assert ours == theirs > 0


def test_filters(farm, snap):
    pid = farm[0].children[1].pid
    assert {m.name for m in filter_maps(snap.maps, name="lt_*", pid=pid)} == {
        "lt_pcpu_hash", "lt_nopre", "lt_lpm", "lt_queue"}
    assert {m.name for m in filter_maps(snap.maps, name="lt_*", type="lru_hash")} == {"lt_lru"}
    assert filter_maps(snap.maps, name="lt_*", owner="no-such-comm*") == []


def test_the_fdinfo_reader_reads_each_fd_number_as_it_is_now():
    """FdinfoReader keeps one fdinfo file per fd number and reads it again: each read shows
    the map that number holds at that moment, with the memlock of that moment, as a fresh
    open of /proc/self/fdinfo does; its files are closed at the end."""
    a = bpfsys.map_create(T.HASH, 8, 8, 64, 1, "lt_fdr_nopre")     # memlock grows
    b = bpfsys.map_create(T.ARRAY, 4, 256, 64, 0, "lt_fdr_array")
    ids = [bpfsys.map_info(a).id, bpfsys.map_info(b).id]
    before = set(os.listdir("/proc/self/fd"))
    try:
        with live.FdinfoReader() as reader:
            seen = []
            for step in range(4):
                if step == 2:
                    import struct
                    for k in range(20):
                        bpfsys.map_update(a, struct.pack("<Q", k), bytes(8))
                for mid in ids:
                    fd = bpfsys.map_fd_by_id(mid)
                    try:
                        assert reader.memlock(fd) == live._self_fdinfo(fd)[0]
                        raw = reader.read(fd)
                        assert int(procfs.parse_fdinfo(raw.decode())["map_id"]) == mid
                        seen.append((fd, reader.memlock(fd)))
                    finally:
                        os.close(fd)
            assert len({fd for fd, _m in seen}) == 1      # one number, read again and again
            assert seen[0][1] != seen[1][1]                # two maps, two figures
            assert seen[4][1] > seen[0][1] and seen[5][1] == seen[1][1]   # entries came
        assert set(os.listdir("/proc/self/fd")) == before
    finally:
        os.close(a)
        os.close(b)


@pytest.mark.parametrize("entries", [False, True])
def test_the_listing_one_by_one_gives_the_records_of_the_iterator(farm, entries):
    """Without the kernel's map iterator (kernel_counts=False) the maps are listed one by one:
    every farm map's record is the same, field by field."""
    ids = {fm.id for fm in farm[0].maps}
    def ours(**kw):
        return {m.id: m for m in live.scan_maps(entries=entries, **kw).maps if m.id in ids}
    fast, slow = ours(), ours(kernel_counts=False)
    assert len(fast) == len(ids)
    for mid, m in fast.items():
        o = slow[mid]
        if m.entries_method == "kernel":      # the kernel's count against a walk: same n
            assert (m.entries, m.entries_complete) == (o.entries, o.entries_complete)
            from dataclasses import replace
            m = replace(m, entries_method=o.entries_method)
        assert m == o


def test_pinned_map_without_holder_still_has_memlock():
    with bpffs() as pins:
        fd = bpfsys.map_create(T.HASH, 4, 4, 64, 0, "lt_orphan")
        try:
            bpfsys.obj_pin(fd, f"{pins}/orphan")
            expected = int(procfs.parse_fdinfo(open(f"/proc/self/fdinfo/{fd}").read())["memlock"])
            map_id = bpfsys.map_info(fd).id
        finally:
            os.close(fd)           # now only the pin holds it
        try:
            s = live.scan_maps()
            m = next(m for m in s.maps if m.id == map_id)
            assert m.owners == () and m.pins == (f"{pins}/orphan",)
            assert m.memlock == expected
        finally:
            os.unlink(f"{pins}/orphan")


def test_a_map_vanishing_mid_scan_is_skipped(farm, monkeypatch):
    victim = farm[0].children[0].maps[0].id
    real = bpfsys.map_fd_by_id

    def flaky(map_id, flags=bpfsys.BPF_F_RDONLY):
        if map_id == victim:
            raise ObjectGone("gone")
        return real(map_id, flags)

    monkeypatch.setattr(bpfsys, "map_fd_by_id", flaky)
    s = live.scan_maps()
    assert victim not in {m.id for m in s.maps} and s.skipped >= 1
    assert {fm.id for fm in farm[0].maps} - {victim} <= {m.id for m in s.maps}


def test_scans_survive_maps_coming_and_going():
    stop = threading.Event()
    made = [0]

    def churn():
        while not stop.is_set():
            fds = [bpfsys.map_create(T.HASH, 4, 4, 8, 0, "lt_churn") for _ in range(20)]
            for fd in fds:
                os.close(fd)
            made[0] += 20

    t = threading.Thread(target=churn)
    t.start()
    try:
        for _ in range(15):
            live.scan_maps(entries=True)
    finally:
        stop.set()
        t.join()
    assert made[0] > 0


def test_never_writes_to_a_map(farm):
    """Entry counting uses lookups only: contents and counts are unchanged by a scan."""
    f, _ = farm
    before = live.scan_maps(entries=True)
    after = live.scan_maps(entries=True)
    ids = {fm.id for fm in f.maps}
    pick = lambda s: {m.id: (m.entries, m.memlock) for m in s.maps if m.id in ids}
    assert pick(before) == pick(after)


# ---- the CLI ----

def _bpfmem(*args, **kw):
    return subprocess.run([sys.executable, "-m", "bpfmem", *args], capture_output=True,
                          text=True, timeout=120, **kw)


def test_snapshot_cli_json_and_bpftool_agree(farm, tmp_path):
    out = tmp_path / "snap.json"
    r = _bpfmem("snapshot", "--entries", "-o", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == "bpfmem/snapshot/v2"
    ours = {m["id"]: m for m in doc["maps"]}
    bt = json.loads(subprocess.run(["bpftool", "-j", "-f", "map", "show"], capture_output=True,
                                   text=True, check=True).stdout)
    farm_ids = {fm.id for fm in farm[0].maps}
    theirs = {m["id"]: m for m in bt if m["id"] in farm_ids}
    assert set(theirs) == farm_ids
    for i, b in theirs.items():
        o = ours[i]
        assert (o["name"], o["type"], o["key_size"], o["value_size"], o["max_entries"],
                o.get("map_flags", 0), o["memlock"]) == (
            b["name"], b["type"], b["bytes_key"], b["bytes_value"], b["max_entries"],
            b["flags"], b["bytes_memlock"])
        assert sorted(o.get("pins", [])) == sorted(b.get("pinned", []))
        assert o["model"]["status"] == "match"
    assert doc["totals"]["memlock"] == sum(m["memlock"] or 0 for m in doc["maps"])


def test_maps_from_bpftool_reads_a_saved_bpftool_dump(farm, tmp_path):
    dump = tmp_path / "bt.json"
    dump.write_text(subprocess.run(["bpftool", "-j", "-f", "map", "show"], capture_output=True,
                                   text=True, check=True).stdout)
    r = _bpfmem("maps", "--from-bpftool", str(dump), "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    names = {m["name"]: m for m in doc["maps"]}
    for fm in farm[0].maps:
        assert names[fm.name]["model"]["status"] in ("match", "in-range")
    r = _bpfmem("maps", "--from-bpftool", str(dump))
    assert r.returncode == 0 and "lt_nopre" in r.stdout


def test_advise_takes_a_snapshot_as_occupancy(farm, tmp_path):
    out = tmp_path / "snap.json"
    assert _bpfmem("snapshot", "--entries", "--name", "lt_*", "-o", str(out)).returncode == 0
    from bpfmem.api import load_occupancy
    occ = load_occupancy(str(out))
    assert occ["lt_hash"] == 123 and occ["lt_lru"] == 500


def test_without_cap_sys_admin_one_line_and_exit_1():
    r = subprocess.run(["capsh", "--drop=cap_sys_admin,cap_bpf,cap_perfmon", "--",
                        "-c", f"{sys.executable} -m bpfmem snapshot"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "CAP_SYS_ADMIN" in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_top_in_tmux(farm):
    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed")
    session = f"bpfmem-top-{os.getpid()}"
    cmd = f"{sys.executable} -m bpfmem top --interval 300ms --entries --name 'lt_*'"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "30", cmd],
                   check=True)
    try:
        screen = ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            time.sleep(0.5)
            screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", session],
                                    capture_output=True, text=True).stdout
            if "lt_lru" in screen and "maps 7" in screen:
                break
        assert "bpfmem top" in screen
        assert "maps 7" in screen, screen            # the filter keeps the 7 farm maps
        assert "filter: name=lt_*" in screen
        for name in ("lt_hash", "lt_lru", "lt_nopre", "lt_pcpu_hash"):
            assert name in screen
        lines = [l for l in screen.splitlines() if " lt_" in l]
        memlock_order = [l.split()[1] for l in lines]
        # sorted by memlock, largest first: compare with the scan
        s = live.scan_maps()
        ours = [m.name for m in sorted((m for m in s.maps if m.name.startswith("lt_")),
                                       key=lambda m: (-(m.memlock or 0), m.id))]
        assert memlock_order == ours[:len(memlock_order)]
        # a refresh happens: the clock in the header changes
        first = screen.splitlines()[0]
        time.sleep(1.5)
        again = subprocess.run(["tmux", "capture-pane", "-p", "-t", session],
                               capture_output=True, text=True).stdout.splitlines()[0]
        assert again != first
        assert "sort: memlock" in screen and "q: quit" in screen
        # s re-sorts by pressure: the fullest farm map comes first
        subprocess.run(["tmux", "send-keys", "-t", session, "s"], check=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            time.sleep(0.3)
            screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", session],
                                    capture_output=True, text=True).stdout
            if "sort: pressure" in screen:
                break
        assert "sort: pressure" in screen
        rows = [l.split()[1] for l in screen.splitlines() if " lt_" in l]
        s = live.scan_maps(entries=True)
        fullest = max((m for m in s.maps if m.name.startswith("lt_") and m.pressure is not None),
                      key=lambda m: m.pressure)
        assert rows[0] == fullest.name
        # q quits: the session's only window closes
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and subprocess.run(
                ["tmux", "has-session", "-t", session], capture_output=True).returncode == 0:
            time.sleep(0.2)
        assert subprocess.run(["tmux", "has-session", "-t", session],
                              capture_output=True).returncode != 0
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)


def test_owner_cgroups_are_host_paths_from_inside_a_cgroup_namespace():
    """In a cgroup namespace (a DaemonSet pod on cgroup v2) the kernel shows other
    processes' cgroups as /../..; the scan resolves them to host paths."""
    from pathlib import Path
    from bpfmem.host.cgroup import remove_cgroup_dir as _rmdir_cgroup
    mem = Path("/sys/fs/cgroup/memory")
    if not (mem / "cgroup.procs").exists() or shutil.which("unshare") is None:
        pytest.skip("needs the cgroup v1 memory hierarchy and unshare")
    base = mem / f"bpfmem-ns-{os.getpid()}"
    scanner, holder_cg = base / "scanner", base / "holder"
    holder = None
    try:
        for d in (base, scanner, holder_cg):
            d.mkdir()

        def enter_holder_cgroup():
            (holder_cg / "cgroup.procs").write_text(str(os.getpid()))

        holder = subprocess.Popen(
            [sys.executable, "-c", "import sys; from bpfmem.host import bpfsys; "
             "fd = bpfsys.map_create(1, 4, 4, 8, 0, 'ns_probe'); print('ok', flush=True); "
             "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            preexec_fn=enter_holder_cgroup)
        assert holder.stdout.readline().strip() == "ok"
        inside = (f"echo $$ > {scanner}/cgroup.procs && exec unshare -C sh -c "
                  f"'cat /proc/{holder.pid}/cgroup; {sys.executable} -m bpfmem snapshot "
                  f"--name ns_probe'")
        r = subprocess.run(["sh", "-c", inside], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        seen, _, snapshot = r.stdout.partition("{")
        # the namespace really hides the host path ...
        assert ":memory:/../holder" in seen
        doc = json.loads("{" + snapshot)
        (m,) = doc["maps"]
        # ... and the scan reports the host path all the same
        assert m["owners"][0]["pid"] == holder.pid
        assert doc["processes"][str(holder.pid)]["cgroup"] == f"/{base.name}/holder"
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
        for d in (scanner, holder_cg, base):
            if d.exists():
                _rmdir_cgroup(d)


@pytest.fixture
def loaded_example():
    """The bundled example loaded by bpftool: its programs pinned on a scratch bpffs (they
    hold the maps; no process does). Unpinned and unmounted afterwards."""
    from bpfmem.api import example_object_path
    with bpffs() as d:
        r = subprocess.run(["bpftool", "prog", "loadall", str(example_object_path()),
                            f"{d}/progs"], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"bpftool cannot load the example here: {r.stderr.strip()[-200:]}")
        try:
            yield d
        finally:
            shutil.rmtree(f"{d}/progs", ignore_errors=True)


def test_programs_that_use_each_map_and_maps_held_only_by_programs(loaded_example):
    """The bundled example loaded by bpftool (programs pinned on a scratch bpffs): each
    map lists the programs whose used_maps include it; nobody else holds these maps."""
    progs = json.loads(subprocess.run(["bpftool", "-j", "prog", "show"],
                                      capture_output=True, text=True,
                                      check=True).stdout)
    ours = {p["id"]: p for p in progs
            if p.get("name") in ("cni_xdp_ingress", "cni_tc_egress")}
    assert len(ours) == 2
    s = live.scan_maps()
    by_id = {m.id: m for m in s.maps}
    want: dict[int, set[int]] = {}
    for p in ours.values():
        for mid in p["map_ids"]:
            want.setdefault(mid, set()).add(p["id"])
    for mid, pids in want.items():
        m = by_id[mid]
        assert {p.id for p in m.programs} >= pids
        assert {p.name for p in m.programs if p.id in pids} <= {
            "cni_xdp_ingress", "cni_tc_egress"}
        assert m.owners == ()          # bpftool has exited: only programs hold them
        assert m.memlock is not None and m.memlock > 0
        assert m.pins == ()            # program pins are not map pins


def test_a_live_snapshot_sizes_the_advice_even_for_truncated_names(loaded_example, tmp_path):
    """The example loaded for real; its snapshot (kernel names: at most 15 characters, so
    service_route_table is service_route_t) is the occupancy input of `bpfmem advise`."""
    from bpfmem.api import example_object_path
    snap = tmp_path / "node.json"
    assert _bpfmem("snapshot", "--entries", "--name", "service_*", "-o",
                   str(snap)).returncode == 0
    names = {m["name"] for m in json.loads(snap.read_text())["maps"]}
    assert "service_route_t" in names            # the kernel's 15 characters
    r = _bpfmem("advise", str(example_object_path()), "--occupancy", str(snap), "--format",
                "json")
    assert r.returncode == 0, r.stderr
    advice = json.loads(r.stdout)["objects"][0]["advice"]
    resized = {a["map"] for a in advice if a["kind"] == "resize"}
    # freshly loaded: every service table is empty, so each is worth shrinking
    assert {"service_route_table", "service_deny_table"} <= resized


# ---- owners from the kernel's task_file iterator, against the /proc walk ----

def _owner_sets(s):
    return {m.id: tuple((o.pid, o.comm, o.cgroup, o.fds) for o in m.owners) for m in s.maps}


def test_iterator_and_proc_give_the_same_owners(farm):
    """Owners of the farm's maps (whose holders stay put; other processes on a shared host
    may open and close maps between the two scans) are the same by either method."""
    from bpfmem.host import owner_iter
    ids = {fm.id for fm in farm[0].maps}
    by_iter = live.scan_maps(owners_method="iterator", pins=False)
    by_proc = live.scan_maps(owners_method="proc", pins=False)
    assert by_iter.owners_from == "kernel iterator" and by_proc.owners_from.startswith("/proc")
    it, pr = _owner_sets(by_iter), _owner_sets(by_proc)
    assert ids <= set(it) and ids <= set(pr)
    assert {i: it[i] for i in ids} == {i: pr[i] for i in ids}
    assert all(it[i] for i in ids)
    memlock = {m.id: m.memlock for m in by_proc.maps}
    assert all(m.memlock == memlock[m.id] for m in by_iter.maps if m.id in ids)
    # every record is a real (pid, fd) of this host: the same triples /proc shows
    recs = [r for r in owner_iter.map_fds() if r[2] in ids]
    assert set(recs) <= {(f.pid, f.fd, f.map_id) for f in procfs.scan_map_fds()}
    assert len(recs) == len(farm[0].maps)
    # the program, its link and the iterator are gone again
    names = set()
    for pid in bpfsys.prog_ids():
        try:
            fd = bpfsys.prog_fd_by_id(pid)
        except ObjectGone:
            continue
        try:
            names.add(bpfsys.prog_info(fd).name)
        finally:
            bpfsys.close(fd)
    assert "bpfmem_owners" not in names


def test_without_the_iterator_the_proc_walk_is_used_and_said(farm, monkeypatch):
    from bpfmem.host import owner_iter

    def refuse(*_kept):
        raise owner_iter.IteratorUnavailable("loading the owner iterator: needs CAP_PERFMON")
    monkeypatch.setattr(owner_iter, "map_fds_raw", refuse)
    s = live.scan_maps(pins=False)
    assert s.owners_from == "/proc (loading the owner iterator: needs CAP_PERFMON)"
    ids = {fm.id for fm in farm[0].maps}
    assert all(m.owners for m in s.maps if m.id in ids)
    with pytest.raises(owner_iter.IteratorUnavailable):
        live.scan_maps(pins=False, owners_method="iterator")


def test_iterator_is_refused_outside_the_initial_pid_namespace(farm):
    """In a pid namespace of its own (a container without hostPID) the iterator's host pids
    would not match /proc: the scan says so and walks /proc."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    code = ("from bpfmem.host import live; s = live.scan_maps(pins=False); "
            "print(s.owners_from)")
    out = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c",
                          code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": SRC})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "/proc (not in the initial pid namespace (the iterator " \
                                 "reports host pids))"


def test_iterator_layout_needs_the_symbol_address():
    from bpfmem.errors import ParseError
    from bpfmem.host.owner_iter import parse_layout
    btf = open("/sys/kernel/btf/vmlinux", "rb").read()
    hidden = "0000000000000000 t bpf_map_release\n"          # kernel.kptr_restrict at work
    with pytest.raises(ParseError, match="kptr_restrict"):
        parse_layout(btf, hidden)
    lay = parse_layout(btf, "ffffffff81000000 t bpf_map_release\n")
    assert lay.release_addr == 0xffffffff81000000 and lay.attach_btf_id > 0


def test_the_owner_records_stamp_each_process_with_its_comm_and_cgroups(farm):
    """Each record of the owner iterator begins with its process's comm and the kernfs ids
    of its cgroups (the default hierarchy's and its memory controller's): equal to
    /proc/PID/comm and to the inode numbers of its cgroup directories."""
    from bpfmem.host import owner_iter
    from bpfmem.host.cgroup import parse_proc_cgroup
    try:
        data = owner_iter.bpf_fds_raw()
    except owner_iter.IteratorUnavailable as e:
        pytest.skip(f"no owner iterator here: {e}")
    pids, _ids, _others, stamps = owner_iter.fd_columns(data)
    if stamps is None:
        pytest.skip("this kernel's BTF lacks the fields of the stamps")
    mounts = {m.fs_type: m.mount_point for m in procfs.read_mountinfo()
              if m.fs_type == "cgroup2"}
    v1_memory = next((m.mount_point for m in procfs.read_mountinfo() if m.fs_type == "cgroup"
                      and "memory" in m.super_options.split(",")), None)
    checked = 0
    for child in farm[0].children:
        comm, dfl, mem = owner_iter.STAMPS.unpack(stamps[child.pid])
        with open(f"/proc/{child.pid}/comm", "rb") as f:
            assert comm.rstrip(b"\0") == f.read().rstrip(b"\n")[:15]
        with open(f"/proc/{child.pid}/cgroup") as f:
            lines = parse_proc_cgroup(f.read())
        v2 = next(l.path for l in lines if l.hierarchy_id == 0)
        if "cgroup2" in mounts:
            assert dfl == os.stat(mounts["cgroup2"] + v2).st_ino
        memline = next((l.path for l in lines if "memory" in l.controllers), None)
        if memline is not None and v1_memory is not None:
            assert mem == os.stat(v1_memory + memline).st_ino
        elif "cgroup2" in mounts:
            assert mem > 0
        checked += 1
    assert checked == len(farm[0].children)
