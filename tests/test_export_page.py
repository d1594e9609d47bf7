"""The exporter's own writer of the per-map families against prometheus_client's encoders:
the same page, byte for byte, in the Prometheus text format and in OpenMetrics, on maps whose
names and owners need escaping, and as maps come and go between scans."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("prometheus_client")

from prometheus_client.exposition import choose_encoder, generate_latest  # noqa: E402
from prometheus_client.openmetrics.exposition import generate_latest as om_latest  # noqa: E402

from bpfmem import api  # noqa: E402
from bpfmem.exporter import BpfmemCollector, Exposition, ScanCache  # noqa: E402
from bpfmem.host.live import LiveMap, Owner, Snapshot  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402

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
    """The page without the one figure that differs by run (how long the scan took)."""
    return re.sub(rb"(bpfmem_scan_duration_seconds) \S+", rb"\1 X", page)


def _reference(snap, profile, accept: str) -> bytes:
    """The page as prometheus_client alone writes it (every family by the collector)."""
    cache = ScanCache(lambda: snap, 3600)
    reg = CollectorRegistry(auto_describe=False)
    reg.register(BpfmemCollector(cache, profile))
    return _steady((om_latest if accept == OM else generate_latest)(reg))


def _ours(expo: Exposition, accept: str) -> bytes:
    body, _gz, _ct = expo.page(accept)
    # the process collector's figures differ from call to call: compare up to them
    return _steady(body.split(b"# HELP process_")[0])


@pytest.mark.parametrize("accept", ["", OM])
def test_map_families_match_prometheus_client(accept):
    prof = api.profile("6.18", cpus=2)
    hard = [_map(1, 'a"b\\c'), _map(2, "x\ny", comm='co"mm', cgroup=None),
            _map(3, "plain", comm="", entries=None), _map(4, "ünïcode", type_=9),
            _map(5, "nopre", flags=1, entries=0), _map(6, "big", entries=10**9)]
    cache = ScanCache(lambda: _snap(hard), 3600)
    expo = Exposition(cache, prof)
    want = _reference(_snap(hard), prof, accept)
    # the reference has no process families (its registry has no ProcessCollector)
    assert _ours(expo, accept) == want.split(b"# EOF")[0]
    assert choose_encoder(accept)[1] == expo.page(accept)[2]


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
    assert set(expo._families._labels) == {m.id for m in second}   # the gone ones forgotten
