"""The kernel's own entry counts (host/count_iter.py: a bpf_map iterator calling
bpf_map_sum_elem_count) against counting the entries by walking the keys, on real maps of
every hash type, after inserts, deletes, overwrites and LRU evictions; the iterator leaves
no program, link or fd behind."""

from __future__ import annotations

import errno
import os
import struct

import pytest

from conftest import is_root

from bpfmem.errors import HostError
from bpfmem.host import bpfsys, count_iter
from bpfmem.host.profile import host_possible_cpus
from bpfmem.uapi import MapType as T

pytestmark = [pytest.mark.kernel,
              pytest.mark.skipif(not is_root(), reason="needs root (CAP_SYS_ADMIN)")]


def _counts_or_skip():
    try:
        return count_iter.map_counts()
    except count_iter.CountsUnavailable as e:
        pytest.skip(f"no in-kernel counts here: {e}")


def _walk(fd: int, key_size: int, value_size: int) -> int:
    n, complete, _how = bpfsys.count_entries(fd, key_size, value_size, deadline=None)
    assert complete
    return n


def test_kernel_counts_equal_walked_counts():
    _counts_or_skip()
    cpus = host_possible_cpus()
    plans = [(T.HASH, 0, 500), (T.HASH, 1, 500), (T.PERCPU_HASH, 0, 300),
             (T.PERCPU_HASH, 1, 300), (T.LRU_HASH, 0, 256), (T.LRU_PERCPU_HASH, 0, 256),
             (T.LRU_HASH, 2, 256)]                      # 2: BPF_F_NO_COMMON_LRU
    fds = []
    try:
        for i, (t, flags, max_entries) in enumerate(plans):
            fd = bpfsys.map_create(t, 8, 8, max_entries, flags, f"ci{os.getpid() % 1000}_{i}")
            fds.append((fd, t))
            percpu = t in (T.PERCPU_HASH, T.LRU_PERCPU_HASH)
            vsize = 8 * cpus if percpu else 8
            for k in range(max_entries + 200):          # the LRUs evict, the others refuse
                try:
                    bpfsys.map_update(fd, struct.pack("<Q", k), bytes(vsize))
                except Exception:  # noqa: BLE001 - E2BIG once full
                    pass
            deleted = 0
            for k in range(max_entries + 199, max_entries - 100, -3):   # recent keys: there
                try:
                    bpfsys.map_delete(fd, struct.pack("<Q", k))
                    deleted += 1
                except HostError as e:  # ENOENT: refused when full, or evicted
                    assert e.errno == errno.ENOENT
                try:
                    bpfsys.map_update(fd, struct.pack("<Q", k - 1), bytes(vsize))
                except HostError as e:  # E2BIG: a full preallocated map refuses a new key
                    assert e.errno == errno.E2BIG
            assert deleted
        kernel = count_iter.map_counts()
        for fd, t in fds:
            percpu = t in (T.PERCPU_HASH, T.LRU_PERCPU_HASH)
            walked = _walk(fd, 8, 8 * cpus if percpu else 8)
            assert kernel[bpfsys.map_info(fd).id] == walked, (t, walked)
    finally:
        for fd, _t in fds:
            os.close(fd)


def test_the_iterator_leaves_nothing_behind():
    _counts_or_skip()
    progs = set(bpfsys.prog_ids())
    fds = set(os.listdir("/proc/self/fd"))
    count_iter.map_counts()
    assert set(os.listdir("/proc/self/fd")) == fds
    left = set(bpfsys.prog_ids()) - progs
    names = []
    for pid in left:                   # another test's program may come and go meanwhile
        try:
            pfd = bpfsys.prog_fd_by_id(pid)
        except Exception:  # noqa: BLE001
            continue
        try:
            names.append(bpfsys.prog_info(pfd).name)
        finally:
            os.close(pfd)
    assert "bpfmem_counts" not in names


def test_layout_needs_the_kfunc():
    """A kernel without bpf_map_sum_elem_count (6.1's BTF, committed) is refused with why."""
    import lzma
    from pathlib import Path
    from bpfmem.errors import ParseError
    btf = lzma.decompress((Path(__file__).parent / "data" / "btf" /
                           "6.1.0-57-cloud-amd64.btf.xz").read_bytes())
    with pytest.raises(ParseError, match="bpf_map_sum_elem_count.*6.6"):
        count_iter.parse_count_layout(btf)
    with open(count_iter.HOST_BTF, "rb") as f:
        lay = count_iter.parse_count_layout(f.read())
    assert lay.kfunc_btf_id and lay.attach_btf_id and lay.map_id > 0


def test_a_scan_takes_hash_counts_from_the_kernel_and_agrees_with_walking():
    _counts_or_skip()
    from bpfmem.host.live import scan_maps
    prefix = f"cs{os.getpid() % 1000}_"
    fds = []
    try:
        kinds = [(T.HASH, 8, 0), (T.HASH, 8, 1), (T.LRU_HASH, 8, 0), (T.LPM_TRIE, 12, 1),
                 (T.ARRAY, 4, 0)]
        for i, (t, key, flags) in enumerate(kinds):
            fd = bpfsys.map_create(t, key, 8, 64, flags, f"{prefix}{i}")
            fds.append(fd)
            for k in range(10 + i):
                if t == T.LPM_TRIE:             # prefix length 64, then the address
                    kb = struct.pack("<I", 64) + struct.pack(">Q", k)
                else:
                    kb = struct.pack("<Q", k)[:key]
                bpfsys.map_update(fd, kb, bytes(8))

        def ours(**kw):
            return {m.name: (m.entries, m.entries_method) for m in
                    scan_maps(entries=True, pins=False, owners=False, **kw).maps
                    if m.name.startswith(prefix)}
        fast, walked = ours(), ours(kernel_counts=False)
        assert {n: e for n, (e, _m) in fast.items()} == {n: e for n, (e, _m) in walked.items()}
        assert fast[f"{prefix}0"][1] == fast[f"{prefix}2"][1] == "kernel"
        assert fast[f"{prefix}3"][1] != "kernel" and walked[f"{prefix}0"][1] != "kernel"
    finally:
        for fd in fds:
            os.close(fd)
