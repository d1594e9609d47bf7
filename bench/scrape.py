"""One scrape of an exporter, made the way Prometheus makes it (its Accept header, gzip) or
the way curl does (``plain``: no gzip, so the exporter sends the page inflated). Shared by
bench/live.py and bench/export_soak.py."""

from __future__ import annotations

import gzip
import time
import urllib.request

# What Prometheus 2.x sends
PROMETHEUS_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
              "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "Accept-Encoding": "gzip",
}


def scrape(url: str, plain: bool = False, timeout: float = 120) -> tuple[float, bytes]:
    """(seconds, the page as text bytes) of one scrape of ``url``."""
    t0 = time.perf_counter()
    req = urllib.request.Request(url, headers={} if plain else PROMETHEUS_HEADERS)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        body = r.read()
        if r.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
    return time.perf_counter() - t0, body
