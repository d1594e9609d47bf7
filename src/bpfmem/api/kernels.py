"""Kernel profiles: the one door through which a :class:`~bpfmem.model.kernel.KernelProfile`
is made (the CLI, the exporter, tests and notebooks all come through here)."""

from __future__ import annotations

import os
from ..values import replace

from ..host.profile import host_possible_cpus, host_profile, read_btf_profile
from ..model.kernel import NEWEST_MODELLED, KernelProfile
from ..model.kernel import parse_release as _parse_release


def profile(kernel: str | None = None, *, btf: str | os.PathLike | None = None,
            cpus: int | None = None, page_size: int | None = None,
            arch: str | None = None) -> KernelProfile:
    """The :class:`~bpfmem.model.kernel.KernelProfile` a model runs on; the only way one is
    made (the CLI, the exporter, tests and notebooks all come through here).

    * ``btf``: a kernel's BTF in a file (raw ``/sys/kernel/btf/vmlinux`` copied from a node,
      an ELF ``vmlinux``, a ``vmlinuz``/``bzImage``, a BTFHub ``.btf.tar.xz``): struct sizes,
      accounting eras, map types and NR_CPUS from that kernel itself; ``kernel`` names the
      release when the file does not;
    * ``kernel`` alone: the release's table (mainline eras, the struct sizes of the build it
      was measured on, said in the profile's notes);
    * neither: this host's running kernel, from its BTF.

    ``cpus`` is the node's possible CPUs (default: this host's, noted in the profile);
    ``page_size`` and ``arch`` what a BTF file does not say (a raw BTF of an arm64 node: 4,
    16 or 64 KiB pages); a file that says otherwise is refused.
    Raises ValueError for a release that is not one, ParseError for a file that is no
    kernel's BTF, OSError when it cannot be read."""
    if cpus is not None and (not isinstance(cpus, int) or not 1 <= cpus <= 1 << 16):
        raise ValueError(f"possible CPUs must be 1..65536, not {cpus!r}")
    if btf is not None:
        return read_btf_profile(os.fspath(btf), release=kernel, cpus=cpus,
                                page_size=page_size, arch=arch)
    if page_size is not None or arch is not None:
        raise ValueError("--page-size and --arch say what a --kernel-btf file does not")
    if kernel is not None:
        if cpus is None:
            cpus = host_possible_cpus()
            prof = KernelProfile.for_release(kernel, cpus)
            return replace(prof, notes=prof.notes + (
                f"possible CPUs: this host's ({cpus}); --cpus N for the node's",))
        return KernelProfile.for_release(kernel, cpus)
    prof = host_profile()
    return prof if cpus is None else replace(prof, possible_cpus=cpus)


def profiles(kernels=(), cpus=(), btfs=(), configured=(), *, page_size: int | None = None,
             arch: str | None = None) -> list[KernelProfile]:
    """A matrix of profiles for a gate: every kernel (releases and BTF files, or the
    ``[[kernels]]`` entries of bpfmem.toml, :class:`bpfmem.config.KernelEntry`) x every CPU
    count; with none named, this host's kernel."""
    cpu_list = list(cpus) or [None]
    out = []
    for entry in configured:
        for c in (list(entry.cpus) or cpu_list):
            try:
                out.append(replace(profile(entry.release, btf=entry.btf, cpus=c),
                                   name=entry.name))
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
        out.extend(profile(release, btf=path, cpus=c, page_size=page_size, arch=arch)
                   for c in cpu_list)
    for k in kernels:
        out.extend(profile(k, cpus=c) for c in cpu_list)
    if not out:
        out = [profile(cpus=c) for c in cpu_list]
    return out


def resolve_kernels(kernels=(), btfs=(), cpus=(), *, entries=(), defaults=(),
                    default_cpus=(), use_defaults: bool = True, page_size: int | None = None,
                    arch: str | None = None) -> list[KernelProfile]:
    """The one rule every command resolves its kernels by (``--kernel``, ``--kernel-btf``,
    ``--cpus`` and bpfmem.toml's ``kernels``/``[[kernels]]``/``cpus``):

    * each item of ``kernels`` is the ``name`` of a ``[[kernels]]`` entry (``entries``:
      :class:`bpfmem.config.KernelEntry`) or a release; ``btfs`` are BTF files, whose release
      a single release item names when the files do not;
    * ``cpus`` are the possible-CPU counts named (``--cpus``): every kernel is modelled at
      each; with none, ``default_cpus`` (bpfmem.toml's), except for an entry that lists its
      own ``cpus``;
    * with no kernel and no BTF named, ``entries`` and the ``defaults`` releases (bpfmem.toml's
      kernels) when ``use_defaults``; with none of those, this host's kernel;
    * ``page_size`` and ``arch``: what the BTF files do not say (:func:`profile`).

    The profiles come in the order named, duplicates (same kernel and CPUs) once. ValueError
    for a release that is not one or a file that is no kernel's BTF."""
    kernels, btfs = [str(k) for k in kernels], [str(b) for b in btfs]
    named_cpus = list(cpus)
    cpus = named_cpus or list(default_cpus)
    by_name = {e.name: e for e in entries}
    named = [by_name[k] for k in kernels if k in by_name]
    releases = [k for k in kernels if k not in by_name]
    if not (kernels or btfs):
        if not use_defaults:
            return profiles((), cpus, page_size=page_size, arch=arch)
        named, releases = list(entries), list(defaults)
    if any(not k[:1].isdigit() for k in releases):
        bad = next(k for k in releases if not k[:1].isdigit())
        known = ", ".join(sorted(by_name)) or "none: bpfmem.toml has no [[kernels]]"
        raise ValueError(f"--kernel {bad}: not a kernel release nor a [[kernels]] name "
                         f"(names: {known})")
    if named_cpus:
        named = [replace(e, cpus=tuple(named_cpus)) for e in named]
    out = profiles(releases, cpus, btfs, named, page_size=page_size, arch=arch)
    return list(dict.fromkeys(out))


def parse_release(text: str) -> tuple[int, ...]:
    """A kernel release string (``6.1.90``, ``6.12.0-31-cloud-amd64``) as numbers;
    ValueError for anything else."""
    return _parse_release(text)


def newest_modelled_release() -> tuple[int, int]:
    """The newest kernel release (major, minor) whose rules bpfmem models."""
    return NEWEST_MODELLED
