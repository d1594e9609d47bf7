"""What one scan of the node learned that the next can reuse: the exporter scans every few
seconds, and on an idle node almost nothing changes between two scans.

Kept between scans, by the kernel's ids (map and program ids are allocated cyclically up to
INT_MAX, so an id names one object while the kernel runs):
- the kernel's map listing (host/count_iter.py: every map's info, frozen flag and count, in
  one read) as it read: a listing that reads the same bytes again lists the same maps with
  the same counts; one that moved is compared record by record, and only maps whose record
  moved are looked at again;
- a map's memlock where it cannot change: the model says it is the same empty
  and full on this kernel (arrays, preallocated hash maps, ring buffers, ...);
- where memlock follows the entries one to one (hash maps without preallocation and LPM
  tries on 6.4+, whose ``map_mem_usage`` counts the elements): the count while memlock is
  unchanged (the map is not walked again), and memlock while the count the kernel keeps for
  hash maps (6.6+, :mod:`.count_iter`) is unchanged (the map is not opened at all); the
  others' memlock is read again every scan (``again``);
- a program's name, type and map ids;
- the bpffs pins, while no directory under the mounts changed (each directory's inode and
  mtime; a pin or unpin changes its directory's mtime). A directory changed less than a
  second before it was looked at is not trusted: the kernel stamps mtimes with a clock that
  ticks every few milliseconds, so a second change within the same tick would leave the
  same mtime (the next scan walks the pins again).
Owners are read every scan (the kernel's iterator gives them in one stream, each record with
its process's comm and cgroup ids: a process whose stamps are as before keeps its Owner
unread; a cgroup renamed keeps its ids, and waits for its process's slice to come due,
below). A map whose
figures, owners, programs and pins are all as before keeps the last scan's record object, so
an idle node's scan allocates almost nothing (the exporter's memory stays flat).

What is taken on trust (a memlock the model says cannot change or follows the count, a
process's cgroup path while its cgroup ids are as before, the programs' figures, BTF objects,
the JIT's memory and the pins while their stamps stand) is read again at least every
``recheck`` seconds, a slice at a time: the maps and processes are spread over
:data:`SLICES` slices by id, and each scan reads again the slices whose turn came since
the last one (a map's memlock is read from fdinfo, and its record made again only where it
moved; a map whose memlock moved where the model said it could not is not taken on trust
again: ``untrusted``); the program side is read again at the start of every round. The
cost of checking is so spread evenly in time, whatever the scan interval: 10,000 maps
checked over 15 minutes are some 11 maps a second, where a full rescan every 30th scan read
all 10,000 at once (135 ms) and bounded staleness by scans, not time.

A full scan, which forgets all of it and reads everything again, is the first one, and with
``full_every`` every ``full_every``-th; a record it reads as the scan before had it stays
that scan's very object, so what is kept by identity downstream (the exporter's compressed
page) is not made again.
"""

from __future__ import annotations

import os
import time
import weakref
from bpfmem.values import dataclass, field

from .walk import walk_tree

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Callable

__all__ = ["ScanMemo", "pin_stamps", "settled", "same_objects"]

# The slices the maps and processes are spread over for checking again (by id modulo): one
# slice's turn comes every ``recheck / SLICES`` seconds
SLICES = 64

# How long after its last change a directory's mtime is trusted to change with the next
# one: far more than the coarse clock's tick (a jiffy, at most 10 ms) the kernel stamps with
SETTLE_NS = 1_000_000_000


def _never(_info) -> bool:
    return False


@dataclass
class ScanMemo:
    """State one :func:`bpfmem.host.live.scan_maps` call leaves for the next.

    ``memlock_static(info)`` and ``memlock_counts(info)`` say, for a map's kernel info, that
    its memlock cannot change, or that it changes exactly with its entry count (from the model
    of the kernel being scanned: :func:`bpfmem.analysis.live.memlock_behaviour`)."""

    memlock_static: Callable = _never
    memlock_counts: Callable = _never
    full_every: int = 0                            # 0: only the first scan is a full one
    recheck: float = 900.0                         # seconds (0: never read again on trust)
    clock: Callable = time.monotonic
    round_start: float = 0.0                       # when the checking round began
    checked: int = 0                               # slices whose turn came since then
    due: frozenset = frozenset()                   # the slices this scan reads again
    due_maps: frozenset = frozenset()              # the map ids of those slices (kept
    #                                                memlock: read again by the scan)
    sliced: tuple | None = None                    # (rows, {slice: the ids of its maps})
    scans: int = 0
    full_scans: int = 0
    fields: dict = field(default_factory=dict)     # map id -> memlock, of static maps
    counts: dict = field(default_factory=dict)     # map id -> (memlock, (entries, complete,
    #                          method), the kernel's count then or -1) where memlock follows
    #                          the entries
    programs: dict = field(default_factory=dict)   # prog id -> (ProgRef, map ids)
    prog_infos: dict = field(default_factory=dict)  # prog id -> (ProgInfo, memlock): the
    #                                                 program walk's (host/progs.py)
    prog_raw: bytes | None = None                  # the program iterator's records
    prog_light: bytes | None = None                # their light listing (prog_iter.light_of)
    prog_light_off: bool = False                   # the light iterator cannot run here
    prog_recs: list | None = None                  # the ProgRecords made of them
    prog_users: dict | None = None                 # map id -> programs, made of them
    prog_known: dict = field(default_factory=dict)  # a record -> itself completed (JIT
    #                                                 of subprograms, maps past the first 4)
    prog_jit: dict = field(default_factory=dict)   # the JIT reading and the program ids then
    prog_last: dict = field(default_factory=dict)  # the program walk's key and records
    stamps: tuple | None = None                    # pin_stamps() of the last pin walk
    pins: dict = field(default_factory=dict)       # map id -> pin paths (sorted), of that walk
    maps: dict = field(default_factory=dict)       # map id -> the last scan's LiveMap
    reused: int = 0                                # maps of the last scan read from memory
    # the kernel's listings of the last scan, as read, and what was made of them: while a
    # listing reads the same bytes, what was made of it stands
    list_raw: bytes | None = None                  # the map iterator's records (count_iter)
    list_light: bool | None = None                 # list_raw is a light listing (of every
    #                                                count: True; None: a full one)
    list_cols: tuple | None = None                 # (ids, counts, frozen) of a light one
    again: set = field(default_factory=set)        # map ids whose memlock (or count) is
    #                                                read again every scan
    untrusted: set = field(default_factory=set)    # map ids whose memlock a check found
    #   moved where the model said it could not (or not with its count): read at every
    #   scan from then on
    owner_raw: bytes | None = None                 # the task_file iterator's records
    owner_held: dict | None = None                 # map id -> ((pid, fds), ...), of those
    owner_pids: list = field(default_factory=list)  # the pids in owner_held
    owner_held_last: dict | None = None            # owner_held of the scan before
    owner_others: list | None = None               # the program, link and BTF fds of those
    owner_cache: dict = field(default_factory=dict)  # pid -> (kernel stamps, comm,
    #                                                   cgroup text, Owner)
    owner_stamps: bool = False                     # the owner records carried stamps
    task_act: dict | None = None                   # tgid -> its tasks' activity records
    owner_kind: bool = False                       # owner_raw is of every BPF fd
    owner_sorted: bool = False                     # owner_raw's records are in tgid order
    owner_pids_all: set = field(default_factory=set)  # the tgids of owner_raw's records
    owner_delta: dict | None = None                # pid -> (records before, after) of the
    #                                                processes whose records last moved
    owner_seen: dict | None = None                 # pid -> Owner of the last scan
    users: dict | None = None                      # map id -> programs, of the last scan
    pins_seen: dict | None = None                  # the pins the last scan used
    rows: tuple | None = None                      # the last scan's LiveMaps, in order
    unchanged: int = 0                             # scans that found nothing moved
    before_full: tuple | None = None               # (maps, rows) of the scan before a full
    #                                                one, until that full one is remembered
    mount_watch: object = None                     # procfs.MountWatch: the mount table,
    #                                                read again when the kernel flags a change
    cpus: int = 0                                  # the possible CPUs (fixed at boot)
    iterators: dict = field(default_factory=dict)  # the kernel iterators' links, kept
    #   (loaded and verified once; closed by close(), or when the memo is collected)

    def __post_init__(self) -> None:
        from .owner_iter import close_kept
        weakref.finalize(self, close_kept, self.iterators)

    def close(self) -> None:
        """Close the iterator links and the mount table file the scans kept."""
        from .owner_iter import close_kept
        close_kept(self.iterators)
        self._close_watch()

    def _close_watch(self) -> None:
        watch, self.mount_watch = self.mount_watch, None
        if watch is not None:
            watch.close()

    def begin(self) -> bool:
        """Start a scan; True (everything forgotten) when it is a full one. Otherwise the
        slices whose turn came are forgotten (:meth:`slices_due`)."""
        full = self.scans == 0 or (self.full_every > 0 and self.scans % self.full_every == 0)
        now = self.clock()
        self.due = self.due_maps = frozenset()
        if full:
            self.round_start, self.checked = now, 0
            self.fields.clear()
            self.counts.clear()
            self.programs.clear()
            self.prog_infos.clear()
            self.prog_jit.clear()
            self.prog_raw = self.prog_recs = self.prog_users = self.prog_light = None
            self.prog_known.clear()
            self.prog_last.clear()
            self.stamps, self.pins = None, {}
            if self.rows is not None:
                self.before_full = (self.maps, self.rows)
            self.maps = {}
            self.list_raw = self.list_light = self.list_cols = None
            self.again = set()
            self.untrusted = set()
            self.owner_raw = self.owner_held = self.owner_seen = None
            self.owner_held_last = None
            self.owner_others = None
            self.owner_stamps = False
            self.task_act = None
            self.owner_sorted = False
            self.owner_pids_all = set()
            self.owner_delta = None
            self.owner_cache.clear()
            self.users = self.pins_seen = self.rows = None
            self.sliced = None
            self._close_watch()
            self.cpus = 0
            self.full_scans += 1
        else:
            self._forget_due(now)
        self.scans += 1
        self.reused = 0
        return full

    def slices_due(self, now: float) -> frozenset:
        """The slices whose turn came since the last scan (at most every slice once): the
        ``t``-th turn, ``t * recheck / SLICES`` seconds into the round, is slice
        ``(t - 1) % SLICES``'s, so each slice's comes once every ``recheck`` seconds."""
        if self.recheck <= 0:
            return frozenset()
        turns = int((now - self.round_start) * SLICES / self.recheck)
        new = min(turns - self.checked, SLICES)
        self.checked = turns
        return frozenset((turns - i) % SLICES for i in range(1, new + 1)) if new > 0 \
            else frozenset()

    def _forget_due(self, now: float) -> None:
        """Name the maps of the slices due now (``due_maps``: the scan reads their memlock
        again, and makes again the record of one that moved, :meth:`forget_memlock`), and at
        a round's start (slice 0) forget the program side and the pins."""
        due = self.due = self.slices_due(now)
        if not due:
            return
        rows = self.rows
        if rows is not None:
            if self.sliced is None or self.sliced[0] is not rows:
                groups: dict[int, list[int]] = {}   # made again only when the maps moved
                for m in rows:
                    mid = m.id
                    groups.setdefault(mid % SLICES, []).append(mid)
                self.sliced = (rows, groups)
            groups = self.sliced[1]
            self.due_maps = frozenset(mid for k in due for mid in groups.get(k, ()))
        if 0 in due:        # the program side's figures, the JIT's, BTF objects, pins
            if self.untrusted:
                self.untrusted &= self.maps.keys()      # (those gone forgotten)
            self.prog_infos.clear()
            self.prog_jit.clear()
            self.prog_light = None          # the full program listing read again
            for key in ("quick", "pins"):   # (the records' key stays: it is made of what
                self.prog_last.pop(key, None)   # a scan reads, so equal, it proves them)
            self.stamps = None

    def forget_memlock(self, ids) -> None:
        """Forget the memlock kept of maps ``ids`` (read again when their record is made)."""
        for table in (self.fields, self.counts):
            for mid in ids:
                table.pop(mid, None)

    def owners_due(self, pids) -> list:
        """The pids among ``pids`` whose slice is due in this scan."""
        due = self.due
        return [p for p in pids if p % SLICES in due] if due else []


    def same_as_before(self, rows: tuple) -> tuple:
        """``rows`` (a scan's records, in order), where the scan is a full one: a record equal
        to the one the scan before it kept for the same map is that very object, and where
        all are, the scan before's very tuple. A full scan reads everything again, but what
        it finds unchanged stays the same object to whatever keeps work by identity."""
        if self.before_full is None:
            return rows
        maps, last = self.before_full
        self.before_full = None
        get = maps.get
        same = tuple(old if (old := get(m.id)) is not None and old == m else m for m in rows)
        if same_objects(same, last):
            return last
        return same


def same_objects(rows, last) -> bool:
    """Whether ``rows`` holds the very objects of ``last`` (a sequence or None), in order:
    what is kept by identity downstream stands."""
    return last is not None and len(rows) == len(last) and all(
        a is b for a, b in zip(rows, last))


def pin_stamps(mount_points: list[str]) -> tuple:
    """(path, inode, mtime ns) of every directory under the bpffs ``mount_points``: equal
    stamps mean no pin was made, removed or renamed in between."""
    stamps = []
    for top in mount_points:
        for dirpath, _dirs, _files in walk_tree(top):
            try:
                st = os.stat(dirpath)
            except OSError:
                continue
            stamps.append((dirpath, st.st_ino, st.st_mtime_ns))
    return tuple(stamps)


def settled(stamps: tuple, now_ns: int | None = None) -> bool:
    """Whether every directory of ``stamps`` (taken just now, or at ``now_ns``) was last
    changed long enough before that its next change is sure to move its mtime. A change
    within the same clock tick as the one seen would keep the mtime, and be missed."""
    now = time.time_ns() if now_ns is None else now_ns
    return all(now - mtime >= SETTLE_NS for _path, _ino, mtime in stamps)
