"""Every command's JSON on the bundled example, the seed releases and the committed input files,
byte for byte against tests/data/golden/ (recorded before the upper half was restructured: the
shape may change, the documents may not).

The runs use the release tables or a committed kernel BTF and a fixed CPU count, so nothing
depends on this host. Paths of this checkout are written as ``<repo>``.

To record a new golden file after a deliberate schema change (say so in the commit):
    BPFMEM_GOLDEN_UPDATE=1 python3 -m pytest tests/test_golden_json.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bpfmem import cli

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "data" / "golden"
SEED = "examples/seed/cni_{}.bpf.o"
V054, BEFORE, AFTER = (SEED.format(v) for v in ("v054", "v060_before", "v060_after"))
EXAMPLE = "src/bpfmem/examples/cni_datapath.bpf.o"
INPUTS = "tests/data/inputs"
BTF61 = "tests/data/btf/6.1.0-57-cloud-amd64.btf.xz"
K = ["--kernel", "6.18", "--cpus", "2"]

# name -> (argv, expected exit code)
RUNS = {
    "maps-example": (["maps", "--format", "json", *K], 0),
    "maps-seed": (["maps", "--format", "json", V054, BEFORE, AFTER, *K], 0),
    "maps-no-memory": (["maps", "--format", "json", "--no-memory", BEFORE], 0),
    "maps-cilium": (["maps", "--format", "json", "--loader", "cilium-ebpf",
                     "tests/data/cilium_examples/xdp_bpfel.o", *K], 0),
    "maps-set": (["maps", "--format", "json", BEFORE, *K,
                  "--set", "service_*.flags+=no_prealloc"], 0),
    "maps-btf-6.1": (["maps", "--format", "json", BEFORE, "--kernel-btf", BTF61,
                      "--cpus", "64"], 0),
    "maps-bpftool": (["maps", "--format", "json", "--from-bpftool",
                      f"{INPUTS}/bpftool-map-show.json", *K], 0),
    "maps-snapshot": (["maps", "--format", "json", "--from-bpftool",
                       f"{INPUTS}/snapshot.json", *K], 0),
    "estimate": (["estimate", "--type", "lru_hash", "--key-size", "16", "--value-size", "40",
                  "--max-entries", "65536", "--format", "json", *K], 0),
    "estimate-entries": (["estimate", "--type", "hash", "--key-size", "8", "--value-size", "8",
                          "--max-entries", "131072", "--flags", "no_prealloc",
                          "--entries", "20000", "--format", "json", "--kernel", "6.1",
                          "--cpus", "96"], 0),
    "estimate-batch": (["estimate", "--batch", f"{INPUTS}/batch.jsonl", *K], 0),
    "check-before": (["check", BEFORE, "--limit", "128Mi", "--max-fraction", "0.4",
                      "--format", "json", *K], 1),
    "check-after": (["check", AFTER, "--limit", "128Mi", "--max-fraction", "0.4",
                     "--format", "json", *K], 0),
    "check-matrix": (["check", V054, AFTER, "--limit", "128Mi", "--format", "json",
                      "--kernel", "5.10,6.1,6.12,6.18", "--cpus", "2,64"], 0),
    "check-loaders": (["check", "tests/data/cilium_examples/kprobe_percpu_bpfel.o",
                       "--limit", "128Mi", "--loader", "libbpf,cilium-ebpf", "--format",
                       "json", *K], 0),
    "check-full": (["check", AFTER, "--limit", "128Mi", "--full", "--format", "json", *K], 0),
    "diff-upgrade": (["diff", V054, BEFORE, "--limit", "128Mi", "--format", "json", *K], 0),
    "diff-fix": (["diff", BEFORE, AFTER, "--limit", "128Mi", "--format", "json", *K], 0),
    "diff-loaders": (["diff", "tests/data/cilium_examples/kprobe_percpu_bpfel.o",
                      "tests/data/cilium_examples/kprobe_percpu_bpfel.o", "--old-loader",
                      "libbpf", "--new-loader", "cilium-ebpf", "--format", "json", *K], 0),
    "diff-snapshots": (["diff", f"{INPUTS}/bpftool-map-show.json", f"{INPUTS}/snapshot.json",
                        "--format", "json", *K], 0),
    "advise-before": (["advise", BEFORE, "--format", "json", *K], 0),
    "advise-example": (["advise", "--format", "json", *K], 0),
    "advise-occupancy": (["advise", EXAMPLE, "--occupancy", f"{INPUTS}/occupancy.json",
                          "--format", "json", *K], 0),
    "advise-apply": (["advise", BEFORE, "--apply", *K], 0),
    "size-object": (["size", EXAMPLE, "--format", "json", "--top", "0"], 0),
    "size-sections": (["size", BEFORE, "--by", "section", "--format", "json"], 0),
    "size-diff": (["size", "diff", V054, BEFORE, "--format", "json"], 0),
}


def _run(argv: list[str], capsys, monkeypatch) -> tuple[int, str]:
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("COLUMNS", "120")
    rc = cli.main(list(argv))
    out = capsys.readouterr().out
    return rc, out.replace(str(REPO), "<repo>")


@pytest.mark.parametrize("name", sorted(RUNS))
def test_json_as_recorded(name, capsys, monkeypatch):
    argv, want_rc = RUNS[name]
    rc, out = _run(argv, capsys, monkeypatch)
    assert rc == want_rc, out
    path = GOLDEN / f"{name}.out"
    if os.environ.get("BPFMEM_GOLDEN_UPDATE"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(out)
    assert out == path.read_text(), f"{name}: output differs from {path.relative_to(REPO)}"


def test_every_command_is_recorded():
    """Each command that prints a document on files has a golden run (live ones: snapshot,
    top, export, pod and measure read this host's kernel and are tested against it)."""
    commands = {argv[0] for argv, _ in RUNS.values()}
    assert commands >= {"maps", "estimate", "check", "diff", "advise", "size"}
