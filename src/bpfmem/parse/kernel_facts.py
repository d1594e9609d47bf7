"""What a kernel's BTF says about its maps' memory (:func:`bpfmem.parse.kernel_btf.parse_kernel_btf`
parses it; here on its own so that the host's cached facts are read back without importing
the parser, its ELF reader and its decompressors: start-up time)."""

from __future__ import annotations

from ..values import dataclass


@dataclass(frozen=True)
class KernelFacts:
    """What a kernel's BTF says about its maps' memory."""

    struct_sizes: tuple[tuple[str, int], ...]   # (struct name, sizeof), for the names asked
    members: frozenset[str]                     # "struct.member" for MARKER_STRUCTS
    map_types: frozenset[int]                   # the values of enum bpf_map_type
    nr_cpus: int | None                         # CONFIG_NR_CPUS, from sizeof(struct cpumask)
    release: str | None                         # "6.1.0-57-cloud-amd64", when the file says
    container: str                              # "raw BTF", "ELF vmlinux", "bzImage", ...
    arch: str | None = None                     # "x86_64", "aarch64" (uname -m), when known
    page_size: int | None = None                # when the image says (arm64 Image header)

    def has(self, struct_member: str) -> bool:
        return struct_member in self.members

    @property
    def sizes(self) -> dict[str, int]:
        return dict(self.struct_sizes)
