"""The process figures the exporter serves (``process_*``), read from a /proc under a root:
a captured tree proves the root is honoured for every file (/proc/stat's btime included), the
running process proves the figures against what the kernel says elsewhere."""

from __future__ import annotations

import os
import resource
import time

from bpfmem.host import procfs


def _tree(tmp_path, comm="a) b (c", btime=1700000000):
    pid = tmp_path / "proc" / "42"
    (pid / "fd").mkdir(parents=True)
    for fd in range(3):
        (pid / "fd" / str(fd)).write_text("")
    fields = ["S"] + [str(i) for i in range(4, 53)]
    fields[14 - 3], fields[15 - 3] = "300", "100"          # utime, stime (ticks)
    fields[22 - 3], fields[23 - 3], fields[24 - 3] = "500", "8192000", "25"
    (pid / "stat").write_bytes(f"42 ({comm}) {' '.join(fields)}\n".encode())
    (pid / "limits").write_text(
        "Limit                     Soft Limit           Hard Limit           Units     \n"
        "Max open files            1024                 524288               files     \n")
    (tmp_path / "proc" / "stat").write_text(f"cpu  1 2 3\nbtime {btime}\nprocesses 9\n")
    return tmp_path


def test_process_stats_come_from_the_root_given(tmp_path):
    root = _tree(tmp_path)
    ticks, page = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")
    st = procfs.read_process_stats(42, root)
    assert st == procfs.ProcessStats(
        virtual=8192000, resident=25 * page, start_time=1700000000 + 500 / ticks,
        cpu_seconds=400 / ticks, open_fds=3, max_fds=1024)
    # the boot time is the root's: another btime moves the start time by as much
    (tmp_path / "proc" / "stat").write_text("btime 1600000000\n")
    assert procfs.read_process_stats(42, root).start_time == 1600000000 + 500 / ticks


def test_missing_parts_are_none_not_zero(tmp_path):
    root = _tree(tmp_path)
    (tmp_path / "proc" / "stat").unlink()
    (tmp_path / "proc" / "42" / "limits").write_text("Max open files  unlimited unlimited\n")
    st = procfs.read_process_stats(42, root)
    assert st.start_time is None and st.max_fds is None and st.open_fds is None
    assert st.virtual == 8192000
    assert procfs.read_process_stats(43, root) == procfs.ProcessStats(None, None, None, None,
                                                                        None, None)
    assert procfs.parse_pid_stat(b"42 (x) S 1 2") is None


def test_own_process_matches_the_kernel():
    st = procfs.read_process_stats()
    with open("/proc/self/status") as f:
        status = {k: v.split()[0] for k, _, v in (line.partition(":") for line in f)
                  if k in ("VmRSS", "VmSize")}
    assert abs(st.resident - int(status["VmRSS"]) * 1024) < 4 << 20
    assert abs(st.virtual - int(status["VmSize"]) * 1024) < 16 << 20
    assert st.max_fds == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert abs(st.open_fds - len(os.listdir("/proc/self/fd"))) <= 1   # (listdir's own fd)
    assert 0 < time.time() - st.start_time < 3600
    used = resource.getrusage(resource.RUSAGE_SELF)
    assert abs(st.cpu_seconds - (used.ru_utime + used.ru_stime)) < 0.1
