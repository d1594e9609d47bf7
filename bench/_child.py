"""What the bench scripts share about a child process: one run under GNU time with an
address-space cap (status, wall time, peak RSS, its first stderr line), and stopping a
long-running one (an exporter) by its pid."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def bpfmem_python() -> str:
    """The interpreter the benches run bpfmem with: the checkout's ``.venv`` where there is
    one (what the README's install makes; ``BPFMEM_PYTHON`` names another), else the one
    running the bench. A venv leaves out the base interpreter's site-packages, whose .pth
    files run at every start: on one machine here they imported certifi, 20 ms, which no
    bpfmem user pays and bpftool never does."""
    given = os.environ.get("BPFMEM_PYTHON")
    if given:
        return given
    venv = Path(__file__).resolve().parent.parent / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def measured(argv: list[str], *, limit_gib: float, timeout: float, env: dict
             ) -> tuple[str, float, int, str]:
    """(status, wall seconds, peak RSS bytes, first stderr line) of ``argv`` run under
    ``/usr/bin/time -f %M`` with RLIMIT_AS at ``limit_gib``; status is ``exit N``,
    ``timeout`` or ``killed`` (a signal, or a MemoryError at the cap)."""
    out = tempfile.NamedTemporaryFile("r", prefix="bpfmem-bench-rss-")
    limit = int(limit_gib * (1 << 30))

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    t0 = time.perf_counter()
    p = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", out.name, *argv],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env=env, preexec_fn=cap)
    try:
        _, err = p.communicate(timeout=timeout)
        status = f"exit {p.returncode}"
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        status = "timeout"
    wall = time.perf_counter() - t0
    lines = [ln for ln in out.read().splitlines() if ln.strip()]
    rss = int(lines[-1]) * 1024 if lines and lines[-1].strip().isdigit() else 0
    if "MemoryError" in err or "Command terminated by signal" in err:
        status = "killed"
    first = next((ln for ln in err.splitlines() if ln.strip() and "Command" not in ln), "")
    return status, wall, rss, first


def peak_rss_kib(argv: list[str], *, env: dict, cwd: str | None = None) -> int:
    """The peak RSS (KiB) of one run of ``argv``, output discarded, measured by GNU time.
    Not from the bench's own wait4: a child's ru_maxrss counts the memory of the process it
    was forked from (Linux keeps the larger of the old and new address space's high-water
    mark at exec), so a child of a 28 MiB bench reads at least 28 MiB, whatever it used
    (seen: bpftool and bpfmem snapshot both "28.6 MiB"). /usr/bin/time is a small C
    program: what it adds is about 1 MiB."""
    with tempfile.NamedTemporaryFile("r", prefix="bpfmem-bench-rss-") as out:
        subprocess.run(["/usr/bin/time", "-f", "%M", "-o", out.name, *argv], env=env, cwd=cwd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        lines = [ln for ln in out.read().splitlines() if ln.strip()]
    return int(lines[-1]) if lines and lines[-1].strip().isdigit() else 0


def stop(p: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 10 s: a child this script started, by its pid."""
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
