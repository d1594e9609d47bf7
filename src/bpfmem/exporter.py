"""``bpfmem export``: a Prometheus exporter over the live scan (a thin shell, like the CLI).

One scan serves every scrape within ``interval`` seconds: concurrent scrapes wait for the scan
in progress instead of starting their own, and the page is rendered once per scan. A failed scan is counted and the previous result
served, so a scrape never fails because of one bad moment.

Memory: with ``--entries`` the count of one map holds at most ``bpfsys.BATCH_BUDGET`` (4 MiB)
of lookup buffers at a time, whatever its value size or the possible CPUs (maps whose values
are too large for a useful batch are walked key by key), so the exporter's RSS stays that of a
scan without counting plus 4 MiB (about 35 MB on a node of a few hundred maps, measured by
tests/test_bpfsys.py on a hash map of 1 MiB values), well inside the DaemonSet's 128 MiB.

Metrics (labels in braces):
  bpfmem_map_memlock_bytes{id,name,type,owner_comm,cgroup}   fdinfo memlock
  bpfmem_map_charged_bytes{...}        model: memcg charge at the entries present (or at create)
  bpfmem_map_max_entries{...}
  bpfmem_map_entries{...}              with --entries
  bpfmem_map_pressure_ratio{...}       entries / max_entries, with --entries
  bpfmem_cgroup_map_memlock_bytes{cgroup}, bpfmem_cgroup_maps{cgroup}
  bpfmem_cgroup_memory_usage_bytes{cgroup}, bpfmem_cgroup_memory_limit_bytes{cgroup},
  bpfmem_cgroup_map_share_ratio{cgroup}    (memory cgroups that hold maps)
  bpfmem_node_maps, bpfmem_node_map_memlock_bytes
  bpfmem_scan_duration_seconds, bpfmem_scans_total, bpfmem_scan_errors_total,
  bpfmem_maps_skipped_total
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from .analysis.live import cgroup_sums, check_map, primary_owner
from .errors import BpfmemError

__all__ = ["ScanCache", "BpfmemCollector", "Exposition", "make_registry", "serve",
           "METRIC_NAMES"]

METRIC_NAMES = (
    "bpfmem_map_memlock_bytes", "bpfmem_map_charged_bytes", "bpfmem_map_max_entries",
    "bpfmem_map_entries", "bpfmem_map_pressure_ratio", "bpfmem_cgroup_map_memlock_bytes",
    "bpfmem_cgroup_maps", "bpfmem_cgroup_memory_usage_bytes",
    "bpfmem_cgroup_memory_limit_bytes", "bpfmem_cgroup_map_share_ratio", "bpfmem_node_maps",
    "bpfmem_node_map_memlock_bytes", "bpfmem_scan_duration_seconds", "bpfmem_scans_total",
    "bpfmem_scan_errors_total", "bpfmem_maps_skipped_total")

MAP_LABELS = ["id", "name", "type", "owner_comm", "cgroup"]


class ScanCache:
    """Calls ``scan()`` at most once per ``interval`` seconds, whoever asks."""

    def __init__(self, scan: Callable[[], object], interval: float,
                 clock: Callable[[], float] = time.monotonic):
        self._scan = scan
        self.interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self.snapshot = None
        self.cgroups: dict = {}
        self._at: float | None = None
        self.scans = 0
        self.errors = 0
        self.skipped = 0
        self.last_error: str | None = None
        self.duration = 0.0

    def get(self):
        with self._lock:
            now = self._clock()
            if self._at is None or now - self._at >= self.interval:
                t0 = time.monotonic()
                try:
                    result = self._scan()
                    self.snapshot, self.cgroups = (result if isinstance(result, tuple)
                                                   else (result, {}))
                    self.skipped += self.snapshot.skipped
                    self.last_error = None
                except BpfmemError as e:
                    self.errors += 1
                    self.last_error = str(e)
                self.scans += 1
                self.duration = time.monotonic() - t0
                self._at = now
            return self.snapshot


class BpfmemCollector:
    """A prometheus_client collector over a :class:`ScanCache`."""

    def __init__(self, cache: ScanCache, profile=None):
        self.cache = cache
        self.profile = profile

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        snap = self.cache.get()
        g = GaugeMetricFamily
        memlock = g("bpfmem_map_memlock_bytes", "memlock of the map as fdinfo reports it",
                    labels=MAP_LABELS)
        charged = g("bpfmem_map_charged_bytes", "model: the memory cgroup charge of the map "
                    "at the entries present (at create when not counted)", labels=MAP_LABELS)
        max_e = g("bpfmem_map_max_entries", "max_entries of the map", labels=MAP_LABELS)
        ent = g("bpfmem_map_entries", "entries counted in the map", labels=MAP_LABELS)
        press = g("bpfmem_map_pressure_ratio", "entries / max_entries", labels=MAP_LABELS)
        cg_ml = g("bpfmem_cgroup_map_memlock_bytes", "memlock of the maps whose lowest-pid "
                  "holder is in the cgroup", labels=["cgroup"])
        cg_n = g("bpfmem_cgroup_maps", "maps whose lowest-pid holder is in the cgroup",
                 labels=["cgroup"])
        cg_use = g("bpfmem_cgroup_memory_usage_bytes", "memory cgroup usage", labels=["cgroup"])
        cg_lim = g("bpfmem_cgroup_memory_limit_bytes", "memory cgroup limit (absent when "
                   "unlimited)", labels=["cgroup"])
        cg_share = g("bpfmem_cgroup_map_share_ratio", "map memlock / cgroup usage",
                     labels=["cgroup"])
        node_n = g("bpfmem_node_maps", "maps on the node")
        node_ml = g("bpfmem_node_map_memlock_bytes", "memlock of every map on the node")
        if snap is not None:
            for m in snap.maps:
                o = primary_owner(m)
                labels = [str(m.id), m.name, _type(m.type), o.comm if o else "",
                          (o.cgroup or "") if o else ""]
                if m.memlock is not None:
                    memlock.add_metric(labels, m.memlock)
                max_e.add_metric(labels, m.max_entries)
                if m.entries is not None:
                    ent.add_metric(labels, m.entries)
                if m.pressure is not None:
                    press.add_metric(labels, m.pressure)
                if self.profile is not None:
                    c = check_map(m, self.profile).charged
                    if c is not None:
                        charged.add_metric(labels, c)
            sums = cgroup_sums(snap.maps)
            for s in sums:
                cg_ml.add_metric([s.cgroup or ""], s.memlock)
                cg_n.add_metric([s.cgroup or ""], s.maps)
                mem = self.cache.cgroups.get(s.cgroup)
                if mem is not None:
                    cg_use.add_metric([s.cgroup], mem.usage)
                    if mem.limit is not None:
                        cg_lim.add_metric([s.cgroup], mem.limit)
                    if mem.usage:
                        cg_share.add_metric([s.cgroup], s.memlock / mem.usage)
            node_n.add_metric([], len(snap.maps))
            node_ml.add_metric([], sum(m.memlock or 0 for m in snap.maps))
        yield from (memlock, charged, max_e, ent, press, cg_ml, cg_n, cg_use, cg_lim,
                    cg_share, node_n, node_ml)
        yield g("bpfmem_scan_duration_seconds", "seconds the last scan took",
                value=self.cache.duration)
        yield CounterMetricFamily("bpfmem_scans", "scans made", value=self.cache.scans)
        yield CounterMetricFamily("bpfmem_scan_errors", "scans that failed (the previous "
                                  "result was served)", value=self.cache.errors)
        yield CounterMetricFamily("bpfmem_maps_skipped", "maps or processes that vanished "
                                  "during scans", value=self.cache.skipped)


def _type(t: int) -> str:
    from .uapi import map_type_name
    return map_type_name(t)


def make_registry(cache: ScanCache, profile=None):
    from prometheus_client import CollectorRegistry
    from prometheus_client.process_collector import ProcessCollector
    reg = CollectorRegistry(auto_describe=False)
    reg.register(BpfmemCollector(cache, profile))
    ProcessCollector(registry=reg)
    return reg


class Exposition:
    """The /metrics page, rendered once per scan and served as the same bytes to every
    scraper until the next scan: 50 concurrent scrapers cost one render, not 50."""

    def __init__(self, cache: ScanCache, profile=None):
        self.cache = cache
        self.registry = make_registry(cache, profile)
        self._lock = threading.Lock()
        self._scan_no = -1
        self._body = b""
        self._gzipped = b""

    def page(self) -> tuple[bytes, bytes]:
        """(text, gzipped text) of the current exposition."""
        import gzip
        from prometheus_client import generate_latest
        with self._lock:
            self.cache.get()
            if self.cache.scans != self._scan_no:
                self._body = self._gzipped = b""
                self._body = generate_latest(self.registry)
                self._gzipped = gzip.compress(self._body, compresslevel=1)
                self._scan_no = self.cache.scans
                _trim()
            return self._body, self._gzipped


def _trim() -> None:
    """Hand memory freed by the last scan and render back to the OS (glibc keeps freed heap
    otherwise, and the exporter's RSS would creep up to its worst moment)."""
    import ctypes
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def _handler(expo: Exposition):
    from http.server import BaseHTTPRequestHandler
    from prometheus_client import CONTENT_TYPE_LATEST

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):  # noqa: N802 - http.server's name
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                body, gz = expo.page()
                use_gz = "gzip" in self.headers.get("Accept-Encoding", "")
                data = gz if use_gz else body
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE_LATEST)
                if use_gz:
                    self.send_header("Content-Encoding", "gzip")
            elif path == "/":
                data = (b"<html><body><h1>bpfmem exporter</h1>"
                        b"<a href='/metrics'>/metrics</a></body></html>")
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
            else:
                data = b"not found\n"
                self.send_response(404)
                self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):  # quiet: scrapes are not news
            pass

    return Handler


def serve(host: str, port: int, cache: ScanCache, profile=None):
    """Start the HTTP server in a thread: ``(server, thread)``; ``server.shutdown()`` stops it."""
    import socket
    from http.server import ThreadingHTTPServer

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    server = Server((host, port), _handler(Exposition(cache, profile)))
    thread = threading.Thread(target=server.serve_forever, name="bpfmem-export", daemon=True)
    thread.start()
    return server, thread
