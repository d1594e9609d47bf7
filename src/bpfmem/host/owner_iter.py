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
from bpfmem.values import dataclass

from bpfmem.errors import HostError, ParseError
from bpfmem.parse.insn import (Jump, Label, alu64, assemble, call, exit_insn, ld_imm64, ldx, st,
                               stx)

from . import bpfsys, cache

HOST_BTF = "/sys/kernel/btf/vmlinux"
PROC_PID_INIT_INO = 0xEFFFFFFC          # the initial pid namespace's inode number
HELPER_PROBE_READ_KERNEL = 113
HELPER_SEQ_WRITE = 127


def seq_write(at: int, size: int, meta: int = 6) -> list:
    """The instructions of ``bpf_seq_write(meta->seq, fp + at, size)``, with the iterator's
    meta in register ``meta`` (r1 to r3 are the call's): how every iterator program here
    writes a record it built on its stack."""
    return [ldx(8, 1, meta, 0),                 # r1 = meta->seq
            alu64("mov", 2, src=10),            # r2 = fp + at
            alu64("add", 2, imm=at),
            alu64("mov", 3, imm=size),          # r3 = size
            call(HELPER_SEQ_WRITE)]
RECORD = struct.Struct("=16sQQIIII")    # the task's STAMPS; tgid, fd, map id, 0


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
    # each record's stamps of its process (:data:`STAMPS`); -1 where the kernel lacks one
    task_comm: int = -1       # offsetof(struct task_struct, comm)
    task_cgroups: int = -1    # offsetof(struct task_struct, cgroups)
    css_dfl_cgrp: int = -1    # offsetof(struct css_set, dfl_cgrp)
    css_subsys: int = -1      # offsetof(struct css_set, subsys)
    css_cgroup: int = -1      # offsetof(struct cgroup_subsys_state, cgroup)
    cgroup_kn: int = -1       # offsetof(struct cgroup, kn)
    kn_id: int = -1           # offsetof(struct kernfs_node, id)
    memory_cgrp_id: int = -1  # enum cgroup_subsys_id: memory_cgrp_id
    # the task iterator of the processes' activity (:func:`task_stamps_raw`)
    task_iter_btf_id: int = 0  # FUNC bpf_iter_task
    task_pid: int = -1        # offsetof(struct task_struct, pid)
    task_flags: int = -1      # offsetof(struct task_struct, flags)
    task_nvcsw: int = -1      # offsetof(struct task_struct, nvcsw)
    task_nivcsw: int = -1     # offsetof(struct task_struct, nivcsw)
    task_runtime: int = -1    # offsetof(struct task_struct, se.sum_exec_runtime)
    task_on_cpu: int = -1     # offsetof(struct task_struct, on_cpu)


def parse_layout(btf_data: bytes, kallsyms: str) -> Layout:
    """The layout from vmlinux BTF bytes and /proc/kallsyms text (pure)."""
    from bpfmem.parse.btf import ENUM, FUNC, STRUCT, Btf
    btf = Btf(btf_data, section="vmlinux BTF")
    want = {"file": ("f_op", "private_data"), "file_operations": ("release",),
            "task_struct": ("tgid", "comm", "cgroups", "pid", "flags", "nvcsw", "nivcsw",
                            "se", "on_cpu"),
            "sched_entity": ("sum_exec_runtime",), "bpf_map": ("id",),
            "bpf_prog": ("aux",), "bpf_prog_aux": ("id",), "bpf_link": ("id", "prog"),
            "btf": ("id",), "css_set": ("dfl_cgrp", "subsys"),
            "cgroup_subsys_state": ("cgroup",), "cgroup": ("kn",), "kernfs_node": ("id",)}
    required = {"file.f_op", "file.private_data", "file_operations.release",
                "task_struct.tgid", "bpf_map.id"}
    offsets: dict[str, int] = {}
    func_id = task_func = 0
    memory_cgrp_id = -1
    for tid in range(1, btf.count):
        kind = btf.kind(tid)
        if kind == ENUM and memory_cgrp_id < 0 and btf.name_of(tid) == "cgroup_subsys_id":
            memory_cgrp_id = next((v.value for v in btf.type(tid).enum_values
                                   if v.name == "memory_cgrp_id"), -1)
        elif kind == STRUCT:
            name = btf.name_of(tid)
            if name in want and not any(k.startswith(name + ".") for k in offsets):
                for m in btf.type(tid).members:
                    if m.name in want[name]:
                        if m.bitfield_size or m.bit_offset % 8:
                            raise ParseError(f"{name}.{m.name} is a bit field")
                        offsets[f"{name}.{m.name}"] = m.bit_offset // 8
        elif kind == FUNC and btf.name_of(tid) in ("bpf_iter_task_file", "bpf_iter_task"):
            if btf.name_of(tid) == "bpf_iter_task_file":
                func_id = func_id or tid
            else:
                task_func = task_func or tid
    missing = sorted(required - offsets.keys())
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
                  addrs["bpf_prog_release"], addrs["bpf_link_release"], addrs["btf_release"],
                  offsets.get("task_struct.comm", -1), offsets.get("task_struct.cgroups", -1),
                  offsets.get("css_set.dfl_cgrp", -1), offsets.get("css_set.subsys", -1),
                  offsets.get("cgroup_subsys_state.cgroup", -1),
                  offsets.get("cgroup.kn", -1), offsets.get("kernfs_node.id", -1),
                  memory_cgrp_id, task_func, offsets.get("task_struct.pid", -1),
                  offsets.get("task_struct.flags", -1), offsets.get("task_struct.nvcsw", -1),
                  offsets.get("task_struct.nivcsw", -1),
                  offsets["task_struct.se"] + offsets["sched_entity.sum_exec_runtime"]
                  if "task_struct.se" in offsets and "sched_entity.sum_exec_runtime" in offsets
                  else -1, offsets.get("task_struct.on_cpu", -1))


# ---- a record's stamps of its process ---------------------------------------------------
# Every record begins with the comm of the task whose file it is and two cgroup ids of that
# task: its cgroup on the default (v2) hierarchy and the cgroup of its memory controller's
# state (v1 or v2), each the kernfs node id (64 bits, never reused while the kernel runs).
# Equal stamps: the process's /proc/PID/comm and the cgroups /proc/PID/cgroup names are
# the same (a cgroup renamed keeps its id: that waits for the scanner's next check of that
# process, host/rescan.py). A
# kernel whose BTF lacks a field writes 0 there (then the stamps say nothing).
STAMPS = struct.Struct("=16sQQ")


def has_stamps(lay: Layout) -> bool:
    return min(lay.task_comm, lay.task_cgroups, lay.css_dfl_cgrp, lay.cgroup_kn,
               lay.kn_id) >= 0


def _stamps(lay: Layout, at: int) -> list:
    """Instructions writing STAMPS at fp + ``at`` for the task in r7 (r2-r4 scratch)."""
    if not has_stamps(lay):
        return [st(8, 10, at + i, 0) for i in range(0, STAMPS.size, 8)]
    out = [ldx(8, 2, 7, lay.task_comm), stx(8, 10, 2, at),          # task->comm
           ldx(8, 2, 7, lay.task_comm + 8), stx(8, 10, 2, at + 8),
           st(8, 10, at + 16, 0), st(8, 10, at + 24, 0),
           ldx(8, 3, 7, lay.task_cgroups),                          # r3 = task->cgroups
           Jump("jeq", 3, "stamped"),
           ldx(8, 4, 3, lay.css_dfl_cgrp),                          # ->dfl_cgrp->kn->id
           Jump("jeq", 4, "memcg"),
           ldx(8, 4, 4, lay.cgroup_kn),
           Jump("jeq", 4, "memcg"),
           ldx(8, 2, 4, lay.kn_id), stx(8, 10, 2, at + 16),
           Label("memcg")]
    if lay.css_subsys >= 0 and lay.css_cgroup >= 0 and lay.memory_cgrp_id >= 0:
        out += [ldx(8, 4, 3, lay.css_subsys + 8 * lay.memory_cgrp_id),  # subsys[memory]
                Jump("jeq", 4, "stamped"),
                ldx(8, 4, 4, lay.css_cgroup),                           # ->cgroup->kn->id
                Jump("jeq", 4, "stamped"),
                ldx(8, 4, 4, lay.cgroup_kn),
                Jump("jeq", 4, "stamped"),
                ldx(8, 2, 4, lay.kn_id), stx(8, 10, 2, at + 24)]
    out.append(Label("stamped"))
    return out


# ---- the program ------------------------------------------------------------------------
def program(lay: Layout) -> bytes:
    """The iterator program: for each (task, file) whose f_op->release is bpf_map_release,
    seq_write (the task's STAMPS, tgid, fd, map->id, 0)."""
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
        *_stamps(lay, -RECORD.size),               # the stamps, before the ids
        *seq_write(-RECORD.size, RECORD.size),
        Label("out"),
        alu64("mov", 0, imm=0),                    # r0 = 0
        exit_insn(),
    ])


# ---- the processes' activity: which ones can have changed their fd tables -------------
# A process's fd table changes only by its own tasks' doing (open, close, dup, exec, a received
# fd, a fork's child); a task that has not run since a reading has done none of it. The task
# iterator (one call per task, a few hundred on a node, where the file iterator makes one per
# open file) writes each user task's context switches and run time: a process whose tasks
# read the same twice has the same fds, and its records of the file walk stand.
# tgid, pid, nvcsw, nivcsw, se.sum_exec_runtime, then the task's STAMPS (comm and cgroups:
# another process can move it to another cgroup while it sleeps), and whether it is on a CPU
# as it is read: a running task's switches and run time are brought up to date only at the
# scheduler's next tick or switch, so a task on a CPU may have changed its fds since its
# figures last moved (the scanner itself, always)
TASK_RECORD = struct.Struct("=IIQQQ16sQQi4x")
PF_KTHREAD = 0x00200000


def has_task_stamps(lay: Layout) -> bool:
    return lay.task_iter_btf_id > 0 and min(lay.task_pid, lay.task_flags, lay.task_nvcsw,
                                             lay.task_nivcsw, lay.task_runtime) >= 0


def tasks_program(lay: Layout) -> bytes:
    """For each task that is no kernel thread: seq_write (tgid, pid, nvcsw, nivcsw,
    se.sum_exec_runtime, its STAMPS)."""
    at = -TASK_RECORD.size
    return assemble([
        ldx(8, 6, 1, 0),                           # r6 = ctx->meta
        ldx(8, 7, 1, 8),                           # r7 = ctx->task
        Jump("jeq", 7, "out"),
        ldx(4, 2, 7, lay.task_flags),              # kernel threads hold no fds of ours
        Jump("jset", 2, "out", imm=PF_KTHREAD),
        ldx(4, 2, 7, lay.task_tgid), stx(4, 10, 2, at),
        ldx(4, 2, 7, lay.task_pid), stx(4, 10, 2, at + 4),
        ldx(8, 2, 7, lay.task_nvcsw), stx(8, 10, 2, at + 8),
        ldx(8, 2, 7, lay.task_nivcsw), stx(8, 10, 2, at + 16),
        ldx(8, 2, 7, lay.task_runtime), stx(8, 10, 2, at + 24),
        *_stamps(lay, at + 32),
        *([ldx(4, 2, 7, lay.task_on_cpu), stx(4, 10, 2, at + 64)] if lay.task_on_cpu >= 0
          else [st(4, 10, at + 64, 1)]),      # (not known: taken as running)
        st(4, 10, at + 68, 0),
        *seq_write(at, TASK_RECORD.size),
        Label("out"),
        alu64("mov", 0, imm=0),
        exit_insn(),
    ])


def task_stamps_raw(kept: dict | None = None) -> bytes:
    """The TASK_RECORD of every user task on the host, as the iterator wrote them;
    IteratorUnavailable where it cannot run (or the BTF lacks a field)."""
    if not _in_initial_pid_namespace():
        raise IteratorUnavailable("not in the initial pid namespace (the iterator reports "
                                  "host pids)")

    def make():
        lay = read_layout()
        if not has_task_stamps(lay):
            raise IteratorUnavailable("the kernel's BTF lacks the task iterator's fields")
        return tasks_program(lay), lay.task_iter_btf_id
    return run_iterator(make, "bpfmem_tasks", IteratorUnavailable, "task", kept)


def activity(data: bytes) -> dict[int, object]:
    """{tgid: the bytes of its tasks' records} from :func:`task_stamps_raw` (the tasks of a
    process come one after another, by tid); a process with a task on a CPU as it was read
    gets a value equal to no other (its fds may have changed since its figures last moved),
    and so does this process."""
    n = len(data) // TASK_RECORD.size
    size = TASK_RECORD.size
    words = memoryview(data)[:n * size].cast("I")
    tgids = words[0::size // 4].tolist()
    running = {tgids[i] for i, on in enumerate(words[16::size // 4]) if on}
    running.add(os.getpid())
    out: dict[int, object] = {}
    start = 0
    for i in range(1, n + 1):
        if i == n or tgids[i] != tgids[start]:
            out[tgids[start]] = out.get(tgids[start], b"") + data[start * size:i * size]
            start = i
    for tgid in running & out.keys():
        out[tgid] = object()
    return out


# ---- every BPF fd: maps, programs, links and BTF objects, in one walk -------------------
FD_RECORD = struct.Struct("=16sQQIIIIII")  # STAMPS; tgid, fd, kind, id, a link's prog id, 0
KINDS = {0: "map", 1: "prog", 2: "link", 3: "btf"}


def fds_program(lay: Layout) -> bytes:
    """The iterator program of every BPF fd: for each (task, file) whose f_op->release is
    bpf_map_release, bpf_prog_release, bpf_link_release or btf_release, seq_write (the
    task's STAMPS, tgid, fd, kind, the object's id, a link's program id, 0). Ids are read
    with probe_read_kernel (private_data is a void pointer; a failed read leaves 0); fp - 64
    and fp - 72 hold pointers read on the way."""
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
        stx(8, 10, 4, -72),                        # kept at fp - 72
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
        *deref(-72, lay.map_id), *read(-12, 4),
        Jump("ja", 0, "emit"),
        Label("prog"),                             # kind 1: prog->aux->id
        st(4, 10, -16, 1),
        *deref(-72, lay.prog_aux), *read(-64, 8),
        *deref(-64, lay.aux_id), *read(-12, 4),
        Jump("ja", 0, "emit"),
        Label("link"),                             # kind 2: link->id, link->prog->aux->id
        st(4, 10, -16, 2),
        *deref(-72, lay.link_id), *read(-12, 4),
        *deref(-72, lay.link_prog), *read(-64, 8),
        *deref(-64, lay.prog_aux), *read(-64, 8),
        *deref(-64, lay.aux_id), *read(-8, 4),
        Jump("ja", 0, "emit"),
        Label("btf"),                              # kind 3: btf->id
        st(4, 10, -16, 3),
        *deref(-72, lay.btf_id), *read(-12, 4),
        Label("emit"),
        *_stamps(lay, -FD_RECORD.size),            # the stamps, before the ids
        *seq_write(-FD_RECORD.size, FD_RECORD.size),
        Label("out"),
        alu64("mov", 0, imm=0),
        exit_insn(),
    ])


def parse_fd_records(data: bytes) -> tuple[list[tuple[int, int, int]], list[tuple]]:
    """((tgid, fd, map id) of the map fds, (tgid, fd, kind, id, program id) of the others)
    from what the iterator of :func:`fds_program` wrote."""
    n = len(data) // FD_RECORD.size
    maps, others = [], []
    for _c, _g, _m, t, f, k, i, p, _ in FD_RECORD.iter_unpack(data[:n * FD_RECORD.size]):
        if k == 0:
            maps.append((t, f, i))
        else:
            others.append((t, f, KINDS.get(k, "?"), i, p))
    return maps, others


def fd_columns(data: bytes) -> tuple[list[int], list[int], list[tuple], dict | None]:
    """(pids, map ids) of the map fds, in the iterator's order (pid by pid), (tgid, fd,
    kind, id, program id) of the others, and each process's STAMPS (:func:`pid_stamps`),
    from what :func:`fds_program` wrote: the columns are cut from the bytes at once (a scan
    of 10,000 maps reads as many records)."""
    n = len(data) // FD_RECORD.size
    words = memoryview(data)[:n * FD_RECORD.size].cast("I")
    step = FD_RECORD.size // 4
    at = STAMPS.size // 4                  # the words after the stamps
    kinds = words[at + 2::step].tolist()
    pids = words[at::step].tolist()
    stamps = pid_stamps(data, FD_RECORD.size, pids)
    if not any(kinds):
        return pids, words[at + 3::step].tolist(), [], stamps
    from itertools import compress
    from operator import not_
    ids = words[at + 3::step].tolist()
    maps = list(map(not_, kinds))           # the map records' mask
    other = [i for i, k in enumerate(kinds) if k]
    fds, links = words[at + 1::step], words[at + 4::step]
    others = [(pids[i], fds[i], KINDS.get(kinds[i], "?"), ids[i], links[i]) for i in other]
    return list(compress(pids, maps)), list(compress(ids, maps)), others, stamps


def pid_stamps(data: bytes, size: int, pids: list[int]) -> dict[int, bytes] | None:
    """{pid: its STAMPS bytes} from records of ``size`` bytes whose pids are ``pids`` (in
    record order), the first record of each process; None when the kernel wrote none."""
    if not data or not any(data[STAMPS.size - 16:STAMPS.size]):
        return None
    first = dict(zip(reversed(pids), range(len(pids) - 1, -1, -1)))   # (the last one wins)
    return {p: data[i * size:i * size + STAMPS.size] for p, i in sorted(
        first.items(), key=lambda pi: pi[1])}


def bpf_fds_raw(kept: dict | None = None, pid: int | None = None) -> bytes:
    """The records of every open map, program, link and BTF fd on the host (or of process
    ``pid`` only: 6.1+), as the iterator of :func:`fds_program` wrote them;
    :class:`IteratorUnavailable` where it cannot run."""
    if not _in_initial_pid_namespace():
        raise IteratorUnavailable("not in the initial pid namespace (the iterator reports "
                                  "host pids)")
    def make():
        lay = read_layout()
        if min(lay.prog_aux, lay.aux_id, lay.link_id, lay.link_prog, lay.btf_id) < 0 or \
                not all((lay.prog_release, lay.link_release, lay.btf_release)):
            raise IteratorUnavailable("the kernel's BTF or kallsyms lacks the program, link "
                                      "or BTF fields")
        return fds_program(lay), lay.attach_btf_id
    return run_iterator(make, "bpfmem_fds", IteratorUnavailable, "fd", kept,
                        task=None if pid is None else struct.pack("=III", 0, pid, 0),
                        size=FD_RECORD.size)


def parse_records(data: bytes) -> list[tuple[int, int, int]]:
    """(tgid, fd, map id) for each record the iterator wrote."""
    n = len(data) // RECORD.size
    return [(t, f, m) for _c, _g, _m, t, f, m, _ in RECORD.iter_unpack(data[:n * RECORD.size])]


def map_columns(data: bytes) -> tuple[list[int], list[int], dict | None]:
    """(pids, map ids) of every record :func:`program` wrote, in its order (pid by pid),
    and each process's STAMPS (:func:`pid_stamps`)."""
    n = len(data) // RECORD.size
    words = memoryview(data)[:n * RECORD.size].cast("I")
    step, at = RECORD.size // 4, STAMPS.size // 4
    pids = words[at::step].tolist()
    return pids, words[at + 2::step].tolist(), pid_stamps(data, RECORD.size, pids)


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
    key = f"iter-v4|{boot}|{os.uname().release}|{os.uname().version}|{st.st_size}"

    def build() -> Layout:
        try:
            with open(HOST_BTF, "rb") as f:
                btf = f.read()
            with open("/proc/kallsyms") as f:
                syms = f.read()
            return parse_layout(btf, syms)
        except (OSError, ParseError) as e:
            raise IteratorUnavailable(str(e)) from None
    return cache.layout("iter-layout", key, Layout, build)


def map_fds() -> list[tuple[int, int, int]]:
    """(tgid, fd, map id) for every open map fd on the host, from the kernel; every fd the
    program, its link and the iterator took is closed again, whatever happens."""
    return parse_records(map_fds_raw())


def map_fds_raw(kept: dict | None = None, pid: int | None = None) -> bytes:
    """The records of :func:`map_fds` as the iterator wrote them (equal bytes: the same map
    fds in the same processes), or of process ``pid``'s only (6.1+)."""
    if not _in_initial_pid_namespace():
        raise IteratorUnavailable("not in the initial pid namespace (the iterator reports "
                                  "host pids)")
    def make():
        lay = read_layout()
        return program(lay), lay.attach_btf_id
    return run_iterator(make, "bpfmem_owners", IteratorUnavailable, "owner", kept,
                        task=None if pid is None else struct.pack("=III", 0, pid, 0),
                        size=RECORD.size)


def run_iterator(make, name: str, unavailable: type, what: str, kept: dict | None = None,
                 loaded=None, task: bytes | None = None, size: int = 0) -> bytes:
    """Load an iterator program (``make()`` gives its instructions and the BTF id it
    attaches to: the kernel's layout is read only for a load), attach it, read its whole
    output; every fd the program, its link and the iterator took is closed again, whatever
    happens. A refusal raises ``unavailable`` (naming ``what``). ``kept`` (a dict the caller
    keeps between runs, e.g. the exporter's :class:`~bpfmem.host.rescan.ScanMemo`) keeps the
    program and its link by ``name`` instead: the program is loaded and verified once, and
    later runs only read it (the caller closes them: :func:`close_kept`). ``loaded`` is
    called with the program's fd when it is loaded. ``task`` (a bpf_iter_link_info's task
    part: tid, pid, pid_fd) attaches a link of its own, for those tasks only (6.1+); when
    they are this process's, the record of that link's own fd (``size`` bytes a record,
    the file iterator's: STAMPS, tgid, fd, ...) is left out: a link made for one read, whose
    id would be new at every read."""
    fds: list[int] = []
    own_link = -1
    try:
        link = kept.get(name) if kept is not None and task is None else None
        if link is None:
            prog = kept.get(name + ":prog") if kept is not None else None
            if prog is None:
                insns, attach_btf_id = make()
                try:
                    prog = bpfsys.prog_load(bpfsys.BPF_PROG_TYPE_TRACING, insns,
                                            expected_attach_type=bpfsys.BPF_TRACE_ITER,
                                            attach_btf_id=attach_btf_id, name=name)
                except HostError as e:
                    raise unavailable(f"loading the {what} iterator: {e}") from None
                if kept is not None:
                    kept[name + ":prog"] = prog
                else:
                    fds.append(prog)
                if loaded is not None:
                    loaded(prog)
            try:
                link = bpfsys.link_create(prog, bpfsys.BPF_TRACE_ITER, iter_info=task)
            except HostError as e:
                raise unavailable(f"attaching the {what} iterator: {e}") from None
            if kept is not None and task is None:
                kept[name] = link
            else:
                fds.append(link)
                own_link = link
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
    data = b"".join(chunks)
    if task is not None and size and own_link >= 0 and \
            struct.unpack_from("=I", task, 4)[0] == os.getpid():
        at = STAMPS.size
        me = struct.pack("=II", os.getpid(), own_link)
        data = b"".join(data[i:i + size] for i in range(0, len(data), size)
                        if data[i + at:i + at + 8] != me)
    return data


def close_kept(kept: dict) -> None:
    """Close the programs and links :func:`run_iterator` kept."""
    while kept:
        _name, fd = kept.popitem()
        try:
            os.close(fd)
        except OSError:
            pass
