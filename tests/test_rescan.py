"""Incremental scans (the exporter's): a scan with a ScanMemo gives the same maps as a full
scan, reads again what changed (entries, new and closed maps, pins, programs' maps), and
reuses what cannot have changed. Real maps created by this process; compared with a fresh
full scan of the same maps (other processes' maps on the machine are left out)."""

from __future__ import annotations

import os
import struct
import time

import pytest

from conftest import bpffs, is_root

from bpfmem import api
from bpfmem.analysis.live import memlock_behaviour
from bpfmem.host import bpfsys
from bpfmem.host.rescan import SETTLE_NS, ScanMemo, settled
from bpfmem.uapi import MapType as T

pytestmark = [pytest.mark.kernel,
              pytest.mark.skipif(not is_root(), reason="needs root (CAP_SYS_ADMIN)")]
PREFIX = f"rs{os.getpid() % 10000}_"


HOLDERS: set[int] = set()       # the pids of this module's holder processes


def _ours(snap) -> dict:
    """This test's maps, with only this process and its holders as owners: a scanner
    running beside (bpftool, another bpfmem) holds every map for a moment, and can be seen
    by one of two scans."""
    from dataclasses import replace
    mine = HOLDERS | {os.getpid()}
    return {m.id: replace(m, owners=tuple(o for o in m.owners if o.pid in mine))
            for m in snap.maps if m.name.startswith(PREFIX)}


def _scan(memo=None, entries=True):
    return _ours(api.scan_node(entries=entries, owners_method="iterator", memo=memo))


@pytest.fixture
def maps():
    fds = {}
    plans = {"hash": (T.HASH, 8, 16, 256, 0), "nopre": (T.HASH, 8, 16, 256, 1),
             "array": (T.ARRAY, 4, 32, 16, 0), "lru": (T.LRU_HASH, 8, 8, 128, 0),
             "lpm": (T.LPM_TRIE, 8, 8, 64, 1)}
    try:
        for name, (t, k, v, m, f) in plans.items():
            fds[name] = bpfsys.map_create(t, k, v, m, f, PREFIX + name)
        yield fds
    finally:
        for fd in fds.values():
            os.close(fd)


def _fill(fd: int, keys, value_size: int = 16) -> None:
    for k in keys:
        bpfsys.map_update(fd, struct.pack("<Q", k), bytes(value_size))


def test_incremental_scans_equal_full_scans_as_maps_change(maps):
    prof = api.profile()
    memo = api.scan_memo(prof, full_every=1000)
    _fill(maps["hash"], range(5))
    _fill(maps["nopre"], range(7))
    first = _scan(memo)
    assert first == _scan()
    again = _scan(memo)
    assert again == _scan() and memo.reused > 0
    ids = {m.name[len(PREFIX):]: i for i, m in again.items()}
    assert ids["array"] in memo.fields and ids["hash"] in memo.fields   # memlock kept
    nopre = again[ids["nopre"]]
    if nopre.entries_method == "kernel":        # 6.6+: the kernel's own count, every scan
        assert again[ids["hash"]].entries_method == "kernel"
    elif memlock_behaviour(nopre, prof) == "counts":   # 6.4+: kept while memlock is
        assert ids["nopre"] in memo.counts and ids["nopre"] not in memo.fields
    if memlock_behaviour(again[ids["lpm"]], prof) == "counts":
        assert ids["lpm"] in memo.counts      # a trie's count: kept while its memlock is
    # entries change: preallocated (counted again) and not preallocated (memlock moves)
    _fill(maps["hash"], range(5, 9))
    _fill(maps["nopre"], range(7, 30))
    after = _scan(memo)
    assert after == _scan()
    by_name = {m.name[len(PREFIX):]: m for m in after.values()}
    assert by_name["hash"].entries == 9 and by_name["nopre"].entries == 30
    # a map closed and a new one made
    os.close(maps.pop("lru"))
    maps["new"] = bpfsys.map_create(T.HASH, 8, 8, 32, 0, PREFIX + "new")
    later = _scan(memo)
    assert later == _scan()
    assert {m.name[len(PREFIX):] for m in later.values()} == {"hash", "nopre", "array",
                                                              "lpm", "new"}
    assert set(memo.maps) >= set(later) and not (set(first) - set(later)) & set(memo.maps)


def test_pins_are_walked_again_only_when_a_directory_changed(maps):
    """A pin and an unpin in one directory, as fast as they come: each is seen. (Both can
    fall in one tick of the clock that stamps mtimes: fresh stamps are not trusted.)"""
    prof = api.profile()
    memo = api.scan_memo(prof, full_every=1000)
    with bpffs() as d:
        time.sleep(SETTLE_NS / 1e9 + 0.05)      # the new mount's root: settled
        before = _scan(memo, entries=False)
        stamps = memo.stamps
        _scan(memo, entries=False)
        assert memo.stamps == stamps            # nothing pinned: the same stamps, no walk
        os.makedirs(os.path.join(d, "sub"))
        path = os.path.join(d, "sub", "pinned")
        bpfsys.obj_pin(maps["array"], path)
        pinned = _scan(memo, entries=False)
        assert pinned == _scan(entries=False)
        arr = next(m for m in pinned.values() if m.name == PREFIX + "array")
        assert path in arr.pins and not before[arr.id].pins
        assert memo.stamps is None              # "sub" just changed: not trusted yet
        os.unlink(path)                         # (perhaps within the same tick)
        gone = _scan(memo, entries=False)
        assert path not in gone[arr.id].pins


def test_the_mount_table_is_read_again_when_the_kernel_flags_a_change(maps):
    """The exporter keeps /proc/self/mountinfo open and reads it again only when the kernel
    flags a change: a bpffs mounted between two scans, and a pin in it, are seen by the
    next scan; unmounted, they are gone from the one after; an unchanged table is not read
    again (nothing else mounts while the suite runs)."""
    from bpfmem.host import procfs
    prof = api.profile()
    memo = api.scan_memo(prof, full_every=1000)
    try:
        api.scan_node(owners_method="iterator", memo=memo)
        watch = memo.mount_watch
        reads = watch.reads
        api.scan_node(owners_method="iterator", memo=memo)
        assert watch.reads == reads                     # no change: not read again
        with bpffs() as d:
            path = os.path.join(d, "pinned")
            bpfsys.obj_pin(maps["array"], path)
            snap = api.scan_node(owners_method="iterator", memo=memo)
            assert watch.reads == reads + 1
            assert d in snap.bpffs and sorted(snap.bpffs) == sorted(procfs.bpffs_mounts())
            arr = next(m for m in snap.maps if m.name == PREFIX + "array")
            assert path in arr.pins
        after = api.scan_node(owners_method="iterator", memo=memo)
        assert d not in after.bpffs
        assert path not in next(m for m in after.maps if m.name == PREFIX + "array").pins
    finally:
        memo.close()
    assert memo.mount_watch is None and watch.fd == -1


def test_fresh_stamps_are_not_settled():
    """Stamps are trusted only when every directory changed at least SETTLE_NS before."""
    now = 10 * SETTLE_NS
    old = ("/sys/fs/bpf", 1, now - SETTLE_NS)
    assert settled((old,), now)
    assert settled((), now)
    assert not settled((old, ("/sys/fs/bpf/x", 2, now - SETTLE_NS + 1)), now)
    assert not settled((("/sys/fs/bpf", 1, now + 5),), now)   # a clock ahead of ours


def test_memlock_behaviour_is_the_kernels(maps):
    """"static" maps keep their fdinfo memlock as entries arrive; "counts" maps move it with
    every entry (checked on this kernel, not only by the model)."""
    from bpfmem.host.live import _self_fdinfo
    prof = api.profile()
    infos = {n: bpfsys.map_info(fd) for n, fd in maps.items()}
    kinds = {n: memlock_behaviour(i, prof) for n, i in infos.items()}
    assert kinds["array"] == kinds["hash"] == kinds["lru"] == "static"
    for name in ("hash", "nopre"):
        fd = maps[name]
        m0 = _self_fdinfo(fd)[0]
        _fill(fd, range(100, 103))
        m1 = _self_fdinfo(fd)[0]
        if kinds[name] == "static":
            assert m1 == m0
        elif kinds[name] == "counts":
            assert m1 > m0


def test_a_full_scan_every_n_forgets_everything():
    memo = ScanMemo(full_every=3)
    fulls = [memo.begin() for _ in range(7)]
    assert fulls == [True, False, False, True, False, False, True]
    memo.fields[1] = (4096, False)
    memo.maps[1] = object()
    memo.begin(), memo.begin()
    assert memo.begin() and not memo.fields and not memo.maps


class _Holder:
    """A child process that holds the map fds it is sent (SCM_RIGHTS) until told to drop
    them; killed by its pid and reaped by close()."""

    def __init__(self):
        import socket
        self._socket = socket
        self.sock, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            try:
                self.sock.close()
                held = {}
                while True:
                    msg, fds, _flags, _addr = socket.recv_fds(theirs, 64, 4)
                    if not msg:
                        break
                    cmd, _sep, arg = msg.decode().partition(" ")
                    if cmd == "hold":
                        held[int(arg)] = fds[0]
                    elif cmd == "drop":
                        os.close(held.pop(int(arg)))
                    elif cmd == "name":        # prctl(PR_SET_NAME): a new comm
                        import ctypes
                        ctypes.CDLL(None).prctl(15, arg.encode(), 0, 0, 0)
                    elif cmd == "dup":         # a second fd of the same map
                        held[-int(arg)] = os.dup(held[int(arg)])
                    elif cmd == "fork":        # a child inheriting every fd, asleep
                        child = os.fork()
                        if child == 0:
                            import signal
                            signal.pause()
                            os._exit(0)
                        held["child"] = child
                        theirs.send(str(child).encode().ljust(16))
                        continue
                    elif cmd == "unfork":
                        import signal
                        os.kill(held["child"], signal.SIGKILL)
                        os.waitpid(held.pop("child"), 0)
                    theirs.send(b"k")
            finally:
                os._exit(0)
        theirs.close()
        self.pid = pid
        HOLDERS.add(pid)

    def hold(self, map_id: int, fd: int) -> None:
        self._socket.send_fds(self.sock, [f"hold {map_id}".encode()], [fd])
        assert self.sock.recv(1) == b"k"

    def drop(self, map_id: int) -> None:
        self.sock.send(f"drop {map_id}".encode())
        assert self.sock.recv(1) == b"k"

    def dup(self, map_id: int) -> None:
        self.sock.send(f"dup {map_id}".encode())
        assert self.sock.recv(1) == b"k"

    def fork(self) -> int:
        """The pid of a child the holder forked, which holds the holder's fds."""
        self.sock.send(b"fork")
        self.child = int(self.sock.recv(16))
        HOLDERS.add(self.child)
        return self.child

    def unfork(self) -> None:
        self.sock.send(b"unfork")
        assert self.sock.recv(1) == b"k"
        HOLDERS.discard(self.child)
        self.child = None

    def rename(self, comm: str) -> None:
        self.sock.send(f"name {comm}".encode())
        assert self.sock.recv(1) == b"k"

    def close(self) -> None:
        import signal
        if getattr(self, "child", None):
            try:
                os.kill(self.child, signal.SIGKILL)   # the holder's child: killed by pid
            except ProcessLookupError:
                pass
            HOLDERS.discard(self.child)
        self.sock.close()
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)
        HOLDERS.discard(self.pid)


@pytest.fixture
def holders():
    made = []
    try:
        made.extend(_Holder() for _ in range(2))
        yield made
    finally:
        for h in made:
            h.close()


@pytest.mark.parametrize("entries", [False, True])
def test_incremental_scans_follow_owners_and_maps_as_a_full_scan_does(holders, maps, entries):
    """The changes an exporter's rescans meet, one at a time, each compared with a full
    scan: a map handed to another process, held by two, its first fd closed, dropped by one
    holder; the holder's comm changed; entries added; a new map handed over; a map closed. Programs listed too. (The
    holders are forked before the maps are made: they inherit none of them.)"""
    prof = api.profile()
    memo = api.scan_memo(prof, full_every=1000)
    a, b = holders

    def check():
        inc = _ours(api.scan_node(entries=entries, owners_method="iterator", memo=memo,
                                  programs=True))
        full = _ours(api.scan_node(entries=entries, owners_method="iterator", programs=True))
        assert inc == full
        return {m.name[len(PREFIX):]: m for m in inc.values()}

    check()
    seen = check()                               # nothing of ours moved
    hid = seen["hash"].id
    a.hold(hid, maps["hash"])
    assert [o.pid for o in check()["hash"].owners] == sorted([os.getpid(), a.pid])
    b.hold(hid, maps["hash"])
    os.close(maps.pop("hash"))                   # held by the two others only
    assert [o.pid for o in check()["hash"].owners] == sorted([a.pid, b.pid])
    a.drop(hid)
    assert [o.pid for o in check()["hash"].owners] == [b.pid]
    b.rename("rs_renamed")                       # the holder's comm changes, nothing else
    assert [o.comm for o in check()["hash"].owners] == ["rs_renamed"]
    _fill(maps["nopre"], range(40))
    for k in range(6):
        bpfsys.map_update(maps["lpm"], struct.pack("<I", 32) + struct.pack(">I", k),
                          bytes(8))
    now = check()
    if entries:
        assert now["nopre"].entries == 40 and now["lpm"].entries == 6
    fd = bpfsys.map_create(T.HASH, 8, 8, 32, 0, PREFIX + "handed")
    try:
        a.hold(bpfsys.map_info(fd).id, fd)
    finally:
        os.close(fd)
    os.close(maps.pop("array"))
    now = check()
    assert "array" not in now and [o.pid for o in now["handed"].owners] == [a.pid]
    b.drop(hid)                                  # the last holder: the map is gone
    assert "hash" not in check()


def test_the_iterators_are_loaded_once_and_closed_with_the_memo(maps):
    """An incremental scanner loads its kernel iterators once and keeps their links; the
    memo's close() unloads them (their programs are gone from the kernel)."""
    from bpfmem.errors import ObjectGone
    memo = api.scan_memo(api.profile())
    try:
        api.scan_node(owners_method="iterator", memo=memo, programs=True)
        api.scan_node(owners_method="iterator", memo=memo, programs=True)   # (and rescans')
        kept = dict(memo.iterators)
        if not kept:
            pytest.skip("no kernel iterator runs here")
        # the links and the programs they attach (each kept under the name + ":prog")
        prog_ids = {bpfsys.link_info(fd).prog_id for name, fd in kept.items()
                    if not name.endswith(":prog")}
        assert prog_ids == {bpfsys.prog_info(fd).id for name, fd in kept.items()
                            if name.endswith(":prog")} and prog_ids
        api.scan_node(owners_method="iterator", memo=memo, programs=True)
        assert memo.iterators == kept                       # not loaded again
    finally:
        memo.close()
    assert not memo.iterators
    deadline = time.monotonic() + 10
    while prog_ids and time.monotonic() < deadline:    # freed after an RCU grace period
        for pid in list(prog_ids):
            try:
                os.close(bpfsys.prog_fd_by_id(pid))
            except ObjectGone:
                prog_ids.discard(pid)
        time.sleep(0.05)
    assert not prog_ids


def test_a_rescan_keeps_the_records_of_maps_that_did_not_move_and_sees_a_freeze(maps):
    """A map whose listing record, holders, programs and pins are as before keeps the last
    scan's record object (not rebuilt); a map frozen between two scans moves its listing
    record, and its new record says frozen, as a full scan does; so does a count."""
    prof = api.profile()
    memo = api.scan_memo(prof, full_every=1000)

    def ours(snap):
        return {m.name[len(PREFIX):]: m for m in snap.maps if m.name.startswith(PREFIX)}

    api.scan_node(owners_method="iterator", memo=memo)
    first = ours(api.scan_node(owners_method="iterator", memo=memo))
    again = ours(api.scan_node(owners_method="iterator", memo=memo))
    assert all(again[n] is first[n] for n in first)          # nothing of ours moved
    bpfsys.map_freeze(maps["array"])
    _fill(maps["nopre"], range(3))
    moved = ours(api.scan_node(owners_method="iterator", memo=memo))
    assert moved["array"].frozen is True and first["array"].frozen is False
    assert moved["array"] == _scan(entries=False)[moved["array"].id]
    assert moved["nopre"].memlock > first["nopre"].memlock
    assert moved["nopre"] == _scan(entries=False)[moved["nopre"].id]
    assert moved["hash"] is first["hash"] and moved["lru"] is first["lru"]


def test_a_full_scan_keeps_the_very_records_that_read_as_before(maps):
    """A full scan reads every map again, but a record equal to the scan before's is that
    scan's very object (the exporter's page blocks are kept by identity: an unchanged node's
    full rescan wrote its whole page again, 70-80 ms of 15,000 maps); a map that moved in
    between gets its new record, equal to a scan without memo."""
    prof = api.profile()
    memo = api.scan_memo(prof, full_every=3)

    def ours(snap):
        return {m.name[len(PREFIX):]: m for m in snap.maps if m.name.startswith(PREFIX)}

    scans = [ours(api.scan_node(owners_method="iterator", memo=memo)) for _ in range(3)]
    _fill(maps["nopre"], range(5))
    full = ours(api.scan_node(owners_method="iterator", memo=memo))      # the 4th: full
    assert memo.full_scans == 2
    assert full["nopre"] is not scans[-1]["nopre"]
    assert full["nopre"].memlock > scans[-1]["nopre"].memlock
    assert full["nopre"] == _scan(entries=False)[full["nopre"].id]
    for name in ("hash", "array", "lru", "lpm"):
        assert full[name] is scans[-1][name], name


def test_same_as_before_gives_the_last_tuple_when_nothing_moved():
    class Row:
        def __init__(self, id, v):
            self.id, self.v = id, v

        def __eq__(self, other):
            return (self.id, self.v) == (other.id, other.v)
    memo = ScanMemo(full_every=2)
    last = (Row(1, "a"), Row(2, "b"))
    memo.begin()
    memo.maps, memo.rows = {r.id: r for r in last}, last
    assert memo.begin() is False
    assert memo.same_as_before((Row(1, "a"), Row(2, "b"))) == (Row(1, "a"), Row(2, "b"))
    assert memo.begin() is True                               # a full scan: compared
    assert memo.same_as_before((Row(1, "a"), Row(2, "b"))) is last
    memo.maps, memo.rows = {r.id: r for r in last}, last
    memo.begin(), memo.begin()
    new = memo.same_as_before((Row(1, "a"), Row(2, "c"), Row(3, "d")))
    assert new[0] is last[0] and new[1] is not last[1] and new[1].v == "c" and len(new) == 3
    assert memo.same_as_before(new) is new                    # once, for that full scan


def test_a_holder_moved_to_another_cgroup_is_seen_by_a_rescan(holders, maps):
    """The owner iterator's records carry each process's cgroup ids: a holder moved to
    another memory cgroup, and nothing else, changes its records, and the rescan gives its
    maps the new cgroup (as a full scan does); moved back, the old one."""
    from bpfmem.host.cgroup import memory_cgroup_path, scratch_cgroup
    prof = api.profile()
    memo = api.scan_memo(prof, full_every=1000)
    a, _b = holders
    hid = bpfsys.map_info(maps["hash"]).id
    a.hold(hid, maps["hash"])
    with open(f"/proc/{a.pid}/cgroup") as f:
        home = memory_cgroup_path(f.read())

    def owner_cgroup(snap) -> str | None:
        return next(o.cgroup for m in snap.maps if m.id == hid for o in m.owners
                    if o.pid == a.pid)

    def check() -> str | None:
        inc = api.scan_node(owners_method="iterator", memo=memo, programs=True)
        assert owner_cgroup(inc) == owner_cgroup(
            api.scan_node(owners_method="iterator", programs=True))
        return owner_cgroup(inc)

    assert check() == home
    assert check() == home
    with scratch_cgroup(prefix="bpfmem-rescan-") as cg:
        before = memo.owner_raw
        cg.add_pid(a.pid)
        try:
            moved = check()
            assert moved != home and moved.endswith(os.path.basename(cg.fs_path))
            assert memo.owner_raw != before      # the same fds, new stamps
        finally:
            with open(f"/sys/fs/cgroup/{'memory/' if cg.version == 1 else ''}"
                      f"{home.lstrip('/')}/cgroup.procs", "w") as f:
                f.write(str(a.pid))
    assert check() == home


def test_listing_changes_name_the_maps_whose_record_moved():
    """Two listings of the kernel's map iterator compared: the positions of maps that are new
    or whose count or frozen flag moved, and the ids gone (pure: records made here)."""
    from bpfmem.host.count_iter import RECORD
    from bpfmem.host.live import _listing_changes

    def listing(maps):          # (id, count, frozen)
        return b"".join(RECORD.pack(i, 1, 4, 8, 64, 0, 0, 0, f, c, b"m%d" % i)
                        for i, c, f in maps)
    base = [(10, 1, 0), (11, 2, 0), (12, -1, 0), (13, 5, 0)]
    assert _listing_changes(listing(base), listing(base)) == ([10, 11, 12, 13], [], set())
    counted = [(10, 1, 0), (11, 3, 0), (12, -1, 1), (13, 5, 0)]
    assert _listing_changes(listing(counted), listing(base)) == ([10, 11, 12, 13], [1, 2],
                                                                  set())
    churned = [(10, 1, 0), (12, -1, 0), (13, 6, 0), (14, 0, 0)]
    assert _listing_changes(listing(churned), listing(base)) == ([10, 12, 13, 14], [2, 3],
                                                                  {11})


def test_a_map_vanishing_between_listing_and_opening_leaves_a_rescan_whole(maps, monkeypatch):
    """A rescan that rebuilds a map which vanished after the listing (its open fails) drops
    it and counts it skipped; the next rescan gives the full scan's records."""
    prof = api.profile()
    memo = api.scan_memo(prof, full_every=1000)
    _scan(memo)
    _fill(maps["nopre"], range(3))              # its record moves: rebuilt next
    victim = bpfsys.map_info(maps["nopre"]).id
    real = bpfsys.map_fd_by_id

    def flaky(map_id, flags=bpfsys.BPF_F_RDONLY):
        if map_id == victim:
            from bpfmem.errors import ObjectGone
            raise ObjectGone("gone")
        return real(map_id, flags)
    monkeypatch.setattr(bpfsys, "map_fd_by_id", flaky)
    snap = api.scan_node(entries=True, owners_method="iterator", memo=memo)
    assert victim not in {m.id for m in snap.maps} and snap.skipped >= 1
    monkeypatch.setattr(bpfsys, "map_fd_by_id", real)
    assert _scan(memo) == _scan()


def test_rescans_follow_holders_that_dup_fork_and_exit(holders, maps):
    """Only the processes whose tasks ran since the last scan have their files walked again
    (the task iterator's activity): a holder that dups an fd, forks a child holding its fds,
    and reaps it, each seen by the rescan as by a full scan."""
    prof = api.profile()
    memo = api.scan_memo(prof, full_every=1000)
    a, _b = holders
    hid = bpfsys.map_info(maps["hash"]).id
    a.hold(hid, maps["hash"])

    def check() -> dict:
        inc = _ours(api.scan_node(owners_method="iterator", memo=memo, programs=True))
        full = _ours(api.scan_node(owners_method="iterator", programs=True))
        assert inc == full
        return {o.pid: o.fds for o in inc[hid].owners}

    check()
    assert check() == {os.getpid(): 1, a.pid: 1}
    a.dup(hid)
    assert check() == {os.getpid(): 1, a.pid: 2}
    child = a.fork()
    assert check() == {os.getpid(): 1, a.pid: 2, child: 2}
    a.unfork()
    assert check() == {os.getpid(): 1, a.pid: 2}


def test_one_process_walked_alone_gives_its_records_of_the_whole_walk(holders, maps):
    """The owner iterator attached to one process's tasks (how a rescan walks a process that
    ran) writes that process's records of the walk of every process, byte for byte."""
    from bpfmem.host import owner_iter
    a, b = holders
    a.hold(bpfsys.map_info(maps["hash"]).id, maps["hash"])
    b.hold(bpfsys.map_info(maps["array"]).id, maps["array"])
    try:
        whole = owner_iter.bpf_fds_raw()
    except owner_iter.IteratorUnavailable as e:
        pytest.skip(f"no owner iterator here: {e}")
    size = owner_iter.FD_RECORD.size
    at = owner_iter.STAMPS.size
    for pid in (a.pid, b.pid):
        mine = b"".join(whole[i:i + size] for i in range(0, len(whole), size)
                        if int.from_bytes(whole[i + at:i + at + 4], "little") == pid)
        assert mine and owner_iter.bpf_fds_raw(pid=pid) == mine


def test_a_rescan_keeps_the_records_of_programs_that_did_not_move():
    """A program loaded between two rescans makes the program listing move; the programs
    that did not move keep their last record objects (so the exporter's page keeps their
    block), and the new one is there, as in a full scan."""
    from bpfmem.parse.insn import alu64, exit_insn
    code = alu64("mov", 0, imm=0) + exit_insn()
    memo = api.scan_memo(api.profile(), full_every=1000)
    fds = [bpfsys.prog_load(1, code, name=f"rsp{i}") for i in range(2)]
    try:
        ids = {bpfsys.prog_info(fd).id for fd in fds}
        api.scan_node(owners_method="iterator", memo=memo, programs=True)
        first = {p.id: p for p in api.scan_node(owners_method="iterator", memo=memo,
                                                programs=True).progs if p.id in ids}
        fds.append(bpfsys.prog_load(1, code, name="rsp_new"))
        new_id = bpfsys.prog_info(fds[-1]).id
        later = {p.id: p for p in api.scan_node(owners_method="iterator", memo=memo,
                                                programs=True).progs}
        assert all(later[i] is first[i] for i in ids)
        full = {p.id: p for p in api.scan_node(owners_method="iterator", programs=True).progs}
        assert later[new_id] == full[new_id] and later[new_id].name == "rsp_new"
    finally:
        for fd in fds:
            os.close(fd)


def test_the_activity_of_a_sleeping_process_reads_the_same_and_of_one_that_ran_not(holders):
    """host/owner_iter.activity: a holder asleep reads the same twice; once it has run (it
    took a command) it does not; this process, running as it reads, never reads as before
    (its figures lag while it runs)."""
    from bpfmem.host import owner_iter
    a, _b = holders
    try:
        first = owner_iter.activity(owner_iter.task_stamps_raw())
    except owner_iter.IteratorUnavailable as e:
        pytest.skip(f"no task iterator here: {e}")
    again = owner_iter.activity(owner_iter.task_stamps_raw())
    assert first[a.pid] == again[a.pid]
    assert first[os.getpid()] != again[os.getpid()]
    a.rename("rs_ran")
    after = owner_iter.activity(owner_iter.task_stamps_raw())
    assert after[a.pid] != again[a.pid]


def test_column_changes_equal_a_comparison_map_by_map():
    """The listing's columns compared place by place up to the first id that differs, then by
    id (host/live._column_changes), give what comparing every map by id gives: on random
    pairs of listings with maps gone, new (last and in between), counted and frozen."""
    import random
    from bpfmem.host.live import _column_changes
    rnd = random.Random(3)

    def by_id(new, old):
        ids, counts, frozen = new
        before = dict(zip(old[0], zip(old[1], old[2])))
        return ids, [i for i, key in enumerate(zip(ids, counts, frozen))
                     if before.get(key[0]) != key[1:]], before.keys() - set(ids)
    for _ in range(300):
        ids0 = sorted(rnd.sample(range(1000), rnd.randrange(0, 60)))
        old = (ids0, [rnd.randrange(-1, 3) for _ in ids0], [rnd.randrange(2) for _ in ids0])
        keep = [(i, c + (rnd.random() < 0.1), f if rnd.random() > 0.05 else 1 - f)
                for i, c, f in zip(*old) if rnd.random() > 0.1]
        keep += [(i, 0, 0) for i in rnd.sample(range(1000, 1100), rnd.randrange(0, 4))]
        keep += [(i, 0, 0) for i in rnd.sample(sorted(set(range(1000)) - set(ids0)),
                                               rnd.randrange(0, 3))]
        keep.sort()
        new = tuple(list(col) for col in zip(*keep)) if keep else ([], [], [])
        got, want = _column_changes(new, old), by_id(new, old)
        assert (got[0], sorted(got[1]), got[2]) == (want[0], sorted(want[1]), want[2])


def test_each_slice_comes_due_once_a_round():
    """ScanMemo.recheck spreads the checking over SLICES slices: the t-th turn, t * recheck
    / SLICES seconds into the round, is slice (t - 1) % SLICES's; a scan takes every turn
    that came since the last one, and a long pause every slice once (pure: a clock of ours)."""
    from bpfmem.host.rescan import SLICES
    now = [0.0]
    memo = ScanMemo(recheck=float(SLICES), clock=lambda: now[0])   # a turn a second
    assert memo.begin() is True and memo.due == frozenset()
    seen: list[int] = []
    for step in range(1, 2 * SLICES * 3 + 1):          # two rounds, a scan every 1/3 s
        now[0] = step / 3
        assert memo.begin() is False
        seen += sorted(memo.due)
    assert seen == [t % SLICES for t in range(2 * SLICES)]
    now[0] += 0.5
    memo.begin()
    assert memo.due == frozenset()
    now[0] += 10 * SLICES                                # asleep for ten rounds
    memo.begin()
    assert memo.due == frozenset(range(SLICES))          # every slice, once
    memo.recheck = 0
    now[0] += 5 * SLICES
    memo.begin()
    assert memo.due == frozenset()                       # 0: never


def test_kept_memlock_is_taken_on_trust_until_its_slice_comes_due(maps):
    """A memlock the model says cannot move is kept between scans, and a map rebuilt for
    another reason takes it from the memo; when the map's slice comes due, its memlock is
    read from the kernel again (a wrong kept figure is so corrected within ``recheck``
    seconds), and the maps of the other slices keep their very records. A map whose kept
    memlock a check found moved is not taken on trust again."""
    from bpfmem.host.live import _self_fdinfo
    from bpfmem.host.rescan import SLICES
    now = [0.0]
    memo = api.scan_memo(api.profile(), recheck=float(SLICES))   # a turn a second
    memo.clock = lambda: now[0]

    def scan() -> dict:
        return {m.id: m for m in api.scan_node(owners_method="iterator", memo=memo).maps}

    aid = bpfsys.map_info(maps["array"]).id
    truth = _self_fdinfo(maps["array"])[0]
    ours = {bpfsys.map_info(fd).id for fd in maps.values()}
    first = scan()
    assert memo.fields[aid] == truth == first[aid].memlock
    memo.fields[aid] = truth + 4096      # a kept figure gone wrong (as a wrong model's)
    memo.again.add(aid)                  # and the map looked at again for another reason
    trusted = scan()
    assert trusted[aid].memlock == truth + 4096
    now[0] = aid % SLICES + 1.01         # the turn of the array's slice
    again = scan()
    assert aid % SLICES in memo.due and aid in memo.due_maps
    assert again[aid].memlock == truth
    for mid in ours - memo.due_maps:
        assert again[mid] is trusted[mid]
    # the model's claim failed for it: from now on its memlock is read at every scan
    assert aid in memo.untrusted and aid not in memo.fields and aid in memo.again
    later = scan()
    assert later[aid].memlock == truth and aid not in memo.fields and aid in memo.again
    others = ours - {aid}
    assert others and not others & memo.untrusted


def test_maps_checked_again_that_read_as_before_stay_the_same_records(maps, monkeypatch):
    """A whole round of checks (every slice due) reads every map again: those that read as
    before keep their very records, so what is kept by identity downstream stands."""
    from bpfmem.host.rescan import SLICES
    now = [0.0]
    memo = api.scan_memo(api.profile(), recheck=60.0)
    memo.clock = lambda: now[0]
    ours = {bpfsys.map_info(fd).id for fd in maps.values()}

    def scan() -> dict:
        return {m.id: m for m in api.scan_node(owners_method="iterator", memo=memo).maps
                if m.id in ours}
    from bpfmem.host import live
    scan()
    before = scan()
    rebuilt: set[int] = set()
    real_rows = live._rows

    def rows_spy(recs, *a, **kw):
        recs = list(recs)
        rebuilt.update(r[0] for r in recs)
        return real_rows(recs, *a, **kw)
    monkeypatch.setattr(live, "_rows", rows_spy)
    checked = ours - memo.again     # (the others' memlock is read at every scan anyway)
    assert checked
    now[0] = 61.0
    after = scan()
    assert memo.due == frozenset(range(SLICES)) and ours <= memo.due_maps
    assert after.keys() == ours
    for mid in ours:
        assert after[mid] is before[mid]
    assert not rebuilt & checked    # checked and as before: no record made again


def test_a_renamed_cgroup_is_seen_when_its_holders_slice_comes_due(holders, maps):
    """A cgroup renamed keeps its ids, so the owner iterator's records of its processes do
    not move and the rescans keep the path they had; when the holder's slice comes due,
    /proc/PID/cgroup is read again and its maps get the new path."""
    from bpfmem.host.cgroup import scratch_cgroup
    from bpfmem.host.rescan import SLICES
    now = [0.0]
    memo = api.scan_memo(api.profile(), recheck=float(SLICES))
    memo.clock = lambda: now[0]
    a, _b = holders
    hid = bpfsys.map_info(maps["hash"]).id
    a.hold(hid, maps["hash"])

    def owner_cgroup() -> str | None:
        snap = api.scan_node(owners_method="iterator", memo=memo)
        return next(o.cgroup for m in snap.maps if m.id == hid for o in m.owners
                    if o.pid == a.pid)

    with scratch_cgroup(prefix="bpfmem-rename-", version=1) as cg:
        home = cg.fs_path
        cg.add_pid(a.pid)
        try:
            old = owner_cgroup()
            assert old.endswith(os.path.basename(home))
            renamed = home + "-renamed"
            os.rename(home, renamed)
            try:
                assert owner_cgroup() == old            # its ids as before: kept
                now[0] = a.pid % SLICES + 1.01          # the turn of the holder's slice
                new = owner_cgroup()
                assert a.pid % SLICES in memo.due
                assert new.endswith(os.path.basename(renamed)) and new != old
            finally:
                os.rename(renamed, home)
        finally:
            with open("/sys/fs/cgroup/memory/cgroup.procs", "w") as f:
                f.write(str(a.pid))


def test_a_round_of_checks_forgets_the_program_side_and_the_pins():
    """At the turn of slice 0 (a round's start) the program side is read again whole (the
    programs' kept figures, the JIT's, the quick return of the last result that kept a
    module's BTF loaded meanwhile out) and the pins are walked again; the program records
    by id and their key stay: a key made of the same fds, listing, links, pins and holders
    proves the records, which are not made again."""
    from collections import namedtuple
    from bpfmem.host.rescan import SLICES
    Row = namedtuple("Row", "id")
    now = [0.0]
    memo = ScanMemo(recheck=float(SLICES), clock=lambda: now[0])
    memo.begin()

    def fill():
        memo.prog_infos[7] = ("info", 4096)
        memo.prog_jit["jit"] = (1, 2)
        memo.prog_last.update(quick=1, key=2, pins=3, by_id={7: "p"})
        memo.stamps = (("/sys/fs/bpf", 1, 2),)
        memo.fields[SLICES + 1] = memo.counts[SLICES + 2] = 4096
        memo.rows = tuple(Row(i) for i in (SLICES + 1, SLICES + 2))
        memo.maps = {r.id: r for r in memo.rows}
    fill()
    now[0] = 0.5
    memo.begin()                                   # no turn yet: all kept
    assert memo.prog_infos and memo.prog_jit and memo.stamps and "quick" in memo.prog_last
    now[0] = 1.01
    memo.begin()                                   # slice 0's turn
    assert memo.due == {0}
    assert not memo.prog_infos and not memo.prog_jit and memo.stamps is None
    assert memo.prog_last == {"key": 2, "by_id": {7: "p"}}
    assert memo.fields and memo.counts and memo.due_maps == frozenset()   # slices 1, 2
    fill()
    now[0] = 3.01
    memo.begin()                                   # slices 1 and 2
    assert memo.due == {1, 2} and memo.due_maps == {SLICES + 1, SLICES + 2}
    assert memo.fields and memo.counts          # (the scan forgets those whose memlock moved)
    memo.forget_memlock({SLICES + 1, SLICES + 2})
    assert not memo.fields and not memo.counts
    assert memo.prog_infos and memo.stamps        # not a round's start
