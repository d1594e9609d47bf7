"""``bpfmem export``: the node's maps as Prometheus metrics, composed of parts a layer down:
rows of a scan (:mod:`bpfmem.analysis.metrics`), the page's encoding
(:mod:`bpfmem.report.prometheus`), the process's own figures (:mod:`bpfmem.host.procfs`) and
the HTTP server (:mod:`bpfmem.host.httpd`). What is here is the orchestration: one scan serves
every scrape within ``interval`` seconds, and one page every scraper of a scan.

Concurrent scrapes wait for the scan in progress instead of starting their own, and the page
is rendered once per scan. A failed scan is counted and the previous result served, so a
scrape never fails because of one bad moment.

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
  bpfmem_maps_skipped_total, bpfmem_build_info{version,python,prometheus_client}
  process_* (resident and virtual memory, CPU seconds, start time, open and max fds)

HTTP: GET and HEAD on /metrics (Prometheus text, or OpenMetrics when the Accept header asks
for it), /healthz (cheap: never scans; for probes), /.

The page is written by :mod:`bpfmem.report.prometheus`, not by prometheus_client (the bytes
its encoders would write, tested; without its 10 MiB of imports). Scans are incremental
(:class:`bpfmem.host.rescan.ScanMemo`): what cannot have changed is not read again.
"""

from __future__ import annotations

import functools
import threading
import time
import zlib
from typing import Callable

from ..analysis.metrics import (cgroup_rows, map_rows, maps_rows, prog_node, prog_rows,
                                progs_rows)
from ..errors import BpfmemError
from ..host import procfs
from .node import sums_of
from ..host.httpd import Answer, accepts_coding, serve_http, trim_malloc
from ..report.prometheus import (EOF_LINE, METRIC_NAMES, PROG_FAMILIES, ZEROS_CRC, Family,
                                 MapPage, Piece, ScanStats,
                                 map_families, negotiate, node_families, process_families,
                                 prog_families,
                                 render_families)

__all__ = ["ScanCache", "Exposition", "families", "serve", "metrics_cache", "serve_metrics",
           "METRIC_NAMES"]


class ScanCache:
    """Calls ``scan()`` at most once per ``interval`` seconds, whoever asks. ``scan`` returns
    a snapshot, or (snapshot, the memory of its cgroups by path: usage and limit)."""

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
                except Exception as e:  # noqa: BLE001 - every failed scan counted
                    self.errors += 1
                    self.last_error = (str(e) if isinstance(e, (BpfmemError, OSError))
                                       else f"{type(e).__name__}: {e}")[:500]
                self.scans += 1
                self.duration = time.monotonic() - t0
                self._at = now
            return self.snapshot

    def stats(self) -> ScanStats:
        return ScanStats(duration=self.duration, scans=self.scans, errors=self.errors,
                         skipped=self.skipped)


def families(cache: ScanCache, profile=None, *, maps: bool = True,
             programs: bool = True, snap=None) -> list[Family]:
    """Every bpfmem family of the current scan (``snap``, when the caller has it: a scan
    slower than the interval must not be followed by another for the same page), in page
    order (the per-map ones only with ``maps``: the page writes those with
    :class:`MapPage`; the program ones only with ``programs``: :func:`program_families`)."""
    if snap is None:
        snap = cache.get()
    out: list[Family] = []
    if maps:
        out += map_families(map_rows(snap, profile) if snap is not None else ())
    sums = sums_of(snap.maps) if snap is not None else []
    cgroups = cgroup_rows(snap, cache.cgroups, sums) if snap is not None else []
    node = (len(snap.maps), sum(s.memlock for s in sums)) if snap is not None else None
    out += node_families(cgroups, node, cache.stats(), _build_info())
    if programs:
        out += program_families(snap)
    return out


def program_families(snap) -> list[Family]:
    """The program families of a scan that listed programs ([] otherwise)."""
    progs = prog_node(snap) if snap is not None else None
    return prog_families(prog_rows(snap), progs) if progs is not None else []


@functools.lru_cache(maxsize=1)
def _build_info() -> tuple[str, str, str]:
    """(bpfmem's version, Python's, prometheus_client's: "" when not installed; bpfmem
    writes its page itself)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version
    from .. import __version__
    try:
        client = version("prometheus_client")
    except PackageNotFoundError:
        client = ""
    return __version__, platform.python_version(), client


class Exposition:
    """The /metrics page, rendered once per scan and per exposition format and served as the
    same bytes to every scraper until the next scan: 50 concurrent scrapers cost one render,
    not 50. The Accept header picks the Prometheus text format or OpenMetrics
    (:func:`~bpfmem.report.prometheus.negotiate`); the page is written by
    :mod:`bpfmem.report.prometheus` (the bytes prometheus_client would write)."""

    MAX_FORMATS = 4   # Accept headers are the client's: a few rendered formats per scan, no more

    def __init__(self, cache: ScanCache, profile=None):
        self.cache = cache
        self.profile = profile
        from ..host.zcrc import zlib_crc
        self._crc = zlib_crc() or ZEROS_CRC          # CRCs put together by zlib, in O(1)
        self._map_page = MapPage(crc=self._crc)
        self._prog_page = MapPage(crc=self._crc, families=PROG_FAMILIES)
        self._prog_text: dict[bool, tuple] = {}
        self._charged: dict = {}
        self._lock = threading.Lock()
        self._scan_no = -1
        self._pages: dict[str, dict] = {}

    def page(self, accept: str = "") -> tuple[bytes, bytes, str]:
        """(body, gzipped body, content type) of the current exposition for ``accept``."""
        entry, content_type = self._entry(accept)
        return self._plain(entry), entry["gzip"], content_type

    def answer(self, accept: str = "", gzip_ok: bool = False):
        """(data, content encoding or None, content type) for one scrape. The page is
        kept gzipped (Prometheus asks for gzip; 10,000 maps: 7 MB of text, 0.6 MB so); for
        the first client of a scan without gzip it is inflated once and kept beside, shared
        by every such client (50 concurrent ones must not inflate 50 copies)."""
        entry, content_type = self._entry(accept)
        if gzip_ok:
            return entry["gzip"], "gzip", content_type
        return self._plain(entry), None, content_type

    def _plain(self, entry: dict) -> bytes:
        with self._lock:
            if entry["body"] is None:
                entry["body"] = zlib.decompress(entry["gzip"], 31)
            return entry["body"]

    def _entry(self, accept: str) -> tuple[dict, str]:
        om, content_type = negotiate(accept)
        with self._lock:
            snap = self.cache.get()
            if self.cache.scans != self._scan_no:
                self._pages = {}
                self._scan_no = self.cache.scans
                if len(self._charged) > 4 * len(snap.maps if snap else ()) + 1024:
                    self._charged.clear()
            entry = self._pages.get(content_type)
            if entry is None:
                head = render_families(families(self.cache, self.profile, maps=False,
                                                programs=False, snap=snap), openmetrics=om)
                tail = b"".join((
                    render_families(process_families(procfs.read_process_stats()),
                                    openmetrics=om),
                    EOF_LINE if om else b""))
                profile, charged = self.profile, self._charged
                entry = {"gzip": self._map_page.gzip(
                    snap.maps if snap else (), lambda ms: maps_rows(ms, profile, charged),
                    tail, openmetrics=om,
                    kept=(Piece(bytes(head), self._crc), *self._programs(snap, om))),
                         "body": None}
                if len(self._pages) >= self.MAX_FORMATS:
                    self._pages.clear()
                self._pages[content_type] = entry
                trim_malloc()
            return entry, content_type

    def _programs(self, snap, om: bool) -> tuple:
        """The program families, compressed (Pieces), kept while the scan's program records
        are the last one's (an incremental scan returns the same tuple when no program
        moved): the per-program families in blocks (a :class:`MapPage` of programs: a
        program that changes costs its block), the sums per cgroup and for the node after
        them."""
        progs = snap.progs if snap is not None else None
        if progs is None:
            return ()
        btfs, jit = snap.btfs, snap.jit
        hit = self._prog_text.get(om)
        if hit is None or hit[0] is not progs or hit[1] != btfs or hit[2] != jit:
            ordered = progs if all(a.id < b.id for a, b in zip(progs, progs[1:])) else \
                tuple(sorted(progs, key=lambda p: p.id))
            pieces, _crc, _size = self._prog_page.section(ordered, progs_rows, openmetrics=om)
            sums = bytes(render_families(prog_families((), prog_node(snap),
                                                       per_program=False), openmetrics=om))
            hit = (progs, btfs, jit, (*pieces, Piece(sums, self._crc)))
            if len(self._prog_text) >= 2:
                self._prog_text.clear()
            self._prog_text[om] = hit
        return hit[3]

    def route(self, path: str, headers: dict[str, str]) -> Answer | None:
        """The answer to a GET or HEAD of ``path`` (None: not found)."""
        if path == "/metrics":
            data, encoding, ctype = self.answer(
                headers.get("accept", ""), accepts_coding(headers.get("accept-encoding", "")))
            return Answer(200, data, ctype, encoding)
        if path == "/healthz":
            # cheap: never scans; the process serves, and says how old its data is
            return Answer(200, f"ok: {self.cache.scans} scans, "
                               f"{self.cache.errors} failed\n".encode())
        if path == "/":
            return Answer(200, _INDEX, "text/html")
        return None


_INDEX = (b"<html><body><h1>bpfmem exporter</h1>"
          b"<a href='/metrics'>/metrics</a> <a href='/healthz'>/healthz</a></body></html>")


def serve(host: str, port: int, cache: ScanCache, profile=None, **limits):
    """Serve Prometheus /metrics of ``cache``'s scans on host:port in a thread:
    ``(server, thread)``; ``server.shutdown()`` stops it. ``limits`` are
    :class:`~bpfmem.host.httpd.BoundedHTTPServer`'s (workers, backlog, idle, deadline, ...)."""
    return serve_http(host, port, Exposition(cache, profile).route, **limits)


def metrics_cache(scan, interval: float) -> ScanCache:
    """The exporter's scan cache: ``scan()`` at most once per ``interval`` seconds."""
    return ScanCache(scan, interval)


def serve_metrics(host: str, port: int, cache, profile=None):
    """Serve Prometheus /metrics of ``cache``'s scans on host:port: ``(server, thread)``."""
    return serve(host, port, cache, profile)
