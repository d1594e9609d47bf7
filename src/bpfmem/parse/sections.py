"""ELF section name -> BPF program type, as libbpf decides it.

Mirrors ``section_defs[]`` and ``sec_def_matches()`` / ``find_sec_def()`` of
``src/libbpf.c`` in the **libbpf v1.7.0** release (github.com/libbpf/libbpf,
tag ``v1.7.0``).  v1.7.0 differs from v1.6.x only by the ``fsession+`` and
``fsession.s+`` entries.

Matching rules (libbpf 1.x):

* Entries are tried in table order; the first match wins (so
  ``sk_reuseport/migrate`` precedes ``sk_reuseport``, ``xdp.frags/devmap``
  precedes ``xdp/devmap``, ...).
* A spec ending in ``+`` (``"kprobe+"``) matches the bare name
  (``SEC("kprobe")``) or the name followed by ``/`` and anything
  (``SEC("kprobe/do_sys_open")``).  Anything else after the prefix does not
  match: ``"kprobe.multi"`` is only found through its own ``kprobe.multi+``
  entry, and ``"uprobe.foo"`` matches nothing.
* A spec ending in ``/`` requires that exact prefix (no entry of the current
  table uses this form, but the rule is implemented).
* Any other spec must equal the section name exactly: ``"tc"``,
  ``"classifier"``, ``"action"``, ``"xdp"``, ``"socket"``, ``"syscall"``...
  So ``SEC("classifier/foo")`` or ``SEC("xdp_foo")`` are *not* recognized.
  libbpf 0.x had ``SEC_SLOPPY_PFX`` entries and a "legacy" mode that treated
  such names as plain prefixes; libbpf 1.0 removed both, and this module
  does not implement them.
* When libbpf opens an object it strips one leading ``?`` from a program's
  section name and turns autoload off (``SEC("?xdp")``).  The public
  ``libbpf_prog_type_by_name()`` does *not* strip it.  :func:`match_section`
  and :func:`program_type_for_section` strip it; :func:`find_sec_def` is the
  raw lookup.
* No match: libbpf leaves the program type ``BPF_PROG_TYPE_UNSPEC``
  (``libbpf_prog_type_by_name()`` returns ``-ESRCH``); we return ``None``.

Load-time adjustments libbpf makes from the cookie flags (not reflected in
``expected_attach_type`` here): ``SEC_SLEEPABLE`` -> ``BPF_F_SLEEPABLE``
prog flag, ``SEC_XDP_FRAGS`` -> ``BPF_F_XDP_HAS_FRAGS``, ``SEC_USDT`` ->
``BPF_TRACE_UPROBE_MULTI`` if the kernel supports uprobe-multi links,
``SEC_EXP_ATTACH_OPT`` -> attach type dropped on kernels too old for it.
"""

from __future__ import annotations

from functools import lru_cache

from ..values import IntFlag, dataclass

from bpfmem.uapi import AttachType, ProgType

__all__ = [
    "LIBBPF_VERSION",
    "SecFlag",
    "SectionDef",
    "SECTION_DEFS",
    "sec_def_matches",
    "find_sec_def",
    "match_section",
    "program_type_for_section",
]

#: libbpf release whose ``section_defs[]`` this module mirrors.
LIBBPF_VERSION = "1.7.0"


class SecFlag(IntFlag):
    """libbpf's ``enum sec_def_flags`` (stored as the sec_def cookie)."""

    NONE = 0
    #: expected_attach_type may be dropped on kernels that don't support it
    EXP_ATTACH_OPT = 1
    #: legacy marker for BPF_PROG_ATTACH-able programs (informational only)
    ATTACHABLE = 2
    ATTACHABLE_OPT = ATTACHABLE | EXP_ATTACH_OPT
    #: attach target is a BTF id (``fentry/<func>``, ``lsm/<hook>``, ...)
    ATTACH_BTF = 4
    #: program may sleep (loaded with BPF_F_SLEEPABLE)
    SLEEPABLE = 8
    #: XDP program supports multi-buffer packets (BPF_F_XDP_HAS_FRAGS)
    XDP_FRAGS = 16
    #: USDT: attach type becomes BPF_TRACE_UPROBE_MULTI when supported
    USDT = 32


@dataclass(frozen=True)
class SectionDef:
    """One libbpf ``struct bpf_sec_def``.

    ``prefix`` is libbpf's spec string verbatim, including a trailing ``+``
    or ``/`` (see the module docstring for what they mean).
    ``expected_attach_type`` is an :class:`AttachType`, or the plain int ``0``
    where libbpf specifies none (numerically ``BPF_CGROUP_INET_INGRESS``, but
    meaning "no attach type").
    """

    prefix: str
    prog_type: ProgType
    expected_attach_type: AttachType | int
    flags: SecFlag = SecFlag.NONE

    @property
    def base(self) -> str:
        """``prefix`` without a trailing ``+`` marker."""
        return self.prefix[:-1] if self.prefix.endswith("+") else self.prefix

    @property
    def sleepable(self) -> bool:
        return bool(self.flags & SecFlag.SLEEPABLE)

    @property
    def attach_btf(self) -> bool:
        return bool(self.flags & SecFlag.ATTACH_BTF)

    def matches(self, sec_name: str) -> bool:
        return sec_def_matches(self, sec_name)


_P = ProgType
_A = AttachType
_F = SecFlag

_NONE = _F.NONE
_ATT = _F.ATTACHABLE
_ATT_OPT = _F.ATTACHABLE_OPT
_BTF = _F.ATTACH_BTF
_SLP = _F.SLEEPABLE
_FRAGS = _F.XDP_FRAGS
_USDT = _F.USDT

# (spec, prog type, expected attach type or 0, cookie flags) in libbpf order.
_TABLE = (
    ("socket", _P.SOCKET_FILTER, 0, _NONE),
    ("sk_reuseport/migrate", _P.SK_REUSEPORT,
     _A.SK_REUSEPORT_SELECT_OR_MIGRATE, _ATT),
    ("sk_reuseport", _P.SK_REUSEPORT, _A.SK_REUSEPORT_SELECT, _ATT),
    ("kprobe+", _P.KPROBE, 0, _NONE),
    ("uprobe+", _P.KPROBE, 0, _NONE),
    ("uprobe.s+", _P.KPROBE, 0, _SLP),
    ("kretprobe+", _P.KPROBE, 0, _NONE),
    ("uretprobe+", _P.KPROBE, 0, _NONE),
    ("uretprobe.s+", _P.KPROBE, 0, _SLP),
    ("kprobe.multi+", _P.KPROBE, _A.TRACE_KPROBE_MULTI, _NONE),
    ("kretprobe.multi+", _P.KPROBE, _A.TRACE_KPROBE_MULTI, _NONE),
    ("kprobe.session+", _P.KPROBE, _A.TRACE_KPROBE_SESSION, _NONE),
    ("uprobe.multi+", _P.KPROBE, _A.TRACE_UPROBE_MULTI, _NONE),
    ("uretprobe.multi+", _P.KPROBE, _A.TRACE_UPROBE_MULTI, _NONE),
    ("uprobe.session+", _P.KPROBE, _A.TRACE_UPROBE_SESSION, _NONE),
    ("uprobe.multi.s+", _P.KPROBE, _A.TRACE_UPROBE_MULTI, _SLP),
    ("uretprobe.multi.s+", _P.KPROBE, _A.TRACE_UPROBE_MULTI, _SLP),
    ("uprobe.session.s+", _P.KPROBE, _A.TRACE_UPROBE_SESSION, _SLP),
    ("ksyscall+", _P.KPROBE, 0, _NONE),
    ("kretsyscall+", _P.KPROBE, 0, _NONE),
    ("usdt+", _P.KPROBE, 0, _USDT),
    ("usdt.s+", _P.KPROBE, 0, _USDT | _SLP),
    ("tc/ingress", _P.SCHED_CLS, _A.TCX_INGRESS, _NONE),  # alias for tcx
    ("tc/egress", _P.SCHED_CLS, _A.TCX_EGRESS, _NONE),  # alias for tcx
    ("tcx/ingress", _P.SCHED_CLS, _A.TCX_INGRESS, _NONE),
    ("tcx/egress", _P.SCHED_CLS, _A.TCX_EGRESS, _NONE),
    ("tc", _P.SCHED_CLS, 0, _NONE),  # legacy, exact name only
    ("classifier", _P.SCHED_CLS, 0, _NONE),  # legacy, exact name only
    ("action", _P.SCHED_ACT, 0, _NONE),  # legacy, exact name only
    ("netkit/primary", _P.SCHED_CLS, _A.NETKIT_PRIMARY, _NONE),
    ("netkit/peer", _P.SCHED_CLS, _A.NETKIT_PEER, _NONE),
    ("tracepoint+", _P.TRACEPOINT, 0, _NONE),
    ("tp+", _P.TRACEPOINT, 0, _NONE),
    ("raw_tracepoint+", _P.RAW_TRACEPOINT, 0, _NONE),
    ("raw_tp+", _P.RAW_TRACEPOINT, 0, _NONE),
    ("raw_tracepoint.w+", _P.RAW_TRACEPOINT_WRITABLE, 0, _NONE),
    ("raw_tp.w+", _P.RAW_TRACEPOINT_WRITABLE, 0, _NONE),
    ("tp_btf+", _P.TRACING, _A.TRACE_RAW_TP, _BTF),
    ("fentry+", _P.TRACING, _A.TRACE_FENTRY, _BTF),
    ("fmod_ret+", _P.TRACING, _A.MODIFY_RETURN, _BTF),
    ("fexit+", _P.TRACING, _A.TRACE_FEXIT, _BTF),
    ("fentry.s+", _P.TRACING, _A.TRACE_FENTRY, _BTF | _SLP),
    ("fmod_ret.s+", _P.TRACING, _A.MODIFY_RETURN, _BTF | _SLP),
    ("fexit.s+", _P.TRACING, _A.TRACE_FEXIT, _BTF | _SLP),
    ("fsession+", _P.TRACING, _A.TRACE_FSESSION, _BTF),  # new in 1.7
    ("fsession.s+", _P.TRACING, _A.TRACE_FSESSION, _BTF | _SLP),  # new in 1.7
    ("freplace+", _P.EXT, 0, _BTF),
    ("lsm+", _P.LSM, _A.LSM_MAC, _BTF),
    ("lsm.s+", _P.LSM, _A.LSM_MAC, _BTF | _SLP),
    ("lsm_cgroup+", _P.LSM, _A.LSM_CGROUP, _BTF),
    ("iter+", _P.TRACING, _A.TRACE_ITER, _BTF),
    ("iter.s+", _P.TRACING, _A.TRACE_ITER, _BTF | _SLP),
    ("syscall", _P.SYSCALL, 0, _SLP),
    ("xdp.frags/devmap", _P.XDP, _A.XDP_DEVMAP, _FRAGS),
    ("xdp/devmap", _P.XDP, _A.XDP_DEVMAP, _ATT),
    ("xdp.frags/cpumap", _P.XDP, _A.XDP_CPUMAP, _FRAGS),
    ("xdp/cpumap", _P.XDP, _A.XDP_CPUMAP, _ATT),
    ("xdp.frags", _P.XDP, _A.XDP, _FRAGS),
    ("xdp", _P.XDP, _A.XDP, _ATT_OPT),
    ("perf_event", _P.PERF_EVENT, 0, _NONE),
    ("lwt_in", _P.LWT_IN, 0, _NONE),
    ("lwt_out", _P.LWT_OUT, 0, _NONE),
    ("lwt_xmit", _P.LWT_XMIT, 0, _NONE),
    ("lwt_seg6local", _P.LWT_SEG6LOCAL, 0, _NONE),
    ("sockops", _P.SOCK_OPS, _A.CGROUP_SOCK_OPS, _ATT_OPT),
    ("sk_skb/stream_parser", _P.SK_SKB, _A.SK_SKB_STREAM_PARSER, _ATT_OPT),
    ("sk_skb/stream_verdict", _P.SK_SKB, _A.SK_SKB_STREAM_VERDICT, _ATT_OPT),
    ("sk_skb/verdict", _P.SK_SKB, _A.SK_SKB_VERDICT, _ATT_OPT),
    ("sk_skb", _P.SK_SKB, 0, _NONE),
    ("sk_msg", _P.SK_MSG, _A.SK_MSG_VERDICT, _ATT_OPT),
    ("lirc_mode2", _P.LIRC_MODE2, _A.LIRC_MODE2, _ATT_OPT),
    ("flow_dissector", _P.FLOW_DISSECTOR, _A.FLOW_DISSECTOR, _ATT_OPT),
    ("cgroup_skb/ingress", _P.CGROUP_SKB, _A.CGROUP_INET_INGRESS, _ATT_OPT),
    ("cgroup_skb/egress", _P.CGROUP_SKB, _A.CGROUP_INET_EGRESS, _ATT_OPT),
    ("cgroup/skb", _P.CGROUP_SKB, 0, _NONE),
    ("cgroup/sock_create", _P.CGROUP_SOCK, _A.CGROUP_INET_SOCK_CREATE, _ATT),
    ("cgroup/sock_release", _P.CGROUP_SOCK, _A.CGROUP_INET_SOCK_RELEASE,
     _ATT),
    ("cgroup/sock", _P.CGROUP_SOCK, _A.CGROUP_INET_SOCK_CREATE, _ATT_OPT),
    ("cgroup/post_bind4", _P.CGROUP_SOCK, _A.CGROUP_INET4_POST_BIND, _ATT),
    ("cgroup/post_bind6", _P.CGROUP_SOCK, _A.CGROUP_INET6_POST_BIND, _ATT),
    ("cgroup/bind4", _P.CGROUP_SOCK_ADDR, _A.CGROUP_INET4_BIND, _ATT),
    ("cgroup/bind6", _P.CGROUP_SOCK_ADDR, _A.CGROUP_INET6_BIND, _ATT),
    ("cgroup/connect4", _P.CGROUP_SOCK_ADDR, _A.CGROUP_INET4_CONNECT, _ATT),
    ("cgroup/connect6", _P.CGROUP_SOCK_ADDR, _A.CGROUP_INET6_CONNECT, _ATT),
    ("cgroup/connect_unix", _P.CGROUP_SOCK_ADDR, _A.CGROUP_UNIX_CONNECT,
     _ATT),
    ("cgroup/sendmsg4", _P.CGROUP_SOCK_ADDR, _A.CGROUP_UDP4_SENDMSG, _ATT),
    ("cgroup/sendmsg6", _P.CGROUP_SOCK_ADDR, _A.CGROUP_UDP6_SENDMSG, _ATT),
    ("cgroup/sendmsg_unix", _P.CGROUP_SOCK_ADDR, _A.CGROUP_UNIX_SENDMSG,
     _ATT),
    ("cgroup/recvmsg4", _P.CGROUP_SOCK_ADDR, _A.CGROUP_UDP4_RECVMSG, _ATT),
    ("cgroup/recvmsg6", _P.CGROUP_SOCK_ADDR, _A.CGROUP_UDP6_RECVMSG, _ATT),
    ("cgroup/recvmsg_unix", _P.CGROUP_SOCK_ADDR, _A.CGROUP_UNIX_RECVMSG,
     _ATT),
    ("cgroup/getpeername4", _P.CGROUP_SOCK_ADDR,
     _A.CGROUP_INET4_GETPEERNAME, _ATT),
    ("cgroup/getpeername6", _P.CGROUP_SOCK_ADDR,
     _A.CGROUP_INET6_GETPEERNAME, _ATT),
    ("cgroup/getpeername_unix", _P.CGROUP_SOCK_ADDR,
     _A.CGROUP_UNIX_GETPEERNAME, _ATT),
    ("cgroup/getsockname4", _P.CGROUP_SOCK_ADDR,
     _A.CGROUP_INET4_GETSOCKNAME, _ATT),
    ("cgroup/getsockname6", _P.CGROUP_SOCK_ADDR,
     _A.CGROUP_INET6_GETSOCKNAME, _ATT),
    ("cgroup/getsockname_unix", _P.CGROUP_SOCK_ADDR,
     _A.CGROUP_UNIX_GETSOCKNAME, _ATT),
    ("cgroup/sysctl", _P.CGROUP_SYSCTL, _A.CGROUP_SYSCTL, _ATT),
    ("cgroup/getsockopt", _P.CGROUP_SOCKOPT, _A.CGROUP_GETSOCKOPT, _ATT),
    ("cgroup/setsockopt", _P.CGROUP_SOCKOPT, _A.CGROUP_SETSOCKOPT, _ATT),
    ("cgroup/dev", _P.CGROUP_DEVICE, _A.CGROUP_DEVICE, _ATT_OPT),
    ("struct_ops+", _P.STRUCT_OPS, 0, _NONE),
    ("struct_ops.s+", _P.STRUCT_OPS, 0, _SLP),
    ("sk_lookup", _P.SK_LOOKUP, _A.SK_LOOKUP, _ATT),
    ("netfilter", _P.NETFILTER, _A.NETFILTER, _NONE),
)

#: libbpf's ``section_defs[]`` in lookup order.
SECTION_DEFS: tuple[SectionDef, ...] = tuple(
    SectionDef(spec, ptype, atype, SecFlag(flags))
    for spec, ptype, atype, flags in _TABLE
)

del _P, _A, _F, _NONE, _ATT, _ATT_OPT, _BTF, _SLP, _FRAGS, _USDT, _TABLE


def sec_def_matches(sec_def: SectionDef, sec_name: str) -> bool:
    """libbpf's ``sec_def_matches()`` for one table entry."""
    spec = sec_def.prefix
    if not spec:
        return False
    if spec.endswith("/"):
        # "type/" requires the SEC("type/extras") form.
        return sec_name.startswith(spec)
    if spec.endswith("+"):
        # "type+" accepts SEC("type") or SEC("type/extras").
        base = spec[:-1]
        if not sec_name.startswith(base):
            return False
        rest = sec_name[len(base):]
        return rest == "" or rest[0] == "/"
    return sec_name == spec


def find_sec_def(sec_name: str) -> SectionDef | None:
    """Raw ``find_sec_def()``: first matching entry, no ``?`` handling.

    Equivalent to ``libbpf_prog_type_by_name()`` (which also does not strip
    a leading ``?``).
    """
    # libbpf compares C strings: anything after an embedded NUL is invisible.
    sec_name = sec_name.split("\0", 1)[0]
    # only entries whose prefix starts with the name's first character can match (every
    # prefix is non-empty); _BY_FIRST keeps them in table order, so the first match is
    # libbpf's
    for sec_def in _BY_FIRST.get(sec_name[:1], ()):
        if sec_def_matches(sec_def, sec_name):
            return sec_def
    return None


def _by_first_character() -> dict[str, tuple[SectionDef, ...]]:
    out: dict[str, list[SectionDef]] = {}
    for sec_def in SECTION_DEFS:
        if sec_def.prefix:
            out.setdefault(sec_def.prefix[0], []).append(sec_def)
    return {c: tuple(defs) for c, defs in out.items()}


_BY_FIRST = _by_first_character()


def _strip_autoload_marker(sec_name: str) -> tuple[str, bool]:
    if sec_name.startswith("?"):
        return sec_name[1:], False
    return sec_name, True


def match_section(sec_name: str) -> SectionDef | None:
    """The :class:`SectionDef` libbpf uses for a program in ``sec_name``.

    A single leading ``?`` (autoload off) is ignored, as libbpf does when it
    opens an object.  Returns ``None`` for names libbpf does not recognize.
    """
    name, _ = _strip_autoload_marker(sec_name)
    return find_sec_def(name)


@lru_cache(maxsize=4096)
def program_type_for_section(
    sec_name: str,
) -> tuple[ProgType | None, int, bool, bool]:
    """``(prog_type, expected_attach_type, autoload, sleepable)``.

    ``prog_type`` is ``None`` (libbpf: ``BPF_PROG_TYPE_UNSPEC``) and
    ``expected_attach_type`` is ``0`` for unrecognized names.  The attach
    type is the table's value (an :class:`AttachType` or ``0``); the USDT
    upgrade to ``BPF_TRACE_UPROBE_MULTI`` depends on the running kernel and
    is not applied.  ``autoload`` is ``False`` for a leading ``?``.
    """
    name, autoload = _strip_autoload_marker(sec_name)
    sec_def = find_sec_def(name)
    if sec_def is None:
        return None, 0, autoload, False
    return (sec_def.prog_type, sec_def.expected_attach_type, autoload,
            sec_def.sleepable)
