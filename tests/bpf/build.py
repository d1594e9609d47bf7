#!/usr/bin/env python3
"""Build the BPF test objects and their manifest.

usage: python tests/bpf/build.py            build everything, rewrite MANIFEST.json
       python tests/bpf/build.py --check    verify MANIFEST.json against the files
                                            (no clang needed; exit 1 on mismatch)

What gets built (paths relative to the repository root):
  tests/bpf/<name>.c                  -> tests/bpf/obj/<name>.o         (-target bpfel)
  tests/bpf/hash_basic.c              -> tests/bpf/obj/hash_basic.bpfeb.o (-target bpfeb)
  tests/bpf/bpf2go/<name>.c           -> tests/bpf/obj/bpf2go/<name>_bpfel.o and _bpfeb.o,
                                         compiled the way cilium/ebpf's bpf2go does
                                         (cmd/bpf2go/gen/compile.go: -O2 -mcpu=v1 ... -target
                                         bpfel|bpfeb -fno-ident -fdebug-compilation-dir . -g,
                                         then llvm-strip -g)
  src/bpfmem/examples/<name>.bpf.c    -> src/bpfmem/examples/<name>.bpf.o
  examples/seed/<name>.bpf.c          -> examples/seed/<name>.bpf.o
  generated large_synthetic.c         -> tests/bpf/obj/large_synthetic.o
The generated source is produced deterministically by this script (fixed seed, own
PRNG) in a temporary directory; --check regenerates it in memory to verify its hash.

MANIFEST.json records the clang version, the flags, and for every object its source
path, source sha256 and object sha256.  A source that pulls in local headers with
`#include "..."` (the seed releases share examples/seed/cni_seed.h) also gets an
"includes" list: every such header, followed recursively, with its own sha256, so
--check notices an edited header as well as an edited source.  Absolute paths never reach the objects:
-fdebug-prefix-map rewrites the build directory so the DWARF/BTF line info is the same
wherever the repository is checked out.

Python 3.11 standard library only.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_DIR = ROOT / "tests" / "bpf"
OBJ_DIR = FIXTURE_DIR / "obj"
EXAMPLE_DIR = ROOT / "src" / "bpfmem" / "examples"
SEED_DIR = ROOT / "examples" / "seed"     # the three-release CNI story (README there)
MANIFEST = OBJ_DIR / "MANIFEST.json"

BASE_FLAGS = ["-O2", "-g"]
BPF2GO_DIR = FIXTURE_DIR / "bpf2go"
BPF2GO_OBJ_DIR = OBJ_DIR / "bpf2go"
# bpf2go's defaults (cmd/bpf2go/gen/compile.go insertDefaultFlags, Compile); -O2 and -g are
# in BASE_FLAGS
BPF2GO_FLAGS = ["-mcpu=v1", "-Wunused-command-line-argument", "-fno-ident",
                "-fdebug-compilation-dir", "."]
BIG_ENDIAN_FIXTURE = "hash_basic"
SYNTHETIC_NAME = "large_synthetic"
SYNTHETIC_SOURCE_LABEL = "generated:" + SYNTHETIC_NAME + ".c"


@dataclass
class Job:
    source: str            # repo-relative path, or SYNTHETIC_SOURCE_LABEL
    obj: str               # repo-relative path of the object
    target: str            # bpfel / bpfeb
    source_text: bytes | None = None   # for generated sources
    extra: dict = field(default_factory=dict)


def rel(p: Path) -> str:
    return p.resolve().relative_to(ROOT).as_posix()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


_LOCAL_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.MULTILINE)


def local_includes(src: Path) -> list[Path]:
    """Headers a source pulls in with #include "...", recursively, in first-seen order.

    Only quoted includes that resolve next to the including file (as clang looks first)
    are followed; <system> headers belong to the toolchain, not to the repository.
    """
    seen: list[Path] = []
    todo = [src]
    while todo:
        cur = todo.pop(0)
        try:
            text = cur.read_bytes()
        except OSError:
            continue
        for m in _LOCAL_INCLUDE.finditer(text):
            inc = (cur.parent / m.group(1).decode()).resolve()
            if inc.is_file() and inc != src.resolve() and inc not in seen:
                seen.append(inc)
                todo.append(inc)
    return seen


def include_entries(source: str) -> list[dict]:
    """[{"path", "sha256"}] for the local headers of a repo-relative source."""
    return [{"path": rel(h), "sha256": sha256_file(h)} for h in local_includes(ROOT / source)]


# --------------------------------------------------------------------------- jobs

def fixture_sources() -> list[Path]:
    return sorted(FIXTURE_DIR.glob("*.c"))


def example_sources() -> list[Path]:
    return sorted(EXAMPLE_DIR.glob("*.bpf.c"))


def seed_sources() -> list[Path]:
    return sorted(SEED_DIR.glob("*.bpf.c"))


def planned_jobs(with_synthetic_text: bool) -> list[Job]:
    jobs: list[Job] = []
    for src in fixture_sources():
        name = src.stem
        jobs.append(Job(rel(src), rel(OBJ_DIR / f"{name}.o"), "bpfel"))
        if name == BIG_ENDIAN_FIXTURE:
            jobs.append(Job(rel(src), rel(OBJ_DIR / f"{name}.bpfeb.o"), "bpfeb"))
    for src in sorted(BPF2GO_DIR.glob("*.c")):
        for target in ("bpfel", "bpfeb"):
            jobs.append(Job(rel(src), rel(BPF2GO_OBJ_DIR / f"{src.stem}_{target}.o"), target,
                            extra={"style": "bpf2go"}))
    for src in example_sources() + seed_sources():
        jobs.append(Job(rel(src), rel(src.with_suffix(".o")), "bpfel"))
    syn = Job(SYNTHETIC_SOURCE_LABEL, rel(OBJ_DIR / f"{SYNTHETIC_NAME}.o"), "bpfel",
              extra=dict(SYNTHETIC_PARAMS))
    if with_synthetic_text:
        syn.source_text = generate_synthetic().encode()
    jobs.append(syn)
    return jobs


# ---------------------------------------------------------------------- toolchain

def arch_include_dir() -> str | None:
    """Directory holding asm/types.h (Debian multiarch), needed by linux/types.h."""
    for cmd in (["gcc", "-dumpmachine"], ["clang", "-print-multiarch"]):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            continue
        if out and Path("/usr/include", out, "asm", "types.h").is_file():
            return f"/usr/include/{out}"
    hits = sorted(glob.glob("/usr/include/*/asm/types.h"))
    return str(Path(hits[0]).parent.parent) if hits else None


def clang_version(clang: str) -> str:
    out = subprocess.run([clang, "--version"], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()[0].strip()


def common_flags() -> list[str]:
    flags = list(BASE_FLAGS)
    inc = arch_include_dir()
    if inc:
        flags.append(f"-I{inc}")
    return flags


def compile_one(clang: str, flags: list[str], job: Job, tmp: Path) -> tuple[Job, str]:
    out = ROOT / job.obj
    out.parent.mkdir(parents=True, exist_ok=True)
    if job.source_text is not None:
        src_dir = tmp / "gen"
        src_dir.mkdir(exist_ok=True)
        src = src_dir / Path(SYNTHETIC_SOURCE_LABEL.split(":", 1)[1]).name
        src.write_bytes(job.source_text)
        cwd = src_dir
        src_arg = src.name
        prefix_map = f"-fdebug-prefix-map={src_dir}=tests/bpf/gen"
    else:
        cwd = ROOT
        src_arg = job.source
        prefix_map = f"-fdebug-prefix-map={ROOT}=."
    tmp_out = tmp / (job.obj.replace("/", "__") + ".tmp")
    bpf2go = job.extra.get("style") == "bpf2go"
    extra = BPF2GO_FLAGS if bpf2go else []
    cmd = [clang, *flags, *extra, "-target", job.target, prefix_map, "-c", src_arg, "-o",
           str(tmp_out)]
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{job.source} ({job.target}) failed:\n{' '.join(cmd)}\n{p.stderr}")
    if bpf2go:   # bpf2go strips DWARF (keeps BTF) with llvm-strip -g
        strip = shutil.which(os.environ.get("BPF2GO_STRIP", "llvm-strip")) or "llvm-strip"
        q = subprocess.run([strip, "-g", str(tmp_out)], capture_output=True, text=True)
        if q.returncode != 0:
            raise RuntimeError(f"{job.source}: llvm-strip -g failed: {q.stderr}")
    shutil.move(str(tmp_out), out)
    return job, p.stderr


def build(clang: str, jobs_n: int) -> int:
    if shutil.which(clang) is None:
        print(f"build.py: {clang} not found", file=sys.stderr)
        return 1
    flags = common_flags()
    version = clang_version(clang)
    jobs = planned_jobs(with_synthetic_text=True)
    OBJ_DIR.mkdir(parents=True, exist_ok=True)
    failures = []
    with tempfile.TemporaryDirectory(prefix="bpfmem-build-") as td:
        tmp = Path(td)
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs_n) as pool:
            # biggest first so the synthetic object overlaps with the small ones
            futs = [pool.submit(compile_one, clang, flags, j, tmp)
                    for j in sorted(jobs, key=lambda j: j.source_text is None)]
            for fut in concurrent.futures.as_completed(futs):
                try:
                    job, warnings = fut.result()
                except RuntimeError as e:
                    failures.append(str(e))
                    continue
                print(f"built {job.obj} ({job.target})")
                if warnings.strip():
                    print(warnings.rstrip(), file=sys.stderr)
    if failures:
        for f in failures:
            print(f, file=sys.stderr)
        return 1

    # drop objects in tests/bpf/obj that no longer have a source
    wanted = {j.obj for j in jobs}
    for stale in sorted(OBJ_DIR.glob("*.o")):
        if rel(stale) not in wanted:
            print(f"removing stale {rel(stale)}")
            stale.unlink()

    manifest = {
        "clang": version,
        "flags": flags,
        "command": "clang " + " ".join(flags) + " -target <object target> "
                   "-fdebug-prefix-map=<build dir>=<. or tests/bpf/gen> -c <source> -o <object>",
        "objects": [],
    }
    for j in sorted(jobs, key=lambda j: j.obj):
        src_sha = sha256_bytes(j.source_text) if j.source_text is not None \
            else sha256_file(ROOT / j.source)
        entry = {
            "object": j.obj,
            "source": j.source,
            "target": j.target,
            "source_sha256": src_sha,
            "object_sha256": sha256_file(ROOT / j.obj),
            "object_size": (ROOT / j.obj).stat().st_size,
        }
        if j.source_text is None:
            includes = include_entries(j.source)
            if includes:
                entry["includes"] = includes
        if j.extra.get("style"):
            entry["style"] = j.extra["style"]
        elif j.extra:
            entry["generator"] = j.extra
        manifest["objects"].append(entry)
    MANIFEST.write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"wrote {rel(MANIFEST)} ({len(manifest['objects'])} objects, {version})")
    return 0


# -------------------------------------------------------------------------- check

def check() -> int:
    problems: list[str] = []
    try:
        manifest = json.loads(MANIFEST.read_text())
    except (OSError, ValueError) as e:
        print(f"build.py --check: cannot read {rel(MANIFEST)}: {e}", file=sys.stderr)
        return 1
    entries = {e["object"]: e for e in manifest.get("objects", [])}
    planned = {j.obj: j for j in planned_jobs(with_synthetic_text=False)}

    for obj in sorted(set(planned) - set(entries)):
        problems.append(f"{obj}: not in manifest (source {planned[obj].source}); rebuild")
    for obj in sorted(set(entries) - set(planned)):
        problems.append(f"{obj}: in manifest but its source is gone")

    synthetic_sha = None
    for obj, e in sorted(entries.items()):
        if obj not in planned:
            continue
        src = e["source"]
        if src == SYNTHETIC_SOURCE_LABEL:
            if e.get("generator") != SYNTHETIC_PARAMS:
                problems.append(f"{obj}: generator parameters changed; rebuild")
            if synthetic_sha is None:
                synthetic_sha = sha256_bytes(generate_synthetic().encode())
            if synthetic_sha != e["source_sha256"]:
                problems.append(f"{obj}: generated source differs from manifest; rebuild")
        else:
            p = ROOT / src
            if not p.is_file():
                problems.append(f"{obj}: source {src} missing")
            else:
                if sha256_file(p) != e["source_sha256"]:
                    problems.append(f"{obj}: source {src} changed since the build; rebuild")
                recorded = {i["path"]: i["sha256"] for i in e.get("includes", [])}
                current = {i["path"]: i["sha256"] for i in include_entries(src)}
                for h in sorted(set(recorded) | set(current)):
                    if h not in current:
                        problems.append(f"{obj}: header {h} no longer included (or missing); "
                                        "rebuild")
                    elif h not in recorded:
                        problems.append(f"{obj}: header {h} not in manifest; rebuild")
                    elif current[h] != recorded[h]:
                        problems.append(f"{obj}: header {h} changed since the build; rebuild")
        o = ROOT / obj
        if not o.is_file():
            problems.append(f"{obj}: object missing")
        elif sha256_file(o) != e["object_sha256"]:
            problems.append(f"{obj}: object differs from manifest")

    if problems:
        print("build.py --check: MANIFEST mismatches:", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    print(f"build.py --check: {len(entries)} objects match {rel(MANIFEST)}")
    return 0


# ---------------------------------------------------------------- synthetic object

SYNTHETIC_PARAMS = {"seed": 20240229, "maps": 2000, "programs": 2000, "version": 1}

# BPF_MAP_TYPE_* values (numeric so the generated source needs no new headers)
_T = dict(hash=1, array=2, prog_array=3, perf_event_array=4, percpu_hash=5,
          percpu_array=6, stack_trace=7, lru_hash=9, lru_percpu_hash=10, lpm_trie=11,
          devmap=14, sockmap=15, sockhash=18, queue=22, stack=23, sk_storage=24,
          devmap_hash=25, ringbuf=27, task_storage=29, bloom_filter=30)

# (kind, weight)
_KINDS = [("hash", 30), ("array", 14), ("percpu_hash", 8), ("percpu_array", 8),
          ("lru_hash", 10), ("lru_percpu_hash", 4), ("lpm_trie", 4), ("queue", 2),
          ("stack", 2), ("bloom_filter", 2), ("ringbuf", 3), ("perf_event_array", 2),
          ("prog_array", 3), ("stack_trace", 2), ("devmap_hash", 1), ("devmap", 1),
          ("sockmap", 1), ("sockhash", 1), ("sk_storage", 1), ("task_storage", 1)]
_KEY_SIZES = [1, 2, 3, 4, 4, 4, 5, 7, 8, 8, 12, 13, 16, 16, 20, 24, 32, 40, 64, 100]
_VALUE_SIZES = [1, 3, 4, 7, 8, 8, 13, 16, 16, 24, 32, 40, 48, 64, 100, 128, 256, 1024]
_MAX_ENTRIES = [1, 2, 7, 16, 64, 100, 128, 256, 1000, 1024, 4096, 10000, 16384, 65536,
                100000, 131072, 262144]
_SECTIONS = ["xdp", "tc", "socket", "kprobe/sym_{n}", "tracepoint/synth/ev_{n}",
             "raw_tp/ev_{n}", "cgroup_skb/ingress", "cgroup_skb/egress", "sk_msg",
             "sk_skb/stream_verdict", "classifier", "perf_event"]


class _Rng:
    """splitmix64: tiny, and stable across Python versions (unlike random)."""

    def __init__(self, seed: int):
        self.s = seed & 0xFFFFFFFFFFFFFFFF

    def next(self) -> int:
        self.s = (self.s + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        return self.next() % n

    def choice(self, seq):
        return seq[self.below(len(seq))]

    def weighted(self, pairs):
        total = sum(w for _, w in pairs)
        r = self.below(total)
        for item, w in pairs:
            if r < w:
                return item
            r -= w
        raise AssertionError


def _map_def(rng: _Rng, i: int) -> tuple[str, str, int, int]:
    """One BTF map definition -> (C text, usage kind, key size, value size)."""
    kind = rng.weighted(_KINDS)
    name = f"m{i:05d}_{kind}"
    typed = rng.below(10) < 7
    ks = rng.choice(_KEY_SIZES)
    vs = rng.choice(_VALUE_SIZES)
    me = rng.choice(_MAX_ENTRIES)
    flags: list[str] = []
    lines = [f"\t__uint(type, {_T[kind]});"]
    use = "lookup"

    def kv(k: int | None, v: int | None, force_size: bool = False):
        if k is not None:
            lines.append(f"\t__type(key, struct k{k});" if typed and not force_size
                         else f"\t__uint(key_size, {k});")
        if v is not None:
            lines.append(f"\t__type(value, struct v{v});" if typed and not force_size
                         else f"\t__uint(value_size, {v});")

    if kind in ("hash", "percpu_hash"):
        if rng.below(4) == 0:
            flags.append("BPF_F_NO_PREALLOC")
        kv(ks, vs)
    elif kind in ("array", "percpu_array"):
        ks = 4
        if kind == "array" and rng.below(6) == 0:
            flags.append("BPF_F_MMAPABLE")
        if typed:       # the kernel wants a 32-bit int BTF key for arrays
            lines.append("\t__type(key, __u32);")
            kv(None, vs)
        else:
            kv(4, vs)
    elif kind in ("lru_hash", "lru_percpu_hash"):
        if rng.below(5) == 0:
            flags.append("BPF_F_NO_COMMON_LRU")
        kv(ks, vs)
    elif kind == "lpm_trie":
        ks = 4 + rng.choice([1, 2, 3, 4, 8, 16])
        flags.append("BPF_F_NO_PREALLOC")
        kv(ks, vs, force_size=True)
    elif kind in ("queue", "stack"):
        ks, vs = 0, min(vs, 64)
        kv(None, vs)
        use = "peek"
    elif kind == "bloom_filter":
        ks, vs = 0, min(vs, 64)
        kv(None, vs)
        lines.append(f"\t__uint(map_extra, {1 + rng.below(15)});")
        use = "peek"
    elif kind == "ringbuf":
        ks = vs = 0
        me = 4096 << rng.below(9)
        use = "ringbuf"
    elif kind == "perf_event_array":
        ks = vs = 4
        kv(4, 4, force_size=True)
        if rng.below(2):
            me = 0
        use = "perf"
    elif kind == "prog_array":
        ks = vs = 4
        kv(4, 4, force_size=True)
        use = "tail"
    elif kind == "stack_trace":
        ks, vs = 4, 8 * (1 + rng.below(127))
        kv(4, vs, force_size=True)
        use = "stackid"
    elif kind in ("devmap", "devmap_hash", "sockmap", "sockhash"):
        ks = 4 if kind != "sockhash" else ks
        vs = 4
        kv(ks, 4, force_size=True)
        use = "none"
    elif kind in ("sk_storage", "task_storage"):
        ks, me = 4, 0
        flags.append("BPF_F_NO_PREALLOC")
        lines.append("\t__type(key, int);")
        lines.append(f"\t__type(value, struct v{vs});")
        use = "none"
    if me:
        lines.append(f"\t__uint(max_entries, {me});")
    if rng.below(25) == 0 and kind not in ("ringbuf",):
        flags.append("BPF_F_NUMA_NODE")
        lines.append("\t__uint(numa_node, 0);")
    if rng.below(40) == 0:
        lines.append("\t__uint(pinning, LIBBPF_PIN_BY_NAME);")
    if flags:
        lines.append(f"\t__uint(map_flags, {' | '.join(flags)});")
    text = "struct {\n" + "\n".join(lines) + f"\n}} {name} SEC(\".maps\");\n"
    return text, use, ks, vs


def _use_map(name: str, use: str, ks: int, vs: int, j: int) -> str:
    if use == "lookup":
        return (f"\t{{\n\t\t__u8 key{j}[{ks}] = {{}};\n\t\t__u8 *v;\n"
                f"\t\tkey{j}[0] = (__u8)x;\n"
                f"\t\tv = bpf_map_lookup_elem(&{name}, key{j});\n"
                f"\t\tif (v)\n\t\t\tx += v[0];\n\t}}\n")
    if use == "peek":
        return (f"\t{{\n\t\t__u8 val{j}[{vs}] = {{}};\n"
                f"\t\tif (bpf_map_peek_elem(&{name}, val{j}) == 0)\n"
                f"\t\t\tx += val{j}[0];\n\t}}\n")
    if use == "ringbuf":
        return f"\tbpf_ringbuf_output(&{name}, &x, sizeof(x), 0);\n"
    if use == "perf":
        return f"\tbpf_perf_event_output(ctx, &{name}, BPF_F_CURRENT_CPU, &x, sizeof(x));\n"
    if use == "tail":
        return f"\tbpf_tail_call(ctx, &{name}, (__u32)x & 3);\n"
    if use == "stackid":
        return f"\tx += bpf_get_stackid(ctx, &{name}, 0);\n"
    return ""


def generate_synthetic() -> str:
    p = SYNTHETIC_PARAMS
    rng = _Rng(p["seed"])
    out = [
        "// SPDX-License-Identifier: GPL-2.0\n",
        "/* GENERATED by tests/bpf/build.py - do not edit.\n",
        f" * Synthetic benchmark object: {p['maps']} BTF maps of mixed types and shapes,\n",
        f" * {p['programs']} programs that each reference a few of them (seed {p['seed']}).\n",
        " * Openable by libbpf, not meant to be loaded. */\n",
        "#include <linux/types.h>\n#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\n",
    ]
    for k in sorted(set(_KEY_SIZES) | {5, 6, 8, 12, 20}):
        out.append(f"struct k{k} {{ __u8 b[{k}]; }};\n")
    for v in sorted(set(_VALUE_SIZES)):
        out.append(f"struct v{v} {{ __u8 b[{v}]; }};\n")
    out.append("\n")

    maps = []
    for i in range(p["maps"]):
        text, use, ks, vs = _map_def(rng, i)
        out.append(text)
        name = text.rsplit("} ", 1)[1].split(" ", 1)[0]
        maps.append((name, use, ks, vs))
    usable = [m for m in maps if m[1] != "none"]

    out.append("\n/* global data: .data, .bss, .rodata */\n")
    out.append("__u64 synth_counter = 1;\n__u64 synth_hits;\n")
    out.append("const volatile __u32 synth_cfg[4] = { 1, 2, 3, 4 };\n\n")
    out.append("static __noinline __u64 synth_mix(__u64 x)\n{\n"
               "\tsynth_hits++;\n\treturn x * 31 + synth_cfg[x & 3];\n}\n\n")

    for i in range(p["programs"]):
        sec = rng.choice(_SECTIONS).format(n=i)
        nrefs = 2 + rng.below(3)
        refs, stack = [], 0
        for _ in range(8 * nrefs):      # bounded: keeps the 512-byte BPF stack happy
            if len(refs) == nrefs:
                break
            m = rng.choice(usable)
            need = m[2] if m[1] == "lookup" else m[3] if m[1] == "peek" else 8
            if m not in refs and stack + need <= 320:
                refs.append(m)
                stack += need
        body = "".join(_use_map(name, use, ks, vs, j)
                       for j, (name, use, ks, vs) in enumerate(refs))
        mix = "\tx = synth_mix(x);\n" if rng.below(4) == 0 else ""
        out.append(f"SEC(\"{sec}\")\nint p{i:05d}(void *ctx)\n{{\n"
                   f"\t__u64 x = synth_counter + {i};\n{mix}{body}\treturn x & 1;\n}}\n\n")
    out.append("char LICENSE[] SEC(\"license\") = \"GPL\";\n")
    return "".join(out)


# ---------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Build BPF test objects and MANIFEST.json")
    ap.add_argument("--check", action="store_true",
                    help="verify MANIFEST.json against the files (no clang needed)")
    ap.add_argument("--clang", default=os.environ.get("CLANG", "clang"),
                    help="clang binary (default: $CLANG or clang)")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--emit-synthetic", metavar="PATH",
                    help="write the generated synthetic C source to PATH and exit")
    args = ap.parse_args(argv)
    if args.emit_synthetic:
        Path(args.emit_synthetic).write_text(generate_synthetic())
        return 0
    if args.check:
        return check()
    return build(args.clang, max(1, args.jobs))


if __name__ == "__main__":
    sys.exit(main())
