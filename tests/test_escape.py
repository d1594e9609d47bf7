"""Names from an object reach no output raw: ANSI escapes and control characters never reach
a terminal (nor a pipe), rich markup in a name stays text, and `|` and backticks keep a
Markdown table's columns."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import elfgen
from bpfmem.report.escape import for_terminal, md_code, md_text

SRC = str(Path(__file__).resolve().parent.parent / "src")
EVIL = "ev\x1b[31mil|x`y[bold]z\x07\x9b2J"
SHOWN = "evil|x`y[bold]z"          # what a reader must see of it (controls gone)


@pytest.fixture(scope="module")
def evil_object(tmp_path_factory) -> str:
    p = tmp_path_factory.mktemp("esc") / "evil.o"
    p.write_bytes(elfgen.btf_map_object([(EVIL, {"type": 1, "max_entries": 16}, 4, 4),
                                         ("plain", {"type": 2, "max_entries": 4}, 4, 8)]))
    return str(p)


def _run(*args: str) -> str:
    p = subprocess.run([sys.executable, "-m", "bpfmem", *args], capture_output=True,
                       env=dict(os.environ, PYTHONPATH=SRC, COLUMNS="200"), timeout=60)
    assert b"Traceback" not in p.stderr, p.stderr
    return p.stdout.decode("utf-8", "replace")


def _no_controls(text: str) -> None:
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", text), repr(text[:300])


@pytest.mark.parametrize("argv", [["maps"], ["advise"], ["check", "--limit", "1Gi"]])
def test_terminal_output_has_no_escapes_and_keeps_brackets(evil_object, argv):
    out = _run(argv[0], evil_object, *argv[1:])
    _no_controls(out)
    assert SHOWN in out.replace("…", "")


def _tables(md: str) -> list[list[list[str]]]:
    """Each Markdown table as rows of cells, split on the | that are not escaped."""
    tables, cur = [], []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            cur.append(re.split(r"(?<!\\)\|", line.strip())[1:-1])
        elif cur:
            tables.append(cur)
            cur = []
    return tables


def _table_rows(md: str) -> list[list[str]]:
    return [r for t in _tables(md) for r in t]


@pytest.mark.parametrize("argv", [["maps", "--format", "markdown"],
                                  ["advise", "--format", "markdown"],
                                  ["check", "--limit", "1Gi", "--format", "markdown"]])
def test_markdown_tables_keep_their_columns(evil_object, argv):
    md = _run(argv[0], evil_object, *argv[1:])
    _no_controls(md)
    tables = _tables(md)
    assert any("evil" in c for t in tables for r in t for c in r), md
    for t in tables:                 # every row has as many cells as the header
        assert len({len(r) for r in t}) == 1, md


def test_diff_markdown_keeps_its_columns(evil_object, tmp_path):
    old = tmp_path / "old.o"
    old.write_bytes(elfgen.btf_map_object([("plain", {"type": 2, "max_entries": 4}, 4, 8)]))
    md = _run("diff", str(old), evil_object, "--format", "markdown")
    _no_controls(md)
    rows = [r for r in _table_rows(md) if any("evil" in c for c in r)]
    assert rows and all(len(r) == 6 for r in rows), md


def test_the_rules():
    assert for_terminal(EVIL) == "evil|x`y[bold]z?"      # BEL becomes ?, CSI sequences go
    assert md_code("a|b") == "`a\\|b`"
    assert md_code("a`b") == "`` a`b ``"                  # a fence longer than any run
    assert md_code("``x") == "``` ``x ```"
    assert md_text("<img src=x onerror=y>*") == "\\<img src=x onerror=y>\\*"
