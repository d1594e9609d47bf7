"""The size family's pages (text, markdown, junit, and the diff's HTML without plotly.js) of
fixed samples, byte for byte against tests/data/golden/: the seed objects by section, and a
hand-made Go report (packages in modules, a main module, build notes, why a package is
linked) alone and against a lighter build; the binary-size gate passing and failing.

To record a new golden file after a deliberate change (say so in the commit):
    BPFMEM_GOLDEN_UPDATE=1 python3 -m pytest tests/test_golden_size.py
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from bpfmem import api
from bpfmem.analysis.imports import ImportChain, ImportSaving, WhyLinked
from bpfmem.analysis.size import (BinaryCheck, Piece, SizeReport, judge_binary, size_diff,
                                  size_result)
from bpfmem.parse.gobin import Module
from bpfmem.report import formats

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "data" / "golden"
# paths as a user in the checkout types them: the pages do not depend on where it is
V054, BEFORE = (f"examples/seed/cni_{v}.bpf.o" for v in ("v054", "v060_before"))
KiB, MiB = 1 << 10, 1 << 20


def _go(path: str, http: bool) -> SizeReport:
    pkgs = [("runtime", 900 * KiB), ("example.com/agent", 300 * KiB),
            ("example.com/agent/config", 120 * KiB), ("github.com/cilium/ebpf", 800 * KiB),
            ("github.com/cilium/ebpf/asm", 200 * KiB), ("(Go pclntab)", 700 * KiB)]
    if http:
        pkgs += [("net/http", 1200 * KiB), ("crypto/tls", 600 * KiB)]
    pieces = tuple(Piece(".text" if not p.startswith("(") else ".gopclntab", p, p + ".f",
                         size, size) for p, size in pkgs)
    pieces += (Piece(".debug_info", "(debug info)", "", 2 * MiB, 0),)
    total = sum(p.file for p in pieces)
    mods = (Module("github.com/cilium/ebpf", "v0.12.3"),
            Module("golang.org/x/sys", "v0.14.0", replace=Module("../sys", "")))
    return SizeReport(path, total, total - 2 * MiB, "go", stripped=False, pie=True,
                      pieces=pieces, go_version="go1.21.3", pclntab_layout="1.20",
                      pclntab_found_by="section", functions=4242,
                      main_module=Module("example.com/agent", "(devel)"),
                      main_path="example.com/agent", modules=mods,
                      notes=("built with -trimpath",),
                      _module_paths=("github.com/cilium/ebpf", "golang.org/x/sys"))


WHY = WhyLinked("example.com/agent", (
    ImportSaving("example.com/agent/config", "net/http", 1800 * KiB,
                 ("net/http", "crypto/tls"), ("example.com/agent", "example.com/agent/config",
                                              "net/http")),), (
    ImportChain("net/http", 1200 * KiB, ("example.com/agent", "example.com/agent/config",
                                         "net/http")),))
LIGHT, HEAVY = _go("/build/light/agent", False), _go("/build/heavy/agent", True)


def _samples():
    seed_size = api.binary_size([V054, BEFORE], by="section", top=3)
    return {
        "size-seed": seed_size,
        "size-go": size_result([HEAVY], by="package", top=5),
        "size-go-modules": size_result([HEAVY], by="module", top=0),
        "size-diff-seed": api.binary_size_diff(V054, BEFORE, by="section", top=4),
        "size-diff-go": size_diff(LIGHT, HEAVY, by="package", top=3),
        "size-check": api.check_binaries([V054, BEFORE], max_size=8 << 10, module_limits={}),
        "size-check-go": BinaryCheck((HEAVY,), tuple(judge_binary(
            HEAVY, max_size=8 * MiB, module_limits={"github.com/cilium/*": 512 * KiB}))),
    }


def _with_why(result):
    from dataclasses import replace
    return replace(result, why=WHY)


RUNS = [(name, fmt) for name, fmts in (
    ("size-seed", ("text", "markdown")), ("size-go", ("text", "markdown")),
    ("size-go-why", ("text", "markdown")), ("size-go-modules", ("text",)),
    ("size-diff-seed", ("text", "markdown", "html")),
    ("size-diff-go", ("text", "markdown", "html")),
    ("size-diff-go-why", ("text", "markdown", "html")),
    ("size-check", ("text", "markdown", "junit")), ("size-check-go", ("text", "junit")))
    for fmt in fmts]


@pytest.fixture(scope="module")
def samples():
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(REPO)
        s = _samples()
    s["size-go-why"] = _with_why(s["size-go"])
    s["size-diff-go-why"] = _with_why(s["size-diff-go"])
    return s


@pytest.mark.parametrize("name,fmt", RUNS)
def test_page_as_recorded(name, fmt, samples, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    if fmt == "html":
        pytest.importorskip("plotly")
    out = io.StringIO()
    formats.render(samples[name], fmt, out)
    text = out.getvalue()
    if fmt == "html":
        from plotly.offline import get_plotlyjs
        text = text.replace(get_plotlyjs(), "<plotly.js>")
    path = GOLDEN / f"{name}.{fmt}.out"
    if os.environ.get("BPFMEM_GOLDEN_UPDATE"):
        path.write_text(text)
    assert text == path.read_text(), f"{name} {fmt}: differs from {path.relative_to(REPO)}"
