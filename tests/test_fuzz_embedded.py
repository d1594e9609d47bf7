"""Mutated binaries carrying a BPF object and mutated container images: every one gives
objects (or none) and lines for what was skipped, or a ParseError; never another
exception. The binary is the example object placed in a section of a small ELF executable
made here; the image a docker archive and an OCI tar of it (tests/imagegen.py)."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import imagegen
from bpfmem.api import example_object_path
from bpfmem.api.image import _examine
from bpfmem.api.objects import carried_by, specs_of
from bpfmem.errors import ParseError
from bpfmem.parse.image import TarSource, read_image

pytestmark = pytest.mark.skipif(shutil.which("objcopy") is None, reason="needs objcopy")


def _binary(tmp: Path) -> bytes:
    out = tmp / "agent"
    subprocess.run(["objcopy", "--add-section", f".bpfobj={example_object_path()}",
                    "--set-section-flags", ".bpfobj=alloc,readonly,data", "/bin/true",
                    str(out)], check=True, capture_output=True)
    return out.read_bytes()


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz-embedded")
    agent = _binary(tmp)
    layers = [[("file", "usr/bin/agent", agent), ("symlink", "bin", "usr/bin")],
              [("whiteout", "usr/bin/gone"), ("file", "bin/x.o",
                                               example_object_path().read_bytes())]]
    docker = imagegen.docker_archive(tmp / "d.tar", layers).read_bytes()
    oci = imagegen.oci_tar(tmp / "o.tar", {"linux/amd64": layers}).read_bytes()
    return agent, [docker, oci]


def _mutate(draw, data: bytes, lo: int = 0) -> bytes:
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 6))):
        pos = draw(st.integers(lo, len(data) - 1))
        op = draw(st.sampled_from(["flip", "word", "cut"]))
        if op == "flip":
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "word":
            data[pos:pos + 8] = draw(st.integers(0, 2**64 - 1)).to_bytes(8, "little")
        else:
            del data[pos:]
            if len(data) <= lo + 1:
                break
    return bytes(data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_binary(seeds, data):
    agent, _ = seeds
    # mutations where the embedded object and the section headers are (most of the file
    # is /bin/true's code)
    start = agent.find(b"\x7fELF", 1)
    blob = _mutate(data.draw, agent, lo=min(start, len(agent) - 2))
    try:
        carried = carried_by(blob, "agent")
    except ParseError:
        return
    try:
        specs, skipped = specs_of(carried, "agent")
    except ParseError:
        return
    assert all(isinstance(s, str) for s in skipped)
    assert all(s.path.startswith("agent:") for s in specs)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_image(seeds, data):
    _, images = seeds
    blob = _mutate(data.draw, data.draw(st.sampled_from(images)))
    try:
        got = read_image(TarSource(io.BytesIO(blob), "image.tar"), _examine)
    except ParseError:
        return
    assert all(isinstance(s, str) for s in got.skipped)
    assert all(f.path.startswith("/") for f in got.files)


@pytest.mark.parametrize("index", [b"[]", b'{"manifests": 3}', b'{"manifests": [1, "x"]}',
                                   b'{"manifests": [{"digest": 5}]}', b'"text"',
                                   b'{"manifests": [{"annotations": 7, "digest": "a:b"}]}'])
def test_manifests_of_the_wrong_shape(tmp_path, index):
    img = tmp_path / "bad.tar"
    import tarfile
    with tarfile.open(img, "w") as t:
        info = tarfile.TarInfo("index.json")
        info.size = len(index)
        t.addfile(info, io.BytesIO(index))
    with open(img, "rb") as f:
        with pytest.raises(ParseError):
            read_image(TarSource(f, str(img)), _examine)
