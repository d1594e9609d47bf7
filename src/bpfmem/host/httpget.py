"""One bounded HTTP GET: an agent's /metrics or /debug/pprof/heap.

The whole exchange (name lookup, connect, TLS handshake, request, status line, headers,
interim ``1xx`` answers, chunk framing, body) must end within ``timeout`` seconds and the body
stay under ``max_bytes``; otherwise :class:`HostError` says which, in one line. The socket is
non-blocking and every wait is a selector's, on what is left of that one deadline: an
endpoint that is down, slow, drips its status line, headers, chunk sizes or body one byte at
a time, answers ``100 Continue`` for ever or sends gigabytes costs at most the timeout. Heads
are bounded too (a status line or header line of 8 KiB, 64 KiB and 200 lines of headers, 8
interim answers, chunk-size lines of 1 KiB). Only the host names ``loopback_only`` allows are
contacted (auto-discovered endpoints are loopback only; URLs the user named are taken as
given, but a URL that is no URL is a HostError too).
"""

from __future__ import annotations

import errno
import ipaddress
import os
import selectors
import socket
import ssl
import threading
import time
from urllib.parse import urlsplit

from ..errors import HostError
from ..units import format_size

__all__ = ["http_get", "http_get_in_netns", "is_loopback_host", "split_url", "ByteBudget",
           "TIMEOUT", "MAX_BODY"]

TIMEOUT = 2.0
MAX_BODY = 16 << 20
_CHUNK = 64 << 10
MAX_LINE = 8 << 10          # a status line or one header line
MAX_HEAD = 64 << 10         # all header lines of one answer
MAX_HEADERS = 200           # header lines of one answer
MAX_INTERIM = 8             # 1xx answers before the real one
MAX_CHUNK_LINE = 1 << 10    # a chunk-size line (with its extensions)


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _printable(s: str, n: int = 120) -> str:
    return "".join(c if c.isprintable() else "?" for c in s[:n])


def split_url(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path with query) of an http(s) URL; HostError for anything
    else (another scheme, no host, a bad port, brackets that do not close, a host name that
    is no name: empty labels, labels over 63 bytes, spaces, control characters)."""
    shown = _printable(url, 200)
    try:
        u = urlsplit(url)
        port = u.port
        host = u.hostname
    except ValueError as e:
        raise HostError(f"{shown}: not a URL ({_printable(str(e))})") from None
    if u.scheme not in ("http", "https") or not host:
        raise HostError(f"{shown}: not an http:// URL")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if ":" in host:
            raise HostError(f"{shown}: bad IPv6 address {_printable(host)!r}") from None
        try:
            labels = host.rstrip(".").encode("idna").split(b".")
        except UnicodeError:
            labels = [b""]
        if (len(host) > 253 or not all(labels) or any(len(x) > 63 for x in labels)
                or any(not (c.isalnum() or c in "-_.") for c in host)):
            raise HostError(f"{shown}: bad host name {_printable(host)!r}") from None
    if port == 0:
        raise HostError(f"{shown}: bad port")
    path = (u.path or "/") + (f"?{u.query}" if u.query else "")
    if any(not c.isprintable() or c == " " for c in path):
        raise HostError(f"{shown}: bad path")
    return u.scheme, host, port or (443 if u.scheme == "https" else 80), path


class _Timeout(Exception):
    pass


class ByteBudget:
    """Bytes of answers that readers running at once may hold together (the endpoints of one
    pod, read in threads): each body is charged as it arrives and given back by whoever
    holds it once it is done with it (:meth:`give`). A reader finding no room waits for it
    until its own deadline, then fails: concurrency never multiplies what the per-answer cap
    allows."""

    def __init__(self, size: int):
        self.size = size
        self.held = 0
        self._cv = threading.Condition()

    def take(self, n: int, deadline: float) -> bool:
        """Charge ``n`` bytes, waiting for room until ``deadline``; False when none came."""
        with self._cv:
            while self.held + n > self.size:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
            self.held += n
            return True

    def give(self, n: int) -> None:
        with self._cv:
            self.held = max(0, self.held - n)
            self._cv.notify_all()


class _Conn:
    """A non-blocking socket whose every wait ends at one deadline."""

    def __init__(self, deadline: float):
        self.deadline = deadline
        self.sock: socket.socket | None = None
        self.sel = selectors.DefaultSelector()
        self.buf = bytearray()
        self.eof = False

    def _wait(self, events: int) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise _Timeout()
        if self.sel.get_map():
            self.sel.modify(self.sock, events)
        else:
            self.sel.register(self.sock, events)
        if not self.sel.select(left):
            raise _Timeout()

    def connect(self, host: str, port: int, tls: bool) -> None:
        try:
            ip = ipaddress.ip_address(host)
            addrs = [(socket.AF_INET6 if ip.version == 6 else socket.AF_INET,
                      (host, port))]
        except ValueError:
            # a name (localhost, or one the user gave): looked up in a thread of its own,
            # waited for until the deadline (getaddrinfo has no timeout of its own)
            got: dict = {}

            def look() -> None:
                try:
                    got["infos"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                except (OSError, UnicodeError) as e:
                    got["error"] = e
            t = threading.Thread(target=look, name="bpfmem-resolve", daemon=True)
            t.start()
            t.join(max(0.0, self.deadline - time.monotonic()))
            if t.is_alive():
                raise _Timeout()
            if "error" in got:
                e = got["error"]
                raise HostError(f"cannot resolve {host}: "
                                f"{getattr(e, 'strerror', None) or e}") from None
            infos = got["infos"]
            addrs = [(f, a[:2]) for f, _t, _p, _c, a in infos]
        err: OSError | None = None
        for family, addr in addrs:
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setblocking(False)
            self.sock = sock
            self.sel = selectors.DefaultSelector()
            rc = sock.connect_ex(addr)
            if rc not in (0, errno.EINPROGRESS, errno.EAGAIN):
                err = OSError(rc, os.strerror(rc))
                sock.close()
                continue
            if rc:
                self._wait(selectors.EVENT_WRITE)
                rc = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if rc:
                    err = OSError(rc, os.strerror(rc))
                    sock.close()
                    continue
            break
        else:
            raise err or OSError("no address")
        if tls:
            ctx = ssl.create_default_context()
            self.sel.close()
            self.sel = selectors.DefaultSelector()
            self.sock = ctx.wrap_socket(self.sock, server_hostname=host,
                                        do_handshake_on_connect=False)
            while True:
                try:
                    self.sock.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    self._wait(selectors.EVENT_READ)
                except ssl.SSLWantWriteError:
                    self._wait(selectors.EVENT_WRITE)

    def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                n = self.sock.send(view)
            except (BlockingIOError, ssl.SSLWantWriteError):
                self._wait(selectors.EVENT_WRITE)
                continue
            except ssl.SSLWantReadError:
                self._wait(selectors.EVENT_READ)
                continue
            view = view[n:]

    def fill(self) -> bool:
        """Read what is there into the buffer (waiting for it); False at the end."""
        if self.eof:
            return False
        if time.monotonic() > self.deadline:      # a fast stream of tiny pieces too
            raise _Timeout()
        while True:
            try:
                got = self.sock.recv(_CHUNK)
            except (BlockingIOError, ssl.SSLWantReadError):
                self._wait(selectors.EVENT_READ)
                continue
            except ssl.SSLWantWriteError:
                self._wait(selectors.EVENT_WRITE)
                continue
            except ssl.SSLEOFError:
                got = b""
            if not got:
                self.eof = True
                return False
            self.buf += got
            return True

    def line(self, limit: int, what: str) -> bytes:
        """One line (CRLF or LF ended, without it) of at most ``limit`` bytes."""
        start = 0
        while True:
            i = self.buf.find(b"\n", start)
            if i >= 0:
                if i > limit:
                    break
                out = bytes(self.buf[:i])
                del self.buf[:i + 1]
                return out[:-1] if out.endswith(b"\r") else out
            if len(self.buf) > limit:
                break
            start = len(self.buf)
            if not self.fill():
                raise HostError(f"the connection closed inside the {what}")
        raise HostError(f"{what} longer than {format_size(limit)}")

    def take(self, n: int) -> bytes:
        """Up to ``n`` bytes (at least one, unless at the end)."""
        if not self.buf and not self.fill():
            return b""
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def close(self) -> None:
        try:
            self.sel.close()
        finally:
            if self.sock is not None:
                self.sock.close()


def _head(c: _Conn) -> tuple[int, str, dict]:
    """The status and headers of the final answer (interim 1xx ones skipped, a few)."""
    for _ in range(MAX_INTERIM + 1):
        status = c.line(MAX_LINE, "status line")
        parts = status.split(None, 2)
        if (len(parts) < 2 or not parts[0].startswith(b"HTTP/1.")
                or not parts[1].isdigit() or len(parts[1]) != 3):
            raise HostError("not an HTTP answer: "
                            + _printable(status.decode("latin-1"), 60))
        code = int(parts[1])
        reason = _printable(parts[2].decode("latin-1"), 80) if len(parts) > 2 else ""
        headers: dict = {}
        size = 0
        for n in range(MAX_HEADERS + 1):
            h = c.line(MAX_LINE, "header line")
            if not h:
                break
            size += len(h)
            if n == MAX_HEADERS or size > MAX_HEAD:
                raise HostError(f"headers over {MAX_HEADERS} lines or "
                                f"{format_size(MAX_HEAD)}")
            k, sep, v = h.partition(b":")
            if not sep or not k.strip():
                raise HostError("not an HTTP answer: bad header line "
                                + _printable(h.decode("latin-1"), 60))
            key = k.strip().lower().decode("latin-1")
            val = v.strip().decode("latin-1")
            headers[key] = f"{headers[key]}, {val}" if key in headers else val
        if code >= 200 or code < 100:
            return code, reason, headers
        if code == 101:
            raise HostError("HTTP 101: switches protocols")
    raise HostError(f"over {MAX_INTERIM} interim (1xx) answers")


class _Charged:
    """A body as it arrives, in one buffer (a stream of one-byte chunks kept as a list of
    2 s of them held 76 MiB: an object per byte), each part charged to a
    :class:`ByteBudget` (when there is one)."""

    __slots__ = ("budget", "deadline", "charged", "buf")

    def __init__(self, budget: ByteBudget | None, deadline: float):
        self.budget, self.deadline, self.charged = budget, deadline, 0
        self.buf = bytearray()

    def append(self, part: bytes) -> None:
        if self.budget is not None:
            if not self.budget.take(len(part), self.deadline):
                raise HostError(f"no room for its answer within the deadline (the answers "
                                f"read beside it hold {format_size(self.budget.size)})")
            self.charged += len(part)
        self.buf += part

    def joined(self) -> bytes:
        out = bytes(self.buf)
        self.buf = bytearray()
        return out


def _body(c: _Conn, headers: dict, max_bytes: int, chunks: _Charged) -> bytes:
    over = HostError(f"body over the {format_size(max_bytes)} cap")
    got = 0
    te = headers.get("transfer-encoding", "").lower()
    if te:
        if [x.strip() for x in te.split(",")][-1] != "chunked":
            raise HostError(f"not an HTTP answer: transfer encoding {_printable(te, 40)!r}")
        while True:
            if time.monotonic() > c.deadline:
                raise _Timeout()
            line = c.line(MAX_CHUNK_LINE, "chunk-size line")
            size_s = line.split(b";", 1)[0].strip()
            if (not size_s or len(size_s) > 16
                    or any(ch not in b"0123456789abcdefABCDEF" for ch in size_s)):
                raise HostError("not an HTTP answer: bad chunk size "
                                + _printable(line.decode("latin-1"), 40))
            size = int(size_s, 16)
            if size == 0:
                for _ in range(MAX_HEADERS + 1):      # trailers
                    if not c.line(MAX_LINE, "trailer line"):
                        return chunks.joined()
                raise HostError(f"over {MAX_HEADERS} trailer lines")
            if got + size > max_bytes:
                raise over
            while size:
                part = c.take(min(size, _CHUNK))
                if not part:
                    raise HostError("the connection closed inside a chunk")
                size -= len(part)
                got += len(part)
                chunks.append(part)
            if c.line(2, "chunk end"):
                raise HostError("not an HTTP answer: a chunk longer than its size")
    length = headers.get("content-length")
    if length is not None:
        first = length.split(",")[0].strip()
        if not first.isdigit() or len(first) > 19 or any(
                x.strip() != first for x in length.split(",")):
            raise HostError(f"not an HTTP answer: Content-Length {_printable(length, 40)!r}")
        want = int(first)
        if want > max_bytes:
            raise HostError(f"body of {format_size(want)} is over the "
                            f"{format_size(max_bytes)} cap")
        while got < want:
            part = c.take(min(want - got, _CHUNK))
            if not part:
                raise HostError(f"the connection closed after {got} of {want} bytes")
            got += len(part)
            chunks.append(part)
        return chunks.joined()
    while True:                      # until the server closes
        part = c.take(_CHUNK)
        if not part:
            return chunks.joined()
        got += len(part)
        if got > max_bytes:
            raise over
        chunks.append(part)


def http_get(url: str, *, timeout: float = TIMEOUT, max_bytes: int = MAX_BODY,
             loopback_only: bool = False, accept: str | None = None,
             deadline: float | None = None, budget: ByteBudget | None = None) -> bytes:
    """The body of ``url`` (http or https) answered with 200; HostError otherwise.

    ``deadline`` (time.monotonic()): end by then if that is sooner than ``timeout`` from now
    (readers sharing one bound). ``budget``: the body is charged to it as it arrives; on
    success the caller holds it and gives ``len(body)`` back when done (on failure it is
    given back here)."""
    deadline = min(time.monotonic() + timeout,
                   deadline if deadline is not None else float("inf"))
    scheme, host, port, path = split_url(url)
    if loopback_only and not is_loopback_host(host):
        raise HostError(f"{url}: not on loopback (name it with --metrics-url to scrape it)")
    hosthdr = f"[{host}]" if ":" in host else host
    if port != (443 if scheme == "https" else 80):
        hosthdr += f":{port}"
    req = (f"GET {path} HTTP/1.1\r\nHost: {hosthdr}\r\nAccept: {accept or '*/*'}\r\n"
           "Accept-Encoding: identity\r\nUser-Agent: bpfmem\r\nConnection: close\r\n\r\n")
    c = _Conn(deadline)
    chunks = _Charged(budget, deadline)
    ok = False
    try:
        c.connect(host, port, scheme == "https")
        c.send(req.encode("ascii", "replace"))
        code, reason, headers = _head(c)
        if code != 200:
            raise HostError(f"{url}: HTTP {code} {reason}".rstrip())
        body = _body(c, headers, max_bytes, chunks)
        ok = True
        return body
    except _Timeout:
        raise HostError(f"{url}: no complete answer within {timeout:g}s") from None
    except HostError as e:
        msg = str(e)
        raise HostError(msg if msg.startswith(url) else f"{url}: {msg}") from None
    except ConnectionRefusedError:
        raise HostError(f"{url}: connection refused (nothing listens there)") from None
    except ssl.SSLError as e:
        raise HostError(f"{url}: TLS: {_printable(str(e.reason or e))}") from None
    except OSError as e:
        if e.errno == errno.ECONNREFUSED:
            raise HostError(f"{url}: connection refused (nothing listens there)") from None
        why = _printable(getattr(e, "strerror", None) or str(e).strip() or type(e).__name__)
        raise HostError(f"{url}: {why}") from None
    finally:
        c.close()
        if not ok and chunks.charged:
            budget.give(chunks.charged)


def http_get_in_netns(pid: int, url: str, *, timeout: float = TIMEOUT,
                      max_bytes: int = MAX_BODY, root: str = "/",
                      deadline: float | None = None, budget: ByteBudget | None = None) -> bytes:
    """:func:`http_get` of a loopback ``url`` from inside the network namespace of ``pid``
    (a pod's own loopback): one short-lived thread enters it (setns) and fetches; the rest
    of this process stays where it is. ``deadline`` and ``budget`` as for :func:`http_get`."""
    end = min(time.monotonic() + timeout, deadline if deadline is not None else float("inf"))
    from .bpfsys import setns_thread
    try:
        fd = os.open(os.path.join(root, "proc", str(pid), "ns", "net"), os.O_RDONLY)
    except OSError as e:
        raise HostError(f"{url}: the network namespace of {pid}: {e.strerror or e}") from None
    out: dict = {}

    def run() -> None:
        try:
            try:
                setns_thread(fd)
            finally:
                os.close(fd)
            out["body"] = http_get(url, timeout=timeout, max_bytes=max_bytes,
                                   loopback_only=True, deadline=end, budget=budget)
        except Exception as e:      # handed to the caller's thread below
            out["error"] = e

    t = threading.Thread(target=run, name=f"bpfmem-netns-{pid}", daemon=True)
    try:
        t.start()
    except RuntimeError as e:
        os.close(fd)
        raise HostError(f"{url}: {e}") from None
    t.join(max(0.0, end - time.monotonic()) + 1.0)
    if t.is_alive():
        raise HostError(f"{url}: no complete answer within {timeout:g}s")
    if "error" in out:
        e = out["error"]
        if isinstance(e, HostError):
            raise e
        raise HostError(f"{url}: {e}") from None
    return out["body"]
