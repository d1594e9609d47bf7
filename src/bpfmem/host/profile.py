"""Kernel profiles read from the system: this host's kernel, or a kernel's BTF in a file.

The model never reads files: this module reads ``/sys`` and BTF files, hands the bytes to
``parse/kernel_btf.py`` and the facts to :func:`bpfmem.model.kernel.profile_from_facts`.
"""

from __future__ import annotations

import os

from ..errors import ParseError
from ..model.kernel import KernelProfile, parse_cpu_list, parse_release, profile_from_facts
from ..model.structs import STRUCT_NAMES

HOST_BTF = "sys/kernel/btf/vmlinux"


def host_possible_cpus(root: str = "/") -> int:
    try:
        with open(os.path.join(root, "sys/devices/system/cpu/possible")) as f:
            return parse_cpu_list(f.read())
    except (OSError, ValueError):
        return os.cpu_count() or 1


def host_nr_cpus(root: str = "/") -> int | None:
    """CONFIG_NR_CPUS, from /sys/devices/system/cpu/kernel_max (NR_CPUS - 1)."""
    try:
        with open(os.path.join(root, "sys/devices/system/cpu/kernel_max")) as f:
            return int(f.read().strip()) + 1
    except (OSError, ValueError):
        return None


def _is_host_btf(path: str, root: str = "/") -> bool:
    try:
        return os.path.samefile(path, os.path.join(root, HOST_BTF))
    except OSError:
        return False


def read_btf_profile(path: str, *, release: str | None = None, cpus: int | None = None,
                     page_size: int | None = None, arch: str | None = None) -> KernelProfile:
    """The profile of the kernel whose BTF ``path`` holds (raw BTF, vmlinux, vmlinuz, an arm64
    Image, vmlinuz.efi, a BTFHub archive). The release comes from the file, else
    ``release``; possible CPUs from ``cpus``, else this host's; the architecture and page
    size from the file where it says (an image's header, the BTF's struct pt_regs), else
    ``arch``/``page_size``, else assumed (4 KiB pages): what was assumed is said in the
    profile's notes. Raises ParseError (naming the file) for a file that is no kernel's BTF,
    ValueError when no release is known or the file contradicts ``arch``/``page_size``."""
    from ..model.kernel import ARCHES, arch_name
    from ..parse.kernel_btf import parse_kernel_btf
    # the door's reader of large files: over 32Mi, into an anonymous mapping with the file's
    # holes skipped (a sparse 511 MiB file costs its data, not 1 GiB); of a vmlinux only the
    # section headers, .rodata's banner and .BTF are then looked at
    from ..inputs import mapped_input      # (a file to read: not a cached host's start-up)
    with mapped_input(path, "kernel") as data:
        try:
            facts = parse_kernel_btf(data, name=os.path.basename(path),
                                     struct_names=STRUCT_NAMES)
        except ParseError as e:
            raise e.with_path(path) from None
    host = _is_host_btf(path)
    if facts.release is None and release is None and host:
        release = os.uname().release
    if facts.release is not None and release is not None and \
            parse_release(release)[:2] != parse_release(facts.release)[:2]:
        raise ValueError(f"{path} is the BTF of {facts.release}, not of --kernel {release}")
    assumed = []
    if cpus is None:
        cpus = host_possible_cpus()
        assumed.append(f"possible CPUs: this host's ({cpus}); --cpus N for the node's")
    want = arch_name(arch) if arch else None
    if host:
        got_arch, got_page = os.uname().machine, os.sysconf("SC_PAGE_SIZE")
    else:
        got_arch, got_page = facts.arch, facts.page_size
    if want and got_arch and want != got_arch:
        raise ValueError(f"{path} is a kernel for {got_arch}, not {want}")
    if page_size and got_page and page_size != got_page:
        raise ValueError(f"{path} is a kernel with {got_page}-byte pages, not {page_size}")
    arch = got_arch or want
    if arch is None:
        arch = "x86_64"
        assumed.append("architecture not stated by the file: x86_64 assumed (--arch)")
    elif arch not in ARCHES:
        raise ValueError(f"{path} is a kernel for {arch}, which bpfmem does not model")
    page = got_page or page_size
    if page is None:
        page = 4096
        assumed.append(f"page size not stated by the file: 4096 assumed ({arch} builds "
                       f"{'/'.join(str(p // 1024) + 'K' for p in ARCHES[arch])}; "
                       "--page-size N for the node's)")
    elif page not in ARCHES[arch]:
        raise ValueError(f"page size {page} is not one {arch} builds "
                         f"({', '.join(map(str, ARCHES[arch]))})")
    elif not got_page:
        assumed.append(f"page size {page} as given (--page-size)")
    prof = profile_from_facts(facts, release=release, possible_cpus=cpus, page_size=page,
                              arch=arch, sizes_source=f"BTF file {path}",
                              assumed=tuple(assumed))
    from ..values import replace
    said = "the file" if got_page or host else "assumed or given"
    return replace(prof, notes=prof.notes + (
        f"{arch}, {page}-byte pages ({said}), smallest kmalloc cache {prof.kmalloc_min} B",))


def host_profile(root: str = "/") -> KernelProfile:
    """This machine's kernel: its BTF (struct sizes, eras, features, map types), release,
    possible CPUs, page size and NR_CPUS. Without BTF, the release's table."""
    from ..values import replace
    release = os.uname().release
    cpus = host_possible_cpus(root)
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    arch = os.uname().machine or "x86_64"
    btf_path = os.path.join(root, HOST_BTF)
    try:
        facts = _cached_host_facts(btf_path, release)
    except (OSError, ParseError):
        prof = KernelProfile.for_release(release, cpus, page_size=page)
        return replace(prof, nr_cpus=host_nr_cpus(root) or prof.nr_cpus, build=release,
                       notes=prof.notes + (f"no readable {btf_path}: struct sizes from the "
                                           "release table",))
    prof = profile_from_facts(facts, release=release, possible_cpus=cpus, page_size=page,
                              arch=arch, sizes_source="BTF of the running kernel")
    nr = host_nr_cpus(root)
    return replace(prof, nr_cpus=nr) if nr is not None else prof


def _cached_host_facts(btf_path: str, release: str):
    """The running kernel's BTF facts, parsed once per kernel build: parsing vmlinux BTF
    (about 5 MB) costs a fifth of a second, so the facts are kept in the user's cache, keyed
    by the release, the build string and the BTF file's size and mtime."""
    from . import cache
    from ..parse.kernel_facts import KernelFacts
    st = os.stat(btf_path)
    key = f"v3|{release}|{os.uname().version}|{st.st_size}|{st.st_mtime_ns}"
    d = cache.load("btf-facts", key)
    if d is not None:
        try:
            return KernelFacts(tuple((str(k), int(v)) for k, v in d["struct_sizes"]),
                               frozenset(map(str, d["members"])),
                               frozenset(map(int, d["map_types"])),
                               None if d["nr_cpus"] is None else int(d["nr_cpus"]), None,
                               str(d["container"]))
        except (ValueError, TypeError, KeyError):
            pass
    from ..inputs import read_input
    from ..parse.kernel_btf import parse_kernel_btf
    facts = parse_kernel_btf(read_input(btf_path, "kernel"), name="", struct_names=STRUCT_NAMES)
    from dataclasses import asdict      # a cache miss only: the import costs every start
    d = asdict(facts)
    d["members"], d["map_types"] = sorted(d["members"]), sorted(d["map_types"])
    cache.store("btf-facts", key, d)
    return facts


def profile_from_probe(header: dict, sizes: dict) -> KernelProfile:
    """The profile of a kernel the probe ran in (a VM): its release, possible CPUs and page
    size from the probe's header, struct sizes from the BTF the probe read there. The probe
    reports no struct members, so eras and features are the release's."""
    from ..values import replace

    from ..model.structs import sizes_from_dict
    release = parse_release(header["kernel"])
    nr_cpus = int(header.get("nr_cpus", -1))        # CONFIG_NR_CPUS (kernel_max + 1)
    prof = KernelProfile(release, int(header["possible_cpus"]),
                         int(header.get("page_size", 4096)), str(header.get("machine", "x86_64")),
                         sizes_from_dict(sizes, release), "btf",
                         nr_cpus=nr_cpus if nr_cpus > 0 else None,
                         build=str(header["kernel"]),
                         sizes_source="BTF read by the probe in the kernel measured")
    return replace(prof, notes=(f"eras of mainline {release[0]}.{release[1]} (the probe reads "
                                "struct sizes only)",))
