"""The one module that calls ``bpf(2)`` (through ctypes).

Each command passes the smallest ``union bpf_attr`` prefix that holds its fields, as libbpf
does (``offsetofend`` of the last field used), so older kernels that reject unknown non-zero
tail bytes accept it. This is the only place where an errno becomes an exception:

* ``EPERM``/``EACCES`` -> :class:`PermissionDenied` naming the capability the command needs;
* ``ENOENT`` on an id or path that existed a moment ago -> :class:`ObjectGone`;
* anything else -> :class:`HostError` with the command name and ``strerror``.

Inspection opens maps read-only (``BPF_F_RDONLY``) and never writes to a map it did not make.
The write commands (create, update, pin) exist for tests, benchmarks and fixtures.
"""

from __future__ import annotations

import ctypes
import errno as _errno
import os
import struct
import threading
from bpfmem.values import dataclass

from bpfmem.errors import HostError, ObjectGone, PermissionDenied

__all__ = ["MapInfo", "ProgInfo", "BtfInfo", "LinkInfo", "btf_ids", "link_ids",
           "btf_fd_by_id", "link_fd_by_id", "btf_info", "link_info", "map_ids", "prog_ids", "map_fd_by_id", "prog_fd_by_id",
           "map_info", "prog_info", "obj_get", "map_next_key", "map_lookup_batch",
           "count_entries", "batch_size_for", "BATCH_BUDGET", "map_create", "map_update",
           "obj_pin", "map_freeze", "prog_bind_map", "close", "prog_load", "link_create", "iter_create",
           "BPF_F_RDONLY", "BPF_F_WRONLY", "BPF_ANY", "available", "setns_thread",
           "CLONE_NEWNET"]

# commands (include/uapi/linux/bpf.h, enum bpf_cmd)
MAP_CREATE, MAP_LOOKUP_ELEM, MAP_UPDATE_ELEM, MAP_DELETE_ELEM, MAP_GET_NEXT_KEY = 0, 1, 2, 3, 4
OBJ_PIN, OBJ_GET = 6, 7
PROG_GET_NEXT_ID, MAP_GET_NEXT_ID, PROG_GET_FD_BY_ID, MAP_GET_FD_BY_ID = 11, 12, 13, 14
OBJ_GET_INFO_BY_FD = 15
BTF_GET_FD_BY_ID, BTF_GET_NEXT_ID = 19, 23
LINK_GET_FD_BY_ID, LINK_GET_NEXT_ID = 30, 31
MAP_LOOKUP_BATCH = 24
PROG_LOAD, LINK_CREATE, ITER_CREATE = 5, 28, 33
BTF_LOAD = 18
MAP_FREEZE = 22
PROG_BIND_MAP = 35

BPF_F_RDONLY = 1 << 3
BPF_F_WRONLY = 1 << 4
BPF_ANY = 0

_CMD_NAMES = {PROG_BIND_MAP: "BPF_PROG_BIND_MAP", MAP_CREATE: "BPF_MAP_CREATE", MAP_UPDATE_ELEM: "BPF_MAP_UPDATE_ELEM",
              MAP_DELETE_ELEM: "BPF_MAP_DELETE_ELEM",
              MAP_GET_NEXT_KEY: "BPF_MAP_GET_NEXT_KEY", OBJ_PIN: "BPF_OBJ_PIN",
              OBJ_GET: "BPF_OBJ_GET", PROG_GET_NEXT_ID: "BPF_PROG_GET_NEXT_ID",
              MAP_GET_NEXT_ID: "BPF_MAP_GET_NEXT_ID", PROG_GET_FD_BY_ID: "BPF_PROG_GET_FD_BY_ID",
              MAP_GET_FD_BY_ID: "BPF_MAP_GET_FD_BY_ID",
              OBJ_GET_INFO_BY_FD: "BPF_OBJ_GET_INFO_BY_FD",
              MAP_LOOKUP_BATCH: "BPF_MAP_LOOKUP_BATCH", PROG_LOAD: "BPF_PROG_LOAD",
              LINK_CREATE: "BPF_LINK_CREATE", ITER_CREATE: "BPF_ITER_CREATE",
              BTF_GET_FD_BY_ID: "BPF_BTF_GET_FD_BY_ID", BTF_GET_NEXT_ID: "BPF_BTF_GET_NEXT_ID",
              LINK_GET_FD_BY_ID: "BPF_LINK_GET_FD_BY_ID",
              LINK_GET_NEXT_ID: "BPF_LINK_GET_NEXT_ID", BTF_LOAD: "BPF_BTF_LOAD",
              MAP_FREEZE: "BPF_MAP_FREEZE"}

# which capability the kernel checks (kernel/bpf/syscall.c): the *_GET_NEXT_ID and
# *_GET_FD_BY_ID commands check capable(CAP_SYS_ADMIN); creating maps checks bpf_capable()
# (CAP_BPF or CAP_SYS_ADMIN); pins are files (permissions on bpffs).
_CMD_CAPS = {PROG_GET_NEXT_ID: "CAP_SYS_ADMIN", MAP_GET_NEXT_ID: "CAP_SYS_ADMIN",
             PROG_GET_FD_BY_ID: "CAP_SYS_ADMIN", MAP_GET_FD_BY_ID: "CAP_SYS_ADMIN",
             BTF_GET_NEXT_ID: "CAP_SYS_ADMIN", BTF_GET_FD_BY_ID: "CAP_SYS_ADMIN",
             LINK_GET_NEXT_ID: "CAP_SYS_ADMIN", LINK_GET_FD_BY_ID: "CAP_SYS_ADMIN",
             MAP_CREATE: "CAP_BPF", OBJ_GET: "read access to the pinned path",
             PROG_LOAD: "CAP_BPF and CAP_PERFMON", LINK_CREATE: "CAP_BPF and CAP_PERFMON"}

_CMD_WHAT = {PROG_GET_NEXT_ID: "listing BPF programs", MAP_GET_NEXT_ID: "listing BPF maps",
             PROG_GET_FD_BY_ID: "opening a BPF program by id",
             MAP_GET_FD_BY_ID: "opening a BPF map by id", MAP_CREATE: "creating a BPF map",
             OBJ_GET: "opening a pinned BPF object",
             PROG_LOAD: "loading a BPF iterator program",
             LINK_CREATE: "attaching a BPF iterator"}

_NR_BPF = {"x86_64": 321, "aarch64": 280, "arm64": 280, "riscv64": 280, "ppc64le": 361,
           "s390x": 351, "i686": 357, "i386": 357, "armv7l": 386}.get(os.uname().machine)

_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_syscall.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint]
# the same function without argument conversions, for the calls a scan makes per map: its
# arguments are small ints and a c_void_p made once (a third of the call's cost)
_raw_syscall = _libc["syscall"]
_raw_syscall.restype = ctypes.c_long


def available() -> bool:
    """Whether this architecture's bpf() syscall number is known."""
    return _NR_BPF is not None


def _call(cmd: int, buf: ctypes.Array, size: int, what: str = "") -> int:
    if _NR_BPF is None:
        raise HostError(f"bpf() syscall number unknown on {os.uname().machine}")
    ret = _syscall(_NR_BPF, cmd, ctypes.addressof(buf), size)
    if ret >= 0:
        return ret
    err = ctypes.get_errno()
    name = _CMD_NAMES.get(cmd, f"bpf cmd {cmd}")
    where = f"{name}{' ' + what if what else ''}"
    if err in (_errno.EPERM, _errno.EACCES):
        what_ = _CMD_WHAT.get(cmd)
        raise PermissionDenied(f"{what_} ({where})" if what_ else where,
                               _CMD_CAPS.get(cmd, "CAP_BPF"))
    if err == _errno.ENOENT and cmd in (MAP_GET_FD_BY_ID, PROG_GET_FD_BY_ID,
                                        BTF_GET_FD_BY_ID, LINK_GET_FD_BY_ID):
        raise ObjectGone(f"{where}: no longer exists")
    if err == _errno.ENOENT and cmd == OBJ_GET:
        raise ObjectGone(f"{where}: no such pin")
    if err == _errno.EBADF and cmd == OBJ_GET_INFO_BY_FD:
        raise ObjectGone(f"{where}: bad fd")
    e = HostError(f"{where}: {os.strerror(err)}")
    e.errno = err
    raise e


CLONE_NEWNET = 0x40000000


def setns_thread(fd: int, nstype: int = CLONE_NEWNET) -> None:
    """setns(2): move the calling thread (only it) into the namespace ``fd`` refers to. A
    network namespace can be entered by one thread of a threaded process: its sockets are
    then created there. (Here because this module is the one that turns errno into errors.)"""
    if _libc.setns(fd, nstype) == 0:
        return
    err = ctypes.get_errno()
    if err == _errno.EPERM:
        raise PermissionDenied("entering another network namespace", "CAP_SYS_ADMIN")
    raise HostError(f"setns: {os.strerror(err)}")


# ---- ids and fds ----

_ID_ATTR = struct.Struct("=III")  # start_id | id, next_id, open_flags


class _IdBuffers(threading.local):
    """Per-thread attr buffers reused by the id commands (a scan makes thousands of calls)."""

    def __init__(self) -> None:
        self.buf = ctypes.create_string_buffer(_ID_ATTR.size)
        self.addr = ctypes.addressof(self.buf)
        self.ptr = ctypes.c_void_p(self.addr)
        self.words = memoryview(self.buf).cast("B").cast("I")    # the three u32 fields


_ids = _IdBuffers()


def _next_ids(cmd: int):
    if _NR_BPF is None:
        raise HostError(f"bpf() syscall number unknown on {os.uname().machine}")
    start = 0
    while True:
        b = _ids
        _ID_ATTR.pack_into(b.buf, 0, start, 0, 0)
        if _syscall(_NR_BPF, cmd, b.addr, 8) < 0:  # offsetofend(next_id)
            if ctypes.get_errno() == _errno.ENOENT:
                return
            _call(cmd, b.buf, 8)  # raises the right exception
        start = _ID_ATTR.unpack_from(b.buf, 0)[1]
        yield start


def map_ids():
    """Every map id on the host, ascending (BPF_MAP_GET_NEXT_ID; needs CAP_SYS_ADMIN)."""
    return _next_ids(MAP_GET_NEXT_ID)


def prog_ids():
    """Every program id on the host, ascending (BPF_PROG_GET_NEXT_ID)."""
    return _next_ids(PROG_GET_NEXT_ID)


def _fd_by_id(cmd: int, obj_id: int, flags: int) -> int:
    b = _ids
    _ID_ATTR.pack_into(b.buf, 0, obj_id, 0, flags)
    ret = _syscall(_NR_BPF or -1, cmd, b.addr, 12)  # offsetofend(open_flags)
    if ret >= 0:
        return ret
    return _call(cmd, b.buf, 12, f"id {obj_id}")


def map_fd_by_id(map_id: int, flags: int = BPF_F_RDONLY) -> int:
    """A new fd for map ``map_id``, read-only by default. Raises ObjectGone if it vanished.
    (A scan opens every map: the attr's words are set in place and the call made without
    argument conversions.)"""
    b = _ids
    words = b.words
    words[0] = map_id
    words[1] = 0
    words[2] = flags
    ret = _raw_syscall(_NR_BPF or -1, MAP_GET_FD_BY_ID, b.ptr, 12)  # offsetofend(open_flags)
    if ret >= 0:
        return ret
    return _call(MAP_GET_FD_BY_ID, b.buf, 12, f"id {map_id}")


def prog_fd_by_id(prog_id: int) -> int:
    return _fd_by_id(PROG_GET_FD_BY_ID, prog_id, 0)


def btf_ids():
    """Every BTF object id on the host (BPF_BTF_GET_NEXT_ID; vmlinux and modules too)."""
    return _next_ids(BTF_GET_NEXT_ID)


def link_ids():
    """Every BPF link id on the host (BPF_LINK_GET_NEXT_ID, 5.8+)."""
    return _next_ids(LINK_GET_NEXT_ID)


def btf_fd_by_id(btf_id: int) -> int:
    return _fd_by_id(BTF_GET_FD_BY_ID, btf_id, 0)


def link_fd_by_id(link_id: int) -> int:
    return _fd_by_id(LINK_GET_FD_BY_ID, link_id, 0)


def close(fd: int) -> None:
    os.close(fd)


# ---- info ----

@dataclass(frozen=True)
class MapInfo:
    """struct bpf_map_info as the kernel reports it."""
    id: int
    type: int
    key_size: int
    value_size: int
    max_entries: int
    map_flags: int
    name: str
    ifindex: int
    btf_id: int
    btf_key_type_id: int
    btf_value_type_id: int
    btf_vmlinux_value_type_id: int
    map_extra: int


# struct bpf_map_info up to map_extra (88 bytes, 5.16+); older kernels fill a prefix and
# report their info_len.
_MAP_INFO = struct.Struct("=IIIIII16sIIQQIIIIQ")
_INFO_ATTR = struct.Struct("=IIQ")  # bpf_fd, info_len, info


def _get_info(fd: int, info: ctypes.Array, size: int) -> int:
    attr = ctypes.create_string_buffer(_INFO_ATTR.size)
    _INFO_ATTR.pack_into(attr, 0, fd, size, ctypes.addressof(info))
    _call(OBJ_GET_INFO_BY_FD, attr, _INFO_ATTR.size, f"fd {fd}")
    return _INFO_ATTR.unpack_from(attr, 0)[1]


class _InfoReader(threading.local):
    """Per-thread buffers for OBJ_GET_INFO_BY_FD on maps (a scan calls it thousands of times)."""

    def __init__(self) -> None:
        self.info = ctypes.create_string_buffer(_MAP_INFO.size)
        self.attr = ctypes.create_string_buffer(_INFO_ATTR.size)
        self.info_addr = ctypes.addressof(self.info)
        self.attr_addr = ctypes.addressof(self.attr)

    def map_info(self, fd: int) -> MapInfo:
        ctypes.memset(self.info_addr, 0, _MAP_INFO.size)
        _INFO_ATTR.pack_into(self.attr, 0, fd, _MAP_INFO.size, self.info_addr)
        if _syscall(_NR_BPF or -1, OBJ_GET_INFO_BY_FD, self.attr_addr, _INFO_ATTR.size) < 0:
            _call(OBJ_GET_INFO_BY_FD, self.attr, _INFO_ATTR.size, f"fd {fd}")
            # raises unless the retry succeeded (a race): fall through to the same decode
        (mtype, mid, ks, vs, me, flags, name, ifindex, vmlinux_vt, _dev, _ino, btf_id,
         btf_k, btf_v, _btf_vmlinux_id, extra) = _MAP_INFO.unpack_from(self.info, 0)
        return MapInfo(id=mid, type=mtype, key_size=ks, value_size=vs, max_entries=me,
                       map_flags=flags, name=name.split(b"\0", 1)[0].decode(errors="replace"),
                       ifindex=ifindex, btf_id=btf_id, btf_key_type_id=btf_k,
                       btf_value_type_id=btf_v, btf_vmlinux_value_type_id=vmlinux_vt,
                       map_extra=extra)


_reader = _InfoReader()


def map_info(fd: int) -> MapInfo:
    """BPF_OBJ_GET_INFO_BY_FD for a map fd."""
    return _reader.map_info(fd)


@dataclass(frozen=True)
class ProgInfo:
    """struct bpf_prog_info as the kernel reports it (a field an older kernel does not fill
    reads 0)."""
    id: int
    type: int
    name: str
    map_ids: tuple[int, ...]
    tag: str = ""                 # hex, as bpftool prints it
    jited_prog_len: int = 0
    xlated_prog_len: int = 0
    load_time: int = 0            # ns since boot
    created_by_uid: int = 0
    gpl_compatible: bool = False
    nr_jited_ksyms: int = 0
    btf_id: int = 0
    nr_func_info: int = 0
    nr_line_info: int = 0
    nr_jited_line_info: int = 0
    verified_insns: int = 0       # 5.16+
    attach_btf_obj_id: int = 0
    attach_btf_id: int = 0


# struct bpf_prog_info up to attach_btf_id (232 bytes, 6.0+); an older kernel fills the
# prefix it knows and checks that the rest is zero (bpf_check_uarg_tail_zero)
_PROG_INFO = struct.Struct("=II8sIIQQQIIQ16sIIQQIIQQIIQIIQQIIIIQQQQIII4x")


def prog_info(fd: int) -> ProgInfo:
    """BPF_OBJ_GET_INFO_BY_FD for a program fd, with the ids of the maps it uses."""
    room = 64
    while True:
        ids = (ctypes.c_uint32 * room)()
        info = ctypes.create_string_buffer(_PROG_INFO.size)
        struct.pack_into("=IQ", info, 52, room, ctypes.addressof(ids))
        _get_info(fd, info, _PROG_INFO.size)
        (ptype, pid, tag, jl, xl, _j, _x, load_time, uid, nr, _p, name, _ifindex, gpl,
         _nsdev, _nsino, nr_ksyms, _nr_flens, _ks, _fl, btf_id, _fis, _fi, nr_fi, nr_li, _li,
         _jli, nr_jli, _lirs, _jlirs, _nr_tags, _tags, _rt, _rc, _rm, verified, abtf_obj,
         abtf_id) = _PROG_INFO.unpack_from(info)
        if nr <= room:
            return ProgInfo(id=pid, type=ptype,
                            name=name.split(b"\0", 1)[0].decode(errors="replace"),
                            map_ids=tuple(ids[:nr]), tag=tag.hex(), jited_prog_len=jl,
                            xlated_prog_len=xl, load_time=load_time, created_by_uid=uid,
                            gpl_compatible=bool(gpl & 1), nr_jited_ksyms=nr_ksyms,
                            btf_id=btf_id, nr_func_info=nr_fi, nr_line_info=nr_li,
                            nr_jited_line_info=nr_jli, verified_insns=verified,
                            attach_btf_obj_id=abtf_obj, attach_btf_id=abtf_id)
        room = nr


@dataclass(frozen=True)
class BtfInfo:
    """struct bpf_btf_info."""
    id: int
    btf_size: int
    name: str
    kernel_btf: bool


_BTF_INFO = struct.Struct("=QIIQII")   # btf, btf_size, id, name, name_len, kernel_btf


def btf_info(fd: int) -> BtfInfo:
    """BPF_OBJ_GET_INFO_BY_FD for a BTF fd (its size and name, not its bytes)."""
    name = ctypes.create_string_buffer(64)
    info = ctypes.create_string_buffer(_BTF_INFO.size)
    _BTF_INFO.pack_into(info, 0, 0, 0, 0, ctypes.addressof(name), 64, 0)
    _get_info(fd, info, _BTF_INFO.size)
    _b, size, bid, _n, _nl, kernel = _BTF_INFO.unpack_from(info)
    return BtfInfo(id=bid, btf_size=size, name=name.value.decode(errors="replace"),
                   kernel_btf=bool(kernel))


@dataclass(frozen=True)
class LinkInfo:
    """The head of struct bpf_link_info: which program a link holds."""
    id: int
    type: int
    prog_id: int


_LINK_INFO = struct.Struct("=III4x56x")   # type, id, prog_id, then the per-type union


def link_info(fd: int) -> LinkInfo:
    info = ctypes.create_string_buffer(_LINK_INFO.size)
    _get_info(fd, info, _LINK_INFO.size)
    ltype, lid, prog_id = _LINK_INFO.unpack_from(info)
    return LinkInfo(id=lid, type=ltype, prog_id=prog_id)


# ---- pins ----

_OBJ_GET_ATTR = struct.Struct("=QII")  # pathname, bpf_fd, file_flags


def _info_by_id(open_id, read_info, obj_id: int):
    fd = open_id(obj_id)
    try:
        return read_info(fd)
    finally:
        os.close(fd)


def map_info_by_id(map_id: int) -> MapInfo:
    """Map ``map_id``'s info through a read-only fd of its own, closed again; ObjectGone
    when the map is gone (between its id and its fd, or its fd and its info)."""
    return _info_by_id(map_fd_by_id, map_info, map_id)


def prog_info_by_id(prog_id: int) -> ProgInfo:
    """As :func:`map_info_by_id`, for a program."""
    return _info_by_id(prog_fd_by_id, prog_info, prog_id)


def btf_info_by_id(btf_id: int) -> BtfInfo:
    """As :func:`map_info_by_id`, for a BTF object."""
    return _info_by_id(btf_fd_by_id, btf_info, btf_id)


def link_info_by_id(link_id: int) -> LinkInfo:
    """As :func:`map_info_by_id`, for a link."""
    return _info_by_id(link_fd_by_id, link_info, link_id)


def obj_get(path: str | os.PathLike, flags: int = BPF_F_RDONLY) -> int:
    """Open a pinned object (BPF_OBJ_GET), read-only by default."""
    raw = ctypes.create_string_buffer(os.fsencode(path))
    attr = ctypes.create_string_buffer(_OBJ_GET_ATTR.size)
    _OBJ_GET_ATTR.pack_into(attr, 0, ctypes.addressof(raw), 0, flags)
    return _call(OBJ_GET, attr, _OBJ_GET_ATTR.size, os.fsdecode(path))


def obj_pin(fd: int, path: str | os.PathLike) -> None:
    """Pin ``fd`` at ``path`` on a bpffs mount (BPF_OBJ_PIN)."""
    raw = ctypes.create_string_buffer(os.fsencode(path))
    attr = ctypes.create_string_buffer(_OBJ_GET_ATTR.size)
    _OBJ_GET_ATTR.pack_into(attr, 0, ctypes.addressof(raw), fd, 0)
    _call(OBJ_PIN, attr, _OBJ_GET_ATTR.size, os.fsdecode(path))


# ---- elements (read-only) ----

_ELEM_ATTR = struct.Struct("=IIQQQ")  # map_fd, pad, key, value|next_key, flags


def map_next_key(fd: int, key: bytes | None, key_size: int) -> bytes | None:
    """BPF_MAP_GET_NEXT_KEY: the key after ``key`` (None = first), or None at the end."""
    kbuf = ctypes.create_string_buffer(key or b"", max(key_size, 1)) if key is not None else None
    nbuf = ctypes.create_string_buffer(max(key_size, 1))
    attr = ctypes.create_string_buffer(_ELEM_ATTR.size)
    _ELEM_ATTR.pack_into(attr, 0, fd, 0, ctypes.addressof(kbuf) if kbuf is not None else 0,
                         ctypes.addressof(nbuf), 0)
    ret = _syscall(_NR_BPF or -1, MAP_GET_NEXT_KEY, ctypes.addressof(attr), 24)
    if ret < 0:
        if ctypes.get_errno() == _errno.ENOENT:
            return None
        _call(MAP_GET_NEXT_KEY, attr, 24, f"fd {fd}")
    return nbuf.raw[:key_size]


_BATCH_ATTR = struct.Struct("=QQQQIIQQ")  # in_batch out_batch keys values count map_fd elem_flags flags

# What one BPF_MAP_LOOKUP_BATCH step may hold in keys and values, whatever the map: counting a
# map of 1 MiB values (or per-CPU values times the possible CPUs) costs this much, not
# value_size x 1024. Below MIN_BATCH entries per step a batch saves little over a key walk,
# so such maps are walked with BPF_MAP_GET_NEXT_KEY, which holds two keys and no value.
BATCH_BUDGET = 4 << 20
MAX_BATCH = 1024
MIN_BATCH = 64


def batch_size_for(key_size: int, value_size: int, budget: int = BATCH_BUDGET) -> int:
    """Entries per batch step that fit ``budget`` bytes of keys and values (0: walk keys)."""
    n = min(MAX_BATCH, budget // (max(key_size, 1) + max(value_size, 1)))
    return n if n >= MIN_BATCH else 0


class _BatchBuffers:
    """The buffers of one batch walk, allocated once for every step of it."""

    def __init__(self, key_size: int, value_size: int, batch: int) -> None:
        self.token = max(key_size, 4)  # hash maps use a u32 bucket index as the batch token
        self.batch = batch
        self.in_b = ctypes.create_string_buffer(self.token)
        self.out_b = ctypes.create_string_buffer(self.token)
        self.keys = ctypes.create_string_buffer(max(key_size, 1) * batch)
        self.values = ctypes.create_string_buffer(max(value_size, 1) * batch)
        self.attr = ctypes.create_string_buffer(_BATCH_ATTR.size)

    def step(self, fd: int, start: bytes | None) -> tuple[int, bytes | None]:
        if start is not None:
            ctypes.memmove(self.in_b, start, min(len(start), self.token))
        _BATCH_ATTR.pack_into(self.attr, 0,
                              ctypes.addressof(self.in_b) if start is not None else 0,
                              ctypes.addressof(self.out_b), ctypes.addressof(self.keys),
                              ctypes.addressof(self.values), self.batch, fd, 0, 0)
        ret = _syscall(_NR_BPF or -1, MAP_LOOKUP_BATCH, ctypes.addressof(self.attr),
                       _BATCH_ATTR.size)
        count = struct.unpack_from("=I", self.attr, 32)[0]
        if ret < 0:
            err = ctypes.get_errno()
            if err == _errno.ENOENT:  # the last batch (count may be > 0)
                return count, None
            e = HostError(f"BPF_MAP_LOOKUP_BATCH fd {fd}: {os.strerror(err)}")
            e.errno = err
            raise e
        return count, self.out_b.raw


def map_lookup_batch(fd: int, key_size: int, value_size: int, *, batch: int | None = None,
                     start: bytes | None = None) -> tuple[int, bytes | None]:
    """One BPF_MAP_LOOKUP_BATCH step: ``(count, next_token)``; next_token None at the end.

    ``value_size`` must be the per-lookup value size (per-CPU maps: rounded up to 8 times
    the possible CPUs). ``batch`` defaults to what fits :data:`BATCH_BUDGET` (at least one).
    Raises HostError with errno EINVAL/ENOTSUPP where the map type has no batch operations.
    """
    if batch is None:
        batch = max(1, batch_size_for(key_size, value_size))
    return _BatchBuffers(key_size, value_size, batch).step(fd, start)


def count_entries(fd: int, key_size: int, value_size: int, *, deadline: float | None = None,
                  batch: int | None = None, use_batch: bool = True,
                  clock=None) -> tuple[int, bool, str]:
    """Count a map's entries without writing to it: ``(count, complete, method)``.

    Uses BPF_MAP_LOOKUP_BATCH when the kernel supports it for the map and a useful batch
    fits :data:`BATCH_BUDGET` bytes, else walks keys with BPF_MAP_GET_NEXT_KEY (no values
    read). Memory held while counting: at most BATCH_BUDGET plus two keys, whatever the
    map's value size. Stops at ``deadline`` (a ``clock()`` value) with ``complete=False``.
    A hash map being changed while walked can be counted twice or miss keys, as with bpftool.
    """
    import time
    clock = clock or time.monotonic
    total = 0
    if batch is None:
        batch = batch_size_for(key_size, value_size)
    if use_batch and batch > 0:
        try:
            buffers = _BatchBuffers(key_size, value_size, batch)
            token = None
            while True:
                n, token = buffers.step(fd, token)
                total += n
                if token is None:
                    return total, True, "batch"
                if deadline is not None and clock() > deadline:
                    return total, False, "batch"
        except HostError as e:
            if getattr(e, "errno", None) not in (_errno.EINVAL, 524, _errno.EOPNOTSUPP,
                                                 _errno.ENOSPC, _errno.EFAULT):
                raise
            total = 0
        finally:
            buffers = None  # noqa: F841 - the value buffer goes before the key walk
    key = None
    n = 0
    while True:
        key = map_next_key(fd, key, key_size)
        if key is None:
            return total, True, "next_key"
        total += 1
        n += 1
        if deadline is not None and n % 256 == 0 and clock() > deadline:
            return total, False, "next_key"


# ---- writes, for tests and fixtures ----

_CREATE_ATTR = struct.Struct("=IIIIIII16s")  # .. map_name; offsetofend(map_name) = 44
# .. map_ifindex, btf_fd, btf_key_type_id, btf_value_type_id, btf_vmlinux_value_type_id,
# map_extra (5.16+): offsetofend(map_extra) = 72
_CREATE_ATTR_BTF = struct.Struct("=IIIIIII16sIIIIIQ")


def map_create(map_type: int, key_size: int, value_size: int, max_entries: int,
               map_flags: int = 0, name: str = "", *, inner_map_fd: int = 0, btf_fd: int = 0,
               btf_key_type_id: int = 0, btf_value_type_id: int = 0, map_extra: int = 0
               ) -> int:
    """BPF_MAP_CREATE with the basic attributes (and the inner map of a map-in-map, the BTF
    of its key and value, map_extra); returns the new fd."""
    if not (btf_fd or map_extra):
        attr = ctypes.create_string_buffer(_CREATE_ATTR.size)
        _CREATE_ATTR.pack_into(attr, 0, map_type, key_size, value_size, max_entries,
                               map_flags, inner_map_fd, 0, name.encode()[:15])
        return _call(MAP_CREATE, attr, _CREATE_ATTR.size, name)
    attr = ctypes.create_string_buffer(_CREATE_ATTR_BTF.size)
    _CREATE_ATTR_BTF.pack_into(attr, 0, map_type, key_size, value_size, max_entries,
                               map_flags, inner_map_fd, 0, name.encode()[:15], 0, btf_fd,
                               btf_key_type_id, btf_value_type_id, 0, map_extra)
    return _call(MAP_CREATE, attr, _CREATE_ATTR_BTF.size, name)


def map_freeze(fd: int) -> None:
    """BPF_MAP_FREEZE (only for maps the caller made): no more writes from user space."""
    attr = ctypes.create_string_buffer(4)
    struct.pack_into("=I", attr, 0, fd)
    _call(MAP_FREEZE, attr, 4, f"fd {fd}")


def prog_bind_map(prog_fd: int, map_fd: int) -> None:
    """BPF_PROG_BIND_MAP (5.10+): the program holds the map too (it joins the program's
    maps, as bpf_prog_info's map_ids lists them)."""
    attr = ctypes.create_string_buffer(12)
    struct.pack_into("=III", attr, 0, prog_fd, map_fd, 0)
    _call(PROG_BIND_MAP, attr, 12, f"program fd {prog_fd}, map fd {map_fd}")


def map_update(fd: int, key: bytes, value: bytes, flags: int = BPF_ANY) -> None:
    """BPF_MAP_UPDATE_ELEM (only for maps the caller made)."""
    k = ctypes.create_string_buffer(key, len(key))
    v = ctypes.create_string_buffer(value, len(value))
    attr = ctypes.create_string_buffer(_ELEM_ATTR.size)
    _ELEM_ATTR.pack_into(attr, 0, fd, 0, ctypes.addressof(k), ctypes.addressof(v), flags)
    _call(MAP_UPDATE_ELEM, attr, 32, f"fd {fd}")


def map_delete(fd: int, key: bytes) -> None:
    """BPF_MAP_DELETE_ELEM (only for maps the caller made)."""
    k = ctypes.create_string_buffer(key, len(key))
    attr = ctypes.create_string_buffer(_ELEM_ATTR.size)
    _ELEM_ATTR.pack_into(attr, 0, fd, 0, ctypes.addressof(k), 0, 0)
    _call(MAP_DELETE_ELEM, attr, 32, f"fd {fd}")


# ---- an iterator program (the owner walk in the kernel, host/owner_iter.py) ----

_PROG_LOAD_ATTR = struct.Struct("=IIQQIIQII16sIIIIQIIQII")   # .. attach_btf_id: 112 bytes
BPF_PROG_TYPE_TRACING = 26
BPF_TRACE_ITER = 28


def prog_load(prog_type: int, insns: bytes, *, license: str = "GPL",
              expected_attach_type: int = 0, attach_btf_id: int = 0, name: str = "") -> int:
    """BPF_PROG_LOAD; returns the program's fd. On a verifier refusal the load is retried
    with the verifier's log, whose last lines the HostError carries."""
    code = ctypes.create_string_buffer(insns, len(insns))
    lic = ctypes.create_string_buffer(license.encode())

    def load(log_size: int) -> int:
        log = ctypes.create_string_buffer(max(log_size, 1))
        attr = ctypes.create_string_buffer(_PROG_LOAD_ATTR.size)
        _PROG_LOAD_ATTR.pack_into(attr, 0, prog_type, len(insns) // 8, ctypes.addressof(code),
                                  ctypes.addressof(lic), 1 if log_size else 0, log_size,
                                  ctypes.addressof(log) if log_size else 0, 0, 0,
                                  name.encode()[:15], 0, expected_attach_type, 0, 0, 0, 0, 0,
                                  0, 0, attach_btf_id)
        try:
            return _call(PROG_LOAD, attr, _PROG_LOAD_ATTR.size, name)
        except PermissionDenied:
            raise
        except HostError as e:
            if not log_size:
                raise
            tail = log.value.decode(errors="replace").strip().splitlines()[-3:]
            raise HostError(f"{e}{': ' + ' / '.join(tail) if tail else ''}") from None

    try:
        return load(0)
    except PermissionDenied:
        raise
    except HostError:
        return load(1 << 16)


_BTF_LOAD_ATTR = struct.Struct("=QQIII4x")   # btf, btf_log_buf, btf_size, log_size, log_level


def btf_load(data: bytes) -> int:
    """BPF_BTF_LOAD of a raw BTF blob; returns the BTF object's fd."""
    blob = ctypes.create_string_buffer(data, len(data))
    attr = ctypes.create_string_buffer(_BTF_LOAD_ATTR.size)
    _BTF_LOAD_ATTR.pack_into(attr, 0, ctypes.addressof(blob), 0, len(data), 0, 0)
    return _call(BTF_LOAD, attr, _BTF_LOAD_ATTR.size)


_LINK_ATTR = struct.Struct("=IIIIQI4x")   # prog_fd, target_fd, attach_type, flags, iter_info


def link_create(prog_fd: int, attach_type: int, target_fd: int = 0, *,
                iter_info: bytes | None = None) -> int:
    """BPF_LINK_CREATE (an iterator link: every task, or what ``iter_info`` says: a union
    bpf_iter_link_info, e.g. one process's tasks, 6.1+)."""
    attr = ctypes.create_string_buffer(_LINK_ATTR.size)
    info = ctypes.create_string_buffer(iter_info, len(iter_info)) if iter_info else None
    _LINK_ATTR.pack_into(attr, 0, prog_fd, target_fd, attach_type, 0,
                         ctypes.addressof(info) if info is not None else 0,
                         len(iter_info) if iter_info else 0)
    return _call(LINK_CREATE, attr, _LINK_ATTR.size)


def iter_create(link_fd: int) -> int:
    """BPF_ITER_CREATE: an fd whose read() runs the iterator."""
    attr = ctypes.create_string_buffer(8)
    struct.pack_into("=II", attr, 0, link_fd, 0)
    return _call(ITER_CREATE, attr, 8)
