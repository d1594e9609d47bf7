"""Walk the live host: every BPF map, who holds it, which programs use it, where it is pinned.

:func:`scan_maps` never writes to a map: maps are opened read-only by id (or by pin) and
entries are counted with lookups. A map or process that disappears mid-scan is skipped and
counted in ``Snapshot.skipped``, never fatal. Lack of privilege is fatal and says which
capability is needed (from :mod:`bpfmem.host.bpfsys`).
"""

from __future__ import annotations

import errno
import os
import time
from typing import Callable

from bpfmem.errors import HostError, ObjectGone
from bpfmem.host import bpfsys, procfs
from bpfmem.host.cgroup import memory_cgroup_path, namespace_roots
from bpfmem.host.count_iter import KERNEL_COUNTED
from bpfmem.host.walk import MAX_DEPTH, walk_tree
from bpfmem.records import LiveMap, Owner, ProgRef, Snapshot
from bpfmem.uapi import MapType as T

__all__ = ["Owner", "ProgRef", "LiveMap", "Snapshot", "scan_maps", "maps_held_by",
           "walk_pins", "COUNTED_TYPES", "ALWAYS_FULL_TYPES", "PERCPU_TYPES"]

# map types whose entries can be walked and whose memory follows them
COUNTED_TYPES = frozenset({T.HASH, T.PERCPU_HASH, T.LRU_HASH, T.LRU_PERCPU_HASH, T.LPM_TRIE,
                           T.HASH_OF_MAPS})
# map types whose every slot exists from creation: entries == max_entries
ALWAYS_FULL_TYPES = frozenset({T.ARRAY, T.PERCPU_ARRAY})
PERCPU_TYPES = frozenset({T.PERCPU_HASH, T.PERCPU_ARRAY, T.LRU_PERCPU_HASH,
                          T.PERCPU_CGROUP_STORAGE})


def _read_text(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return None


def _self_fdinfo(fd: int) -> tuple[int | None, bool | None]:
    """(memlock, frozen) from this process's fdinfo of ``fd`` ((None, None) if unreadable)."""
    try:
        f = os.open(f"/proc/self/fdinfo/{fd}", os.O_RDONLY)
    except OSError:
        return None, None
    try:
        raw = os.read(f, 4096)
    finally:
        os.close(f)
    memlock = procfs.fdinfo_field(raw, b"\nmemlock:")
    frozen = procfs.fdinfo_field(raw, b"\nfrozen:")
    return (None if memlock is None else int(memlock),
            None if frozen is None else frozen == b"1")


def _percpu_value_size(value_size: int, cpus: int) -> int:
    return ((value_size + 7) // 8) * 8 * cpus


def _count(fd: int, mtype: int, key_size: int, value_size: int, max_entries: int, cpus: int,
           bound: float) -> tuple[int | None, bool | None, str | None]:
    if mtype in ALWAYS_FULL_TYPES:
        return max_entries, True, "array"
    if mtype not in COUNTED_TYPES:
        return None, None, None
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


def _pins(mount_points: list[str], errors: list[str], memo) -> dict[int, list[str]]:
    """:func:`walk_pins`, or the last walk's pins while no bpffs directory changed."""
    if memo is None:
        return walk_pins(mount_points, errors)
    from bpfmem.host.rescan import pin_stamps, settled
    stamps = pin_stamps(mount_points)
    if stamps != memo.stamps:
        memo.pins = walk_pins(mount_points, errors)
    # stamps of a directory that just changed are not kept: a second change within the
    # clock's tick would leave its mtime as it is (the next scan walks again)
    memo.stamps = stamps if settled(stamps) else None
    return memo.pins


def _scan_owners(root: str, pids: list[int] | None = None, records=None, memo=None
                 ) -> tuple[dict, dict, dict, dict, int]:
    """map id -> ((pid, fds), ...), memlock and frozen per map id, Owner per pid, processes gone;
    over every process, or only ``pids``. ``records`` are (pid, fd, map id) the kernel's
    iterator gave (then the fds are not walked, and memlock comes from the map walk)."""
    held: dict[int, dict[int, int]] = {}
    memlock_of: dict[int, int] = {}
    frozen_of: dict[int, bool] = {}
    if records is not None:
        for pid, _fd, map_id in records:
            per = held.setdefault(map_id, {})
            per[pid] = per.get(pid, 0) + 1
    for mfd in (procfs.scan_map_fds(pids=pids, root=root) if records is None else ()):
        per = held.setdefault(mfd.map_id, {})
        per[mfd.pid] = per.get(mfd.pid, 0) + 1
        if mfd.memlock is not None:
            memlock_of[mfd.map_id] = mfd.memlock
        if mfd.frozen is not None:
            frozen_of[mfd.map_id] = mfd.frozen
    # per map, its holders as ((pid, fds), ...) by pid: a tuple, not a dict (10,000 maps)
    holders = {mid: tuple(sorted(per.items())) for mid, per in held.items()}
    owner_of, gone = _owner_table({p for per in held.values() for p in per}, root, memo)
    return holders, memlock_of, frozen_of, owner_of, gone


def _owner_table(pids, root: str, memo=None) -> tuple[dict[int, "Owner"], int]:
    """(Owner per pid, processes gone) from each process's comm and cgroup; with a memo, a
    process whose comm and cgroup read as before keeps its Owner (the same object)."""
    base = os.path.join(root, "proc")
    known = memo.owner_cache if memo is not None else None
    ns_roots = None
    owner_of: dict[int, Owner] = {}
    gone = 0
    for pid in pids:
        comm = _read_text(f"{base}/{pid}/comm")
        if comm is None:
            gone += 1
            continue
        cg = _read_text(f"{base}/{pid}/cgroup")
        hit = known.get(pid) if known is not None else None
        if hit is not None and hit[0] == comm and hit[1] == cg:
            owner_of[pid] = hit[2]
            continue
        if ns_roots is None:
            try:
                ns_roots = namespace_roots(root)
            except (OSError, HostError):
                ns_roots = {}
        owner_of[pid] = Owner(pid, comm.rstrip("\n"),
                              memory_cgroup_path(cg, ns_roots) if cg else None)
        if known is not None:
            known[pid] = (comm, cg, owner_of[pid])
    if known is not None and len(known) > len(owner_of):
        for pid in known.keys() - owner_of.keys():
            del known[pid]
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


def _scan_programs(memo=None) -> dict[int, list[ProgRef]]:
    users: dict[int, list[ProgRef]] = {}
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
            users.setdefault(mid, []).append(ref)
    if known is not None and len(known) > len(seen):
        for gone in known.keys() - seen:
            del known[gone]
    return users


def _scan_map_infos(entries: bool, bound: float, cpus: int, errors: list[str],
                    fdinfo: bool = False, memo=None, kernel_counts: dict | None = None,
                    same: bool = False, old_counts: dict | None = None):
    """(MapInfo, (entries, complete, method), fdinfo or None) for every map id, and how many
    vanished. ``fdinfo`` also reads each map's fdinfo through the fd at hand.
    ``kernel_counts`` are the kernel's own counts of hash maps, listed for every map on the
    host in id order (:func:`_kernel_listing`; the map ids are then taken from it). With a
    :class:`~bpfmem.host.rescan.ScanMemo`, what cannot have changed since the last scan is
    taken from it, and a map that needs nothing new is not opened at all. ``same`` (the
    kernel's listing is byte for byte the last scan's: the same maps with the same counts)
    reads again only the maps the last scan had to open; ``old_counts`` (the last scan's
    listing) lets a listing that moved reuse the entries of the maps whose count did not.
    ``memo.fresh`` is left the ids whose entry differs from the last scan's (None: all)."""
    raw: list[tuple] = []
    gone = 0
    fd_by_id, info_of, close = bpfsys.map_fd_by_id, bpfsys.map_info, os.close
    none = (None, None, None)
    infos = memo.maps if memo is not None else {}   # the last scan's records: their info
    kept = memo.fields if memo is not None else {}  # memlock that cannot change
    counts = memo.counts if memo is not None else {}  # (fields, counted) where memlock follows
    kcounts = kernel_counts or {}
    opened: list[int] = []                          # indexes in raw of the maps read anew
    fresh: set[int] | None = set()                  # ids whose entry is not the last one's

    def known_fields(map_id: int, known: int | None):
        fields = kept.get(map_id)
        if fields is None and known is not None:
            last = counts.get(map_id)
            if last is not None and last[1][0] == known:
                fields = last[0]        # the same count: the same memlock
        return fields

    def one(map_id: int):
        """The map's tuple, True when it was opened; None when it is gone."""
        info = infos.get(map_id)
        if info is not None:            # known: perhaps nothing to read
            known = kcounts.get(map_id) if info.type in KERNEL_COUNTED else None
            fields = known_fields(map_id, known) if fdinfo else None
            counted: tuple | None = none
            if entries:
                if known is not None:
                    counted = (known, True, "kernel")
                elif info.type in ALWAYS_FULL_TYPES or info.type not in COUNTED_TYPES:
                    counted = _count(-1, info.type, info.key_size, info.value_size,
                                     info.max_entries, cpus, bound)
                else:
                    counted = None
            if counted is not None and (fields is not None or not fdinfo):
                memo.reused += 1
                return (info, counted, fields), False
        try:
            fd = fd_by_id(map_id)
        except ObjectGone:
            return None
        try:
            if info is None:
                info = info_of(fd)
            known = kcounts.get(map_id) if info.type in KERNEL_COUNTED else None
            fields = known_fields(map_id, known) if fdinfo else None
            if fdinfo and fields is None:
                fields = _self_fdinfo(fd)
                if memo is not None and fields[0] is not None and memo.memlock_static(info):
                    kept[map_id] = fields
            counted = none
            if entries:
                last = counts.get(map_id)
                if known is not None:
                    counted = (known, True, "kernel")
                elif last is not None and fields is not None and last[0][0] == fields[0]:
                    counted = last[1]      # memlock follows the count: unchanged, so is it
                    memo.reused += 1
                else:
                    try:
                        counted = _count(fd, info.type, info.key_size, info.value_size,
                                         info.max_entries, cpus, bound)
                    except ObjectGone:
                        raise
                    except HostError as e:
                        errors.append(f"map {map_id} ({info.name}): counting entries: {e}")
            if (memo is not None and fields is not None and fields[0] is not None
                    and ((entries and counted[1]) or known is not None)
                    and memo.memlock_counts(info)):
                counts[map_id] = (fields, counted if known is None or entries
                                  else (known, True, "kernel"))
        except ObjectGone:
            return None
        finally:
            close(fd)
        return (info, counted, fields), True

    if same and memo is not None and memo.raw is not None:
        raw = list(memo.raw)            # the same maps: only those opened last time again
        for i in memo.opened:
            got = one(raw[i][0].id)
            if got is None:
                gone += 1
                raw[i] = None
                continue
            if got[0] != raw[i]:
                fresh.add(got[0][0].id)
            raw[i] = got[0]
            if got[1]:
                opened.append(i)
        if gone:
            keep = [i for i, r in enumerate(raw) if r is not None]
            where = {old: new for new, old in enumerate(keep)}
            raw = [raw[i] for i in keep]
            opened = [where[i] for i in opened]
        memo.reused = len(raw) - len(opened)
    else:
        # a listing that moved: a map whose count is as before, and which the last scan did
        # not have to open, is the last scan's entry; the others are read
        last_raw = memo.raw if memo is not None and old_counts is not None else None
        by_id = {} if last_raw is None else {e[0].id: e for e in last_raw}
        if last_raw is not None:
            for i in memo.opened:
                by_id.pop(last_raw[i][0].id, None)
        for map_id in (kcounts if kernel_counts is not None else bpfsys.map_ids()):
            e = by_id.get(map_id)
            if e is not None and old_counts.get(map_id) == kcounts[map_id]:
                raw.append(e)
                continue
            got = one(map_id)
            if got is None:
                gone += 1
                continue
            if got[1]:
                opened.append(len(raw))
            raw.append(got[0])
            if memo is not None and fresh is not None and got[0] != e:
                fresh.add(map_id)
        if last_raw is None:
            fresh = None                # (no earlier entries: every map is new)
    if memo is not None:
        memo.keep_only({info.id for info, _c, _f in raw})
        memo.raw, memo.opened = raw, opened
        memo.fresh = fresh
    return raw, gone


def _owner_records(root: str, method: str, every_kind: bool = False, kept: dict | None = None
                   ) -> tuple[bytes | None, str, bytes | None]:
    """The kernel iterator's (pid, fd, map id) records as it wrote them (twice: parsed by the
    caller only when they differ from the last scan's), or None and why the /proc walk is
    used instead."""
    if method == "proc":
        return None, "/proc (asked for)", None
    if root != "/":
        return None, "/proc (another root)", None
    from .owner_iter import IteratorUnavailable, bpf_fds_raw, map_fds_raw
    try:
        if every_kind:
            try:
                data = bpf_fds_raw(kept)
            except IteratorUnavailable:
                data = map_fds_raw(kept)    # the maps' walk alone: /proc for the rest
                every_kind = False
        else:
            data = map_fds_raw(kept)
    except IteratorUnavailable as e:
        if method == "iterator":
            raise
        return None, f"/proc ({e})", None
    return data, "kernel iterator" if not every_kind else "kernel iterator (every BPF fd)", data


def _kernel_listing(memo) -> tuple[dict | None, bool]:
    """({map id: count} of every map, in id order, from the kernel's map iterator, or None
    where it cannot run; and whether its bytes are the last scan's (the same maps, the same
    counts))."""
    from bpfmem.host.count_iter import CountsUnavailable, map_counts_raw, parse_records
    try:
        data = map_counts_raw(memo.iterators if memo is not None else None)
    except CountsUnavailable:
        return None, False
    if memo is not None and memo.count_raw == data and memo.kcounts is not None:
        return memo.kcounts, True
    counts = parse_records(data)
    if memo is not None:
        memo.count_raw, memo.kcounts = data, counts
    return counts, False


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

    memlock comes from the fdinfo of a process that holds the map (read anyway to learn
    which map each fd is), else from the fdinfo of an fd opened by id.

    ``parallel`` walks the processes' fds in a forked child while this process walks the
    maps (for command-line use; a library caller with threads should leave it off).

    ``owners_method``: "auto" finds the owners with the kernel's task_file iterator
    (host/owner_iter.py; needs CAP_BPF and CAP_PERFMON), or walks /proc where it cannot run
    or where ``parallel`` walks it in a child beside the map walk (as fast, measured) and
    programs are not asked for (``bpf_fds``: the iterator finds their fds in the same walk,
    where /proc would be walked twice); "iterator" or "proc" forces one. ``Snapshot.owners_from`` says which ran, and why.

    ``memo`` (a :class:`~bpfmem.host.rescan.ScanMemo` kept by the caller between scans) makes
    the scan incremental: what cannot have changed since the last one is not read again.

    ``kernel_counts``: list the maps with the kernel's map iterator (one read instead of a
    BPF_MAP_GET_NEXT_ID per map) and, with ``entries``, take hash maps' counts from the
    kernel's own element count (6.6+; host/count_iter.py; the map's ``entries_method`` is
    then "kernel"); the other maps are walked. Where it cannot run, the ids are listed one
    by one.

    ``bpf_fds`` (a dict): where the owners come from the kernel's iterator, the same walk
    also finds every program, link and BTF fd; they are left in ``bpf_fds["fds"]`` as
    (pid, fd, kind, id, a link's program id) for :func:`bpfmem.host.progs.scan_programs`
    (the key is absent where they were not found: then that walks /proc).
    """
    from bpfmem.host.profile import host_possible_cpus
    say = progress or (lambda _what: None)
    start_wall, start = time.time(), time.monotonic()
    if memo is not None:
        memo.begin()
    cpus = host_possible_cpus(root)
    errors: list[str] = []
    collect = None
    forking = parallel and (os.cpu_count() or 1) > 1
    if owners and owners_method == "auto" and forking and bpf_fds is None:
        # measured on 10,000 maps: the /proc walk in a forked child beside the map walk is
        # as fast as the iterator (which leaves the fdinfo reads to the map walk)
        records, owners_from = None, "/proc (walked in parallel with the maps)"
        owner_raw = None
    else:
        records, owners_from, owner_raw = ((None, "", None) if not owners
                                           else _owner_records(
                                               root, owners_method, bpf_fds is not None,
                                               memo.iterators if memo is not None else None))
    every_kind = owners_from.endswith("(every BPF fd)")
    if every_kind:
        owners_from = "kernel iterator"
    owners_same = False
    if records is not None:
        say("processes")
        if (memo is not None and owner_raw is not None and memo.owner_raw == owner_raw
                and memo.owner_held is not None):
            held0 = memo.owner_held    # the same fds: the same holders (names read again)
            owner_scan = (held0, {}, {}, *_owner_table(memo.owner_pids, root, memo))
            others = memo.owner_others
            owners_same = True
        else:
            from .owner_iter import parse_fd_records, parse_records
            if every_kind:
                map_recs, others = parse_fd_records(records)
            else:
                map_recs, others = parse_records(records), None
            owner_scan = _scan_owners(root, records=map_recs, memo=memo)
        if memo is not None:
            memo.owner_held_last = memo.owner_held
        if memo is not None and not owners_same:
            memo.owner_raw, memo.owner_held = owner_raw, owner_scan[0]
            memo.owner_pids = sorted({p for per in owner_scan[0].values() for p, _n in per})
            memo.owner_others = others
        if every_kind and bpf_fds is not None:
            bpf_fds["fds"] = others     # programs', links' and BTF objects' fds
    elif owners and forking:
        collect = _owners_in_child(root)
    elif owners:
        say("processes")
        owner_scan = _scan_owners(root)
    say("programs")
    users = _scan_programs(memo) if programs else {}
    bpffs: list[str] = []
    pinned: dict[int, list[str]] = {}
    if pins:
        say("pins")
        try:
            bpffs = procfs.bpffs_mounts(root)
        except OSError as e:
            errors.append(f"mountinfo: {e}")
        pinned = _pins(bpffs, errors, memo)
    say("maps" + (" and their entries" if entries else ""))
    same = False
    kcounts = None
    old_counts = memo.kcounts if memo is not None and memo.raw is not None else None
    if kernel_counts and root == "/":
        kcounts, same = _kernel_listing(memo)   # every map and its count, in one read
    last_raw = memo.raw if memo is not None else None
    raw, vanished = _scan_map_infos(entries, entry_time_bound, cpus, errors,
                                    fdinfo=not owners or records is not None, memo=memo,
                                    kernel_counts=kcounts, same=same,
                                    old_counts=old_counts if kcounts is not None else None)
    if collect is not None:
        say("processes")
        owner_scan = collect()
    held, memlock_of, frozen_of, owner_of, gone = (owner_scan if owners
                                                   else ({}, {}, {}, {}, 0))
    if (memo is not None and same and (owners_same or not owners) and memo.rows is not None
            and last_raw is not None and len(raw) == len(last_raw) and all(
                a is b or a == b for a, b in zip(raw, last_raw))
            and users == memo.users and (not pins or pinned is memo.pins_seen)
            and memo.owner_seen is not None and len(memo.owner_seen) == len(owner_of)
            and all(memo.owner_seen.get(p) is o for p, o in owner_of.items())):
        maps_t = memo.rows      # nothing moved: the last scan's records, as they are
        memo.unchanged += 1
    else:
        dirty = None
        if (memo is not None and memo.rows is not None and memo.fresh is not None
                and (records is not None or not owners) and memo.owner_seen is not None):
            dirty = _moved(memo, held, owner_of, users, pinned, pins)
        maps_t = _records(raw, held, memlock_of, frozen_of, owner_of, users, pinned,
                          memo.maps if memo is not None else {}, dirty)
    if memo is not None and maps_t is not memo.rows:
        # the records stand in for the kernel's info from now on: the MapInfo goes
        memo.raw = [(m, c, f) for m, (_i, c, f) in zip(maps_t, raw)]
    if memo is not None:
        memo.maps = {m.id: m for m in maps_t} if maps_t is not memo.rows else memo.maps
        memo.rows, memo.users, memo.pins_seen = maps_t, users, pinned
        memo.owner_seen = dict(owner_of)
    return Snapshot(taken_at=start_wall, duration=time.monotonic() - start,
                    hostname=os.uname().nodename, kernel=os.uname().release,
                    possible_cpus=cpus, maps=maps_t, entries_counted=entries,
                    skipped=vanished + gone, errors=tuple(errors), bpffs=tuple(bpffs),
                    owners_from=owners_from)


def _diff(new: dict, old: dict) -> set:
    """The keys whose values differ between two dicts (present in one only, too)."""
    if new is old or new == old:
        return set()
    out = {k for k, v in new.items() if old.get(k, _ABSENT) != v}
    out.update(k for k in old.keys() - new.keys())
    return out


_ABSENT = object()


def _moved(memo, held, owner_of, users, pinned, pins: bool) -> set[int]:
    """The ids of the maps that can differ from the last scan's records: entries read anew
    that differ, holders that changed (fds, or a holder's comm or cgroup), programs, pins.
    (Called before the memo takes this scan's figures.)"""
    dirty = set(memo.fresh)
    if held is not memo.owner_held_last:
        dirty |= _diff(held, memo.owner_held_last or {})
    renamed = {p for p, o in owner_of.items() if memo.owner_seen.get(p) is not o}
    renamed |= memo.owner_seen.keys() - owner_of.keys()
    if renamed:
        dirty.update(mid for mid, per in held.items()
                     if not renamed.isdisjoint(p for p, _n in per))
    if users != memo.users:
        dirty |= _diff(users, memo.users or {})
    if pins and pinned is not memo.pins_seen:
        dirty |= _diff(pinned, memo.pins_seen or {})
    return dirty


def _records(raw, held, memlock_of, frozen_of, owner_of, users, pinned, last,
             dirty: set | None = None) -> tuple[LiveMap, ...]:
    """The LiveMap of each map read (a map whose figures, owners, programs and pins are
    those of ``last``'s record keeps that record; a map not in ``dirty``, when given, keeps
    it without being looked at)."""
    maps: list[LiveMap] = []
    owners_seen: dict[tuple[int, int], Owner] = {}

    def _owner(pid: int, fds: int) -> Owner:  # one Owner per (process, fd count), shared
        o = owners_seen.get((pid, fds))
        if o is None:
            base = owner_of[pid]
            o = owners_seen[(pid, fds)] = Owner(pid, base.comm, base.cgroup, fds)
        return o

    for entry in raw:
        info = entry[0]
        map_id = info.id
        if dirty is not None and map_id not in dirty:
            prev = last.get(map_id)
            if prev is not None:
                maps.append(prev)
                continue
        (n, complete, method), fields = entry[1], entry[2]
        memlock, frozen = memlock_of.get(map_id), frozen_of.get(map_id)
        if memlock is None:  # no process holds it (pinned, or held by programs only)
            memlock, frozen = fields if fields is not None else _fdinfo_by_id(map_id)
        per = held.get(map_id)
        own = () if not per else tuple(
            _owner(pid, fds) for pid, fds in per if pid in owner_of)
        progs = tuple(users.get(map_id, ()))
        pins_of = tuple(sorted(pinned.get(map_id, ())))
        prev = last.get(map_id)
        if (prev is not None and prev.memlock == memlock and prev.entries == n
                and prev.owners == own and prev.programs == progs and prev.pins == pins_of
                and prev.frozen == frozen and prev.entries_complete == complete
                and prev.entries_method == method):
            maps.append(prev)    # unchanged: the same record (an idle node allocates none)
            continue
        maps.append(LiveMap(
            id=map_id, name=info.name, type=info.type, key_size=info.key_size,
            value_size=info.value_size, max_entries=info.max_entries, map_flags=info.map_flags,
            map_extra=info.map_extra, btf_id=info.btf_id, memlock=memlock, frozen=frozen,
            owners=own, programs=progs, pins=pins_of, entries=n, entries_complete=complete,
            entries_method=method))
    return tuple(maps)


def _fdinfo_by_id(map_id: int) -> tuple[int | None, bool | None]:
    """(memlock, frozen) of a map no process holds (opened again by id)."""
    try:
        fd = bpfsys.map_fd_by_id(map_id)
    except ObjectGone:
        return None, None
    try:
        return _self_fdinfo(fd)
    finally:
        os.close(fd)


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
        counted: tuple = (None, None, None)
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
