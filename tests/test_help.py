"""Every command's --help fits the terminal: at 80 and 120 columns no line is wider, none
ends in spaces, and the epilog's words all come through in their order (refilled, never
cut or broken twice: a paragraph wrapped by hand at another width is joined first)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bpfmem.cli import NAMES, command
from bpfmem.cli.command import fill_help

SRC = Path(__file__).resolve().parent.parent / "src"


def _help(name: str, columns: int) -> str:
    env = dict(os.environ, COLUMNS=str(columns), PYTHONPATH=str(SRC))
    argv = [sys.executable, "-m", "bpfmem", *([name] if name else []), "--help"]
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("name", ["", *NAMES])
def test_help_fits_the_terminal(name, columns):
    out = _help(name, columns)
    for line in out.splitlines():
        assert len(line) <= columns, f"{name} at {columns}: {line!r}"
        assert line == line.rstrip(), f"{name} at {columns}: trailing spaces: {line!r}"
    if name:
        cmd = command(name)
        for text in filter(None, (cmd.epilog, cmd.description)):
            # every word of the text, in order (argparse may fill %-escapes: none here)
            words = text.split()
            assert " ".join(out.split()).find(" ".join(words[:12])) >= 0, name
            got = " ".join(out.split())
            assert " ".join(words) in got, f"{name}: the epilog lost or reordered words"


def test_a_hand_wrapped_paragraph_is_refilled_not_broken_twice():
    text = ("what you see:\n"
            "  Every byte of the file labelled once: the parts add up to the file size. A\n"
            "  binary's text is resident in every pod that runs it, and more words here.\n"
            "\n"
            "examples:\n"
            "  bpfmem size diff old/agent new/agent --format markdown      a pull-request comment\n"
            "  bpfmem check ./agent --max-binary-size 40Mi                 CI gate (exit 1 if over,\n"
            "                                                              3 if unreadable)\n")
    out = fill_help(text, 60)
    assert all(len(x) <= 60 for x in out)
    assert out[1].startswith("  Every byte") and out[2].startswith("  ") and \
        not out[2].startswith("   ")                   # one indent: no ragged continuation
    assert "  bpfmem check ./agent --max-binary-size 40Mi" in out
    assert "      CI gate (exit 1 if over, 3 if unreadable)" in out
    assert fill_help(text, 200)[1].endswith("file size. A")   # fits: kept as written
