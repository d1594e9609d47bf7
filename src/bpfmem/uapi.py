"""Constants mirroring the kernel's BPF UAPI (``include/uapi/linux/bpf.h``).

Source of truth: the copy of ``include/uapi/linux/bpf.h`` shipped in the
libbpf v1.7.0 release (github.com/libbpf/libbpf, tag ``v1.7.0``), which is
synced from the kernel tree of the 7.0 development cycle.  Relative to the
6.18 kernel it additionally contains ``BPF_MAP_TYPE_INSN_ARRAY`` (6.19),
``BPF_F_RB_OVERWRITE`` (6.19) and ``BPF_TRACE_FSESSION`` (7.0).

The human readable ``kernel_name`` of every enum member follows libbpf's
``libbpf_bpf_{map,prog,attach}_type_str()`` (the same strings bpftool prints):
the lower-cased identifier without its ``BPF_MAP_TYPE_`` / ``BPF_PROG_TYPE_`` /
``BPF_`` prefix.

Values that are unknown to this module (e.g. produced by a newer kernel) must
never crash formatting code: use :func:`map_type_name`,
:func:`prog_type_name`, :func:`attach_type_name` and :func:`flag_names`, which
fall back to ``"unknown(N)"`` / ``"0x..."`` strings.
"""

from __future__ import annotations

from functools import lru_cache

from .values import IntEnum, IntFlag

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Iterable

__all__ = [
    "BPF_OBJ_NAME_LEN",
    "MapType",
    "MapFlag",
    "ProgType",
    "AttachType",
    "PinningType",
    "map_type_name",
    "prog_type_name",
    "attach_type_name",
    "flag_names",
    "parse_flags",
]

#: Size of ``map_name`` / ``prog_name`` in ``union bpf_attr`` (includes NUL).
BPF_OBJ_NAME_LEN = 16


class _KernelNamedEnum(IntEnum):
    """Shared behaviour of the UAPI enums (no members of its own).

    Subclasses provide ``_c_prefix()`` returning the C identifier prefix,
    e.g. ``"BPF_MAP_TYPE_"``.
    """

    @classmethod
    def _c_prefix(cls) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def kernel_name(self) -> str:
        """libbpf/bpftool spelling, e.g. ``"lru_percpu_hash"``.

        For aliased values this is the name of the canonical (first defined)
        member, e.g. ``cgroup_storage`` for value 19.
        """
        return self.name.lower()

    @property
    def c_name(self) -> str:
        """The C enumerator, e.g. ``"BPF_MAP_TYPE_LRU_HASH"``."""
        return self._c_prefix() + self.name

    @classmethod
    def from_name(cls, name: "str | int"):
        """Look a member up by libbpf name, enum name or C identifier.

        ``"lru_hash"``, ``"LRU_HASH"`` and ``"BPF_MAP_TYPE_LRU_HASH"`` all
        resolve to the same member.  Integers (and decimal / ``0x`` strings)
        are accepted when they are a known value.  Raises :class:`ValueError`
        listing the valid names otherwise.
        """
        if isinstance(name, bool):
            raise TypeError(f"{cls.__name__}.from_name() expects str or int")
        if isinstance(name, int):
            try:
                return cls(name)
            except ValueError:
                raise ValueError(
                    f"unknown {cls._what()} value {name}") from None
        if not isinstance(name, str):
            raise TypeError(f"{cls.__name__}.from_name() expects str or int, "
                            f"got {type(name).__name__}")
        key = name.strip()
        upper = key.upper()
        prefix = cls._c_prefix()
        if upper.startswith(prefix):
            upper = upper[len(prefix):]
        member = cls.__members__.get(upper)
        if member is not None:
            return member
        try:
            num = int(key, 0)
        except ValueError:
            num = None
        if num is not None and num in cls._value2member_map_:
            return cls(num)
        valid = ", ".join(m.kernel_name for m in cls)
        raise ValueError(
            f"unknown {cls._what()} {name!r}; valid names: {valid}")

    @classmethod
    def _what(cls) -> str:
        return cls.__name__

    @classmethod
    def name_of(cls, value: int) -> str:
        """``kernel_name`` of *value*, or ``"unknown(N)"`` if not a member."""
        try:
            return cls(int(value)).kernel_name
        except ValueError:
            return f"unknown({int(value)})"


class MapType(_KernelNamedEnum):
    """``enum bpf_map_type``."""

    UNSPEC = 0
    HASH = 1
    ARRAY = 2
    PROG_ARRAY = 3
    PERF_EVENT_ARRAY = 4
    PERCPU_HASH = 5
    PERCPU_ARRAY = 6
    STACK_TRACE = 7
    CGROUP_ARRAY = 8
    LRU_HASH = 9
    LRU_PERCPU_HASH = 10
    LPM_TRIE = 11
    ARRAY_OF_MAPS = 12
    HASH_OF_MAPS = 13
    DEVMAP = 14
    SOCKMAP = 15
    CPUMAP = 16
    XSKMAP = 17
    SOCKHASH = 18
    # The kernel spells value 19 BPF_MAP_TYPE_CGROUP_STORAGE_DEPRECATED and
    # aliases BPF_MAP_TYPE_CGROUP_STORAGE to it; libbpf/bpftool print
    # "cgroup_storage".  The canonical member comes first, the alias second.
    CGROUP_STORAGE = 19
    CGROUP_STORAGE_DEPRECATED = 19
    REUSEPORT_SOCKARRAY = 20
    # Same story as value 19.
    PERCPU_CGROUP_STORAGE = 21
    PERCPU_CGROUP_STORAGE_DEPRECATED = 21
    QUEUE = 22
    STACK = 23
    SK_STORAGE = 24
    DEVMAP_HASH = 25
    STRUCT_OPS = 26
    RINGBUF = 27
    INODE_STORAGE = 28
    TASK_STORAGE = 29
    BLOOM_FILTER = 30
    USER_RINGBUF = 31
    CGRP_STORAGE = 32
    ARENA = 33
    INSN_ARRAY = 34  # Linux 6.19

    @classmethod
    def _c_prefix(cls) -> str:
        return "BPF_MAP_TYPE_"

    @classmethod
    def _what(cls) -> str:
        return "map type"


class ProgType(_KernelNamedEnum):
    """``enum bpf_prog_type``."""

    UNSPEC = 0
    SOCKET_FILTER = 1
    KPROBE = 2
    SCHED_CLS = 3
    SCHED_ACT = 4
    TRACEPOINT = 5
    XDP = 6
    PERF_EVENT = 7
    CGROUP_SKB = 8
    CGROUP_SOCK = 9
    LWT_IN = 10
    LWT_OUT = 11
    LWT_XMIT = 12
    SOCK_OPS = 13
    SK_SKB = 14
    CGROUP_DEVICE = 15
    SK_MSG = 16
    RAW_TRACEPOINT = 17
    CGROUP_SOCK_ADDR = 18
    LWT_SEG6LOCAL = 19
    LIRC_MODE2 = 20
    SK_REUSEPORT = 21
    FLOW_DISSECTOR = 22
    CGROUP_SYSCTL = 23
    RAW_TRACEPOINT_WRITABLE = 24
    CGROUP_SOCKOPT = 25
    TRACING = 26
    STRUCT_OPS = 27
    EXT = 28
    LSM = 29
    SK_LOOKUP = 30
    SYSCALL = 31
    NETFILTER = 32

    @classmethod
    def _c_prefix(cls) -> str:
        return "BPF_PROG_TYPE_"

    @classmethod
    def _what(cls) -> str:
        return "program type"


class AttachType(_KernelNamedEnum):
    """``enum bpf_attach_type`` (C names are ``BPF_`` + member name)."""

    CGROUP_INET_INGRESS = 0
    CGROUP_INET_EGRESS = 1
    CGROUP_INET_SOCK_CREATE = 2
    CGROUP_SOCK_OPS = 3
    SK_SKB_STREAM_PARSER = 4
    SK_SKB_STREAM_VERDICT = 5
    CGROUP_DEVICE = 6
    SK_MSG_VERDICT = 7
    CGROUP_INET4_BIND = 8
    CGROUP_INET6_BIND = 9
    CGROUP_INET4_CONNECT = 10
    CGROUP_INET6_CONNECT = 11
    CGROUP_INET4_POST_BIND = 12
    CGROUP_INET6_POST_BIND = 13
    CGROUP_UDP4_SENDMSG = 14
    CGROUP_UDP6_SENDMSG = 15
    LIRC_MODE2 = 16
    FLOW_DISSECTOR = 17
    CGROUP_SYSCTL = 18
    CGROUP_UDP4_RECVMSG = 19
    CGROUP_UDP6_RECVMSG = 20
    CGROUP_GETSOCKOPT = 21
    CGROUP_SETSOCKOPT = 22
    TRACE_RAW_TP = 23
    TRACE_FENTRY = 24
    TRACE_FEXIT = 25
    MODIFY_RETURN = 26
    LSM_MAC = 27
    TRACE_ITER = 28
    CGROUP_INET4_GETPEERNAME = 29
    CGROUP_INET6_GETPEERNAME = 30
    CGROUP_INET4_GETSOCKNAME = 31
    CGROUP_INET6_GETSOCKNAME = 32
    XDP_DEVMAP = 33
    CGROUP_INET_SOCK_RELEASE = 34
    XDP_CPUMAP = 35
    SK_LOOKUP = 36
    XDP = 37
    SK_SKB_VERDICT = 38
    SK_REUSEPORT_SELECT = 39
    SK_REUSEPORT_SELECT_OR_MIGRATE = 40
    PERF_EVENT = 41
    TRACE_KPROBE_MULTI = 42
    LSM_CGROUP = 43
    STRUCT_OPS = 44
    NETFILTER = 45
    TCX_INGRESS = 46
    TCX_EGRESS = 47
    TRACE_UPROBE_MULTI = 48
    CGROUP_UNIX_CONNECT = 49
    CGROUP_UNIX_SENDMSG = 50
    CGROUP_UNIX_RECVMSG = 51
    CGROUP_UNIX_GETPEERNAME = 52
    CGROUP_UNIX_GETSOCKNAME = 53
    NETKIT_PRIMARY = 54
    NETKIT_PEER = 55
    TRACE_KPROBE_SESSION = 56
    TRACE_UPROBE_SESSION = 57
    TRACE_FSESSION = 58  # Linux 7.0

    @classmethod
    def _c_prefix(cls) -> str:
        return "BPF_"

    @classmethod
    def _what(cls) -> str:
        return "attach type"


class PinningType(IntEnum):
    """libbpf's ``enum libbpf_pin_type`` (``__uint(pinning, ...)`` in maps)."""

    NONE = 0      # LIBBPF_PIN_NONE
    BY_NAME = 1   # LIBBPF_PIN_BY_NAME

    @property
    def c_name(self) -> str:
        return "LIBBPF_PIN_" + self.name


class MapFlag(IntFlag):
    """``BPF_F_*`` flags accepted in ``map_flags`` of ``BPF_MAP_CREATE``.

    This is the anonymous "flags for BPF_MAP_CREATE command" enum of the
    UAPI header; a few of its bits (``RDONLY``/``WRONLY``, ``PATH_FD``,
    ``TOKEN_FD``) are also used by other commands.
    """

    NO_PREALLOC = 1 << 0
    NO_COMMON_LRU = 1 << 1
    NUMA_NODE = 1 << 2
    RDONLY = 1 << 3
    WRONLY = 1 << 4
    STACK_BUILD_ID = 1 << 5
    ZERO_SEED = 1 << 6
    RDONLY_PROG = 1 << 7
    WRONLY_PROG = 1 << 8
    CLONE = 1 << 9
    MMAPABLE = 1 << 10
    PRESERVE_ELEMS = 1 << 11
    INNER_MAP = 1 << 12
    LINK = 1 << 13
    PATH_FD = 1 << 14
    VTYPE_BTF_OBJ_FD = 1 << 15
    TOKEN_FD = 1 << 16
    SEGV_ON_FAULT = 1 << 17
    NO_USER_CONV = 1 << 18
    RB_OVERWRITE = 1 << 19  # Linux 6.19

    @property
    def kernel_name(self) -> str:
        """Lower-case name without ``BPF_F_`` (comma-joined if combined)."""
        return ",".join(flag_names(int(self)))

    @property
    def c_name(self) -> str:
        """``BPF_F_`` identifier(s), ``|``-joined for combinations."""
        return "|".join("BPF_F_" + n.upper() if not n.startswith("0x") else n
                        for n in flag_names(int(self)))


_FLAG_BITS: tuple[MapFlag, ...] = tuple(
    sorted((m for m in MapFlag.__members__.values()), key=int))
_KNOWN_FLAG_MASK = 0
for _m in _FLAG_BITS:
    _KNOWN_FLAG_MASK |= int(_m)
del _m


@lru_cache(maxsize=1024)
def map_type_name(value: int) -> str:
    """libbpf name of a map type value, ``"unknown(N)"`` for unknown values (each value's
    worked out once: a document names the type of every map)."""
    return MapType.name_of(value)


@lru_cache(maxsize=1024)
def prog_type_name(value: int) -> str:
    """libbpf name of a program type value, ``"unknown(N)"`` if unknown."""
    return ProgType.name_of(value)


@lru_cache(maxsize=1024)
def attach_type_name(value: int) -> str:
    """libbpf name of an attach type value, ``"unknown(N)"`` if unknown."""
    return AttachType.name_of(value)


def flag_names(value: int) -> list[str]:
    """Decompose ``map_flags`` into lower-case flag names, lowest bit first.

    Bits that are not known map-creation flags are reported together as one
    trailing hex string, e.g. ``flag_names(0x40000401)`` ->
    ``["no_prealloc", "mmapable", "0x40000000"]``.  ``0`` gives ``[]``.
    """
    return list(_flag_names(int(value)))


@lru_cache(maxsize=1024)
def _flag_names(value: int) -> tuple[str, ...]:
    if value < 0:
        raise ValueError(f"map flags must be non-negative, got {value}")
    names = [m.name.lower() for m in _FLAG_BITS if value & int(m)]
    unknown = value & ~_KNOWN_FLAG_MASK
    if unknown:
        names.append(hex(unknown))
    return tuple(names)


def _flag_tokens(spec: str) -> Iterable[str]:
    for part in spec.replace("|", ",").replace(" ", ",").split(","):
        part = part.strip()
        if part:
            yield part


def parse_flags(spec: "str | int | Iterable[str | int]") -> int:
    """Parse a map-flag specification into an integer.

    Accepts an ``int``; a string of comma / ``|`` / space separated tokens,
    each being a flag name in any case with or without the ``BPF_F_`` prefix
    (``"no_prealloc"``, ``"MMAPABLE"``, ``"BPF_F_RDONLY_PROG"``) or a decimal /
    ``0x`` hex / ``0o`` / ``0b`` number; or an iterable of such tokens.
    The empty string means ``0``.  ``parse_flags(",".join(flag_names(v)))``
    round-trips to ``v``.

    Raises :class:`ValueError` naming the offending token and listing the
    valid flag names.
    """
    if isinstance(spec, bool):
        raise TypeError("parse_flags() does not accept bool")
    if isinstance(spec, int):
        if spec < 0:
            raise ValueError(f"map flags must be non-negative, got {spec}")
        return int(spec)
    if isinstance(spec, str):
        tokens: Iterable = _flag_tokens(spec)
    else:
        tokens = spec
    result = 0
    for tok in tokens:
        if isinstance(tok, int) and not isinstance(tok, bool):
            result |= parse_flags(tok)
            continue
        if not isinstance(tok, str):
            raise TypeError(f"invalid map flag token {tok!r}")
        tok = tok.strip()
        if not tok:
            continue
        if tok[0].isdigit():
            try:
                num = int(tok, 0)
            except ValueError:
                num = None
            if num is not None:
                result |= num
                continue
        key = tok.upper()
        if key.startswith("BPF_F_"):
            key = key[len("BPF_F_"):]
        member = MapFlag.__members__.get(key)
        if member is None:
            valid = ", ".join(m.name.lower() for m in _FLAG_BITS)
            raise ValueError(
                f"unknown map flag {tok!r}; valid flags: {valid}")
        result |= int(member)
    return result
