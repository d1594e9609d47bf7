"""Tests for bpfmem.uapi.

Values are checked against the system's UAPI header (Debian 12 ships a
6.1-era /usr/include/linux/bpf.h): every name the header has must exist in
bpfmem.uapi with the same value; names newer than the header are skipped.
If gcc and libbpf-dev are present, kernel_name is also checked against
libbpf's libbpf_bpf_{map,prog,attach}_type_str().
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bpfmem import uapi
from bpfmem.uapi import (
    BPF_OBJ_NAME_LEN,
    AttachType,
    MapFlag,
    MapType,
    PinningType,
    ProgType,
    attach_type_name,
    flag_names,
    map_type_name,
    parse_flags,
    prog_type_name,
)

BPF_H = Path("/usr/include/linux/bpf.h")
BPF_HELPERS_H = Path("/usr/include/bpf/bpf_helpers.h")
LIBBPF_H = Path("/usr/include/bpf/libbpf.h")


# --------------------------------------------------------------------------
# Minimal C header parsing (enough for bpf.h's enums)
# --------------------------------------------------------------------------

def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _eval_c_int(expr: str, known: dict[str, int]) -> int:
    expr = re.sub(r"\b(0[xX][0-9a-fA-F]+|[0-9]+)[uUlL]+\b", r"\1",
                  expr.strip())
    if not re.fullmatch(r"[\w\s()<|+\-]+", expr):
        raise ValueError(f"unsupported enum expression {expr!r}")
    return int(eval(expr, {"__builtins__": {}}, dict(known)))  # noqa: S307


def _parse_enum_body(body: str) -> dict[str, int]:
    values: dict[str, int] = {}
    nxt = 0
    for item in body.split(","):
        item = item.strip()
        if not item:
            continue
        if "=" in item:
            name, expr = (s.strip() for s in item.split("=", 1))
            val = _eval_c_int(expr, values)
        else:
            name, val = item, nxt
        values[name] = val
        nxt = val + 1
    return values


def _named_enum(text: str, enum_name: str) -> dict[str, int]:
    m = re.search(r"\benum\s+" + enum_name + r"\s*\{(.*?)\};", text, re.S)
    if not m:
        pytest.skip(f"enum {enum_name} not found in header")
    return {k: v for k, v in _parse_enum_body(m.group(1)).items()
            if not k.startswith("__")}


def _anon_enum_containing(text: str, member: str) -> dict[str, int]:
    for m in re.finditer(r"\benum\s*\{(.*?)\};", text, re.S):
        if re.search(r"\b" + member + r"\b", m.group(1)):
            return _parse_enum_body(m.group(1))
    pytest.skip(f"no anonymous enum with {member}")


@pytest.fixture(scope="module")
def bpf_h() -> str:
    if not BPF_H.exists():
        pytest.skip(f"{BPF_H} not available")
    return _strip_comments(BPF_H.read_text())


def _check_against_header(header: dict[str, int], cls, prefix: str) -> int:
    assert header, "parsed nothing from the header"
    checked = 0
    for cname, value in header.items():
        assert cname.startswith(prefix), cname
        member = cls.__members__.get(cname[len(prefix):])
        assert member is not None, f"{cname} missing from {cls.__name__}"
        assert int(member) == value, f"{cname}: {int(member)} != {value}"
        checked += 1
    return checked


def test_map_types_match_header(bpf_h):
    header = _named_enum(bpf_h, "bpf_map_type")
    assert _check_against_header(header, MapType, "BPF_MAP_TYPE_") >= 30


def test_prog_types_match_header(bpf_h):
    header = _named_enum(bpf_h, "bpf_prog_type")
    assert _check_against_header(header, ProgType, "BPF_PROG_TYPE_") >= 30


def test_attach_types_match_header(bpf_h):
    header = _named_enum(bpf_h, "bpf_attach_type")
    assert _check_against_header(header, AttachType, "BPF_") >= 40


def test_map_flags_match_header(bpf_h):
    header = _anon_enum_containing(bpf_h, "BPF_F_NO_PREALLOC")
    assert _check_against_header(header, MapFlag, "BPF_F_") >= 13


def test_obj_name_len_matches_header(bpf_h):
    m = re.search(r"#define\s+BPF_OBJ_NAME_LEN\s+(\d+)U?", bpf_h)
    assert m
    assert BPF_OBJ_NAME_LEN == int(m.group(1)) == 16


def test_pinning_matches_libbpf_header():
    if not BPF_HELPERS_H.exists():
        pytest.skip("bpf_helpers.h not available")
    header = _named_enum(_strip_comments(BPF_HELPERS_H.read_text()),
                         "libbpf_pin_type")
    assert header == {"LIBBPF_PIN_NONE": 0, "LIBBPF_PIN_BY_NAME": 1}
    assert {m.c_name: int(m) for m in PinningType} == header


# --------------------------------------------------------------------------
# Values newer than the 6.1 header, spot-checked by hand
# --------------------------------------------------------------------------

def test_newer_values():
    assert MapType.USER_RINGBUF == 31
    assert MapType.CGRP_STORAGE == 32
    assert MapType.ARENA == 33
    assert MapType.INSN_ARRAY == 34
    assert ProgType.NETFILTER == 32
    assert AttachType.NETFILTER == 45
    assert AttachType.TCX_INGRESS == 46
    assert AttachType.TRACE_UPROBE_MULTI == 48
    assert AttachType.CGROUP_UNIX_GETSOCKNAME == 53
    assert AttachType.NETKIT_PEER == 55
    assert AttachType.TRACE_UPROBE_SESSION == 57
    assert AttachType.TRACE_FSESSION == 58
    assert MapFlag.LINK == 1 << 13
    assert MapFlag.TOKEN_FD == 1 << 16
    assert MapFlag.SEGV_ON_FAULT == 1 << 17
    assert MapFlag.NO_USER_CONV == 1 << 18
    assert MapFlag.RB_OVERWRITE == 1 << 19


@pytest.mark.parametrize("cls", [MapType, ProgType, AttachType])
def test_values_are_contiguous(cls):
    values = sorted({int(m) for m in cls})
    assert values == list(range(len(values)))


def test_flags_are_single_bits_and_contiguous():
    bits = sorted(int(m) for m in MapFlag)
    assert bits == [1 << i for i in range(len(bits))]


# --------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------

@pytest.mark.parametrize("member,name", [
    (MapType.UNSPEC, "unspec"),
    (MapType.HASH, "hash"),
    (MapType.LRU_PERCPU_HASH, "lru_percpu_hash"),
    (MapType.CGROUP_STORAGE, "cgroup_storage"),
    (MapType.PERCPU_CGROUP_STORAGE, "percpu_cgroup_storage"),
    (MapType.SK_STORAGE, "sk_storage"),
    (MapType.CGRP_STORAGE, "cgrp_storage"),
    (MapType.ARENA, "arena"),
    (MapType.INSN_ARRAY, "insn_array"),
    (ProgType.SOCKET_FILTER, "socket_filter"),
    (ProgType.SCHED_CLS, "sched_cls"),
    (ProgType.RAW_TRACEPOINT_WRITABLE, "raw_tracepoint_writable"),
    (ProgType.EXT, "ext"),
    (ProgType.NETFILTER, "netfilter"),
    (AttachType.CGROUP_INET_INGRESS, "cgroup_inet_ingress"),
    (AttachType.TRACE_RAW_TP, "trace_raw_tp"),
    (AttachType.MODIFY_RETURN, "modify_return"),
    (AttachType.LSM_MAC, "lsm_mac"),
    (AttachType.XDP, "xdp"),
    (AttachType.SK_REUSEPORT_SELECT_OR_MIGRATE,
     "sk_reuseport_select_or_migrate"),
    (AttachType.TRACE_FSESSION, "trace_fsession"),
])
def test_kernel_name(member, name):
    assert member.kernel_name == name


def test_deprecated_aliases_keep_canonical_names():
    assert MapType.CGROUP_STORAGE_DEPRECATED is MapType.CGROUP_STORAGE
    assert MapType(19).name == "CGROUP_STORAGE"
    assert MapType(19).kernel_name == "cgroup_storage"
    assert MapType.PERCPU_CGROUP_STORAGE_DEPRECATED is \
        MapType.PERCPU_CGROUP_STORAGE
    assert MapType(21).kernel_name == "percpu_cgroup_storage"
    assert MapType.from_name("BPF_MAP_TYPE_CGROUP_STORAGE_DEPRECATED") \
        is MapType.CGROUP_STORAGE
    # aliases are not listed separately when iterating
    assert [m for m in MapType if int(m) == 19] == [MapType.CGROUP_STORAGE]


def test_c_names():
    assert MapType.LRU_HASH.c_name == "BPF_MAP_TYPE_LRU_HASH"
    assert ProgType.XDP.c_name == "BPF_PROG_TYPE_XDP"
    assert AttachType.TCX_INGRESS.c_name == "BPF_TCX_INGRESS"
    assert MapFlag.MMAPABLE.c_name == "BPF_F_MMAPABLE"
    assert PinningType.BY_NAME.c_name == "LIBBPF_PIN_BY_NAME"


@pytest.mark.parametrize("spelling", [
    "lru_hash", "LRU_HASH", "BPF_MAP_TYPE_LRU_HASH", "bpf_map_type_lru_hash",
    " lru_hash ", 9, "9", "0x9",
])
def test_map_type_from_name(spelling):
    assert MapType.from_name(spelling) is MapType.LRU_HASH


def test_other_from_name():
    assert ProgType.from_name("sched_cls") is ProgType.SCHED_CLS
    assert ProgType.from_name("BPF_PROG_TYPE_LSM") is ProgType.LSM
    assert AttachType.from_name("BPF_TRACE_FENTRY") is AttachType.TRACE_FENTRY
    assert AttachType.from_name("tcx_egress") is AttachType.TCX_EGRESS


@pytest.mark.parametrize("cls,bad", [
    (MapType, "lru"), (MapType, "BPF_PROG_TYPE_XDP"), (MapType, 99),
    (MapType, "99"), (MapType, ""), (ProgType, "kprobe.multi"),
    (AttachType, "BPF_MAP_TYPE_HASH"),
])
def test_from_name_errors(cls, bad):
    with pytest.raises(ValueError) as exc:
        cls.from_name(bad)
    assert str(bad) in str(exc.value)


def test_from_name_error_lists_valid_names():
    with pytest.raises(ValueError, match=r"lru_hash.*arena"):
        MapType.from_name("nosuchmap")


@pytest.mark.parametrize("bad", [None, 1.5, b"hash", True])
def test_from_name_type_errors(bad):
    with pytest.raises(TypeError):
        MapType.from_name(bad)


def test_unknown_values_format_without_crashing():
    assert map_type_name(99) == "unknown(99)"
    assert map_type_name(-1) == "unknown(-1)"
    assert map_type_name(1) == "hash"
    assert map_type_name(MapType.ARENA) == "arena"
    assert prog_type_name(1000) == "unknown(1000)"
    assert prog_type_name(6) == "xdp"
    assert attach_type_name(255) == "unknown(255)"
    assert attach_type_name(37) == "xdp"


# --------------------------------------------------------------------------
# Flags
# --------------------------------------------------------------------------

def test_flag_names_basic():
    assert flag_names(0) == []
    assert flag_names(MapFlag.NO_PREALLOC | MapFlag.MMAPABLE) == [
        "no_prealloc", "mmapable"]
    assert flag_names(1 << 15) == ["vtype_btf_obj_fd"]
    assert flag_names((1 << 30) | 1) == ["no_prealloc", "0x40000000"]
    assert flag_names((1 << 30) | (1 << 25)) == ["0x42000000"]


def test_flag_names_rejects_negative():
    with pytest.raises(ValueError):
        flag_names(-1)


def test_flag_kernel_name():
    assert MapFlag.NO_COMMON_LRU.kernel_name == "no_common_lru"
    both = MapFlag.RDONLY_PROG | MapFlag.INNER_MAP
    assert both.kernel_name == "rdonly_prog,inner_map"


@pytest.mark.parametrize("spec,expected", [
    ("", 0),
    ("no_prealloc", 1),
    ("no_prealloc,mmapable", 1 | 1024),
    ("NO_PREALLOC | MMAPABLE", 1 | 1024),
    ("BPF_F_NO_PREALLOC,bpf_f_mmapable", 1 | 1024),
    ("no_prealloc mmapable", 1 | 1024),
    ("0x400", 1024),
    ("1024", 1024),
    ("0x400,no_prealloc", 1025),
    ("rdonly_prog, , wronly_prog,", (1 << 7) | (1 << 8)),
    (0, 0),
    (1025, 1025),
    (["no_prealloc", 1024], 1025),
    (("token_fd",), 1 << 16),
])
def test_parse_flags(spec, expected):
    assert parse_flags(spec) == expected


@pytest.mark.parametrize("bad", ["no_prealoc", "mmapable,bogus", "BPF_F_",
                                 "0xzz", "hash"])
def test_parse_flags_errors(bad):
    with pytest.raises(ValueError) as exc:
        parse_flags(bad)
    msg = str(exc.value)
    offending = [t for t in re.split(r"[,| ]+", bad) if t][-1]
    assert repr(offending) in msg
    assert "no_prealloc" in msg and "no_user_conv" in msg


def test_parse_flags_rejects_negative_and_bool():
    with pytest.raises(ValueError):
        parse_flags(-4)
    with pytest.raises(TypeError):
        parse_flags(True)


def test_flag_round_trip_every_single_flag():
    for member in MapFlag:
        assert parse_flags(flag_names(int(member))[0]) == int(member)
        assert parse_flags(member.c_name) == int(member)


def test_flag_round_trip_random():
    rng = random.Random(1234)
    for _ in range(500):
        value = rng.getrandbits(32)
        names = flag_names(value)
        assert parse_flags(",".join(names)) == value
        assert parse_flags("|".join(names)) == value
        assert parse_flags(names) == value


def test_all_exports_exist():
    for name in uapi.__all__:
        assert hasattr(uapi, name), name


# --------------------------------------------------------------------------
# Differential check of names against the installed libbpf
# --------------------------------------------------------------------------

_STR_PROG = r"""
#include <stdio.h>
#include <bpf/libbpf.h>

int main(void)
{
    int i;
    const char *s;

    for (i = 0; i < 128; i++) {
        s = libbpf_bpf_map_type_str((enum bpf_map_type)i);
        if (s)
            printf("map %d %s\n", i, s);
        s = libbpf_bpf_prog_type_str((enum bpf_prog_type)i);
        if (s)
            printf("prog %d %s\n", i, s);
        s = libbpf_bpf_attach_type_str((enum bpf_attach_type)i);
        if (s)
            printf("attach %d %s\n", i, s);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def libbpf_type_strings(tmp_path_factory) -> dict[str, dict[int, str]]:
    gcc = shutil.which("gcc")
    if gcc is None or not LIBBPF_H.exists():
        pytest.skip("gcc or libbpf headers not available")
    d = tmp_path_factory.mktemp("libbpf_str")
    src, exe = d / "strs.c", d / "strs"
    src.write_text(_STR_PROG)
    cc = subprocess.run([gcc, "-O0", "-o", str(exe), str(src), "-lbpf"],
                        capture_output=True, text=True)
    if cc.returncode != 0:
        pytest.skip(f"cannot build against libbpf: {cc.stderr.strip()[:300]}")
    run = subprocess.run([str(exe)], capture_output=True, text=True,
                         timeout=60, check=True)
    out: dict[str, dict[int, str]] = {"map": {}, "prog": {}, "attach": {}}
    for line in run.stdout.splitlines():
        kind, num, name = line.split()
        out[kind][int(num)] = name
    return out


@pytest.mark.parametrize("kind,cls", [("map", MapType), ("prog", ProgType),
                                      ("attach", AttachType)])
def test_kernel_names_match_libbpf(libbpf_type_strings, kind, cls):
    names = libbpf_type_strings[kind]
    assert names, f"libbpf returned no {kind} type strings"
    checked = 0
    for value, name in names.items():
        # The installed libbpf may be older (fewer values) or newer (values
        # this module does not know yet); compare what both know.
        if value not in cls._value2member_map_:
            continue
        assert cls(value).kernel_name == name, (kind, value)
        checked += 1
    assert checked >= min(len(names), 30)
