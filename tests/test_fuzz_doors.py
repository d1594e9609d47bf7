"""A fuzz run over every parser's door with a fixed seed and a time budget (issue 30).

The other fuzz tests (test_fuzz.py, test_fuzz_documents.py, test_size_bad_input.py...) draw
with hypothesis; this one is seeded mutation (``random.Random`` of a fixed seed per door, so
a failure names the input that reproduces it) over each door a file or a process hands to
bpfmem: BPF ELF objects, BTF, kernel images (raw BTF, xz/gzip/bz2, vmlinux ELF, bzImage),
Go binaries (build info, and the pclntab reader behind `bpfmem size`), `go list -deps -json`
streams, /metrics texts, pprof profiles and bpfmem.toml. Seeds are real where there is one
here (the Debian kernels' committed BTF, Go 1.19's own tools, `go list` of cmd/gofmt run now,
clang-built objects) and the fixtures' otherwise. Mutations: bit flips, hostile words,
truncation, spliced bytes, duplicated and dropped runs, and for texts hostile tokens (NaN,
1e400, 401 digits, -1, a 64 KiB label).

Asserted: every input gives a result or the project's own error (``BpfmemError``), never
another exception, and none runs past a hard per-input alarm. The total time is
``BPFMEM_FUZZ_SECONDS`` (60 s in CI) shared equally by the doors; the counts are printed.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bpfmem import api
from bpfmem.config import parse_config
from bpfmem.errors import BpfmemError
from bpfmem.parse.btf import Btf
from bpfmem.parse.elf import parse_image
from bpfmem.parse.gobin import parse_go_buildinfo
from bpfmem.parse.golist import parse_go_list
from bpfmem.parse.gometrics import parse_go_metrics
from bpfmem.parse.kernel_btf import parse_kernel_btf
from bpfmem.parse.objspec import parse_object
from bpfmem.parse.pprof import parse_pprof, top_functions

import hostile as h
from conftest import fixture_objects

HERE = Path(__file__).resolve().parent
SEED = 30                    # the number: fixed, so every run mutates alike
SECONDS = float(os.environ.get("BPFMEM_FUZZ_SECONDS", "60"))
ALARM = 30                   # seconds one input may take before it counts as a hang
GO_TOOLS = Path("/usr/lib/go-1.19/pkg/tool/linux_amd64")


# ---- seeds ----

def _btf_of(obj: bytes) -> bytes | None:
    img = parse_image(obj)
    sec = img.section(".BTF")
    return None if sec is None or not img.little_endian else obj[sec.offset:sec.offset
                                                                   + sec.size]


def _objects() -> list[bytes]:
    objs = [p.read_bytes() for p in fixture_objects()]
    objs.append((HERE.parent / "src" / "bpfmem" / "examples" / "cni_datapath.bpf.o")
                .read_bytes())
    return objs


def _kernels() -> list[tuple[bytes, str]]:
    from test_kernel_profile import bzimage, synthetic_btf, vmlinux_elf
    btf = synthetic_btf()
    banner = b"Linux version 6.1.0-57-cloud-amd64 (debian-kernel@lists.debian.org) #1 SMP\0"
    elf = vmlinux_elf(btf, banner)
    out = [(btf, "6.1.0-57-cloud-amd64.btf"), (lzma.compress(btf, preset=0), "k.btf.xz"),
           (gzip.compress(btf, 1), "k.btf.gz"), (bz2.compress(btf, 1), "k.btf.bz2"),
           (elf, "vmlinux"), (bzimage(gzip.compress(elf, 1), b"6.1.0-57-cloud-amd64 (x) #1"),
                              "vmlinuz-6.1.0-57-cloud-amd64"),
           (bzimage(lzma.compress(elf, preset=0), b"6.1.0 (x) #1"), "vmlinuz")]
    real = sorted((HERE / "data" / "btf").glob("*.btf.xz"))
    if real:          # one Debian kernel's BTF, whole (drawn rarely: it is 5 MB)
        out.append((lzma.decompress(real[0].read_bytes()), real[0].name[:-3]))
    return out


def _go_binaries() -> list[bytes]:
    from gogen import go_elf, pclntab_old
    names = ["main.main", "k8s.io/api/core/v1.(*Pod).Marshal", "runtime.mallocgc"]
    sizes = [64, 96, 32]
    out = [go_elf(names, sizes), go_elf(names, sizes, pcln=pclntab_old(names, sizes,
                                                                       layout="1.16")),
           go_elf(names, sizes, pcln=pclntab_old(names, sizes, layout="1.2"))]
    real = [p for p in (GO_TOOLS / "pack", GO_TOOLS / "buildid") if p.exists()]
    return out + [p.read_bytes() for p in real[:1]]


def _go_list(tmp: Path) -> list[str]:
    go = shutil.which("go")
    out = []
    if go:
        env = dict(os.environ, GO111MODULE="off", GOPROXY="off", GOFLAGS="",
                   GOCACHE=str(tmp / "gocache"), GOPATH=str(tmp / "gopath"))
        r = subprocess.run([go, "list", "-deps", "-json", "cmd/gofmt"], env=env,
                           capture_output=True, text=True, timeout=120)
        if r.returncode == 0:
            out.append(r.stdout)
    out.append('{"ImportPath": "fmt", "Name": "fmt", "Standard": true}\n'
               '{"ImportPath": "example.com/a", "Name": "main", "Imports": ["fmt"],'
               ' "Module": {"Path": "example.com/a"}}\n')
    return out


def _pprofs() -> list[bytes]:
    from test_gomem import pprof_bytes
    funcs = {1: "main.alloc", 2: "main.handler", 3: "main.inlined", 4: "runtime.main"}
    locs = {10: [1], 11: [3, 2], 12: [4]}
    p = pprof_bytes([([10, 11, 12], [2, 4096]), ([11, 12], [1, 512]), ([12], [3, 100])],
                    funcs, locs, default="inuse_space")
    return [p, gzip.compress(p), h.no_sample_type()]


def _metrics() -> list[str]:
    from test_gomem import metrics_text
    return [metrics_text(), h.metrics_body().decode(),
            metrics_text() + "# TYPE go_threads gauge\ngo_threads 9\n"
            "# TYPE go_gc_gomemlimit_bytes gauge\ngo_gc_gomemlimit_bytes 9.223372036854776e+18\n"]


# ---- mutation ----

WORDS = [0, 1, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]
TOKENS = [b"NaN", b"+Inf", b"-Inf", b"-1", b"1e400", b"1e30", b"9" * 401, b"\x00", b"{",
          b"}", b'"', b"\n", b"[[", b"=", b"\xff\xfe", b"x" * 65536, b"0x", b"-0"]


def mutate(rng: random.Random, data: bytes, text: bool = False) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if not buf:
            buf += rng.randbytes(rng.randint(1, 16))
        pos = rng.randrange(len(buf))
        op = rng.randrange(7 if text else 6)
        if op == 0:
            buf[pos] ^= 1 << rng.randrange(8)
        elif op == 1:
            w = rng.choice(WORDS + [rng.getrandbits(32)])
            buf[pos:pos + 4] = w.to_bytes(4, "little")
        elif op == 2:
            del buf[rng.randrange(len(buf)):]
        elif op == 3:
            buf[pos:pos] = rng.randbytes(rng.randint(1, 64))
        elif op == 4:
            n = rng.randint(1, min(4096, len(buf) - pos))
            buf[pos:pos] = buf[pos:pos + n] * rng.randint(1, 4)
        elif op == 5:
            del buf[pos:pos + rng.randint(1, 256)]
        else:
            buf[pos:pos] = rng.choice(TOKENS)
    return bytes(buf)


# ---- the doors ----

def door_objects(data: bytes):
    return parse_object(data, path="fuzz.o", loader="libbpf")


def door_btf(data: bytes):
    """The index, then every type's lookups (a type that cannot be sized is a clean error
    of its own: the next one is asked all the same)."""
    btf = Btf(data)
    for tid in range(1, min(btf.count, 400) + 1):
        for ask in (btf.type, btf.type_name, btf.resolve_size, btf.align_of):
            try:
                ask(tid)
            except BpfmemError:
                pass
    return btf


def door_kernel(item):
    data, name = item
    return parse_kernel_btf(data, name=name)


def door_buildinfo(data: bytes):
    return parse_go_buildinfo(data)


def door_go_binary(data: bytes):
    return api.load_binary_size(data)


def door_go_list(data: bytes):
    return parse_go_list(data.decode(errors="replace"))


def door_metrics(data: bytes):
    return parse_go_metrics(data.decode(errors="replace"))


def door_pprof(data: bytes):
    prof = parse_pprof(data)
    top = top_functions(prof, None, n=10)
    return prof.index_of(None), top


def door_config(data: bytes):
    return parse_config(data.decode(errors="replace"), path="bpfmem.toml")


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


@pytest.fixture(scope="module")
def doors(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz-doors")
    objs = _objects()
    btfs = [b for b in map(_btf_of, objs) if b]
    kernels = _kernels()
    gobins = _go_binaries()
    return {
        # name: (door, seeds, text?, how a seed becomes the door's input)
        "ELF objects": (door_objects, objs, False),
        "BTF": (door_btf, btfs, False),
        "kernel images": (door_kernel, kernels, False),
        "Go build info": (door_buildinfo, gobins, False),
        "Go binaries (pclntab)": (door_go_binary, gobins, False),
        "go list streams": (door_go_list, [s.encode() for s in _go_list(tmp)], True),
        "/metrics texts": (door_metrics, [s.encode() for s in _metrics()], True),
        "pprof profiles": (door_pprof, _pprofs(), False),
        "bpfmem.toml": (door_config, [(HERE / "data" / "inputs" / "bpfmem.toml")
                                      .read_bytes()], True),
    }


def _weight(seed) -> float:
    """Big seeds (a real kernel's 5 MB of BTF, a real Go binary) are drawn less often."""
    n = len(seed[0] if isinstance(seed, tuple) else seed)
    return 1.0 if n < 256 << 10 else 0.1


def test_every_door_gives_a_result_or_a_clean_error(doors, capsys):
    share = SECONDS / len(doors)
    old = signal.signal(signal.SIGALRM, _alarm)
    rows, escapes = [], []
    try:
        for name, (door, seeds, text) in doors.items():
            assert seeds, name
            rng = random.Random(f"{SEED}:{name}")
            weights = [_weight(s) for s in seeds]
            n = ok = clean = 0
            slowest = 0.0
            end = time.monotonic() + share
            while time.monotonic() < end or n == 0:
                seed = rng.choices(seeds, weights)[0]
                if isinstance(seed, tuple):
                    item = (mutate(rng, seed[0], text), seed[1])
                else:
                    item = mutate(rng, seed, text)
                n += 1
                t = time.monotonic()
                signal.alarm(ALARM)
                try:
                    door(item)
                    ok += 1
                except BpfmemError as e:
                    clean += 1
                    msg = str(e)
                    if "\n" in msg.strip() or "Traceback" in msg:
                        escapes.append((name, n, f"a multi-line error: {msg[:200]!r}"))
                except _Hang:
                    escapes.append((name, n, f"no answer within {ALARM}s"))
                except Exception as e:    # noqa: BLE001 -- what this test is looking for
                    escapes.append((name, n, f"{type(e).__name__}: {str(e)[:200]}"))
                finally:
                    signal.alarm(0)
                slowest = max(slowest, time.monotonic() - t)
            rows.append((name, n, ok, clean, slowest))
    finally:
        signal.signal(signal.SIGALRM, old)
    with capsys.disabled():
        print(f"\nfuzz (seed {SEED}, {SECONDS:g}s over {len(doors)} doors):")
        for name, n, ok, clean, slowest in rows:
            print(f"  {name:24} {n:6} inputs: {ok:6} results, {clean:6} clean errors, "
                  f"slowest {slowest:.2f}s")
        print(f"  total {sum(r[1] for r in rows)} inputs, {len(escapes)} escapes")
    assert not escapes, escapes[:20]


@pytest.mark.parametrize("text", [
    '{"ImportPath": "a", "Name": "main", "Imports": [["x"]]}',      # found by the run above
    '{"ImportPath": "a", "Name": ["main"]}',
    '{"ImportPath": ["a"], "Name": "main"}',
    '{"ImportPath": "a", "Name": "main", "Module": {"Path": 1}}',
    '{"ImportPath": "a", "Name": "main", "Imports": "fmt"}',
    '[' * 100000,
])
def test_go_list_values_of_the_wrong_type_are_parse_errors(text):
    from bpfmem.errors import ParseError
    with pytest.raises(ParseError):
        parse_go_list(text)


def test_a_parse_error_is_one_line_whatever_the_file_names():
    """The fuzz once made an ELF whose section name held a newline: the error naming it ran
    over two lines. A ParseError shows a name's control characters as \\xNN."""
    from bpfmem.errors import ParseError
    e = ParseError("section a\nb data: 0 bytes run past the end", section="x\x1b[31m",
                   offset=0x10, path="fuzz.o")
    assert str(e) == ("fuzz.o: section a\\x0ab data: 0 bytes run past the end "
                      "(section x\\x1b[31m, offset 0x10)")
    assert "\n" not in str(e.with_path("other.o"))
