"""Tests for bpfmem.parse.sections (libbpf v1.7.0 section_defs[] mirror).

If gcc and libbpf-dev are installed, every name below is also run through
the real libbpf_prog_type_by_name() and compared with find_sec_def().
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from bpfmem.parse import sections
from bpfmem.parse.sections import (
    LIBBPF_VERSION,
    SECTION_DEFS,
    SecFlag,
    SectionDef,
    find_sec_def,
    match_section,
    program_type_for_section,
    sec_def_matches,
)
from bpfmem.uapi import AttachType as A
from bpfmem.uapi import ProgType as P

LIBBPF_H = Path("/usr/include/bpf/libbpf.h")

# (section name, expected prog type or None, expected attach type)
CASES = [
    # exact-only names
    ("socket", P.SOCKET_FILTER, 0),
    ("socket/foo", None, 0),
    ("sk_reuseport/migrate", P.SK_REUSEPORT,
     A.SK_REUSEPORT_SELECT_OR_MIGRATE),
    ("sk_reuseport", P.SK_REUSEPORT, A.SK_REUSEPORT_SELECT),
    ("sk_reuseport/other", None, 0),
    # "+" entries: bare name, or name + "/" + anything
    ("kprobe", P.KPROBE, 0),
    ("kprobe/do_sys_open", P.KPROBE, 0),
    ("kprobe/", P.KPROBE, 0),
    ("kprobe__do_sys_open", None, 0),   # 0.x sloppy prefix: gone in 1.x
    ("kprobex/foo", None, 0),
    ("KPROBE/foo", None, 0),            # case sensitive
    ("kretprobe/do_sys_open", P.KPROBE, 0),
    ("kprobe.multi/vfs_*", P.KPROBE, A.TRACE_KPROBE_MULTI),
    ("kretprobe.multi", P.KPROBE, A.TRACE_KPROBE_MULTI),
    ("kprobe.multi.s/foo", None, 0),
    ("kprobe.session/foo", P.KPROBE, A.TRACE_KPROBE_SESSION),
    ("uprobe//bin/bash:readline", P.KPROBE, 0),
    ("uprobe.s//bin/bash:readline", P.KPROBE, 0),
    ("uretprobe.s", P.KPROBE, 0),
    ("uprobe.multi//lib/libc.so.6:malloc", P.KPROBE, A.TRACE_UPROBE_MULTI),
    ("uretprobe.multi.s/x:y", P.KPROBE, A.TRACE_UPROBE_MULTI),
    ("uprobe.session", P.KPROBE, A.TRACE_UPROBE_SESSION),
    ("uprobe.foo", None, 0),
    ("ksyscall/openat", P.KPROBE, 0),
    ("kretsyscall", P.KPROBE, 0),
    ("usdt/libc.so.6:libc:setjmp", P.KPROBE, 0),
    ("usdt.s/x:y:z", P.KPROBE, 0),
    # tc family: "tc", "classifier", "action" are exact-only legacy names
    ("tc", P.SCHED_CLS, 0),
    ("tc/ingress", P.SCHED_CLS, A.TCX_INGRESS),
    ("tc/egress", P.SCHED_CLS, A.TCX_EGRESS),
    ("tc/foo", None, 0),
    ("tcfoo", None, 0),
    ("tcx/ingress", P.SCHED_CLS, A.TCX_INGRESS),
    ("tcx/egress", P.SCHED_CLS, A.TCX_EGRESS),
    ("tcx", None, 0),
    ("classifier", P.SCHED_CLS, 0),
    ("classifier/foo", None, 0),
    ("classifier_foo", None, 0),
    ("action", P.SCHED_ACT, 0),
    ("action/foo", None, 0),
    ("netkit/primary", P.SCHED_CLS, A.NETKIT_PRIMARY),
    ("netkit/peer", P.SCHED_CLS, A.NETKIT_PEER),
    # tracepoints
    ("tracepoint/syscalls/sys_enter_openat", P.TRACEPOINT, 0),
    ("tp/sched/sched_switch", P.TRACEPOINT, 0),
    ("tp", P.TRACEPOINT, 0),
    ("tp.s/syscalls/sys_enter_x", None, 0),  # only on libbpf master (1.8)
    ("raw_tp/sched_switch", P.RAW_TRACEPOINT, 0),
    ("raw_tracepoint", P.RAW_TRACEPOINT, 0),
    ("raw_tracepoint.w/bpf_test", P.RAW_TRACEPOINT_WRITABLE, 0),
    ("raw_tp.w", P.RAW_TRACEPOINT_WRITABLE, 0),
    # BTF based tracing
    ("tp_btf/sched_switch", P.TRACING, A.TRACE_RAW_TP),
    ("fentry", P.TRACING, A.TRACE_FENTRY),
    ("fentry/do_unlinkat", P.TRACING, A.TRACE_FENTRY),
    ("fentry.s/do_unlinkat", P.TRACING, A.TRACE_FENTRY),
    ("fentry.multi/foo", None, 0),           # only on libbpf master (1.8)
    ("fexit/do_unlinkat", P.TRACING, A.TRACE_FEXIT),
    ("fexit.s", P.TRACING, A.TRACE_FEXIT),
    ("fmod_ret/security_x", P.TRACING, A.MODIFY_RETURN),
    ("fmod_ret.s/x", P.TRACING, A.MODIFY_RETURN),
    ("fsession/do_unlinkat", P.TRACING, A.TRACE_FSESSION),
    ("fsession.s/x", P.TRACING, A.TRACE_FSESSION),
    ("freplace/xdp_prog", P.EXT, 0),
    ("lsm/file_open", P.LSM, A.LSM_MAC),
    ("lsm.s/bprm_committed_creds", P.LSM, A.LSM_MAC),
    ("lsm_cgroup/socket_bind", P.LSM, A.LSM_CGROUP),
    ("iter/task", P.TRACING, A.TRACE_ITER),
    ("iter.s/task_vma", P.TRACING, A.TRACE_ITER),
    ("syscall", P.SYSCALL, 0),
    ("syscall/foo", None, 0),
    # XDP
    ("xdp", P.XDP, A.XDP),
    ("xdp/foo", None, 0),
    ("xdp_prog", None, 0),
    ("xdp.frags", P.XDP, A.XDP),
    ("xdp.frags/foo", None, 0),
    ("xdp/devmap", P.XDP, A.XDP_DEVMAP),
    ("xdp.frags/devmap", P.XDP, A.XDP_DEVMAP),
    ("xdp/cpumap", P.XDP, A.XDP_CPUMAP),
    ("xdp.frags/cpumap", P.XDP, A.XDP_CPUMAP),
    ("xdp/devmap/extra", None, 0),
    # misc networking
    ("perf_event", P.PERF_EVENT, 0),
    ("lwt_in", P.LWT_IN, 0),
    ("lwt_xmit", P.LWT_XMIT, 0),
    ("lwt_seg6local", P.LWT_SEG6LOCAL, 0),
    ("sockops", P.SOCK_OPS, A.CGROUP_SOCK_OPS),
    ("sk_skb/stream_parser", P.SK_SKB, A.SK_SKB_STREAM_PARSER),
    ("sk_skb/stream_verdict", P.SK_SKB, A.SK_SKB_STREAM_VERDICT),
    ("sk_skb/verdict", P.SK_SKB, A.SK_SKB_VERDICT),
    ("sk_skb", P.SK_SKB, 0),
    ("sk_skb/other", None, 0),
    ("sk_msg", P.SK_MSG, A.SK_MSG_VERDICT),
    ("lirc_mode2", P.LIRC_MODE2, A.LIRC_MODE2),
    ("flow_dissector", P.FLOW_DISSECTOR, A.FLOW_DISSECTOR),
    ("sk_lookup", P.SK_LOOKUP, A.SK_LOOKUP),
    ("sk_lookup/foo", None, 0),
    ("netfilter", P.NETFILTER, A.NETFILTER),
    # cgroup
    ("cgroup_skb/ingress", P.CGROUP_SKB, A.CGROUP_INET_INGRESS),
    ("cgroup_skb/egress", P.CGROUP_SKB, A.CGROUP_INET_EGRESS),
    ("cgroup/skb", P.CGROUP_SKB, 0),
    ("cgroup/sock", P.CGROUP_SOCK, A.CGROUP_INET_SOCK_CREATE),
    ("cgroup/sock_create", P.CGROUP_SOCK, A.CGROUP_INET_SOCK_CREATE),
    ("cgroup/sock_release", P.CGROUP_SOCK, A.CGROUP_INET_SOCK_RELEASE),
    ("cgroup/post_bind4", P.CGROUP_SOCK, A.CGROUP_INET4_POST_BIND),
    ("cgroup/bind6", P.CGROUP_SOCK_ADDR, A.CGROUP_INET6_BIND),
    ("cgroup/connect4", P.CGROUP_SOCK_ADDR, A.CGROUP_INET4_CONNECT),
    ("cgroup/connect_unix", P.CGROUP_SOCK_ADDR, A.CGROUP_UNIX_CONNECT),
    ("cgroup/sendmsg_unix", P.CGROUP_SOCK_ADDR, A.CGROUP_UNIX_SENDMSG),
    ("cgroup/recvmsg6", P.CGROUP_SOCK_ADDR, A.CGROUP_UDP6_RECVMSG),
    ("cgroup/getpeername_unix", P.CGROUP_SOCK_ADDR,
     A.CGROUP_UNIX_GETPEERNAME),
    ("cgroup/getsockname4", P.CGROUP_SOCK_ADDR, A.CGROUP_INET4_GETSOCKNAME),
    ("cgroup/sysctl", P.CGROUP_SYSCTL, A.CGROUP_SYSCTL),
    ("cgroup/getsockopt", P.CGROUP_SOCKOPT, A.CGROUP_GETSOCKOPT),
    ("cgroup/setsockopt", P.CGROUP_SOCKOPT, A.CGROUP_SETSOCKOPT),
    ("cgroup/dev", P.CGROUP_DEVICE, A.CGROUP_DEVICE),
    ("cgroup/connect4/extra", None, 0),
    # struct_ops: "+" entries; the .struct_ops* *map* sections are no progs
    ("struct_ops", P.STRUCT_OPS, 0),
    ("struct_ops/tcp_init", P.STRUCT_OPS, 0),
    ("struct_ops.s", P.STRUCT_OPS, 0),
    ("struct_ops.s/dequeue", P.STRUCT_OPS, 0),
    ("struct_ops.foo", None, 0),
    (".struct_ops", None, 0),
    (".struct_ops.link", None, 0),
    # non-program sections, odd input
    (".text", None, 0),
    ("license", None, 0),
    (".maps", None, 0),
    ("", None, 0),
    ("/", None, 0),
]

SLEEPABLE = {
    "uprobe.s//bin/bash:readline", "uretprobe.s", "uretprobe.multi.s/x:y",
    "usdt.s/x:y:z", "fentry.s/do_unlinkat", "fexit.s", "fmod_ret.s/x",
    "fsession.s/x", "lsm.s/bprm_committed_creds", "iter.s/task_vma",
    "syscall", "struct_ops.s", "struct_ops.s/dequeue",
}

# libbpf release that introduced each section_defs[] entry newer than
# libbpf 1.1 (from the libbpf git tags).  Everything else is in 1.1 with the
# same program/attach type.
SPEC_ADDED_IN = {
    "struct_ops.s+": (1, 2),
    "uprobe.multi+": (1, 3), "uretprobe.multi+": (1, 3),
    "uprobe.multi.s+": (1, 3), "uretprobe.multi.s+": (1, 3),
    "usdt.s+": (1, 3),
    "tc/ingress": (1, 3), "tc/egress": (1, 3),
    "tcx/ingress": (1, 3), "tcx/egress": (1, 3),
    "netkit/primary": (1, 3), "netkit/peer": (1, 3),
    "cgroup/connect_unix": (1, 3), "cgroup/sendmsg_unix": (1, 3),
    "cgroup/recvmsg_unix": (1, 3), "cgroup/getpeername_unix": (1, 3),
    "cgroup/getsockname_unix": (1, 3),
    "netfilter": (1, 3),
    "sk_skb/verdict": (1, 4),
    "kprobe.session+": (1, 5),
    "uprobe.session+": (1, 6), "uprobe.session.s+": (1, 6),
    "fsession+": (1, 7), "fsession.s+": (1, 7),
}

# Known version differences: names from CASES that Debian 12's libbpf 1.1
# (and any libbpf older than the version given) does not recognize at all
# (libbpf_prog_type_by_name() returns -ESRCH), while libbpf 1.7 does.
KNOWN_VERSION_DIFFERENCES = {
    "struct_ops.s": (1, 2),
    "struct_ops.s/dequeue": (1, 2),
    "uprobe.multi//lib/libc.so.6:malloc": (1, 3),
    "uretprobe.multi.s/x:y": (1, 3),
    "usdt.s/x:y:z": (1, 3),
    "tc/ingress": (1, 3),
    "tc/egress": (1, 3),
    "tcx/ingress": (1, 3),
    "tcx/egress": (1, 3),
    "netkit/primary": (1, 3),
    "netkit/peer": (1, 3),
    "cgroup/connect_unix": (1, 3),
    "cgroup/sendmsg_unix": (1, 3),
    "cgroup/getpeername_unix": (1, 3),
    "netfilter": (1, 3),
    "sk_skb/verdict": (1, 4),
    "kprobe.session/foo": (1, 5),
    "uprobe.session": (1, 6),
    "fsession/do_unlinkat": (1, 7),
    "fsession.s/x": (1, 7),
}


# --------------------------------------------------------------------------
# Pure-Python behaviour
# --------------------------------------------------------------------------

@pytest.mark.parametrize("name,ptype,atype", CASES,
                         ids=[repr(c[0]) for c in CASES])
def test_match_section(name, ptype, atype):
    sec_def = match_section(name)
    if ptype is None:
        assert sec_def is None
        assert program_type_for_section(name) == (None, 0, True, False)
        return
    assert sec_def is not None
    assert sec_def.prog_type is ptype
    assert sec_def.expected_attach_type == atype
    assert int(sec_def.expected_attach_type) == int(atype)
    got = program_type_for_section(name)
    assert got == (ptype, atype, True, name in SLEEPABLE)


def test_cases_cover_enough():
    assert len(CASES) >= 40
    assert len({c[0] for c in CASES}) == len(CASES)


def test_no_attach_type_is_plain_zero():
    """libbpf's "0" must not masquerade as BPF_CGROUP_INET_INGRESS."""
    enum_zero = []
    for sec_def in SECTION_DEFS:
        if isinstance(sec_def.expected_attach_type, A):
            if sec_def.expected_attach_type == 0:
                enum_zero.append(sec_def.prefix)
        else:
            assert type(sec_def.expected_attach_type) is int, sec_def
            assert sec_def.expected_attach_type == 0, sec_def
    # the only entry whose real attach type has value 0
    assert enum_zero == ["cgroup_skb/ingress"]
    assert type(match_section("kprobe/x").expected_attach_type) is int
    assert match_section("cgroup_skb/ingress").expected_attach_type is \
        A.CGROUP_INET_INGRESS


@pytest.mark.parametrize("name", ["?xdp", "?fentry.s/do_unlinkat",
                                  "?kprobe/foo", "?struct_ops/init",
                                  "?tc", "?tc/ingress", "?classifier"])
def test_question_mark_disables_autoload(name):
    plain = name[1:]
    assert match_section(name) == match_section(plain) is not None
    # the raw lookup (like libbpf_prog_type_by_name) does not strip '?'
    assert find_sec_def(name) is None
    ptype, atype, autoload, sleepable = program_type_for_section(name)
    assert autoload is False
    p_type, p_atype, p_autoload, p_sleepable = program_type_for_section(plain)
    assert p_autoload is True
    assert (ptype, atype, sleepable) == (p_type, p_atype, p_sleepable)


def test_question_mark_details():
    assert program_type_for_section("?fentry.s/do_unlinkat") == (
        P.TRACING, A.TRACE_FENTRY, False, True)
    assert program_type_for_section("?xdp") == (P.XDP, A.XDP, False, False)
    assert program_type_for_section("?bogus") == (None, 0, False, False)
    assert program_type_for_section("?") == (None, 0, False, False)
    # only one '?' is stripped
    assert match_section("??xdp") is None
    assert match_section("x?dp") is None


def test_flags_of_selected_entries():
    assert match_section("xdp").flags == SecFlag.ATTACHABLE_OPT
    assert match_section("xdp").flags == \
        SecFlag.ATTACHABLE | SecFlag.EXP_ATTACH_OPT
    assert match_section("xdp.frags").flags == SecFlag.XDP_FRAGS
    assert match_section("usdt/a:b:c").flags == SecFlag.USDT
    assert match_section("usdt.s/a:b:c").flags == \
        SecFlag.USDT | SecFlag.SLEEPABLE
    assert match_section("fentry/f").flags == SecFlag.ATTACH_BTF
    assert match_section("fentry/f").attach_btf
    assert match_section("lsm.s/x").flags == \
        SecFlag.ATTACH_BTF | SecFlag.SLEEPABLE
    assert match_section("syscall").sleepable
    assert match_section("socket").flags == SecFlag.NONE
    assert int(SecFlag.SLEEPABLE) == 8 and int(SecFlag.USDT) == 32


def test_section_def_is_frozen():
    sec_def = match_section("xdp")
    with pytest.raises(Exception):
        sec_def.prefix = "foo"  # type: ignore[misc]
    assert hash(sec_def) == hash(match_section("xdp"))


def test_every_entry_is_reachable():
    """No entry is shadowed by an earlier, more general one."""
    for sec_def in SECTION_DEFS:
        probes = [sec_def.base]
        if sec_def.prefix.endswith("+"):
            probes.append(sec_def.base + "/something")
        for probe in probes:
            assert find_sec_def(probe) is sec_def, (probe, sec_def)


def test_table_shape():
    specs = [d.prefix for d in SECTION_DEFS]
    assert len(specs) == len(set(specs)) == 105
    assert specs[0] == "socket" and specs[-1] == "netfilter"
    assert LIBBPF_VERSION == "1.7.0"
    assert set(SPEC_ADDED_IN) <= set(specs)
    for name in ("tc", "classifier", "action", "xdp", "syscall"):
        assert name in specs          # exact-only entries
        assert name + "+" not in specs


def test_slash_terminated_spec_rule():
    """"type/" specs (unused by the current table) need "type/extra"."""
    d = SectionDef("custom/", P.KPROBE, 0)
    assert sec_def_matches(d, "custom/x")
    assert sec_def_matches(d, "custom/")
    assert not sec_def_matches(d, "custom")
    assert not sec_def_matches(d, "customx")
    plus = SectionDef("custom+", P.KPROBE, 0)
    assert sec_def_matches(plus, "custom")
    assert sec_def_matches(plus, "custom/x")
    assert not sec_def_matches(plus, "custom.x")
    assert not sec_def_matches(plus, "custo")
    exact = SectionDef("custom", P.KPROBE, 0)
    assert sec_def_matches(exact, "custom")
    assert not sec_def_matches(exact, "custom/x")
    assert not sec_def_matches(SectionDef("", P.KPROBE, 0), "")


def test_known_differences_are_consistent():
    for name, version in KNOWN_VERSION_DIFFERENCES.items():
        sec_def = match_section(name)
        assert sec_def is not None, name
        assert SPEC_ADDED_IN[sec_def.prefix] == version, name
    for name, ptype, _ in CASES:
        sec_def = match_section(name)
        if sec_def is not None and sec_def.prefix in SPEC_ADDED_IN:
            assert name in KNOWN_VERSION_DIFFERENCES, name


def test_all_exports_exist():
    for name in sections.__all__:
        assert hasattr(sections, name), name


# --------------------------------------------------------------------------
# Differential test against the installed libbpf
# --------------------------------------------------------------------------

_PROG = r"""
#include <stdio.h>
#include <bpf/libbpf.h>

static int silent(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    (void)level; (void)fmt; (void)ap;
    return 0;
}

int main(int argc, char **argv)
{
    int i;

    libbpf_set_print(silent);
    printf("%u %u\n", libbpf_major_version(), libbpf_minor_version());
    for (i = 1; i < argc; i++) {
        enum bpf_prog_type prog_type = BPF_PROG_TYPE_UNSPEC;
        enum bpf_attach_type attach_type = (enum bpf_attach_type)0;
        int err = libbpf_prog_type_by_name(argv[i], &prog_type, &attach_type);

        printf("%d %d %d\n", err, (int)prog_type, (int)attach_type);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def libbpf_lookup(tmp_path_factory):
    gcc = shutil.which("gcc")
    if gcc is None or not LIBBPF_H.exists():
        pytest.skip("gcc or libbpf headers not available")
    d = tmp_path_factory.mktemp("libbpf_sec")
    src, exe = d / "secs.c", d / "secs"
    src.write_text(_PROG)
    cc = subprocess.run([gcc, "-O0", "-o", str(exe), str(src), "-lbpf"],
                        capture_output=True, text=True)
    if cc.returncode != 0:
        pytest.skip(f"cannot build against libbpf: {cc.stderr.strip()[:300]}")

    def lookup(names: list[str]):
        run = subprocess.run([str(exe), *names], capture_output=True,
                             text=True, timeout=60, check=True)
        lines = run.stdout.splitlines()
        major, minor = (int(x) for x in lines[0].split())
        results = {}
        for name, line in zip(names, lines[1:], strict=True):
            err, ptype, atype = (int(x) for x in line.split())
            results[name] = None if err else (ptype, atype)
        return (major, minor), results

    return lookup


_MIRRORED = tuple(int(x) for x in LIBBPF_VERSION.split(".")[:2])


def _differential_names() -> list[str]:
    names = [c[0] for c in CASES]
    for sec_def in SECTION_DEFS:
        names.append(sec_def.base)
        if sec_def.prefix.endswith("+"):
            names.append(sec_def.base + "/x")
            names.append(sec_def.base + ".x")
        else:
            names.append(sec_def.base + "/x")
    names += ["?xdp", "?kprobe/foo", "?tc"]
    return list(dict.fromkeys(names))


def test_matches_installed_libbpf(libbpf_lookup):
    names = _differential_names()
    version, libbpf = libbpf_lookup(names)
    mismatches = []
    for name in names:
        ours = find_sec_def(name)
        expected = None if ours is None else (
            int(ours.prog_type), int(ours.expected_attach_type))
        if ours is not None and ours.prefix in SPEC_ADDED_IN \
                and version < SPEC_ADDED_IN[ours.prefix]:
            # known version difference: the installed libbpf predates the
            # entry and does not recognize the name at all
            expected = None
        if ours is None and libbpf[name] is not None and version > _MIRRORED:
            # a libbpf newer than the mirrored release may know new names
            continue
        if libbpf[name] != expected:
            mismatches.append((name, libbpf[name], expected))
    assert not mismatches, f"libbpf {version}: {mismatches}"


def test_known_version_differences_against_installed_libbpf(libbpf_lookup):
    names = list(KNOWN_VERSION_DIFFERENCES)
    version, libbpf = libbpf_lookup(names)
    for name, added_in in KNOWN_VERSION_DIFFERENCES.items():
        if version < added_in:
            assert libbpf[name] is None, (name, libbpf[name])
        else:
            ours = match_section(name)
            assert libbpf[name] == (int(ours.prog_type),
                                    int(ours.expected_attach_type))


def test_libbpf_does_not_strip_question_mark(libbpf_lookup):
    _, libbpf = libbpf_lookup(["?xdp", "xdp"])
    assert libbpf["?xdp"] is None
    assert libbpf["xdp"] == (int(P.XDP), int(A.XDP))
