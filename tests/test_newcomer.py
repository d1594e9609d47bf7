"""What a newcomer meets first, kept true: the configuration reference is a real file the
loader reads, a [[kernels]] entry is named in the output, estimate refuses what it cannot
model instead of answering 0, every command that prints a result can write it with -o, an
error is not followed by an empty report, and one unit style (``59.6Mi``) everywhere,
JUnit and advice titles included, with counts in the singular when there is one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bpfmem import cli
from bpfmem.config import load_config
from bpfmem.units import count

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "src" / "bpfmem" / "examples" / "cni_datapath.bpf.o"
K = ["--kernel", "6.18", "--cpus", "2"]


def _run(argv, capsys, monkeypatch, cwd=REPO):
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("COLUMNS", "100")
    rc = cli.main([str(a) for a in argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_the_configuration_reference_is_a_file_the_loader_reads():
    cfg = load_config(REPO / "bpfmem.toml.example")
    assert cfg.limit == 128 << 20 and cfg.max_fraction == 0.5 and cfg.full is False
    assert cfg.cpus == [2, 64] and cfg.loader == "cilium-ebpf" and len(cfg.sets) == 2
    assert [e.name for e in cfg.kernel_entries] == ["prod-6.1", "rhel9", "edge"]
    assert cfg.object_limits and cfg.map_caps and cfg.dynamic["maps"]
    assert cfg.binary_max and cfg.binary_files and cfg.binary_modules
    readme = (REPO / "README.md").read_text()
    assert "bpfmem.toml.example" in readme and "src/bpfmem/config.py" not in readme


def test_a_kernels_entry_is_named_in_the_output(tmp_path, capsys, monkeypatch):
    (tmp_path / "bpfmem.toml").write_text('[[kernels]]\nname = "edge"\nrelease = "6.12"\n')
    rc, out, _ = _run(["check", EXAMPLE, "--limit", "128Mi", "--kernel", "edge", "--cpus",
                       "2"], capsys, monkeypatch, tmp_path)
    assert rc == 0 and "edge: Linux 6.12.0" in out
    rc, out, _ = _run(["maps", EXAMPLE, "--format", "json", "--cpus", "2"], capsys,
                      monkeypatch, tmp_path)
    assert json.loads(out)["kernel"]["name"] == "edge"


def test_estimate_batch_refuses_unknown_keys_and_takes_a_lines_cpus(tmp_path, capsys,
                                                                      monkeypatch):
    specs = tmp_path / "s.jsonl"
    specs.write_text(
        '{"type": "hash", "key_size": 4, "value_size": 4, "max_entires": 10}\n'
        '{"key_size": 4}\n'
        '{"type": "percpu_array", "key_size": 4, "value_size": 8, "max_entries": 10, '
        '"cpus": 64}\n')
    rc, out, _ = _run(["estimate", "--batch", specs, *K], capsys, monkeypatch)
    lines = [json.loads(x) for x in out.splitlines()]
    assert rc == 1
    assert "unknown key 'max_entires'" in lines[0]["error"]
    assert lines[1]["error"] == "line 2: missing 'type' (hash, lru_hash, percpu_array, ...)"
    assert "Error" not in lines[0]["error"] + lines[1]["error"]      # no exception class
    rc, one, _ = _run(["estimate", "--type", "percpu_array", "--key-size", "4",
                       "--value-size", "8", "--max-entries", "10", "--kernel", "6.18",
                       "--cpus", "64", "--format", "json"], capsys, monkeypatch)
    want = json.loads(one)
    assert lines[2]["memlock"] == want["memlock"] and lines[2]["kernel"]["possible_cpus"] == 64


def test_estimate_needs_the_sizes_a_map_type_has(capsys, monkeypatch):
    rc, _, err = _run(["estimate", "--type", "hash", "--max-entries", "10"], capsys,
                      monkeypatch)
    assert rc == 2 and "--key-size" in err
    rc, _, err = _run(["estimate", "--type", "hash", "--key-size", "4", "--max-entries",
                       "10"], capsys, monkeypatch)
    assert rc == 2 and "--value-size" in err
    rc, out, _ = _run(["estimate", "--type", "ringbuf", "--max-entries", "4096", *K], capsys,
                      monkeypatch)
    assert rc == 0 and "ringbuf" in out


def test_maps_and_estimate_write_with_o_and_an_error_has_no_report_under_it(
        tmp_path, capsys, monkeypatch):
    out_file = tmp_path / "maps.json"
    rc, out, _ = _run(["maps", EXAMPLE, "--format", "json", "-o", out_file, *K], capsys,
                      monkeypatch)
    assert rc == 0 and out == "" and json.loads(out_file.read_text())["schema"]
    est = tmp_path / "est.json"
    rc, out, _ = _run(["estimate", "--type", "hash", "--key-size", "4", "--value-size", "4",
                       "--max-entries", "64", "--format", "json", "-o", est, *K], capsys,
                      monkeypatch)
    assert rc == 0 and out == "" and json.loads(est.read_text())["memlock"] > 0
    notbpf = tmp_path / "notbpf"
    notbpf.write_bytes(b"\x7fELF" + b"\x02\x01\x01" + b"\0" * 9 + b"\x02\0\x3e\0" + b"\0" * 44)
    rc, out, err = _run(["maps", notbpf], capsys, monkeypatch)
    assert rc == 1 and out == "" and "notbpf" in err


def test_one_unit_style_in_junit_and_advice(tmp_path, capsys, monkeypatch):
    junit = tmp_path / "j.xml"
    rc, _, _ = _run(["check", EXAMPLE, "--limit", "64Mi", "--format", "junit", "-o", junit,
                     *K], capsys, monkeypatch)
    xml = junit.read_text()
    assert rc == 1 and "MiB" not in xml and " bytes" not in xml
    assert "maps charge 68.6Mi at create" in xml and "(limit 64Mi)" in xml
    rc, out, _ = _run(["advise", EXAMPLE, "--format", "json", *K], capsys, monkeypatch)
    titles = " ".join(a["title"] for o in json.loads(out)["objects"] for a in o["advice"])
    assert "MiB" not in titles and "64 CPUs" in titles


def test_counts_are_singular_for_one():
    assert (count(1, "map"), count(2, "map"), count(0, "map")) == ("1 map", "2 maps", "0 maps")
    assert count(1, "map or process", "maps or processes") == "1 map or process"
    assert count(1234, "package") == "1,234 packages"


def test_readme_commands_run_with_debians_python3():
    readme = (REPO / "README.md").read_text()
    # Debian 12 has no `python`: every command the README gives runs python3
    import re
    assert not re.search(r"(^|\s|`)python (-|\S+\.py)", readme), "README runs `python`"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    r = subprocess.run([sys.executable, "-m", "bpfmem", "maps", "--no-memory"], env=env,
                       capture_output=True, text=True, timeout=60, cwd=REPO)
    assert r.returncode == 0


def test_install_hints_are_runnable_as_printed_and_survive_the_terminal(tmp_path):
    """A hint names a package pip can install by that name, and the bracketed extra of the
    checkout (which rich would read as markup) reaches the terminal whole."""
    import io
    from bpfmem.parse.gometrics import HINT
    from bpfmem.report.escape import console, markup
    assert "pip install prometheus_client" in HINT
    buf = io.StringIO()
    console(file=buf, width=200).print(f"note: {markup(HINT)}")
    assert ".venv/bin/pip install '.[export]'" in buf.getvalue()
    from bpfmem.parse import kernel_btf
    for _kind, package in kernel_btf._NEEDS.values():
        assert package in ("lz4", "zstandard")       # PyPI names, installable as printed


def test_a_bpftool_dump_without_pids_has_owners_unknown_not_absent(capsys, monkeypatch):
    rc, out, _ = _run(["maps", "--from-bpftool", "tests/data/inputs/bpftool-map-show.json",
                       *K], capsys, monkeypatch)
    assert rc == 0 and "owners unknown" in out and "no process holds them" not in out


def test_piped_tables_take_columns_and_end_no_line_in_spaces(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    for argv in (["maps", "--from-bpftool", "tests/data/inputs/bpftool-map-show.json", *K],
                 ["maps", str(EXAMPLE), *K], ["check", str(EXAMPLE), "--limit", "1Mi", *K]):
        monkeypatch.setenv("COLUMNS", "80")
        cli.main(argv)
        out = capsys.readouterr().out
        assert out and all(len(x) <= 80 and x == x.rstrip() for x in out.splitlines()), argv


def test_a_loader_move_with_nothing_changed_says_so_and_names_the_renamed_maps(
        capsys, monkeypatch):
    ex = "tests/data/cilium_examples/variables_bpfel.o"
    rc, out, _ = _run(["diff", ex, ex, "--old-loader", "libbpf", "--new-loader",
                       "cilium-ebpf", *K], capsys, monkeypatch)
    assert rc == 0 and "no map changed: 2 maps" in out
    assert "variable.rodata -> .rodata" in " ".join(out.split())


def test_sizes_past_a_u64_are_refused_in_one_line(tmp_path, capsys, monkeypatch):
    for opt in (["--limit", "1e400"], ["--limit", "1e10000000"], ["--limit", "16Ei"],
                ["--limit", "1Mi", "--max-binary-size", "1e400"]):
        rc, out, err = _run(["check", EXAMPLE, *opt, *K], capsys, monkeypatch)
        assert rc == 2 and "more than a size can be" in err and "Traceback" not in err, opt
    (tmp_path / "bpfmem.toml").write_text('limit = "1e400"\n')
    rc, out, err = _run(["check", EXAMPLE, *K], capsys, monkeypatch, tmp_path)
    assert rc == 1 and "limit" in err and "more than a size" in err and "Traceback" not in err
    rc, out, err = _run(["check", EXAMPLE, "--limit", "15Ei", *K], capsys, monkeypatch)
    assert rc == 0


def test_the_examples_source_header_says_what_bpfmem_prints_for_it(capsys, monkeypatch):
    """The bundled example's header names the charge bpfmem prints for it on one release and
    CPU count; the figure and the map shapes in it are checked against `bpfmem maps` so
    the header cannot drift (it once said 58.5 MiB where bpfmem printed 68.6Mi)."""
    import re
    head = EXAMPLE.with_suffix(".c").read_text().split("*/", 1)[0]
    m = re.search(r"\(([\d.]+[KMG]i) charged at create on Linux ([\d.]+) with (\d+) CPUs\)",
                  head.replace("\n *", ""))
    assert m, head
    rc, out, _ = _run(["maps", EXAMPLE, "--format", "json", "--kernel", m[2], "--cpus", m[3]],
                      capsys, monkeypatch)
    assert rc == 0
    from bpfmem.units import format_size
    doc = json.loads(out)
    maps = doc["objects"][0]["maps"]
    assert format_size(sum(x["memory"]["charged_at_create"] for x in maps)) == m[1]
    for x in maps:
        if x["type"] in ("hash", "lru_hash", "percpu_array"):
            row = re.search(rf"\*\s+{x['name']}\s+(\w+)\s+(\d+)/(\d+)\s+(\d+)", head)
            assert row, x["name"]
            assert (row[1], int(row[2]), int(row[3]), int(row[4])) == (
                x["type"], x["key_size"], x["value_size"], x["max_entries"]), x["name"]
