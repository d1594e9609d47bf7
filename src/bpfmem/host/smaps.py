"""/proc/PID/smaps: one record per mapping, and a process's environment and executable.

``parse_smaps`` is pure (the text in, :class:`Mapping` values out); ``read_smaps`` reads a
live process (root only for other users' processes). ``classify_mappings`` (pure) says which
mapping is what: every mapping goes to exactly one class, so the classes add up to the RSS:

=================  ==========================================================================
binary_text        the executable's own file mappings that are executable (``r-x``): its code
binary_rodata      the executable's read-only file mappings (``r--``): rodata, pclntab, ...
binary_data        the executable's writable file mappings (``rw-``: .data, relocated)
binary_bss         the anonymous mapping right after them (.bss/.noptrbss, as the loader maps
                   it)
files              every other file-backed mapping (shared libraries, mapped files, shmem)
stack              ``[stack]`` (the main thread's) and thread stacks: an anonymous ``rw-``
                   mapping of 64 KiB..256 MiB that starts where a small (<= 64 KiB)
                   inaccessible ``---p`` guard mapping ends (glibc's pthread stacks; a pure
                   Go program's goroutine and thread stacks live in its heap arenas instead)
go_arenas          Go heap arenas (heuristic): anonymous private mappings that start in one of
                   the address windows the Go runtime hints its heap at on 64-bit Linux,
                   ``[i<<40 | 0x00c0<<32, (i+1)<<40)`` (amd64; i from 0, the first heap arena
                   is 0xc000000000; arenas are reserved in 64 MiB units, ``---p`` until used;
                   only the first 64 windows are taken, and only for a Go binary). They hold
                   the heap in use, free spans and goroutine stacks.
anon_other         every other anonymous mapping (the C heap ``[heap]``, the Go runtime's own
                   metadata allocated outside the arenas, other mmaps)
special            ``[vdso]``, ``[vvar]``, ``[vsyscall]``
=================  ==========================================================================
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Mapping", "parse_smaps", "read_smaps", "parse_environ", "read_environ",
           "ExeFile", "read_exe", "MemClasses", "classify_mappings", "is_go_arena_address",
           "CLASSES"]


@dataclass(frozen=True)
class Mapping:
    """One mapping of /proc/PID/smaps (sizes in bytes)."""
    start: int
    end: int
    perms: str             # "r-xp", "rw-p", "---p", "rw-s" ...
    offset: int
    dev: str               # "fe:00" (major:minor, hex), "00:00" for anonymous memory
    inode: int
    path: str              # "" for anonymous memory, "[stack]", "[heap]", a file ...
    rss: int
    pss: int
    anonymous: int         # the "Anonymous" field: private pages not backed by a file
    swap: int
    private: int           # Private_Clean + Private_Dirty

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def file_backed(self) -> bool:
        return self.inode != 0 and not self.path.startswith("[")


def _header(line: str) -> tuple | None:
    # "00400000-00682000 r-xp 00000000 fe:00 2253408    /path with spaces"
    parts = line.split(None, 5)
    if len(parts) < 5 or "-" not in parts[0]:
        return None
    lo, _, hi = parts[0].partition("-")
    try:
        start, end = int(lo, 16), int(hi, 16)
        offset, inode = int(parts[2], 16), int(parts[4])
    except ValueError:
        return None
    if len(parts[1]) != 4:
        return None
    path = parts[5].rstrip("\n") if len(parts) > 5 else ""
    return start, end, parts[1], offset, parts[3], inode, path


def parse_smaps(text: str) -> tuple[Mapping, ...]:
    """Every mapping of a /proc/PID/smaps text; lines it does not know are skipped."""
    out: list[Mapping] = []
    head = None
    fields: dict[str, int] = {}

    def flush():
        if head is not None:
            out.append(Mapping(*head, rss=fields.get("Rss", 0), pss=fields.get("Pss", 0),
                               anonymous=fields.get("Anonymous", 0),
                               swap=fields.get("Swap", 0),
                               private=fields.get("Private_Clean", 0)
                               + fields.get("Private_Dirty", 0)))

    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and " " not in key and "-" not in key:
            parts = value.split()
            if len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
                fields[key] = int(parts[0]) * 1024
            continue
        h = _header(line)
        if h is not None:
            flush()
            head, fields = h, {}
    flush()
    return tuple(out)


def read_smaps(pid: int, root: str | os.PathLike = "/") -> tuple[Mapping, ...]:
    return parse_smaps((Path(root) / "proc" / str(pid) / "smaps").read_text(errors="replace"))


def parse_environ(raw: bytes) -> dict[str, str]:
    """/proc/PID/environ (NUL-separated NAME=value) as a dict; the last of a name wins."""
    out = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name:
            out[name.decode(errors="replace")] = value.decode(errors="replace")
    return out


def read_environ(pid: int, root: str | os.PathLike = "/") -> dict[str, str]:
    return parse_environ((Path(root) / "proc" / str(pid) / "environ").read_bytes())


@dataclass(frozen=True)
class ExeFile:
    """A process's executable: the path it names (as smaps shows it), and the file's
    identity, to open it through ``/proc/PID/exe`` (which works across mount namespaces)."""
    path: str
    open_path: str
    dev: int
    inode: int
    size: int
    mtime: float


def read_exe(pid: int, root: str | os.PathLike = "/") -> ExeFile:
    link = str(Path(root) / "proc" / str(pid) / "exe")
    path = os.readlink(link)
    st = os.stat(link)
    return ExeFile(path.removesuffix(" (deleted)"), link, st.st_dev, st.st_ino, st.st_size,
                   st.st_mtime)


# ---- which mapping is what ----

CLASSES = ("binary_text", "binary_rodata", "binary_data", "binary_bss", "files", "stack",
           "go_arenas", "anon_other", "special")
_TB = 1 << 40
_HINT = 0x00C0 << 32
_HINT_WINDOWS = 0x40
_GUARD_MAX = 64 << 10
_STACK_MIN, _STACK_MAX = 64 << 10, 256 << 20


def is_go_arena_address(addr: int) -> bool:
    """In one of the first 64 windows the Go runtime's amd64 heap hints start at (higher
    ones come after 16 TiB of heap, and near 0x7f.. they meet the kernel's mmap area)."""
    return addr >> 40 < _HINT_WINDOWS and (addr & (_TB - 1)) >= _HINT


@dataclass(frozen=True)
class MemClasses:
    """Resident bytes per class (see the module's table); they add up to ``rss``."""
    rss: int
    anonymous: int              # sum of the mappings' Anonymous field
    swap: int
    binary_text: int
    binary_rodata: int
    binary_data: int            # file-backed rw- (.data)
    binary_bss: int             # the anonymous mapping right after it (.bss, .noptrbss)
    files: int
    stack: int
    thread_stacks: int          # how many thread stacks (guard-page heuristic) were found
    go_arenas: int
    go_arenas_mapped: int       # bytes of arena mappings that are accessible (rw)
    go_arenas_reserved: int     # bytes of arena address space reserved, not yet mapped
    anon_other: int
    special: int
    mappings: int

    def get(self, key: str) -> int:
        return getattr(self, key)

    @property
    def binary(self) -> int:
        return self.binary_text + self.binary_rodata + self.binary_data + self.binary_bss


def _is_exe(m, exe_path: str | None, exe_ids: tuple[int, int] | None) -> bool:
    if not m.file_backed:
        return False
    if exe_path is not None and m.path.removesuffix(" (deleted)") == exe_path:
        return True
    if exe_ids is not None:
        dev = f"{os.major(exe_ids[0]):02x}:{os.minor(exe_ids[0]):02x}"
        return m.inode == exe_ids[1] and m.dev == dev
    return False


def classify_mappings(maps, exe_path: str | None = None,
                      exe_ids: tuple[int, int] | None = None,
                      go: bool = False) -> tuple[MemClasses, list[str]]:
    """Sum ``maps`` (:class:`Mapping` records, in address order) by class.

    ``exe_path`` is the executable as smaps names it (``/proc/PID/exe``'s target);
    ``exe_ids`` its (st_dev, st_ino) as a second way to know it (overlay file systems show
    another path); ``go`` looks for Go heap arenas. Returns the sums and the class of each
    mapping, in order."""
    sums = dict.fromkeys(CLASSES, 0)
    kinds: list[str] = []
    threads = arena_mapped = arena_reserved = anon = swap = 0
    last_exe_end = None
    prev = None
    for m in maps:
        kind = None
        if _is_exe(m, exe_path, exe_ids):
            p = m.perms
            kind = ("binary_text" if "x" in p else "binary_data" if "w" in p
                    else "binary_rodata")
            last_exe_end = m.end
        elif m.path in ("[vdso]", "[vvar]", "[vvar_vclock]", "[vsyscall]"):
            kind = "special"
        elif m.path == "[stack]" or m.path.startswith("[stack:"):
            kind = "stack"
        elif m.file_backed or (m.path and not m.path.startswith("[")):
            kind = "files"     # includes shmem and deleted files ("/memfd:x (deleted)")
        elif (last_exe_end is not None and m.start == last_exe_end and not m.path
              and "w" in m.perms):
            kind = "binary_bss"     # .bss right after the binary's data
            last_exe_end = None
        elif go and m.path == "" and m.perms[3] == "p" and is_go_arena_address(m.start):
            kind = "go_arenas"
            if m.perms.startswith("---"):
                arena_reserved += m.size
            else:
                arena_mapped += m.size
        elif (m.path == "" and m.perms.startswith("rw") and prev is not None
              and prev.end == m.start and prev.perms.startswith("---") and not prev.path
              and prev.size <= _GUARD_MAX and _STACK_MIN <= m.size <= _STACK_MAX):
            kind = "stack"
            threads += 1
        else:
            kind = "anon_other"
        sums[kind] += m.rss
        anon += m.anonymous
        swap += m.swap
        kinds.append(kind)
        prev = m
    total = sum(sums.values())
    return MemClasses(rss=total, anonymous=anon, swap=swap, thread_stacks=threads,
                      go_arenas_mapped=arena_mapped, go_arenas_reserved=arena_reserved,
                      mappings=len(kinds), **sums), kinds
