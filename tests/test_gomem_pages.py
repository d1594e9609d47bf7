"""Who is charged for a Go pod's pages, compared with the kernel's own per-page owner.

Debian's prometheus started inside a scratch memory cgroup after another cgroup read its
binary: the binary's page cache pages are charged to that other cgroup (the first reader),
so the pod's "Go binary pages" must be (about) nothing and the rest "shared, charged
elsewhere". The kernel's count is read here on its own: every present file page of the
executable's mappings (/proc/PID/pagemap) looked up in /proc/kpagecgroup.

Measured here (prometheus 2.42, go1.19.8, Linux 6.18, cgroup v1): 41.0 MiB of the binary
mapped, 0 pages charged to the pod when a reader in another cgroup came first (47.6 MiB of
the file cached, all elsewhere); when the pod itself read it first, 29.1 MiB mapped and 47.6
MiB of the file cached, all charged to the pod (its memory.stat file: 47.63 MiB, of which
0.02 MiB its open files).
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from conftest import is_root
from bpfmem import api
from bpfmem.host import httpget
from bpfmem.host.cgroup import read_cgroup_memory, scratch_cgroup
from bpfmem.host.podscan import launched
from bpfmem.host.smaps import classify_mappings, read_smaps

MiB = 1 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")
EXE = "/usr/bin/prometheus"
HOST = api.profile()
pytestmark = [pytest.mark.kernel,
              pytest.mark.skipif(not is_root(), reason="pagemap PFNs and cgroups need root"),
              pytest.mark.skipif(not os.access(EXE, os.X_OK),
                                 reason="needs Debian's prometheus (tests/run)"),
              pytest.mark.skipif(not os.path.exists("/proc/kpagecgroup"),
                                 reason="kernel without /proc/kpagecgroup (CONFIG_MEMCG)")]


def kernel_owners(pid: int) -> dict[int, int]:
    """pfn -> memcg inode of every present file page of ``pid``'s executable mappings, read
    from pagemap and kpagecgroup directly."""
    exe = os.readlink(f"/proc/{pid}/exe")
    st = os.stat(f"/proc/{pid}/exe")
    maps = read_smaps(pid)
    _c, kinds = classify_mappings(maps, exe, (st.st_dev, st.st_ino), go=True)
    out = {}
    with open(f"/proc/{pid}/pagemap", "rb") as pm, open("/proc/kpagecgroup", "rb") as kc:
        for m, k in zip(maps, kinds):
            if k not in ("binary_text", "binary_rodata", "binary_data"):
                continue
            pm.seek(m.start // PAGE * 8)
            raw = pm.read((m.end - m.start) // PAGE * 8)
            for i in range(0, len(raw), 8):
                e = int.from_bytes(raw[i:i + 8], "little")
                if e >> 63 and (e >> 61) & 1:
                    pfn = e & ((1 << 55) - 1)
                    kc.seek(pfn * 8)
                    out[pfn] = int.from_bytes(kc.read(8), "little")
    return out


def other_prometheus() -> list[int]:
    """prometheus processes running now (another test's, or a real one): their mappings keep
    the binary's pages from being evicted, and from being charged to whoever reads next."""
    out = subprocess.run(["pidof", "prometheus"], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def evict(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def read_in(cg, path: str) -> None:
    """Read ``path`` whole from a process inside cgroup ``cg`` (it is charged there)."""
    subprocess.run(["sh", "-c", f'echo $$ > {cg.fs_path}/cgroup.procs && exec cat "$1"',
                    "sh", path], stdout=subprocess.DEVNULL, check=True, timeout=60)


def free_port() -> int:
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def prometheus(tmp_path, cg_check):
    """Start prometheus in a fresh scratch cgroup, wait until it is ready, hand the job to
    ``cg_check`` (which reads it), stop it."""
    port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 1m\nscrape_configs: []\n")
    argv = [EXE, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]
    with launched(argv, limit=1024 * MiB, stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL) as job:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpget.http_get(f"http://127.0.0.1:{port}/-/ready", timeout=1)
                break
            except Exception:
                if time.monotonic() > deadline or job.exited():
                    raise
                time.sleep(0.2)
        return cg_check(job)


def check(job, *, reader_ino: int | None):
    ino = os.stat(job.cgroup.fs_path).st_ino
    before = kernel_owners(job.pid)
    v = api.pod_view(cgroup=job.cgroup.fs_path, profile=HOST)
    after = kernel_owners(job.pid)
    comps = {c.key: c.bytes for c in v.components}
    d = v.details[job.pid]
    assert d.binary_pages is not None, d.pages_unread
    here_k = [sum(1 for i in k.values() if i == ino) * PAGE for k in (before, after)]
    else_k = [sum(1 for i in k.values() if i != ino) * PAGE for k in (before, after)]
    # the kernel's count of the mapped pages, read before and after the view: the part
    # holds them (within a page) and what the binary has cached beyond them (read ahead,
    # not mapped: also charged by who read it first)
    assert comps["binary"] >= min(here_k) - PAGE, (comps, here_k)
    assert v.shared_elsewhere["binary"] >= min(else_k) - PAGE, (v.shared_elsewhere, else_k)
    if max(here_k) <= PAGE:          # none of its mapped pages charged here
        assert comps["binary"] <= os.path.getsize(EXE) // 100, comps
    # and what is charged here is inside the pod's page cache counter (memory.stat)
    cg = read_cgroup_memory(job.cgroup.fs_path)
    assert comps["binary"] <= cg.file + PAGE
    # its open files (the TSDB's WAL, its log) charged here are in that counter too
    assert comps["binary"] + comps["open_files"] <= cg.file + 2 * PAGE
    print("\n" + ", ".join(f"{k} {b / MiB:.2f}" for k, b in comps.items())
          + f"; memory.stat file {cg.file / MiB:.2f} anon {cg.anon / MiB:.2f} MiB; elsewhere "
          + ", ".join(f"{k} {b / MiB:.2f}" for k, b in v.shared_elsewhere.items()))
    assert sum(comps.values()) == v.usage
    if reader_ino is not None:
        to_reader = sum(1 for i in after.values() if i == reader_ino) * PAGE
        return comps, v, to_reader, len(after) * PAGE
    return comps, v, None, len(after) * PAGE


def test_binary_read_by_another_cgroup_first_is_charged_there(tmp_path):
    """A reader in cgroup A reads prometheus's binary first; prometheus then starts in its own
    cgroup B: its binary's pages are A's, and "Go binary pages" of B says so."""
    others = other_prometheus()
    with scratch_cgroup(prefix="bpfmem-test-reader-") as reader:
        evict(EXE)
        read_in(reader, EXE)
        a_file = read_cgroup_memory(reader.fs_path).file
        rino = os.stat(reader.fs_path).st_ino
        comps, v, to_reader, resident = prometheus(
            tmp_path, lambda job: check(job, reader_ino=rino))
    others += other_prometheus()
    assert resident > 5 * MiB
    # the old carve (min(binary resident, page cache)) would have moved the pod's page
    # cache into "binary"; now only pages the kernel charges here are
    assert comps["binary"] <= resident // 10, comps
    if a_file >= os.path.getsize(EXE) // 2 and not others:   # the eviction worked: A
        assert to_reader >= resident * 0.9, (to_reader, resident)       # read it all
    print(f"\nbinary resident {resident / MiB:.1f} MiB: charged to the pod "
          f"{comps['binary'] / MiB:.2f} MiB, to the reader cgroup {to_reader / MiB:.1f} MiB, "
          f"elsewhere in all {v.shared_elsewhere['binary'] / MiB:.1f} MiB")


def test_binary_read_first_by_the_pod_is_charged_to_it(tmp_path):
    """With the binary out of the page cache, prometheus started in its own cgroup reads it
    in itself: its resident binary pages are charged there (whatever eviction could drop)."""
    others = other_prometheus()
    evict(EXE)
    comps, v, _r, resident = prometheus(tmp_path, lambda job: check(job, reader_ino=None))
    others += other_prometheus()
    print(f"\nbinary resident {resident / MiB:.1f} MiB: charged to the pod "
          f"{comps['binary'] / MiB:.1f} MiB, elsewhere "
          f"{v.shared_elsewhere['binary'] / MiB:.1f} MiB")
    # (prometheus still faults its binary in: the view and the reading after it differ by
    # the pages touched in between; the part counts the whole file's cached pages)
    assert comps["binary"] + v.shared_elsewhere["binary"] >= resident * 0.9
    # pages another running prometheus maps cannot be evicted: those stay someone else's
    if not others:
        assert v.shared_elsewhere["binary"] <= resident * 0.1, v.shared_elsewhere
        # everything the pod has cached is its binary or its open files
        assert comps["page_cache"] <= MiB, comps


from test_gomem_live import memdemo, wait_file  # noqa: E402,F401 - the fixture, built once


def write_evicted(path, size: int) -> None:
    """A file of ``size`` bytes written here and dropped from the page cache (so that the
    next reader is charged for it)."""
    with open(path, "wb") as f:
        f.write(os.urandom(size))
        f.flush()
        os.fsync(f.fileno())
    evict(str(path))


def test_open_files_by_who_is_charged(memdemo, tmp_path):
    """A reader in cgroup A reads file F1; a pod B reads F2 and then runs memdemo (a static
    Go binary: no shared libraries) holding both open. "its open and mapped files" of B is
    F2's pages (B read them), F1's pages are shared, charged elsewhere; checked against the
    kernel's page cache counters of A and B (memory.stat). Measured here: 16.0 MiB each,
    to the page."""
    exe, _tmp = memdemo
    f1, f2 = tmp_path / "f1", tmp_path / "f2"
    write_evicted(f1, 16 * MiB)
    write_evicted(f2, 16 * MiB)
    ready = tmp_path / "ready"
    with scratch_cgroup(prefix="bpfmem-test-reader-") as reader:
        read_in(reader, str(f1))
        a_file = read_cgroup_memory(reader.fs_path).file
        cmd = ["sh", "-c", f'cat "$1" > /dev/null; exec "$2" -ready "$3" 3<"$4" 4<"$1"',
               "sh", str(f2), str(exe), str(ready), str(f1)]
        with launched(cmd, limit=512 * MiB) as job:
            wait_file(ready)
            v = api.pod_view(cgroup=job.cgroup.fs_path, profile=HOST, pprof=False)
            b_file = read_cgroup_memory(job.cgroup.fs_path).file
    comps = {c.key: c.bytes for c in v.components}
    assert sum(comps.values()) == v.usage
    print(f"\nA's page cache {a_file / MiB:.2f} MiB, B's {b_file / MiB:.2f} MiB; open files "
          f"charged to B {comps['open_files'] / MiB:.2f} MiB, elsewhere "
          f"{v.shared_elsewhere['open_files'] / MiB:.2f} MiB")
    assert abs(comps["open_files"] - 16 * MiB) <= 2 * PAGE, comps
    assert comps["open_files"] <= b_file + PAGE
    assert abs(v.shared_elsewhere["open_files"] - 16 * MiB) <= 2 * PAGE, v.shared_elsewhere
    assert a_file >= v.shared_elsewhere["open_files"] - PAGE     # A holds those pages
