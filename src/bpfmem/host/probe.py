"""Build and run the measuring probe (``probe.c``) on this host.

The probe is a small static C program that creates BPF maps from a spec file, fills them and
prints, per map, the ``memlock:`` of its fdinfo and the memory-cgroup charge (see the comment
at the top of ``probe.c`` for the spec and output formats). The same binary is the ``/init``
of the initramfs that :mod:`bpfmem.host.vm` boots under qemu.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from bpfmem.errors import HostError, PermissionDenied
from bpfmem.host import cache
from bpfmem.host.cgroup import scratch_cgroup
from bpfmem.host.cleanup import die_with_parent, scratch_name

__all__ = [
    "PROBE_SOURCE",
    "build_probe",
    "open_probe",
    "format_specs",
    "parse_output",
    "run_local",
]

PROBE_SOURCE = Path(__file__).with_name("probe.c")
# what the probes include: the memory cgroup counter both read (a digest covers it too)
COUNTER_HEADER = Path(__file__).with_name("cgcounter.h")
PROBE_SOURCES = (PROBE_SOURCE, COUNTER_HEADER)
# the probe compiled when the wheel was built (setup.py), with its sha256 beside it; a source
# checkout or an editable install has none, and build_probe compiles one into the cache
INSTALLED_PROBE = Path(__file__).with_name("probe")

_FIELDS = ("type", "key_size", "value_size", "max_entries", "map_flags", "map_extra")
_ID_RE = re.compile(r"^[A-Za-z0-9_.:+/=@-]{1,100}$")


# Debian architecture -> (C compiler, its Debian packages): the probe for a VM of another
# architecture is cross-built
CROSS_CC = {"amd64": ("gcc", "gcc libc6-dev"),
            "arm64": ("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu libc6-dev-arm64-cross")}


def install_built(tmp: str, target: str) -> None:
    """Put a program just compiled at ``tmp`` in place at ``target``, with its sha256 beside
    it (``target.sha256``, made 0600 and moved first): the one way bpfmem installs a helper
    it built (the probe, the program loader), checked by sha256 before each run. A previous
    ``target`` (one that failed that check) is removed, never left to run."""
    os.chmod(tmp, 0o700)
    with open(tmp, "rb") as f:
        built = hashlib.sha256(f.read()).hexdigest()
    side = f"{tmp}.sha256"
    with open(os.open(side, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(built + "\n")
    if os.path.lexists(target):
        os.unlink(target)
    os.replace(side, f"{target}.sha256")
    os.replace(tmp, target)


def build_probe(cache_dir: str | os.PathLike | None = None, *, arch: str = "amd64") -> Path:
    """The probe binary: the one built with the installed package (:data:`INSTALLED_PROBE`)
    when :func:`open_probe` trusts it for this user, else ``probe.c`` compiled with
    ``gcc -O2 -static`` into the cache (``cache_dir``, which also skips the installed one),
    keyed by a hash of its sources (probe.c and cgcounter.h). ``arch`` "arm64": cross-built with
    ``aarch64-linux-gnu-gcc`` (never the installed one).

    The cache is a private directory (``cache.root()/probe``, created mode 0700) that must be
    owned by this user and writable by nobody else: the probe runs as root, and a binary
    planted by another user (``sudo -E`` keeps ``XDG_CACHE_HOME``) must never run. Beside
    each binary ``probe-<source hash>.sha256`` records the binary's own hash when it was
    built; :func:`open_probe` checks owner, mode and that hash before anything executes it,
    and a cached binary that fails the check is rebuilt.

    Raises :class:`HostError` when gcc or the static C library (Debian: ``libc6-dev``) is
    missing, when the compile fails, or when the cache directory is not private.
    """
    if cache_dir is None and arch == "amd64" and INSTALLED_PROBE.exists():
        try:
            os.close(open_probe(INSTALLED_PROBE))
            return INSTALLED_PROBE
        except HostError:
            pass   # installed by another user (a venv run with sudo): build our own
    if arch not in CROSS_CC:
        raise HostError(f"no compiler known for a probe on {arch!r} ({', '.join(CROSS_CC)})")
    cc, packages = CROSS_CC[arch]

    def explain(err: str) -> str | None:
        if "cannot find -lc" in err or "libc.a" in err or "crt1.o" in err:
            return ("building the bpfmem probe needs the static C library "
                    f"(Debian package libc6-dev): {err[-500:]}")
        if "linux/bpf.h" in err:
            return ("building the bpfmem probe needs the kernel UAPI headers "
                    f"(Debian package linux-libc-dev): {err[-500:]}")
        return None
    return build_helper("probe" if arch == "amd64" else f"probe-{arch}", PROBE_SOURCES, cc,
                        ["-O2", "-static", "-Wall"], [], cache_dir=cache_dir,
                        missing=f"building the bpfmem probe needs {cc} (Debian packages: "
                                f"{packages})", explain=explain)


def source_digest(sources: Iterable[Path]) -> str:
    """What names a helper built from ``sources`` (the C file, then what it includes): the
    first 16 hex digits of the sha256 of their bytes, in order."""
    h = hashlib.sha256()
    for src in sources:
        h.update(src.read_bytes())
    return h.hexdigest()[:16]


def build_helper(stem: str, sources: tuple[Path, ...], cc: str, flags: list[str],
                 libs: list[str], *, cache_dir: str | os.PathLike | None, missing: str,
                 explain: Callable[[str], str | None]) -> Path:
    """The one frame both helpers (the probe, the program loader) are built in:
    ``sources[0]`` compiled with ``cc flags -o OUT SOURCE libs`` once per content of
    ``sources`` into the private cache as ``stem-<digest>`` (:func:`source_digest`) and
    installed with its sha256 (:func:`install_built`); an existing one that
    :func:`open_probe` trusts is reused. HostError: ``missing`` without ``cc``, ``explain``'s
    words for a compiler error it recognises, else the compiler's last lines."""
    gcc = shutil.which(cc)
    if gcc is None:
        raise HostError(missing)
    out_dir = Path(cache_dir) if cache_dir is not None else Path(cache.root()) / "probe"
    _private_dir(out_dir)
    target = out_dir / f"{stem}-{source_digest(sources)}"
    try:
        os.close(open_probe(target))
        return target
    except HostError:
        pass   # missing, or not ours, or changed since it was built: build it again
    fd, tmp = tempfile.mkstemp(prefix=f".{stem}-", dir=out_dir)
    os.close(fd)
    try:
        proc = subprocess.run([gcc, *flags, "-o", tmp, str(sources[0]), *libs],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            err = proc.stderr.strip()
            raise HostError(explain(err) or f"compiling {sources[0]} failed: {err[-1500:]}")
        install_built(tmp, target)
    finally:
        for leftover in (tmp, f"{tmp}.sha256"):
            if os.path.lexists(leftover):
                os.unlink(leftover)
    os.close(open_probe(target))
    return target


def _private_dir(path: Path) -> None:
    """Create ``path`` (mode 0700) if missing; refuse it unless this user owns it and nobody
    else can write to it (:func:`bpfmem.host.cache.private_dir`)."""
    why = cache.private_dir(path, create=True)
    if why is not None:
        hint = ("; remove it, or point XDG_CACHE_HOME at a directory of yours"
                if why.startswith("owned by") else "")
        raise HostError(f"refusing the probe cache {path}: {why}{hint}")


def open_probe(path: str | os.PathLike) -> int:
    """A read-only fd of the probe binary at ``path`` once it is proven safe to run as root:
    a regular file (no symlink) in a directory of this user that nobody else can write,
    owned by this user, writable only by them, one link, and with the sha256 recorded
    beside it when it was built. Execute the fd (``/proc/self/fd/N``), never the path: what
    ran is what was checked. Raises HostError naming what failed."""
    import stat
    path = Path(path)
    me = os.geteuid()
    try:
        dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise HostError(f"probe {path}: {e.strerror or e}") from None
    try:
        dst = os.fstat(dfd)
        if dst.st_uid != me or dst.st_mode & 0o022:
            raise HostError(f"refusing to run {path}: its directory is owned by uid "
                            f"{dst.st_uid} or writable by others")
        try:
            fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
        except OSError as e:
            raise HostError(f"probe {path}: {e.strerror or e}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
                raise HostError(f"refusing to run {path}: not a regular file with one link")
            if st.st_uid != me or st.st_mode & 0o022:
                raise HostError(f"refusing to run {path}: owned by uid {st.st_uid} or "
                                f"writable by others (mode {st.st_mode & 0o7777:o})")
            h = hashlib.sha256()
            while chunk := os.read(fd, 1 << 20):
                h.update(chunk)
            recorded = _recorded_hash(dfd, path.name + ".sha256", me)
            if recorded != h.hexdigest():
                raise HostError(f"refusing to run {path}: its sha256 {h.hexdigest()[:16]} is "
                                "not the one recorded when it was built")
            os.lseek(fd, 0, os.SEEK_SET)
            return fd
        except BaseException:
            os.close(fd)
            raise
    finally:
        os.close(dfd)


def _recorded_hash(dfd: int, name: str, me: int) -> str | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid != me or st.st_mode & 0o022:
            return None
        return os.read(fd, 200).decode(errors="replace").strip()
    finally:
        os.close(fd)


def _num(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be an integer, not {value!r}")
    if value < 0:
        raise ValueError(f"{what} must not be negative: {value}")
    return value


def shape_spec(sid: str, shape, fills: Iterable[int] = ()) -> dict[str, Any]:
    """The spec mapping :func:`format_specs` takes, for a model MapShape (or anything with
    the kernel's attribute names)."""
    return {"id": sid, "type": int(shape.type), "key_size": shape.key_size,
            "value_size": shape.value_size, "max_entries": shape.max_entries,
            "map_flags": shape.map_flags, "map_extra": shape.map_extra, "fills": list(fills)}


def format_specs(specs: Iterable[Mapping[str, Any]], *, sizes: Iterable[str] = ()) -> str:
    """The probe's spec file text for ``specs``.

    Each spec is a mapping with ``type`` (number or libbpf name), ``key_size``,
    ``value_size``, ``max_entries``, and optionally ``map_flags`` (int or flag names),
    ``map_extra``, ``fills`` (list of element counts) and ``id`` (default ``s<index>``).
    ``sizes`` adds a ``sizes`` line (struct sizes from the kernel's BTF, printed first).
    """
    from bpfmem.uapi import MapType, parse_flags

    lines = ["# bpfmem probe specs: id type key_size value_size max_entries map_flags map_extra fills"]
    names = [n for n in sizes]
    for n in names:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n):
            raise ValueError(f"not a C identifier: {n!r}")
    if names:
        lines.append("sizes " + ",".join(names))
    seen: set[str] = set()
    for i, spec in enumerate(specs):
        sid = str(spec.get("id", f"s{i}"))
        if not _ID_RE.match(sid):
            raise ValueError(f"spec id {sid!r}: use 1-100 characters of [A-Za-z0-9_.:+/=@-]")
        if sid in seen:
            raise ValueError(f"duplicate spec id {sid!r}")
        seen.add(sid)
        mtype = spec["type"]
        mtype = int(MapType.from_name(mtype)) if isinstance(mtype, str) else _num(mtype, "type")
        flags = spec.get("map_flags", 0) or 0
        flags = parse_flags(flags) if not isinstance(flags, int) else _num(flags, "map_flags")
        fills = spec.get("fills") or []
        fill_text = ",".join(str(_num(n, "fills")) for n in fills) if fills else "-"
        lines.append(" ".join([
            sid, str(mtype),
            str(_num(spec["key_size"], "key_size")),
            str(_num(spec["value_size"], "value_size")),
            str(_num(spec["max_entries"], "max_entries")),
            hex(flags), hex(_num(spec.get("map_extra", 0) or 0, "map_extra")),
            fill_text,
        ]))
    return "\n".join(lines) + "\n"


# Kernel console lines carry a timestamp when printk.time=1 (vm.py sets it).
_KMSG_RE = re.compile(r"\[\s*\d+\.\d{3,9}\][^\n]*(\n|$)")
_DECODER = json.JSONDecoder()


def _decode_at(text: str) -> dict | None:
    """The JSON object that ``text`` (stripped) consists of, or None."""
    text = text.strip()
    try:
        obj, end = _DECODER.raw_decode(text)
    except ValueError:
        return None
    if isinstance(obj, dict) and not text[end:].strip():
        return obj
    return None


def _objects(text: str) -> list[dict]:
    text = text.replace("\r", "")
    text = _KMSG_RE.sub("", text)  # a kernel message inside one of our lines is cut out
    lines = text.split("\n")
    found: list[dict] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        starts = [m.start() for m in re.finditer(r"\{", line)]
        got = None
        for s in starts:
            candidate = line[s:]
            got = _decode_at(candidate)
            if got is not None:
                break
            if not candidate.rstrip().endswith("}") or s == starts[0]:
                # maybe split across lines by noise: join with the next lines, possibly
                # skipping up to a few noise lines in between
                for k in range(1, 6):
                    if i + k >= len(lines):
                        break
                    joined = candidate + "".join(lines[i + 1:i + k + 1])
                    got = _decode_at(joined)
                    if got is None:
                        got = _decode_at(candidate + lines[i + k])
                    if got is not None:
                        i += k
                        break
                if got is not None:
                    break
        if got is not None:
            found.append(got)
        i += 1
    return found


def parse_output(text: str) -> tuple[dict | None, list[dict]]:
    """Split probe output into ``(header, results)``.

    Only lines that parse as JSON objects count; kernel console noise is skipped and, as far
    as practical, a JSON line split by a kernel message is put back together. ``header`` is
    the probe's header object (None if absent) extended with ``sizes`` (merged ``sizes``
    lines), ``done`` (True when the final line arrived), ``spec_errors``, ``errors`` and
    ``programs`` (the program probe's lines of ``progs OBJ`` spec lines, in order).
    ``results`` are the per-map objects (they have an ``id``), in order.
    """
    header: dict | None = None
    results: list[dict] = []
    sizes: dict[str, Any] = {}
    spec_errors: list[dict] = []
    errors: list[dict] = []
    done = False
    programs: list[dict] = []
    for obj in _objects(text):
        if "obj" in obj and ("kind" in obj or "progs_error" in obj):
            programs.append(obj)       # the program probe's lines (a `progs OBJ` spec line)
        elif obj.get("probe") == "bpfmem" and header is None:
            header = dict(obj)
        elif "sizes" in obj and isinstance(obj["sizes"], dict):
            sizes.update(obj["sizes"])
        elif obj.get("done") is True:
            done = True
        elif "spec_error" in obj:
            spec_errors.append(obj)
        elif "id" in obj and "ok" in obj:
            results.append(obj)
        elif "error" in obj:
            errors.append(obj)
    if header is not None:
        header["sizes"] = sizes
        header["done"] = done
        header["spec_errors"] = spec_errors
        header["errors"] = errors
        header["programs"] = programs
    return header, results


def _require_root(what: str = "creating BPF maps") -> None:
    if os.geteuid() != 0:
        raise PermissionDenied(what, "CAP_BPF and CAP_SYS_ADMIN")


# the probe's flags that change how it measures (see probe.c): every spec in the one cgroup
# given, instead of a fresh child each; each map closed inside the next spec's readings
PROBE_OPTIONS = ("--one-cgroup", "--overlap-frees")


def run_local(specs: Iterable[Mapping[str, Any]] | str, cgroup: str = "v1", *,
              sizes: Iterable[str] = (), timeout: float | None = 3600,
              probe: Path | None = None,
              options: Iterable[str] = ()) -> tuple[dict, list[dict]]:
    """Run the probe on this host; return ``(header, results)`` as :func:`parse_output`.

    ``specs`` are spec mappings (see :func:`format_specs`) or ready spec-file text.
    ``cgroup`` is ``"v1"`` (scratch cgroups under the v1 memory mount, counter
    ``memory.kmem.usage_in_bytes``), ``"v2"`` (under the cgroup2 mount, if it delegates the
    memory controller) or ``"none"`` (charges reported as None). The scratch cgroups
    ``bpfmem-measure-<pid>-<random>`` and its ``-flush`` sibling
    (:func:`bpfmem.host.cgroup.scratch_cgroup`) are removed after the probe has exited, also
    on errors, timeouts and KeyboardInterrupt, together with the per-spec cgroups the probe
    makes inside the measured one. ``options`` are probe flags from :data:`PROBE_OPTIONS`.
    """
    _require_root()
    options = list(options)
    if bad := [o for o in options if o not in PROBE_OPTIONS]:
        raise ValueError(f"unknown probe option(s) {bad}; known: {', '.join(PROBE_OPTIONS)}")
    if cgroup not in ("v1", "v2", "none"):
        raise ValueError(f"cgroup must be 'v1', 'v2' or 'none', not {cgroup!r}")
    text = specs if isinstance(specs, str) else format_specs(specs, sizes=sizes)
    binary = probe or build_probe()

    tmpdir = tempfile.mkdtemp(prefix=f"bpfmem-probe-{os.getpid()}-")
    try:
        spec_path = Path(tmpdir) / "specs.txt"
        spec_path.write_text(text)
        version = {"v1": 1, "v2": 2}.get(cgroup, False)
        code, out, err = run_in_scratch_cgroups(binary, [str(spec_path), *options], version,
                                                timeout=timeout, what="the probe")
        if code != 0:
            raise HostError(f"the probe failed (exit {code}): {err.strip()[-800:]}")
        header, results = parse_output(out)
        if header is None or not header.get("done"):
            raise HostError(f"incomplete probe output: {(out + err)[-800:]}")
        return header, results
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def run_in_scratch_cgroups(binary: Path, args: list[str], version: int | None | bool, *,
                           timeout: float | None, what: str) -> tuple[int, str, str]:
    """The one frame both helpers run in: ``binary args`` plus ``--cgroup-vN DIR
    --flush-cgroup DIR`` naming a scratch memory cgroup and the sibling the helper moves to
    while it flushes the per-CPU charge caches (``version`` 1 or 2 forces a hierarchy, None
    takes v1 memory else v2 where it delegates memory; False: ``--no-cgroup``, none made).
    ``(exit code, stdout, stderr)``. The helper is killed and reaped before its cgroups go,
    and they go also on errors, a timeout (HostError naming ``what``) and KeyboardInterrupt."""
    proc: subprocess.Popen | None = None
    try:
        with ExitStack() as cgroups:
            argv = ["HELPER", *args]
            if version is not False:
                name = scratch_name("measure")
                cg = cgroups.enter_context(scratch_cgroup(version=version, name=name))
                flush = cgroups.enter_context(scratch_cgroup(version=cg.version,
                                                             name=f"{name}-flush"))
                argv += [f"--cgroup-v{cg.version}", cg.fs_path, "--flush-cgroup", flush.fs_path]
            else:
                argv.append("--no-cgroup")
            cgroups.callback(_end, lambda: proc)   # runs first: the tasks go before the cgroups
            proc = _start(binary, argv)
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                raise HostError(f"{what} did not finish within {timeout} s") from None
        return proc.returncode, out, err
    finally:
        _end(lambda: proc)


def _start(binary: Path, args: list[str]) -> subprocess.Popen:
    """The probe as a child that dies with this process (run from an fd of the checked
    binary: see :func:`open_probe`)."""
    probe_fd = open_probe(binary)
    args[0] = f"/proc/self/fd/{probe_fd}"
    try:
        me = os.getpid()
        return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, pass_fds=(probe_fd,),
                                preexec_fn=lambda: die_with_parent(me))
    finally:
        os.close(probe_fd)


def _end(current) -> None:
    """Kill the probe ``current()`` returns if it still runs, and reap it (a cgroup can only
    be removed once its tasks are gone)."""
    proc = current()
    if proc is not None:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
