"""host/bpfsys.py against the kernel: ids, info, errors, entry counting and its time bound."""

from __future__ import annotations

import os
import struct

import pytest

from conftest import is_root

from bpfmem.errors import HostError, ObjectGone
from bpfmem.host import bpfsys, procfs
from bpfmem.host.profile import host_possible_cpus
from bpfmem.uapi import MapType as T

pytestmark = [pytest.mark.kernel,
              pytest.mark.skipif(not is_root(), reason="needs root (CAP_SYS_ADMIN)")]


@pytest.fixture
def hash_map():
    fd = bpfsys.map_create(T.HASH, 4, 8, 5000, 0, "bs_hash")
    for i in range(3000):
        bpfsys.map_update(fd, struct.pack("<I", i), struct.pack("<Q", i))
    yield fd
    os.close(fd)


def test_info_matches_fdinfo_and_ids_list_it(hash_map):
    info = bpfsys.map_info(hash_map)
    fields = procfs.parse_fdinfo(open(f"/proc/self/fdinfo/{hash_map}").read())
    assert (info.id, info.type, info.key_size, info.value_size, info.max_entries,
            info.map_flags, info.name) == (int(fields["map_id"]), int(fields["map_type"]),
                                           4, 8, 5000, 0, "bs_hash")
    assert info.id in set(bpfsys.map_ids())
    fd = bpfsys.map_fd_by_id(info.id)           # read-only by default
    try:
        assert bpfsys.map_info(fd).id == info.id
        with pytest.raises(HostError):           # a read-only fd refuses writes
            bpfsys.map_update(fd, struct.pack("<I", 1), bytes(8))
    finally:
        os.close(fd)


def test_counting_by_batch_and_by_key_walk_agree(hash_map):
    assert bpfsys.count_entries(hash_map, 4, 8) == (3000, True, "batch")
    assert bpfsys.count_entries(hash_map, 4, 8, use_batch=False) == (3000, True, "next_key")
    cpus = host_possible_cpus()
    fd = bpfsys.map_create(T.PERCPU_HASH, 4, 12, 100, 0, "bs_pcpu")
    try:
        for i in range(17):
            bpfsys.map_update(fd, struct.pack("<I", i), bytes(16 * cpus))
        # per-CPU values come back rounded up to 8 bytes, once per possible CPU
        assert bpfsys.count_entries(fd, 4, 16 * cpus) == (17, True, "batch")
    finally:
        os.close(fd)


def test_the_time_bound_cuts_a_count_short(hash_map):
    n, complete, _ = bpfsys.count_entries(hash_map, 4, 8, deadline=0.0, batch=64,
                                          clock=lambda: 1.0)
    assert not complete and 0 < n < 3000
    n, complete, _ = bpfsys.count_entries(hash_map, 4, 8, deadline=0.0, use_batch=False,
                                          clock=lambda: 1.0)
    assert not complete and 0 < n < 3000


def test_vanished_ids_and_pins_are_object_gone():
    fd = bpfsys.map_create(T.ARRAY, 4, 4, 1, 0, "bs_gone")
    gone_id = bpfsys.map_info(fd).id
    os.close(fd)
    with pytest.raises(ObjectGone):
        bpfsys.map_fd_by_id(gone_id)
    with pytest.raises(ObjectGone):
        bpfsys.obj_get("/sys/fs/bpf/bpfmem-no-such-pin-%d" % os.getpid())
