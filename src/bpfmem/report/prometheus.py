"""Bpfmem's Prometheus exposition, written by bpfmem: the text format (0.0.4) and OpenMetrics
1.0.0, the same bytes prometheus_client's encoders write for the same families (a test compares
whole pages with them), without importing it at run time: prometheus_client brings http.server,
ssl and certifi, 10 MiB of the exporter's resident memory, measured.

The per-map families are most of a page (10,000 maps: 50,000 samples). :class:`MapFamilies`
writes them from labels escaped once per map and kept while the map keeps its id, name, type
and primary owner, straight into one buffer. The other families are :class:`Family` values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

TEXT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
EOF_LINE = b"# EOF\n"

# (metric name, help) of the per-map families, in page order
MAP_FAMILIES = (
    ("bpfmem_map_memlock_bytes", "memlock of the map as fdinfo reports it"),
    ("bpfmem_map_charged_bytes", "model: the memory cgroup charge of the map at the entries "
                                 "present (at create when not counted)"),
    ("bpfmem_map_max_entries", "max_entries of the map"),
    ("bpfmem_map_entries", "entries counted in the map"),
    ("bpfmem_map_pressure_ratio", "entries / max_entries"),
)
MAP_LABELS = ("id", "name", "type", "owner_comm", "cgroup")


@dataclass(frozen=True)
class Family:
    """One metric family: ``type`` "gauge" or "counter" (``name`` without ``_total``);
    ``samples`` are (label values in ``labels`` order, value)."""
    name: str
    doc: str
    type: str = "gauge"
    labels: tuple[str, ...] = ()
    samples: tuple[tuple[tuple[str, ...], float], ...] = ()


def negotiate(accept: str | None) -> tuple[bool, str]:
    """(OpenMetrics?, content type) for a scrape's Accept header: OpenMetrics 1.0.0 when the
    client lists ``application/openmetrics-text`` (Prometheus does), else the text format."""
    for media in (accept or "").split(","):
        if media.split(";")[0].strip() == "application/openmetrics-text":
            return True, OPENMETRICS_TYPE
    return False, TEXT_TYPE


def go_float(v: float) -> str:
    """A sample value as Prometheus clients write it: Go's shortest float, with the exponent
    form for positive values of more than six integer digits (``7.143424e+06``)."""
    d = float(v)
    if math.isinf(d):
        return "+Inf" if d > 0 else "-Inf"
    if math.isnan(d):
        return "NaN"
    s = repr(d)
    dot = s.find(".")
    if d > 0 and dot > 6:
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1:]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return s


def _escape_value(v: str) -> str:
    return v.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _escape_help(doc: str, openmetrics: bool) -> str:
    doc = doc.replace("\\", r"\\").replace("\n", r"\n")
    return doc.replace('"', r"\"") if openmetrics else doc


def _labelstr(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    if not names:
        return ""
    pairs = sorted(zip(names, values))
    return "{" + ",".join(f'{k}="{_escape_value(v)}"' for k, v in pairs) + "}"


def render_families(families: Iterable[Family], *, openmetrics: bool = False) -> bytearray:
    """``families`` as text; no ``# EOF`` (the page's end adds it)."""
    out = bytearray()
    for f in families:
        counter = f.type == "counter"
        shown = f.name + "_total" if counter and not openmetrics else f.name
        out += (f"# HELP {shown} {_escape_help(f.doc, openmetrics)}\n"
                f"# TYPE {shown} {f.type}\n").encode()
        sample = f.name + "_total" if counter else f.name
        for values, v in f.samples:
            out += f"{sample}{_labelstr(f.labels, values)} {go_float(v)}\n".encode()
    return out


class MapFamilies:
    """Writes the per-map families; keeps each map's escaped label set between pages (and
    forgets the maps that are gone, so its size follows the node's)."""

    def __init__(self, float_text=go_float):
        self._labels: dict[int, tuple[tuple, str]] = {}
        self._float = float_text
        self._floats: dict[float, str] = {}

    def _labelstr(self, map_id: int, key: tuple) -> str:
        hit = self._labels.get(map_id)
        if hit is not None and hit[0] == key:
            return hit[1]
        values = dict(zip(MAP_LABELS, key))
        text = "{" + ",".join(f'{k}="{_escape_value(values[k])}"'
                              for k in sorted(MAP_LABELS)) + "}"
        self._labels[map_id] = (key, text)
        return text

    def _num(self, v: float) -> str:
        s = self._floats.get(v)
        if s is None:
            if len(self._floats) > 8192:
                self._floats.clear()
            s = self._floats[v] = self._float(v)
        return s

    def render(self, rows: Iterable[tuple], *, openmetrics: bool = False):
        """The five families for ``rows``, as chunks of bytes (one a family): per map, its
        label values (as MAP_LABELS) followed by its memlock, charged, max_entries, entries
        and pressure (None where the map has none). ``rows`` is read once (a generator will
        do); no list of 50,000 line strings is made, whose small blocks would stay in the
        allocator's arenas after the page is written."""
        num = self._num
        seen = set()
        names = [name for name, _doc in MAP_FAMILIES]
        buffers = [bytearray(f"# HELP {name} {_escape_help(doc, openmetrics)}\n"
                             f"# TYPE {name} gauge\n".encode())
                   for name, doc in MAP_FAMILIES]
        for row in rows:
            key = row[0]
            map_id = int(key[0])
            seen.add(map_id)
            label = self._labelstr(map_id, key)
            for buf, name, v in zip(buffers, names, row[1:]):
                if v is not None:
                    buf += f"{name}{label} {num(v)}\n".encode()
        if len(self._labels) > len(seen):
            for gone in self._labels.keys() - seen:
                del self._labels[gone]
        while buffers:
            yield bytes(buffers.pop(0))
