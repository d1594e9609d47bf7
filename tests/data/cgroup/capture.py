#!/usr/bin/env python3
"""Regenerate the captured cgroup fixtures of tests/test_cgroup.py (run as root).

    python3 tests/data/cgroup/capture.py              # v1 here, v2 under qemu: 5.10 6.1 6.12
    python3 tests/data/cgroup/capture.py --v1
    python3 tests/data/cgroup/capture.py --v2 6.1 5.10

v1 (this host, needs a cgroup v1 memory mount): creates kubepods/burstable/pod<uuid>/<id>
(two container ids sharing 16 hex digits) and docker/<id> under the v1 memory mount, puts a
child that touches ALLOC_MIB MiB and creates a MAP_BYTES BPF array map into the first
container, copies the cgroup files, /proc/<child>/{cgroup,mountinfo}, /proc/self/mountinfo and
every cgroup2 mount's cgroup.controllers into v1/root/, then kills the child (by pid) and
removes the cgroups, also on errors and Ctrl-C.

v2 (a Debian cloud kernel under qemu, via bpfmem.host.vm.run_vm): capture_init.c as /init
builds a systemd-driver kubepods tree (cri-containerd, crio and docker scopes), does the same
child and prints the files; they land in v2-<series>/root/. Each capture writes meta.json.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from secrets import token_hex

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "src"))

from bpfmem.host.cgroup import remove_cgroup_dir as _rmdir_cgroup  # noqa: E402
from bpfmem.host.procfs import mounts_of_type, read_mountinfo  # noqa: E402

ALLOC_MIB = 20
MAP_BYTES = 4 << 20
LIMITS = {"pod": 512 << 20, "container": 256 << 20}
V1_FILES = ["memory.usage_in_bytes", "memory.limit_in_bytes", "memory.max_usage_in_bytes",
            "memory.stat", "memory.kmem.usage_in_bytes", "memory.kmem.max_usage_in_bytes",
            "memory.kmem.limit_in_bytes", "memory.kmem.tcp.usage_in_bytes",
            "memory.memsw.usage_in_bytes", "memory.use_hierarchy", "cgroup.procs"]
V2_FILES = ["memory.current", "memory.max", "memory.peak", "memory.stat",
            "memory.swap.current", "memory.events", "cgroup.procs", "cgroup.controllers",
            "cgroup.subtree_control"]

CHILD = r"""
import ctypes, os, sys
mib, map_bytes = int(sys.argv[1]), int(sys.argv[2])
sys.stdin.readline()                       # wait until moved into the cgroup
buf = bytearray(b"\x01") * (mib << 20)     # written, so every page is really there
fd, err = -1, 0
if map_bytes:
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_uint32 * 32)(2, 4, 4096, map_bytes // 4096)  # ARRAY key 4 value 4096
    fd = libc.syscall(321, 0, attr, 72)   # bpf(BPF_MAP_CREATE)
    err = ctypes.get_errno() if fd < 0 else 0
print("ready", fd, err, flush=True)
sys.stdin.read()                           # until the capture closes the pipe
"""


def _ids() -> dict[str, str]:
    a = token_hex(32)
    return {"container": a, "sibling": a[:16] + token_hex(24), "docker": token_hex(32),
            "crio": token_hex(32), "pod": str(uuid.uuid4()), "pod2": str(uuid.uuid4())}


def _keep_mount(line: str) -> bool:
    """mountinfo lines kept in a fixture: /, /proc, /sys, /dev and the cgroup mounts (the
    rest of a host's mount table says nothing about cgroups and is the host's business)."""
    f = line.split()
    return len(f) > 4 and (f[4] in ("/", "/proc", "/sys", "/dev")
                           or f[4] == "/sys/fs/cgroup" or f[4].startswith("/sys/fs/cgroup/"))


def _redact(name: str, data: bytes) -> bytes:
    if name != "mountinfo":
        return data
    lines = data.decode().splitlines(keepends=True)
    return "".join(line for line in lines if _keep_mount(line)).encode()


def _copy(src: Path, dst: Path) -> bool:
    try:
        data = _redact(src.name, src.read_bytes())
    except OSError:
        return False
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(data)
    return True


def capture_v1(out: Path) -> None:
    mem = [m for m in mounts_of_type(read_mountinfo(), "cgroup")
           if "memory" in m.super_options.split(",")]
    if not mem:
        raise SystemExit("no cgroup v1 memory mount on this host")
    base = Path(mem[0].mount_point)
    ids = _ids()
    pod = f"kubepods/burstable/pod{ids['pod']}"
    rels = ["kubepods", "kubepods/burstable", pod, f"{pod}/{ids['container']}",
            f"{pod}/{ids['sibling']}", "docker", f"docker/{ids['docker']}"]
    for top in ("kubepods", "docker"):
        if (base / top).exists():
            raise SystemExit(f"{base / top} exists already: not touching a real hierarchy")
    created: list[Path] = []
    child: subprocess.Popen | None = None
    try:
        for rel in rels:
            (base / rel).mkdir()
            created.append(base / rel)
        (base / pod / "memory.limit_in_bytes").write_text(str(LIMITS["pod"]))
        (base / pod / ids["container"] / "memory.limit_in_bytes").write_text(
            str(LIMITS["container"]))
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(ALLOC_MIB), str(MAP_BYTES)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        (base / pod / ids["container"] / "cgroup.procs").write_text(str(child.pid))
        child.stdin.write("go\n")
        child.stdin.flush()
        ready = child.stdout.readline().split()
        if not ready or ready[0] != "ready":
            raise SystemExit(f"child failed: {ready}")
        time.sleep(1)
        if out.exists():
            shutil.rmtree(out)
        root = out / "root"
        for rel in rels:
            for name in V1_FILES:
                _copy(base / rel / name, root / base.relative_to("/") / rel / name)
        for name in ("cgroup", "mountinfo"):
            _copy(Path(f"/proc/{child.pid}/{name}"), root / f"proc/{child.pid}/{name}")
        _copy(Path("/proc/self/mountinfo"), root / "proc/self/mountinfo")
        for m in mounts_of_type(read_mountinfo(), "cgroup2"):
            for name in ("cgroup.controllers", "cgroup.subtree_control"):
                _copy(Path(m.mount_point, name), root / m.mount_point.lstrip("/") / name)
        meta = {"version": 1, "kernel": platform.release(), "captured": _now(),
                "where": "this host (cgroup v1 memory mount at %s)" % base,
                "pid": child.pid, "map_fd": int(ready[1]), "map_errno": int(ready[2]),
                "alloc_bytes": ALLOC_MIB << 20, "map_bytes": MAP_BYTES,
                "mount": str(base), "ids": ids,
                "cgroups": {"kubepods": "/kubepods", "pod": "/" + pod,
                            "container": f"/{pod}/{ids['container']}",
                            "sibling": f"/{pod}/{ids['sibling']}",
                            "docker": f"/docker/{ids['docker']}"},
                "limits": {"/" + pod: LIMITS["pod"],
                           f"/{pod}/{ids['container']}": LIMITS["container"]}}
        (out / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
        print(f"v1: {out} (kernel {meta['kernel']}, child {child.pid})")
    finally:
        if child is not None:
            child.stdin.close()
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        for d in reversed(created):
            _rmdir_cgroup(d)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")


def capture_v2(series: str, out: Path) -> None:
    from bpfmem.host.vm import cached_kernels, fetch_kernel, run_vm
    kernel = (cached_kernels(series) or [fetch_kernel(series)])[-1]
    ids = _ids()
    pod = f"kubepods.slice/kubepods-burstable.slice/" \
          f"kubepods-burstable-pod{ids['pod'].replace('-', '_')}.slice"
    pod2 = f"kubepods.slice/kubepods-besteffort.slice/" \
           f"kubepods-besteffort-pod{ids['pod2'].replace('-', '_')}.slice"
    cgs = [("kubepods.slice", "-"), ("kubepods.slice/kubepods-burstable.slice", "-"),
           (pod, str(LIMITS["pod"])),
           (f"{pod}/cri-containerd-{ids['container']}.scope", str(LIMITS["container"])),
           (f"{pod}/cri-containerd-{ids['sibling']}.scope", "-"),
           ("kubepods.slice/kubepods-besteffort.slice", "-"), (pod2, "-"),
           (f"{pod2}/crio-conmon-{ids['crio']}.scope", "-"),
           (f"{pod2}/crio-{ids['crio']}.scope", "-"),
           ("system.slice", "-"), (f"system.slice/docker-{ids['docker']}.scope", "-")]
    lines = [f"cg {p} {lim}" for p, lim in cgs]
    lines.append(f"child {cgs[3][0]} {ALLOC_MIB} {MAP_BYTES}")
    lines.append("sleep 2")
    lines += [f"dump /sys/fs/cgroup/{p}/{n}" for p, _ in cgs for n in V2_FILES]
    lines += [f"dump /sys/fs/cgroup/{n}" for n in ("cgroup.controllers",
                                                   "cgroup.subtree_control")]
    lines += [f"dump /proc/{w}/{n}" for w in ("$child", "self") for n in ("cgroup", "mountinfo")]
    tmp = Path(tempfile.mkdtemp(prefix="bpfmem-cgcap-"))
    try:
        init = tmp / "capture_init"
        subprocess.run(["gcc", "-O2", "-static", "-Wall", "-o", str(init),
                        str(HERE / "capture_init.c")], check=True)
        header, results = run_vm(kernel, "\n".join(lines) + "\n", probe=init, memory="1G",
                                 timeout=900)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if header.get("errors"):
        raise SystemExit(f"{kernel.name}: capture errors: {header['errors']}")
    child = next(r for r in results if r["id"] == "child")
    parts: dict[str, list[str]] = {}
    for r in results:
        if r["id"] != "child" and r.get("ok"):
            parts.setdefault(r["id"], []).append(r["b64"])
    if out.exists():
        shutil.rmtree(out)
    for path, chunks in parts.items():
        dst = out / "root" / path.lstrip("/")
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(_redact(dst.name, b"".join(base64.b64decode(c) for c in chunks)))
    missing = sorted(r["id"] for r in results if r["id"] != "child" and not r.get("ok"))
    meta = {"version": 2, "kernel": header["kernel"], "captured": _now(),
            "where": f"qemu TCG, {kernel.name}, capture_init.c as /init",
            "pid": child["pid"], "map_fd": child["map_fd"], "map_errno": child["map_errno"],
            "alloc_bytes": ALLOC_MIB << 20, "map_bytes": MAP_BYTES, "mount": "/sys/fs/cgroup",
            "ids": ids, "missing_files": missing,
            "cgroups": {"kubepods": "/kubepods.slice", "pod": "/" + pod,
                        "container": "/" + cgs[3][0], "sibling": "/" + cgs[4][0],
                        "docker": "/" + cgs[10][0], "crio": "/" + cgs[8][0]},
            "limits": {"/" + pod: LIMITS["pod"], "/" + cgs[3][0]: LIMITS["container"]}}
    (out / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    print(f"v2: {out} (kernel {header['kernel']}, child {child['pid']}, "
          f"boot {header.get('boot_seconds')} s, missing {len(missing)} files)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--v1", action="store_true", help="capture cgroup v1 on this host")
    ap.add_argument("--v2", nargs="*", metavar="SERIES",
                    help="capture cgroup v2 under qemu for these kernels (default 5.10 6.1 6.12)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root")
    both = not args.v1 and args.v2 is None
    if args.v1 or both:
        capture_v1(HERE / "v1")
    for series in (args.v2 or ["5.10", "6.1", "6.12"]) if (args.v2 is not None or both) else []:
        capture_v2(series, HERE / f"v2-{series}")


if __name__ == "__main__":
    main()
