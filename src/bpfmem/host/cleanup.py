"""The one cleanup mechanism of the commands that create state on the host (``measure``'s
scratch cgroups and probe directory, ``pod --trace -- CMD``'s cgroup and command).

* Every scratch cgroup and temporary directory is named ``bpfmem-<kind>-<pid>-<random>``
  with the pid of the bpfmem process that made it (:func:`scratch_name`).
* SIGTERM and SIGHUP end a command as Ctrl-C does (:func:`signals_interrupt`): the
  ``finally`` blocks that remove the state run.
* A child bpfmem starts (the probe, the traced command) gets SIGKILL when bpfmem dies, even
  by SIGKILL (:func:`die_with_parent`, ``PR_SET_PDEATHSIG``).
* What a SIGKILLed run could not remove, the next run finds by name and removes
  (:func:`sweep_leftovers`): cgroups and directories whose pid no longer exists; processes
  still in such a cgroup (a traced command's children) are killed by pid.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager

try:    # the C module under signal: importing signal makes an enum of every signal, handler
    import _signal as signal   # and mask (3.5 M instructions, a start-up's tenth)
except ImportError:  # pragma: no cover - an interpreter without it
    import signal

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Iterator
    from pathlib import Path

__all__ = ["scratch_name", "signals_interrupt", "die_with_parent", "sweep_leftovers",
           "SCRATCH_KINDS"]

SCRATCH_KINDS = ("measure", "trace", "pod", "probe", "vm")
_NAME = r"^bpfmem-(%s)-(\d+)-[0-9a-z_]+(-flush)?$" % "|".join(SCRATCH_KINDS)  # re (sweeps)
_PR_SET_PDEATHSIG = 1


def scratch_name(kind: str) -> str:
    """``bpfmem-<kind>-<this pid>-<random>``: the name the next run can attribute."""
    assert kind in SCRATCH_KINDS
    import secrets   # (hashlib, OpenSSL): not for the commands that only need the signals
    return f"bpfmem-{kind}-{os.getpid()}-{secrets.token_hex(4)}"


def _raise_interrupt(signum, _frame):
    from signal import Signals
    raise KeyboardInterrupt(Signals(signum).name)


@contextmanager
def signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt (in the main thread) while inside."""
    try:
        old = {s: signal.signal(s, _raise_interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    except ValueError:     # not the main thread: only the main thread has signal handlers
        yield
        return
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def die_with_parent(parent: int) -> None:
    """For ``preexec_fn``: the child gets SIGKILL when ``parent`` (bpfmem) dies; if it has
    already died, the child exits at once."""
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(137)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists. A live process keeps its state (even when its pid was
    reused after a crash: the leftover then waits for that process to end)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _cgroup_roots() -> list[Path]:
    from pathlib import Path
    roots = []
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 4:
                    continue
                if parts[2] == "cgroup2" or (parts[2] == "cgroup"
                                             and "memory" in parts[3].split(",")):
                    roots.append(Path(parts[1]))
    except OSError:
        pass
    return roots


def _procs(d: Path) -> list[int]:
    from .walk import walk_tree     # only when there are leftovers to sweep
    pids = []
    for dirpath, _dirs, _files in walk_tree(str(d)):
        try:
            with open(os.path.join(dirpath, "cgroup.procs")) as f:
                pids += [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            pass
    return pids


def _remove_cgroup(d: Path) -> bool:
    deadline = time.monotonic() + 5
    while True:
        for pid in _procs(d):
            try:
                os.kill(pid, signal.SIGKILL)   # a traced command's leftovers, by pid
            except ProcessLookupError:
                pass
        try:
            for sub in sorted((p for p in d.rglob("*") if p.is_dir()), reverse=True):
                sub.rmdir()
            d.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)


def sweep_leftovers(tmp: str | None = None, cgroup_roots: list[Path] | None = None
                    ) -> tuple[list[str], list[str]]:
    """Remove the scratch cgroups and directories of bpfmem runs that are gone (killed
    before they could clean up): ``(removed, failed)`` paths. Needs root for cgroups;
    without it only this user's directories are looked at."""
    import re
    from pathlib import Path
    name = re.compile(_NAME)
    removed: list[str] = []
    failed: list[str] = []
    for root in cgroup_roots if cgroup_roots is not None else _cgroup_roots():
        try:
            entries = list(os.scandir(root))
        except OSError:
            continue
        for e in entries:
            m = name.match(e.name)
            if not m or not e.is_dir(follow_symlinks=False) or _alive(int(m.group(2))):
                continue
            (removed if _remove_cgroup(Path(e.path)) else failed).append(e.path)
    import tempfile
    base = tmp or tempfile.gettempdir()
    try:
        entries = list(os.scandir(base))
    except OSError:
        entries = []
    me = os.geteuid()
    for e in entries:
        m = name.match(e.name)
        if not m or _alive(int(m.group(2))):
            continue
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if not e.is_dir(follow_symlinks=False) or st.st_uid != me:
            continue
        import shutil
        shutil.rmtree(e.path, ignore_errors=True)
        (failed if os.path.exists(e.path) else removed).append(e.path)
    return removed, failed
