"""Pictures of HTML pages: a self-contained page rendered to a PNG by headless Chromium (the
same engine that shows the page), offline."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile

from ..errors import HostError, UnsupportedError
from ..outputs import copy_to_output


def _chromium() -> str | None:
    for c in (os.environ.get("BPFMEM_CHROMIUM"), shutil.which("chromium"),
              shutil.which("chromium-browser"), shutil.which("google-chrome")):
        if c and os.access(c, os.X_OK):
            return c
    return None


def screenshot_html(html: str, png_path: str, *, width: int, height: int,
                    timeout: float = 60) -> None:
    """Render a self-contained HTML page to a PNG with headless Chromium (the same engine
    that shows the --plot .html), offline: the page loads nothing from anywhere."""
    exe = _chromium()
    if exe is None:
        raise UnsupportedError("a PNG plot needs Chromium (apt-get install chromium, or "
                               "BPFMEM_CHROMIUM=/path); --plot FILE.html needs nothing")
    tmp = tempfile.mkdtemp(prefix="bpfmem-plot-")
    try:
        page = os.path.join(tmp, "plot.html")
        with open(page, "w", encoding="utf-8") as f:
            f.write(html)
        out = os.path.join(tmp, "plot.png")
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--disable-quic", "--no-first-run", "--disable-extensions",
               "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--mute-audio",
               "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={tmp}/profile",
               f"--window-size={int(width)},{int(height)}", "--virtual-time-budget=5000",
               f"--screenshot={out}", "file://" + page]
        try:
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, start_new_session=True)
        except OSError as e:
            raise HostError(f"cannot run {exe}: {e.strerror or e}") from None
        try:
            _out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)   # the browser we started and its helpers
            p.wait()
            raise HostError(f"{exe} did not render the plot within {timeout:g}s") from None
        if not os.path.exists(out) or os.path.getsize(out) == 0:
            tail = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise HostError(f"{exe} made no PNG: {tail[0]}")
        copy_to_output(out, png_path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
