"""Walk the live host's programs, links and BTF objects: what each program costs as the
kernel reports it (``bpf_prog_info``, fdinfo ``memlock``), who holds it (processes with a
program or link fd, links, bpffs pins), and the JIT's memory against ``bpf_jit_limit``.

Like :func:`bpfmem.host.live.scan_maps` it only reads: programs, links and BTF objects are
opened by id (needs CAP_SYS_ADMIN), a program or link that vanishes meanwhile is counted in
``gone``, never fatal. The owners come from the ``/proc`` walk (one readlink per fd; fdinfo
only for BPF fds).
"""

from __future__ import annotations

import errno
import os
from bpfmem.values import dataclass

from bpfmem.errors import HostError, ObjectGone
from bpfmem.records import JitMemory, LiveBtf, LiveProg, Owner

from . import bpfsys, procfs
from .cgroup import memory_cgroup_path, namespace_roots
from .walk import MAX_DEPTH, walk_tree

__all__ = ["BpfFd", "ProgScan", "scan_bpf_fds", "scan_programs", "progs_held_by", "read_jit_memory",
           "parse_vmallocinfo", "walk_prog_pins", "prog_fdinfo"]

# the anon inode names of the fds (a link's reads "bpf-link" on 6.x, "bpf_link" on others)
_KINDS = {"anon_inode:bpf-prog": "prog", "anon_inode:bpf-link": "link",
          "anon_inode:bpf_link": "link", "anon_inode:btf": "btf"}
_ID_KEY = {"prog": b"\nprog_id:", "link": b"\nlink_id:", "btf": b"\nbtf_id:"}


@dataclass(frozen=True)
class BpfFd:
    """A process's fd to a program, a link or a BTF object, with what its fdinfo says."""
    pid: int
    fd: int
    kind: str            # prog | link | btf
    id: int | None       # prog_id / link_id / btf_id (None: the fdinfo has no such line)
    prog_id: int | None  # a program's own id, or the program a link holds
    memlock: int | None  # a program's fdinfo memlock


def scan_bpf_fds(pids: list[int] | None = None, root: str = "/") -> list[BpfFd]:
    """Every fd of every process (or of ``pids``) that is a program, a link or a BTF object;
    processes and fds that vanish or cannot be read are skipped."""
    base = os.path.join(root, "proc")
    found: list[BpfFd] = []
    dir_flags = os.O_RDONLY | os.O_DIRECTORY
    for pid in (procfs.list_pids(root) if pids is None else pids):
        try:
            pid_dir = os.open(f"{base}/{pid}", dir_flags)
        except OSError:
            continue
        fd_dir = info_dir = -1
        try:
            fd_dir = os.open("fd", dir_flags, dir_fd=pid_dir)
            info_dir = os.open("fdinfo", dir_flags, dir_fd=pid_dir)
            names = os.listdir(fd_dir)
        except OSError:
            names = []
        for name in names:
            try:
                kind = _KINDS.get(os.readlink(name, dir_fd=fd_dir))
                if kind is None:
                    continue
                f = os.open(name, os.O_RDONLY, dir_fd=info_dir)
                try:
                    raw = os.read(f, 4096)
                finally:
                    os.close(f)
            except OSError:
                continue
            found.append(_bpf_fd(pid, int(name), kind, raw))
        for d in (fd_dir, info_dir, pid_dir):
            if d >= 0:
                os.close(d)
    return found


def _num(raw: bytes, key: bytes) -> int | None:
    v = procfs.fdinfo_field(raw, key)
    try:
        return None if v is None else int(v)
    except ValueError:
        return None


def _bpf_fd(pid: int, fd: int, kind: str, raw: bytes) -> BpfFd:
    obj_id = _num(raw, _ID_KEY[kind])
    prog_id = _num(raw, b"\nprog_id:") if kind in ("prog", "link") else None
    memlock = _num(raw, b"\nmemlock:") if kind == "prog" else None
    return BpfFd(pid, fd, kind, obj_id, prog_id, memlock)


def prog_fdinfo(fd: int) -> int | None:
    """The memlock line of this process's fdinfo of program fd ``fd`` (bytes)."""
    try:
        with open(f"/proc/self/fdinfo/{fd}", "rb") as f:
            return _num(f.read(4096), b"\nmemlock:")
    except OSError:
        return None


def _fd_kind(fd: int) -> str | None:
    try:
        return _KINDS.get(os.readlink(f"/proc/self/fd/{fd}"), "map")
    except OSError:
        return None


def walk_prog_pins(mount_points, errors: list[str]) -> tuple[dict[int, list[str]],
                                                             dict[int, list[str]]]:
    """({program id: pins}, {link id: pins}) over the bpffs ``mount_points``. A pinned
    program or link: older kernels open it read-write only (BPF_OBJ_GET refuses
    BPF_F_RDONLY with EINVAL), 6.x read-only too; maps are passed over."""
    progs: dict[int, list[str]] = {}
    links: dict[int, list[str]] = {}
    def deep(path: str) -> None:
        errors.append(f"{path}: more than {MAX_DEPTH} directories deep; not walked further")
    for top in mount_points:
        for dirpath, _dirs, files in walk_tree(top, too_deep=deep):
            for name in files:
                path = os.path.join(dirpath, name)
                try:
                    fd = bpfsys.obj_get(path)
                except ObjectGone:
                    continue
                except HostError as e:
                    if getattr(e, "errno", None) != errno.EINVAL:
                        errors.append(str(e))
                        continue
                    try:       # a program or link before 6.x: read-write only
                        fd = bpfsys.obj_get(path, 0)
                    except HostError:
                        continue               # not a BPF object (an iterator file)
                try:
                    kind = _fd_kind(fd)
                    if kind == "prog":
                        progs.setdefault(bpfsys.prog_info(fd).id, []).append(path)
                    elif kind == "link":
                        links.setdefault(bpfsys.link_info(fd).id, []).append(path)
                except HostError:
                    pass
                finally:
                    os.close(fd)
    return progs, links


# ---- the JIT's memory ----

_JIT_CALLERS = (b"bpf_prog_pack_alloc", b"bpf_jit_binary_alloc", b"bpf_jit_alloc_exec")


def parse_vmallocinfo(raw: bytes, page_size: int = 4096) -> tuple[int, int]:
    """(bytes, pack chunks) that ``/proc/vmallocinfo`` shows allocated for JIT images: the
    ``pages=`` of every area whose caller is ``bpf_prog_pack_alloc`` (the shared chunks of
    5.18+, each charged whole against ``bpf_jit_limit``), ``bpf_jit_binary_alloc`` or
    ``bpf_jit_alloc_exec`` (one image each). The size column is not used: it includes the
    guard page."""
    total = packs = 0
    # only the few lines that name a JIT caller are split (the file has one line per vmalloc
    # area: thousands)
    lines = []
    for caller in _JIT_CALLERS:
        at = raw.find(caller)
        while at >= 0:
            start = raw.rfind(b"\n", 0, at) + 1
            end = raw.find(b"\n", at)
            end = len(raw) if end < 0 else end
            lines.append((start, raw[start:end]))
            at = raw.find(caller, end)
    for _start, line in sorted(set(lines)):
        fields = line.split()
        if len(fields) < 3 or not fields[2].startswith(_JIT_CALLERS):
            continue
        pages = next((f for f in fields[3:] if f.startswith(b"pages=")), None)
        if pages is None:
            continue
        total += int(pages[6:]) * page_size
        packs += fields[2].startswith(b"bpf_prog_pack_alloc")
    return total, packs


def read_jit_memory(root: str = "/") -> JitMemory:
    limit = in_use = packs = None
    try:
        with open(os.path.join(root, "proc/sys/net/core/bpf_jit_limit"), "rb") as f:
            limit = int(f.read().strip())
    except (OSError, ValueError):
        pass
    try:
        raw = _read_whole(os.path.join(root, "proc/vmallocinfo"))
        in_use, packs = parse_vmallocinfo(raw, os.sysconf("SC_PAGE_SIZE"))
    except OSError:
        pass
    return JitMemory(limit=limit, in_use=in_use, packs=packs)


def _read_whole(path: str) -> bytes:
    """A /proc file read in as few system calls as the kernel allows: a seq_file read fills
    the buffer it is given (vmallocinfo's hundreds of KiB in one or two calls), where a
    buffered read would take it in growing chunks. Run in a thread beside a scan, each call
    is one more wait for the interpreter's lock (:func:`jit_memory_soon`), and on a busy
    machine each such wait is a wait for a CPU as well."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 22):
            chunks.append(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(fd)


def jit_memory_soon(root: str = "/"):
    """:func:`read_jit_memory` in a thread started now (most of it is the kernel writing
    /proc/vmallocinfo: on a second CPU, beside the caller's map scan); returns the function
    that waits for it and gives its JitMemory."""
    import threading
    box: list = []

    def work() -> None:
        try:
            box.append(read_jit_memory(root))
        except BaseException as e:      # noqa: BLE001 - handed to the caller
            box.append(e)

    t = threading.Thread(target=work, name="bpfmem-jit-memory", daemon=True)
    t.start()

    def result() -> JitMemory:
        t.join()
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]
    return result


# ---- the walk ----

@dataclass(frozen=True)
class ProgScan:
    progs: tuple[LiveProg, ...]
    btfs: tuple[LiveBtf, ...]
    jit: JitMemory
    gone: int
    errors: tuple[str, ...]


def _owners(pids, root: str) -> dict[int, Owner]:
    """Owner (comm, memory cgroup) of each of ``pids``."""
    base = os.path.join(root, "proc")
    try:
        ns_roots = namespace_roots(root)
    except (OSError, HostError):
        ns_roots = {}
    out: dict[int, Owner] = {}
    for pid in pids:
        try:
            with open(f"{base}/{pid}/comm", "rb") as f:
                comm = f.read().decode(errors="replace").rstrip("\n")
            with open(f"{base}/{pid}/cgroup", "rb") as f:
                cg = f.read().decode(errors="replace")
        except OSError:
            continue
        out[pid] = Owner(pid, comm, memory_cgroup_path(cg, ns_roots) if cg else None)
    return out


def _holders(pids, owner_of: dict[int, Owner]) -> tuple[Owner, ...]:
    """The Owners of the processes of ``pids`` (the holder of each fd), fds counted."""
    if not pids:
        return ()
    if len(pids) == 1:          # most programs: one fd of one process, its Owner as it is
        o = owner_of.get(pids[0])
        return () if o is None else (o if o.fds == 1 else Owner(o.pid, o.comm, o.cgroup),)
    per: dict[int, int] = {}
    for pid in pids:
        per[pid] = per.get(pid, 0) + 1
    return tuple(Owner(o.pid, o.comm, o.cgroup, n) for pid, n in sorted(per.items())
                 if (o := owner_of.get(pid)) is not None)



def _prog_facts(prog_id: int, cache: dict):
    """(bpf_prog_info, fdinfo memlock) of a program, from ``cache`` or read once through a
    fd of its own (closed again); None when the program is gone."""
    hit = cache.get(prog_id)
    if hit is not None:
        return hit
    try:
        pfd = bpfsys.prog_fd_by_id(prog_id)
    except ObjectGone:
        return None
    try:
        hit = cache[prog_id] = (bpfsys.prog_info(pfd), prog_fdinfo(pfd))
    except ObjectGone:
        return None
    finally:
        os.close(pfd)
    return hit

def scan_programs(*, root: str = "/", owners: bool = True, pins: bool = True,
                  bpffs: list[str] | None = None, known: dict | None = None,
                  jit_cache: dict | None = None, fds: list | None = None,
                  last: dict | None = None, listed: tuple | None = None,
                  owner_of: dict | None = None, pin_stamps: tuple | None = None,
                  jit_soon=None) -> ProgScan:
    """Every program, BTF object and link on the host with their owners (processes holding
    a program, link or BTF fd) and pins, and the JIT's memory. ``listed``: (the bytes, the
    records) of the kernel's program iterator (host/prog_iter.py) read by the map scan,
    else every program is opened by id, and ``known`` (program id -> (ProgInfo, memlock),
    kept by the caller between scans) spares re-reading a program seen before: neither
    changes while it is loaded (ids are never reused soon); ``jit_cache`` (a dict kept the
    same way) spares reading /proc/vmallocinfo again while the set of programs is the same
    (the JIT's memory changes as programs come and go).
    ``fds``: the (pid, fd, kind, id, a link's program id) of every program, link and BTF fd
    on the host, found by the maps' owner walk (host/owner_iter.py): then /proc is not
    walked again; ``owner_of`` (Owner per pid, read by that walk) spares reading their
    names and cgroups again. ``last`` (a dict kept by the caller between scans): while the
    fds, the programs, the links, the pins and the holders' names are those of the last
    scan, its program records are returned again (the same tuple); with ``pin_stamps``
    (the bpffs directories' stamps, host/rescan.pin_stamps) the program pins are walked
    again only when those moved; and with a program listing too, while the fds, the
    listing's bytes, the links, the stamps and the holders are the last scan's, the whole
    last result is (BTF objects and the JIT's figures included: a BTF object comes or goes
    with a program or an fd, and the JIT's memory with the programs; a module's BTF loaded
    meanwhile waits until the caller forgets ``last``: the exporter's memo does so once
    every round of checks, host/rescan.py)."""
    errors: list[str] = []
    gone = 0
    try:
        link_pairs = _links()
    except HostError as e:      # before 5.8
        errors.append(f"links: {e}")
        link_pairs = []
    quick = None
    if (last is not None and listed is not None and fds is not None and owners
            and owner_of is not None and (pin_stamps is not None or not pins)):
        # what the programs, BTF objects and JIT figures are made of, as read already
        quick = (fds, listed[0], link_pairs, pin_stamps, owner_of)
        hit = last.get("quick")
        if hit is not None and all(a is b or a == b for a, b in zip(hit[0], quick)):
            return hit[1]
    given = tuple(fds) if fds is not None and owners else None
    if not owners:
        rows: list = []
    elif fds is not None:               # (pid, fd, kind, id, a link's program id)
        rows = fds
    else:
        rows = [(f.pid, f.fd, f.kind, f.id, f.prog_id) for f in scan_bpf_fds(root=root)]
    if owner_of is None or not all(r[0] in owner_of for r in rows):
        owner_of = _owners({r[0] for r in rows}, root) if rows else {}
    by_prog: dict[int, list[int]] = {}     # program id -> the pids of its holders' fds
    by_link: dict[int, list[int]] = {}
    by_btf: dict[int, list[int]] = {}
    kinds = {"prog": by_prog, "link": by_link, "btf": by_btf}
    for pid, _fd, kind, obj_id, _prog in rows:
        if obj_id is not None and kind in kinds:
            kinds[kind].setdefault(obj_id, []).append(pid)
    prog_pins: dict[int, list[str]] = {}
    link_pins: dict[int, list[str]] = {}
    if pins:
        if bpffs is None:
            try:
                bpffs = procfs.bpffs_mounts(root)
            except OSError as e:
                errors.append(f"mountinfo: {e}")
                bpffs = []
        kept_pins = last.get("pins") if last is not None else None
        if pin_stamps is not None and kept_pins is not None and kept_pins[0] == pin_stamps:
            prog_pins, link_pins = kept_pins[1]
        else:
            prog_pins, link_pins = walk_prog_pins(bpffs, errors)
            if last is not None:
                last["pins"] = (pin_stamps, (prog_pins, link_pins))
    links_of: dict[int, list[int]] = {}
    link_holders: dict[int, list[int]] = {}
    for lid, prog_id in link_pairs:
        links_of.setdefault(prog_id, []).append(lid)
        link_holders.setdefault(prog_id, []).extend(by_link.get(lid, ()))
    progs: list[LiveProg] = []
    cache = known if known is not None else {}
    seen = set()
    if listed is not None:
        listing, facts = listed[0], [(r, r.memlock) for r in listed[1]]
        ids = tuple(r.id for r, _m in facts)
    else:
        ids = listing = tuple(bpfsys.prog_ids())
        facts = None
    key = None
    if last is not None and given is not None:
        key = (given, listing, tuple(sorted(links_of.items())),
               tuple(sorted(prog_pins.items())), tuple(sorted(link_pins.items())),
               tuple(sorted(owner_of.items())))
    if key is not None and last.get("key") == key:
        progs = last["progs"]           # nothing moved: the last scan's records
        seen = set(ids)
        ids = ()
        facts = []
    if facts is None:                   # one by one
        facts = []
        for pid_ in ids:
            seen.add(pid_)
            hit = _prog_facts(pid_, cache)
            if hit is None:
                gone += 1
                continue
            facts.append(hit)
    elif ids:
        seen = set(ids)
    before = last.get("by_id", {}) if last is not None else {}
    for info, memlock in facts:     # (a ProgRecord or a ProgInfo: the same names)
        pid_ = info.id
        lids = links_of.get(pid_)
        if lids:
            lids = tuple(sorted(lids))
            lpins = [p for lid in lids for p in link_pins.get(lid, ())]
            link_owners = _holders(link_holders.get(pid_, []), owner_of)
        else:
            lids, lpins, link_owners = (), (), ()
        pins_of = prog_pins.get(pid_) if prog_pins else None
        p = LiveProg(
            pid_, info.name, info.type, info.tag, memlock, info.xlated_prog_len,
            info.jited_prog_len, tuple(info.map_ids), info.btf_id,
            info.verified_insns or None, info.load_time, info.created_by_uid,
            _holders(by_prog.get(pid_, ()), owner_of), lids, link_owners,
            tuple(sorted([*(pins_of or ()), *lpins])) if pins_of or lpins else ())
        prev = before.get(pid_)
        progs.append(prev if prev is not None and prev == p else p)   # (unchanged: the
        #                                   same record, and the exporter's page keeps it)
    if known is not None:
        for stale in known.keys() - seen:
            del known[stale]
    progs = tuple(progs)
    if last is not None:
        last["key"], last["progs"] = key, progs
        last["by_id"] = {p.id: p for p in progs}
    btfs: list[LiveBtf] = []
    for bid in bpfsys.btf_ids():
        try:
            bi = bpfsys.btf_info_by_id(bid)
        except ObjectGone:
            gone += 1
            continue
        btfs.append(LiveBtf(id=bi.id, name=bi.name, btf_size=bi.btf_size,
                            kernel_btf=bi.kernel_btf,
                            owners=_holders(by_btf.get(bi.id, []), owner_of)))
    ids = frozenset(seen)
    if jit_cache is not None and jit_cache.get("ids") == ids:
        jit = jit_cache["jit"]
    else:
        jit = jit_soon() if jit_soon is not None else read_jit_memory(root)
        if jit_cache is not None:
            jit_cache.update(ids=ids, jit=jit)
    out = ProgScan(progs, tuple(btfs), jit, gone, tuple(errors))
    if quick is not None:
        last["quick"] = (quick, out) if not gone and not errors else None
    return out


def _links() -> list[tuple[int, int]]:
    """(link id, its program's id) of every BPF link on the host (5.8+)."""
    out = []
    for lid in bpfsys.link_ids():
        try:
            out.append((lid, bpfsys.link_info_by_id(lid).prog_id))
        except HostError:          # ObjectGone among them
            continue
    return out


def progs_held_by(pids, root: str = "/", known: dict | None = None
                  ) -> tuple[tuple[LiveProg, ...], tuple[LiveBtf, ...], int]:
    """The programs that the processes ``pids`` hold a program or link fd to (only their fd
    tables are read), with those processes as owners, and the BTF objects they hold an fd to
    or those programs were loaded with (not the kernel's own: vmlinux, modules); (programs by
    id, BTF objects by id, how many vanished). ``known`` caches each program's and BTF
    object's info by id between calls (neither ever changes)."""
    every = scan_bpf_fds(list(pids), root)
    fds = [f for f in every if f.kind in ("prog", "link")]
    btf_fds = [f for f in every if f.kind == "btf" and f.id is not None]
    owner_of = _owners({f.pid for f in fds}, root) if fds else {}
    cache = known if known is not None else {}
    by_prog: dict[int, list[int]] = {}
    via_link: dict[int, list[int]] = {}
    for f in fds:
        if f.prog_id is not None:
            (by_prog if f.kind == "prog" else via_link).setdefault(f.prog_id, []).append(f.pid)
    out, gone = [], 0
    if btf_fds:
        owner_of.update(_owners({f.pid for f in btf_fds if f.pid not in owner_of}, root))
    for prog_id in sorted(set(by_prog) | set(via_link)):
        hit = _prog_facts(prog_id, cache)
        if hit is None:
            gone += 1
            continue
        info, memlock = hit
        out.append(LiveProg(
            id=info.id, name=info.name, type=info.type, tag=info.tag, memlock=memlock,
            xlated_prog_len=info.xlated_prog_len, jited_prog_len=info.jited_prog_len,
            map_ids=info.map_ids, btf_id=info.btf_id,
            verified_insns=info.verified_insns or None, load_time=info.load_time,
            created_by_uid=info.created_by_uid,
            owners=_holders(by_prog.get(prog_id, []), owner_of),
            link_owners=_holders(via_link.get(prog_id, []), owner_of)))
    held_btf: dict[int, list[int]] = {}
    for f in btf_fds:
        held_btf.setdefault(f.id, []).append(f.pid)
    btfs = []
    for bid in sorted(set(held_btf) | {p.btf_id for p in out if p.btf_id}):
        bi = _btf_facts(bid, cache)
        if bi is None:
            gone += 1
            continue
        if not bi.kernel_btf:
            btfs.append(LiveBtf(id=bi.id, name=bi.name, btf_size=bi.btf_size,
                                kernel_btf=False,
                                owners=_holders(held_btf.get(bid, []), owner_of)))
    return tuple(out), tuple(btfs), gone


def _btf_facts(btf_id: int, cache: dict):
    """A BTF object's ``bpf_btf_info`` by id, through a fd of its own, cached (under
    ``("btf", id)``); None when it is gone."""
    key = ("btf", btf_id)
    if key in cache:
        return cache[key]
    try:
        bi = bpfsys.btf_info_by_id(btf_id)
    except ObjectGone:
        return None
    cache[key] = bi
    return bi
