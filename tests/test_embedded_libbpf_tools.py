"""Real binaries nobody here wrote: Debian 12's libbpf-tools (apt-get download, dpkg-deb -x,
never installed), about 50 C tools each carrying a libbpf skeleton's object in .rodata.

For each binary, the object cut out of it here (ELF magic with e_machine EM_BPF, up to the end
of its section header table) is opened and loaded by Debian's libbpf 1.1 (tests/harness) under
the skeleton's object name (bpftool gen skeleton: ``<tool>_bpf``), and the kernel's view of
every map (attributes, memlock from fdinfo) must equal what ``bpfmem maps BINARY --format
json`` says of it, memlock to the byte; the loader is libbpf, read from the binary."""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys

import pytest

import debpkg
import libbpf_harness
from conftest import is_root

pytestmark = pytest.mark.libbpf


@pytest.fixture(scope="module")
def tools():
    root = debpkg.unpacked("libbpf-tools")
    if root is None:
        pytest.skip("apt-get cannot fetch libbpf-tools")
    found = sorted(p for p in (root / "usr" / "sbin").iterdir()
                   if p.is_file() and not p.is_symlink())
    assert len(found) >= 45
    return found


@pytest.fixture(scope="module")
def harness():
    if libbpf_harness.ensure_built() is None:
        pytest.skip("gcc or libbpf-dev missing: cannot build tests/harness")
    return libbpf_harness


def cut_out(data: bytes) -> list[tuple[int, bytes]]:
    """The test's own cut: every 64-bit little-endian ET_REL EM_BPF header, up to the end of
    its section header table."""
    out, i = [], data.find(b"\x7fELF", 1)
    while i >= 0:
        if data[i + 4] == 2 and data[i + 16:i + 20] == b"\x01\x00\xf7\x00":
            shoff, = struct.unpack_from("<Q", data, i + 0x28)
            shnum, = struct.unpack_from("<H", data, i + 0x3C)
            end = i + shoff + 64 * shnum
            out.append((i, data[i:end]))
            i = data.find(b"\x7fELF", end)
        else:
            i = data.find(b"\x7fELF", i + 1)
    return out


@pytest.fixture(scope="module")
def reported(tools):
    """``bpfmem maps`` on every binary at once, as JSON."""
    p = subprocess.run([sys.executable, "-m", "bpfmem", "maps", *map(str, tools),
                        "--format", "json", "--no-programs"], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["errors"] == []
    return doc


def test_every_tool_reports_its_one_object_with_libbpf(tools, reported):
    by_binary: dict[str, list] = {}
    for o in reported["objects"]:
        binary, _, where = o["path"].rpartition(":")
        by_binary.setdefault(binary, []).append((where, o))
    assert set(by_binary) == {str(t) for t in tools}
    for t in tools:
        cuts = cut_out(t.read_bytes())
        objs = by_binary[str(t)]
        assert len(objs) == len(cuts) == 1, t.name
        (where, o), = objs
        rodata = next(line for line in subprocess.run(
            ["readelf", "-SW", str(t)], capture_output=True, text=True).stdout.splitlines()
            if " .rodata " in line)
        rodata_off = int(rodata.split()[4 if rodata.split()[0] != "[" else 5], 16)
        assert where == f".rodata+{cuts[0][0] - rodata_off:#x}"
        assert o["loader"]["name"] == "libbpf"
        assert "links libbpf" in o["loader"]["why"] and "v1.1" in o["loader"]["why"]
        assert o["name"] == re.sub(r"[^A-Za-z0-9_]", "_", t.name) + "_bpf"


@pytest.mark.kernel
@pytest.mark.skipif(not is_root(), reason="creating maps needs root")
def test_maps_equal_libbpf_11_memlock_to_the_byte(tools, reported, harness, tmp_path):
    ours = {o["path"].rpartition(":")[0]: o for o in reported["objects"]}
    matched, maps_seen, refused = 0, 0, []
    for t in tools:
        (_, raw), = cut_out(t.read_bytes())
        obj = tmp_path / (re.sub(r"[^A-Za-z0-9_]", "_", t.name) + "_bpf.o")
        obj.write_bytes(raw)
        rc, lines = harness.run("load", str(obj))
        if rc != 0:
            # the tool sets a map's size before load (bpf_map__set_max_entries or
            # _set_value_size): libbpf cannot load the object as shipped. bpfmem must say
            # so of that map; every other map is created by the harness as libbpf opened it
            failed = re.search(r"map '([^']+)': failed to create", " ".join(
                lines[-1]["warnings"])).group(1)
            mine = {m["name"]: m for m in ours[str(t)]["maps"]}
            assert "must set it before load" in " ".join(mine[failed]["notes"]), (t.name,
                                                                                  failed)
            lines = _create_open_view(harness, obj, {failed} | {
                n for n, m in mine.items() if m["max_entries"] == 0 and
                m["type"] != "perf_event_array"})
            refused.append(t.name)
        theirs = {m["name"]: m["kernel"] for m in lines if m["kind"] in ("map", "created")}
        mine = {m["name"]: m for m in ours[str(t)]["maps"] if m["autocreate"] and (
                t.name not in refused or m["name"] in theirs)}
        assert set(theirs) == set(mine), t.name
        for name, k in theirs.items():
            m = mine[name]
            assert (k["name"], k["type"], k["key_size"], k["value_size"], k["map_flags"]) == \
                (m["kernel_name"], m["type_id"], m["key_size"], m["value_size"],
                 m["map_flags"]), (t.name, name)
            if not m["max_entries_set_at_load"]:
                assert k["max_entries"] == m["max_entries"], (t.name, name)
            assert k["memlock"] == m["memory"]["memlock_at_create"], (t.name, name)
            maps_seen += 1
        if t.name not in refused:
            total = sum(k["memlock"] for k in theirs.values())
            assert total == ours[str(t)]["memory"]["memlock_at_create"], t.name
        matched += 1
    print(f"libbpf-tools: {matched}/{len(tools)} binaries, {maps_seen} maps equal to libbpf "
          f"1.1 + the kernel, memlock to the byte; sized by the tool before load (the rest "
          f"created as libbpf opened them): {refused}")
    assert matched == len(tools)
    assert len(refused) <= 6


def _create_open_view(harness, obj, leave_out: set[str]) -> list[dict]:
    """The maps of libbpf's open view of ``obj`` but ``leave_out``, created by the harness
    (perf event arrays get the possible CPUs, as libbpf gives them at load)."""
    rc, lines = harness.run("open", str(obj))
    assert rc == 0
    from bpfmem.host.profile import host_possible_cpus
    specs = []
    for m in (x for x in lines if x["kind"] == "map" and x["name"] not in leave_out):
        spec = {k: m[k] for k in ("name", "type", "key_size", "value_size", "max_entries",
                                  "map_flags", "map_extra", "numa_node")}
        if spec["type"] == 4 and spec["max_entries"] == 0:
            spec["max_entries"] = host_possible_cpus()
        specs.append(json.dumps(spec))
    rc, created = harness.run("create", stdin="\n".join(specs) + "\n")
    assert rc == 0, created
    return created


@pytest.mark.kernel
@pytest.mark.skipif(not is_root(), reason="creating maps needs root")
def test_measure_takes_a_binary(tools):
    """bpfmem measure on a libbpf-tools binary creates its embedded object's maps: the
    kernel's memlock equals the model's for every map."""
    t = next(t for t in tools if t.name == "opensnoop")
    p = subprocess.run([sys.executable, "-m", "bpfmem", "measure", str(t), "--format", "json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    rows = doc["maps"]
    assert rows and all(r["measured"]["created"] and r["memlock_match"] and
                        r["measured"]["memlock"] == r["model"]["memlock"] for r in rows), rows


def test_check_a_binary_feeds_both_gates(tools):
    """check on a binary carrying an object: the maps gate judges its embedded object (the
    binary gate sizes the binary beside it); the verdict fails when either gate does."""
    t = next(t for t in tools if t.name == "execsnoop")

    def check(*args):
        return subprocess.run([sys.executable, "-m", "bpfmem", "check", str(t), *args,
                               "--kernel", "6.1", "--cpus", "4", "--format", "json"],
                              capture_output=True, text=True, timeout=300)
    ok = check("--limit", "128Mi", "--max-binary-size", "1Mi")
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert "maps" in json.dumps(doc) and "execsnoop_bpf" in ok.stdout
    tight = check("--limit", "16Mi", "--max-binary-size", "1Mi")   # the 76Mi hash map
    assert tight.returncode == 1, tight.stderr
    small = check("--limit", "128Mi", "--max-binary-size", "100Ki")   # a 411Ki binary
    assert small.returncode == 1, small.stderr
