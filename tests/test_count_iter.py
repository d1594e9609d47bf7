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
    assert count_iter.ITERATOR_NAME not in names


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


def _int_btf() -> bytes:
    """A BTF blob of one type, ``int`` (4 bytes, signed): a map's key and value type."""
    strings = b"\0int\0"
    types = struct.pack("<III", 1, 1 << 24, 4) + struct.pack("<I", (1 << 24) | 32)
    header = struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(types), len(types),
                         len(strings))
    return header + types + strings


def test_the_map_iterator_reports_what_bpf_map_info_and_fdinfo_report():
    """Every field the listing takes from the kernel's struct bpf_map (id, type, sizes,
    flags, map_extra, BTF id, name, frozen) equals BPF_OBJ_GET_INFO_BY_FD and fdinfo, on
    maps with a BTF, a map_extra (bloom filter), flags, a frozen map, a map-in-map and a
    nameless map."""
    try:
        count_iter.map_infos_raw()
    except count_iter.CountsUnavailable as e:
        pytest.skip(f"no map iterator here: {e}")
    from bpfmem.host.live import _self_fdinfo
    prefix = f"mi{os.getpid() % 1000}_"
    fds = []
    btf = bpfsys.btf_load(_int_btf())
    try:
        fds.append(bpfsys.map_create(T.ARRAY, 4, 4, 8, 0, prefix + "btf", btf_fd=btf,
                                     btf_key_type_id=1, btf_value_type_id=1))
        fds.append(bpfsys.map_create(T.BLOOM_FILTER, 0, 8, 100, 0, prefix + "bloom",
                                     map_extra=3))
        fds.append(bpfsys.map_create(T.HASH, 8, 8, 16, 1, prefix + "nopre"))
        frozen = bpfsys.map_create(T.ARRAY, 4, 8, 4, 0, prefix + "frozen")
        bpfsys.map_freeze(frozen)
        fds.append(frozen)
        fds.append(bpfsys.map_create(T.HASH, 4, 4, 4, 0, ""))
        fds.append(bpfsys.map_create(T.ARRAY_OF_MAPS, 4, 4, 2, 0, prefix + "outer",
                                     inner_map_fd=fds[2]))
        raw = count_iter.map_infos_raw()
        assert raw and len(raw) % count_iter.RECORD.size == 0
        by_id = {r[0]: r for r in count_iter.records(raw)}
        for fd in fds:
            info = bpfsys.map_info(fd)
            _memlock, frozen_flag = _self_fdinfo(fd)
            rec = by_id[info.id]
            assert rec[:9] == (info.id, info.type, info.key_size, info.value_size,
                               info.max_entries, info.map_flags, info.map_extra,
                               info.btf_id, int(frozen_flag)), info
            assert rec[10].rstrip(b"\0").decode() == info.name
        got = {by_id[bpfsys.map_info(fd).id][10].rstrip(b"\0").decode(): by_id[
            bpfsys.map_info(fd).id] for fd in fds}
        assert got[prefix + "btf"][7] == bpfsys.map_info(fds[0]).btf_id > 0
        assert got[prefix + "bloom"][6] == 3 and got[prefix + "frozen"][8] == 1
        # ids in increasing order, as the kernel walks them
        ids = [r[0] for r in count_iter.records(count_iter.map_infos_raw())]
        assert ids == sorted(ids)
    finally:
        for fd in fds:
            os.close(fd)
        os.close(btf)


def test_the_map_layout_of_a_kernel_without_the_kfunc_lists_without_counts():
    """6.1's BTF (committed): the listing's layout is found, without the count (the program
    then writes -1, which a count never is); the count's own layout is refused."""
    import lzma
    from pathlib import Path
    from bpfmem.errors import ParseError
    btf = lzma.decompress((Path(__file__).parent / "data" / "btf" /
                           "6.1.0-57-cloud-amd64.btf.xz").read_bytes())
    lay = count_iter.parse_map_layout(btf)
    assert lay.kfunc_btf_id == 0 and lay.attach_btf_id and min(
        lay.map_id, lay.map_type, lay.key_size, lay.value_size, lay.max_entries,
        lay.map_flags, lay.map_extra, lay.btf, lay.btf_id, lay.name, lay.frozen) >= 0
    code = count_iter.program(lay)
    from bpfmem.parse.insn import decode
    insns = decode(code)
    assert any(i.imm == count_iter.NO_COUNT for i in insns)         # the count: -1
    assert not any(i.code == 0x85 and i.src == 2 for i in insns)    # and no kfunc call
    with pytest.raises(ParseError, match="bpf_map_sum_elem_count"):
        count_iter.parse_count_layout(btf)


def test_the_light_listing_is_the_full_listing_cut_to_what_a_rescan_reads():
    """The rescan's light listing (count_iter.map_light_raw: id, frozen flag, and the count of
    the maps whose memlock follows it, or of every counted map) equals the full listing's
    records cut the same way, on hash maps with and without preallocation, an LRU, an array
    and a frozen one."""
    _counts_or_skip()
    prefix = f"li{os.getpid() % 1000}_"
    fds = []
    try:
        for i, (t, flags) in enumerate([(T.HASH, 0), (T.HASH, 1), (T.LRU_HASH, 0),
                                        (T.ARRAY, 0), (T.PERCPU_HASH, 1)]):
            fds.append(bpfsys.map_create(t, 4 if t == T.ARRAY else 8, 8, 32, flags,
                                         f"{prefix}{i}"))
            if t != T.ARRAY:
                bpfsys.map_update(fds[-1], struct.pack("<Q", i),
                                  bytes(8 * (host_possible_cpus() if t == T.PERCPU_HASH
                                             else 1)))
        bpfsys.map_freeze(fds[3])
        ours = {bpfsys.map_info(fd).id for fd in fds}
        for every in (False, True):
            def cut(cols):
                return [c for c in zip(*cols) if c[0] in ours]
            light = cut(count_iter.light_columns(count_iter.map_light_raw(None, every)))
            full = cut(count_iter.full_as_light(count_iter.map_infos_raw(), every))
            assert light == full and len(light) == 5
            counted = {mid for mid, count, _f in light if count >= 0}
            ids = sorted(ours)
            assert (ids[1] in counted and ids[4] in counted and ids[3] not in counted)
            assert (ids[0] in counted) == every and (ids[2] in counted) == every
            assert [f for mid, _c, f in light if mid == ids[3]] == [1]
    finally:
        for fd in fds:
            os.close(fd)
