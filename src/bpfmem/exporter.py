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
import itertools
import math
import os
import threading
import time
import zlib
from typing import Callable

from .analysis.live import cgroup_sums, check_map, primary_owner
from .errors import BpfmemError
from .report.prometheus import (EOF_LINE, MAP_FAMILIES, MAP_LABELS as _MAP_LABELS, Family,
                                MapFamilies, negotiate, render_families)

__all__ = ["ScanCache", "BpfmemCollector", "Exposition", "make_registry", "serve",
           "METRIC_NAMES"]

METRIC_NAMES = (
    "bpfmem_map_memlock_bytes", "bpfmem_map_charged_bytes", "bpfmem_map_max_entries",
    "bpfmem_map_entries", "bpfmem_map_pressure_ratio", "bpfmem_cgroup_map_memlock_bytes",
    "bpfmem_cgroup_maps", "bpfmem_cgroup_memory_usage_bytes",
    "bpfmem_cgroup_memory_limit_bytes", "bpfmem_cgroup_map_share_ratio", "bpfmem_node_maps",
    "bpfmem_node_map_memlock_bytes", "bpfmem_scan_duration_seconds", "bpfmem_scans_total",
    "bpfmem_scan_errors_total", "bpfmem_maps_skipped_total", "bpfmem_build_info")

MAP_LABELS = list(_MAP_LABELS)


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
                except (BpfmemError, OSError) as e:
                    self.errors += 1
                    self.last_error = str(e)
                self.scans += 1
                self.duration = time.monotonic() - t0
                self._at = now
            return self.snapshot


def node_families(cache: ScanCache, profile=None, *, maps: bool = True) -> list[Family]:
    """Every bpfmem family of the current scan, in page order (the per-map ones only with
    ``maps``: the page writes those with :class:`MapFamilies`)."""
    snap = cache.get()
    out: list[Family] = []
    if maps:
        rows = list(map_rows(snap, profile)) if snap is not None else []
        for column, (name, doc) in enumerate(MAP_FAMILIES, start=1):
            out.append(Family(name, doc, labels=_MAP_LABELS, samples=tuple(
                (row[0], row[column]) for row in rows if row[column] is not None)))
    cg_ml, cg_n, cg_use, cg_lim, cg_share = [], [], [], [], []
    node_n, node_ml = [], []
    if snap is not None:
        for s in cgroup_sums(snap.maps):
            cg_ml.append(((s.cgroup or "",), s.memlock))
            cg_n.append(((s.cgroup or "",), s.maps))
            mem = cache.cgroups.get(s.cgroup)
            if mem is not None:
                cg_use.append(((s.cgroup,), mem.usage))
                if mem.limit is not None:
                    cg_lim.append(((s.cgroup,), mem.limit))
                if mem.usage:
                    cg_share.append(((s.cgroup,), s.memlock / mem.usage))
        node_n.append(((), len(snap.maps)))
        node_ml.append(((), sum(m.memlock or 0 for m in snap.maps)))
    cg = ("cgroup",)
    out += [
        Family("bpfmem_cgroup_map_memlock_bytes", "memlock of the maps whose lowest-pid holder "
               "is in the cgroup", labels=cg, samples=tuple(cg_ml)),
        Family("bpfmem_cgroup_maps", "maps whose lowest-pid holder is in the cgroup",
               labels=cg, samples=tuple(cg_n)),
        Family("bpfmem_cgroup_memory_usage_bytes", "memory cgroup usage", labels=cg,
               samples=tuple(cg_use)),
        Family("bpfmem_cgroup_memory_limit_bytes", "memory cgroup limit (absent when "
               "unlimited)", labels=cg, samples=tuple(cg_lim)),
        Family("bpfmem_cgroup_map_share_ratio", "map memlock / cgroup usage", labels=cg,
               samples=tuple(cg_share)),
        Family("bpfmem_node_maps", "maps on the node", samples=tuple(node_n)),
        Family("bpfmem_node_map_memlock_bytes", "memlock of every map on the node",
               samples=tuple(node_ml)),
        Family("bpfmem_scan_duration_seconds", "seconds the last scan took",
               samples=(((), cache.duration),)),
        Family("bpfmem_scans", "scans made", "counter", samples=(((), cache.scans),)),
        Family("bpfmem_scan_errors", "scans that failed (the previous result was served)",
               "counter", samples=(((), cache.errors),)),
        _build_info(),
        Family("bpfmem_maps_skipped", "maps or processes that vanished during scans",
               "counter", samples=(((), cache.skipped),)),
    ]
    return out


def process_families(proc: str = "/proc/self") -> list[Family]:
    """The standard ``process_*`` families of the exporter itself (the names and meanings
    every Prometheus client library exports: memory, CPU, start time, fds)."""
    out: list[Family] = []
    ticks, page = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")
    try:
        with open(f"{proc}/stat", "rb") as f:
            parts = f.read().rsplit(b")", 1)[-1].split()
        with open("/proc/stat", "rb") as f:
            btime = next(float(line.split()[1]) for line in f if line.startswith(b"btime"))
        out += [
            Family("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                   samples=(((), float(parts[20])),)),
            Family("process_resident_memory_bytes", "Resident memory size in bytes.",
                   samples=(((), float(parts[21]) * page),)),
            Family("process_start_time_seconds", "Start time of the process since unix "
                   "epoch in seconds.", samples=(((), float(parts[19]) / ticks + btime),)),
            Family("process_cpu_seconds", "Total user and system CPU time spent in seconds.",
                   "counter", samples=(((), (float(parts[11]) + float(parts[12])) / ticks),)),
        ]
    except (OSError, IndexError, ValueError, StopIteration):
        pass
    try:
        with open(f"{proc}/limits", "rb") as f:
            max_fds = next(float(line.split()[3]) for line in f
                           if line.startswith(b"Max open file"))
        out += [
            Family("process_open_fds", "Number of open file descriptors.",
                   samples=(((), len(os.listdir(f"{proc}/fd"))),)),
            Family("process_max_fds", "Maximum number of open file descriptors.",
                   samples=(((), max_fds),)),
        ]
    except (OSError, IndexError, ValueError, StopIteration):
        pass
    return out


class BpfmemCollector:
    """bpfmem's families as a prometheus_client collector, for a program that serves its own
    registry (``make_registry``); ``bpfmem export`` writes its page without prometheus_client."""

    def __init__(self, cache: ScanCache, profile=None, *, maps: bool = True):
        self.cache = cache
        self.profile = profile
        self.maps = maps

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        for f in node_families(self.cache, self.profile, maps=self.maps):
            kind = CounterMetricFamily if f.type == "counter" else GaugeMetricFamily
            if f.labels:
                fam = kind(f.name, f.doc, labels=list(f.labels))
                for values, v in f.samples:
                    fam.add_metric(list(values), v)
            else:
                fam = kind(f.name, f.doc, value=f.samples[0][1]) if f.samples else \
                    kind(f.name, f.doc, labels=[])
            yield fam


def _build_info() -> Family:
    """``bpfmem_build_info{version,python,prometheus_client} 1``, as every exporter has
    (``prometheus_client``: the installed version, "" without it; bpfmem writes its page
    itself)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version
    from . import __version__
    try:
        client = version("prometheus_client")
    except PackageNotFoundError:
        client = ""
    return Family("bpfmem_build_info", "bpfmem's version, and the Python and "
                  "prometheus_client it runs on (always 1)",
                  labels=("version", "python", "prometheus_client"),
                  samples=(((__version__, platform.python_version(), client), 1),))


def map_rows(snap, profile=None, charged_of: dict | None = None):
    """Per map of ``snap``, one at a time: (label values, memlock, charged, max_entries,
    entries, pressure), a value None where the map has none. ``charged_of`` caches the
    model's charge by map shape and entries across scans (maps of one shape are common)."""
    for m in snap.maps:
        o = primary_owner(m)
        labels = (str(m.id), m.name, _type(m.type), o.comm if o else "",
                  (o.cgroup or "") if o else "")
        charged = None
        if profile is not None:
            key = (m.type, m.key_size, m.value_size, m.max_entries, m.map_flags, m.map_extra,
                   m.entries)
            if charged_of is not None and key in charged_of:
                charged = charged_of[key]
            else:
                charged = check_map(m, profile).charged
                if charged_of is not None:
                    charged_of[key] = charged
        yield (labels, m.memlock, charged, m.max_entries, m.entries, m.pressure)


@functools.lru_cache(maxsize=None)
def _type(t: int) -> str:
    from .uapi import map_type_name
    return map_type_name(t)


def make_registry(cache: ScanCache, profile=None, *, maps: bool = True):
    from prometheus_client import CollectorRegistry
    from prometheus_client.process_collector import ProcessCollector
    reg = CollectorRegistry(auto_describe=False)
    reg.register(BpfmemCollector(cache, profile, maps=maps))
    ProcessCollector(registry=reg)
    return reg


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
        self._families = MapFamilies()
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
                rows = map_rows(snap, self.profile, self._charged) if snap else ()
                chunks = itertools.chain(
                    self._families.render(rows, openmetrics=om),
                    (bytes(render_families(node_families(self.cache, self.profile,
                                                         maps=False) + process_families(),
                                           openmetrics=om)),),
                    (EOF_LINE,) if om else ())
                entry = _deflate(chunks)
                if len(self._pages) >= self.MAX_FORMATS:
                    self._pages.clear()
                self._pages[content_type] = entry
                _trim()
            return entry, content_type


def _deflate(chunks) -> dict:
    """{"gzip": the chunks gzipped as one member, "body": None (the plain page, made when a
    client without gzip asks)}, compressed as they come (the whole text never exists)."""
    z = zlib.compressobj(1, zlib.DEFLATED, 31)   # 31: a gzip header and trailer
    parts = []
    for chunk in chunks:
        parts.append(z.compress(chunk))
    parts.append(z.flush())
    return {"gzip": b"".join(parts), "body": None}


def _trim() -> None:
    """Hand memory freed by the last scan and render back to the OS (glibc keeps freed heap
    otherwise, and the exporter's RSS would creep up to its worst moment)."""
    import ctypes
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


# glibc mallopt parameters
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8


def tune_malloc() -> None:
    """Keep a long-lived exporter's heap close to what it holds (glibc only; measured on
    10,000 maps: 65 -> 58 MiB before the other changes). Buffers of 256 KiB and more (a
    page, a scan's lists) are mmapped and so returned whole when freed; setting the threshold
    also stops glibc from raising it after each large free, which would put the next page on
    the heap. One arena for every thread (the GIL serialises them anyway) instead of eight
    per CPU, each keeping what its thread freed; the heap's top is trimmed beyond 1 MiB."""
    import ctypes
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, 256 << 10)
        libc.mallopt(_M_ARENA_MAX, 1)
        libc.mallopt(_M_TRIM_THRESHOLD, 1 << 20)
    except (OSError, AttributeError):  # not glibc
        pass


def _log(msg: str) -> None:
    import sys
    try:
        print(f"bpfmem export: {msg}", file=sys.stderr, flush=True)
    except (OSError, ValueError):   # stderr gone: nothing to tell
        pass


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            505: "HTTP Version Not Supported"}
_INDEX = (b"<html><body><h1>bpfmem exporter</h1>"
          b"<a href='/metrics'>/metrics</a> <a href='/healthz'>/healthz</a></body></html>")


def parse_request_head(head: bytes) -> tuple[str, str, dict[str, str]] | None:
    """(method, path without the query, headers by lower-case name) of an HTTP/1.x request
    head, or None when it is not one. (http.server would do this, for 7 MiB of imports:
    email, http.client and ssl.)"""
    text = head.decode("latin-1")
    lines = text.replace("\r\n", "\n").split("\n")
    parts = lines[0].split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            break
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            return None
        headers[name.strip().lower()] = value.strip()
    return parts[0], parts[1].split("?", 1)[0], headers


def _handler(expo: Exposition):
    """The answer to one request: one request per connection, ``Connection: close`` (a
    connection's whole life is bounded by the server's deadline, and an idle keep-alive
    connection never pins a worker)."""

    def handle(request, _peer, server) -> None:
        conn, head = request
        parsed = parse_request_head(head)
        encoding = None
        ctype = "text/plain; charset=utf-8"
        method = parsed[0] if parsed else ""
        if parsed is None:
            status, data = 400, b"bad request\n"
        elif method not in ("GET", "HEAD"):
            status, data = 405, b"GET or HEAD\n"
        elif parsed[1] == "/metrics":
            headers = parsed[2]
            data, encoding, ctype = expo.answer(
                headers.get("accept", ""), "gzip" in headers.get("accept-encoding", ""))
            status = 200
        elif parsed[1] == "/healthz":
            # cheap: never scans; the process serves, and says how old its data is
            status = 200
            data = f"ok: {expo.cache.scans} scans, {expo.cache.errors} failed\n".encode()
        elif parsed[1] == "/":
            status, data, ctype = 200, _INDEX, "text/html"
        else:
            status, data = 404, b"not found\n"
        server.answering(conn, len(data))
        lines = [f"HTTP/1.1 {status} {_REASONS[status]}", f"Content-Type: {ctype}",
                 f"Content-Length: {len(data)}", "Connection: close",
                 f"Date: {time.strftime('%a, %d %b %Y %H:%M:%S GMT', time.gmtime())}"]
        if encoding:
            lines.append(f"Content-Encoding: {encoding}")
        if status == 405:
            lines.append("Allow: GET, HEAD")
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if method == "HEAD":
            return
        conn.sendall(data)   # sendall: a page is larger than the socket's buffer

    return handle


class BoundedHTTPServer:
    """An HTTP server that hostile or broken clients cannot exhaust.

    * a listen backlog of ``backlog`` (128): bursts of scrapers wait in the kernel's queue;
    * accepted connections send their request head into one selector loop, not into a
      thread: idle and slow (slowloris) connections cost a file descriptor and a few bytes,
      and are closed when the head is not complete after ``idle`` seconds;
    * a fixed pool of ``workers`` threads answers complete requests; once its answer is ready
      a connection has ``deadline`` seconds to take it (a slow reader is cut);
    * at most ``max_connections`` open at once (default: what RLIMIT_NOFILE leaves, at most
      4096): beyond that a new connection is closed at once;
    * one log line per failed connection, never a traceback.
    """

    def __init__(self, address: tuple[str, int], handler, *, workers: int = 16,
                 backlog: int = 128, idle: float = 5.0, deadline: float = 15.0,
                 max_connections: int | None = None):
        import selectors
        import socket
        from concurrent.futures import ThreadPoolExecutor
        host = address[0]
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.socket.bind(address)
            self.socket.listen(backlog)
        except OSError:
            self.socket.close()
            raise
        self.server_address = self.socket.getsockname()
        self.handler = handler
        self.idle, self.deadline = idle, deadline
        self.max_connections = max_connections or _fd_room()
        self.dropped = 0
        self.failed = 0
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bpfmem-http")
        self._sel = selectors.DefaultSelector()
        self._sel.register(self.socket, selectors.EVENT_READ, None)
        self._waiting: dict = {}     # socket -> (idle deadline, peer)
        self._busy: dict = {}        # socket -> whole-life deadline
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stopped = threading.Event()

    # -- the one loop: accept, wait for bytes, hand to the pool, enforce deadlines --
    def serve_forever(self) -> None:
        try:
            self._loop()
        finally:
            self._stopped.set()

    def _loop(self) -> None:
        import time as _time
        while not self._stop.is_set():
            for key, _ in self._sel.select(0.25):
                if key.fileobj is self.socket:
                    self._accept()
                else:
                    self._read_head(key.fileobj)
            now = _time.monotonic()
            for conn, (due, _, _) in list(self._waiting.items()):
                if now > due:
                    self._forget(conn)
            with self._lock:
                overdue = [c for c, due in self._busy.items() if now > due]
            for conn in overdue:
                self._cut(conn)

    def _accept(self) -> None:
        import selectors
        import time as _time
        try:
            conn, peer = self.socket.accept()
        except OSError:
            return
        with self._lock:
            open_now = len(self._waiting) + len(self._busy)
        if open_now >= self.max_connections:
            self.dropped += 1
            conn.close()
            return
        conn.setblocking(False)
        self._waiting[conn] = (_time.monotonic() + self.idle, peer, bytearray())
        self._sel.register(conn, selectors.EVENT_READ, None)

    MAX_HEAD = 16 << 10

    def _read_head(self, conn) -> None:
        """Collect a request's head without a thread; a complete one goes to the pool."""
        due, peer, head = self._waiting[conn]
        try:
            chunk = conn.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk or len(head) + len(chunk) > self.MAX_HEAD:
            self._forget(conn)
            return
        head += chunk
        if b"\r\n\r\n" not in head and b"\n\n" not in head:
            return
        self._sel.unregister(conn)
        del self._waiting[conn]
        with self._lock:
            self._busy[conn] = math.inf    # the deadline starts when the answer is ready
        self._pool.submit(self._serve, conn, peer, bytes(head))

    def answering(self, conn, size: int) -> None:
        """The handler has its answer of ``size`` bytes: from now the connection has
        ``deadline`` seconds, plus one per 256 KiB (a scrape waiting for a long scan is not
        cut; a reader slower than that is)."""
        import time as _time
        allowed = self.deadline + size / (256 << 10)
        # the socket's own timeout too: sendall's timeout bounds the whole answer (Python
        # 3.5+), and the idle timeout (5 s) would cut a big page to a busy reader
        conn.settimeout(allowed)
        with self._lock:
            if conn in self._busy:
                self._busy[conn] = _time.monotonic() + allowed

    def _forget(self, conn) -> None:
        self._sel.unregister(conn)
        del self._waiting[conn]
        conn.close()

    @staticmethod
    def _cut(conn) -> None:
        import socket
        try:
            conn.shutdown(socket.SHUT_RDWR)   # the worker's next read or write fails
        except OSError:
            pass

    def _serve(self, conn, peer, head: bytes) -> None:
        try:
            conn.setblocking(True)
            conn.settimeout(self.idle)
            self.handler((conn, head), peer, self)
        except Exception as e:  # noqa: BLE001 - one line per failed connection
            self.failed += 1
            what = e.strerror if isinstance(e, OSError) and e.strerror else (str(e) or "")
            _log(f"{peer[0]}:{peer[1]}: {e.__class__.__name__}{': ' + what if what else ''}")
        finally:
            with self._lock:
                self._busy.pop(conn, None)
            try:
                conn.close()
            except OSError:
                pass

    def shutdown(self) -> None:
        """Stop the loop and wait for it (as socketserver's shutdown does)."""
        self._stop.set()
        self._stopped.wait(5)

    def server_close(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        for conn in list(self._waiting):
            conn.close()
        with self._lock:
            for conn in list(self._busy):
                self._cut(conn)
        try:
            self._sel.close()
        except (OSError, ValueError):
            pass
        self.socket.close()


def _fd_room() -> int:
    """Connections the exporter may hold open: what RLIMIT_NOFILE leaves (keeping 64 for the
    scan's own fds), at most 4096."""
    import resource
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(16, min(4096, soft - 64))


def serve(host: str, port: int, cache: ScanCache, profile=None, **limits):
    """Start the HTTP server in a thread: ``(server, thread)``; ``server.shutdown()`` stops it.
    ``limits`` are :class:`BoundedHTTPServer`'s (workers, backlog, idle, deadline, ...).
    Tunes this process's allocator for a long life first (:func:`tune_malloc`)."""
    tune_malloc()
    server = BoundedHTTPServer((host, port), _handler(Exposition(cache, profile)), **limits)
    thread = threading.Thread(target=server.serve_forever, name="bpfmem-export", daemon=True)
    thread.start()
    return server, thread
