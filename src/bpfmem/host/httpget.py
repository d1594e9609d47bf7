"""One bounded HTTP GET: an agent's /metrics or /debug/pprof/heap.

The whole exchange (connect, headers, body) must end within ``timeout`` seconds and the body
stay under ``max_bytes``; otherwise :class:`HostError` says which, in one line. An endpoint
that is down, slow, drips its body or sends gigabytes costs at most the timeout. Only the
host names ``loopback_only`` allows are contacted (auto-discovered endpoints are loopback
only; URLs the user named are taken as given).
"""

from __future__ import annotations

import http.client
import ipaddress
import os
import socket
import threading
import time
from urllib.parse import urlsplit

from ..errors import HostError
from ..units import format_size

__all__ = ["http_get", "http_get_in_netns", "is_loopback_host", "TIMEOUT", "MAX_BODY"]

TIMEOUT = 2.0
MAX_BODY = 16 << 20
_CHUNK = 64 << 10


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def http_get(url: str, *, timeout: float = TIMEOUT, max_bytes: int = MAX_BODY,
             loopback_only: bool = False, accept: str | None = None) -> bytes:
    """The body of ``url`` (http or https) answered with 200; HostError otherwise."""
    u = urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise HostError(f"{url}: not an http:// URL")
    if loopback_only and not is_loopback_host(u.hostname):
        raise HostError(f"{url}: not on loopback (name it with --metrics-url to scrape it)")
    deadline = time.monotonic() + timeout
    cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    try:
        port = u.port
    except ValueError:
        raise HostError(f"{url}: bad port") from None
    conn = cls(u.hostname, port, timeout=timeout)
    path = (u.path or "/") + (f"?{u.query}" if u.query else "")
    try:
        conn.request("GET", path, headers={"Accept": accept or "*/*",
                                           "Accept-Encoding": "identity",
                                           "User-Agent": "bpfmem"})
        if conn.sock is not None:
            conn.sock.settimeout(max(0.01, deadline - time.monotonic()))
        resp = conn.getresponse()
        if resp.status != 200:
            raise HostError(f"{url}: HTTP {resp.status} {resp.reason}".rstrip())
        length = resp.getheader("Content-Length")
        if length and length.isdigit() and int(length) > max_bytes:
            raise HostError(f"{url}: body of {format_size(int(length))} is over the "
                            f"{format_size(max_bytes)} cap")
        chunks, got = [], 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise HostError(f"{url}: no complete answer within {timeout:g}s")
            if conn.sock is not None:
                conn.sock.settimeout(left)
            chunk = resp.read1(_CHUNK) if hasattr(resp, "read1") else resp.read(_CHUNK)
            if not chunk:
                break
            got += len(chunk)
            if got > max_bytes:
                raise HostError(f"{url}: body over the {format_size(max_bytes)} cap")
            chunks.append(chunk)
        return b"".join(chunks)
    except HostError:
        raise
    except (socket.timeout, TimeoutError):
        raise HostError(f"{url}: no complete answer within {timeout:g}s") from None
    except ConnectionRefusedError:
        raise HostError(f"{url}: connection refused (nothing listens there)") from None
    except (OSError, http.client.HTTPException) as e:
        why = (getattr(e, "strerror", None) or str(e).strip() or type(e).__name__)[:120]
        why = "".join(c if c.isprintable() else "?" for c in why)
        raise HostError(f"{url}: not an HTTP answer: {why}" if isinstance(
            e, http.client.HTTPException) else f"{url}: {why}") from None
    finally:
        conn.close()


def http_get_in_netns(pid: int, url: str, *, timeout: float = TIMEOUT,
                      max_bytes: int = MAX_BODY, root: str = "/") -> bytes:
    """:func:`http_get` of a loopback ``url`` from inside the network namespace of ``pid``
    (a pod's own loopback): one short-lived thread enters it (setns) and fetches; the rest
    of this process stays where it is."""
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
                                   loopback_only=True)
        except Exception as e:      # handed to the caller's thread below
            out["error"] = e

    t = threading.Thread(target=run, name=f"bpfmem-netns-{pid}", daemon=True)
    try:
        t.start()
    except RuntimeError as e:
        os.close(fd)
        raise HostError(f"{url}: {e}") from None
    t.join(timeout + 1.0)
    if t.is_alive():
        raise HostError(f"{url}: no complete answer within {timeout:g}s")
    if "error" in out:
        e = out["error"]
        if isinstance(e, HostError):
            raise e
        raise HostError(f"{url}: {e}") from None
    return out["body"]
