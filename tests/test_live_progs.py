"""Live programs against the kernel and bpftool: every figure bpfmem's program walk reports
(host/progs.py) equals what `bpftool -j prog show` and the holder's fdinfo say.

Programs are loaded by Debian's libbpf (tests/harness `hold`: whole object, or each program
alone when the whole does not load) from our fixtures and cilium/ebpf's committed example
objects, and kept loaded until the harness's stdin closes; the harness is killed (by pid)
and its pins removed afterwards, also on failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from contextlib import ExitStack, contextmanager

import pytest

import libbpf_harness
from conftest import CILIUM_EXAMPLES, FIXTURES, bpffs, is_root
from bpfmem import uapi
from bpfmem.host import bpfsys, progs

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.libbpf,
    pytest.mark.skipif(not is_root(), reason="loading programs needs root"),
    pytest.mark.skipif(shutil.which("bpftool") is None, reason="needs bpftool"),
]

OBJECTS = [FIXTURES / n for n in ("callbacks.o", "prog_sections.o", "global_data.o",
                                  "map_in_map.o")] + \
    [CILIUM_EXAMPLES / n for n in ("variables_bpfel.o", "xdp_bpfel.o", "tcx_bpfel.o",
                                   "counter_bpfel.o", "kprobe_bpfel.o",
                                   "xdp_live_frame_bpfel.o")]


@contextmanager
def held(obj):
    """A harness process holding ``obj``'s programs: (pid, [{name, id, fd, insn_cnt}])."""
    binary = libbpf_harness.ensure_built()
    if binary is None:
        pytest.skip("the libbpf harness cannot be built here")
    p = subprocess.Popen([str(binary), "hold", str(obj)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        lines = []
        for line in p.stdout:
            rec = json.loads(line)
            if rec["kind"] == "ready":
                break
            lines.append(rec)
        yield p.pid, lines
    finally:
        p.kill()
        p.wait()


def bpftool_progs() -> dict[int, dict]:
    out = subprocess.run(["bpftool", "-j", "prog", "show"], check=True, capture_output=True,
                         text=True).stdout
    return {p["id"]: p for p in json.loads(out)}


def fdinfo(pid: int, fd: int) -> dict[str, str]:
    with open(f"/proc/{pid}/fdinfo/{fd}") as f:
        return dict(line.split(":\t", 1) if ":\t" in line else (line, "")
                    for line in f.read().splitlines())


def test_every_program_equals_bpftool_and_fdinfo():
    with ExitStack() as stack:
        holders = [stack.enter_context(held(o)) for o in OBJECTS]
        mine = {(pid, r["id"]): r for pid, recs in holders for r in recs}
        assert len(mine) >= 15, "too few programs loaded to prove anything"
        scan = progs.scan_programs()
        tool = bpftool_progs()
        infos = {key: fdinfo(key[0], rec["fd"]) for key, rec in mine.items()}
    by_id = {p.id: p for p in scan.progs}
    checked = 0
    for (pid, pid_id), rec in mine.items():
        p = by_id[pid_id]
        t = tool[pid_id]
        # the kernel keeps 15 bytes of a name; bpftool prints the whole from the BTF
        assert p.name == t["name"][:15] == rec["name"][:15]
        assert uapi.prog_type_name(p.type) == t["type"]
        assert p.tag == t["tag"]
        assert p.xlated_prog_len == t["bytes_xlated"]
        assert p.jited_prog_len == t.get("bytes_jited", 0)
        assert p.memlock == t["bytes_memlock"]
        assert list(p.map_ids) == t.get("map_ids", [])
        assert p.btf_id == t.get("btf_id", 0)
        assert p.created_by_uid == t["uid"]
        # the holder's own fdinfo of its program fd
        info = infos[(pid, pid_id)]
        assert int(info["prog_id"]) == p.id
        assert int(info["memlock"]) == p.memlock
        assert [o.pid for o in p.owners] == [pid]
        checked += 1
    assert checked == len(mine)
    # every program bpftool lists, the walk found (and the other way round, but for
    # programs loaded or unloaded between the two reads by others on this host)
    assert set(tool) & set(by_id) >= {i for _pid, i in mine}


def test_btf_objects_and_jit():
    with held(OBJECTS[0]) as (pid, recs):
        scan = progs.scan_programs()
        out = subprocess.run(["bpftool", "-j", "btf", "show"], check=True,
                             capture_output=True, text=True).stdout
    tool = {b["id"]: b for b in json.loads(out)}
    btf_of = {p.id: p.btf_id for p in scan.progs}
    mine = {b.id: b for b in scan.btfs}
    for r in recs:
        b = mine[btf_of[r["id"]]]
        assert b.btf_size == tool[b.id]["size"]
        assert not b.kernel_btf and tool[b.id]["kernel"] is False
        assert pid in [o.pid for o in b.owners]
    vmlinux = [b for b in scan.btfs if b.name == "vmlinux"]
    assert vmlinux and vmlinux[0].kernel_btf
    assert vmlinux[0].btf_size == os.path.getsize("/sys/kernel/btf/vmlinux")
    with open("/proc/sys/net/core/bpf_jit_limit") as f:
        assert scan.jit.limit == int(f.read())
    # programs are jited here (bpftool says so): their images live in what vmallocinfo shows
    assert scan.jit.in_use is not None and scan.jit.in_use >= sum(
        p.jited_prog_len for p in scan.progs)


def test_pins_and_links():
    with ExitStack() as stack:
        pid, recs = stack.enter_context(held(OBJECTS[0]))
        mnt = stack.enter_context(bpffs())
        target = recs[0]
        fd = bpfsys.prog_fd_by_id(target["id"])
        try:
            bpfsys.obj_pin(fd, os.path.join(mnt, "pinned_prog"))
        finally:
            os.close(fd)
        scan = progs.scan_programs(bpffs=[mnt])
        by_id = {p.id: p for p in scan.progs}
        assert by_id[target["id"]].pins == (os.path.join(mnt, "pinned_prog"),)
        assert all(not by_id[r["id"]].pins for r in recs[1:])
        out = subprocess.run(["bpftool", "-j", "link", "show"], check=True,
                             capture_output=True, text=True).stdout
        links = json.loads(out)
        for link in links:
            if link["prog_id"] in by_id:
                assert link["id"] in by_id[link["prog_id"]].links


def test_vmallocinfo_parse():
    raw = (b"0x1-0x2   8192 bpf_prog_alloc_no_stats+0x39/0x230 pages=1 vmalloc N0=1\n"
           b"0x3-0x4 2101248 bpf_prog_pack_alloc+0x28b/0x3a0 pages=512 vmalloc N0=512\n"
           b"0x5-0x6   12288 bpf_jit_binary_alloc+0x62/0xf0 pages=2 vmalloc N0=2\n")
    assert progs.parse_vmallocinfo(raw) == (514 * 4096, 1)


def test_snapshot_document_round_trip_and_sums():
    """`bpfmem snapshot` with programs: the document's programs equal the kernel's, read
    back into the same records, and the sums per cgroup and process add up."""
    from bpfmem import api
    from bpfmem.parse.snapshot import snapshot_from_dict
    from bpfmem.report.documents import snapshot_document
    with ExitStack() as stack:
        holders = [stack.enter_context(held(o)) for o in OBJECTS[:4]]
        snap = api.scan_node(programs=True)
        tool = bpftool_progs()
    doc = json.loads(json.dumps(snapshot_document(api.snapshot_view(snap, None))))
    mine = {r["id"]: pid for pid, recs in holders for r in recs}
    for prog_id, pid in mine.items():
        rec = doc["programs"][str(prog_id)]
        assert rec["memlock"] == tool[prog_id]["bytes_memlock"]
        assert rec["jited_prog_len"] == tool[prog_id]["bytes_jited"]
        assert rec["owners"] == [{"pid": pid}]
        assert doc["processes"][str(pid)]["comm"] == "libbpf_maps"
    back = snapshot_from_dict(doc)
    assert back.progs == tuple(sorted(snap.progs, key=lambda p: p.id))
    assert back.btfs == tuple(sorted(snap.btfs, key=lambda b: b.id))
    assert back.jit == snap.jit
    per_pid = {g["pid"]: g for g in doc["program_processes"]}
    for pid, recs in holders:
        assert per_pid[pid]["programs"] == len(recs)
        assert per_pid[pid]["memlock"] == sum(tool[r["id"]]["bytes_memlock"] for r in recs)
    t = doc["totals"]["programs"]
    assert t["programs"] == len(snap.progs)
    assert t["memlock"] == sum(g["memlock"] for g in doc["program_cgroups"])
    assert t["jited_prog_len"] == sum(p.jited_prog_len for p in snap.progs)


def test_exporter_program_metrics():
    """The exporter's page of a scan with programs: one sample per program per family with
    the maps' labels, values equal to bpftool's; the node's sums; bpf_jit_limit."""
    from bpfmem import api
    from bpfmem.api.export import Exposition, ScanCache
    from bpfmem.report.prometheus import PROGRAM_METRIC_NAMES
    with ExitStack() as stack:
        holders = [stack.enter_context(held(o)) for o in OBJECTS[:2]]
        cache = ScanCache(lambda: api.scan_node(programs=True), 3600)
        page = Exposition(cache).page()[0].decode()
        tool = bpftool_progs()
    for name in PROGRAM_METRIC_NAMES:
        assert f"# TYPE {name} gauge" in page, name
    samples = {}
    for line in page.splitlines():
        if line.startswith("bpfmem_prog_"):
            head, value = line.rsplit(" ", 1)
            samples[head] = float(value)
    for pid, recs in holders:
        for r in recs:
            t = tool[r["id"]]
            mem = [v for k, v in samples.items() if k.startswith("bpfmem_prog_memlock_bytes{")
                   and f'id="{r["id"]}"' in k]
            assert mem == [t["bytes_memlock"]]
            key = next(k for k in samples if k.startswith("bpfmem_prog_jited_bytes{")
                       and f'id="{r["id"]}"' in k)
            assert samples[key] == t["bytes_jited"]
            assert 'owner_comm="libbpf_maps"' in key and f'type="{t["type"]}"' in key
    with open("/proc/sys/net/core/bpf_jit_limit") as f:
        limit = int(f.read())
    line = next(x for x in page.splitlines() if x.startswith("bpfmem_jit_limit_bytes "))
    assert float(line.split()[1]) == limit
    node = next(x for x in page.splitlines() if x.startswith("bpfmem_node_programs "))
    assert float(node.split()[1]) >= sum(len(recs) for _pid, recs in holders)


def test_top_shows_programs_beside_maps():
    import sys
    with held(OBJECTS[0]) as (_pid, recs):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
                   COLUMNS="200")
        r = subprocess.run([sys.executable, "-m", "bpfmem", "top", "-n", "1"],
                           capture_output=True, text=True, timeout=120, env=env,
                           stdin=subprocess.DEVNULL)
        tool = bpftool_progs()
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("programs "))
    n = int(line.split()[1].replace(",", ""))
    assert n >= len(recs) and abs(n - len(tool)) <= 2   # others load programs meanwhile
    assert "memlock" in line and "JIT vmalloc" in line
    # the BTF figure says what it counts: the BTF processes loaded, and in how many objects
    import re
    m = re.search(r"BTF loaded (\S+) in ([\d,]+) objects?", line)
    assert m, line
    assert int(m[2].replace(",", "")) >= 1 and m[1] != "0"   # the held object's own BTF


def test_a_thousand_programs_each_with_its_owner():
    """A farm of 10 processes holding 100 programs each: the walk finds every one, owned by
    the process that loaded it, with bpftool's memlock."""
    from progfarm import ProgFarm
    with ProgFarm(children=10, per_child=100) as farm:
        scan = progs.scan_programs(pins=False)
        tool = bpftool_progs()
    by_id = {p.id: p for p in scan.progs}
    n = 0
    for pid, ids in farm.children:
        for i in ids:
            p = by_id[i]
            assert [o.pid for o in p.owners] == [pid]
            assert p.memlock == tool[i]["bytes_memlock"] == 4096
            n += 1
    assert n == 1000


def test_pod_programs_part():
    """`pod` on a scratch cgroup whose process loaded programs (the harness, started inside
    it): "BPF programs" is their memlock (bpftool's), taken out of the kernel part; the parts
    still add up to the usage; the cgroup's kernel memory holds at least that much."""
    from bpfmem import api
    from bpfmem.host.cgroup import scratch_cgroup
    binary = libbpf_harness.ensure_built()
    if binary is None:
        pytest.skip("the libbpf harness cannot be built here")
    with scratch_cgroup(kind="pod") as cg:
        procs = os.path.join(cg.fs_path, "cgroup.procs")

        def enter():
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        p = subprocess.Popen([str(binary), "hold", str(OBJECTS[0])], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             preexec_fn=enter)
        try:
            recs = []
            for line in p.stdout:
                rec = json.loads(line)
                if rec["kind"] == "ready":
                    break
                recs.append(rec)
            view = api.pod_view(cgroup=cg.fs_path, profile=api.profile(), go=False)
            tool = bpftool_progs()
            btf_tool = {b["id"]: b for b in json.loads(subprocess.run(
                ["bpftool", "-j", "btf", "show"], check=True, capture_output=True,
                text=True).stdout)}
        finally:
            p.kill()
            p.wait()
    want = sum(tool[r["id"]]["bytes_memlock"] for r in recs)
    assert len(recs) == 3 and want == 3 * 4096
    assert view.component("programs") == want
    # the object's BTF, loaded with its programs: a part of 0 bytes (charged to no cgroup:
    # tests/test_btf_charge.py), its size (bpftool's) in a note
    btf_ids = {tool[r["id"]]["btf_id"] for r in recs}
    assert view.component("btf") == 0
    (note,) = [n for n in view.notes if "BTF object" in n]
    from bpfmem.units import format_size
    assert note.startswith(f"{len(btf_ids)} BTF object(s)")
    assert format_size(sum(btf_tool[i]["size"] for i in btf_ids)) in note
    assert sum(c.bytes or 0 for c in view.components) == view.usage


def test_memo_keeps_program_info_between_scans():
    """The exporter's incremental scans: a program seen before is not read again, one that
    went is forgotten, and the figures are the same as a fresh walk's."""
    from progfarm import ProgFarm
    known: dict = {}
    jit: dict = {}
    with ProgFarm(children=1, per_child=5) as farm:
        first = progs.scan_programs(pins=False, known=known, jit_cache=jit)
        ids = set(farm.children[0][1])
        assert ids <= set(known) and ids <= jit["ids"]
        again = progs.scan_programs(pins=False, known=known, jit_cache=jit)
        fresh = progs.scan_programs(pins=False)
        assert again.jit is first.jit or again.jit == first.jit
    mine = lambda s: sorted((p for p in s.progs if p.id in ids), key=lambda p: p.id)  # noqa
    assert mine(first) == mine(again) == mine(fresh)
    progs.scan_programs(pins=False, known=known, jit_cache=jit)
    assert not ids & set(known) and not ids & jit["ids"]   # read again: programs went


def test_live_filters_apply_to_programs():
    """snapshot --owner/--cgroup/--pid keep the programs of matching holders only."""
    from bpfmem import api
    with ExitStack() as stack:
        (pid_a, recs_a), (pid_b, recs_b) = (stack.enter_context(held(o))
                                            for o in OBJECTS[:2])
        snap = api.scan_node(programs=True)
    only_a = api.filter_snapshot(snap, {"pid": pid_a})
    assert {p.id for p in only_a.progs} == {r["id"] for r in recs_a}
    by_comm = api.filter_snapshot(snap, {"owner": "libbpf_maps"})
    assert {r["id"] for r in recs_a + recs_b} <= {p.id for p in by_comm.progs}
    assert not api.filter_snapshot(snap, {"owner": "no-such-comm-*"}).progs


def test_a_program_held_by_its_link_and_a_link_pin():
    """An iterator program (bpfmem's own owner walk) whose only holder is a link this
    process holds, the link pinned on a scratch bpffs: the walk lists the link on the
    program, this process among its link holders (not its program-fd holders), and the link's
    pin; bpftool agrees on the link."""
    from bpfmem.host import owner_iter
    try:
        lay = owner_iter.read_layout()
    except Exception as e:     # noqa: BLE001 - no BTF, kallsyms hidden...
        pytest.skip(f"the iterator cannot run here: {e}")
    with ExitStack() as stack:
        mnt = stack.enter_context(bpffs())
        prog = bpfsys.prog_load(bpfsys.BPF_PROG_TYPE_TRACING, owner_iter.program(lay),
                                expected_attach_type=bpfsys.BPF_TRACE_ITER,
                                attach_btf_id=lay.attach_btf_id, name="i25_link_test")
        try:
            link = bpfsys.link_create(prog, bpfsys.BPF_TRACE_ITER)
        finally:
            os.close(prog)                      # the link keeps the program
        stack.callback(os.close, link)
        bpfsys.obj_pin(link, os.path.join(mnt, "the_link"))
        scan = progs.scan_programs(bpffs=[mnt])
        out = subprocess.run(["bpftool", "-j", "link", "show"], check=True,
                             capture_output=True, text=True).stdout
    mine = [p for p in scan.progs if p.name == "i25_link_test"]
    assert len(mine) == 1
    p = mine[0]
    assert len(p.links) == 1 and not p.owners
    assert os.getpid() in [o.pid for o in p.link_owners]
    assert p.pins == (os.path.join(mnt, "the_link"),)
    tool = {x["id"]: x for x in json.loads(out)}
    assert tool[p.links[0]]["prog_id"] == p.id


def test_one_owner_walk_finds_programs_links_and_btf_fds_as_proc_does():
    """The kernel iterator of every BPF fd (the scan's one owner walk when programs are
    listed) gives this process's program, link, BTF and map fds with the ids /proc's fdinfo
    shows; the only others are its own program and link, open while it ran. A scan with
    programs then finds the program's holder as the /proc walk does."""
    from bpfmem import api
    from bpfmem.host import owner_iter, procfs
    from bpfmem.parse.insn import alu64, exit_insn
    try:
        lay = owner_iter.read_layout()
        owner_iter.bpf_fds_raw()
    except Exception as e:     # noqa: BLE001 - no BTF, kallsyms hidden...
        pytest.skip(f"the iterator cannot run here: {e}")
    me = os.getpid()
    with ExitStack() as stack:
        prog = bpfsys.prog_load(1, alu64("mov", 0, imm=0) + exit_insn(), name="i31_prog")
        stack.callback(os.close, prog)
        iprog = bpfsys.prog_load(bpfsys.BPF_PROG_TYPE_TRACING, owner_iter.program(lay),
                                 expected_attach_type=bpfsys.BPF_TRACE_ITER,
                                 attach_btf_id=lay.attach_btf_id, name="i31_link")
        try:
            link = bpfsys.link_create(iprog, bpfsys.BPF_TRACE_ITER)
        finally:
            os.close(iprog)
        stack.callback(os.close, link)
        btf = bpfsys.btf_fd_by_id(next(iter(bpfsys.btf_ids())))
        stack.callback(os.close, btf)
        mfd = bpfsys.map_create(1, 4, 4, 8, 0, "i31_map")
        stack.callback(os.close, mfd)
        map_recs, others = owner_iter.parse_fd_records(owner_iter.bpf_fds_raw())
        walked = {(f.pid, f.fd, f.kind, f.id, f.prog_id if f.kind == "link" else 0)
                  for f in progs.scan_bpf_fds([me])}
        walked_maps = {(f.pid, f.fd, f.map_id) for f in procfs.scan_map_fds([me])}
        by_iter = api.scan_node(programs=True, owners_method="iterator", pins=False)
        by_proc = api.scan_node(programs=True, owners_method="proc", pins=False)
    mine = {o for o in others if o[0] == me}
    assert {k for _p, _f, k, _i, _l in walked} == {"prog", "link", "btf"}
    assert walked <= mine
    assert sorted(k for _p, _f, k, _i, _l in mine - walked) == ["link", "prog"]  # its own
    assert {r for r in map_recs if r[0] == me} == walked_maps
    assert by_iter.owners_from == "kernel iterator"
    pid_of = {p.name: p for p in by_proc.progs}
    for name in ("i31_prog", "i31_link"):
        ours = next(p for p in by_iter.progs if p.name == name)
        theirs = pid_of[name]
        assert (ours.owners, ours.link_owners, ours.links) == (
            theirs.owners, theirs.link_owners, theirs.links)
    assert me in [o.pid for o in next(p for p in by_iter.progs
                                      if p.name == "i31_prog").owners]


def _one_by_one(prog_id: int):
    """(bpf_prog_info fields, fdinfo memlock) of one program, through an fd of its own."""
    from bpfmem.errors import ObjectGone
    try:
        fd = bpfsys.prog_fd_by_id(prog_id)
    except ObjectGone:
        return None
    try:
        i = bpfsys.prog_info(fd)
        return (i.id, i.type, progs.prog_fdinfo(fd), i.xlated_prog_len, i.jited_prog_len,
                i.btf_id, i.verified_insns, i.created_by_uid, i.load_time, tuple(i.map_ids),
                i.tag, i.name)
    finally:
        os.close(fd)


def test_the_program_iterator_reports_what_bpf_prog_info_and_fdinfo_report():
    """host/prog_iter.py's record of every program (libbpf-loaded objects with BTF, global
    data, subprograms and callbacks, maps in maps; a program of six maps and two
    subprograms made here) equals BPF_OBJ_GET_INFO_BY_FD field by field and fdinfo's
    memlock; its own program is not listed; a scan's programs through the iterator equal
    the walk one by one."""
    from bpfmem import api
    from bpfmem.host import prog_iter
    from bpfmem.parse.insn import alu64, encode, exit_insn, ld_imm64
    try:
        prog_iter.progs_raw()
    except prog_iter.ProgsUnavailable as e:
        pytest.skip(f"no program iterator here: {e}")
    maps = [bpfsys.map_create(2, 4, 8, 4, 0, f"pi{i}") for i in range(6)]
    code = b"".join(ld_imm64(1, fd, src=1) for fd in maps)      # BPF_PSEUDO_MAP_FD
    code += (encode(0x85, 0, 1, 0, 2) + alu64("mov", 0, imm=0) + exit_insn()   # call +2
             + alu64("mov", 0, imm=1) + exit_insn())
    mine = bpfsys.prog_load(1, code, name="pi_sixmaps")
    try:
        with ExitStack() as stack:
            for o in OBJECTS:
                stack.enter_context(held(o))
            data, own = prog_iter.progs_raw()
            recs, _gone = prog_iter.programs(data, skip=own)
            assert own is not None and own not in {r.id for r in recs}
            six = bpfsys.prog_info(mine)
            checked = subprogs = many = 0
            for r in recs:
                expected = _one_by_one(r.id)
                if expected is None:        # another's program, gone meanwhile
                    continue
                assert tuple(r)[:12] == expected, r
                checked += 1
                subprogs += r.subprograms > 0
                many += len(r.map_ids) > prog_iter.INLINE_MAPS
            assert checked >= 15 and subprogs >= 2 and many >= 1
            assert next(r for r in recs if r.id == six.id).map_ids == tuple(six.map_ids)
            fast = api.scan_node(programs=True, pins=False).progs
            slow = progs.scan_programs(pins=False).progs
        ids = {r.id for r in recs} & {p.id for p in fast} & {p.id for p in slow}
        assert len(ids) >= 15
        by_id = {p.id: p for p in slow}
        assert all(p == by_id[p.id] for p in fast if p.id in ids)
    finally:
        os.close(mine)
        for fd in maps:
            os.close(fd)


def test_the_light_program_listing_follows_programs_and_their_maps(monkeypatch):
    """prog_iter's light listing (each program's id and map count) equals what the full
    listing of the same programs gives (light_of), with BPF_OBJ_GET_INFO_BY_FD's map count;
    with a memo, a scan whose light listing is as before does not read the full one, and a
    program loaded meanwhile or a map bound to a program (BPF_PROG_BIND_MAP) is seen by
    the next scan (both fail when the full listing is never read again)."""
    from bpfmem import api
    from bpfmem.host import prog_iter
    from bpfmem.parse.insn import alu64, exit_insn, ld_imm64
    kept: dict = {}
    try:
        prog_iter.progs_light_raw(kept)
    except prog_iter.ProgsUnavailable as e:
        pytest.skip(f"no program iterator here: {e}")
    finally:
        from bpfmem.host.owner_iter import close_kept
        close_kept(kept)
    maps = [bpfsys.map_create(2, 4, 8, 4, 0, f"pl{i}") for i in range(3)]
    code = b"".join(ld_imm64(1, fd, src=1) for fd in maps[:2])    # two maps
    code += alu64("mov", 0, imm=0) + exit_insn()
    loaded = [bpfsys.prog_load(1, code, name="pl_two")]
    memo = api.scan_memo(api.profile())
    fulls = []
    real = prog_iter.progs_raw

    def spy(kept=None):
        fulls.append(1)
        return real(kept)
    try:
        prog_iter.progs_light_raw(kept)
        full, _own = prog_iter.progs_raw(kept)
        light = prog_iter.progs_light_raw(kept)
        assert light == prog_iter.light_of(full)
        pairs = dict(prog_iter.LIGHT.iter_unpack(light))
        two = bpfsys.prog_info(loaded[0])
        assert pairs[two.id] == len(two.map_ids) == 2
        monkeypatch.setattr(prog_iter, "progs_raw", spy)

        def scan():
            return {p.id: p for p in api.scan_node(programs=True, pins=False,
                                                   memo=memo).progs}
        for _ in range(3):          # the iterators' own programs loaded and listed
            scan()
        fulls.clear()
        assert two.id in scan() and not fulls         # as before: no full listing
        loaded.append(bpfsys.prog_load(1, alu64("mov", 0, imm=0) + exit_insn(),
                                       name="pl_new"))
        new = bpfsys.prog_info(loaded[1]).id
        assert new in scan() and fulls
        fulls.clear()
        bpfsys.prog_bind_map(loaded[0], maps[2])
        bound = scan()
        assert fulls and bound[two.id].map_ids == tuple(bpfsys.prog_info(loaded[0]).map_ids)
        assert len(bound[two.id].map_ids) == 3
    finally:
        memo.close()
        close_kept(kept)
        for fd in loaded + maps:
            os.close(fd)


def test_the_program_layout_of_6_1():
    """6.1's BTF (committed) has every field the program iterator reads."""
    import lzma
    from pathlib import Path
    from bpfmem.host import prog_iter
    btf = lzma.decompress((Path(__file__).parent / "data" / "btf" /
                           "6.1.0-57-cloud-amd64.btf.xz").read_bytes())
    lay = prog_iter.parse_prog_layout(btf)
    from bpfmem.values import fields
    assert lay.attach_btf_id and min(getattr(lay, f.name) for f in fields(lay)) >= 0
    assert lay.tag > 0
    assert prog_iter.program(lay) and prog_iter.light_program(lay)
