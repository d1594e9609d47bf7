"""An OCI image written by a tool nobody here wrote: Debian 12's umoci (apt-get download,
never installed; a static Go binary), two layers: libbpf-tools' execsnoop and opensnoop, then
opensnoop deleted (umoci writes the whiteout) and biolatency added. bpfmem reads the layout
directory and a tar of it: the final filesystem's objects only, equal to the binaries' own."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

import debpkg
from bpfmem.api import load_objects
from conftest import is_root

pytestmark = pytest.mark.skipif(not is_root(), reason="umoci unpack keeps owners: root")


@pytest.fixture(scope="module")
def tools():
    umoci = debpkg.unpacked("umoci")
    lt = debpkg.unpacked("libbpf-tools")
    if umoci is None or lt is None:
        pytest.skip("apt-get cannot fetch umoci or libbpf-tools")
    return umoci / "usr" / "bin" / "umoci", lt / "usr" / "sbin"


def test_umoci_image(tools, tmp_path):
    umoci, sbin = tools
    layout = tmp_path / "layout"

    def u(*args):
        subprocess.run([str(umoci), *args], check=True, capture_output=True, timeout=300)
    u("init", "--layout", str(layout))
    u("new", "--image", f"{layout}:agent")
    one, two = tmp_path / "b1", tmp_path / "b2"
    u("unpack", "--image", f"{layout}:agent", str(one))
    (one / "rootfs" / "usr" / "sbin").mkdir(parents=True)
    for n in ("execsnoop", "opensnoop"):
        shutil.copy(sbin / n, one / "rootfs" / "usr" / "sbin" / n)
    u("repack", "--image", f"{layout}:agent", str(one))
    u("unpack", "--image", f"{layout}:agent", str(two))
    (two / "rootfs" / "usr" / "sbin" / "opensnoop").unlink()
    shutil.copy(sbin / "biolatency", two / "rootfs" / "usr" / "sbin" / "biolatency")
    u("repack", "--image", f"{layout}:agent", str(two))
    shutil.rmtree(one)
    shutil.rmtree(two)
    # umoci's second layer deletes opensnoop with a whiteout
    index = json.loads((layout / "index.json").read_text())
    manifest = json.loads((layout / "blobs" / "sha256" /
                           index["manifests"][0]["digest"].split(":")[1]).read_text())
    assert len(manifest["layers"]) == 2
    last = layout / "blobs" / "sha256" / manifest["layers"][1]["digest"].split(":")[1]
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(last.read_bytes()))) as t:
        assert "usr/sbin/.wh.opensnoop" in [m.name.lstrip("./") for m in t]
    archive = tmp_path / "layout.tar"
    with tarfile.open(archive, "w") as t:
        for p in sorted(layout.rglob("*")):
            if p.is_file():
                t.add(p, arcname=str(p.relative_to(layout)))
    for image, label in ((layout, "layout"), (archive, "layout.tar")):
        specs, skipped = load_objects(image)
        assert skipped == []
        got = {s.path: s for s in specs}
        assert set(got) == {f"{label}@layer1:/usr/sbin/execsnoop:.rodata+0x578",
                            f"{label}@layer2:/usr/sbin/biolatency:.rodata+0x630"}
        for s in specs:
            own, _ = load_objects(sbin / s.path.split("/")[-1].split(":")[0])
            assert s.maps == own[0].maps and s.loader == "libbpf"
