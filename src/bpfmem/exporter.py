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

HTTP: GET and HEAD on /metrics (Prometheus text, or OpenMetrics when the Accept header asks:
prometheus_client's own negotiation), /healthz (cheap: never scans; for probes), /.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from typing import Callable

from .analysis.live import cgroup_sums, check_map, primary_owner
from .errors import BpfmemError
from .report.prometheus import MAP_FAMILIES, MAP_LABELS as _MAP_LABELS, MapFamilies

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


class BpfmemCollector:
    """A prometheus_client collector over a :class:`ScanCache`."""

    def __init__(self, cache: ScanCache, profile=None, *, maps: bool = True):
        self.cache = cache
        self.profile = profile
        self.maps = maps      # False: the per-map families are written by MapFamilies

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        snap = self.cache.get()
        g = GaugeMetricFamily
        memlock, charged, max_e, ent, press = (g(name, doc, labels=MAP_LABELS)
                                               for name, doc in MAP_FAMILIES)
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
        if snap is not None and self.maps:
            for labels, values in map_rows(snap, self.profile):
                for family, v in zip((memlock, charged, max_e, ent, press), values):
                    if v is not None:
                        family.add_metric(list(labels), v)
        if snap is not None:
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
        if self.maps:
            yield from (memlock, charged, max_e, ent, press)
        yield from (cg_ml, cg_n, cg_use, cg_lim, cg_share, node_n, node_ml)
        yield g("bpfmem_scan_duration_seconds", "seconds the last scan took",
                value=self.cache.duration)
        yield CounterMetricFamily("bpfmem_scans", "scans made", value=self.cache.scans)
        yield CounterMetricFamily("bpfmem_scan_errors", "scans that failed (the previous "
                                  "result was served)", value=self.cache.errors)
        yield _build_info()
        yield CounterMetricFamily("bpfmem_maps_skipped", "maps or processes that vanished "
                                  "during scans", value=self.cache.skipped)


def _build_info():
    """``bpfmem_build_info{version,python,prometheus_client} 1``, as every exporter has."""
    import platform
    from importlib.metadata import PackageNotFoundError, version
    from prometheus_client.core import GaugeMetricFamily
    from . import __version__
    try:
        client = version("prometheus_client")
    except PackageNotFoundError:
        client = ""
    info = GaugeMetricFamily("bpfmem_build_info", "bpfmem's version, and the Python and "
                             "prometheus_client it runs on (always 1)",
                             labels=["version", "python", "prometheus_client"])
    info.add_metric([__version__, platform.python_version(), client], 1)
    return info


def map_rows(snap, profile=None, charged_of: dict | None = None):
    """(label values, (memlock, charged, max_entries, entries, pressure)) per map of ``snap``;
    a value is None where the map has none. ``charged_of`` caches the model's charge by map
    shape and entries across scans (maps of one shape are common, and most do not change)."""
    rows = []
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
        rows.append((labels, (m.memlock, charged, m.max_entries, m.entries, m.pressure)))
    return rows


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
    not 50. The format is prometheus_client's own negotiation over the Accept header
    (``choose_encoder``): the Prometheus text format, or OpenMetrics when asked for. The
    per-map families are written by :class:`~bpfmem.report.prometheus.MapFamilies` (the same
    bytes prometheus_client would write, from labels kept between scans); the rest by
    prometheus_client."""

    MAX_FORMATS = 4   # Accept headers are the client's: a few rendered formats per scan, no more

    def __init__(self, cache: ScanCache, profile=None):
        self.cache = cache
        self.profile = profile
        self.registry = make_registry(cache, profile, maps=False)
        self._families = MapFamilies()
        self._charged: dict = {}
        self._lock = threading.Lock()
        self._scan_no = -1
        self._rows: list = []
        self._pages: dict[str, tuple[bytes, bytes]] = {}

    def page(self, accept: str = "") -> tuple[bytes, bytes, str]:
        """(body, gzipped body, content type) of the current exposition for ``accept``."""
        import gzip
        from prometheus_client.exposition import choose_encoder
        encoder, content_type = choose_encoder(accept)
        with self._lock:
            snap = self.cache.get()
            if self.cache.scans != self._scan_no:
                self._pages = {}
                self._scan_no = self.cache.scans
                if len(self._charged) > 4 * len(snap.maps if snap else ()) + 1024:
                    self._charged.clear()
                self._rows = map_rows(snap, self.profile, self._charged) if snap else []
            cached = self._pages.get(content_type)
            if cached is None:
                om = content_type.startswith("application/openmetrics-text")
                body = (self._families.text(self._rows, openmetrics=om).encode()
                        + encoder(self.registry))
                cached = (body, gzip.compress(body, compresslevel=1))
                if len(self._pages) >= self.MAX_FORMATS:
                    self._pages.clear()
                self._pages[content_type] = cached
                _trim()
            return cached[0], cached[1], content_type


def _trim() -> None:
    """Hand memory freed by the last scan and render back to the OS (glibc keeps freed heap
    otherwise, and the exporter's RSS would creep up to its worst moment)."""
    import ctypes
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def _log(msg: str) -> None:
    import sys
    try:
        print(f"bpfmem export: {msg}", file=sys.stderr, flush=True)
    except (OSError, ValueError):   # stderr gone: nothing to tell
        pass


class _SendAll:
    """The handler's wfile: every write is a sendall (an unbuffered socket file's write is one
    send(), which writes only what the socket buffer takes: a 7 MB page was cut at 3.75 MiB)."""

    closed = False

    def __init__(self, sock):
        self._sock = sock

    def write(self, b) -> int:
        self._sock.sendall(b)
        return len(b)

    def flush(self) -> None:
        pass

    def close(self) -> None:   # the server closes the socket itself
        self.closed = True


def _handler(expo: Exposition):
    from http.server import BaseHTTPRequestHandler

    class Handler(BaseHTTPRequestHandler):
        # one request per connection: a connection's whole life is bounded by the server's
        # deadline, and an idle keep-alive connection never pins a worker
        protocol_version = "HTTP/1.1"

        def setup(self):
            # the request is (socket, its head as the server's loop read it)
            import io
            self.connection, head = self.request
            self.rfile = io.BytesIO(head)
            self.wfile = _SendAll(self.connection)

        def do_GET(self):  # noqa: N802 - http.server's name
            self._respond(head=False)

        def do_HEAD(self):  # noqa: N802
            self._respond(head=True)

        def _respond(self, head: bool) -> None:
            self.close_connection = True
            path = self.path.split("?", 1)[0]
            encoding = None
            if path == "/metrics":
                body, gz, ctype = expo.page(self.headers.get("Accept", ""))
                if "gzip" in self.headers.get("Accept-Encoding", ""):
                    data, encoding = gz, "gzip"
                else:
                    data = body
                status = 200
            elif path == "/healthz":
                # cheap: never scans; the process serves, and says how old its data is
                at = expo.cache.scans
                data = f"ok: {at} scans, {expo.cache.errors} failed\n".encode()
                status, ctype = 200, "text/plain; charset=utf-8"
            elif path == "/":
                data = (b"<html><body><h1>bpfmem exporter</h1>"
                        b"<a href='/metrics'>/metrics</a> <a href='/healthz'>/healthz</a>"
                        b"</body></html>")
                status, ctype = 200, "text/html"
            else:
                data = b"not found\n"
                status, ctype = 404, "text/plain"
            self.server.answering(self.connection, len(data))
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            if encoding:
                self.send_header("Content-Encoding", encoding)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            if not head:
                self.wfile.write(data)

        def log_message(self, *args):  # quiet: scrapes are not news
            pass

    return Handler


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
        import time as _time
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
    ``limits`` are :class:`BoundedHTTPServer`'s (workers, backlog, idle, deadline, ...)."""
    server = BoundedHTTPServer((host, port), _handler(Exposition(cache, profile)), **limits)
    thread = threading.Thread(target=server.serve_forever, name="bpfmem-export", daemon=True)
    thread.start()
    return server, thread
