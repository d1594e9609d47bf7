"""Boot Debian kernels under qemu (TCG) with the probe as /init and collect its output.

* :func:`fetch_kernel` downloads ``linux-image-<ver>-cloud-amd64`` with a private apt state
  (the system's apt configuration and lists are not touched) and caches the extracted
  ``vmlinuz`` under ``$XDG_CACHE_HOME/bpfmem/kernels`` (default ``~/.cache/bpfmem/kernels``).
* :func:`build_initramfs` writes a cpio "newc" archive: ``/init`` (the static probe),
  ``/specs.txt``, ``/dev/console``, ``/proc``, ``/sys``.
* :func:`run_vm` boots ``qemu-system-x86_64 -accel tcg`` (arm64: ``qemu-system-aarch64 -M virt
  -cpu cortex-a72``, console ttyAMA0, the probe cross-built) and parses the serial console.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable

from bpfmem.errors import HostError
from bpfmem.host import cache
from bpfmem.host.probe import build_probe, parse_output
from bpfmem.inputs import check_input

__all__ = ["KERNELS", "fetch_kernel", "cached_kernels", "build_initramfs", "run_vm",
           "QEMU", "QEMU_PACKAGE"]

QEMU = "qemu-system-x86_64"
QEMU_PACKAGE = "qemu-system-x86"
_MIRROR = "http://deb.debian.org/debian"
_SECURITY = "http://deb.debian.org/debian-security"
_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"

# version -> (apt source lines (url, suite), package-name regex, cached file glob)
KERNELS: dict[str, tuple[list[tuple[str, str]], str, str]] = {
    "5.10": ([(_MIRROR, "bullseye"), (_SECURITY, "bullseye-security")],
             r"linux-image-(5\.10\.0-\d+-cloud-amd64)", "vmlinuz-5.10.0-*-cloud-amd64"),
    "6.1": ([(_MIRROR, "bookworm"), (_SECURITY, "bookworm-security")],
            r"linux-image-(6\.1\.0-\d+-cloud-amd64)", "vmlinuz-6.1.0-*-cloud-amd64"),
    # bookworm-security only: bookworm-backports' 6.12.95 oopses at boot under TCG
    "6.12": ([(_SECURITY, "bookworm-security")],
             r"linux-image-(6\.12\.\d+\+deb12-cloud-amd64)", "vmlinuz-6.12.*+deb12-cloud-amd64"),
    # arm64 (an uncompressed arm64 Image as boot/vmlinuz-*), booted with qemu-system-aarch64
    "6.1-arm64": ([(_MIRROR, "bookworm"), (_SECURITY, "bookworm-security")],
                  r"linux-image-(6\.1\.0-\d+-cloud-arm64)", "vmlinuz-6.1.0-*-cloud-arm64"),
}
# the other flavours of each release (struct sizes differ: PREEMPT_RT's locks, configs)
for _rel, _suites, _ver in (("6.1", [(_MIRROR, "bookworm"), (_SECURITY, "bookworm-security")],
                             r"6\.1\.0-\d+"),
                            ("6.12", [(_SECURITY, "bookworm-security")], r"6\.12\.\d+\+deb12")):
    for _flavour, _suffix in (("generic", "amd64"), ("rt", "rt-amd64")):
        KERNELS[f"{_rel}-{_flavour}"] = (_suites, f"linux-image-({_ver}-{_suffix})",
                                         f"vmlinuz-{_rel}*-{_suffix}")
ARCH_OF = {"6.1-arm64": "arm64"}     # Debian architecture of a series (default amd64)
# Debian architecture -> (qemu binary, Debian package, machine arguments, console)
QEMU_FOR = {
    "amd64": (QEMU, QEMU_PACKAGE, ["-accel", "tcg"], "ttyS0"),
    "arm64": ("qemu-system-aarch64", "qemu-system-arm",
              ["-accel", "tcg", "-M", "virt", "-cpu", "cortex-a72"], "ttyAMA0"),
}


def _kernel_cache() -> Path:
    return Path(cache.root()) / "kernels"


def _release_key(name: str) -> tuple:
    return tuple(int(x) if x.isdigit() else x for x in re.split(r"(\d+)", name))


def cached_kernels(version: str) -> list[Path]:
    """Cached vmlinuz files for a series ("6.1"), oldest first."""
    if version not in KERNELS:
        raise ValueError(f"unknown kernel series {version!r}; known: {', '.join(KERNELS)}")
    name = re.compile("vmlinuz-" + KERNELS[version][1][len("linux-image-"):])
    found = [p for p in _kernel_cache().glob(KERNELS[version][2])
             if p.is_file() and name.fullmatch(p.name)]
    return sorted(found, key=lambda p: _release_key(p.name))


def _dpkg_cmp(a: str, b: str) -> int:
    if a == b:
        return 0
    lt = subprocess.run(["dpkg", "--compare-versions", a, "lt", b]).returncode == 0
    return -1 if lt else 1


def fetch_kernel(version: str, *, refresh: bool = False) -> Path:
    """A Debian cloud kernel image for ``version`` ("5.10", "6.1", "6.12", "6.1-arm64").

    A path to an existing file is returned as is. A cached image is reused unless
    ``refresh``; otherwise the newest ``linux-image-*-cloud-amd64`` of the series is
    downloaded with ``apt-get download`` (private sources list and state in a temporary
    directory) and ``boot/vmlinuz-*`` is cached as ``vmlinuz-<release>`` together with
    ``vmlinuz-<release>.version`` holding the Debian package version.
    """
    if version not in KERNELS:
        p = Path(version)
        if os.path.lexists(p):          # a kernel image a user named: the checks of every input
            check_input(p, "kernel")
            return p
        raise HostError(f"no such kernel image and not a known series: {version!r} "
                        f"(known: {', '.join(KERNELS)})")
    if not refresh:
        have = cached_kernels(version)
        if have:
            return have[-1]
    for tool in ("apt-get", "apt-cache", "dpkg-deb", "dpkg"):
        if shutil.which(tool) is None:
            raise HostError(f"fetching a Debian kernel needs {tool} (Debian package apt/dpkg)")
    sources, pattern, _ = KERNELS[version]
    kernels = _kernel_cache()
    kernels.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="bpfmem-kernel-"))
    try:
        for d in ("etc/sources.list.d", "etc/preferences.d", "state/lists/partial",
                  "cache/archives/partial", "deb", "x"):
            (tmp / d).mkdir(parents=True)
        (tmp / "etc/sources.list").write_text("".join(
            f"deb [signed-by={_KEYRING}] {url} {suite} main\n" for url, suite in sources))
        opts = [
            "-o", f"Dir::Etc::SourceList={tmp}/etc/sources.list",
            "-o", f"Dir::Etc::SourceParts={tmp}/etc/sources.list.d",
            "-o", f"Dir::Etc::Preferences={tmp}/etc/preferences",
            "-o", f"Dir::Etc::PreferencesParts={tmp}/etc/preferences.d",
            "-o", f"Dir::State={tmp}/state",
            "-o", "Dir::State::status=/var/lib/dpkg/status",
            "-o", f"Dir::Cache={tmp}/cache",
            "-o", f"APT::Architectures={ARCH_OF.get(version, 'amd64')}",
            "-o", "Acquire::Languages=none",
            "-o", "APT::Sandbox::User=root",
        ]

        def apt(*args: str, cwd: Path | None = None) -> str:
            proc = subprocess.run(list(args[:1]) + opts + list(args[1:]), cwd=cwd,
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise HostError(f"{' '.join(args)} failed: {proc.stderr.strip()[-800:]}")
            return proc.stdout

        apt("apt-get", "-q", "update")
        names = [n for n in apt("apt-cache", "pkgnames", "linux-image-").split()
                 if re.fullmatch(pattern, n)]
        if not names:
            raise HostError(f"no package matching {pattern} in {sources}")
        versions: dict[str, str] = {}
        for name in names:
            show = apt("apt-cache", "show", "--no-all-versions", name)
            m = re.search(r"^Version: (\S+)", show, re.M)
            if m:
                versions[name] = m.group(1)
        best = max(versions, key=functools.cmp_to_key(
            lambda a, b: _dpkg_cmp(versions[a], versions[b])))
        apt("apt-get", "-q", "download", best, cwd=tmp / "deb")
        debs = list((tmp / "deb").glob("*.deb"))
        if len(debs) != 1:
            raise HostError(f"apt-get download {best} produced {debs}")
        proc = subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(tmp / "x")],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise HostError(f"dpkg-deb -x {debs[0].name} failed: {proc.stderr.strip()}")
        images = list((tmp / "x/boot").glob("vmlinuz-*"))
        if len(images) != 1:
            raise HostError(f"{debs[0].name} holds {len(images)} boot/vmlinuz-* files")
        release = images[0].name[len("vmlinuz-"):]
        target = kernels / f"vmlinuz-{release}"
        part = kernels / f".{target.name}.part"
        shutil.copyfile(images[0], part)
        os.replace(part, target)
        (kernels / f"{target.name}.version").write_text(f"{best} {versions[best]}\n")
        return target
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- initramfs ----

def _cpio_entry(name: str, mode: int, data: bytes = b"", ino: int = 0,
                rdev: tuple[int, int] = (0, 0), nlink: int = 1) -> bytes:
    namez = name.encode() + b"\0"
    fields = [ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rdev[0], rdev[1], len(namez), 0]
    head = b"070701" + b"".join(b"%08X" % f for f in fields)
    out = head + namez
    out += b"\0" * (-len(out) % 4)
    out += data
    out += b"\0" * (-len(out) % 4)
    return out


def build_initramfs(probe: Path, spec_text: str,
                    files: Iterable[tuple[str, int, bytes]] = ()) -> bytes:
    """An uncompressed cpio (newc) archive with ``/init`` = the probe and ``/specs.txt``, and
    ``files`` (name at the root, permission bits, bytes: the program probe, objects)."""
    entries = [
        (".", 0o040755, b"", (0, 0), 2),
        ("dev", 0o040755, b"", (0, 0), 2),
        ("dev/console", 0o020600, b"", (5, 1), 1),
        ("proc", 0o040555, b"", (0, 0), 2),
        ("sys", 0o040555, b"", (0, 0), 2),
        ("init", 0o100755, Path(probe).read_bytes(), (0, 0), 1),
        ("specs.txt", 0o100644, spec_text.encode(), (0, 0), 1),
    ] + [(name, 0o100000 | mode, data, (0, 0), 1) for name, mode, data in files]
    parts = [_cpio_entry(n, m, d, ino=i + 1, rdev=r, nlink=l)
             for i, (n, m, d, r, l) in enumerate(entries)]
    parts.append(_cpio_entry("TRAILER!!!", 0))
    blob = b"".join(parts)
    return blob + b"\0" * (-len(blob) % 512)


# ---- qemu ----

def _die_with_parent() -> None:  # runs in the child before exec
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def run_vm(kernel: Path, spec_text: str, *, cpus: int = 2, memory: str = "2G",
           timeout: float = 900, append: str = "", probe: Path | None = None,
           on_start: Callable[[int], None] | None = None,
           log_tail: int = 40, arch: str = "amd64",
           files: Iterable[tuple[str, int, bytes]] = ()) -> tuple[dict, list[dict]]:
    """Boot ``kernel`` with the probe as /init; return ``(header, results)``.

    The header additionally carries ``boot_seconds`` (qemu start to the probe header) and
    ``run_seconds`` (qemu start to ``{"done":true}``). qemu is always killed (by its pid) and
    reaped, and the temporary directory removed, also on errors, timeouts and Ctrl-C.
    ``on_start`` is called with qemu's pid; ``files`` go into the initramfs beside the
    probe (:func:`build_initramfs`). Raises :class:`HostError` with the serial log
    tail when the probe output is incomplete.
    """
    if arch not in QEMU_FOR:
        raise HostError(f"no qemu for {arch!r} (known: {', '.join(QEMU_FOR)})")
    qemu_name, qemu_package, machine, console = QEMU_FOR[arch]
    qemu = shutil.which(qemu_name)
    if qemu is None:
        raise HostError(f"{qemu_name} not found (Debian package {qemu_package})")
    kernel = Path(kernel)
    if not kernel.is_file():
        raise HostError(f"no kernel image at {kernel}")
    binary = probe or build_probe(arch=arch)
    tmp = Path(tempfile.mkdtemp(prefix=f"bpfmem-vm-{os.getpid()}-"))
    proc: subprocess.Popen | None = None
    serial = tmp / "serial.log"
    try:
        initrd = tmp / "initrd.cpio"
        initrd.write_bytes(build_initramfs(binary, spec_text, files))
        cmdline = (f"console={console} panic=-1 oops=panic quiet printk.time=1 rdinit=/init "
                   + append).strip()
        args = [qemu, *machine, "-smp", str(cpus), "-m", str(memory),
                "-kernel", str(kernel), "-initrd", str(initrd), "-append", cmdline,
                "-nographic", "-nodefaults", "-monitor", "none",
                "-serial", f"file:{serial}", "-no-reboot"]
        with open(tmp / "qemu.out", "wb") as qout:
            start = time.monotonic()
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=qout, stderr=qout,
                                    preexec_fn=_die_with_parent)
        if on_start is not None:
            on_start(proc.pid)
        boot_s = run_s = None
        deadline = start + timeout
        while True:
            text = serial.read_text(errors="replace") if serial.exists() else ""
            if boot_s is None and '"probe":"bpfmem"' in text:
                boot_s = time.monotonic() - start
            if '{"done":true}' in text:
                run_s = time.monotonic() - start
                try:
                    proc.wait(timeout=60)  # the probe powers the VM off
                except subprocess.TimeoutExpired:
                    pass
                break
            if proc.poll() is not None:
                break
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
        text = serial.read_text(errors="replace") if serial.exists() else ""
        header, results = parse_output(text)
        if header is None or not header.get("done"):
            qemu_msg = (tmp / "qemu.out").read_text(errors="replace").strip()
            why = ("timed out after %ds" % timeout if proc.poll() is None
                   else f"qemu exited with {proc.returncode}")
            tail = "\n".join(text.replace("\r", "").splitlines()[-log_tail:])
            raise HostError(f"probe run in {kernel.name} incomplete ({why}; "
                            f"{len(results)} results). qemu: {qemu_msg[-400:]}\n"
                            f"serial log tail:\n{tail}")
        header["boot_seconds"] = round(boot_s, 1) if boot_s is not None else None
        header["run_seconds"] = round(run_s, 1) if run_s is not None else None
        return header, results
    finally:
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
