"""``bpfmem export``: the node's maps as Prometheus metrics."""

from __future__ import annotations

from ..exporter import ScanCache, serve


def metrics_cache(scan, interval: float) -> ScanCache:
    """The exporter's scan cache: ``scan()`` at most once per ``interval`` seconds."""
    return ScanCache(scan, interval)


def serve_metrics(host: str, port: int, cache, profile=None):
    """Serve Prometheus /metrics of ``cache``'s scans on host:port: ``(server, thread)``."""
    return serve(host, port, cache, profile)
