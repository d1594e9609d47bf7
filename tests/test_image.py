"""Container images in (docker save archives, OCI layouts as a directory or a tar, multi-
platform indexes), built offline here with Python's tarfile (tests/imagegen.py) around real
binaries nobody here wrote (Debian 12's libbpf-tools) and our fixtures: the objects of the
final filesystem only (layers in order, whiteouts, opaque directories, symlinked
directories, hard links), named by image, layer and path; check, diff and maps on images;
hostile images bounded with a line for what was skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import debpkg
import imagegen
from bpfmem.api import load_objects
from bpfmem.api.image import load_image

HERE = Path(__file__).resolve().parent
HASH = (HERE / "bpf" / "obj" / "hash_basic.o").read_bytes()
GLOBAL = (HERE / "bpf" / "obj" / "global_data.o").read_bytes()


@pytest.fixture(scope="module")
def tools() -> Path:
    root = debpkg.unpacked("libbpf-tools")
    if root is None:
        pytest.skip("apt-get cannot fetch libbpf-tools")
    return root / "usr" / "sbin"


def _layers(tools: Path):
    ex, op, bio = ((tools / n).read_bytes() for n in ("execsnoop", "opensnoop", "biolatency"))
    one = [("dir", "usr"), ("dir", "usr/sbin"), ("file", "usr/sbin/execsnoop", ex),
           ("file", "usr/sbin/opensnoop", op), ("file", "usr/lib/bpf/hash_basic.o", HASH),
           ("file", "opt/old/biolatency", bio), ("file", "opt/old/global_data.o", GLOBAL),
           ("file", "etc/motd", b"not an ELF file " * 8), ("symlink", "usr/bin", "sbin")]
    two = [("whiteout", "usr/sbin/opensnoop"),          # deleted
           ("opaque", "opt/old"),                       # emptied of layer 1's files
           ("file", "opt/old/global_data.o", GLOBAL),   # ... and this one written again
           ("file", "usr/bin/tool", op),                # through the symlinked directory
           ("hardlink", "usr/sbin/tool-again", "usr/sbin/tool"),
           ("file", "usr/lib/bpf/hash_basic.o", GLOBAL)]   # replaced
    return [one, two]


FINAL = {("1", "/usr/sbin/execsnoop:.rodata+0x578"), ("2", "/opt/old/global_data.o"),
         ("2", "/usr/sbin/tool:.rodata+0x4b8"), ("2", "/usr/sbin/tool-again:.rodata+0x4b8"),
         ("2", "/usr/lib/bpf/hash_basic.o")}


def _names(objects, label):
    out = set()
    for o in objects:
        head, _, rest = o.path.partition(":")
        image, _, layer = head.partition("@layer")
        assert image == label
        out.add((layer, rest))
    return out


@pytest.mark.parametrize("layout", ["docker", "oci-tar", "oci-dir", "oci-tar-plain"])
def test_final_filesystem_only(tools, tmp_path, layout):
    layers = _layers(tools)
    if layout == "docker":
        img = imagegen.docker_archive(tmp_path / "agent.tar", layers)
    elif layout == "oci-dir":
        (tmp_path / "agent").mkdir()
        img = imagegen.oci_dir(tmp_path / "agent", {"linux/amd64": layers})
    else:
        img = imagegen.oci_tar(tmp_path / "agent.tar", {"linux/amd64": layers},
                               gz=layout == "oci-tar")
    got = load_image(img)
    assert got.skipped == [] and got.image.notes == ()
    assert _names(got.objects, img.name) == FINAL
    by = {o.path.split(":", 1)[1]: o for o in got.objects}
    ex = by["/usr/sbin/execsnoop:.rodata+0x578"]
    assert ex.loader == "libbpf" and ex.name == "execsnoop_bpf"
    # the replaced object is the second layer's file, read as its own
    from bpfmem.parse.objspec import parse_object
    assert by["/usr/lib/bpf/hash_basic.o"].maps == \
        parse_object(GLOBAL, path="x/hash_basic.o").maps
    # the maps equal the binary's own reading, outside the image
    own, _ = load_objects(tools / "execsnoop")
    assert ex.maps == own[0].maps


def test_multi_platform_index(tools, tmp_path):
    ex, op = (tools / "execsnoop").read_bytes(), (tools / "opensnoop").read_bytes()
    images = {"linux/amd64": [[("file", "agent", ex)]],
              "linux/arm64": [[("file", "agent", op)]]}
    for nested in (False, True):
        img = imagegen.oci_tar(tmp_path / f"multi-{nested}.tar", images, nested=nested)
        got = load_image(img)
        assert [o.name for o in got.objects] == ["execsnoop_bpf"]
        assert got.image.platform == "linux/amd64"
        assert any("multi-platform" in n for n in got.image.notes)
        arm = load_image(img, platform="linux/arm64")
        assert [o.name for o in arm.objects] == ["opensnoop_bpf"]
        assert arm.image.notes == ()
    p = _bpfmem("maps", str(img), "--platform", "linux/s390x")
    assert p.returncode == 1 and "no image for platform linux/s390x" in p.stderr
    assert "linux/amd64, linux/arm64" in p.stderr and "Traceback" not in p.stderr
    p = _bpfmem("maps", str(img), "--platform", "linux/arm64", "--format", "json",
                "--no-programs")
    assert p.returncode == 0, p.stderr
    assert [o["name"] for o in json.loads(p.stdout)["objects"]] == ["opensnoop_bpf"]


def _bpfmem(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "bpfmem", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_check_diff_maps_on_images(tools, tmp_path):
    layers = _layers(tools)
    old = imagegen.docker_archive(tmp_path / "old.tar", layers[:1])
    new = imagegen.oci_tar(tmp_path / "new.tar", {"linux/amd64": layers})
    p = _bpfmem("check", str(new), "--limit", "128Mi", "--kernel", "6.1", "--cpus", "4",
                "--format", "json")
    assert p.returncode == 0, p.stderr
    p = _bpfmem("check", str(new), "--limit", "16Mi", "--kernel", "6.1", "--cpus", "4")
    assert p.returncode == 1, p.stderr            # execsnoop's 76Mi hash map does not fit
    assert "execsnoop_bpf/execs" in p.stdout
    p = _bpfmem("diff", str(old), str(new), "--kernel", "6.1", "--cpus", "4", "--format",
                "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    rows = {(r["object"], r["map"]): r["status"] for r in doc["maps"]}
    assert rows[("execsnoop_bpf", "execs")] == "unchanged"
    assert rows[("biolatency_bpf", "hists")] == "removed"     # the opaque directory
    # one skeleton in three binaries: matched by path and name (deleted, and two new ones)
    assert rows[("opensnoop_bpf@/usr/sbin/opensnoop:.rodata+0x4b8", "start")] == "removed"
    for tool in ("tool", "tool-again"):
        assert rows[(f"opensnoop_bpf@/usr/sbin/{tool}:.rodata+0x4b8", "start")] == "added"
    p = _bpfmem("maps", str(new), "--format", "json", "--no-programs")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    paths = {o["path"].split(":", 1)[1] for o in doc["objects"]}
    assert paths == {r for _, r in FINAL}
    # one entry per binary carrying objects, its totals the sum of its objects'
    carried = {o["binary"] for o in doc["objects"] if "binary" in o}
    assert [b["path"] for b in doc["binaries"]] == sorted(carried, key=[
        o.get("binary") for o in doc["objects"]].index)
    assert len(carried) == 3                    # execsnoop, tool, tool-again
    for b in doc["binaries"]:
        mine = [o for o in doc["objects"] if o.get("binary") == b["path"]]
        assert b["objects"] == [o["path"] for o in mine]
        for f in ("memlock_at_create", "charged_at_create", "charged_full"):
            assert b["memory"][f] == sum(o["memory"][f] for o in mine)
    text = _bpfmem("maps", str(new), "--no-programs", "--kernel", "6.1", "--cpus", "4")
    assert "per binary" in text.stdout and "new.tar@layer1:/usr/sbin/execsnoop" in text.stdout


# --- hostile images -----------------------------------------------------------------------------

def _run_bounded(args, tmp_path):
    """bpfmem on a hostile image with an empty private TMPDIR: (process, peak RSS in KiB);
    nothing may be written (the TMPDIR stays empty, the image's directory unchanged)."""
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    before = sorted(os.listdir(tmp_path))
    # the peak of this process's own memory: VmHWM of its address space (ru_maxrss would
    # keep the high-water mark of the pytest process it was forked from, across exec)
    code = ("import runpy, sys; sys.argv = ['bpfmem'] + sys.argv[1:]\n"
            "try:\n    runpy.run_module('bpfmem', run_name='__main__')\n"
            "finally:\n    hwm = [l.split()[1] for l in open('/proc/self/status')"
            " if l.startswith('VmHWM:')][0]\n"
            "    print('RSS', hwm, file=sys.stderr)\n")
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "TMPDIR": str(tmpdir)})
    rss = int(p.stderr.rsplit("RSS ", 1)[1].split()[0])
    assert os.listdir(tmpdir) == []
    assert sorted(os.listdir(tmp_path)) == before
    return p, rss


def _zeros_gz(path: Path, total: int) -> None:
    """A gzip'd tar layer with one member of ``total`` zero bytes, written in chunks."""
    import zlib
    header = tarfile.TarInfo("zeros")
    header.size = total
    block = header.tobuf(format=tarfile.PAX_FORMAT)
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        f.write(c.compress(block))
        chunk = bytes(1 << 20)
        for _ in range(total >> 20):
            f.write(c.compress(chunk))
        f.write(c.compress(bytes(1024)))
        f.write(c.flush())


def test_hostile_images(tools, tmp_path):
    ex = (tools / "execsnoop").read_bytes()
    # a binary whose embedded object is cut short: its section headers past the file's end
    cut = bytearray(ex)
    off = ex.find(b"\x7fELF\x02\x01\x01", 1)
    cut[off + 0x28:off + 0x30] = (len(ex)).to_bytes(8, "little")
    up = tarfile.TarInfo("../../etc/evil")
    up.size = 3
    loop_a, loop_b = ("symlink", "a", "b"), ("symlink", "b", "a")
    many = [("file", f"many/f{i}", b"x" * 70) for i in range(10_000)]
    huge = tarfile.TarInfo("claims-100GiB")
    huge.size = 100 << 30
    layers = [
        [("file", "bin/agent", ex), ("file", "bin/cut", bytes(cut)), ("raw", up, b"bad"),
         loop_a, loop_b, ("file", "a/inside", b"x" * 100)] + many,
        [("truncated", huge, b"\x7fELF" + bytes(1000))],   # a tar bomb: 100 GiB said
    ]
    files = imagegen.oci_files({"linux/amd64": layers}, gz=True)
    # a gzip bomb as a third layer: 1 GiB of zeros in ~1 MiB
    bomb = tmp_path / "bomb.gz"
    _zeros_gz(bomb, 1 << 30)
    index = json.loads(files["index.json"])
    mdig = index["manifests"][0]["digest"].split(":")[1]
    manifest = json.loads(files[f"blobs/sha256/{mdig}"])
    import hashlib
    data = bomb.read_bytes()
    bdig = hashlib.sha256(data).hexdigest()
    files[f"blobs/sha256/{bdig}"] = data
    manifest["layers"].append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                               "digest": f"sha256:{bdig}", "size": len(data)})
    mbytes = json.dumps(manifest).encode()
    nd = hashlib.sha256(mbytes).hexdigest()
    files[f"blobs/sha256/{nd}"] = mbytes
    index["manifests"][0].update(digest=f"sha256:{nd}", size=len(mbytes))
    files["index.json"] = json.dumps(index).encode()
    bomb.unlink()
    img = tmp_path / "hostile.tar"
    with tarfile.open(img, "w") as t:
        import io
        for name, b in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(b)
            t.addfile(info, io.BytesIO(b))
    del files, data
    p, rss = _run_bounded(["maps", str(img), "--no-programs", "--format", "json"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    doc = json.loads(p.stdout)
    assert [o["path"].split(":", 1)[1] for o in doc["objects"]] == \
        ["/bin/agent:.rodata+0x578"]
    err = p.stderr
    assert "'../../etc/evil' leaves the image's root: skipped" in err
    assert "a/inside: a symlink loop in its directories: skipped" in err
    assert "/bin/cut:.rodata+0x578: an embedded BPF object cut short" in err
    assert "layer 2" in err and "not a readable layer" in err
    assert "layer 3" in err and "a gzip bomb" in err
    print(f"hostile image: peak RSS {rss // 1024} MiB\n{err}")
    assert rss < 200 * 1024


def test_check_an_image_with_both_gates(tools, tmp_path):
    """check IMAGE --limit --max-binary-size: the maps of its objects and the sizes of its
    binaries that carry them (execsnoop 411Ki, opensnoop's copy 335Ki), each failing alone."""
    img = imagegen.oci_tar(tmp_path / "agent.tar", {"linux/amd64": _layers(tools)})

    def check(*args):
        return _bpfmem("check", str(img), "--kernel", "6.1", "--cpus", "4", "--format",
                       "json", *args)
    ok = check("--limit", "128Mi", "--max-binary-size", "1Mi")
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    gate = doc["binary_gate"]
    sized = {b["path"]: b["file_size"] for b in gate["binaries"]}
    assert sized == {f"agent.tar@layer{n}:{p}": (tools / t).stat().st_size for n, p, t in (
        (1, "/usr/sbin/execsnoop", "execsnoop"), (2, "/usr/sbin/tool", "opensnoop"),
        (2, "/usr/sbin/tool-again", "opensnoop"))}
    assert doc["pass"] and gate["pass"]
    big = check("--limit", "128Mi", "--max-binary-size", "400Ki")   # execsnoop is 411Ki
    assert big.returncode == 1
    failures = json.loads(big.stdout)["binary_gate"]["failures"]
    assert len(failures) == 1 and failures[0].startswith("agent.tar@layer1:/usr/sbin/execsnoop:")
    assert check("--limit", "16Mi", "--max-binary-size", "1Mi").returncode == 1


def test_advise_and_measure_take_an_image(tools, tmp_path):
    """advise reads the image's objects' code; measure (root) creates all their maps: the
    kernel's memlock equals the model's for each."""
    img = imagegen.docker_archive(tmp_path / "agent.tar", _layers(tools))
    p = _bpfmem("advise", str(img), "--format", "json", "--kernel", "6.1", "--cpus", "4")
    assert p.returncode == 0, p.stderr
    assert _names([type("O", (), {"path": o["path"]}) for o in json.loads(p.stdout)["objects"]],
                  "agent.tar") == FINAL
    from conftest import is_root
    if not is_root():
        return
    p = _bpfmem("measure", str(img), "--format", "json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["maps"]
    assert len(rows) >= 10 and all(r["memlock_match"] for r in rows), rows
