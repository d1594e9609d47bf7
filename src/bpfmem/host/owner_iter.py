"""Who holds each map, from the kernel in one stream: a BPF ``task_file`` iterator.

The ``/proc`` walk costs a readlink and an fdinfo read for every fd of every process. The
kernel can do the walk itself, as bpftool's pid iterator does: a small tracing program
attached to the ``task_file`` iterator (one call per open file of every process, threads that
share their leader's files skipped) writes ``(tgid, fd, map id)`` for each file whose
``f_op->release`` is ``bpf_map_release``, i.e. every BPF map fd.

The program is written here as instructions; its few field offsets come from the running
kernel's BTF and ``bpf_map_release``'s address from ``/proc/kallsyms`` (text symbols are there
without CONFIG_KALLSYMS_ALL). No compiler or libbpf at run time. Loading it needs CAP_BPF and
CAP_PERFMON (or CAP_SYS_ADMIN); without them, a kernel without BTF or iterators, hidden
kallsyms addresses or a pid namespace other than the initial one, :func:`map_fds` raises
:class:`IteratorUnavailable` and the caller walks ``/proc`` instead.
"""

from __future__ import annotations

import os
import struct
from dataclasses import asdict, dataclass

from bpfmem.errors import HostError, ParseError
from bpfmem.parse.insn import (Jump, Label, alu64, assemble, call, exit_insn, ld_imm64, ldx, st,
                               stx)

from . import bpfsys, cache

HOST_BTF = "/sys/kernel/btf/vmlinux"
PROC_PID_INIT_INO = 0xEFFFFFFC          # the initial pid namespace's inode number
HELPER_PROBE_READ_KERNEL = 113
HELPER_SEQ_WRITE = 127
RECORD = struct.Struct("=IIII")         # tgid, fd, map id, 0


class IteratorUnavailable(HostError):
    """The in-kernel owner walk cannot run here (the reason says why)."""


@dataclass(frozen=True)
class Layout:
    """What the program needs to know of the running kernel."""

    attach_btf_id: int        # FUNC bpf_iter_task_file in vmlinux BTF
    file_f_op: int            # offsetof(struct file, f_op)
    file_private_data: int    # offsetof(struct file, private_data)
    fops_release: int         # offsetof(struct file_operations, release)
    task_tgid: int            # offsetof(struct task_struct, tgid)
    map_id: int               # offsetof(struct bpf_map, id)
    release_addr: int         # &bpf_map_release
    # for the walk of every BPF fd (:func:`bpf_fds`); -1 / 0 where the kernel lacks one
    prog_aux: int = -1        # offsetof(struct bpf_prog, aux)
    aux_id: int = -1          # offsetof(struct bpf_prog_aux, id)
    link_id: int = -1         # offsetof(struct bpf_link, id)
    link_prog: int = -1       # offsetof(struct bpf_link, prog)
    btf_id: int = -1          # offsetof(struct btf, id)
    prog_release: int = 0     # &bpf_prog_release
    link_release: int = 0     # &bpf_link_release
    btf_release: int = 0      # &btf_release


def parse_layout(btf_data: bytes, kallsyms: str) -> Layout:
    """The layout from vmlinux BTF bytes and /proc/kallsyms text (pure)."""
    from bpfmem.parse.btf import FUNC, STRUCT, Btf
    btf = Btf(btf_data, section="vmlinux BTF")
    want = {"file": ("f_op", "private_data"), "file_operations": ("release",),
            "task_struct": ("tgid",), "bpf_map": ("id",), "bpf_prog": ("aux",),
            "bpf_prog_aux": ("id",), "bpf_link": ("id", "prog"), "btf": ("id",)}
    optional = {"bpf_prog", "bpf_prog_aux", "bpf_link", "btf"}
    offsets: dict[str, int] = {}
    func_id = 0
    for tid in range(1, btf.count):
        kind = btf.kind(tid)
        if kind == STRUCT:
            name = btf.name_of(tid)
            if name in want and not any(k.startswith(name + ".") for k in offsets):
                for m in btf.type(tid).members:
                    if m.name in want[name]:
                        if m.bitfield_size or m.bit_offset % 8:
                            raise ParseError(f"{name}.{m.name} is a bit field")
                        offsets[f"{name}.{m.name}"] = m.bit_offset // 8
        elif kind == FUNC and not func_id and btf.name_of(tid) == "bpf_iter_task_file":
            func_id = tid
    missing = [f"{s}.{m}" for s, ms in want.items() for m in ms
               if f"{s}.{m}" not in offsets and s not in optional]
    if missing or not func_id:
        raise ParseError("the kernel's BTF lacks " + ", ".join(
            missing + ([] if func_id else ["bpf_iter_task_file"])))
    addrs = dict.fromkeys(("bpf_map_release", "bpf_prog_release", "bpf_link_release",
                           "btf_release"), 0)
    for line in kallsyms.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[2] in addrs and parts[1] in "tT" and not addrs[parts[2]]:
            addrs[parts[2]] = int(parts[0], 16)
    addr = addrs["bpf_map_release"]
    if not addr:
        raise ParseError("bpf_map_release has no address in /proc/kallsyms "
                         "(kernel.kptr_restrict hides it, or not root)")
    return Layout(func_id, offsets["file.f_op"], offsets["file.private_data"],
                  offsets["file_operations.release"], offsets["task_struct.tgid"],
                  offsets["bpf_map.id"], addr, offsets.get("bpf_prog.aux", -1),
                  offsets.get("bpf_prog_aux.id", -1), offsets.get("bpf_link.id", -1),
                  offsets.get("bpf_link.prog", -1), offsets.get("btf.id", -1),
                  addrs["bpf_prog_release"], addrs["bpf_link_release"], addrs["btf_release"])


# ---- the program ------------------------------------------------------------------------
def program(lay: Layout) -> bytes:
    """The iterator program: for each (task, file) whose f_op->release is bpf_map_release,
    seq_write (tgid, fd, map->id, 0)."""
    return assemble([
        ldx(8, 6, 1, 0),                           # r6 = ctx->meta
        ldx(8, 7, 1, 8),                           # r7 = ctx->task
        ldx(4, 9, 1, 16),                          # r9 = ctx->fd
        ldx(8, 8, 1, 24),                          # r8 = ctx->file
        Jump("jeq", 7, "out"),                     # if !task goto out
        Jump("jeq", 8, "out"),                     # if !file goto out
        ldx(8, 2, 8, lay.file_f_op),               # r2 = file->f_op
        ldx(8, 3, 2, lay.fops_release),            # r3 = f_op->release
        ld_imm64(4, lay.release_addr),             # r4 = &bpf_map_release
        Jump("jne", 3, "out", src=4),              # not a map: out
        ldx(4, 2, 7, lay.task_tgid),               # r2 = task->tgid
        stx(4, 10, 2, -16),                        # *(u32 *)(fp - 16) = tgid
        stx(4, 10, 9, -12),                        # *(u32 *)(fp - 12) = fd
        st(8, 10, -8, 0),                          # *(u64 *)(fp - 8) = 0
        ldx(8, 3, 8, lay.file_private_data),       # r3 = file->private_data (the bpf_map)
        alu64("add", 3, imm=lay.map_id),           # r3 += offsetof(struct bpf_map, id)
        alu64("mov", 1, src=10),                   # r1 = fp
        alu64("add", 1, imm=-8),                   # r1 -= 8
        alu64("mov", 2, imm=4),                    # r2 = 4
        call(HELPER_PROBE_READ_KERNEL),
        ldx(8, 1, 6, 0),                           # r1 = meta->seq
        alu64("mov", 2, src=10),                   # r2 = fp
        alu64("add", 2, imm=-16),                  # r2 -= 16
        alu64("mov", 3, imm=RECORD.size),          # r3 = 16
        call(HELPER_SEQ_WRITE),
        Label("out"),
        alu64("mov", 0, imm=0),                    # r0 = 0
        exit_insn(),
    ])


# ---- every BPF fd: maps, programs, links and BTF objects, in one walk -------------------
FD_RECORD = struct.Struct("=IIIIII")    # tgid, fd, kind, id, a link's program id, 0
KINDS = {0: "map", 1: "prog", 2: "link", 3: "btf"}


def fds_program(lay: Layout) -> bytes:
    """The iterator program of every BPF fd: for each (task, file) whose f_op->release is
    bpf_map_release, bpf_prog_release, bpf_link_release or btf_release, seq_write (tgid, fd,
    kind, the object's id, a link's program id, 0). Ids are read with probe_read_kernel
    (private_data is a void pointer; a failed read leaves 0)."""
    def read(dst_off: int, size: int) -> list:    # probe_read_kernel(fp + dst_off, size, r3)
        return [alu64("mov", 1, src=10), alu64("add", 1, imm=dst_off),
                alu64("mov", 2, imm=size), call(HELPER_PROBE_READ_KERNEL)]

    def deref(slot: int, off: int) -> list:       # r3 = *(u64 *)(fp + slot) + off
        return [ldx(8, 3, 10, slot), Jump("jeq", 3, "emit"), alu64("add", 3, imm=off)]

    return assemble([
        ldx(8, 6, 1, 0),                           # r6 = ctx->meta
        ldx(8, 7, 1, 8),                           # r7 = ctx->task
        ldx(4, 9, 1, 16),                          # r9 = ctx->fd
        ldx(8, 8, 1, 24),                          # r8 = ctx->file
        Jump("jeq", 7, "out"),
        Jump("jeq", 8, "out"),
        ldx(8, 2, 8, lay.file_f_op),               # r2 = file->f_op
        ldx(8, 3, 2, lay.fops_release),            # r3 = f_op->release
        ldx(4, 2, 7, lay.task_tgid),               # r2 = task->tgid
        stx(4, 10, 2, -24),                        # record: tgid, fd, then zeros
        stx(4, 10, 9, -20),
        st(8, 10, -16, 0),
        st(8, 10, -8, 0),
        ldx(8, 4, 8, lay.file_private_data),       # r4 = file->private_data
        stx(8, 10, 4, -40),                        # kept at fp - 40
        ld_imm64(4, lay.release_addr),
        Jump("jeq", 3, "map", src=4),
        ld_imm64(4, lay.prog_release),
        Jump("jeq", 3, "prog", src=4),
        ld_imm64(4, lay.link_release),
        Jump("jeq", 3, "link", src=4),
        ld_imm64(4, lay.btf_release),
        Jump("jeq", 3, "btf", src=4),
        Jump("ja", 0, "out"),
        Label("map"),                              # kind 0: map->id
        *deref(-40, lay.map_id), *read(-12, 4),
        Jump("ja", 0, "emit"),
        Label("prog"),                             # kind 1: prog->aux->id
        st(4, 10, -16, 1),
        *deref(-40, lay.prog_aux), *read(-32, 8),
        *deref(-32, lay.aux_id), *read(-12, 4),
        Jump("ja", 0, "emit"),
        Label("link"),                             # kind 2: link->id, link->prog->aux->id
        st(4, 10, -16, 2),
        *deref(-40, lay.link_id), *read(-12, 4),
        *deref(-40, lay.link_prog), *read(-32, 8),
        *deref(-32, lay.prog_aux), *read(-32, 8),
        *deref(-32, lay.aux_id), *read(-8, 4),
        Jump("ja", 0, "emit"),
        Label("btf"),                              # kind 3: btf->id
        st(4, 10, -16, 3),
        *deref(-40, lay.btf_id), *read(-12, 4),
        Label("emit"),
        ldx(8, 1, 6, 0),                           # r1 = meta->seq
        alu64("mov", 2, src=10),
        alu64("add", 2, imm=-24),
        alu64("mov", 3, imm=FD_RECORD.size),
        call(HELPER_SEQ_WRITE),
        Label("out"),
        alu64("mov", 0, imm=0),
        exit_insn(),
    ])


def parse_fd_records(data: bytes) -> tuple[list[tuple[int, int, int]], list[tuple]]:
    """((tgid, fd, map id) of the map fds, (tgid, fd, kind, id, program id) of the others)
    from what the iterator of :func:`fds_program` wrote."""
    n = len(data) // FD_RECORD.size
    maps, others = [], []
    for t, f, k, i, p, _ in FD_RECORD.iter_unpack(data[:n * FD_RECORD.size]):
        if k == 0:
            maps.append((t, f, i))
        else:
            others.append((t, f, KINDS.get(k, "?"), i, p))
    return maps, others


def fd_columns(data: bytes) -> tuple[list[int], list[int], list[tuple]]:
    """(pids, map ids) of the map fds, in the iterator's order (pid by pid), and (tgid, fd,
    kind, id, program id) of the others, from what :func:`fds_program` wrote: the columns
    are cut from the bytes at once (a scan of 10,000 maps reads as many records)."""
    n = len(data) // FD_RECORD.size
    words = memoryview(data)[:n * FD_RECORD.size].cast("I")
    step = FD_RECORD.size // 4
    kinds = words[2::step].tolist()
    if not any(kinds):
        return words[0::step].tolist(), words[3::step].tolist(), []
    pids, ids, fds, links = (words[0::step].tolist(), words[3::step].tolist(),
                             words[1::step].tolist(), words[4::step].tolist())
    maps_p, maps_i, others = [], [], []
    for t, f, k, i, p in zip(pids, fds, kinds, ids, links):
        if k == 0:
            maps_p.append(t)
            maps_i.append(i)
        else:
            others.append((t, f, KINDS.get(k, "?"), i, p))
    return maps_p, maps_i, others


def bpf_fds_raw(kept: dict | None = None) -> bytes:
    """The records of every open map, program, link and BTF fd on the host, as the iterator
    of :func:`fds_program` wrote them; :class:`IteratorUnavailable` where it cannot run."""
    if not _in_initial_pid_namespace():
        raise IteratorUnavailable("not in the initial pid namespace (the iterator reports "
                                  "host pids)")
    lay = read_layout()
    if min(lay.prog_aux, lay.aux_id, lay.link_id, lay.link_prog, lay.btf_id) < 0 or not all(
            (lay.prog_release, lay.link_release, lay.btf_release)):
        raise IteratorUnavailable("the kernel's BTF or kallsyms lacks the program, link or "
                                  "BTF fields")
    return run_iterator(fds_program(lay), lay.attach_btf_id, "bpfmem_fds",
                        IteratorUnavailable, "fd", kept)


def parse_records(data: bytes) -> list[tuple[int, int, int]]:
    """(tgid, fd, map id) for each record the iterator wrote."""
    n = len(data) // RECORD.size
    return [(t, f, m) for t, f, m, _ in RECORD.iter_unpack(data[:n * RECORD.size])]


def map_columns(data: bytes) -> tuple[list[int], list[int]]:
    """(pids, map ids) of every record :func:`program` wrote, in its order (pid by pid)."""
    n = len(data) // RECORD.size
    words = memoryview(data)[:n * RECORD.size].cast("I")
    step = RECORD.size // 4
    return words[0::step].tolist(), words[2::step].tolist()


# ---- running it -------------------------------------------------------------------------
def _in_initial_pid_namespace() -> bool:
    try:
        return os.stat("/proc/self/ns/pid").st_ino == PROC_PID_INIT_INO
    except OSError:
        return False


def read_layout() -> Layout:
    """The running kernel's layout, kept in the user's cache per boot (kallsyms addresses
    move with KASLR at every boot)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        st = os.stat(HOST_BTF)
    except OSError as e:
        raise IteratorUnavailable(f"no kernel BTF or boot id ({e.strerror})") from None
    key = f"iter-v2|{boot}|{os.uname().release}|{os.uname().version}|{st.st_size}"
    d = cache.load("iter-layout", key)
    if d is not None:
        try:
            return Layout(**{k: int(d[k]) for k in Layout.__dataclass_fields__})
        except (ValueError, TypeError, KeyError):
            pass
    try:
        with open(HOST_BTF, "rb") as f:
            btf = f.read()
        with open("/proc/kallsyms") as f:
            syms = f.read()
        lay = parse_layout(btf, syms)
    except (OSError, ParseError) as e:
        raise IteratorUnavailable(str(e)) from None
    cache.store("iter-layout", key, asdict(lay))
    return lay


def map_fds() -> list[tuple[int, int, int]]:
    """(tgid, fd, map id) for every open map fd on the host, from the kernel; every fd the
    program, its link and the iterator took is closed again, whatever happens."""
    return parse_records(map_fds_raw())


def map_fds_raw(kept: dict | None = None) -> bytes:
    """The records of :func:`map_fds` as the iterator wrote them (equal bytes: the same map
    fds in the same processes)."""
    if not _in_initial_pid_namespace():
        raise IteratorUnavailable("not in the initial pid namespace (the iterator reports "
                                  "host pids)")
    lay = read_layout()
    return run_iterator(program(lay), lay.attach_btf_id, "bpfmem_owners",
                        IteratorUnavailable, "owner", kept)


def run_iterator(insns: bytes, attach_btf_id: int, name: str, unavailable: type,
                 what: str, kept: dict | None = None) -> bytes:
    """Load an iterator program, attach it, read its whole output; every fd the program, its
    link and the iterator took is closed again, whatever happens. A refusal raises
    ``unavailable`` (naming ``what``). ``kept`` (a dict the caller keeps between runs, e.g.
    the exporter's :class:`~bpfmem.host.rescan.ScanMemo`) keeps the link by ``name``
    instead: the program is loaded and verified once, and later runs only read it (the
    caller closes the links: :func:`close_kept`)."""
    fds: list[int] = []
    try:
        link = kept.get(name) if kept is not None else None
        if link is None:
            try:
                prog = bpfsys.prog_load(bpfsys.BPF_PROG_TYPE_TRACING, insns,
                                        expected_attach_type=bpfsys.BPF_TRACE_ITER,
                                        attach_btf_id=attach_btf_id, name=name)
            except HostError as e:
                raise unavailable(f"loading the {what} iterator: {e}") from None
            fds.append(prog)
            try:
                link = bpfsys.link_create(prog, bpfsys.BPF_TRACE_ITER)
            except HostError as e:
                raise unavailable(f"attaching the {what} iterator: {e}") from None
            if kept is not None:
                kept[name] = link       # the link holds the program
            else:
                fds.append(link)
        try:
            it = bpfsys.iter_create(link)
        except HostError as e:
            raise unavailable(f"attaching the {what} iterator: {e}") from None
        fds.append(it)
        chunks = []
        while True:
            b = os.read(it, 1 << 16)
            if not b:
                break
            chunks.append(b)
    finally:
        for fd in reversed(fds):
            os.close(fd)
    return b"".join(chunks)


def close_kept(kept: dict) -> None:
    """Close the links :func:`run_iterator` kept (their programs go with them)."""
    while kept:
        _name, fd = kept.popitem()
        try:
            os.close(fd)
        except OSError:
            pass
