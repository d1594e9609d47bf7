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


def test_batch_size_follows_the_byte_budget():
    assert bpfsys.batch_size_for(4, 8) == 1024
    assert bpfsys.batch_size_for(4, 1 << 20) == 0          # 1 MiB values: walk keys
    assert bpfsys.batch_size_for(4, 16 << 10) == 255        # 4 MiB / (16 KiB + 4)
    n = bpfsys.batch_size_for(4, 40 * 64)                   # a per-CPU value on 64 CPUs
    assert n * (4 + 40 * 64) <= bpfsys.BATCH_BUDGET


def _peak_rss_kib(args: list[str]) -> tuple[int, str]:
    """(peak RSS of the child in KiB, its stdout) for ``bpfmem ARGS``, measured by wait4 on
    exactly that child (not the maximum over every child this test run ever had)."""
    import subprocess
    import sys
    import tempfile
    from pathlib import Path
    src = str(Path(__file__).resolve().parent.parent / "src")
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen([sys.executable, "-m", "bpfmem", *args], stdout=out,
                             stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=src))
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        assert p.returncode == 0
        out.seek(0)
        return usage.ru_maxrss, out.read().decode()


def _exporter_peak(ids: dict[int, int]) -> tuple[int, dict[int, int]]:
    """(VmHWM KiB of `bpfmem export --entries` after two scans and scrapes, the entries it
    served for the maps ``ids``)."""
    import re
    import signal
    import socket
    import subprocess
    import sys
    import time
    import urllib.request
    from pathlib import Path
    src = str(Path(__file__).resolve().parent.parent / "src")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen([sys.executable, "-m", "bpfmem", "export", "--entries", "--no-pins",
                          "--interval", "1s", "--time-bound", "5s", "--listen",
                          f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=src))
    try:
        assert "serving" in p.stderr.readline()
        for _ in range(2):
            time.sleep(1.1)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
                body = r.read().decode()
        served = {}
        for m in re.finditer(r'^bpfmem_map_entries\{[^}]*\bid="(\d+)"[^}]*\} (\S+)$', body,
                             re.M):
            if int(m.group(1)) in ids:
                served[int(m.group(1))] = int(float(m.group(2)))
        status = Path(f"/proc/{p.pid}/status").read_text()
        return int(re.search(r"VmHWM:\s+(\d+)", status).group(1)), served
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(15)


def test_snapshot_entries_stays_bounded_on_a_map_of_1mib_values():
    """The exporter's DaemonSet runs with --entries and a 128 MiB limit: a hash map of 1 MiB
    values (and a per-CPU hash of 32 KiB values) must not make the count allocate
    value_size x 1024. The count is checked against the entries put in."""
    import json
    big = bpfsys.map_create(T.HASH, 4, 1 << 20, 16, 0, "bs_big_values")
    cpus = host_possible_cpus()
    pcpu = bpfsys.map_create(T.PERCPU_HASH, 4, 32 << 10, 64, 0, "bs_big_pcpu")
    try:
        for i in range(10):
            bpfsys.map_update(big, struct.pack("<I", i), bytes([i]) * (1 << 20))
        for i in range(40):
            bpfsys.map_update(pcpu, struct.pack("<I", i), bytes((32 << 10) * cpus))
        ids = {bpfsys.map_info(big).id: 10, bpfsys.map_info(pcpu).id: 40}
        base, _ = _peak_rss_kib(["snapshot", "--format", "json", "--no-pins"])
        peak, text = _peak_rss_kib(["snapshot", "--entries", "--format", "json", "--no-pins",
                                    "--time-bound", "5s"])
        counted = {m["id"]: m["entries"] for m in json.loads(text)["maps"] if m["id"] in ids}
        hwm, served = _exporter_peak(ids)
        print(f"peak RSS: snapshot {base} KiB, snapshot --entries {peak} KiB, export "
              f"--entries after two scrapes {hwm} KiB (budget "
              f"{bpfsys.BATCH_BUDGET >> 10} KiB)")
        assert counted == ids and served == ids
        # counting adds at most the batch budget (plus allocator slack), never 1 GiB
        assert peak - base < (bpfsys.BATCH_BUDGET >> 10) + 16 * 1024
        assert hwm < 128 * 1024      # the DaemonSet's limit
    finally:
        os.close(big)
        os.close(pcpu)


def test_info_by_id_closes_its_fd_and_says_gone():
    """map_info_by_id (and its program, BTF and link siblings, the same door): the info a fd
    of the caller's gives, no fd left open, ObjectGone once the object is gone."""
    fd = bpfsys.map_create(T.ARRAY, 4, 8, 4, 0, "byid_test")
    try:
        info = bpfsys.map_info(fd)
        before = len(os.listdir("/proc/self/fd"))
        assert bpfsys.map_info_by_id(info.id) == info
        assert len(os.listdir("/proc/self/fd")) == before
    finally:
        os.close(fd)
    with pytest.raises(ObjectGone):
        bpfsys.map_info_by_id(info.id)
