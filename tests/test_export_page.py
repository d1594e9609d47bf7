"""The exporter's own page writer against prometheus_client's encoders (the peer it replaces at
run time): the same page, byte for byte, in the Prometheus text format and in OpenMetrics, on
maps whose names and owners need escaping, as maps come and go between scans; and the page is
made with prometheus_client not importable."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("prometheus_client")

from prometheus_client.exposition import choose_encoder, generate_latest  # noqa: E402
from prometheus_client.utils import floatToGoString  # noqa: E402
from prometheus_client.openmetrics.exposition import generate_latest as om_latest  # noqa: E402

from bpfmem import api  # noqa: E402
from prom_peer import make_registry  # noqa: E402
from bpfmem.api.export import Exposition, ScanCache  # noqa: E402
from bpfmem.report.prometheus import go_float, negotiate  # noqa: E402
from bpfmem.host.live import LiveMap, Owner, Snapshot  # noqa: E402

OM = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def _snap(maps) -> Snapshot:
    return Snapshot(taken_at=0.0, duration=0.0, hostname="h", kernel="6.18", possible_cpus=2,
                    maps=tuple(maps), entries_counted=True)


def _map(i: int, name: str, comm: str = "agent", cgroup: str | None = "/pod/a",
         entries: int | None = 3, type_: int = 1, flags: int = 0) -> LiveMap:
    return LiveMap(id=i, name=name, type=type_, key_size=8, value_size=16, max_entries=1024,
                   map_flags=flags, map_extra=0, btf_id=0, memlock=4096 * i, frozen=False,
                   entries=entries,
                   owners=(Owner(100 + i, comm, cgroup),) if comm else ())


class _Feed:
    def __init__(self, snaps):
        self.snaps = list(snaps)

    def __call__(self):
        return self.snaps.pop(0) if len(self.snaps) > 1 else self.snaps[0]


def _steady(page: bytes) -> bytes:
    """The page without the figures that differ from call to call (how long the scan took,
    the process's own memory, CPU and fds)."""
    return re.sub(rb"^((?:bpfmem_scan_duration_seconds|process_\w+)) \S+$", rb"\1 X", page,
                  flags=re.M)


def _reference(snap, profile, accept: str) -> bytes:
    """The page as prometheus_client writes it (its registry, encoders and process collector,
    over bpfmem's families)."""
    cache = ScanCache(lambda: snap, 3600)
    encoder, _ctype = choose_encoder(accept)
    return _steady(encoder(make_registry(cache, profile)))


def _ours(expo: Exposition, accept: str) -> bytes:
    body, _gz, _ct = expo.page(accept)
    return _steady(body)


@pytest.mark.parametrize("accept", ["", OM])
def test_map_families_match_prometheus_client(accept):
    prof = api.profile("6.18", cpus=2)
    hard = [_map(1, 'a"b\\c'), _map(2, "x\ny", comm='co"mm', cgroup=None),
            _map(3, "plain", comm="", entries=None), _map(4, "ünïcode", type_=9),
            _map(5, "nopre", flags=1, entries=0), _map(6, "big", entries=10**9)]
    cache = ScanCache(lambda: _snap(hard), 3600)
    expo = Exposition(cache, prof)
    want = _reference(_snap(hard), prof, accept)
    assert _ours(expo, accept) == want
    assert choose_encoder(accept)[1].startswith(expo.page(accept)[2])


def test_labels_follow_maps_that_change_and_go():
    prof = api.profile("6.18", cpus=2)
    first = [_map(i, f"m{i}") for i in range(1, 50)]
    second = [_map(i, f"m{i}", comm="other" if i % 2 else "agent") for i in range(10, 80)]
    cache = ScanCache(_Feed([_snap(first), _snap(second)]), 0)
    expo = Exposition(cache, prof)
    expo.page("")
    body = _ours(expo, "")          # the second scan (interval 0: every page rescans)
    cut = b"# HELP bpfmem_scan_duration"  # (the scan counters differ: interval 0 rescans)
    assert body.split(cut)[0] == _reference(_snap(second), prof, "").split(cut)[0]
    assert set(expo._map_page.families._labels) == {m.id for m in second}   # the gone ones forgotten


def test_values_are_written_as_prometheus_client_writes_them():
    import random
    rnd = random.Random(7)
    values = [0, 1, 0.5, -3, 123456, 1234567, 7143424, 12345678901, 2**40, 1e21, 1e-7,
              float("inf"), float("-inf"), float("nan")]
    values += [rnd.random() * 10 ** rnd.randint(0, 25) for _ in range(5000)]
    assert [go_float(v) for v in values] == [floatToGoString(v) for v in values]


@pytest.mark.parametrize("accept", [
    "", "*/*", "text/plain", "text/plain;version=0.0.4",
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",            # what Prometheus sends
    "application/openmetrics-text"])
def test_negotiation_picks_the_format_prometheus_client_picks(accept):
    om, ctype = negotiate(accept)
    theirs = choose_encoder(accept)[1]
    assert theirs.startswith(ctype) and om == theirs.startswith("application/openmetrics")


def test_the_page_is_made_without_prometheus_client(monkeypatch):
    import sys
    prof = api.profile("6.18", cpus=2)
    want = {accept: _reference(_snap([_map(1, "m")]), prof, accept) for accept in ("", OM)}
    for name in [m for m in sys.modules if m.split(".")[0] == "prometheus_client"]:
        monkeypatch.setitem(sys.modules, name, None)       # as if not installed
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    expo = Exposition(ScanCache(lambda: _snap([_map(1, "m")]), 3600), prof)
    for accept in ("", OM):
        assert _ours(expo, accept) == want[accept]


def test_request_heads():
    from bpfmem.host.httpd import parse_request_head
    assert parse_request_head(b"GET /metrics?x=1 HTTP/1.1\r\nAccept-Encoding: gzip\r\n"
                              b"Accept: text/plain\r\n\r\n") == (
        "GET", "/metrics", {"accept-encoding": "gzip", "accept": "text/plain"})
    assert parse_request_head(b"HEAD / HTTP/1.0\n\n") == ("HEAD", "/", {})
    for bad in (b"", b"GET /\r\n\r\n", b"GET / SPDY/3\r\n\r\n", b"\x16\x03\x01\x02\x00",
                b"GET / HTTP/1.1\r\nno colon here\r\n\r\n"):
        assert parse_request_head(bad) is None


def test_post_and_garbage_get_one_line_answers():
    import socket
    from bpfmem.api.export import serve
    cache = ScanCache(lambda: _snap([_map(1, "m")]), 3600)
    server, _t = serve("127.0.0.1", 0, cache, api.profile("6.18", cpus=2))
    try:
        port = server.server_address[1]
        for raw, status in ((b"POST /metrics HTTP/1.1\r\n\r\n", b"405"),
                            (b"\x16\x03\x01 hello\r\n\r\n", b"400"),
                            (b"GET /nope HTTP/1.1\r\n\r\n", b"404")):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
                c.sendall(raw)
                answer = b""
                while chunk := c.recv(65536):
                    answer += chunk
            assert answer.split(b" ")[1] == status and b"Content-Length:" in answer
    finally:
        server.shutdown()
        server.server_close()


def test_a_page_kept_in_blocks_equals_a_page_written_afresh():
    """Pages whose unchanged blocks are the last page's compressed pieces: every one
    inflates (CRC and size checked) to the page a fresh exposition writes, as maps stay,
    change, come and go; an unchanged scan writes no block."""
    import gzip
    import random
    prof = api.profile("6.18", cpus=2)
    rnd = random.Random(31)
    maps = {i: _map(i, f"m{i}") for i in range(1, 400)}
    snaps = []
    for _ in range(6):
        snaps.append(_snap(sorted(maps.values(), key=lambda m: m.id)))
        for i in rnd.sample(sorted(maps), 8):        # changed: entries, owner
            maps[i] = _map(i, f"m{i}", comm=rnd.choice(["agent", "other"]),
                           entries=rnd.randint(0, 1024))
        for i in rnd.sample(sorted(maps), 5):        # closed
            del maps[i]
        for i in range(max(maps) + 1, max(maps) + 4):  # new
            maps[i] = _map(i, f"n{i}")
    snaps.append(snaps[-1])                          # a scan that found nothing new
    now = [snaps[0]]
    cache = ScanCache(lambda: now[0], 3600)
    expo = Exposition(cache, prof)
    written = []
    for snap in snaps:
        now[0], cache._at = snap, None                 # the next scan
        for accept in ("", OM):
            body, gz, _ct = expo.page(accept)
            assert gzip.decompress(gz) == body
            fresh = Exposition(ScanCache(lambda: snap, 3600), prof)
            cut = b"# HELP bpfmem_scan_duration"   # the scan counters differ
            assert body.split(cut)[0] == fresh.page(accept)[0].split(cut)[0]
            written.append(expo._map_page.written)
    assert written[-2:] == [0, 0] and written[0] > 0 and 0 < written[2] < written[0]
    assert set(expo._map_page.families._labels) == {m.id for m in snaps[-1].maps}


def test_zlibs_crc_combination_gives_the_bytes_of_the_crc_of_zeros():
    """The page's trailer CRC put together by the zlib library (host/zcrc.py: one call a
    piece) is the one put together with CRCs of zeros (report/prometheus.ZerosCrc), page
    after page as maps change; each page inflates with its CRC checked."""
    import gzip
    from bpfmem.analysis.metrics import maps_rows
    from bpfmem.host.zcrc import zlib_crc
    from bpfmem.report.prometheus import ZEROS_CRC, MapPage
    fast = zlib_crc()
    if fast is None:
        pytest.skip("this zlib has no crc32_combine_gen")
    prof = api.profile("6.18", cpus=2)
    pages = [MapPage(crc=ZEROS_CRC), MapPage(crc=fast)]
    maps = {i: _map(i, f"m{i}") for i in range(1, 300)}
    for step in range(4):
        ms = tuple(sorted(maps.values(), key=lambda m: m.id))
        a, b = (p.gzip(ms, lambda g: maps_rows(g, prof, {}), b"# tail\n") for p in pages)
        assert a == b and gzip.decompress(a).endswith(b"# tail\n")
        maps[step * 7 + 1] = _map(step * 7 + 1, "changed", entries=step)
        maps.pop(step * 11 + 5, None)


def test_the_program_families_kept_in_blocks_equal_the_families_written_afresh():
    """The per-program families are kept in blocks as the maps' are (a program that changes
    costs its block): page after page, as programs change, come and go, the programs' part
    of the page is what render_families writes of program_families, and the page inflates
    with its CRC checked."""
    import gzip
    import random
    from bpfmem.api.export import program_families
    from bpfmem.records import JitMemory, LiveProg
    from bpfmem.report.prometheus import render_families
    prof = api.profile("6.18", cpus=2)
    rnd = random.Random(7)

    def prog(i, jited):
        return LiveProg(id=i, name=f"p{i}", type=rnd.choice([1, 6, 26]), tag="00" * 8,
                        memlock=4096, xlated_prog_len=64, jited_prog_len=jited, map_ids=(),
                        btf_id=0, verified_insns=8, load_time=1, created_by_uid=0,
                        owners=(Owner(500 + i % 3, "loader", "/pod/b"),))
    progs = {i: prog(i, 40) for i in range(1, 300)}
    now = [None]
    cache = ScanCache(lambda: now[0], 3600)
    expo = Exposition(cache, prof)
    for step in range(5):
        from dataclasses import replace
        snap = replace(_snap([_map(1, "m1")]), progs=tuple(progs[i] for i in sorted(progs)),
                       btfs=(), jit=JitMemory(1 << 20, 8192, 1))
        now[0], cache._at = snap, None
        for accept in ("", OM):
            body, gz, _ct = expo.page(accept)
            assert gzip.decompress(gz) == body
            want = bytes(render_families(program_families(snap), openmetrics=bool(accept)))
            assert want and want in body
        for i in rnd.sample(sorted(progs), 4):           # changed
            progs[i] = prog(i, 40 + step)
        for i in rnd.sample(sorted(progs), 3):           # unloaded
            del progs[i]
        progs[max(progs) + 1] = prog(max(progs) + 1, 99)  # loaded
