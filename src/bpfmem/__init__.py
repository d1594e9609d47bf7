"""bpfmem: what eBPF maps cost in memory, before the kernel charges it.

The public library surface is :mod:`bpfmem.api`.
"""

__version__ = "0.1.0"
