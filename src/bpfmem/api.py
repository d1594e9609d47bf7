"""The public library surface: what the CLI, tests and notebooks call.

>>> from bpfmem import api
>>> spec = api.load_object(api.example_object_path())
>>> [m.name for m in spec.maps][:2]   # doctest: +SKIP
"""

from __future__ import annotations

import os
from pathlib import Path

from typing import TYPE_CHECKING

from .errors import ParseError

if TYPE_CHECKING:  # the live-node commands never import the object parser
    from .parse.objspec import ObjectSpec

EXAMPLE_OBJECT = "cni_datapath.bpf.o"


def example_object_path() -> Path:
    """The bundled example object: a small CNI-like datapath shipped with bpfmem."""
    return Path(__file__).resolve().parent / "examples" / EXAMPLE_OBJECT


def load_object(source: str | os.PathLike | bytes, *, name: str | None = None,
                loader: str | None = None, code: bool = False) -> "ObjectSpec":
    """Parse a compiled BPF object from a path or from its bytes, as ``loader`` reads it:
    ``"libbpf"`` (the default), ``"cilium-ebpf"`` (current cilium/ebpf, Go agents and
    bpf2go objects), ``"cilium-ebpf@0.9"``, or ``"auto"``: the one loader that opens it, or
    cilium/ebpf for a bpf2go file name (``*_bpfel.o``), else libbpf. ``spec.loader`` and
    ``spec.loader_reason`` say which and why.

    Raises :class:`bpfmem.errors.ParseError` (naming the file) for anything that is not a
    BPF object that loader would accept, ``ValueError`` for an unknown loader, and
    ``OSError`` when the file cannot be read.

    ``code=True`` keeps what code analyses need (``advise``): an
    :class:`~bpfmem.parse.objspec.ObjectCode` whose ``spec`` is the object's spec.
    """
    from .parse.objspec import parse_object, parse_object_code
    if code:
        def parse(data, path=None):
            return parse_object_code(data, path=path, loader=loader)
    else:
        def parse(data, path=None):
            return parse_object(data, path=path, name=name, loader=loader)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return parse(bytes(source))
    from .inputs import read_input
    path = os.fspath(source)
    data = read_input(path, "object")
    try:
        return parse(data, path)
    except ParseError as e:
        raise e.with_path(path) from None


# -- kernel profiles: the one door -----------------------------------------------------------
def profile(kernel: str | None = None, *, btf: str | os.PathLike | None = None,
            cpus: int | None = None):
    """The :class:`~bpfmem.model.kernel.KernelProfile` a model runs on; the only way one is
    made (the CLI, the exporter, tests and notebooks all come through here).

    * ``btf``: a kernel's BTF in a file (raw ``/sys/kernel/btf/vmlinux`` copied from a node,
      an ELF ``vmlinux``, a ``vmlinuz``/``bzImage``, a BTFHub ``.btf.tar.xz``): struct sizes,
      accounting eras, map types and NR_CPUS from that kernel itself; ``kernel`` names the
      release when the file does not;
    * ``kernel`` alone: the release's table (mainline eras, the struct sizes of the build it
      was measured on, said in the profile's notes);
    * neither: this host's running kernel, from its BTF.

    ``cpus`` is the node's possible CPUs (default: this host's, noted in the profile).
    Raises ValueError for a release that is not one, ParseError for a file that is no
    kernel's BTF, OSError when it cannot be read."""
    from dataclasses import replace

    from .host import profile as hp
    from .model.kernel import KernelProfile
    if cpus is not None and (not isinstance(cpus, int) or not 1 <= cpus <= 1 << 16):
        raise ValueError(f"possible CPUs must be 1..65536, not {cpus!r}")
    if btf is not None:
        return hp.read_btf_profile(os.fspath(btf), release=kernel, cpus=cpus)
    if kernel is not None:
        if cpus is None:
            cpus = hp.host_possible_cpus()
            prof = KernelProfile.for_release(kernel, cpus)
            return replace(prof, notes=prof.notes + (
                f"possible CPUs: this host's ({cpus}); --cpus N for the node's",))
        return KernelProfile.for_release(kernel, cpus)
    prof = hp.host_profile()
    return prof if cpus is None else replace(prof, possible_cpus=cpus)


def profiles(kernels=(), cpus=(), btfs=(), configured=()) -> list:
    """A matrix of profiles for a gate: every kernel (releases and BTF files, or the
    ``[[kernels]]`` entries of bpfmem.toml, :class:`bpfmem.config.KernelEntry`) x every CPU
    count; with none named, this host's kernel."""
    cpu_list = list(cpus) or [None]
    out = []
    for entry in configured:
        for c in (list(entry.cpus) or cpu_list):
            try:
                out.append(profile(entry.release, btf=entry.btf, cpus=c))
            except ValueError as e:
                raise ValueError(f"[[kernels]] {entry.name}: "
                                 + str(e).replace("give --kernel VERSION with --kernel-btf",
                                                  "add release = \"VERSION\"")) from None
    release = None
    if btfs:
        if len(kernels) > 1:
            raise ValueError("--kernel names the release of --kernel-btf files: give one")
        release = kernels[0] if kernels else None
        kernels = ()
    for path in btfs:
        out.extend(profile(release, btf=path, cpus=c) for c in cpu_list)
    for k in kernels:
        out.extend(profile(k, cpus=c) for c in cpu_list)
    if not out:
        out = [profile(cpus=c) for c in cpu_list]
    return out


def loader_names() -> tuple[str, ...]:
    """The loaders bpfmem models (``--loader`` values), plus ``auto``."""
    from .parse.loader import LOADER_NAMES
    return LOADER_NAMES + ("auto",)


# -- memory model ---------------------------------------------------------------------------
def shape_from_args(type_name: str, key_size: int, value_size: int, max_entries: int,
                    flags: str | int = 0, map_extra: int = 0):
    """A MapShape from people's spellings ('lru_hash', 'no_prealloc,numa_node')."""
    from .model.shape import MapShape
    from .uapi import MapType, parse_flags
    return MapShape(int(MapType.from_name(type_name)), key_size, value_size, max_entries,
                    parse_flags(flags) if flags not in ("", None) else 0, map_extra)


def estimate_map(shape, profile, entries: int = 0):
    """The Footprint of one map shape on ``profile`` (:func:`profile`)."""
    from .model.estimate import estimate
    return estimate(shape, profile, entries)


def estimate_batch_stream(lines, out, profile) -> int:
    """``bpfmem estimate --batch``: one JSON spec per line in, one JSON result per line out,
    in the same order. A bad line gives {"error": ...} on its line. Returns the exit code.

    Capacity plans repeat shapes, so a result line is built once per distinct spec."""
    import json

    from .model.estimate import estimate
    from .model.shape import MapShape
    from .report.documents import ESTIMATE as SCHEMA, estimate_line as batch_record
    from .uapi import MapType, parse_flags

    kernel_tail = ', "kernel": ' + json.dumps(profile.describe()) + "}\n"
    type_ids: dict = {}
    done: dict = {}
    status = 0
    write = out.write
    dumps = json.dumps
    for lineno, d in _decoded_lines(lines):
        try:
            if isinstance(d, Exception):
                raise d
            key = (d["type"], d.get("key_size", 0), d.get("value_size", 0),
                   d.get("max_entries", 0), d.get("map_flags", 0) or 0,
                   d.get("map_extra", 0) or 0, d.get("entries", 0) or 0)
            text = done.get(key)
            if text is None:
                t, k, v, m, flags, extra, entries = key
                if t not in type_ids:
                    type_ids[t] = int(MapType.from_name(t))
                if isinstance(flags, str):
                    flags = parse_flags(flags)
                for name, val in (("key_size", k), ("value_size", v), ("max_entries", m),
                                  ("map_flags", flags), ("entries", entries)):
                    if isinstance(val, bool) or not isinstance(val, int) or \
                            not 0 <= val <= 0xFFFFFFFF:
                        raise ValueError(f"{name} must be an integer in 0..2^32-1, "
                                         f"not {val!r:.40}")
                if isinstance(extra, bool) or not isinstance(extra, int) or \
                        not 0 <= extra < 1 << 64:
                    raise ValueError(f"map_extra must be an integer in 0..2^64-1, "
                                     f"not {extra!r:.40}")
                shape = MapShape(type_ids[t], k, v, m, flags, extra)
                text = dumps(batch_record(estimate(shape, profile, entries)))[:-1] + kernel_tail
                if len(done) < 1 << 16:
                    done[key] = text
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            status = 1
            text = dumps({"schema": SCHEMA, "line": lineno,
                          "error": f"line {lineno}: {e.__class__.__name__}: {e}"}) + "\n"
        write(text)
    return status


def _decoded_lines(lines, chunk: int = 8192):
    """(line number, decoded JSON or the exception) for each non-blank line. Lines are
    decoded a chunk at a time with one json.loads call (per line only when a chunk has a bad
    line): decoding dominates a batch of cheap estimates."""
    import json
    from itertools import islice

    it = iter(enumerate(lines, 1))
    while True:
        raw = list(islice(it, chunk))
        if not raw:
            return
        block = [(n, line) for n, line in raw if line.strip()]
        if not block:
            continue
        try:
            values = json.loads("[" + ",".join(line for _, line in block) + "]")
            if len(values) != len(block):
                raise ValueError("line count")
        except (ValueError, RecursionError):
            values = []
            for _, line in block:
                try:
                    values.append(json.loads(line))
                except ValueError as e:
                    values.append(e)
                except RecursionError:
                    values.append(ValueError("nested too deeply"))
        yield from zip((n for n, _ in block), values)


# -- measuring real maps ------------------------------------------------------------------
def measure_object(source, *, vm_kernel: str | None = None, fill: bool = False,
                   cpus: int = 2, timeout: float = 1800, loader: str | None = None):
    """Create every map of an object for real (on this host in a scratch memory cgroup, or
    in a Debian kernel under qemu with ``vm_kernel``), read memlock and the memory cgroup's
    charge per map, and compare them with the model for that kernel.

    Returns a :class:`~bpfmem.analysis.measure.MeasureResult` (the kernel measured and one
    Comparison per map). Needs root (CAP_BPF, CAP_SYS_ADMIN).
    Everything created is removed afterwards, also on errors and Ctrl-C.
    """
    from .analysis.measure import Comparison, Measured, MeasureResult
    from .host import probe as hp
    from .model.estimate import estimate, shape_of_spec
    from .host.profile import host_profile
    from .model.kernel import KernelProfile
    from .model.structs import STRUCT_NAMES
    from .uapi import MapType

    spec = load_object(source, loader=loader)
    draft = host_profile() if vm_kernel is None else KernelProfile.for_release(
        _vm_release_guess(vm_kernel), cpus)
    wanted, skipped = [], []
    for i, m in enumerate(spec.maps):
        shape, why = shape_of_spec(m, draft)
        if not m.autocreate:
            skipped.append((m.name, "not created by default (autocreate off)"))
        elif m.refused:
            skipped.append((m.name, f"refused by the loader: {m.refused}"))
        elif shape is None:
            skipped.append((m.name, why))
        elif m.type == MapType.STRUCT_OPS:
            skipped.append((m.name, "struct_ops maps need the kernel's struct and programs"))
        else:
            fills = []
            if fill:
                cap = estimate(shape, draft).capacity
                if cap:
                    fills = sorted({cap // 2, cap})
            wanted.append((m.name, shape, hp.shape_spec(f"m{i}", shape, fills)))
    specs = [w[2] for w in wanted]
    if vm_kernel is None:
        header, results = hp.run_local(specs, "v1", timeout=timeout)
        prof = draft
    else:
        from .host import vm
        kernel = vm.fetch_kernel(vm_kernel)
        text = hp.format_specs(specs, sizes=STRUCT_NAMES)
        header, results = vm.run_vm(kernel, text, cpus=cpus, timeout=timeout)
        from .host.profile import profile_from_probe
        prof = profile_from_probe(header, next((r["sizes"] for r in results if "sizes" in r),
                                               {}))
    by_id = {r["id"]: r for r in results if "id" in r}
    out = []
    for name, shape, s in wanted:
        r = by_id.get(s["id"])
        meas = None
        if r is not None:
            meas = Measured(name, bool(r.get("ok")), r.get("errno"), r.get("memlock"),
                            r.get("charged"),
                            tuple((f["inserted"], f.get("memlock"), f.get("charged"))
                                  for f in r.get("fills") or ()))
        out.append(Comparison(name, estimate(shape, prof), meas,
                              None if r is not None else "the probe gave no result"))
    out += [Comparison(n, None, None, why) for n, why in skipped]
    path = "<bytes>" if isinstance(source, (bytes, bytearray, memoryview)) else os.fspath(source)
    return MeasureResult(path, prof, tuple(out))


def _vm_release_guess(vm_kernel: str) -> str:
    """A release for planning the probe run before the VM reports its own."""
    import re
    m = re.search(r"(\d+\.\d+)", vm_kernel)
    return m.group(1) if m else "6.1"


# -- budget gate, diff, what-if -------------------------------------------------------------
def make_whatif(sets=(), size_ratio: float | None = None, node_memory=None,
                dynamic_config: dict | None = None):
    """A WhatIf from ``--set`` expressions and Cilium-style dynamic sizing settings."""
    from .units import parse_size
    from .analysis.whatif import DynamicSizing, WhatIf, parse_setting
    settings = tuple(parse_setting(s) for s in sets)
    dyn = None
    cfg = dict(dynamic_config or {})
    ratio = size_ratio if size_ratio is not None else cfg.get("size_ratio")
    mem = node_memory if node_memory is not None else cfg.get("node_memory")
    if ratio is not None or mem is not None:
        if ratio is None or mem is None:
            raise ValueError("dynamic sizing needs both --size-ratio and --node-memory")
        maps = {name: (int(v["default"]), int(v.get("min", 0)))
                for name, v in cfg.get("maps", {}).items()}
        if not maps:
            raise ValueError("dynamic sizing needs the maps it sizes: [dynamic.maps] in "
                             "bpfmem.toml, e.g. ct_tcp = { default = 524288, min = 131072 }")
        dyn = DynamicSizing(float(ratio), parse_size(mem), maps,
                            int(cfg.get("max", 1 << 24)))
    return WhatIf(settings, dyn)


def check_objects(sources, *, limit: int, profiles, max_fraction: float = 1.0,
                  full: bool = False, whatif=None, object_limits=None, map_caps=None,
                  config: str | None = None,
                  loader: str | list[str] | tuple[str, ...] | None = None):
    """The :class:`~bpfmem.analysis.budget.CheckResult` for compiled objects, on every
    profile of ``profiles`` (:func:`profiles`). ValueError when a what-if, a map cap or an
    object limit names nothing checked (a gate must not pass on a typo); ``config`` names the
    file the caps and limits came from. ``loader`` may name several loaders (``["libbpf",
    "cilium-ebpf"]``): the objects are then checked as each one reads them, one result per
    loader and profile, and the gate must hold for all."""
    from dataclasses import replace

    from .analysis.budget import Budget, check
    from .analysis.typos import unmatched
    loaders = [loader] if loader is None or isinstance(loader, str) else list(loader)
    objs = [load_object(s, loader=loaders[0]) for s in sources]
    typos = unmatched(objs, whatif, map_caps, object_limits, config)
    if typos:
        raise ValueError("; ".join(typos))
    budget = Budget(limit, max_fraction, full, dict(object_limits or {}), dict(map_caps or {}))
    profiles = list(profiles)
    result = check(objs, budget, profiles, whatif)
    for name in loaders[1:]:
        part = check([load_object(s, loader=name) for s in sources], budget, profiles, whatif)
        result = replace(result, results=result.results + part.results)
    return result


def diff_objects(old, new, *, profile, whatif=None, limit: int | None = None,
                 old_loader: str | None = None, new_loader: str | None = None):
    """The :class:`~bpfmem.analysis.diff.DiffResult` between two builds (each one or more
    objects) on ``profile``; the what-if applies to the new side. ``old_loader`` and
    ``new_loader`` read each side as that loader does: the same object under libbpf and
    cilium/ebpf shows what a move from one to the other changes."""
    from dataclasses import replace

    from .analysis.diff import diff
    from .analysis.typos import unmatched
    new_objs = [load_object(s, loader=new_loader) for s in new]
    result = diff([load_object(s, loader=old_loader) for s in old], new_objs, profile, whatif,
                  limit)
    return replace(result, warnings=tuple(unmatched(new_objs, whatif)))


def is_snapshot_file(path: str) -> bool:
    """Whether ``path`` is a saved ``bpfmem snapshot`` or ``bpftool -j map show`` (JSON)."""
    from .inputs import InputError, peek_input
    if not str(path).endswith(".json"):
        return False
    try:
        head = peek_input(path, 4096).decode(errors="replace").lstrip()
    except InputError:
        return False
    return head.startswith("[") or "bpfmem/snapshot/" in head


def diff_snapshots(old: str, new: str) -> dict:
    """What changed on a node between two saved snapshots (``bpfmem/snapshot-diff/v1``)."""
    from .analysis.live import diff_snapshots as diff
    return diff(load_snapshot(old), load_snapshot(new))


# -- advisor --------------------------------------------------------------------------------
def advise_objects(sources, *, profile, occupancy: dict[str, int] | None = None,
                   loader: str | None = None):
    """The :class:`~bpfmem.analysis.advise.AdviseResult`: per object, what its programs do with
    each map and the recommended changes with the bytes each saves."""
    from .analysis.advise import advise_all
    from .parse.access import analyze_code
    codes = [load_object(s, loader=loader, code=True) for s in sources]
    return advise_all([(c.spec, analyze_code(c)) for c in codes], profile, occupancy)


def load_occupancy(path: str) -> dict[str, int]:
    """``{map name: entries}``, or a bpfmem snapshot's maps with their entry counts.
    ValueError names the file and the field that is wrong."""
    from .inputs import load_json
    try:
        return occupancy_from(load_json(path, "occupancy"))
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def occupancy_from(data) -> dict[str, int]:
    """:func:`load_occupancy` of a decoded document."""
    from .inputs import Fields
    if isinstance(data, dict) and str(data.get("schema", "")).startswith("bpfmem/snapshot"):
        peaks: dict[str, int] = {}   # a name seen on several maps (one per pod...): the fullest
        for m in Fields(data).objects("maps"):
            n = m.uint("entries", None, 32)
            if n is not None:
                name = m.text("name")
                peaks[name] = max(peaks.get(name, 0), n)
        return peaks
    if not isinstance(data, dict):
        raise ValueError("expected {\"map name\": entries, ...}")
    for k, v in data.items():
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << 32:
            raise ValueError(f"{k}: expected entries as an integer in 0..2^32-1, "
                             f"not {v!r:.40}")
    return data


def sweep_leftovers() -> tuple[list[str], list[str]]:
    """Remove what earlier bpfmem runs killed before they could clean up left behind
    (scratch cgroups, probe directories): ``(removed, could not remove)`` paths."""
    from .host.cleanup import sweep_leftovers as sweep
    return sweep()


# ---- the live node ----

def scan_node(*, entries: bool = False, time_bound: float = 0.5, pins: bool = True,
              owners: bool = True, progress=None, parallel: bool = False,
              owners_method: str = "auto", memo=None):
    """Scan every BPF map on this host (root or CAP_SYS_ADMIN): a :class:`Snapshot`.
    ``parallel`` forks a helper for the walk of processes (not from threaded programs);
    ``owners_method`` "auto", "iterator" (the kernel's task_file iterator) or "proc";
    ``memo`` (from :func:`scan_memo`, kept between calls) makes repeated scans incremental."""
    from .host.live import scan_maps
    return scan_maps(entries=entries, entry_time_bound=time_bound, pins=pins, owners=owners,
                     progress=progress, parallel=parallel, owners_method=owners_method,
                     memo=memo)


def scan_memo(profile, *, full_every: int = 30):
    """What repeated :func:`scan_node` calls keep between scans (the exporter's), with the
    model of ``profile``'s kernel saying which maps' memlock cannot change or follows their
    count; every ``full_every``-th scan reads everything again."""
    from .analysis.live import memlock_behaviour
    from .host.rescan import ScanMemo
    return ScanMemo(memlock_static=lambda m: memlock_behaviour(m, profile) == "static",
                    memlock_counts=lambda m: memlock_behaviour(m, profile) == "counts",
                    full_every=full_every)


def snapshot_document(snap, profile) -> dict:
    """The ``bpfmem/snapshot/v1`` document of a scan, with the model's figures for
    ``profile`` (None: no model)."""
    from .report.snapshot import build_snapshot_report
    return build_snapshot_report(snap, profile)


def load_snapshot(path: str, *, profile=None):
    """A saved ``bpfmem snapshot`` or ``bpftool -j map show`` output, as a Snapshot; a
    bpftool list has no kernel of its own: ``profile`` names it (release, CPUs)."""
    from .inputs import load_json
    from .report.snapshot import snapshot_from_bpftool, snapshot_from_dict
    data = load_json(path, "snapshot")
    try:
        if isinstance(data, list):
            return snapshot_from_bpftool(
                data, kernel=profile.version if profile is not None else "",
                cpus=profile.possible_cpus if profile is not None else 0)
        return snapshot_from_dict(data)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def cgroup_memory_of(snap) -> dict:
    """``{cgroup path: CgroupMemory}`` for every memory cgroup whose processes hold maps in
    ``snap`` (cgroups that vanish or cannot be read are left out)."""
    from .analysis.live import map_cgroup
    from .errors import HostError
    from .host.cgroup import read_cgroup_memory
    out = {}
    for path in sorted({c for m in snap.maps if (c := map_cgroup(m))}):
        try:
            out[path] = read_cgroup_memory(path)
        except (HostError, OSError):
            continue
    return out


# ---- one pod (a memory cgroup): what it uses, over time, after an upgrade ----

def pod_cgroup(*, cgroup: str | None = None, pid: int | None = None,
               container: str | None = None) -> str:
    """The memory cgroup directory named by exactly one of a cgroup, a pid, a container id."""
    from .host.cgroup import resolve_cgroup
    return resolve_cgroup(cgroup=cgroup, pid=pid, container=container)


def go_prober(endpoints=None, *, go: bool = True, discover: bool = True,
              pprof: bool = False, timeout: float | None = None):
    """What reads each process of a pod in detail (smaps by class; for Go programs the
    runtime's /metrics and heap profile): ``endpoints`` maps a pid (or None: the pod's Go
    process) to :class:`bpfmem.host.goproc.Endpoints`; ``discover`` looks for a loopback
    listener serving /metrics; None when ``go`` is false."""
    if not go:
        return None
    from .host import httpget
    from .host.goproc import GoProber
    return GoProber(endpoints, discover=discover, pprof=pprof,
                    timeout=httpget.TIMEOUT if timeout is None else timeout)


def pod_view(*, cgroup: str | None = None, pid: int | None = None,
             container: str | None = None, entries: bool = True, time_bound: float = 0.5,
             profile, go: bool = True, endpoints=None, discover: bool = True,
             pprof: bool = True):
    """One reading of a pod's memory cgroup split into parts that add up to its usage
    (:class:`bpfmem.analysis.pod.PodView`): processes with RSS/PSS/USS, page cache, kernel
    memory, the BPF maps its processes hold (model charge; which are charged elsewhere) and
    what remains unexplained; for Go processes, their memory split into heap in use, freed
    not returned, stacks, runtime metadata, binary and other (``go``; endpoints as in
    :func:`go_prober`). Reading other processes' maps and smaps needs root."""
    from .analysis.pod import pod_view as split
    from .host.podscan import PodSampler
    fs = pod_cgroup(cgroup=cgroup, pid=pid, container=container)
    prober = go_prober(endpoints, go=go, discover=discover, pprof=pprof)
    sample = PodSampler(fs, entries=entries, entry_time_bound=time_bound, go=prober).sample()
    return split(sample, profile)


def pod_headroom(view, after, before=None, *, profile, whatif=None):
    """What the pod's usage becomes when its processes are replaced by the objects ``after``
    (OLD ``before``, when given, decides which pinned maps are reused, as ``bpfmem diff``
    does). Returns (Headroom, the diff document it used)."""
    from .analysis.pod import headroom_after
    from .report.documents import document
    result = diff_objects(list(before or []), list(after), profile=profile, whatif=whatif,
                          limit=view.limit)
    return headroom_after(view, result, before_given=bool(before)), document(result)


def pod_document(view, profile, *, headroom=None, after=None, before=None) -> dict:
    """The ``bpfmem/pod/v1`` document of a view (and of an upgrade's headroom)."""
    from .report.pod import build_pod_report, headroom_record
    prof = profile
    up = None if headroom is None else headroom_record(
        headroom, [str(p) for p in after or []], [str(p) for p in before] if before else None)
    return build_pod_report(view, prof.describe(), headroom=up)


def trace_pod(*, cgroup: str | None = None, pid: int | None = None,
              container: str | None = None, command=None, duration: float = 60.0,
              interval: float = 0.1, limit: int | None = None, entries: bool = False,
              stop_on_exit: bool = True, command_output=None, on_sample=None,
              profile, go: bool = True, endpoints=None, discover: bool = True) -> dict:
    """Sample a pod's memory every ``interval`` seconds for ``duration`` seconds; returns the
    ``bpfmem/pod-trace/v1`` document (samples, the peak and when it happened, what it
    settled at).

    With ``command`` (argv), it is started in a fresh scratch memory cgroup (``limit`` bytes)
    from its first instruction and traced from then on; the trace ends early when it exits
    (``stop_on_exit``). Whatever it left running is killed and the cgroup removed on the way
    out, also on errors and Ctrl-C (which ends the trace early, keeping the samples).
    ``on_sample(PodView, t)`` is called after each sample. Go processes are split at every
    sample as in :func:`pod_view` (``go``, ``endpoints``, ``discover``; no heap profile)."""
    from .analysis.pod import pod_view as split, summarize_trace, trace_point
    from .host.podscan import PodSampler, launched, sample_loop
    from .report.pod import build_trace_report
    prof = profile
    views: list = []
    points: list = []

    origin: list = []

    def run(fs: str, start: float, fresh: bool, stop=None):
        origin.append(start)
        sampler = PodSampler(fs, entries=entries,
                             go=go_prober(endpoints, go=go, discover=discover))
        firsts: list = []

        def each(s):
            if not firsts:
                firsts.append(s)
            v = split(s, prof)
            views.append(v)
            points.append(trace_point(v, s.t - start))
            if on_sample is not None:
                on_sample(v, s.t - start)

        _samples, interrupted = sample_loop(sampler.sample, duration, interval, stop=stop,
                                            on_sample=each)
        if not firsts:
            raise KeyboardInterrupt
        first = firsts[0]
        summary = summarize_trace(points, kernel_peak_before=None if fresh
                                  else first.cgroup.peak, fresh_cgroup=fresh)
        return first, summary, interrupted

    if command:
        with launched(list(command), limit=limit, stdout=command_output,
                      stderr=command_output) as job:
            first, summary, interrupted = run(job.cgroup.fs_path, job.started, True,
                                              job.exited if stop_on_exit else None)
            code = job.proc.poll()
        cg = {"path": first.cgroup.path, "dir": first.cgroup.fs_path,
              "version": first.cgroup.version, "scratch": True}
    else:
        import time
        fs = pod_cgroup(cgroup=cgroup, pid=pid, container=container)
        first, summary, interrupted = run(fs, time.monotonic(), False)
        code = None
        cg = {"path": first.cgroup.path, "dir": first.cgroup.fs_path,
              "version": first.cgroup.version, "scratch": False}
    peak_view = views[summary.peak.index] if summary.peak is not None else None
    doc = build_trace_report(points, summary, cgroup=cg, kernel=prof.describe(),
                             command=list(command) if command else None, interval=interval,
                             interrupted=interrupted, exit_code=code, peak_view=peak_view)
    doc["t0_monotonic"] = origin[0]   # t = 0 on this host's CLOCK_MONOTONIC
    return doc


def write_trace_plot(doc: dict, path: str, *, width: int = 1100, height: int = 560) -> None:
    """The trace's stacked chart: ``.html`` a self-contained interactive page, ``.png`` the
    same chart rendered by headless Chromium."""
    from .report.pod import render_trace_html
    p = os.fspath(path)
    if p.lower().endswith(".png"):
        from .host.podscan import screenshot_html
        screenshot_html(render_trace_html(doc, width=width, height=height, static=True), p,
                        width=width, height=height)
    elif p.lower().endswith((".html", ".htm")):
        from .outputs import output_file
        page = render_trace_html(doc, width=width, height=height)
        with output_file(p) as f:
            f.write(page)
    else:
        raise ValueError(f"--plot wants a .png or .html file, not {p}")


# --- binary size (`bpfmem size`, `size diff`, `check --max-binary-size`) ----------------------

def load_binary_size(source: str | os.PathLike | bytes, *, path: str | None = None,
                     demangle: bool = True):
    """Every byte of an ELF binary labelled (:class:`bpfmem.analysis.size.SizeReport`).

    Go binaries (stripped or not, PIE or not, Go 1.2+) by their pclntab and build info;
    other ELF files by sections and symbols (C++/Rust names demangled with c++filt when it is
    installed). ParseError/UnsupportedError (naming the file) for anything else."""
    import mmap
    from .analysis.size import analyse_image
    from .errors import UnsupportedError
    from .parse.elfimage import parse_image
    from .parse.gobin import parse_buildinfo, parse_pclntab
    if isinstance(source, (bytes, bytearray, memoryview)):
        f, data, name = None, bytes(source), path or "<bytes>"
    else:
        name = path or os.fspath(source)
        f = open(source, "rb")
        size = os.fstat(f.fileno()).st_size
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    try:
        img = parse_image(data, path=name)
        is_go = any(img.section(s) is not None
                    for s in (".gopclntab", ".go.buildinfo", ".note.go.buildid")) or (
            not img.sections and data.find(b"\xff Go buildinf:") >= 0)
        pcln = parse_pclntab(img) if is_go else None
        info = parse_buildinfo(img) if is_go else None
        demangler = None
        if demangle and not is_go:
            from .host.gotool import cxxfilt
            demangler = cxxfilt
        return analyse_image(img, path=name, pcln=pcln, buildinfo=info, demangle=demangler)
    except ParseError as e:
        raise e.with_path(name) from None
    except UnsupportedError as e:
        raise UnsupportedError(f"{name}: {e.what}", e.since) from None
    finally:
        if f is not None:
            if not isinstance(data, bytes):
                try:
                    data.close()
                except BufferError:   # a view still refers to it: the GC closes it
                    pass
            f.close()


def why_linked(report, go_src: str, *, go: str | None = None):
    """The import savings of a Go binary's program (``go list -deps -json`` in ``go_src``,
    weighted by the bytes each package has in ``report``)."""
    from .analysis.imports import import_savings
    from .host.gotool import go_list_deps
    from .parse.golist import parse_go_list
    graph = parse_go_list(go_list_deps(go_src, go=go))
    return graph, import_savings(graph, report.package_bytes())


def size_document(paths, *, by: str = "package", top: int = 30, go_src: str | None = None,
                  demangle: bool = True) -> dict:
    """The ``bpfmem/size/v1`` document of one or more binaries."""
    from .report.size import build_size_document
    reps = [load_binary_size(p, demangle=demangle) for p in paths]
    why = why_linked(reps[0], go_src) if go_src else None
    return build_size_document(reps, by=by, top=top, why=why)


def size_diff_document(old, new, *, by: str = "package", top: int = 30,
                       go_src: str | None = None) -> dict:
    """The ``bpfmem/size-diff/v1`` document of two builds (``go_src``: NEW's source)."""
    from .report.size import build_size_diff_document
    a, b = load_binary_size(old), load_binary_size(new)
    why = why_linked(b, go_src) if go_src else None
    return build_size_diff_document(a, b, by=by, top=top, why=why)


def check_binaries(paths, *, max_size: int | None, module_limits: dict[str, int],
                   file_limits: dict[str, int] | None = None) -> dict:
    """The ``bpfmem/binary-check/v1`` document: each binary against its size limit (the
    per-file limit whose glob matches its path or name, else ``max_size``) and the module
    limits."""
    import fnmatch
    from .analysis.size import judge_binary
    from .report.size import build_binary_check_document
    verdicts, reps = [], []
    for p in paths:
        rep = load_binary_size(p)
        limit = max_size
        for glob, lim in (file_limits or {}).items():
            if fnmatch.fnmatch(p, glob) or fnmatch.fnmatch(os.path.basename(p), glob):
                limit = lim
        reps.append(rep)
        verdicts += judge_binary(rep, max_size=limit, module_limits=module_limits)
    return build_binary_check_document(reps, verdicts)


# -- what the command line needs from the layers below (so cli/ imports api only) ----------
def loader_name(name: str) -> str:
    """The canonical name of the loader people call ``name`` (``cilium/ebpf`` ->
    ``cilium-ebpf``); ValueError naming the choices for an unknown one."""
    from .parse.loader import get_loader
    return get_loader(name).name


def parse_release(text: str) -> tuple[int, ...]:
    """A kernel release string (``6.1.90``, ``6.12.0-31-cloud-amd64``) as numbers;
    ValueError for anything else."""
    from .model.kernel import parse_release as parse
    return parse(text)


def newest_modelled_release() -> tuple[int, int]:
    """The newest kernel release (major, minor) whose rules bpfmem models."""
    from .model.kernel import NEWEST_MODELLED
    return NEWEST_MODELLED


def inventory(objects, errors=(), *, profile=None, whatif=None):
    """``bpfmem maps``: the objects' maps and programs (an Inventory); with a KernelProfile,
    what each costs; ``errors`` (path, message) of objects that could not be read."""
    from .analysis.inventory import inventory as make
    return make(objects, errors, profile=profile, whatif=whatif)


def one_or_matrix(results):
    """One kernel's result as it is; several kernels' (bpfmem.toml's [[kernels]]) as one
    Matrix, in order."""
    from .analysis.matrix import one_or_matrix as make
    return make(results)


def unmatched_sets(objects, whatif) -> list[str]:
    """One warning per ``--set`` whose map glob matches no map of ``objects``."""
    from .analysis.typos import unmatched
    return unmatched(objects, whatif)


def read_lines(path: str):
    """The lines of a text file users give (``estimate --batch FILE``), bounded per line."""
    from .inputs import input_lines
    return input_lines(path)


def split_binaries(paths) -> tuple[list[str], list[str]]:
    """(the rest, ELF binaries that are no BPF object) among ``paths``."""
    from .inputs import split_binaries as split
    return split(paths)


def filter_snapshot(snap, filters: dict):
    """``snap`` with only the maps matching every filter (owner, cgroup, name, type)."""
    from dataclasses import replace

    from .analysis.live import filter_maps
    return replace(snap, maps=tuple(filter_maps(snap.maps, **filters)))


def signals_interrupt():
    """A context in which SIGTERM and SIGHUP raise KeyboardInterrupt, as Ctrl-C does (so
    scratch maps, cgroups and processes are cleaned up the same way)."""
    from .host.cleanup import signals_interrupt as interrupting
    return interrupting()


def parse_container_id(text: str) -> str:
    """The container id of ``text`` (12+ hex digits; ``docker://``, ``containerd://`` ok);
    ValueError otherwise."""
    from .host.cgroup import parse_container_id as parse
    return parse(text)


def go_endpoints(metrics: str | None = None, pprof: str | None = None):
    """Where a Go process serves its runtime's /metrics and /debug/pprof/heap."""
    from .host.goproc import Endpoints
    return Endpoints(metrics=metrics, pprof=pprof)


def metrics_cache(scan, interval: float):
    """The exporter's scan cache: ``scan()`` at most once per ``interval`` seconds."""
    from .exporter import ScanCache
    return ScanCache(scan, interval)


def serve_metrics(host: str, port: int, cache, profile=None):
    """Serve Prometheus /metrics of ``cache``'s scans on host:port: ``(server, thread)``."""
    from .exporter import serve
    return serve(host, port, cache, profile)
