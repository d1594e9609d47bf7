"""A small HTTP/1.x server that hostile or broken clients cannot exhaust (the exporter's),
and the allocator tuning a long-lived server wants. It knows nothing of metrics: a *route*
answers each request.

A route is ``route(path, headers) -> Answer | None`` (None: 404); the server answers
anything but GET and HEAD with 405, a head that is not HTTP/1.x with 400, and every answer
with ``Connection: close``.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Callable

__all__ = ["Answer", "AnsweredAlready", "parse_request_head", "accepts_coding",
           "BoundedHTTPServer", "serve_http", "tune_malloc", "trim_malloc"]


@dataclass(frozen=True)
class Answer:
    """What a route answers: a status, the body, its content type and encoding."""
    status: int
    data: bytes
    content_type: str = "text/plain; charset=utf-8"
    encoding: str | None = None


def trim_malloc() -> None:
    """Hand memory freed by the last scan and render back to the OS (glibc keeps freed heap
    otherwise, and the exporter's RSS would creep up to its worst moment)."""
    trim = _TRIM
    if not trim:
        import ctypes
        try:
            trim.append(ctypes.CDLL(None).malloc_trim)   # looked up once (a dlopen a call)
        except (OSError, AttributeError):  # not glibc
            trim.append(None)
    if trim[0] is not None:
        trim[0](0)


_TRIM: list = []


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


class _Log:
    """The server's log lines, written to stderr by a thread of their own: a worker never
    waits for stderr (a log pipe nobody read for a while, 64 KiB of reset connections,
    held every worker in print() and the exporter answered nothing). At most ``room``
    lines wait; past that they are counted, and the count is written when the writer
    catches up."""

    def __init__(self, room: int = 256):
        import queue
        self._q: queue.Queue = queue.Queue(room)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.unlogged = 0

    def __call__(self, msg: str) -> None:
        import queue
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._write, name="bpfmem-log",
                                                daemon=True)
                self._thread.start()
            try:
                self._q.put_nowait(msg)
            except queue.Full:
                self.unlogged += 1

    def _write(self) -> None:
        import sys
        while True:
            msg = self._q.get()
            with self._lock:
                unlogged, self.unlogged = self.unlogged, 0
            lines = ([f"{unlogged} more line(s) not logged: stderr was not read fast "
                      "enough"] if unlogged else []) + [msg]
            try:
                for line in lines:
                    print(f"bpfmem export: {line}", file=sys.stderr, flush=True)
            except (OSError, ValueError):   # stderr gone: nothing to tell
                pass

    def flush(self, timeout: float = 1.0) -> None:
        """Wait (a while at most) for the lines waiting to be written."""
        end = time.monotonic() + timeout
        while not self._q.empty() and time.monotonic() < end:
            time.sleep(0.01)


_log = _Log()

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            408: "Request Timeout", 431: "Request Header Fields Too Large",
            503: "Service Unavailable", 505: "HTTP Version Not Supported"}


def _head_of(status: int, ctype: str, length: int, extra: tuple[str, ...] = ()) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS[status]}", f"Content-Type: {ctype}",
             f"Content-Length: {length}", "Connection: close",
             f"Date: {time.strftime('%a, %d %b %Y %H:%M:%S GMT', time.gmtime())}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _answer_now(conn, status: int, why: str) -> None:
    """A short answer on a connection the server is giving up on, without waiting (best
    effort: it fits the socket's buffer), then close it: the client reads why, never a
    connection closed without a response. What it sent is read first (closing a socket
    with unread bytes sends a reset, which may discard the answer at the client)."""
    import socket
    body = f"{why}\n".encode("utf-8", "replace")
    try:
        conn.setblocking(False)
        for _ in range(16):
            if not conn.recv(4096):
                break
    except OSError:
        pass
    try:
        conn.send(_head_of(status, "text/plain; charset=utf-8", len(body),
                           ("Retry-After: 1",) if status == 503 else ()) + body)
        conn.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    try:
        conn.close()
    except OSError:
        pass


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


def accepts_coding(header: str, coding: str = "gzip") -> bool:
    """Whether an Accept-Encoding header value takes ``coding`` (RFC 9110 12.5.3): named with
    a q-value above 0 (``gzip``, ``gzip;q=0.5``; ``x-gzip`` is gzip), or not named and ``*``
    is, above 0. ``gzip;q=0`` refuses it; so does a header that does not mention it."""
    named = star = None
    for item in header[:4096].split(",")[:64]:
        name, _, params = item.partition(";")
        name = name.strip().lower()
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value.strip()[:8])
                except ValueError:
                    q = 0.0
                if not 0 <= q <= 1:         # also NaN
                    q = 0.0
        if name in (coding, "x-" + coding):
            named = q if named is None else max(named, q)
        elif name == "*":
            star = q
    if named is not None:
        return named > 0
    return bool(star)


def _handler(route: Callable[[str, dict[str, str]], Answer | None]):
    """The answer to one request: one request per connection, ``Connection: close`` (a
    connection's whole life is bounded by the server's deadline, and an idle keep-alive
    connection never pins a worker)."""

    def handle(request, peer, server) -> None:
        conn, head = request
        parsed = parse_request_head(head)
        encoding = None
        ctype = "text/plain; charset=utf-8"
        method = parsed[0] if parsed else ""
        if parsed is None:
            status, data = 400, b"bad request\n"
        elif method not in ("GET", "HEAD"):
            status, data = 405, b"GET or HEAD\n"
        else:
            try:
                answer = route(parsed[1], parsed[2]) or Answer(404, b"not found\n")
                if answer.status not in _REASONS:
                    raise ValueError(f"the route answered status {answer.status}")
            except Exception as e:  # noqa: BLE001 - an answer that says why, not a close
                why = f"{type(e).__name__}: {e}"[:300].replace("\n", " ")
                server.failed += 1
                _log(f"{peer[0]}:{peer[1]}: {parsed[1][:80]} failed: {why}")
                answer = Answer(503, f"the answer failed: {why}\n".encode("utf-8", "replace"))
            status, data = answer.status, answer.data
            ctype, encoding = answer.content_type, answer.encoding
        server.answering(conn, len(data))
        extra = ((f"Content-Encoding: {encoding}",) if encoding else ()) + (
            ("Allow: GET, HEAD",) if status == 405 else ()) + (
            ("Retry-After: 1",) if status == 503 else ())
        conn.sendall(_head_of(status, ctype, len(data), extra))
        if method == "HEAD":
            return
        conn.sendall(data)   # sendall: a page is larger than the socket's buffer

    return handle


_WAKE = object()     # the selector's mark of the loop's wake-up socket


class AnsweredAlready(Exception):
    """The server answered this connection itself (it is stopping): the handler's answer
    is not sent."""


class BoundedHTTPServer:
    """An HTTP server that hostile or broken clients cannot exhaust.

    * a listen backlog of ``backlog`` (128): bursts of scrapers wait in the kernel's queue;
    * accepted connections send their request head into one selector loop, not into a
      thread: idle and slow (slowloris) connections cost a file descriptor and a few bytes,
      and are closed when the head is not complete after ``idle`` seconds;
    * a fixed pool of ``workers`` threads answers complete requests; once its answer is ready
      a connection has ``deadline`` seconds to take it (a slow reader is cut);
    * at most ``max_connections`` open at once (default: what RLIMIT_NOFILE leaves, at most
      4096): beyond that a new connection is answered 503 at once;
    * a connection it gives up on is answered, never closed without a response: 408 for a
      head not complete after ``idle`` (read once more first: a loop held up past the
      deadline does not drop a head that arrived), 431 for a head over 16 KiB, 503 when the
      route fails (with the exception's one line), when too many are open, or when the
      server stops before answering; only a reader too slow for its answer is cut;
    * one log line per failed connection, never a traceback, written by a thread of its
      own (a worker never waits for stderr; lines beyond 256 waiting are counted).
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
            self.socket.setblocking(False)   # accept() never holds up the loop
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
        # the loop sleeps until a connection, a byte or a deadline: with nothing open it
        # does not wake at all (an exporter between scrapes costs no CPU); a deadline set by
        # a worker (answering) or a stop wakes it through this pair
        self._wake_r, self._wake_w = socket.socketpair()
        for end in (self._wake_r, self._wake_w):
            end.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, _WAKE)
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

    TICK = 0.25     # how often the loop looks at deadlines while a connection is open

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:             # full (a wake is pending already) or closed
            pass

    def _timeout(self) -> float | None:
        """How long the loop may sleep: for ever with nothing open (or only connections
        whose answer waits for a scan: their deadline starts when it is ready, and
        ``answering`` wakes the loop then), else a tick."""
        if self._waiting:
            return self.TICK
        with self._lock:
            if any(due is not None and due != math.inf for due in self._busy.values()):
                return self.TICK
        return None

    def _loop(self) -> None:
        import time as _time
        while not self._stop.is_set():
            for key, _ in self._sel.select(self._timeout()):
                if key.data is _WAKE:
                    try:
                        while self._wake_r.recv(4096):
                            pass
                    except OSError:
                        pass
                elif key.fileobj is self.socket:
                    self._accept()
                else:
                    self._read_head(key.fileobj)
            now = _time.monotonic()
            for conn, (due, _, _) in list(self._waiting.items()):
                if now > due:
                    self._read_head(conn)    # what arrived while the loop was held up
                    if conn in self._waiting:
                        self._forget(conn, 408, f"the request's head was not complete "
                                                f"after {self.idle:g}s")
            with self._lock:
                overdue = [c for c, due in self._busy.items() if due is not None and now > due]
            for conn in overdue:
                self._cut(conn)

    def _accept(self) -> None:
        import selectors
        import time as _time
        for _ in range(64):          # what queued up while the loop was held (then select)
            try:
                conn, peer = self.socket.accept()
            except OSError:          # BlockingIOError: none left; or a client gone
                return
            with self._lock:
                open_now = len(self._waiting) + len(self._busy)
            if open_now >= self.max_connections:
                self.dropped += 1
                _answer_now(conn, 503, f"too many connections ({self.max_connections} open)")
                continue
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
        if not chunk:
            self._forget(conn)       # the client left: nobody to answer
            return
        if len(head) + len(chunk) > self.MAX_HEAD:
            self._forget(conn, 431, f"a request head over {self.MAX_HEAD >> 10} KiB")
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
        cut; a reader slower than that is). Raises :class:`AnsweredAlready` when the server
        answered it meanwhile (it is stopping)."""
        import time as _time
        allowed = self.deadline + size / (256 << 10)
        with self._lock:
            if conn in self._busy:
                if self._busy[conn] is None:
                    raise AnsweredAlready()
                self._busy[conn] = _time.monotonic() + allowed
        self._wake()                # (the loop may sleep with no deadline to keep)
        # the socket's own timeout too: sendall's timeout bounds the whole answer (Python
        # 3.5+), and the idle timeout (5 s) would cut a big page to a busy reader
        conn.settimeout(allowed)

    def _forget(self, conn, status: int | None = None, why: str = "") -> None:
        """Stop waiting for ``conn``'s head: answer ``status`` (and ``why``), or just
        close it when the client has gone."""
        self._sel.unregister(conn)
        del self._waiting[conn]
        if status is None:
            conn.close()
        else:
            _answer_now(conn, status, why)

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
        except AnsweredAlready:
            pass
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
        self._wake()
        self._stopped.wait(5)

    def server_close(self) -> None:
        """Close every connection: those whose answer is not under way yet are answered
        503 (the server is stopping), the others cut."""
        self._stop.set()
        self._wake()
        self._pool.shutdown(wait=False, cancel_futures=True)
        for conn in list(self._waiting):
            _answer_now(conn, 503, "the exporter is stopping")
        self._waiting.clear()
        with self._lock:
            unanswered = [c for c, due in self._busy.items() if due == math.inf]
            for conn in unanswered:
                self._busy[conn] = None     # answering() now refuses
            answered = [c for c, due in self._busy.items() if due is not None]
        for conn in unanswered:
            _answer_now(conn, 503, "the exporter is stopping")
        for conn in answered:
            self._cut(conn)
        _log.flush()
        try:
            self._sel.close()
        except (OSError, ValueError):
            pass
        self._wake_r.close()
        self._wake_w.close()
        self.socket.close()


def _fd_room() -> int:
    """Connections the exporter may hold open: what RLIMIT_NOFILE leaves (keeping 64 for the
    scan's own fds), at most 4096."""
    import resource
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(16, min(4096, soft - 64))


def serve_http(host: str, port: int, route, **limits):
    """Start a :class:`BoundedHTTPServer` answering with ``route`` in a thread:
    ``(server, thread)``; ``server.shutdown()`` stops it. ``limits`` are the server's
    (workers, backlog, idle, deadline, max_connections). Tunes this process's allocator for
    a long life first (:func:`tune_malloc`)."""
    tune_malloc()
    server = BoundedHTTPServer((host, port), _handler(route), **limits)
    thread = threading.Thread(target=server.serve_forever, name="bpfmem-export", daemon=True)
    thread.start()
    return server, thread
