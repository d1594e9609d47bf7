"""Walk the live host: every BPF map, who holds it, which programs use it, where it is pinned.

:func:`scan_maps` never writes to a map: maps are opened read-only by id (or by pin) and
entries are counted with lookups. A map or process that disappears mid-scan is skipped and
counted in ``Snapshot.skipped``, never fatal. Lack of privilege is fatal and says which
capability is needed (from :mod:`bpfmem.host.bpfsys`).

The maps are listed, with their info, by the kernel's ``bpf_map`` iterator in one read
(:mod:`.count_iter`); where it cannot run, one by one (``BPF_MAP_GET_NEXT_ID``, an fd by id,
``BPF_OBJ_GET_INFO_BY_FD``). A map's memlock is the kernel's own fdinfo figure, read through
an fd opened by id: see :class:`FdinfoReader`.
"""

from __future__ import annotations

import errno
import os
import time

from bpfmem.errors import HostError, ObjectGone
from bpfmem.host import bpfsys, procfs
from bpfmem.host.cgroup import memory_cgroup_path, namespace_roots
from bpfmem.host.count_iter import KERNEL_COUNTED
from bpfmem.host.rescan import same_objects
from bpfmem.host.walk import MAX_DEPTH, walk_tree
from bpfmem.records import LiveMap, Owner, ProgRef, Snapshot
from bpfmem.uapi import MapType as T

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Callable

__all__ = ["Owner", "ProgRef", "LiveMap", "Snapshot", "scan_maps", "maps_held_by",
           "walk_pins", "FdinfoReader", "COUNTED_TYPES", "ALWAYS_FULL_TYPES", "PERCPU_TYPES"]

# map types whose entries can be walked and whose memory follows them
COUNTED_TYPES = frozenset({T.HASH, T.PERCPU_HASH, T.LRU_HASH, T.LRU_PERCPU_HASH, T.LPM_TRIE,
                           T.HASH_OF_MAPS})
# map types whose every slot exists from creation: entries == max_entries
ALWAYS_FULL_TYPES = frozenset({T.ARRAY, T.PERCPU_ARRAY})
PERCPU_TYPES = frozenset({T.PERCPU_HASH, T.PERCPU_ARRAY, T.LRU_PERCPU_HASH,
                          T.PERCPU_CGROUP_STORAGE})
_NONE = (None, None, None)


def _read_small(path: str) -> bytes | None:
    """A small /proc file's bytes (None when it cannot be read: the process is gone)."""
    try:
        f = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(f, 4096)
    except OSError:
        return None
    finally:
        os.close(f)


def _fdinfo_fields(raw: bytes | None) -> tuple[int | None, bool | None]:
    """(memlock, frozen) of a map's fdinfo bytes ((None, None) if unreadable)."""
    if not raw:
        return None, None
    memlock = procfs.fdinfo_field(raw, b"\nmemlock:")
    frozen = procfs.fdinfo_field(raw, b"\nfrozen:")
    return (None if memlock is None else int(memlock),
            None if frozen is None else frozen == b"1")


def _self_fdinfo(fd: int) -> tuple[int | None, bool | None]:
    """(memlock, frozen) from this process's fdinfo of ``fd`` ((None, None) if unreadable)."""
    return _fdinfo_fields(_read_small(f"/proc/self/fdinfo/{fd}"))


class FdinfoReader:
    """This process's fdinfo of map fds it opens by id, read with one system call a map.

    An fd opened by id, read and closed again gets the lowest free number each time, so the
    numbers repeat. The fdinfo file of a number is opened once and read again from offset 0
    for every map that number holds: procfs looks the fd up at each read (``seq_show``), so
    a read shows the file the number holds then, and the kernel formats it anew (memlock is
    ``map->ops->map_mem_usage`` at that moment). A map then costs GET_FD_BY_ID, one pread and
    a close, where a path open and close of its fdinfo file came on top. Used as a context
    manager: the fdinfo files are closed at the end."""

    __slots__ = ("files",)

    def __init__(self) -> None:
        self.files: dict[int, int] = {}      # fd number -> its fdinfo file

    def __enter__(self) -> "FdinfoReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def read(self, fd: int) -> bytes | None:
        """The fdinfo bytes of ``fd`` (an fd of this process), or None."""
        f = self.files.get(fd)
        if f is None:
            try:
                f = os.open(f"/proc/self/fdinfo/{fd}", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return None
            self.files[fd] = f
        try:
            return os.pread(f, 1024, 0)
        except OSError:
            return None

    def memlock(self, fd: int) -> int | None:
        """The memlock line of ``fd``'s fdinfo (bytes), or None."""
        raw = self.read(fd)
        if raw is None:
            return None
        i = raw.find(b"\nmemlock:")
        if i < 0:
            return None
        return int(raw[i + 9:raw.find(b"\n", i + 9)])

    def close(self) -> None:
        files, self.files = self.files, {}
        for f in files.values():
            try:
                os.close(f)
            except OSError:
                pass


def _percpu_value_size(value_size: int, cpus: int) -> int:
    return ((value_size + 7) // 8) * 8 * cpus


def _count(fd: int, mtype: int, key_size: int, value_size: int, max_entries: int, cpus: int,
           bound: float) -> tuple[int | None, bool | None, str | None]:
    if mtype in ALWAYS_FULL_TYPES:
        return max_entries, True, "array"
    if mtype not in COUNTED_TYPES:
        return _NONE
    vsize = _percpu_value_size(value_size, cpus) if mtype in PERCPU_TYPES else value_size
    n, complete, method = bpfsys.count_entries(
        fd, key_size, vsize, deadline=time.monotonic() + bound,
        use_batch=mtype != T.LPM_TRIE)
    return n, complete, method


def walk_pins(mount_points: list[str], errors: list[str]) -> dict[int, list[str]]:
    """{map id: pin paths} over every file under the bpffs ``mount_points``. Pins that are
    not maps (programs, links, the kernel's own iterator files) are passed over; problems
    other than that are appended to ``errors``."""
    pins: dict[int, list[str]] = {}
    def deep(path: str) -> None:
        errors.append(f"{path}: more than {MAX_DEPTH} directories deep; not walked further")
    for top in mount_points:
        for dirpath, _dirs, files in walk_tree(top, too_deep=deep):
            for name in files:
                path = os.path.join(dirpath, name)
                try:
                    fd = bpfsys.obj_get(path)  # read-only; programs and links refuse this
                except ObjectGone:
                    continue
                except HostError as e:
                    if getattr(e, "errno", None) != errno.EINVAL:  # EINVAL: not a map
                        errors.append(str(e))
                    continue
                try:
                    pins.setdefault(bpfsys.map_info(fd).id, []).append(path)
                except HostError:
                    pass
                finally:
                    os.close(fd)
    return pins


def _pins(mount_points: list[str], errors: list[str], memo) -> dict[int, tuple[str, ...]]:
    """:func:`walk_pins` as {map id: sorted paths}, or the last walk's while no bpffs
    directory changed."""
    if memo is None:
        return _sorted_pins(walk_pins(mount_points, errors))
    from bpfmem.host.rescan import pin_stamps, settled
    stamps = pin_stamps(mount_points)
    if stamps != memo.stamps:
        memo.pins = _sorted_pins(walk_pins(mount_points, errors))
    # stamps of a directory that just changed are not kept: a second change within the
    # clock's tick would leave its mtime as it is (the next scan walks again)
    memo.stamps = stamps if settled(stamps) else None
    return memo.pins


def _sorted_pins(pins: dict[int, list[str]]) -> dict[int, tuple[str, ...]]:
    return {mid: tuple(sorted(paths)) for mid, paths in pins.items()}


# ---- owners ---------------------------------------------------------------------------------

def _holders(pids, map_ids) -> dict[int, tuple]:
    """map id -> ((pid, fds), ...) by pid, from the (pid, map id) of every map fd, in pid
    order (the kernel's iterator and the /proc walk both go pid by pid). A map held by one fd
    of one process (most maps) shares that process's ``((pid, 1),)``."""
    one: dict[int, tuple] = {p: ((p, 1),) for p in set(pids)}
    held = dict(zip(map_ids, map(one.__getitem__, pids)))
    if len(held) == len(map_ids):       # no map held by two fds (most nodes): made in C
        return held
    held = {}
    several: dict[int, dict[int, int]] = {}
    for pid, mid in zip(pids, map_ids):
        h = held.get(mid)
        if h is None:
            held[mid] = one[pid]
        else:
            per = several.get(mid)
            if per is None:
                per = several[mid] = dict(h)
            per[pid] = per.get(pid, 0) + 1
    for mid, per in several.items():
        held[mid] = tuple(sorted(per.items()))
    return held


def _scan_owners(root: str, pids: list[int] | None = None, columns=None, memo=None,
                 others=(), stamps: dict | None = None) -> tuple[dict, dict, dict, dict, int]:
    """map id -> ((pid, fds), ...), memlock and frozen per map id, Owner per pid, processes gone;
    over every process, or only ``pids``. ``columns`` are (pids, map ids) of every map fd as
    the kernel's iterator gave them (then the fds are not walked, and memlock comes from the
    map walk); the holders of ``others`` (program, link and BTF fds: (pid, ...)) get an
    Owner too; ``stamps`` (the iterator's per process) spare reading again the names of
    processes whose stamps are as before."""
    memlock_of: dict[int, int] = {}
    frozen_of: dict[int, bool] = {}
    if columns is None:
        found = procfs.scan_map_fds(pids=pids, root=root)
        columns = ([m.pid for m in found], [m.map_id for m in found])
        for mfd in found:
            if mfd.memlock is not None:
                memlock_of[mfd.map_id] = mfd.memlock
            if mfd.frozen is not None:
                frozen_of[mfd.map_id] = mfd.frozen
    holders = _holders(*columns)
    owner_of, gone = _owner_table(sorted(set(columns[0]).union(o[0] for o in others)), root,
                                  memo, stamps)
    return holders, memlock_of, frozen_of, owner_of, gone


def _owner_delta(memo, root: str, every_kind: bool) -> tuple[tuple, list | None, set]:
    """The owner scan of a rescan whose owner records moved for a few processes only
    (``memo.owner_delta``: {pid: (its records before, after)}): the last holders with those
    processes' map fds replaced, the other BPF fds likewise, their Owners read again (the
    others' kept); (the scan as :func:`_scan_owners` gives it, the other fds, the ids of
    the maps whose holders moved)."""
    from .owner_iter import FD_RECORD, KINDS, RECORD, STAMPS
    size = FD_RECORD.size if every_kind else RECORD.size
    at, step = STAMPS.size // 4, size // 4

    def parse(chunk: bytes):
        words = memoryview(chunk).cast("I")
        n = len(chunk) // size
        maps: dict[int, int] = {}
        others = []
        for i in range(n):
            w = i * step + at
            kind = words[w + 2] if every_kind else 0
            if kind == 0:
                mid = words[w + 3] if every_kind else words[w + 2]
                maps[mid] = maps.get(mid, 0) + 1
            else:
                others.append((words[w], words[w + 1], KINDS.get(kind, "?"), words[w + 3],
                               words[w + 4]))
        return maps, others

    held = dict(memo.owner_held)
    moved: set[int] = set()
    new_others: list = []
    stamps: dict[int, bytes] = {}
    for pid, (before, after) in memo.owner_delta.items():
        was, _o = parse(before)
        now, others = parse(after)
        new_others += others
        if after:
            stamps[pid] = after[:STAMPS.size]
        for mid in was.keys() | now.keys():
            if was.get(mid) == now.get(mid):
                continue
            moved.add(mid)
            per = [(p, n) for p, n in held.get(mid, ()) if p != pid]
            if now.get(mid):
                per.append((pid, now[mid]))
                per.sort()
            if per:
                held[mid] = tuple(per)
            else:
                held.pop(mid, None)
    others = None
    if every_kind:
        delta = memo.owner_delta
        others = sorted([o for o in memo.owner_others or () if o[0] not in delta]
                        + new_others, key=lambda o: (o[0], o[1]))
    alive = memo.owner_pids_all
    owner_of = {p: o for p, o in memo.owner_seen.items() if p in alive}
    fresh, gone = _owner_table(sorted(stamps), root, memo, stamps, every=False)
    owner_of.update(fresh)
    return (held, {}, {}, owner_of, gone), others, moved


def _recheck_owners(memo, root: str, owner_of: dict) -> dict:
    """``owner_of`` with the processes whose slice is due (:meth:`ScanMemo.owners_due`)
    checked again: their comm comes with the owner iterator's records at every scan, but
    their cgroup path is kept while the cgroup ids are as before, and a cgroup renamed
    keeps its ids. :func:`_owner_table` reads them again past their stamps: a process whose
    /proc/PID/cgroup reads as before keeps its Owner (the same object); one whose path moved
    gets a new one (its maps are then looked at again); the dict is copied only then."""
    cache = memo.owner_cache
    stamps = {p: cache[p][0] for p in memo.owners_due(owner_of) if p in cache}
    if not stamps:
        return owner_of
    fresh, _gone = _owner_table(sorted(stamps), root, memo, stamps, every=False,
                                again=stamps.keys())
    moved = {p: o for p, o in fresh.items() if o is not owner_of[p]}
    return {**owner_of, **moved} if moved else owner_of


def _owner_table(pids, root: str, memo=None, stamps: dict | None = None, *,
                 every: bool = True, again=()) -> tuple[dict[int, "Owner"], int]:
    """(Owner per pid, processes gone) from each process's comm and cgroup; with a memo, a
    process whose comm and cgroup read as before keeps its Owner (the same object).

    ``stamps`` (the owner iterator's, host/owner_iter.STAMPS: each process's comm and the
    ids of its default and memory cgroups) stand in for reading: the comm is the stamp's,
    and /proc/PID/cgroup is read once for the processes of the same two cgroups (the two
    lines the memory cgroup is taken from are theirs); with a memo, a process whose stamps
    are as before keeps its Owner unread, except the pids in ``again`` (their turn to be
    checked: a cgroup renamed keeps its ids, so the stamps cannot show it)."""
    base = os.path.join(root, "proc")
    known = memo.owner_cache if memo is not None else None
    ns_roots = None
    owner_of: dict[int, Owner] = {}
    by_group: dict[bytes, bytes] = {}       # cgroup ids -> /proc/PID/cgroup of one of them
    paths: dict[bytes, str | None] = {}     # /proc/PID/cgroup -> its memory cgroup
    gone = 0
    read = _read_small
    for pid in pids:
        hit = known.get(pid) if known is not None else None
        stamp = stamps.get(pid) if stamps is not None else None
        if hit is not None and stamp is not None and hit[0] == stamp and pid not in again:
            owner_of[pid] = hit[3]
            continue
        if stamp is not None:
            comm = stamp[:16].rstrip(b"\0") + b"\n"
            group = stamp[16:]
            cg = by_group.get(group)
            if cg is None:
                cg = read(f"{base}/{pid}/cgroup")
                if cg is None:
                    gone += 1
                    continue
                by_group[group] = cg
        else:
            comm = read(f"{base}/{pid}/comm")
            if comm is None:
                gone += 1
                continue
            cg = read(f"{base}/{pid}/cgroup")
        if hit is not None and hit[1] == comm and hit[2] == cg:
            owner_of[pid] = hit[3]
            if stamp is not None:
                known[pid] = (stamp, comm, cg, hit[3])
            continue
        if ns_roots is None:
            try:
                ns_roots = namespace_roots(root)
            except (OSError, HostError):
                ns_roots = {}
        if cg:
            path = paths.get(cg, _ABSENT)
            if path is _ABSENT:
                path = paths[cg] = memory_cgroup_path(cg.decode(errors="replace"), ns_roots)
        else:
            path = None
        owner_of[pid] = Owner(pid, comm.decode(errors="replace").rstrip("\n"), path)
        if known is not None:
            known[pid] = (stamp, comm, cg, owner_of[pid])
    if every and known is not None and len(known) > len(owner_of):   # (``pids``: every
        for pid in known.keys() - owner_of.keys():                     # holder: the others
            del known[pid]                                             # are gone)
    return owner_of, gone


def _owners_in_child(root: str):
    """Run :func:`_scan_owners` in a forked child, beside the caller's own work; returns a
    function that collects the result. The walk of every process's fds is mostly kernel time
    (procfs lookups), so on a host with two or more CPUs it overlaps the map walk."""
    import pickle
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: only procfs reads and a pickle, then _exit (no atexit, no flush)
        code = 0
        try:
            os.close(r)
            try:
                payload = pickle.dumps(("ok", _scan_owners(root)), protocol=5)
            except BaseException as e:  # noqa: BLE001 - handed to the parent
                payload, code = pickle.dumps(("error", HostError(f"owner scan: {e}"))), 1
            view = memoryview(payload)
            while view:
                view = view[os.write(w, view):]
        finally:
            os._exit(code)
    os.close(w)

    def collect():
        chunks = []
        try:
            while True:
                chunk = os.read(r, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(r)
            os.waitpid(pid, 0)
        if not chunks:
            raise HostError("owner scan: the helper process died")
        kind, value = pickle.loads(b"".join(chunks))
        if kind == "error":
            raise value
        return value

    return collect


def _owner_records(root: str, method: str, every_kind: bool = False, kept: dict | None = None,
                   memo=None) -> tuple[bytes | None, str]:
    """The kernel iterator's records as it wrote them, or None and why the /proc walk is
    used instead. With a memo, the records of the processes whose tasks did not run since
    the last scan are the last scan's (:func:`_owner_records_again`)."""
    if method == "proc":
        return None, "/proc (asked for)"
    if root != "/":
        return None, "/proc (another root)"
    from .owner_iter import IteratorUnavailable, bpf_fds_raw, map_fds_raw
    try:
        if every_kind:
            try:
                data = _owner_records_again(memo, kept, True, bpf_fds_raw)
            except IteratorUnavailable:
                data = _owner_records_again(memo, kept, False, map_fds_raw)  # /proc for
                every_kind = False                                          # the rest
        else:
            data = _owner_records_again(memo, kept, False, map_fds_raw)
    except IteratorUnavailable as e:
        if method == "iterator":
            raise
        return None, f"/proc ({e})"
    return data, "kernel iterator" if not every_kind else "kernel iterator (every BPF fd)"


# a rescan walks the files of at most this many processes one by one (one link each); more
# that ran since the last scan, and it walks every process's files in one read
_OWNER_WALKS = 64


def _owner_records_again(memo, kept, every_kind: bool, walk) -> bytes:
    """The owner iterator's records: with a memo, the processes' activity is read first (the
    task iterator: host/owner_iter.activity), and only the processes whose tasks ran, came
    or went since the last scan have their files walked again, one by one; the others'
    records are the last scan's (a process that did not run changed no fd). Without a memo,
    where the task iterator cannot run, or when many processes ran, every file is walked."""
    if memo is None:
        return walk(kept)
    memo.owner_delta = None
    from .owner_iter import (FD_RECORD, RECORD, STAMPS, IteratorUnavailable, activity,
                             task_stamps_raw)
    try:
        act = activity(task_stamps_raw(kept))
    except IteratorUnavailable:
        act = None
    last, before = memo.owner_raw, memo.task_act
    memo.task_act = act
    size = FD_RECORD.size if every_kind else RECORD.size
    if (act is None or before is None or last is None or memo.owner_kind != every_kind
            or not memo.owner_sorted):
        data = walk(kept)
    else:
        changed = {pid for pid, b in act.items() if before.get(pid) != b}
        changed.update(before.keys() - act.keys())
        if not changed:
            return last
        if len(changed) > _OWNER_WALKS:
            data = walk(kept)
        else:
            try:
                fresh = {pid: walk(kept, pid) for pid in changed if pid in act}
            except IteratorUnavailable:     # a kernel before 6.1: no walk of one process
                data = walk(kept)
            else:
                held = memo.owner_pids_all
                if not any(fresh.values()) and held.isdisjoint(changed):
                    return last             # those that ran hold no BPF fd, before or now
                delta: dict = {}
                data = _merged(last, size, STAMPS.size // 4, fresh, changed, delta)
                memo.owner_pids_all = (held - changed) | {p for p, b in fresh.items() if b}
                memo.owner_delta = delta if data is not last else None
                return data
    memo.owner_kind = every_kind
    memo.owner_delta = None
    words = memoryview(data)[:len(data) // size * size].cast("I")[STAMPS.size // 4::size // 4]
    pids = words.tolist()
    memo.owner_sorted = all(a <= b for a, b in zip(pids, pids[1:]))
    memo.owner_pids_all = set(pids)
    return data


def _merged(last: bytes, size: int, at: int, fresh: dict[int, bytes], changed: set,
            delta: dict | None = None) -> bytes:
    """Records of ``size`` bytes in process order (their tgid the ``at``-th word): ``last``
    with each process of ``changed`` replaced by its ``fresh`` records (none: gone); ``last``
    itself when each reads as before. ``delta`` gets {pid: (its records before, after)} of
    the processes whose records moved."""
    from bisect import bisect_left, bisect_right
    n = len(last) // size
    pids = memoryview(last)[:n * size].cast("I")[at::size // 4]    # (bisect reads a few)
    spans = []
    for pid in sorted(changed):
        lo, hi = bisect_left(pids, pid), bisect_right(pids, pid)
        spans.append((lo, hi, fresh.get(pid, b"")))
    moved = {pid: (last[lo * size:hi * size], new)
             for pid, (lo, hi, new) in zip(sorted(changed), spans)
             if last[lo * size:hi * size] != new}
    if delta is not None:
        delta.update(moved)
    if not moved:
        return last
    out, pos = [], 0
    for lo, hi, new in spans:
        out.append(last[pos * size:lo * size])
        out.append(new)
        pos = hi
    out.append(last[pos * size:n * size])
    return b"".join(out)


# ---- programs -------------------------------------------------------------------------------

def _scan_programs(memo=None, found: dict | None = None) -> dict[int, tuple[ProgRef, ...]]:
    """map id -> the programs that use it (ProgRef), from every program's map ids: the
    kernel's program iterator lists them in one read (host/prog_iter.py; what it read is
    left in ``found["progs"]`` for :func:`bpfmem.host.progs.scan_programs`), else one by
    one (an fd and BPF_OBJ_GET_INFO_BY_FD each). With a memo, a listing that reads as the
    last one gives the last scan's dict again (the same object), and the full listing is
    read only when the light one (each program's id and map count: all that moves of a
    loaded program) differs from the last full one's (or once a round of checks)."""
    from .prog_iter import ProgsUnavailable, light_of, programs, progs_light_raw, progs_raw
    data = own = None
    try:
        if memo is not None and memo.prog_raw is not None and memo.prog_light is not None:
            try:
                if progs_light_raw(memo.iterators) == memo.prog_light:
                    data = memo.prog_raw    # the same programs with the same maps
            except ProgsUnavailable:        # (not tried again: the full listing each scan)
                memo.prog_light_off = True
        if data is None:
            data, own = progs_raw(memo.iterators if memo is not None else None)
            if memo is not None:
                memo.prog_light = None if memo.prog_light_off else light_of(data)
    except ProgsUnavailable:
        data = own = None
    if data is not None:
        if memo is not None and memo.prog_raw == data and memo.prog_users is not None:
            recs, users = memo.prog_recs, memo.prog_users
        else:
            recs, _gone = programs(data, memo.prog_known if memo is not None else None, own)
            per: dict[int, list[ProgRef]] = {}
            for r in recs:
                if r[9]:
                    ref = ProgRef(r[0], r[11], r[1])
                    for mid in r[9]:
                        per.setdefault(mid, []).append(ref)
            users = {mid: tuple(refs) for mid, refs in per.items()}
            if memo is not None:
                memo.prog_raw, memo.prog_recs, memo.prog_users = data, recs, users
        if found is not None:
            found["progs"] = (data, recs)
        return users
    per = {}
    known = memo.programs if memo is not None else None
    seen = set()
    for prog_id in bpfsys.prog_ids():
        seen.add(prog_id)
        hit = known.get(prog_id) if known is not None else None
        if hit is None:
            try:
                pfd = bpfsys.prog_fd_by_id(prog_id)
            except ObjectGone:
                continue
            try:
                info = bpfsys.prog_info(pfd)
            except ObjectGone:
                continue
            finally:
                os.close(pfd)
            hit = (ProgRef(info.id, info.name, info.type), tuple(info.map_ids))
            if known is not None:
                known[prog_id] = hit
        ref, map_ids = hit
        for mid in map_ids:
            per.setdefault(mid, []).append(ref)
    if known is not None and len(known) > len(seen):
        for gone in known.keys() - seen:
            del known[gone]
    return {mid: tuple(refs) for mid, refs in per.items()}


# ---- the maps -------------------------------------------------------------------------------

def _map_listing(memo, counts: bool = True) -> bytes | None:
    """Every map's record (host/count_iter.py), as the kernel's map iterator wrote them, or
    None where it cannot run; without ``counts`` (a single scan that counts no entries) the
    counts read -1."""
    from bpfmem.host.count_iter import CountsUnavailable, map_infos_raw
    try:
        return map_infos_raw(memo.iterators if memo is not None else None, counts)
    except CountsUnavailable:
        return None


def _listed_one_by_one(memo, fdr: FdinfoReader, memlock_of: dict, errors: list[str]
                       ) -> tuple[list[tuple], int]:
    """The records of :func:`_map_listing` made without the iterator: the ids one by one,
    each map's info through an fd by id (with memlock, put in ``memlock_of``, and frozen from
    its fdinfo); a map the memo knows whose memlock cannot change is not opened. The count
    is -1 (the kernel's is not read this way). (records, maps gone meanwhile)."""
    recs: list[tuple] = []
    gone = 0
    last = memo.maps if memo is not None else {}
    static = memo.fields if memo is not None else {}
    fd_by_id, info_of, close = bpfsys.map_fd_by_id, bpfsys.map_info, os.close
    for mid in bpfsys.map_ids():
        prev = last.get(mid)
        if prev is not None and mid in static:
            recs.append((mid, prev.type, prev.key_size, prev.value_size, prev.max_entries,
                         prev.map_flags, prev.map_extra, prev.btf_id, prev.frozen, -1,
                         prev.name))
            continue
        try:
            fd = fd_by_id(mid)
        except ObjectGone:
            gone += 1
            continue
        try:
            i = info_of(fd)
            memlock, frozen = _fdinfo_fields(fdr.read(fd))
        except ObjectGone:
            gone += 1
            continue
        finally:
            close(fd)
        if memlock is not None:
            memlock_of[mid] = memlock
        recs.append((mid, i.type, i.key_size, i.value_size, i.max_entries, i.map_flags,
                     i.map_extra, i.btf_id, frozen, -1, i.name))
    return recs, gone


def _columns(data: bytes) -> tuple[list[int], list[int], list[int]]:
    """(ids, counts, frozen flags) of a listing's records (count_iter.RECORD), cut from its
    bytes at once."""
    from bpfmem.host.count_iter import RECORD
    n = len(data) // RECORD.size
    view = memoryview(data)[:n * RECORD.size]
    words, quads = view.cast("I"), view.cast("q")
    step = RECORD.size // 4
    return words[0::step].tolist(), quads[5::step // 2].tolist(), words[9::step].tolist()


def _listing_changes(new: bytes, old: bytes) -> tuple[list[int], list[int], set[int]]:
    """(the ids of listing ``new``, the positions in it of maps that are new or whose record
    moved, the ids of listing ``old`` that are gone). A map's info is fixed when it is
    created: of a map listed in both, only its count and frozen flag can move."""
    return _column_changes(_columns(new), _columns(old))


def _column_changes(new: tuple, old: tuple) -> tuple[list[int], list[int], set[int]]:
    """:func:`_listing_changes` of two listings' (ids, counts, frozen) columns."""
    from operator import ne
    ids, counts, frozen = new
    ids0, counts0, frozen0 = old
    # the maps before the first id that differs are the same maps at the same places (new
    # maps mostly come last: ids grow): compared place by place; the rest by id
    differs = list(map(ne, ids, ids0))
    p = differs.index(True) if True in differs else min(len(ids), len(ids0))
    if p == len(ids) == len(ids0) and counts == counts0 and frozen == frozen0:
        return ids, [], set()
    moved = [i for i, (a, b, c, d) in enumerate(zip(counts[:p], counts0[:p], frozen[:p],
                                                    frozen0[:p])) if a != b or c != d]
    if p == len(ids) == len(ids0):
        return ids, moved, set()
    before = dict(zip(ids0[p:], zip(counts0[p:], frozen0[p:])))
    moved += [p + i for i, key in enumerate(zip(ids[p:], counts[p:], frozen[p:]))
              if before.get(key[0]) != key[1:]]
    return ids, moved, before.keys() - set(ids[p:])


def _owners_maker(owner_of: dict):
    """The function giving a map's Owners from its holders ((pid, fds), ...): the Owner of
    each pid (with its fd count when more than one; those made once per (pid, fds))."""
    with_fds: dict[tuple[int, int], Owner] = {}

    def owners(per: tuple) -> tuple:
        out = []
        for pid, n in per:
            base = owner_of.get(pid)
            if base is None:
                continue
            if n != 1:
                o = with_fds.get((pid, n))
                if o is None:
                    o = with_fds[(pid, n)] = Owner(pid, base.comm, base.cgroup, n)
                base = o
            out.append(base)
        return tuple(out)
    return owners


def _rows_once(recs, *, fdr: FdinfoReader, memlock_of: dict, frozen_of: dict, held: dict,
               owner_of: dict, users: dict, pinned: dict) -> tuple[list[LiveMap], int]:
    """:func:`_rows` of a single scan that counts no entries (``bpfmem snapshot``: no memo,
    so no map is kept or read again later): the same records, made without the rescan's
    bookkeeping in the loop over 10,000 maps. (records, maps vanished meanwhile)"""
    rows: list[LiveMap] = []
    append = rows.append
    vanished = 0
    make = tuple.__new__                        # LiveMap._make, without the call
    fd_by_id, close, pread, find = bpfsys.map_fd_by_id, os.close, os.pread, bytes.find
    files = fdr.files
    mem_get = memlock_of.get if memlock_of else None
    frozen_get = frozen_of.get if frozen_of else None
    held_get = held.get
    users_get = users.get if users else None
    pinned_get = pinned.get if pinned else None
    owned: dict[tuple, tuple] = {}          # holders -> their Owners (shared between maps)
    owners = _owners_maker(owner_of)
    for mid, mtype, ks, vs, me, flags, extra, btf, frozen, _count, name in recs:
        if name.__class__ is bytes:
            name = name.rstrip(b"\0").decode(errors="replace")
        memlock = mem_get(mid) if mem_get is not None else None
        if memlock is None:
            try:
                fd = fd_by_id(mid)
            except ObjectGone:
                vanished += 1
                continue
            try:
                f = files.get(fd)               # FdinfoReader.memlock, inlined
                raw = pread(f, 1024, 0) if f is not None else fdr.read(fd)
                i = find(raw, b"\nmemlock:") if raw else -1
                if i >= 0:
                    memlock = int(raw[i + 9:find(raw, b"\n", i + 9)])
            except OSError:             # the fdinfo file: its fd closed meanwhile
                memlock = None
            finally:
                close(fd)
        if frozen.__class__ is int:
            frozen = frozen != 0
        if frozen_get is not None:
            f = frozen_get(mid)
            if f is not None:
                frozen = f
        per = held_get(mid)
        if not per:
            own = ()
        else:
            own = owned.get(per)
            if own is None:
                own = owned[per] = owners(per)
        append(make(LiveMap, (mid, name, mtype, ks, vs, me, flags, extra, btf, memlock, frozen,
                              own, users_get(mid, ()) if users_get is not None else (),
                              pinned_get(mid, ()) if pinned_get is not None else (),
                              None, None, None)))
    return rows, vanished


def _rows(recs, need: set | None, *, memo, entries: bool, bound: float, cpus: int,
          errors: list[str], fdr: FdinfoReader, memlock_of: dict, frozen_of: dict,
          held: dict, owner_of: dict, users: dict, pinned: dict, gaps: bool = False
          ) -> tuple[list[LiveMap], int, set]:
    """The LiveMap of every listed map (``recs``: the listing's record tuples, in id order),
    the maps that vanished meanwhile, and the ids whose memlock (or count) the next scan
    must read again. With ``need`` (a set), a map not in it keeps the memo's last record
    unread; a map that is rebuilt and comes out equal to its last record keeps that record
    too (an idle node's scan allocates none).

    memlock comes, in this order, from the /proc walk's fdinfo (``memlock_of``), from the
    memo where it cannot have moved (a static map; a map whose memlock follows the kernel's
    count, while that count is as before), else from this process's fdinfo of an fd opened
    by id. Entries (``entries``): the kernel's count for hash maps (6.6+), max_entries for
    arrays, else a walk of the keys (a map whose memlock follows its count keeps the last
    walk's count while memlock is as before). With ``gaps``, a map that vanished is a None
    in its place."""
    rows: list[LiveMap] = []
    vanished = 0
    again: set[int] = set()
    last = memo.maps if memo is not None else {}
    fields = memo.fields if memo is not None else {}
    counts = memo.counts if memo is not None else {}
    untrusted = memo.untrusted if memo is not None else ()
    last_get, fields_get, counts_get = last.get, fields.get, counts.get
    mem_get, frozen_get = memlock_of.get, frozen_of.get
    held_get, users_get, pinned_get = held.get, users.get, pinned.get
    fd_by_id, close = bpfsys.map_fd_by_id, os.close
    make = tuple.__new__                        # LiveMap._make, without the call
    kernel_counted, full_types, walked_types = KERNEL_COUNTED, ALWAYS_FULL_TYPES, COUNTED_TYPES
    owned: dict[tuple, tuple] = {}          # holders -> their Owners (shared between maps)
    owners = _owners_maker(owner_of)
    reused = 0

    files = fdr.files
    pread, find = os.pread, bytes.find
    for rec in recs:
        mid = rec[0]
        if need is not None and mid not in need:
            prev = last_get(mid)
            if prev is not None:
                rows.append(prev)
                reused += 1
                continue
        _mid, mtype, ks, vs, me, flags, extra, btf, frozen, kcount, name = rec
        if name.__class__ is bytes:
            name = name.rstrip(b"\0").decode(errors="replace")
        kernel_count = kcount >= 0 and mtype in kernel_counted
        read_now = False
        memlock = mem_get(mid)
        if memlock is None and memo is not None:
            memlock = fields_get(mid)
            if memlock is None:
                c = counts_get(mid)
                if c is not None and kernel_count and c[2] == kcount:
                    memlock = c[0]
        counted = _NONE
        if entries:
            if kernel_count:
                counted = (kcount, True, "kernel")
            elif mtype in full_types:
                counted = (me, True, "array")
            elif mtype in walked_types:
                counted = None
        if memlock is None or counted is None:
            try:
                fd = fd_by_id(mid)
            except ObjectGone:
                vanished += 1
                again.add(mid)          # listed but gone: looked for again next time
                if gaps:
                    rows.append(None)
                continue
            try:
                if memlock is None:
                    read_now = True
                    f = files.get(fd)           # FdinfoReader.memlock, inlined (10,000 maps)
                    raw = pread(f, 1024, 0) if f is not None else fdr.read(fd)
                    i = find(raw, b"\nmemlock:") if raw else -1
                    if i >= 0:
                        memlock = int(raw[i + 9:find(raw, b"\n", i + 9)])
                if counted is None:
                    c = counts_get(mid)
                    if c is not None and memlock is not None and c[0] == memlock:
                        counted = c[1]      # memlock follows the count: unchanged, so is it
                    else:
                        try:
                            counted = _count(fd, mtype, ks, vs, me, cpus, bound)
                        except ObjectGone:
                            raise
                        except HostError as e:
                            errors.append(f"map {mid} ({name}): counting entries: {e}")
                            counted = _NONE
            except ObjectGone:
                vanished += 1
                again.add(mid)
                if gaps:
                    rows.append(None)
                continue
            except OSError:             # the fdinfo file: its fd closed meanwhile
                memlock = None
            finally:
                close(fd)
        else:
            reused += 1
        if frozen.__class__ is int:
            frozen = frozen != 0
        if frozen_of:
            f = frozen_get(mid)
            if f is not None:
                frozen = f
        per = held_get(mid)
        if not per:
            own = ()
        else:
            own = owned.get(per)
            if own is None:
                own = owned[per] = owners(per)
        progs = users_get(mid, ()) if users else ()
        pins_of = pinned_get(mid, ()) if pinned else ()
        n, complete, method = counted
        prev = last_get(mid) if memo is not None else None
        if (prev is not None and prev.memlock == memlock and prev.entries == n
                and prev.owners == own and prev.programs == progs and prev.pins == pins_of
                and prev.frozen == frozen and prev.entries_complete == complete
                and prev.entries_method == method and prev.name == name):
            row = prev        # unchanged: the same record
        else:
            row = make(LiveMap, (mid, name, mtype, ks, vs, me, flags, extra, btf, memlock,
                                 frozen, own, progs, pins_of, n, complete, method))
        rows.append(row)
        if memo is not None:
            if read_now and memlock is not None and mid not in untrusted:
                if memo.memlock_static(row):
                    fields[mid] = memlock
                elif memo.memlock_counts(row) and (kernel_count or (entries and complete)):
                    counts[mid] = (memlock, counted, kcount if kernel_count else -1)
            if mid not in fields and not (kernel_count and mid in counts):
                again.add(mid)      # memlock read again next time
            elif entries and not kernel_count and mtype in walked_types:
                again.add(mid)      # walked again (or its count kept: memlock read again)
    if memo is not None:
        memo.reused = reused
    return rows, vanished, again


def scan_maps(*, entries: bool = False, entry_time_bound: float = 0.5, pins: bool = True,
              programs: bool = True, owners: bool = True, root: str = "/",
              progress: Callable[[str], None] | None = None,
              parallel: bool = False, owners_method: str = "auto", memo=None,
              kernel_counts: bool = True, bpf_fds: dict | None = None) -> Snapshot:
    """Scan every map on the host (needs CAP_SYS_ADMIN; reading other processes' fds needs
    CAP_SYS_PTRACE or the same user).

    ``entries`` counts each map's entries (batch lookups where the kernel has them, else key
    walks) for at most ``entry_time_bound`` seconds per map. ``progress`` is called with a
    short description of the step being taken.

    memlock comes from the fdinfo of a process that holds the map where the /proc walk read
    it anyway, else from this process's fdinfo of an fd opened by id (:class:`FdinfoReader`).

    ``parallel`` walks the processes' fds in a forked child where /proc is walked (for
    command-line use; a library caller with threads should leave it off). (Reading the
    maps' memlock in a forked child beside was measured: at load 2 on 2 CPUs, 71.5 -> 78.7
    ms of wall time, beside two busy loops 766 -> 882 ms: no spare CPU, and the fork costs.)

    ``owners_method``: "auto" finds the owners with the kernel's task_file iterator
    (host/owner_iter.py; needs CAP_BPF and CAP_PERFMON), or walks /proc where it cannot run
    or where ``parallel`` walks it in a child beside the map walk and programs are not asked
    for (``bpf_fds``: the iterator finds their fds in the same walk, where /proc would be
    walked twice); "iterator" or "proc" forces one. ``Snapshot.owners_from`` says which ran,
    and why.

    ``memo`` (a :class:`~bpfmem.host.rescan.ScanMemo` kept by the caller between scans) makes
    the scan incremental: what cannot have changed since the last one is not read again.

    ``kernel_counts``: list the maps and their info with the kernel's map iterator (one read
    instead of a BPF_MAP_GET_NEXT_ID, an fd and a BPF_OBJ_GET_INFO_BY_FD per map) and, with
    ``entries``, take hash maps' counts from the kernel's own element count (6.6+;
    host/count_iter.py; the map's ``entries_method`` is then "kernel"); the other maps are
    walked. Where it cannot run, the maps are listed one by one.

    ``bpf_fds`` (a dict): where the owners come from the kernel's iterator, the same walk
    also finds every program, link and BTF fd; they are left in ``bpf_fds["fds"]`` as
    (pid, fd, kind, id, a link's program id), with their holders' Owners in
    ``bpf_fds["owners"]``, for :func:`bpfmem.host.progs.scan_programs` (the keys are absent
    where they were not found: then that walks /proc); so are the program listing
    (``"progs"``) and, with a memo, the bpffs directories' stamps (``"pin_stamps"``).
    """
    from bpfmem.host.profile import host_possible_cpus
    say = progress or (lambda _what: None)
    start_wall, start = time.time(), time.monotonic()
    if memo is not None:
        memo.begin()
    if memo is None:
        cpus = host_possible_cpus(root)
    else:                       # (the possible CPUs are fixed at boot)
        cpus = memo.cpus = memo.cpus or host_possible_cpus(root)
    errors: list[str] = []
    collect = None
    forking = parallel and (os.cpu_count() or 1) > 1
    kept = memo.iterators if memo is not None else None
    owner_raw, owners_from = (_owner_records(root, owners_method, bpf_fds is not None, kept,
                                             memo) if owners else (None, ""))
    every_kind = owners_from.endswith("(every BPF fd)")
    if every_kind:
        owners_from = "kernel iterator"
    owners_same = False
    held_moved = None           # the maps whose holders moved, where known without a diff
    owner_scan: tuple = ({}, {}, {}, {}, 0)
    if owner_raw is not None:
        say("processes")
        if memo is not None:
            memo.owner_held_last = memo.owner_held
        if (memo is not None and memo.owner_raw == owner_raw
                and memo.owner_held is not None):
            # the same fds of processes of the same stamps: the same holders, names and
            # cgroups (without stamps the names and cgroups are read again)
            table = ((memo.owner_seen, 0) if memo.owner_stamps and memo.owner_seen is not None
                     else _owner_table(memo.owner_pids, root, memo))
            owner_scan = (memo.owner_held, {}, {}, *table)
            others = memo.owner_others
            owners_same = True
        elif (memo is not None and memo.owner_delta is not None and memo.owner_stamps
                and memo.owner_held is not None and memo.owner_seen is not None):
            # the records of a few processes moved: their holdings replaced in the last
            # scan's (no parse of every record, no comparison of every map's holders)
            owner_scan, others, held_moved = _owner_delta(memo, root, every_kind)
            memo.owner_raw, memo.owner_held = owner_raw, owner_scan[0]
            memo.owner_pids = sorted(memo.owner_pids_all)
            memo.owner_others = others
        else:
            from .owner_iter import fd_columns, map_columns
            if every_kind:
                pids, ids, others, stamps = fd_columns(owner_raw)
            else:
                (pids, ids, stamps), others = map_columns(owner_raw), None
            owner_scan = _scan_owners(root, columns=(pids, ids), memo=memo,
                                      others=others or (), stamps=stamps)
            if memo is not None:
                memo.owner_raw, memo.owner_held = owner_raw, owner_scan[0]
                memo.owner_pids = sorted(set(pids).union(o[0] for o in others or ()))
                memo.owner_others = others
                memo.owner_stamps = stamps is not None
        if memo is not None and memo.due and memo.owner_stamps:
            owner_scan = (*owner_scan[:3], _recheck_owners(memo, root, owner_scan[3]),
                          owner_scan[4])
        if every_kind and bpf_fds is not None:
            bpf_fds["fds"] = others     # programs', links' and BTF objects' fds
            bpf_fds["owners"] = owner_scan[3]
    elif owners and forking:
        # the iterator cannot run: the /proc walk in a forked child, beside the listing
        collect = _owners_in_child(root)
        owners_from = owners_from[:-1] + "; walked in a child process)"
    elif owners:
        say("processes")
        owner_scan = _scan_owners(root)
    say("programs")
    users = _scan_programs(memo, bpf_fds) if programs else {}
    bpffs: list[str] = []
    pinned: dict[int, tuple[str, ...]] = {}
    if pins:
        say("pins")
        try:
            if memo is None:
                bpffs = procfs.bpffs_mounts(root)
            else:               # the mount table read again only when it changed
                if memo.mount_watch is None:
                    memo.mount_watch = procfs.MountWatch(root)
                bpffs = memo.mount_watch.bpffs()
        except OSError as e:
            errors.append(f"mountinfo: {e}")
        pinned = _pins(bpffs, errors, memo)
        if bpf_fds is not None and memo is not None and memo.stamps is not None:
            bpf_fds["pin_stamps"] = memo.stamps
    say("maps" + (" and their entries" if entries else ""))
    light = None                # the light listing of a rescan: (ids, counts, frozen)
    data = None
    if (kernel_counts and root == "/" and memo is not None and memo.rows is not None
            and memo.list_raw is not None and memo.owner_seen is not None
            and (owner_raw is not None or not owners)):
        from bpfmem.host.count_iter import CountsUnavailable, map_light_raw
        try:
            data = map_light_raw(kept, entries)
        except CountsUnavailable:
            data = None
        else:
            light = entries
    if data is None and kernel_counts and root == "/":
        data = _map_listing(memo, counts=entries or memo is not None)
    if collect is not None:
        say("processes")
    with FdinfoReader() as fdr:
        pre: dict[int, int] = {}
        vanished = 0
        if data is None:
            recs, vanished = _listed_one_by_one(memo, fdr, pre, errors)
        if collect is not None:
            owner_scan = collect()
        held, memlock_of, frozen_of, owner_of, gone = owner_scan
        if pre:
            memlock_of = {**memlock_of, **pre}
        maps_t = None
        need: set | None = None
        incremental = (memo is not None and memo.rows is not None and data is not None
                       and memo.list_raw is not None and memo.owner_seen is not None
                       and (owner_raw is not None or not owners))
        if incremental and light is None and memo.list_light is not None:
            incremental = False      # a full listing after light ones: no comparing them
        if incremental:
            need = _moved(memo, held, owner_of, users, pinned, pins, owners_same, held_moved)
            need |= memo.again
            if memo.due_maps:           # their turn to be read again (ScanMemo.recheck)
                need |= _memlock_moved(memo, fdr, memo.due_maps - need)
            if data == memo.list_raw:
                data = memo.list_raw    # the same bytes: what was made of them stands
                ids, moved, gone_ids = None, [], set()
            elif light is not None:
                from bpfmem.host.count_iter import full_as_light, light_columns
                before = (memo.list_cols if memo.list_light == light
                          else full_as_light(memo.list_raw, light))
                ids, moved, gone_ids = _column_changes(light_columns(data), before)
            else:
                ids, moved, gone_ids = _listing_changes(data, memo.list_raw)
            if not need and not moved and not gone_ids:
                maps_t = memo.rows       # nothing moved: the last scan's records, as they are
                memo.unchanged += 1
                memo.reused = len(maps_t)
            else:
                maps_t, lost = _patch(memo, data, ids, moved, need, gone_ids, dict(
                    entries=entries, bound=entry_time_bound, cpus=cpus, errors=errors,
                    fdr=fdr, memlock_of=memlock_of, frozen_of=frozen_of, held=held,
                    owner_of=owner_of, users=users, pinned=pinned), light is not None)
                vanished += lost
        if maps_t is None:
            if data is not None:
                from bpfmem.host.count_iter import records
                recs = records(data)
            if memo is None and not entries:
                rows, lost = _rows_once(recs, fdr=fdr, memlock_of=memlock_of,
                                        frozen_of=frozen_of, held=held, owner_of=owner_of,
                                        users=users, pinned=pinned)
            else:
                how = dict(memo=memo, entries=entries, bound=entry_time_bound, cpus=cpus,
                           errors=errors, fdr=fdr, memlock_of=memlock_of,
                           frozen_of=frozen_of, held=held, owner_of=owner_of, users=users,
                           pinned=pinned)
                rows, lost, again = _rows(recs, need, **how)
            vanished += lost
            maps_t = tuple(rows)
            if memo is not None:
                maps_t = _remember(memo, maps_t, again)
    if memo is not None:
        if light is not None and data is not memo.list_raw:
            from bpfmem.host.count_iter import light_columns
            memo.list_cols = light_columns(data)
        memo.list_raw, memo.list_light = data, light
        memo.users, memo.pins_seen = users, pinned
        memo.owner_seen = owner_of
    return Snapshot(taken_at=start_wall, duration=time.monotonic() - start,
                    hostname=os.uname().nodename, kernel=os.uname().release,
                    possible_cpus=cpus, maps=maps_t, entries_counted=entries,
                    skipped=vanished + gone, errors=tuple(errors), bpffs=tuple(bpffs),
                    owners_from=owners_from)


def _patch(memo, data: bytes, ids: list[int] | None, moved: list[int], need: set,
           gone_ids: set, how: dict, light: bool = False) -> tuple[tuple, int]:
    """A rescan's records: the last scan's, with those of the maps whose listing record
    moved (positions ``moved`` in listing ``data``) or that ``need`` another look rebuilt,
    and those of ``gone_ids`` left out; (records, maps vanished meanwhile). Only the maps
    rebuilt are unpacked and looked at: 1% of a node changing costs its 1%."""
    from bisect import bisect_left

    from bpfmem.host.count_iter import RECORD, light_columns
    same = ids is None          # the listing is the last scan's (``data is memo.list_raw``):
    if same:                    # its columns, its records
        cols = memo.list_cols if light and memo.list_light is not None else None
        ids = (cols if cols is not None
               else light_columns(data) if light else _columns(data))[0]
    last_get = memo.maps.get
    if same and memo.rows is not None and len(memo.rows) == len(ids):
        rows = list(memo.rows)                      # (the same maps, in the same order)
    else:
        rows = [last_get(mid) for mid in ids]       # None: a new map
    where = set(moved)
    for mid in need:
        i = bisect_left(ids, mid)
        if i < len(ids) and ids[i] == mid:
            where.add(i)
    where = sorted(where)
    if light:
        recs, lost0 = _light_records(memo, data, where, how["errors"])
    else:
        recs, lost0 = [RECORD.unpack_from(data, i * RECORD.size) for i in where], 0
    built, lost, again = _rows([r for r in recs if r is not None], None, memo=memo,
                               gaps=True, **how)
    if lost0:                    # (a new map gone before its info was read: a gap too)
        it = iter(built)
        built = [None if r is None else next(it) for r in recs]
        lost += lost0
    for i, row in zip(where, built):
        rows[i] = row
    memo.reused += len(ids) - len(where)            # (the rebuilt ones _rows counted)
    maps_t = tuple(r for r in rows if r is not None) if lost or None in rows else tuple(rows)
    if same_objects(maps_t, memo.rows):
        maps_t = memo.rows  # all read as before (maps due for a check): the very tuple
    rebuilt = {ids[i] for i in where}
    maps = memo.maps
    for i, row in zip(where, built):
        if row is None:
            maps.pop(ids[i], None)
        else:
            maps[ids[i]] = row
    gone = set(gone_ids)
    gone.update(ids[i] for i, row in zip(where, built) if row is None)
    for mid in gone:
        maps.pop(mid, None)
    memo.again = (memo.again - rebuilt - gone) | again
    for table in (memo.fields, memo.counts):
        for mid in gone:
            table.pop(mid, None)
    memo.rows = maps_t
    return maps_t, lost


def _light_records(memo, data: bytes, where: list[int], errors: list[str]
                   ) -> tuple[list[tuple | None], int]:
    """The full records (count_iter.RECORD's tuples) of the maps at positions ``where`` of a
    light listing: a map seen before has its info from its last record, its frozen flag and
    count from the listing; a new map is opened for its info (BPF_OBJ_GET_INFO_BY_FD).
    (None: gone meanwhile.)"""
    from bpfmem.host.count_iter import LIGHT
    last = memo.maps
    out: list[tuple | None] = []
    gone = 0
    for i in where:
        mid, frozen, count = LIGHT.unpack_from(data, i * LIGHT.size)
        prev = last.get(mid)
        if prev is not None:
            out.append((mid, prev.type, prev.key_size, prev.value_size, prev.max_entries,
                        prev.map_flags, prev.map_extra, prev.btf_id, frozen, count,
                        prev.name))
            continue
        try:
            fd = bpfsys.map_fd_by_id(mid)
        except ObjectGone:
            out.append(None)
            gone += 1
            continue
        try:
            info = bpfsys.map_info(fd)
        except ObjectGone:
            out.append(None)
            gone += 1
            continue
        finally:
            os.close(fd)
        out.append((mid, info.type, info.key_size, info.value_size, info.max_entries,
                    info.map_flags, info.map_extra, info.btf_id, frozen, count, info.name))
    return out, gone


def _memlock_moved(memo, fdr: FdinfoReader, ids) -> set[int]:
    """The maps among ``ids`` (whose slice is due: ScanMemo.recheck) whose memlock the
    kernel gives now differs from their last record's, or that are gone; the memo forgets
    what it kept of them (their records are made again), and one whose memlock moved is
    read at every scan from then on (``memo.untrusted``: the model's claim failed for it).
    Checking the others costs an open by id, a read of fdinfo and a close each: no record
    is made."""
    moved: set[int] = set()
    last_get, untrusted = memo.maps.get, memo.untrusted
    fd_by_id, close, memlock_of = bpfsys.map_fd_by_id, os.close, fdr.memlock
    for mid in ids:
        try:
            fd = fd_by_id(mid)
        except ObjectGone:
            moved.add(mid)
            continue
        try:
            memlock = memlock_of(fd)
        finally:
            close(fd)
        prev = last_get(mid)
        if prev is None or prev.memlock != memlock:
            moved.add(mid)
            if prev is not None and memlock is not None:
                untrusted.add(mid)  # the model was wrong for it: read at every scan
    memo.forget_memlock(moved)
    return moved


def _remember(memo, rows: tuple, again: set) -> tuple:
    """The memo takes a scan's records (returned: after a full scan, a record equal to the
    scan before's is that scan's very object, and all of them equal, its very tuple, so what
    is kept by identity downstream, the exporter's compressed page blocks, stands); what it
    kept of maps that are gone goes."""
    rows = memo.same_as_before(rows)
    last = memo.maps
    if same_objects(rows, memo.rows):
        maps = last                     # the very same records
    else:
        maps = {m.id: m for m in rows}
    memo.maps, memo.rows, memo.again = maps, rows, again
    for table in (memo.fields, memo.counts):
        if len(table) > len(maps):
            for gone in table.keys() - maps.keys():
                del table[gone]
    return rows


def _diff(new: dict, old: dict) -> set:
    """The keys whose values differ between two dicts (present in one only, too)."""
    if new is old or new == old:
        return set()
    out = {k for k, v in new.items() if old.get(k, _ABSENT) != v}
    out.update(k for k in old.keys() - new.keys())
    return out


_ABSENT = object()


def _moved(memo, held, owner_of, users, pinned, pins: bool, owners_same: bool,
           held_moved: set | None = None) -> set[int]:
    """The ids of the maps whose records can differ from the last scan's beyond their
    listing: holders that changed (fds, or a holder's comm or cgroup), programs, pins.
    (Called before the memo takes this scan's figures.)"""
    dirty: set[int] = set()
    if held_moved is not None:
        dirty |= held_moved
    elif not owners_same and held is not memo.owner_held_last:
        dirty |= _diff(held, memo.owner_held_last or {})
    seen = memo.owner_seen
    renamed = {p for p, o in owner_of.items() if seen.get(p) is not o}
    if len(seen) != len(owner_of) or renamed:
        renamed |= seen.keys() - owner_of.keys()
    if renamed:
        dirty.update(mid for mid, per in held.items()
                     if not renamed.isdisjoint(p for p, _n in per))
    if users is not memo.users and users != memo.users:
        dirty |= _diff(users, memo.users or {})
    if pins and pinned is not memo.pins_seen:
        dirty |= _diff(pinned, memo.pins_seen or {})
    return dirty


def maps_held_by(pids, *, entries: bool = False, entry_time_bound: float = 0.5,
                 root: str = "/", known: dict | None = None) -> tuple[tuple[LiveMap, ...], int]:
    """The maps that the processes ``pids`` hold an fd to (only their fd tables are read, so
    this is cheap next to :func:`scan_maps`), with those processes as owners; pins and
    programs are left empty. Returns (maps by id, how many vanished meanwhile).

    ``known`` (map id -> MapInfo), when given, caches the kernel's info between calls (a
    map's attributes never change) and is updated in place.
    """
    from bpfmem.host.profile import host_possible_cpus
    held, memlock_of, frozen_of, owner_of, gone = _scan_owners(root, list(pids))
    cache = known if known is not None else {}
    cpus = host_possible_cpus(root) if entries else 0
    maps: list[LiveMap] = []
    for map_id in sorted(held):
        info = cache.get(map_id)
        counted: tuple = _NONE
        if info is None or entries:
            try:
                fd = bpfsys.map_fd_by_id(map_id)
            except ObjectGone:
                gone += 1
                continue
            try:
                if info is None:
                    info = cache[map_id] = bpfsys.map_info(fd)
                if entries:
                    counted = _count(fd, info.type, info.key_size, info.value_size,
                                     info.max_entries, cpus, entry_time_bound)
            except ObjectGone:
                gone += 1
                continue
            finally:
                os.close(fd)
        n, complete, method = counted
        own = tuple(Owner(o.pid, o.comm, o.cgroup, fds)
                    for pid, fds in held[map_id]
                    if (o := owner_of.get(pid)) is not None)
        maps.append(LiveMap(
            id=map_id, name=info.name, type=info.type, key_size=info.key_size,
            value_size=info.value_size, max_entries=info.max_entries, map_flags=info.map_flags,
            map_extra=info.map_extra, btf_id=info.btf_id, memlock=memlock_of.get(map_id),
            frozen=frozen_of.get(map_id), owners=own, entries=n, entries_complete=complete,
            entries_method=method))
    return tuple(maps), gone
