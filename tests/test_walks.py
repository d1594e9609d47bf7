"""issue 30, walks: a bpffs directory chain 1,100 levels deep made every exporter scrape fail
(RecursionError in os.walk) while /healthz said "0 failed", and `snapshot` printed a
traceback; the same depth in a delegated cgroup subtree crashed `pod`. The walks are now one
iterative walk with a depth bound (bpfmem.host.walk), what lies deeper said once, and the
exporter counts every failed scan whatever its exception. Also: Accept-Encoding is read with
its q-values (``gzip;q=0`` got gzip)."""

from __future__ import annotations

import http.client
import json
import os

import pytest

from conftest import bpffs, is_root
from bpfmem.api.export import ScanCache, serve
from bpfmem.host import bpfsys, cgroup, live, pagemap
from bpfmem.host.httpd import accepts_coding
from bpfmem.host.walk import MAX_DEPTH, walk_tree
from bpfmem.uapi import MapType as T

DEPTH = 1100


def _chain(top: str, depth: int = DEPTH) -> str:
    """A chain of ``depth`` directories named d under ``top``; the deepest path."""
    path = top
    for _ in range(depth):               # not os.makedirs: it recurses too
        path = os.path.join(path, "d")
        os.mkdir(path)
    return path


def _remove_chain(top: str, depth: int = DEPTH) -> None:
    for k in range(depth, 0, -1):
        p = os.path.join(top, *(["d"] * k))
        for name in os.listdir(p):
            q = os.path.join(p, name)
            if os.path.isdir(q) and not os.path.islink(q):
                os.rmdir(q)
            else:
                os.unlink(q)
        os.rmdir(p)


@pytest.fixture
def chained(tmp_path):
    """tmp_path, its chains removed afterwards (pytest's own clean-up of old temporary
    directories is shutil.rmtree, which recurses: a RecursionError there)."""
    yield tmp_path
    for top in (tmp_path, tmp_path / "pod"):
        if (top / "d").exists():
            _remove_chain(str(top))


def test_a_chain_1100_deep_is_walked_to_the_bound(chained):
    tmp_path = chained
    deepest = _chain(str(tmp_path))
    with pytest.raises(RecursionError):           # what the walks were: the hostile input
        list(os.walk(tmp_path))
    told = []
    got = list(walk_tree(str(tmp_path), too_deep=told.append))
    assert len(got) == MAX_DEPTH + 1 and told == [os.path.join(got[-1][0], "d")]
    assert deepest.startswith(told[0])
    # as os.walk: parents first, a pruned directory not entered, a symlink not followed
    (tmp_path / "f").write_text("")
    os.symlink(tmp_path / "d", tmp_path / "link")
    top = next(walk_tree(str(tmp_path)))
    assert sorted(top[1]) == ["d", "link"] and top[2] == ["f"]
    walked = [p for p, dirs, _ in walk_tree(str(tmp_path), max_depth=3)]
    assert os.path.join(str(tmp_path), "link") not in walked and len(walked) == 4


def test_a_deep_cgroup_subtree_is_no_crash(chained):
    """read_subtree_procs (pod's pids of a container) and cgroup_inodes (pod's page
    attribution) over a delegated subtree 1,100 deep: the pids of the walked levels."""
    tmp_path = chained
    base = tmp_path / "pod"
    base.mkdir()
    (base / "cgroup.procs").write_text("10\n")
    deepest = _chain(str(base))
    (tmp_path / "pod" / "d" / "cgroup.procs").write_text("11\n12\n")
    open(os.path.join(deepest, "cgroup.procs"), "w").write("13\n")   # past the bound
    assert cgroup.read_subtree_procs("/pod", root=tmp_path) == [10, 11, 12]
    assert len(pagemap.cgroup_inodes(str(base))) == MAX_DEPTH + 1


@pytest.mark.skipif(not is_root(), reason="needs root (bpffs, bpf())")
def test_a_bpffs_chain_1100_deep_leaves_the_scan_and_snapshot_whole(capsys):
    from bpfmem.cli import main
    with bpffs() as pins:
        fd = bpfsys.map_create(T.HASH, 4, 4, 8, 0, "walk_top")
        try:
            bpfsys.obj_pin(fd, f"{pins}/top")
            map_id = bpfsys.map_info(fd).id
        finally:
            os.close(fd)
        _chain(pins)
        try:
            snap = live.scan_maps(programs=False)
            m = next(m for m in snap.maps if m.id == map_id)
            assert m.pins == (f"{pins}/top",)
            assert any(e.startswith(f"{pins}/d/") and
                       e.endswith(f"more than {MAX_DEPTH} directories deep; not walked further")
                       for e in snap.errors), snap.errors
            assert main(["snapshot", "--format", "json"]) == 0
            out, err = capsys.readouterr()
            assert "Traceback" not in err
            assert any(x["id"] == map_id for x in json.loads(out)["maps"])
        finally:
            os.unlink(f"{pins}/top")
            _remove_chain(pins)


def _get(port, path, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("GET", path, headers=headers or {})
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


@pytest.mark.parametrize("exc", [RecursionError("maximum recursion depth exceeded"),
                                 ValueError("bad"), KeyError("k")])
def test_every_failed_scan_is_counted_whatever_its_exception(exc):
    def scan():
        raise exc
    cache = ScanCache(scan, interval=0)
    server, thread = serve("127.0.0.1", 0, cache)
    port = server.server_address[1]
    try:
        status, _, _ = _get(port, "/metrics")
        assert status == 200
        _, _, body = _get(port, "/healthz")
        assert body.decode().endswith(" failed\n") and " 0 failed" not in body.decode()
        assert cache.errors >= 1 and type(exc).__name__ in cache.last_error
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.parametrize("header,gzip", [
    ("gzip", True), ("gzip;q=0", False), ("gzip; q=0.000, identity", False),
    ("deflate, gzip;q=0.5", True), ("*", True), ("*;q=0", False), ("gzip;q=0, *", False),
    ("identity", False), ("", False), ("x-gzip", True), ("GZIP;Q=1", True),
    ("gzip;q=nan", False), ("gzipped", False), ("br, *;q=0.1", True)])
def test_accept_encoding_is_read_with_its_q_values(header, gzip):
    assert accepts_coding(header) is gzip


def test_the_exporter_sends_no_gzip_to_gzip_q_0():
    from test_export_http import _snap
    cache = ScanCache(_snap, interval=60)
    server, thread = serve("127.0.0.1", 0, cache)
    port = server.server_address[1]
    try:
        _, h, body = _get(port, "/metrics", {"Accept-Encoding": "gzip;q=0"})
        assert "Content-Encoding" not in h and body.startswith(b"# HELP")
        _, h, _ = _get(port, "/metrics", {"Accept-Encoding": "gzip"})
        assert h.get("Content-Encoding") == "gzip"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
