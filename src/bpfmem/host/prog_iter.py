"""Every program on the host in one stream: a BPF ``bpf_prog`` iterator writing what
``bpf_prog_info`` and fdinfo report of each.

Listing the programs from user space costs a ``BPF_PROG_GET_NEXT_ID``, a
``BPF_PROG_GET_FD_BY_ID``, a ``BPF_OBJ_GET_INFO_BY_FD`` and an fdinfo read per program. A small
tracing program attached to the ``bpf_prog`` iterator (one call per program, 5.9+) writes,
for each, the fields the kernel fills ``bpf_prog_info`` from, read where it reads them
(kernel/bpf/syscall.c, ``bpf_prog_get_info_by_fd``): the id, name and type, the tag, the
instructions' length (``prog->len`` instructions of 8 bytes: ``xlated_prog_len``), the JIT
image's (``prog->jited_len``; a program of subprograms sums theirs, read apart), the BTF id,
the verified instructions, the load time, the loader's uid and the ids of the maps it uses
(``aux->used_maps``), and memlock as fdinfo prints it: ``prog->pages`` pages (tests compare
every field with ``BPF_OBJ_GET_INFO_BY_FD`` and fdinfo on this kernel).

Like :mod:`.count_iter`, the program is written here as instructions with the offsets from the
running kernel's BTF; it needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN). Where it cannot run
:class:`ProgsUnavailable` is raised and the caller lists the programs one by one.

The used maps are read without the kernel's ``used_maps_mutex`` (an iterator program cannot
take it): a program given a map by ``BPF_PROG_BIND_MAP`` at the very moment of the read may
show its map list before or after the change.
"""

from __future__ import annotations

import os
import struct
from operator import itemgetter
from bpfmem.values import dataclass

from bpfmem.errors import HostError, ParseError
from bpfmem.parse.insn import Jump, Label, alu64, assemble, call, exit_insn, ldx, st, stx

from . import cache
from .owner_iter import HELPER_PROBE_READ_KERNEL, HOST_BTF, run_iterator, seq_write

# id, type, memlock pages, instructions, JIT bytes (of the main function), BTF id, verified
# insns, uid, load time, map ids that follow (u32 each), subprograms, tag, name
HEAD = struct.Struct("=IIIIIIIIQII8s16s")
MAX_MAPS = 64                 # MAX_USED_MAPS: a program uses at most 64 maps
# the map ids written in the record; a program that uses more has its list read through
# BPF_OBJ_GET_INFO_BY_FD (a loop over the 64 would cost the verifier ~14 ms a load, each
# unrolled id 0.1 ms)
INLINE_MAPS = 4
ITERATOR_NAME = "bpfmem_progs"
# the light listing: id and map count of every program, all that can move of a loaded
# program's record (its other figures are set by the load; BPF_PROG_BIND_MAP adds maps)
LIGHT = struct.Struct("=II")
LIGHT_NAME = "bpfmem_prog_ids"


class ProgsUnavailable(HostError):
    """The program iterator cannot run here (the reason says why)."""


@dataclass(frozen=True)
class ProgLayout:
    """BTF ids and field offsets the program reads (-1: the kernel's struct has no such
    field; the record then holds 0)."""
    attach_btf_id: int        # FUNC bpf_iter_bpf_prog
    pages: int                # struct bpf_prog
    type: int
    len: int
    jited_len: int
    tag: int
    aux: int
    aux_id: int               # struct bpf_prog_aux
    name: int
    used_map_cnt: int
    used_maps: int
    btf: int
    verified_insns: int
    load_time: int
    user: int
    func_cnt: int
    user_uid: int             # struct user_struct
    btf_id: int               # struct btf
    map_id: int               # struct bpf_map


_WANT = {
    "bpf_prog": {"pages": 2, "type": 4, "len": 4, "jited_len": 4, "tag": 8, "aux": 8},
    "bpf_prog_aux": {"id": 4, "name": 16, "used_map_cnt": 4, "used_maps": 8, "btf": 8,
                     "verified_insns": 4, "load_time": 8, "user": 8, "func_cnt": 4},
    "user_struct": {"uid": 4},
    "btf": {"id": 4},
    "bpf_map": {"id": 4},
}
_OPTIONAL = {("bpf_prog_aux", "verified_insns")}


def _members(btf, tid: int, base: int = 0):
    """(name, byte offset, bit field?) of a struct's members, those of anonymous struct
    and union members included (``prog->tag`` is in a union)."""
    from bpfmem.parse.btf import STRUCT, UNION
    for m in btf.type(tid).members:
        off = base + m.bit_offset // 8
        if not m.name:
            inner = btf.skip_mods_and_typedefs(m.type)
            if btf.kind(inner) in (STRUCT, UNION):
                yield from _members(btf, inner, off)
            continue
        yield m.name, off, bool(m.bitfield_size or m.bit_offset % 8)


def parse_prog_layout(btf_data: bytes) -> ProgLayout:
    """The layout from vmlinux BTF bytes (pure)."""
    from bpfmem.parse.btf import FUNC, STRUCT, Btf
    btf = Btf(btf_data, section="vmlinux BTF")
    found: dict[str, dict[str, int]] = {}
    func_id = 0
    for tid in range(1, btf.count):
        kind = btf.kind(tid)
        if kind == STRUCT:
            name = btf.name_of(tid)
            want = _WANT.get(name)
            if want is not None and name not in found:
                got = found[name] = {}
                for m, off, bits in _members(btf, tid):
                    if m in want:
                        if bits:
                            raise ParseError(f"{name}.{m} is a bit field")
                        got[m] = off
        elif kind == FUNC and not func_id and btf.name_of(tid) == "bpf_iter_bpf_prog":
            func_id = tid
    missing = [f"{s}.{m}" for s, ms in _WANT.items() for m in ms
               if m not in found.get(s, {}) and (s, m) not in _OPTIONAL]
    if missing or not func_id:
        raise ParseError("the kernel's BTF lacks " + ", ".join(
            missing + ([] if func_id else ["bpf_iter_bpf_prog"])))
    p, a = found["bpf_prog"], found["bpf_prog_aux"]
    return ProgLayout(func_id, p["pages"], p["type"], p["len"], p["jited_len"], p["tag"],
                      p["aux"], a["id"], a["name"], a["used_map_cnt"], a["used_maps"],
                      a["btf"], a.get("verified_insns", -1), a["load_time"], a["user"],
                      a["func_cnt"], found["user_struct"]["uid"],
                      found["btf"]["id"], found["bpf_map"]["id"])


def _read(dst: int, size: int, src_reg: int, off: int) -> list:
    """probe_read_kernel(fp + dst, size, src_reg + off)."""
    return [alu64("mov", 1, src=10), alu64("add", 1, imm=dst), alu64("mov", 2, imm=size),
            alu64("mov", 3, src=src_reg), alu64("add", 3, imm=off),
            call(HELPER_PROBE_READ_KERNEL)]


def program(lay: ProgLayout) -> bytes:
    """For each program: seq_write the HEAD record, then one u32 map id for each of its
    first INLINE_MAPS maps.

    Registers: r6 the iterator's meta, r7 the program, then its used_maps array, r8 its aux,
    r9 its map count. The head is built at fp - 72; fp - 80 holds a pointer read, fp - 84 a
    map id."""
    base = -HEAD.size                                   # the head, at fp - 72
    tmp, mid = base - 8, base - 12                      # a pointer read, a map id
    body: list = [
        ldx(8, 6, 1, 0),                                # r6 = ctx->meta
        ldx(8, 7, 1, 8),                                # r7 = ctx->prog
        Jump("jeq", 7, "out"),
        ldx(8, 8, 7, lay.aux),                          # r8 = prog->aux
        Jump("jeq", 8, "out"),
        ldx(4, 2, 8, lay.aux_id), stx(4, 10, 2, base + 0),
        ldx(4, 2, 7, lay.type), stx(4, 10, 2, base + 4),
        ldx(2, 2, 7, lay.pages), stx(4, 10, 2, base + 8),
        ldx(4, 2, 7, lay.len), stx(4, 10, 2, base + 12),
        ldx(4, 2, 7, lay.jited_len), stx(4, 10, 2, base + 16),
        st(4, 10, base + 20, 0),                        # BTF id: aux->btf->id, or 0
        ldx(8, 3, 8, lay.btf),
        Jump("jeq", 3, "nobtf"),
        ldx(4, 2, 3, lay.btf_id), stx(4, 10, 2, base + 20),
        Label("nobtf"),
    ]
    body += ([ldx(4, 2, 8, lay.verified_insns), stx(4, 10, 2, base + 24)]
             if lay.verified_insns >= 0 else [st(4, 10, base + 24, 0)])
    body += [
        st(4, 10, base + 28, 0),                        # uid: aux->user->uid, or 0
        ldx(8, 3, 8, lay.user),
        Jump("jeq", 3, "nouser"),
        ldx(4, 2, 3, lay.user_uid), stx(4, 10, 2, base + 28),
        Label("nouser"),
        ldx(8, 2, 8, lay.load_time), stx(8, 10, 2, base + 32),
        ldx(4, 9, 8, lay.used_map_cnt),                 # r9 = the maps, at most MAX_MAPS
        Jump("jle", 9, "maps_ok", imm=MAX_MAPS),
        alu64("mov", 9, imm=MAX_MAPS),
        Label("maps_ok"),
        stx(4, 10, 9, base + 40),
        *_read(base + 48, 8, 7, lay.tag),               # the tag, 8 bytes
        *_read(base + 56, 16, 8, lay.name),             # the name, 16 bytes
        ldx(4, 2, 8, lay.func_cnt), stx(4, 10, 2, base + 44),   # subprograms
        *seq_write(base, HEAD.size),
        ldx(8, 7, 8, lay.used_maps),                    # r7 = aux->used_maps (the array)
    ]
    for k in range(INLINE_MAPS):                        # the first map ids, one u32 each
        body += [
            Jump("jle", 9, "out", imm=k),               # no map k
            st(4, 10, mid, 0),
            *_read(tmp, 8, 7, 8 * k),                   # fp[tmp] = used_maps[k]
            ldx(8, 3, 10, tmp),
            Jump("jeq", 3, f"write{k}"),
            *_read(mid, 4, 3, lay.map_id),              # fp[mid] = used_maps[k]->id
            Label(f"write{k}"),
            *seq_write(mid, 4),
        ]
    body += [
        Label("out"),
        alu64("mov", 0, imm=0),
        exit_insn(),
    ]
    return assemble(body)


def light_program(lay: ProgLayout) -> bytes:
    """For each program: seq_write (id, map count) (:data:`LIGHT`)."""
    base = -LIGHT.size
    return assemble([
        ldx(8, 6, 1, 0),                                # r6 = ctx->meta
        ldx(8, 7, 1, 8),                                # r7 = ctx->prog
        Jump("jeq", 7, "out"),
        ldx(8, 8, 7, lay.aux),                          # r8 = prog->aux
        Jump("jeq", 8, "out"),
        ldx(4, 2, 8, lay.aux_id), stx(4, 10, 2, base),
        ldx(4, 2, 8, lay.used_map_cnt), stx(4, 10, 2, base + 4),
        *seq_write(base, LIGHT.size),
        Label("out"),
        alu64("mov", 0, imm=0),
        exit_insn(),
    ])


def light_of(data: bytes) -> bytes:
    """The light listing (:data:`LIGHT` records) of the programs of a full listing: what
    :func:`progs_light_raw` reads while they are the same programs with the same maps."""
    out = []
    at, end, size = 0, len(data), HEAD.size
    unpack, pack = HEAD.unpack_from, LIGHT.pack
    while at + size <= end:
        head = unpack(data, at)
        out.append(pack(head[0], head[9]))
        at += size + 4 * min(head[9], INLINE_MAPS)
    return b"".join(out)


class ProgRecord(tuple):
    """One program as the iterator wrote it: (id, type, memlock, xlated_prog_len,
    jited_prog_len, btf_id, verified_insns, created_by_uid, load_time, map_ids, tag hex,
    name, subprograms), fields by name too. As :func:`records` made it, a program of
    subprograms has the main function's jited_prog_len only, and the ids of maps after the
    first INLINE_MAPS are None (:func:`programs` reads both)."""
    __slots__ = ()

    id = property(itemgetter(0))
    type = property(itemgetter(1))
    memlock = property(itemgetter(2))
    xlated_prog_len = property(itemgetter(3))
    jited_prog_len = property(itemgetter(4))
    btf_id = property(itemgetter(5))
    verified_insns = property(itemgetter(6))
    created_by_uid = property(itemgetter(7))
    load_time = property(itemgetter(8))
    map_ids = property(itemgetter(9))
    tag = property(itemgetter(10))
    name = property(itemgetter(11))
    subprograms = property(itemgetter(12))


def records(data: bytes, page_size: int | None = None) -> list[ProgRecord]:
    """The programs the iterator wrote, in id order (memlock in bytes: pages x
    ``page_size``, the running kernel's by default)."""
    page = page_size or os.sysconf("SC_PAGE_SIZE")
    out: list[ProgRecord] = []
    at, end, size = 0, len(data), HEAD.size
    unpack = HEAD.unpack_from
    while at + size <= end:
        (pid, ptype, pages, insns, jited, btf_id, verified, uid, load_time, nmaps, funcs,
         tag, name) = unpack(data, at)
        at += size
        inline = min(nmaps, INLINE_MAPS)
        if inline:
            map_ids = struct.unpack_from(f"={inline}I", data, at)
            at += 4 * inline
        else:
            map_ids = ()
        if nmaps > inline:
            map_ids = (*map_ids, *(None,) * (nmaps - inline))   # read apart: programs()
        out.append(ProgRecord((pid, ptype, pages * page, insns * 8, jited, btf_id, verified,
                               uid, load_time, map_ids, tag.hex(),
                               name.rstrip(b"\0").decode(errors="replace"), funcs)))
    return out


def programs(data: bytes, known: dict | None = None, skip: int | None = None
             ) -> tuple[list[ProgRecord], int]:
    """:func:`records`, complete: a program of subprograms gets the JIT images of all
    summed, and a program of more than INLINE_MAPS maps its whole list, as
    ``bpf_prog_info`` gives them (read for those few through ``BPF_OBJ_GET_INFO_BY_FD``).
    ``known`` (kept by the caller between scans) keeps those reads by the record;
    the program of id ``skip`` (the iterator's own) is left out; (records, programs gone
    meanwhile)."""
    out = records(data)
    if skip is not None:
        out = [r for r in out if r[0] != skip]
    gone = 0
    for i, r in enumerate(out):
        if not r[12] and (not r[9] or r[9][-1] is not None):
            continue
        hit = known.get(r) if known is not None else None
        if hit is None:
            from bpfmem.errors import ObjectGone

            from . import bpfsys
            try:
                info = bpfsys.prog_info_by_id(r[0])
            except ObjectGone:
                gone += 1
                out[i] = None
                continue
            hit = ProgRecord(r[:4] + ((info.jited_prog_len if r[12] else r[4]),) + r[5:9]
                             + (tuple(info.map_ids),) + r[10:])
            if known is not None:
                known[r] = hit
        out[i] = hit
    if gone:
        out = [r for r in out if r is not None]
    if known is not None and len(known) > len(out):
        keep = set(out)
        for stale in [k for k, v in known.items() if v not in keep]:
            del known[stale]
    return out, gone


def read_prog_layout() -> ProgLayout:
    """The running kernel's layout, cached per kernel build (it holds no addresses)."""
    try:
        st_ = os.stat(HOST_BTF)
    except OSError as e:
        raise ProgsUnavailable(f"no kernel BTF ({e.strerror})") from None
    key = f"prog-iter-v1|{os.uname().release}|{os.uname().version}|{st_.st_size}"

    def build() -> ProgLayout:
        try:
            with open(HOST_BTF, "rb") as f:
                return parse_prog_layout(f.read())
        except (OSError, ParseError) as e:
            raise ProgsUnavailable(str(e)) from None
    return cache.layout("prog-iter-layout", key, ProgLayout, build)


def progs_raw(kept: dict | None = None) -> tuple[bytes, int | None]:
    """What the iterator wrote for every program on the host, in id order (equal bytes: the
    same programs with the same figures and maps), and the id of the iterator's own program
    when it ran only for this read (None when ``kept`` keeps it loaded, and listed, as the
    node's other programs)."""
    own: list[int] = []

    def make():
        lay = read_prog_layout()
        return program(lay), lay.attach_btf_id

    def loaded(fd: int) -> None:
        if kept is None:
            from . import bpfsys
            own.append(bpfsys.prog_info(fd).id)
    data = run_iterator(make, ITERATOR_NAME, ProgsUnavailable, "program", kept, loaded)
    return data, (own[0] if own else None)


def progs_light_raw(kept: dict) -> bytes:
    """The light listing of every program on the host, in id order: (id, map count) each
    (:data:`LIGHT`). Equal to :func:`light_of` the last full listing, the full listing is
    what it was: a loaded program's other figures do not move. The program is kept loaded
    in ``kept`` (as :func:`progs_raw`'s), so it is listed among the node's."""
    def make():
        lay = read_prog_layout()
        return light_program(lay), lay.attach_btf_id
    return run_iterator(make, LIGHT_NAME, ProgsUnavailable, "program", kept)
