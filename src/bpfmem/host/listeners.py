"""TCP ports a process listens on, from outside it: ``/proc/PID/net/tcp{,6}`` (the sockets of
its network namespace) matched by inode against the ``socket:[INODE]`` links in
``/proc/PID/fd``. Used to find an agent's /metrics on loopback without being told.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Listener", "parse_proc_net_tcp", "read_listeners", "same_netns"]

_LISTEN = "0A"


@dataclass(frozen=True)
class Listener:
    address: str       # "127.0.0.1", "::1", "0.0.0.0", "::"
    port: int
    inode: int

    @property
    def loopback_reachable(self) -> bool:
        """Reachable on the loopback of its namespace: bound to loopback or to any address."""
        ip = ipaddress.ip_address(self.address)
        return ip.is_loopback or ip.is_unspecified

    @property
    def connect_host(self) -> str:
        ip = ipaddress.ip_address(self.address)
        if ip.is_unspecified:
            return "127.0.0.1" if ip.version == 4 else "::1"
        return self.address


def _addr(hexaddr: str) -> str:
    raw = bytes.fromhex(hexaddr)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    # IPv6: four 32-bit words, each in host (little-endian) order
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    ip = ipaddress.IPv6Address(words)
    return str(ip.ipv4_mapped) if ip.ipv4_mapped else str(ip)


def parse_proc_net_tcp(text: str) -> list[Listener]:
    """Listening sockets of a /proc/net/tcp or tcp6 text."""
    out = []
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 10 or f[3] != _LISTEN:
            continue
        local, _, port = f[1].partition(":")
        try:
            out.append(Listener(_addr(local), int(port, 16), int(f[9])))
        except ValueError:
            continue
    return out


def _socket_inodes(pid: int, root: str) -> set[int]:
    fd_dir = Path(root) / "proc" / str(pid) / "fd"
    out = set()
    for name in os.listdir(fd_dir):
        try:
            target = os.readlink(fd_dir / name)
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(int(target[8:-1]))
    return out


def read_listeners(pid: int, root: str | os.PathLike = "/",
                   tables: dict | None = None) -> list[Listener]:
    """TCP sockets ``pid`` itself holds in LISTEN state (OSError when it is unreadable).
    ``tables``: a cache of the namespaces' listening sockets, for many processes read at
    once (one network namespace's table is the same for each of its processes)."""
    mine = _socket_inodes(pid, os.fspath(root))
    out = []
    ns = None
    if tables is not None:
        try:
            ns = os.readlink(Path(root) / "proc" / str(pid) / "ns" / "net")
        except OSError:
            ns = None
    for name in ("tcp", "tcp6"):
        key = (ns, name)
        if ns is not None and key in tables:
            found = tables[key]
        else:
            try:
                text = (Path(root) / "proc" / str(pid) / "net" / name).read_text()
            except FileNotFoundError:
                continue
            found = parse_proc_net_tcp(text)
            if ns is not None:
                tables[key] = found
        out.extend(s for s in found if s.inode in mine)
    return sorted(set(out), key=lambda s: (s.port, s.address))


def same_netns(pid: int, root: str | os.PathLike = "/") -> bool | None:
    """Whether ``pid`` shares this process's network namespace (None: cannot tell)."""
    try:
        return (os.readlink(Path(root) / "proc" / str(pid) / "ns" / "net")
                == os.readlink(Path(root) / "proc" / "self" / "ns" / "net"))
    except OSError:
        return None
