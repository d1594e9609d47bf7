"""The argument types and option groups several commands share, each defined once.

Types check a value as argparse reads it (a bad one is a usage error naming the option);
option groups declare the same flags, with the same help, on every command that has them.
"""

from __future__ import annotations

import argparse

# -- types ----------------------------------------------------------------------------------


def positive(text: str) -> int:
    """A CPU count: 1..65536 (kernels allow at most NR_CPUS, 8192 on x86_64)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text[:40]}") from None
    if not 1 <= n <= 65536:
        raise argparse.ArgumentTypeError(f"must be 1..65536: {text[:40]}")
    return n


def _each(check, text: str) -> str:
    """``text``, a comma-separated list, once ``check`` accepted each of its items."""
    for part in text.split(","):
        if part.strip():
            check(part.strip())
    return text


def cpu_list(text: str) -> str:
    """A comma-separated list of CPU counts (each checked), kept as written."""
    return _each(positive, text)


def kernel(text: str) -> str:
    """A kernel release bpfmem can model (5.10, 6.1.90, 6.12.0-31-cloud-amd64; 3.18 and
    later: BPF maps came with Linux 3.18), or the name of a [[kernels]] entry of
    bpfmem.toml (looked up once the file is read: an unknown name is a usage error then)."""
    import re
    if len(text) > 100 or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+~-]*", text):
        raise argparse.ArgumentTypeError(f"not a kernel release or a [[kernels]] name: "
                                         f"{text[:40]!r}")
    if not text[0].isdigit():
        return text     # a name
    from .. import api
    try:
        rel = api.parse_release(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if rel[:2] < (3, 18) or rel[0] > 99:
        raise argparse.ArgumentTypeError(f"not a kernel release bpfmem can model: {text[:40]!r} "
                                         "(BPF maps came with Linux 3.18)")
    return text


def kernel_list(text: str) -> str:
    """A comma-separated list of kernel releases (each checked), kept as written."""
    return _each(kernel, text)


def fraction(text: str) -> float:
    """A share in (0, 1]."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text[:40]}") from None
    if not 0 < v <= 1:   # also refuses nan
        raise argparse.ArgumentTypeError(f"must be in (0, 1]: {text[:40]}")
    return v


def _unsigned(text: str, bits: int, shown: str) -> int:
    try:
        n = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {shown}") from None
    if not 0 <= n < 1 << bits:
        raise argparse.ArgumentTypeError(f"out of range for a u{bits}: {shown}")
    return n


def u64(text: str) -> int:
    """A number (decimal, 0x...) that fits a u64."""
    return _unsigned(text, 64, text[:40])


def u32(text: str) -> int:
    """A number (decimal, 0x...) that fits a u32: sizes and counts of a map."""
    return _unsigned(text, 32, text)


def duration(text: str) -> float:
    """``100ms``, ``15s``, ``2m``, ``1h`` or plain seconds -> seconds."""
    t = text.strip().lower()
    for suffix, scale in (("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)):
        if t.endswith(suffix):
            num = t[:-len(suffix)]
            break
    else:
        num, scale = t, 1
    try:
        value = float(num) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text} (e.g. 100ms, 15s, 2m)") \
            from None
    import math
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive, finite duration: {text}")
    if value > 7 * 86400:
        raise argparse.ArgumentTypeError(f"more than a week: {text}")
    return value


def listen_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9435`` too) -> (host, port); no host is loopback."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, e.g. 127.0.0.1:9435: {text}")
    return host.strip("[]") or "127.0.0.1", int(port)


def comma_list(text: str | None) -> list[str]:
    """``a, b,,c`` -> ``["a", "b", "c"]``; nothing -> ``[]``."""
    return [x.strip() for x in text.split(",") if x.strip()] if text else []


# -- option groups --------------------------------------------------------------------------

KERNEL_BTF_HELP = ("the kernel's own BTF: /sys/kernel/btf/vmlinux copied from a node, a "
                   "vmlinux, a vmlinuz/bzImage or a BTFHub .btf.tar.xz; struct sizes, "
                   "accounting eras and map types come from it (exact for that build)")


def add_kernel(p: argparse.ArgumentParser) -> None:
    """--kernel, --kernel-btf, --cpus: the one kernel a command models."""
    p.add_argument("--kernel", type=kernel, metavar="VERSION",
                   help="kernel release to model, e.g. 5.10, 6.1, 6.12, 6.18: the release "
                        "table, measured on one build (default: the running kernel, from its "
                        "BTF); with --kernel-btf, the release of a file that does not say")
    p.add_argument("--kernel-btf", metavar="FILE", help=KERNEL_BTF_HELP)
    p.add_argument("--cpus", type=positive, metavar="N",
                   help="possible CPUs (default: this host's /sys/devices/system/cpu/possible)")
    add_image_facts(p)


PAGE_SIZE_HELP = ("with --kernel-btf: the node's page size when the file does not say (a raw "
                  "BTF of an arm64 node: 4096, 16384 or 65536; default 4096, shown in the "
                  "output)")
ARCH_HELP = ("with --kernel-btf: the node's architecture (x86_64/amd64, aarch64/arm64) when "
             "the file does not say")


def page_size(text: str) -> int:
    """A page size: 4096, 16384 or 65536."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text[:40]}") from None
    if n not in (4096, 16384, 65536):
        raise argparse.ArgumentTypeError(f"must be 4096, 16384 or 65536: {text[:40]}")
    return n


def add_image_facts(p: argparse.ArgumentParser) -> None:
    """--page-size, --arch: what a --kernel-btf file may not say."""
    p.add_argument("--page-size", type=page_size, metavar="BYTES", help=PAGE_SIZE_HELP)
    p.add_argument("--arch", metavar="ARCH", help=ARCH_HELP)


def add_kernels(p: argparse.ArgumentParser) -> None:
    """--kernel, --kernel-btf, --cpus taking several: every command that models kernels
    (maps, check, diff, advise) resolves them by one rule (cli.common.kernels_of)."""
    p.add_argument("--kernel", type=kernel_list, metavar="V[,V...]",
                   help="kernel release(s) to model (5.10, 6.1, 6.12, 6.18: release tables) "
                        "or names of [[kernels]] entries in bpfmem.toml; default: the "
                        "kernels bpfmem.toml lists, else the running kernel (from its BTF); "
                        "with --kernel-btf, the release of a file that does not say")
    p.add_argument("--kernel-btf", metavar="FILE", action="append", default=[],
                   help=KERNEL_BTF_HELP + "; repeat for several kernels")
    p.add_argument("--cpus", type=cpu_list, metavar="N[,N...]",
                   help="possible CPU count(s) of the node (default: bpfmem.toml's cpus, "
                        "else this host's /sys/devices/system/cpu/possible)")
    add_image_facts(p)


LOADER_HELP = ("which loader creates the maps: libbpf, cilium-ebpf (current cilium/ebpf, Go "
               "agents, bpf2go objects), cilium-ebpf@0.9 (cilium/ebpf 0.9.1) or auto: the "
               "loader that can open the object, cilium-ebpf for bpf2go names (*_bpfel.o), "
               "else libbpf (default: auto, or `loader` in bpfmem.toml)")


def add_loader(p: argparse.ArgumentParser, several: bool = False) -> None:
    """--loader (with ``several``: a comma-separated list)."""
    p.add_argument("--loader", metavar="L[,L...]" if several else "LOADER",
                   help=LOADER_HELP + ("; several, comma-separated, check the objects as "
                                       "each reads them" if several else ""))


def add_platform(p: argparse.ArgumentParser) -> None:
    """--platform: which image of a multi-platform container image is read."""
    p.add_argument("--platform", metavar="OS/ARCH",
                   help="for a multi-platform container image: the platform to read "
                        "(linux/arm64); default: this host's")


def add_whatif(p: argparse.ArgumentParser) -> None:
    """--set, --size-ratio, --node-memory: changes to the maps before they are estimated."""
    g = p.add_argument_group("what-if (changes the maps before estimating them)")
    g.add_argument("--set", action="append", default=[], metavar="EXPR",
                   help="MAP.max_entries=N, MAP.flags+=no_prealloc, MAP.flags-=..., "
                        "MAP.count=N (a map created N times); MAP may be a glob: 'service_*'")
    g.add_argument("--size-ratio", type=fraction, metavar="R",
                   help="Cilium-style dynamic sizing: share of node memory for the maps that "
                        "[dynamic.maps] in bpfmem.toml names (e.g. 0.0025)")
    g.add_argument("--node-memory", metavar="SIZE",
                   help="node memory for --size-ratio, a quantity (64Gi)")


def add_format(p: argparse.ArgumentParser, formats: tuple[str, ...], default: str = "table",
               help: str | None = "output format (default: table)") -> None:
    """--format FORMAT (one of ``formats``)."""
    p.add_argument("--format", choices=formats, default=default, help=help)


def add_output_file(p: argparse.ArgumentParser,
                    help: str = "write there instead of stdout") -> None:
    """-o/--output FILE."""
    p.add_argument("-o", "--output", metavar="FILE", help=help)


def add_config(p: argparse.ArgumentParser) -> None:
    """--config FILE."""
    p.add_argument("--config", metavar="FILE",
                   help="bpfmem.toml or pyproject.toml ([tool.bpfmem]); default: found from "
                        "the current directory")


def add_output(p: argparse.ArgumentParser, formats: tuple[str, ...]) -> None:
    """--format, -o/--output and --config: the gate commands' output options."""
    add_format(p, formats)
    add_output_file(p)
    add_config(p)


LIVE_FILTERS = {
    "owner": ("only maps and programs held by a process whose comm matches this glob "
              "(cilium-agent, 'ci*')"),
    "cgroup": ("only maps and programs held by a process whose memory cgroup path contains "
               "this text"),
    "name": "only maps whose name matches this glob ('cilium_lb*')",
    "type": "only maps of this kernel type (hash, lru_hash, percpu_array, ...)",
}


def add_live_filters(p: argparse.ArgumentParser) -> None:
    """--owner, --cgroup, --name, --type: which of the node's maps to show."""
    for k, h in LIVE_FILTERS.items():
        p.add_argument(f"--{k}", metavar="PATTERN", help=h)


def live_filters(args: argparse.Namespace) -> dict[str, str]:
    """The live filters given, by name."""
    return {k: getattr(args, k) for k in LIVE_FILTERS if getattr(args, k, None)}


def add_scan(p: argparse.ArgumentParser, programs: bool = False) -> None:
    """--entries, --time-bound, --no-pins, --no-owners, --owners-from (and with ``programs``
    --no-programs): how the node is scanned."""
    p.add_argument("--entries", action="store_true",
                   help="count each map's entries (read-only lookups; batch where the kernel "
                        "has them) to show occupancy and pressure = entries / max_entries")
    p.add_argument("--time-bound", type=duration, default=0.5, metavar="DUR",
                   help="stop counting one map's entries after this long (default 500ms); "
                        "a cut-short count is shown with a '+'")
    p.add_argument("--no-pins", action="store_true", help="do not walk bpffs mounts for pins")
    if programs:
        p.add_argument("--no-programs", action="store_true",
                       help="do not list the programs, links and BTF objects (their memlock, "
                            "JIT size and holders beside the maps)")
    p.add_argument("--no-owners", action="store_true",
                   help="do not walk the processes' fds: no owners and no cgroups, and no "
                        "need for CAP_SYS_PTRACE (memlock is read through bpfmem's own fds)")
    p.add_argument("--owners-from", choices=("auto", "iterator", "proc"), default="auto",
                   help="how owners are found: the kernel's task_file iterator (one BPF "
                        "program, needs CAP_BPF+CAP_PERFMON or CAP_SYS_ADMIN and kallsyms "
                        "addresses), the /proc walk, or auto (default): the iterator where "
                        "it can run (one walk finds the maps' and the programs' holders), "
                        "else the /proc walk (on 2+ CPUs in a child beside the map listing); "
                        "the JSON's owners_from says which ran")
