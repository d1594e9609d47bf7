"""A Go agent as it ships: built offline here with Debian's Go (1.19) against Debian's
cilium/ebpf 0.9.1 (golang-github-cilium-ebpf-dev, vendored: GOFLAGS=-mod=vendor, GOPROXY=off),
go:embedding bpf2go objects nobody here wrote (cilium/ebpf's examples, tests/data) and our
fixtures: one as a []byte variable (bpf2go's pattern), the rest in an embed.FS. Built plain,
PIE, stripped (-s -w) and PIE stripped; a second build's build info names a current
cilium/ebpf (v0.22.0, the same vendored sources).

The agent itself prints what cilium/ebpf 0.9.1 reads of each embedded file (map names, or
its error); bpfmem must find every embedded object, name it by the embed.FS file name (or
the variable where a symbol table says so), choose the loader from the build info as
``go version -m`` reads it, and report exactly the maps cilium/ebpf reads, equal to its own
reading of the object file."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bpfmem.api import load_object, load_objects

HERE = Path(__file__).resolve().parent
CILIUM_SRC = Path("/usr/share/gocode/src/github.com/cilium/ebpf")
XSYS_SRC = Path("/usr/share/gocode/src/golang.org/x/sys")
EXAMPLES = sorted((HERE / "data" / "cilium_examples").glob("*_bpfel.o"))
FIXTURES = [HERE / "bpf" / "obj" / n for n in ("hash_basic.o", "global_data.o", "map_in_map.o",
                                               "percpu_lru.o")]
AS_BYTES = "kprobe_bpfel.o"          # the []byte variable, as bpf2go writes it
XSYS = "v0.0.0-20210906170528-6f6e22806c34"

MAIN = """package main

import (
	"bytes"
	"embed"
	"fmt"
	"sort"

	"github.com/cilium/ebpf"
)

//go:embed kprobe_bpfel.o
var _KprobeBytes []byte

//go:embed objs/*.o
var objs embed.FS

func show(name string, data []byte) {
	spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(data))
	if err != nil {
		fmt.Printf("%s\\terror\\t%v\\n", name, err)
		return
	}
	names := []string{}
	for n := range spec.Maps {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Printf("%s\\tmaps\\t%v\\n", name, names)
}

func main() {
	show("main._KprobeBytes", _KprobeBytes)
	entries, _ := objs.ReadDir("objs")
	for _, e := range entries {
		data, _ := objs.ReadFile("objs/" + e.Name())
		show("objs/"+e.Name(), data)
	}
}
"""

BUILDS = {"plain": [], "pie": ["-buildmode=pie"], "stripped": ["-ldflags=-s -w"],
          "pie-stripped": ["-buildmode=pie", "-ldflags=-s -w"]}


def _vendor(src: Path, version: str) -> None:
    """The agent's sources with cilium/ebpf (required as ``version``) and x/sys vendored."""
    (src / "objs").mkdir(parents=True)
    shutil.copy(HERE / "data" / "cilium_examples" / AS_BYTES, src / AS_BYTES)
    for o in EXAMPLES + FIXTURES:
        if o.name != AS_BYTES:
            shutil.copy(o, src / "objs" / o.name)
    (src / "main.go").write_text(MAIN)
    ignore = shutil.ignore_patterns("*_test.go", "testdata", "cmd")
    shutil.copytree(CILIUM_SRC, src / "vendor/github.com/cilium/ebpf", ignore=ignore)
    shutil.copytree(XSYS_SRC, src / "vendor/golang.org/x/sys", ignore=ignore, symlinks=False)
    pkgs = sorted({str(p.parent.relative_to(src / "vendor"))
                   for p in (src / "vendor/github.com/cilium/ebpf").rglob("*.go")})
    (src / "vendor/modules.txt").write_text(
        f"# github.com/cilium/ebpf {version}\n## explicit; go 1.17\n" + "\n".join(pkgs) +
        f"\n# golang.org/x/sys {XSYS}\n## explicit; go 1.17\n"
        "golang.org/x/sys/internal/unsafeheader\ngolang.org/x/sys/unix\n")
    (src / "go.mod").write_text(f"module example.com/agent\n\ngo 1.19\n\nrequire "
                                f"github.com/cilium/ebpf {version}\n\nrequire golang.org/x/sys "
                                f"{XSYS} // indirect\n")


@pytest.fixture(scope="module")
def agents(tmp_path_factory):
    if shutil.which("go") is None or not CILIUM_SRC.is_dir() or not XSYS_SRC.is_dir():
        pytest.skip("Debian's golang-go and golang-github-cilium-ebpf-dev are needed")
    tmp = tmp_path_factory.mktemp("goagent")
    env = {**os.environ, "GOFLAGS": "-mod=vendor", "GOPROXY": "off", "GOTOOLCHAIN": "local",
           "GOCACHE": str(tmp / "cache"), "GOPATH": str(tmp / "gopath"), "CGO_ENABLED": "0",
           "GOENV": "off"}
    out = {}
    for version in ("v0.9.1", "v0.22.0"):
        src = tmp / f"src-{version}"
        _vendor(src, version)
        for build, flags in (BUILDS.items() if version == "v0.9.1" else
                             [("plain", [])]):
            exe = tmp / f"agent-{version}-{build}"
            subprocess.run(["go", "build", *flags, "-o", str(exe), "."], cwd=src, env=env,
                           check=True, timeout=900, capture_output=True)
            out[(version, build)] = exe
    yield out
    shutil.rmtree(tmp, ignore_errors=True)


def _agent_says(exe: Path) -> dict[str, tuple[str, str]]:
    p = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=True)
    return {name: (kind, rest) for name, kind, rest in
            (line.split("\t", 2) for line in p.stdout.splitlines())}


@pytest.mark.parametrize("build", list(BUILDS))
def test_go_agent_objects_loader_and_maps(agents, build):
    exe = agents[("v0.9.1", build)]
    info = subprocess.run(["go", "version", "-m", str(exe)], capture_output=True, text=True,
                          check=True).stdout
    assert "\tdep\tgithub.com/cilium/ebpf\tv0.9.1" in info
    says = _agent_says(exe)
    assert len(says) == len(EXAMPLES) + len(FIXTURES)
    specs, skipped = load_objects(exe)
    found = {s.path.split(":", 1)[1]: s for s in specs}
    skipped_names = {line.split(":", 2)[1]: line for line in skipped}
    stripped = "stripped" in build
    for name, (kind, rest) in says.items():
        where = name
        if name == "main._KprobeBytes" and stripped:   # no symbol table: by its place
            (where,) = [w for w in list(found) + list(skipped_names) if w.startswith(".")]
        file = HERE / "data" / "cilium_examples" / AS_BYTES if name.startswith("main.") else \
            next(o for o in EXAMPLES + FIXTURES if o.name == name.split("/", 1)[1])
        if kind == "error":    # cilium/ebpf 0.9.1 refuses it: so does bpfmem, said in a line
            assert where in skipped_names, (build, name, rest)
            with pytest.raises(Exception):
                load_object(file, loader="cilium-ebpf@0.9")
            continue
        spec = found[where]
        assert spec.loader == "cilium-ebpf@0.9"
        assert "github.com/cilium/ebpf v0.9.1" in spec.loader_reason
        assert "[" + " ".join(sorted(m.name for m in spec.maps)) + "]" == rest, (build, name)
        own = load_object(file, loader="cilium-ebpf@0.9", programs=False)
        assert spec.maps == own.maps, (build, name)
    assert len(found) + len(skipped) == len(says)
    print(f"{build}: {len(found)} objects read as cilium/ebpf 0.9.1 does, {len(skipped)} it "
          f"refuses; names {sorted(found)[:2]}...")


def test_current_cilium_in_build_info_gives_the_current_rules(agents):
    exe = agents[("v0.22.0", "plain")]
    specs, _ = load_objects(exe)
    assert specs and all(s.loader == "cilium-ebpf" for s in specs)
    assert all("github.com/cilium/ebpf v0.22.0" in s.loader_reason for s in specs)
    for s in specs:
        name = s.path.split(":", 1)[1]
        file = HERE / "data" / "cilium_examples" / AS_BYTES if name.startswith("main.") else \
            next(o for o in EXAMPLES + FIXTURES if o.name == name.split("/", 1)[1])
        assert s.maps == load_object(file, loader="cilium-ebpf", programs=False).maps, name


def test_between_versions_nearest_rules_with_a_note():
    from bpfmem.parse.embedded import cilium_loader
    assert cilium_loader("v0.9.3") == ("cilium-ebpf@0.9", "")
    assert cilium_loader("v0.23.1") == ("cilium-ebpf", "")
    assert cilium_loader("v1.0.0") == ("cilium-ebpf", "")
    name, note = cilium_loader("v0.12.3")
    assert name == "cilium-ebpf@0.9" and "nearest" in note and "0.9" in note
    name, note = cilium_loader("v0.18.0")
    assert name == "cilium-ebpf" and "0.22" in note
    name, note = cilium_loader("v0.7.0")
    assert name == "cilium-ebpf@0.9" and "nearest" in note


def test_size_of_an_image_is_its_agents(agents, tmp_path):
    """`bpfmem size IMAGE`: one report per binary carrying BPF objects (the Go agent, not
    /bin/true beside it), equal to `bpfmem size` of the binary itself."""
    import json
    import sys

    import imagegen
    exe = agents[("v0.9.1", "pie")]
    img = imagegen.oci_tar(tmp_path / "agent.tar", {"linux/amd64": [
        [("file", "usr/bin/true", Path("/bin/true").read_bytes())],
        [("file", "usr/bin/agent", exe.read_bytes())]]})

    def size(*args):
        p = subprocess.run([sys.executable, "-m", "bpfmem", "size", *args, "--format", "json",
                            "--top", "0"], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)
    # the image's objects are the agent's, read with the loader its build info names
    specs, skipped = load_objects(img)
    own_specs, _ = load_objects(exe)
    assert skipped == [] and len(specs) == len(own_specs) == len(EXAMPLES) + len(FIXTURES)
    for s, o in zip(specs, own_specs):
        assert s.path == "agent.tar@layer2:/usr/bin/agent:" + o.path.split(":", 1)[1]
        assert s.loader == o.loader == "cilium-ebpf@0.9" and s.maps == o.maps
    got, own = size(str(img)), size(str(exe))
    assert [b["path"] for b in got["binaries"]] == ["agent.tar@layer2:/usr/bin/agent"]
    mine, theirs = got["binaries"][0], own["binaries"][0]
    assert {k: v for k, v in mine.items() if k != "path"} == \
        {k: v for k, v in theirs.items() if k != "path"}


def test_loader_from_build_info_modules():
    """The build info's module lines as Go writes them (`go version -m`): cilium/ebpf's
    version, a replacement's version when it names one, libbpfgo as libbpf, neither: None."""
    from bpfmem.parse.embedded import buildinfo_loader
    from bpfmem.parse.gobin import BuildInfo, _modinfo

    def info(text: str):
        path, main, deps, settings = _modinfo(text)
        return BuildInfo("go1.19.8", path, main, tuple(deps), tuple(settings), 0, 0)
    base = "path\texample.com/agent\nmod\texample.com/agent\t(devel)\t\n"
    assert buildinfo_loader(info(base + "dep\tgithub.com/cilium/ebpf\tv0.9.1\t\n"))[0] == \
        "cilium-ebpf@0.9"
    got = buildinfo_loader(info(base + "dep\tgithub.com/cilium/ebpf\tv0.9.1\t\n"
                                "=>\texample.com/fork\tv0.23.0\th1:x=\n"))
    assert got[0] == "cilium-ebpf" and "=> example.com/fork v0.23.0" in got[1]
    got = buildinfo_loader(info(base + "dep\tgithub.com/cilium/ebpf\tv0.22.0\t\n"
                                "=>\t../ebpf\t(devel)\t\n"))
    assert got[0] == "cilium-ebpf"
    got = buildinfo_loader(info(base + "dep\tgithub.com/aquasecurity/libbpfgo\tv0.4.9\t\n"))
    assert got[0] == "libbpf"
    assert buildinfo_loader(info(base + "dep\tgolang.org/x/sys\tv0.1.0\t\n")) is None
