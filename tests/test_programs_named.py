"""issue 30, outputs: `--go-src` runs `go` and `size` runs `c++filt` from PATH as root,
unsaid. Every program the source looks up (``shutil.which("NAME")``, a tool tuple) is named
in README's "Programs bpfmem runs", and the --help of size names go and c++filt."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## Programs bpfmem runs")
    return text[start:text.index("\n## ", start + 3)]


def test_every_program_looked_up_is_named_in_the_readme():
    found = set()
    for p in (ROOT / "src" / "bpfmem").rglob("*.py"):
        src = p.read_text()
        found |= set(re.findall(r'shutil\.which\("([^"]+)"\)', src))
        for tup in re.findall(r'for tool in \(([^)]*)\)', src):
            found |= set(re.findall(r'"([^"]+)"', tup))
    assert {"go", "c++filt", "chromium", "apt-get", "dpkg-deb"} <= found, found
    section = _section()
    missing = sorted(n for n in found if f"`{n}`" not in section)
    assert not missing, missing
    for name in ("gcc", "qemu-system-x86_64", "BPFMEM_GO", "BPFMEM_CHROMIUM"):
        assert name in section


def test_size_help_names_the_programs_it_runs(capsys):
    from bpfmem.cli import main
    try:
        main(["size", "--help"])
    except SystemExit:
        pass
    out = " ".join(capsys.readouterr().out.split())
    assert "c++filt from PATH" in out and "BPFMEM_GO, else PATH" in out
