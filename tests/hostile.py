"""Hostile Go endpoints, made at test time: a loopback HTTP server (threads on 127.0.0.1)
whose answers drip, stall, loop on ``100 Continue`` or frame badly, and the bodies a
hostile process can serve (/metrics texts with NaN, Inf, negative or absurd figures,
megabytes of label sets; pprof bombs). Used by tests/test_endpoints_hostile.py and
bench/hostile.py; nothing here is product code.
"""

from __future__ import annotations

import gzip
import os
import socket
import sys
import threading
import time

KiB, MiB = 1 << 10, 1 << 20
OK = b"HTTP/1.1 200 OK\r\n"


class HostileServer:
    """A loopback TCP server answering each connection with ``behave(conn, stop)`` after
    reading the request; every connection thread ends when the server is closed."""

    def __init__(self, behave, host: str = "127.0.0.1"):
        self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.host = host
        self.port = self.sock.getsockname()[1]
        self.behave = behave
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        self.sock.settimeout(0.05)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    def _serve(self, conn):
        try:
            conn.settimeout(5)
            request = conn.recv(4096)
            if getattr(self.behave, "takes_request", False):
                self.behave(conn, self.stop, request)
            else:
                self.behave(conn, self.stop)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.stop.set()
        self.thread.join()
        self.sock.close()
        for t in self.threads:
            t.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def url(self) -> str:
        h = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{h}:{self.port}/metrics"


def _drip(conn, stop, head: bytes, tail: bytes, every: float = 0.02):
    """``head`` at once, then ``tail`` one byte at a time, for ever (until stopped)."""
    if head:
        conn.sendall(head)
    i = 0
    while not stop.wait(every):
        conn.sendall(tail[i % len(tail):i % len(tail) + 1])
        i += 1


def drip_status(conn, stop):
    _drip(conn, stop, b"", b"HTTP/1.1 200 OK" + b" " * 4096)


def drip_headers(conn, stop):
    _drip(conn, stop, OK, b"X-Slow: 1\r\n")


def drip_chunk_size(conn, stop):
    _drip(conn, stop, OK + b"Transfer-Encoding: chunked\r\n\r\n", b"1;" + b"x" * 64)


def drip_body(conn, stop):
    _drip(conn, stop, OK + b"Content-Length: 1000000\r\n\r\n", b"#")


def endless_continue(conn, stop):
    while not stop.is_set():
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n" * 64)


def slow_continue(conn, stop):
    while not stop.wait(0.3):           # under the interim limit within the deadline
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")


def endless_headers(conn, stop):
    conn.sendall(OK)
    while not stop.is_set():
        conn.sendall(b"X-Many: 1\r\n" * 1024)


def endless_status_line(conn, stop):
    conn.sendall(b"HTTP/1.1 200 ")
    while not stop.is_set():
        conn.sendall(b"O" * 65536)


def endless_chunks(conn, stop):
    conn.sendall(OK + b"Transfer-Encoding: chunked\r\n\r\n")
    while not stop.is_set():
        conn.sendall(b"1000\r\n" + b"#" * 4096 + b"\r\n")


def tiny_chunks(conn, stop):
    """Chunks of one byte as fast as the socket takes them: no wait, all framing work."""
    conn.sendall(OK + b"Transfer-Encoding: chunked\r\n\r\n")
    while not stop.is_set():
        conn.sendall(b"1\r\n#\r\n" * 4096)


def bad_chunk_size(conn, stop):
    conn.sendall(OK + b"Transfer-Encoding: chunked\r\n\r\n" + b"f" * 40 + b"\r\n")


def serve_body(body: bytes, chunked: bool = False):
    """A behaviour answering 200 with ``body`` (Content-Length framed, or chunked)."""
    def behave(conn, stop):
        if chunked:
            conn.sendall(OK + b"Transfer-Encoding: chunked\r\n\r\n")
            for i in range(0, len(body), 4096):
                part = body[i:i + 4096]
                conn.sendall(b"%x\r\n%s\r\n" % (len(part), part))
            conn.sendall(b"0\r\n\r\n")
        else:
            conn.sendall(OK + b"Content-Length: %d\r\n\r\n" % len(body) + body)
    return behave


def by_path(routes: dict):
    """A behaviour answering each request with ``routes[path]`` (404 for other paths)."""
    def behave(conn, stop, request):
        parts = request.split(b" ", 2)
        path = parts[1].decode("latin-1") if len(parts) > 1 else ""
        route = routes.get(path)
        if route is None:
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        else:
            route(conn, stop)
    behave.takes_request = True
    return behave


def continue_then(body: bytes, n: int):
    def behave(conn, stop):
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n" * n)
        serve_body(body)(conn, stop)
    return behave


#: (name, behaviour) of every head or framing attack, each bounded by the deadline or a
#: size limit
STALLS = [("dripped status line", drip_status), ("dripped headers", drip_headers),
          ("dripped chunk-size line", drip_chunk_size), ("dripped body", drip_body),
          ("slow 100 Continue", slow_continue), ("one-byte chunks", tiny_chunks)]
FLOODS = [("endless 100 Continue", endless_continue), ("endless headers", endless_headers),
          ("endless status line", endless_status_line), ("endless chunks", endless_chunks),
          ("bad chunk size", bad_chunk_size)]


# ---- /metrics bodies ----

MEMSTATS = ("heap_alloc", "heap_sys", "heap_idle", "heap_inuse", "heap_released",
            "stack_inuse", "stack_sys", "mspan_sys", "mcache_sys", "buck_hash_sys", "gc_sys",
            "other_sys", "sys", "next_gc")


def metrics_body(**override) -> bytes:
    """A client_golang-like /metrics text; ``override`` sets a memstats figure's text."""
    out = []
    for k in MEMSTATS:
        n = f"go_memstats_{k}_bytes"
        out.append(f"# HELP {n} x\n# TYPE {n} gauge\n{n} {override.get(k, 1 << 20)}\n")
    out.append("# TYPE go_goroutines gauge\ngo_goroutines 12\n"
               '# TYPE go_info gauge\ngo_info{version="go1.21.3"} 1\n')
    return "".join(out).encode()


def label_flood(size: int = 16 * MiB) -> bytes:
    """``size`` bytes of label sets of another family, then valid Go figures."""
    line = ('agent_requests_total{path="/x/%08d",method="GET",code="200",pod="p-%08d"} 1\n')
    n = size // len(line % (0, 0))
    return "".join(line % (i, i) for i in range(n)).encode() + metrics_body()


def go_label_flood(size: int = 16 * MiB) -> bytes:
    """``size`` bytes of label sets of a Go family the parser reads."""
    line = 'go_gc_duration_seconds{quantile="0.%08d"} 0.001\n'
    n = size // len(line % 0)
    return metrics_body() + "".join(line % i for i in range(n)).encode()


# ---- pprof bombs ----

def _uv(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _f(num: int, value) -> bytes:
    if isinstance(value, int):
        return _uv(num << 3) + _uv(value)
    return _uv(num << 3 | 2) + _uv(len(value)) + value


_TYPES = (_f(1, _f(1, 1) + _f(2, 2)) + _f(6, b"") + _f(6, b"inuse_space")
          + _f(6, b"bytes"))


def empty_samples(n: int = 33_000_000) -> bytes:
    """A gzipped profile of ``n`` empty samples (33 M: 66 MB, 64 KB gzipped)."""
    return gzip.compress(_TYPES + b"\x12\x00" * n, 9)


def deep_location(lines: int = 2_000_000, samples: int = 4_000_000) -> bytes:
    """One location of ``lines`` inlined lines, sampled ``samples`` times."""
    loc = _f(4, _f(1, 1) + _f(4, _f(1, 1)) * lines)
    sample = _f(2, _f(1, b"\x01") + _f(2, b"\x01"))
    return gzip.compress(_TYPES + _f(5, _f(1, 1) + _f(2, 1)) + loc + sample * samples, 9)


def wide_stacks(stacks: int = 200_000, lines: int = 1024) -> bytes:
    """A location of ``lines`` lines (the most allowed) under ``stacks`` distinct stacks:
    the top list's walk, not the bytes, is the bomb."""
    loc = _f(4, _f(1, 1) + _f(4, _f(1, 1)) * lines)
    out = [_TYPES, _f(5, _f(1, 1) + _f(2, 1)), loc]
    for i in range(stacks):
        out.append(_f(2, _f(1, b"\x01" + _uv(i + 2)) + _f(2, b"\x01")))
    return gzip.compress(b"".join(out), 6)


def idle_fields(n: int = 30_000_000) -> bytes:
    """``n`` top-level fields nobody reads (drop_frames = 0): work with nothing kept."""
    return gzip.compress(_TYPES + b"\x38\x00" * n, 9)


def no_sample_type() -> bytes:
    return _f(2, _f(1, b"\x01") + _f(2, b"\x05")) + _f(6, b"")


#: (name, builder) of every pprof bomb
PPROF_BOMBS = [("33M empty samples", empty_samples), ("location of 2M lines, 4M samples",
                                                     deep_location),
               ("200k stacks over a 1024-line location", wide_stacks),
               ("30M unread fields", idle_fields)]


# ---- hostile processes: each its own loopback listener, as a pod's processes are ----

def process_behaviours() -> dict:
    """What a hostile process of a pod serves (by name): a dripped /metrics, or a good one
    and a dripped heap profile (read only once /metrics parsed)."""
    return {"drip_metrics": drip_headers,
            "drip_pprof": by_path({"/metrics": serve_body(metrics_body()),
                                   "/debug/pprof/heap": drip_headers})}


def serve_processes(name: str, n: int, ready: str) -> None:
    """This process and ``n - 1`` children forked from it each serve ``name``'s behaviour on
    a loopback listener of their own; each appends "pid port" to ``ready``. The children die
    with this process (PR_SET_PDEATHSIG); it serves until SIGTERM or SIGKILL."""
    import ctypes
    import signal
    behave = process_behaviours()[name]
    for _ in range(n - 1):
        if os.fork() == 0:
            ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
            break
    srv = HostileServer(behave)
    fd = os.open(ready, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(fd, f"{os.getpid()} {srv.port}\n".encode())
    os.close(fd)
    while True:
        time.sleep(3600)


def wait_ready(path: str, n: int, timeout: float = 30.0) -> list[tuple[int, int]]:
    """The (pid, port) of the ``n`` processes of :func:`serve_processes` once all listen."""
    end = time.monotonic() + timeout
    while True:
        try:
            with open(path) as f:
                rows = [tuple(map(int, x.split())) for x in f.read().splitlines() if x]
        except FileNotFoundError:
            rows = []
        if len(rows) >= n:
            return rows
        if time.monotonic() > end:
            raise TimeoutError(f"{len(rows)} of {n} hostile processes listening")
        time.sleep(0.05)


if __name__ == "__main__":      # python hostile.py NAME N READY_FILE
    serve_processes(sys.argv[1], int(sys.argv[2]), sys.argv[3])
