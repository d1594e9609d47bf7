"""The README's pictures are what the tool draws today: docs/pictures.py run into a scratch
directory gives the committed docs/top.svg, docs/pod-trace.png and docs/seed-report.png
byte for byte (the inputs are fixed: a recorded scan, a recorded trace and the seed objects;
the SVG is text, and headless Chromium renders the same page to the same PNG on this
machine: run twice, the bytes were the same). When a change to the tool changes a picture on
purpose, draw them again and commit them with it:

    .venv/bin/python docs/pictures.py
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_html import CHROMIUM

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PICTURES = ("top.svg", "pod-trace.png", "seed-report.png")

needs_chromium = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                                    reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)")


def test_the_readme_shows_every_picture_the_script_draws():
    readme = (ROOT / "README.md").read_text()
    shown = set(re.findall(r"\]\(docs/([^)]+\.(?:svg|png))\)", readme))
    assert shown == set(PICTURES), shown
    on_disk = {p.name for p in DOCS.iterdir() if p.suffix in (".svg", ".png")}
    assert on_disk == shown, f"pictures in docs/ the README does not show: {on_disk - shown}"
    assert "docs/pictures.py" in readme


@needs_chromium
def test_pictures_are_drawn_again_the_same(tmp_path):
    out = tmp_path / "pictures"
    r = subprocess.run([sys.executable, str(DOCS / "pictures.py"), str(out)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    for name in PICTURES:
        new, old = (out / name).read_bytes(), (DOCS / name).read_bytes()
        assert new == old, (f"docs/{name} is not what docs/pictures.py draws today "
                            f"({len(new)} bytes, committed {len(old)}): run "
                            f".venv/bin/python docs/pictures.py and look at it")
    svg = (out / "top.svg").read_text()
    # units as the tool prints them (Kubernetes quantities), not the MiB of old pictures
    assert "Mi" in svg and "MiB" not in svg
    assert (out / "pod-trace.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_usage_is_refused_in_one_line(tmp_path):
    r = subprocess.run([sys.executable, str(DOCS / "pictures.py"), "a", "b"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
