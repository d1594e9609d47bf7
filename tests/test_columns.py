"""Every command at 80 and 120 columns, piped (COLUMNS=80/120) and on a pty (its window size
set with TIOCSWINSZ): no key column is cropped or ellipsised, no map name, path, type, flag or
figure is cut into other words (``service_route_`` + ``table``, ``--max-`` + ``entries``),
and user text prints as written (rich markup in ``build[arm]/x.o`` stays text).

How: each command is also run 400 columns wide, where nothing needs to give. Every word of
that output (split at spaces and table rules) must appear at least as often at 80 and 120
columns, whole, within one line: wrapping at spaces keeps words, any cut loses one. On the
pty no line may be wider than the window either (the terminal would cut it where it falls).
``bpfmem top`` is a one-line-a-map dashboard: its cgroup column (and footer) show the end of
a cgroup path, marked "…" where it starts; that is the one shortening allowed, and only
there. Live commands (snapshot, top, pod, measure) read this host: their figures move between two
runs, so there only the words without digits, and the figures of a map this test holds,
are compared."""

from __future__ import annotations

import errno
import fcntl
import io
import os
import re
import select
import shutil
import struct
import subprocess
import sys
import termios
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from conftest import is_root

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src"
EXAMPLE = "src/bpfmem/examples/cni_datapath.bpf.o"
SEED = "examples/seed/cni_{}.bpf.o"
V054, BEFORE, AFTER = (SEED.format(v) for v in ("v054", "v060_before", "v060_after"))
INPUTS = "tests/data/inputs"
K = ["--kernel", "6.18", "--cpus", "2"]
WIDTHS = (80, 120)
WIDE = 400
ARM = "build[arm]/x.o"          # rich would read [arm] as a style: it must print as written

# the commands on files: (argv, exit codes it may end with)
FILES = {
    "maps-example": (["maps", *K], {0}),
    "maps-seed": (["maps", V054, BEFORE, AFTER, *K], {0}),
    "maps-markup-path": (["maps", ARM, *K], {0}),
    "maps-cilium": (["maps", "--loader", "cilium-ebpf", "tests/data/cilium_examples/xdp_bpfel.o",
                     *K], {0}),
    "maps-bpftool": (["maps", "--from-bpftool", f"{INPUTS}/bpftool-map-show.json", *K], {0}),
    "estimate": (["estimate", "--type", "lru_hash", "--key-size", "16", "--value-size", "40",
                  "--max-entries", "65536", "--entries", "1000", *K], {0}),
    "check-fails": (["check", BEFORE, "--limit", "128Mi", "--max-fraction", "0.4", *K], {1}),
    "check-matrix": (["check", V054, AFTER, ARM, "--limit", "128Mi", "--kernel", "5.10,6.18",
                      "--cpus", "2,64"], {0, 1}),
    "diff": (["diff", BEFORE, AFTER, "--limit", "128Mi", *K], {0}),
    "diff-upgrade": (["diff", V054, ARM, "--limit", "128Mi", *K], {0}),
    "diff-snapshots": (["diff", f"{INPUTS}/bpftool-map-show.json", f"{INPUTS}/snapshot.json",
                        *K], {0}),
    "advise": (["advise", BEFORE, *K], {0}),
    "advise-occupancy": (["advise", EXAMPLE, "--occupancy", f"{INPUTS}/occupancy.json", *K],
                         {0}),
    "size": (["size", EXAMPLE, "--top", "0"], {0}),
    "size-sections": (["size", BEFORE, "--by", "section"], {0}),
    "size-diff": (["size", "diff", V054, BEFORE], {0}),
}
HELPS = [[], ["maps"], ["estimate"], ["check"], ["diff"], ["advise"], ["measure"],
         ["snapshot"], ["top"], ["export"], ["pod"], ["size"], ["size", "diff"]]

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]")
_WORD = re.compile(r"[^\s│┃┆┇┊┋║─━┄┅┈┉═┏┓┗┛┡┩┠┨┯┷┿╇╈╋┳┻┣┫├┤┬┴┼╭╮╰╯╔╗╚╝╠╣╦╩╬]+")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR", "TERM")}
    env.update(PYTHONPATH=str(SRC), TERM="xterm-256color", **extra)
    return env


def run_piped(argv: list[str], cols: int, cwd: Path) -> tuple[int, str]:
    """``bpfmem ARGV`` in this process, its output to a pipe-like file, ``COLUMNS=cols``."""
    from bpfmem import cli
    saved = {k: os.environ.get(k) for k in ("COLUMNS", "LINES")}
    here = os.getcwd()
    out = io.StringIO()
    os.environ.update(COLUMNS=str(cols), LINES="50")
    os.chdir(cwd)
    try:
        with redirect_stdout(out), redirect_stderr(out):
            try:
                rc = cli.main(list(argv))
            except SystemExit as e:          # --help
                rc = e.code if isinstance(e.code, int) else 0 if e.code is None else 2
    finally:
        os.chdir(here)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return rc, out.getvalue()


def run_pty(argv: list[str], cols: int, cwd: Path) -> tuple[int, str]:
    """``bpfmem ARGV`` with a pty of ``cols`` x 50 as its stdin, stdout and stderr."""
    master, slave = os.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
        proc = subprocess.Popen([sys.executable, "-m", "bpfmem", *argv], cwd=cwd,
                                stdin=slave, stdout=slave, stderr=slave, env=_env(),
                                start_new_session=True)
    finally:
        os.close(slave)
    chunks = []
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError as e:          # EIO: the last writer closed its end
                if e.errno != errno.EIO:
                    raise
                break
            if not data:
                break
            chunks.append(data)
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    text = b"".join(chunks).decode("utf-8", "replace")
    lines = _ANSI.sub("", text).replace("\r\n", "\n").split("\n")
    # what stays on the screen: a progress line redrawn in place ends at its last \r
    return rc, "\n".join(line.rstrip("\r").rsplit("\r", 1)[-1] for line in lines)


def words(text: str, *, digits: bool = True) -> Counter:
    out = Counter()
    for w in _WORD.findall(text):
        if len(w) >= 2 and re.search(r"[A-Za-z0-9]", w) and (digits or not re.search(r"\d", w)):
            out[w] += 1
    return out


def cut_words(wide: str, narrow: str, cols: int, *, digits: bool = True) -> list[str]:
    """Words of the wide output that the narrow one has fewer of, whole within a line.
    Without ``digits`` (a live command, run again for each width) a noun's number follows
    the figure before it, which moves between runs ("0 programs:" then "1 program:" when
    another process loaded one meanwhile): a word is looked for without its plural "s"."""
    lines = narrow.splitlines()
    lost = []
    for w, n in words(wide, digits=digits).items():
        if len(w) > cols - 8:         # longer than a line can hold: folding it is right
            continue
        look = w if digits else _SINGULAR.sub("", w) or w
        if sum(line.count(look) for line in lines) < n:
            lost.append(w)
    return lost


_SINGULAR = re.compile(r"(?<=[a-z]{2})s?(?=[:,;.]*$)[:,;.]*$")


def too_wide(text: str, cols: int) -> list[str]:
    """Lines the terminal would cut, but for one word longer than a line (a long path)."""
    from rich.cells import cell_len
    return [line for line in text.splitlines()
            if cell_len(line.rstrip()) > cols and " " in line.strip()]


def check_all_widths(argv, codes, cwd, *, live=False, required=(), pty_too=True,
                     path_tails=False) -> None:
    rc, wide = run_piped(argv, WIDE, cwd)
    assert rc in codes, (argv, rc, wide[-3000:])
    for w in required:
        assert w in wide, (argv, w, wide[-3000:])
    runs = [("piped", cols, run_piped(argv, cols, cwd)) for cols in WIDTHS]
    if pty_too:
        with ThreadPoolExecutor(len(WIDTHS)) as pool:
            runs += [("pty", cols, r) for cols, r in
                     zip(WIDTHS, pool.map(lambda c: run_pty(argv, c, cwd), WIDTHS))]
    for how, cols, (rc, out) in runs:
        where = f"bpfmem {' '.join(argv)} ({how}, {cols} columns)"
        assert rc in codes, (where, rc, out[-3000:])
        shown = re.sub(r"(?:^|(?<=\s))…(?=\S)", "", out) if path_tails else out
        assert "…" not in shown, f"{where}: cropped:\n{out}"
        lost = cut_words(wide, out, cols, digits=not live)
        lost += [w for w in required if not any(w in line for line in out.splitlines())]
        assert not lost, f"{where}: cut or lost {sorted(set(lost))[:20]}:\n{out}"
        if how == "pty":
            assert not too_wide(out, cols), f"{where}: wider than the window:\n{out}"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A copy of the inputs the commands read, one of them at a path with rich markup in it."""
    d = tmp_path_factory.mktemp("columns")
    for rel in {EXAMPLE, V054, BEFORE, AFTER, "tests/data/cilium_examples/xdp_bpfel.o",
                f"{INPUTS}/bpftool-map-show.json", f"{INPUTS}/snapshot.json",
                f"{INPUTS}/occupancy.json"}:
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / rel, d / rel)
    (d / ARM).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(REPO / EXAMPLE, d / ARM)
    return d


@pytest.mark.parametrize("name", sorted(FILES))
def test_file_commands_keep_every_word(name, workdir):
    argv, codes = FILES[name]
    check_all_widths(argv, codes, workdir, required=[ARM] if argv[0] == "maps" and ARM in argv
                     else [])


@pytest.mark.parametrize("cmd", HELPS, ids=lambda c: " ".join(c) or "bpfmem")
def test_help_keeps_every_flag(cmd, workdir):
    """Every flag of the command's --help whole, at 80 and 120 columns (argparse wraps its
    help with textwrap, which breaks at hyphens unless told not to). argparse takes its
    width from COLUMNS or, unset, the terminal's size: the same on a pipe and a pty, so the
    pty runs for three of them."""
    argv = [*cmd, "--help"]
    rc, wide = run_piped(argv, WIDE, workdir)
    flags = set(re.findall(r"(?<![\w-])--?[A-Za-z][\w-]*", wide))
    assert rc == 0 and flags, wide
    check_all_widths(argv, {0}, workdir, required=sorted(flags),
                     pty_too=cmd in ([], ["check"], ["pod"]))


# ---- live: this host's maps and cgroups (root) ----

needs_root = pytest.mark.skipif(not is_root(), reason="needs root (CAP_SYS_ADMIN)")


@pytest.fixture(scope="module")
def held_map():
    """A hash map this test holds, with a name as long as the kernel keeps (15 bytes)."""
    from bpfmem.host import bpfsys
    from bpfmem.uapi import MapType as T
    name = f"cw{os.getpid() % 100000}_route_table"[:15]
    fd = bpfsys.map_create(T.HASH, 20, 72, 16384, 0, name)
    try:
        yield name, bpfsys.map_info(fd)
    finally:
        os.close(fd)


def test_live_comparison_allows_a_moved_count_but_not_a_cut():
    """The comparison itself: a live run's noun may change number with its figure (CI saw
    "0 programs:" wide, then "1 program:" at 120 columns, another bpfmem's iterator program
    loaded meanwhile), but a word cut at the margin is still found."""
    wide = "0 programs: memlock 0, BTF loaded by processes 0 in 0 objects"
    assert cut_words(wide, "1 program: memlock 4Ki, BTF loaded by\nprocesses 1 in 1 object",
                     80, digits=False) == []
    assert cut_words(wide, "1 program: memlock 4Ki, BTF loaded by pro\ncesses 1 in 1 object",
                     80, digits=False) == ["processes"]
    assert cut_words(wide, "1 program: memlock 0, BTF loaded by processes 0 in 0 objects",
                     80) == ["programs:"]       # a file command's output may not move at all


@needs_root
@pytest.mark.parametrize("cmd", [["snapshot", "--format", "table"], ["top", "--once"]])
def test_live_node_views_keep_every_word(cmd, held_map, workdir):
    name, info = held_map
    argv = [*cmd, "--name", name[:6] + "*"]
    check_all_widths(argv, {0}, workdir, live=True, required=[name, "hash"],
                     path_tails=cmd[0] == "top")


@needs_root
def test_measure_keeps_every_word(workdir):
    check_all_widths(["measure", EXAMPLE], {0, 1}, workdir, live=True,
                     required=["service_remote_grant_table", "conntrack_table"])


@needs_root
def test_pod_keeps_every_word(workdir):
    from bpfmem.host.podscan import launched
    with launched(["sleep", "120"], limit=128 << 20) as job:
        check_all_widths(["pod", "--cgroup", job.cgroup.fs_path, "--no-go"], {0}, workdir,
                         live=True, required=["sleep"])
