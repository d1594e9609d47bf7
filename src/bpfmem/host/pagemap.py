"""Which memory cgroup the kernel charges for the pages a process has mapped.

``/proc/PID/pagemap`` gives, per virtual page, whether it is present and (to a reader with
CAP_SYS_ADMIN) its page frame number; ``/proc/kpagecgroup`` gives, per page frame, the inode
number of the memory cgroup the page is charged to (the nearest online ancestor of a removed
one). A page cache page is charged to the cgroup that first read it in, whoever maps it
later: a binary started in a fresh cgroup after another cgroup read it pays for none of it.

Pagemap bits (Documentation/admin-guide/mm/pagemap.rst): 63 present, 62 swapped, 61
file-page or shared-anon, 0-54 the PFN (zero without CAP_SYS_ADMIN).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Iterable

from .walk import walk_tree

__all__ = ["PageOwners", "PageReader", "PAGE_SIZE", "cgroup_inodes", "FilePages",
           "process_files", "file_page_owners"]

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_PRESENT = 1 << 63
_FILE = 1 << 61
_PFN = (1 << 55) - 1
_CHUNK = 1 << 16          # pagemap entries per read (512 KiB)
_KEEP = 1.0               # seconds a page's owner, once read, is taken as still true (many
#                           processes map the same binary: its pages are looked up once)


@dataclass(frozen=True)
class PageOwners:
    """The present file pages of some mappings of one process, by who is charged for them.
    Page frames are kept (not only counted) so that processes mapping the same file are
    counted once."""
    here: frozenset[int]          # charged to one of the given cgroups
    elsewhere: frozenset[int]     # charged to another cgroup (or to none: the root's)
    anon: int                     # present private (COW-written) pages: anonymous memory
    page_size: int = PAGE_SIZE

    @property
    def resident(self) -> int:
        return len(self.here) + len(self.elsewhere)


def cgroup_inodes(fs_path: str) -> frozenset[int]:
    """The inode numbers of a cgroup directory and every cgroup below it (what
    /proc/kpagecgroup names them by)."""
    out = set()
    for d, dirs, _files in walk_tree(fs_path):
        try:
            out.add(os.stat(d).st_ino)
        except OSError:
            continue
    return frozenset(out)


def _memcg_of(kpc: int, pfns: list[int]):
    """(pfn, memcg inode) for sorted ``pfns`` from /proc/kpagecgroup (``kpc``), reading runs
    of neighbours (within 512 frames) at once."""
    i = 0
    while i < len(pfns):
        j = i
        while j + 1 < len(pfns) and pfns[j + 1] - pfns[i] < 512 and j - i < 4096:
            j += 1
        lo, hi = pfns[i], pfns[j]
        raw = os.pread(kpc, (hi - lo + 1) * 8, lo * 8)
        vals = memoryview(raw).cast("Q")
        for p in pfns[i:j + 1]:
            k = p - lo
            yield p, (vals[k] if k < len(vals) else 0)
        i = j + 1


class PageReader:
    """Reads pagemap and kpagecgroup (root only); :attr:`why_not` says why it cannot."""

    def __init__(self, root: str = "/"):
        self.root = root
        self.why_not: str | None = None
        self._kpc: int | None = None
        self._owner: dict[int, int] = {}      # pfn -> memcg inode, read within _KEEP seconds
        self._owner_at = 0.0
        try:
            self._kpc = os.open(os.path.join(root, "proc", "kpagecgroup"), os.O_RDONLY)
        except OSError as e:
            self.why_not = f"/proc/kpagecgroup unreadable ({e.strerror or e})"

    def close(self) -> None:
        if self._kpc is not None:
            os.close(self._kpc)
            self._kpc = None

    def __del__(self):
        self.close()

    def _entries(self, fd: int, start: int, end: int):
        first = start // PAGE_SIZE
        n = (end - start + PAGE_SIZE - 1) // PAGE_SIZE
        done = 0
        while done < n:
            k = min(_CHUNK, n - done)
            raw = os.pread(fd, k * 8, (first + done) * 8)
            if not raw:
                return
            yield from memoryview(raw).cast("Q")
            done += len(raw) // 8

    def owners(self, pid: int, ranges: Iterable[tuple[int, int]],
               inodes: frozenset[int]) -> PageOwners | None:
        """Who is charged for the present file pages of ``ranges`` ((start, end) virtual
        addresses) of ``pid``; None when the kernel does not say (no root: PFNs read 0, or
        the process has gone), with :attr:`why_not` set."""
        if self._kpc is None:
            return None
        try:
            fd = os.open(os.path.join(self.root, "proc", str(pid), "pagemap"), os.O_RDONLY)
        except OSError as e:
            self.why_not = f"/proc/{pid}/pagemap unreadable ({e.strerror or e})"
            return None
        pfns: set[int] = set()
        anon = 0
        try:
            for start, end in ranges:
                for e in self._entries(fd, start, end):
                    if not e & _PRESENT:
                        continue
                    if not e & _FILE:
                        anon += 1
                        continue
                    pfn = e & _PFN
                    if pfn == 0:
                        self.why_not = "pagemap gives no page frame numbers (needs CAP_SYS_ADMIN)"
                        return None
                    pfns.add(pfn)
        except OSError as e:
            self.why_not = f"/proc/{pid}/pagemap: {e.strerror or e}"
            return None
        finally:
            os.close(fd)
        here, elsewhere = set(), set()
        for pfn, ino in self._cgroups(sorted(pfns)):
            (here if ino in inodes else elsewhere).add(pfn)
        return PageOwners(frozenset(here), frozenset(elsewhere), anon)

    def _cgroups(self, pfns: list[int]):
        """(pfn, memcg inode) for sorted ``pfns``, reading runs of neighbours at once;
        the ones looked up less than a second ago from the cache."""
        now = time.monotonic()
        if now - self._owner_at > _KEEP:
            self._owner.clear()
            self._owner_at = now
        known = self._owner
        todo = [p for p in pfns if p not in known]
        for p, ino in self._lookup(todo):
            known[p] = ino
        for p in pfns:
            yield p, known[p]

    def _lookup(self, pfns: list[int]):
        return _memcg_of(self._kpc, pfns)

    def charged_to(self, pfns: Iterable[int]) -> dict[int, int]:
        """pfn -> the inode of the memory cgroup charged for it (0: none)."""
        return dict(self._cgroups(sorted(set(pfns)))) if self._kpc is not None else {}


# ---- the page cache of whole files ----

@dataclass(frozen=True)
class FilePages:
    """The resident page cache of the files a pod's processes have open or mapped, by who
    is charged for it (pages; each file once)."""
    files: int                    # regular files looked at
    here: int                     # resident pages charged to one of the pod's cgroups
    elsewhere: int                # resident pages charged to another cgroup
    capped: int                   # files only partly looked at (larger than the cap)
    page_size: int = PAGE_SIZE


_MAX_FILE = 4 << 30               # bytes of one file looked at (the rest left out, counted)


def _libc():
    import ctypes
    import ctypes.util
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long)
    libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
    return libc


def process_files(pids, root: str = "/", skip: set | None = None) -> dict:
    """(st_dev, st_ino) -> a path that opens it, for every regular file ``pids`` hold open
    (``/proc/PID/fd``) or map (``/proc/PID/map_files``), once each; ``skip`` (dev, ino)
    left out."""
    out: dict = {}
    skip = skip or set()
    for pid in pids:
        for sub in ("fd", "map_files"):
            d = os.path.join(root, "proc", str(pid), sub)
            try:
                names = os.listdir(d)
            except OSError:
                continue
            for n in names:
                p = os.path.join(d, n)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                key = (st.st_dev, st.st_ino)
                if key in out or key in skip or (st.st_mode & 0o170000) != 0o100000:
                    continue
                if st.st_size:
                    out[key] = p
    return out


def _one_file(libc, pm: int, kpc: int, path: str, inodes) -> tuple[int, int, bool] | None:
    """(pages charged here, elsewhere, capped) of one file; None: unreadable; raises
    PermissionError without frame numbers."""
    import ctypes
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        capped = size > _MAX_FILE
        size = min(size, _MAX_FILE)
        if size <= 0:
            return None
        n = (size + PAGE_SIZE - 1) // PAGE_SIZE
        addr = libc.mmap(None, n * PAGE_SIZE, 1, 1, fd, 0)   # PROT_READ, MAP_SHARED
        if addr in (None, ctypes.c_void_p(-1).value):
            return None
    finally:
        os.close(fd)
    here = elsewhere = 0
    try:
        vec = ctypes.create_string_buffer(n)
        if libc.mincore(addr, n * PAGE_SIZE, vec) != 0:
            return None
        resident = [i for i, b in enumerate(vec.raw) if b & 1]
        for i in resident:
            ctypes.string_at(addr + i * PAGE_SIZE, 1)        # map it (a minor fault)
        ents = memoryview(os.pread(pm, n * 8, addr // PAGE_SIZE * 8)).cast("Q")
        pfns = []
        for i in resident:
            if i < len(ents) and ents[i] & _PRESENT:
                pfn = ents[i] & _PFN
                if pfn == 0:
                    raise PermissionError("pagemap gives no page frame numbers")
                pfns.append(pfn)
        pfns.sort()
        for _pfn, ino in _memcg_of(kpc, pfns):
            if ino in inodes:
                here += 1
            else:
                elsewhere += 1
    finally:
        libc.munmap(addr, n * PAGE_SIZE)
    return here, elsewhere, capped


def _child(paths: list[str], inodes, root: str, w: int) -> None:
    libc = _libc()
    pm = os.open("/proc/self/pagemap", os.O_RDONLY)
    kpc = os.open(os.path.join(root, "proc", "kpagecgroup"), os.O_RDONLY)
    for path in paths:
        try:
            got = _one_file(libc, pm, kpc, path, inodes)
        except PermissionError:
            os.write(w, b"noframes\n")
            return
        line = "-" if got is None else f"{got[0]} {got[1]} {int(got[2])}"
        os.write(w, line.encode() + b"\n")


def file_page_owners(paths, inodes: frozenset[int], root: str = "/") -> FilePages | None:
    """Who is charged for the resident pages of each file in ``paths`` (one path a file);
    None when the kernel does not say (no root).

    Each file is mapped (shared, read-only) in a forked helper, its resident pages found
    with mincore(2) and read once each, which maps them without reading anything from disk
    (a page not resident is never touched, so nothing new is charged; a page evicted in
    between is the exception), and /proc/self/pagemap gives their frames for
    /proc/kpagecgroup. The helper takes the SIGBUS of a file truncated meanwhile (that file
    is left out). Reading marks the pages accessed, as any read would."""
    paths = list(paths)
    if not os.access(os.path.join(root, "proc", "kpagecgroup"), os.R_OK):
        return None
    from .cleanup import die_with_parent
    here = elsewhere = files = capped = 0
    i = 0
    parent = os.getpid()
    while i < len(paths):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.close(r)
                die_with_parent(parent)
                _child(paths[i:], inodes, root, w)
            except BaseException:   # noqa: BLE001 - the parent sees the lines it got
                code = 1
            finally:
                os._exit(code)
        os.close(w)
        buf = b""
        with os.fdopen(r, "rb") as f:
            for line in f:
                buf = line.strip()
                if buf == b"noframes":
                    os.waitpid(pid, 0)
                    return None
                i += 1
                if buf != b"-":
                    h, e, c = map(int, buf.split())
                    here, elsewhere, files, capped = here + h, elsewhere + e, files + 1, \
                        capped + c
        os.waitpid(pid, 0)
        i += 1 if i < len(paths) else 0     # the file it died on (SIGBUS) is left out
    return FilePages(files, here, elsewhere, capped)
