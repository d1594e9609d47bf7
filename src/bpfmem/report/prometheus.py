"""Bpfmem's Prometheus exposition, written by bpfmem: the text format (0.0.4) and OpenMetrics
1.0.0, the same bytes prometheus_client's encoders write for the same families (a test compares
whole pages with them), without importing it at run time: prometheus_client brings http.server,
ssl and certifi, 10 MiB of the exporter's resident memory, measured.

The per-map families are most of a page (10,000 maps: 50,000 samples). :class:`MapFamilies`
writes them from labels escaped once per map and kept while the map keeps its id, name, type
and primary owner, straight into one buffer. The other families are :class:`Family` values.
"""

from __future__ import annotations

import bisect
import math
import operator
import struct
import zlib
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
# (metric name, help) of the per-program families, in page order (a program's labels are a
# map's: its id, name, type and its first holder's comm and cgroup)
PROG_FAMILIES = (
    ("bpfmem_prog_memlock_bytes", "memlock of the program as fdinfo reports it"),
    ("bpfmem_prog_jited_bytes", "bytes of the program's JIT image"),
    ("bpfmem_prog_xlated_bytes", "bytes of the program's instructions after the verifier"),
)

# every bpfmem family a page has (deploy/ and the dashboard use these names)
METRIC_NAMES = (
    "bpfmem_map_memlock_bytes", "bpfmem_map_charged_bytes", "bpfmem_map_max_entries",
    "bpfmem_map_entries", "bpfmem_map_pressure_ratio", "bpfmem_cgroup_map_memlock_bytes",
    "bpfmem_cgroup_maps", "bpfmem_cgroup_memory_usage_bytes",
    "bpfmem_cgroup_memory_limit_bytes", "bpfmem_cgroup_map_share_ratio", "bpfmem_node_maps",
    "bpfmem_node_map_memlock_bytes", "bpfmem_scan_duration_seconds", "bpfmem_scans_total",
    "bpfmem_scan_errors_total", "bpfmem_maps_skipped_total", "bpfmem_build_info")


# the program families, on a page whose scan listed programs (export's default)
PROGRAM_METRIC_NAMES = (
    "bpfmem_prog_memlock_bytes", "bpfmem_prog_jited_bytes", "bpfmem_prog_xlated_bytes",
    "bpfmem_cgroup_prog_memlock_bytes", "bpfmem_cgroup_programs", "bpfmem_node_programs",
    "bpfmem_node_prog_memlock_bytes", "bpfmem_node_prog_jited_bytes", "bpfmem_node_btf_bytes",
    "bpfmem_jit_limit_bytes", "bpfmem_jit_vmalloc_bytes")


@dataclass(frozen=True)
class Family:
    """One metric family: ``type`` "gauge" or "counter" (``name`` without ``_total``);
    ``samples`` are (label values in ``labels`` order, value)."""
    name: str
    doc: str
    type: str = "gauge"
    labels: tuple[str, ...] = ()
    samples: tuple[tuple[tuple[str, ...], float], ...] = ()


@dataclass(frozen=True)
class ScanStats:
    """The exporter's own counters: the last scan's duration, scans made, failed scans, and
    maps or processes that vanished during scans."""
    duration: float
    scans: int
    errors: int
    skipped: int


def map_families(rows) -> list[Family]:
    """The per-map families of ``rows`` (:func:`bpfmem.analysis.metrics.map_rows`) as
    :class:`Family` values (a page writes them with :class:`MapFamilies`)."""
    rows = list(rows)
    return [Family(name, doc, labels=MAP_LABELS, samples=tuple(
                (row[0], row[column]) for row in rows if row[column] is not None))
            for column, (name, doc) in enumerate(MAP_FAMILIES, start=1)]


def node_families(cgroups, node: tuple[int, int] | None, stats: ScanStats,
                  build: tuple[str, str, str]) -> list[Family]:
    """The families after the per-map ones, in page order: per cgroup (``cgroups``:
    :class:`~bpfmem.analysis.metrics.CgroupRow`), the node's (maps, memlock), or None before
    a first good scan), the scan counters and the build info (version, python,
    prometheus_client)."""
    cg = ("cgroup",)
    node_samples = (((), node[0]),) if node else ()
    node_memlock = (((), node[1]),) if node else ()
    return [
        Family("bpfmem_cgroup_map_memlock_bytes", "memlock of the maps whose lowest-pid holder "
               "is in the cgroup", labels=cg,
               samples=tuple(((r.cgroup,), r.memlock) for r in cgroups)),
        Family("bpfmem_cgroup_maps", "maps whose lowest-pid holder is in the cgroup",
               labels=cg, samples=tuple(((r.cgroup,), r.maps) for r in cgroups)),
        Family("bpfmem_cgroup_memory_usage_bytes", "memory cgroup usage", labels=cg,
               samples=tuple(((r.cgroup,), r.usage) for r in cgroups if r.usage is not None)),
        Family("bpfmem_cgroup_memory_limit_bytes", "memory cgroup limit (absent when "
               "unlimited)", labels=cg,
               samples=tuple(((r.cgroup,), r.limit) for r in cgroups if r.usage is not None
                             and r.limit is not None)),
        Family("bpfmem_cgroup_map_share_ratio", "map memlock / cgroup usage", labels=cg,
               samples=tuple(((r.cgroup,), r.share) for r in cgroups if r.share is not None)),
        Family("bpfmem_node_maps", "maps on the node", samples=node_samples),
        Family("bpfmem_node_map_memlock_bytes", "memlock of every map on the node",
               samples=node_memlock),
        Family("bpfmem_scan_duration_seconds", "seconds the last scan took",
               samples=(((), stats.duration),)),
        Family("bpfmem_scans", "scans made", "counter", samples=(((), stats.scans),)),
        Family("bpfmem_scan_errors", "scans that failed (the previous result was served)",
               "counter", samples=(((), stats.errors),)),
        Family("bpfmem_build_info", "bpfmem's version, and the Python and "
               "prometheus_client it runs on (always 1)",
               labels=("version", "python", "prometheus_client"), samples=((build, 1),)),
        Family("bpfmem_maps_skipped", "maps or processes that vanished during scans",
               "counter", samples=(((), stats.skipped),)),
    ]


def prog_families(rows, node, *, per_program: bool = True) -> list[Family]:
    """The program families: per program (``rows``: analysis.metrics.prog_rows, the maps'
    labels; left out without ``per_program``: a page writes those with :class:`MapPage`),
    per cgroup and for the node (``node``: analysis.metrics.ProgNode)."""
    cg = ("cgroup",)
    out = [Family(name, doc, labels=MAP_LABELS,
                  samples=tuple((r[0], r[col]) for r in rows if r[col] is not None))
           for col, (name, doc) in enumerate(PROG_FAMILIES, start=1)] if per_program else []
    out += [
        Family("bpfmem_cgroup_prog_memlock_bytes", "memlock of the programs whose first "
               "holder is in the cgroup", labels=cg,
               samples=tuple(((g.key or "",), g.memlock) for g in node.cgroups)),
        Family("bpfmem_cgroup_programs", "programs whose first holder is in the cgroup",
               labels=cg, samples=tuple(((g.key or "",), g.programs) for g in node.cgroups)),
        Family("bpfmem_node_programs", "programs on the node", samples=(((), node.programs),)),
        Family("bpfmem_node_prog_memlock_bytes", "memlock of every program on the node",
               samples=(((), node.memlock),)),
        Family("bpfmem_node_prog_jited_bytes", "bytes of every program's JIT image",
               samples=(((), node.jited),)),
        Family("bpfmem_node_btf_bytes", "bytes of the BTF objects processes loaded",
               samples=(((), node.btf_bytes),)),
        Family("bpfmem_jit_limit_bytes", "bpf_jit_limit (net.core sysctl)",
               samples=(((), node.jit_limit),) if node.jit_limit is not None else ()),
        Family("bpfmem_jit_vmalloc_bytes", "vmalloc of the JIT (bpf_prog_pack chunks and "
               "images, /proc/vmallocinfo), what counts against bpf_jit_limit",
               samples=(((), node.jit_in_use),) if node.jit_in_use is not None else ()),
    ]
    return out


def process_families(p) -> list[Family]:
    """The standard ``process_*`` families (the names and meanings every Prometheus client
    library exports) of a :class:`~bpfmem.host.procfs.ProcessStats`; a figure not read is
    left out."""
    out = []
    for value, name, doc, kind in (
            (p.virtual, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
             "gauge"),
            (p.resident, "process_resident_memory_bytes", "Resident memory size in bytes.",
             "gauge"),
            (p.start_time, "process_start_time_seconds", "Start time of the process since "
             "unix epoch in seconds.", "gauge"),
            (p.cpu_seconds, "process_cpu_seconds", "Total user and system CPU time spent in "
             "seconds.", "counter"),
            (p.open_fds, "process_open_fds", "Number of open file descriptors.", "gauge"),
            (p.max_fds, "process_max_fds", "Maximum number of open file descriptors.",
             "gauge")):
        if value is not None:
            out.append(Family(name, doc, kind, samples=(((), float(value)),)))
    return out


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

    def __init__(self, float_text=go_float, families=MAP_FAMILIES):
        self._labels: dict[int, tuple[tuple, str]] = {}
        self._float = float_text
        self._floats: dict[float, str] = {}
        self.names = [name for name, _doc in families]
        self.families = families

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
        names = self.names
        buffers = [bytearray(f"# HELP {name} {_escape_help(doc, openmetrics)}\n"
                             f"# TYPE {name} gauge\n".encode())
                   for name, doc in self.families]
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

    def lines(self, rows: Iterable[tuple]) -> list[bytes]:
        """The samples of ``rows`` per family (five byte strings, one a family, no headers);
        the label sets are kept (:meth:`forget` drops those of maps gone)."""
        num = self._num
        names = self.names
        buffers = [bytearray() for _ in names]
        for row in rows:
            key = row[0]
            label = self._labelstr(int(key[0]), key)
            for buf, name, v in zip(buffers, names, row[1:]):
                if v is not None:
                    buf += f"{name}{label} {num(v)}\n".encode()
        return [bytes(b) for b in buffers]

    def drop(self, map_ids) -> None:
        """Drop the label sets of the maps ``map_ids``."""
        for gone in map_ids:
            self._labels.pop(gone, None)

    def forget(self, map_ids: set[int]) -> None:
        """Drop the label sets of maps not in ``map_ids``."""
        if len(self._labels) > len(map_ids):
            for gone in self._labels.keys() - map_ids:
                del self._labels[gone]


# ---- the gzipped page, from pieces kept between scans -------------------------------------
# A page is one gzip member whose deflate stream is a run of pieces, each compressed on its
# own and ended with a sync flush (a byte-aligned empty stored block, not final), then the
# page's last part, finished. Pieces hold no references to each other, so one compressed for
# an earlier page is valid in the next; the gzip trailer's CRC-32 of the whole text is put
# together from the pieces' own CRCs (crc(A+B) = crc(B) ^ crc(zeros(len B), crc(A)) ^
# crc(zeros(len B), 0): a CRC is affine in its initial value).
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x04\x03"   # deflate, no name, mtime 0, unix
_ZEROS = bytes(1 << 16)


def _crc_of_zeros(n: int, crc: int) -> int:
    view = memoryview(_ZEROS)
    while n > len(view):
        crc = zlib.crc32(view, crc)
        n -= len(view)
    return zlib.crc32(view[:n], crc)


class ZerosCrc:
    """Puts CRC-32s together as the comment above says, with the CRC of zeros: a piece's
    ``op`` is its size and the CRC of as many zeros from 0 (a combination costs a CRC over
    the piece's size in zeros). :class:`bpfmem.host.zcrc.ZlibCrc` is the same in O(1)."""

    @staticmethod
    def gen(size: int):
        return size, _crc_of_zeros(size, 0)

    @staticmethod
    def combine(crc1: int, crc2: int, op) -> int:
        """The CRC of text A then text B from crc(A) = ``crc1``, crc(B) = ``crc2`` and B's
        ``op``."""
        return crc2 ^ _crc_of_zeros(op[0], crc1) ^ op[1]


ZEROS_CRC = ZerosCrc()


class Piece:
    """A part of a page's text, deflated on its own (sync-flushed), with its CRC-32, size,
    and its ``op`` for putting CRCs together (``crc``'s: :class:`ZerosCrc`)."""
    __slots__ = ("data", "crc", "size", "op")

    def __init__(self, text: bytes, crc=ZEROS_CRC):
        z = zlib.compressobj(1, zlib.DEFLATED, -12, 4)   # pieces are a few KiB
        self.data = z.compress(text) + z.flush(zlib.Z_SYNC_FLUSH)
        self.crc = zlib.crc32(text)
        self.size = len(text)
        self.op = crc.gen(self.size)


def crc_of_pieces(pieces, crc: int = 0, combine=ZEROS_CRC.combine) -> int:
    """The CRC-32 of the pieces' texts one after the other (after ``crc``'s text); the
    pieces were made with the CRC of ``combine``."""
    for p in pieces:
        crc = combine(crc, p.crc, p.op)
    return crc


def gzip_of(pieces, crc: int, size: int, last: bytes, *, body: bytes | None = None,
            kept=(), combine=ZEROS_CRC.combine) -> bytes:
    """One gzip member: the ``pieces`` (whose texts have CRC-32 ``crc`` and ``size`` bytes
    together; ``body``: the gzip header and their data joined already), then the pieces
    ``kept`` (compressed before: a part of the page that did not change), then ``last``."""
    z = zlib.compressobj(1, zlib.DEFLATED, -15)
    tail = z.compress(last) + z.flush()
    for p in kept:
        crc = combine(crc, p.crc, p.op)
        size += p.size
    crc = zlib.crc32(last, crc)
    head = [body] if body is not None else [GZIP_HEADER, *(p.data for p in pieces)]
    return b"".join([*head, *(p.data for p in kept), tail,
                     struct.pack("<II", crc, (size + len(last)) & 0xFFFFFFFF)])


BLOCK_SHIFT = 5   # maps whose ids share id >> 5 (at most 32) are one block of the page


class MapPage:
    """The per-map families of a page, kept as compressed blocks between scans: a block is
    the maps whose ids share ``id >> BLOCK_SHIFT``; while a block holds the very same map
    records as at the last page (a rescan keeps the record of a map that did not change), its
    five compressed pieces (one a family) are used again, and only blocks with a new, changed
    or gone map are written and compressed. An unchanged node's page costs the other families
    alone; a map that changes costs its block."""

    def __init__(self, float_text=go_float, crc=ZEROS_CRC, families=MAP_FAMILIES):
        self.families = MapFamilies(float_text, families)
        self.crc = crc             # how the pieces' CRCs are put together (ZerosCrc)
        self._blocks: dict[int, tuple[tuple, list]] = {}
        self._heads: dict[bool, list[Piece]] = {}
        self._section: dict[bool, tuple[list, int, int]] = {}   # per format: the pieces,
        #                                    their CRC-32 and size, for the maps of _maps
        self._maps = None
        self._body: dict[bool, bytes] = {}   # per format: the header and section, joined
        self.written = 0       # blocks written for the last page (the others were kept)

    def _head(self, openmetrics: bool) -> list[Piece]:
        heads = self._heads.get(openmetrics)
        if heads is None:
            heads = self._heads[openmetrics] = [
                Piece(f"# HELP {name} {_escape_help(doc, openmetrics)}\n"
                      f"# TYPE {name} gauge\n".encode(), self.crc)
                for name, doc in self.families.families]
        return heads

    def gzip(self, maps, rows_of, rest: bytes, *, openmetrics: bool = False,
             kept=()) -> bytes:
        """The gzipped page: the per-map families of ``maps`` (records with an ``id``, in page
        order), then the :class:`Piece` s ``kept`` (families compressed before), then
        ``rest`` (the other families, already written). ``rows_of(maps)`` gives the rows of
        some maps as :meth:`MapFamilies.render` takes them."""
        if maps is self._maps and self._openmetrics_seen(openmetrics):
            self.written = 0       # the very records of the last page: every block as it was
            pieces, crc, size = self._section[openmetrics]
            body = self._body.get(openmetrics)
            if body is None:       # the section's bytes, joined once while it stands
                body = self._body[openmetrics] = b"".join(
                    [GZIP_HEADER, *(p.data for p in pieces)])
            return gzip_of(pieces, crc, size, rest, body=body, kept=kept,
                           combine=self.crc.combine)
        pieces, crc, size = self.section(maps, rows_of, openmetrics=openmetrics)
        return gzip_of(pieces, crc, size, rest, kept=kept, combine=self.crc.combine)

    def section(self, maps, rows_of, *, openmetrics: bool = False) -> tuple[list, int, int]:
        """(the compressed pieces, their texts' CRC-32 and size) of the families of ``maps``
        (records with an ``id``, in page order; ``rows_of`` as :meth:`gzip` takes it):
        the blocks whose records are the last call's very records are the last call's."""
        if maps is self._maps and self._openmetrics_seen(openmetrics):
            self.written = 0
            return self._section[openmetrics]
        old, blocks, written = self._blocks, {}, 0
        is_ = operator.is_
        order: list[int] = []
        before: set[int] = set()        # the ids of the blocks written anew, before and now
        now: set[int] = set()

        def close(key, group) -> None:
            nonlocal written
            group = tuple(group)
            hit = old.get(key)
            if hit is None or len(hit[0]) != len(group) or not all(map(is_, hit[0], group)):
                if hit is not None:
                    before.update(m.id for m in hit[0])
                now.update(m.id for m in group)
                hit = (group, [Piece(t, self.crc) if t else None
                               for t in self.families.lines(rows_of(group))])
                written += 1
            blocks[key] = hit
            order.append(key)

        maps = tuple(maps)
        ids = list(map(operator.attrgetter("id"), maps))
        start, n = 0, len(maps)
        while start < n:                 # a block: the maps of one id >> BLOCK_SHIFT
            key = ids[start] >> BLOCK_SHIFT
            end = bisect.bisect_left(ids, (key + 1) << BLOCK_SHIFT, start)
            close(key, maps[start:end])
            start = end
        self._blocks, self.written = blocks, written
        for key in old.keys() - blocks.keys():      # blocks gone whole
            before.update(m.id for m in old[key][0])
        self.families.drop(before - now)            # the label sets of maps gone
        heads = self._head(openmetrics)
        pieces = []
        for f, head in enumerate(heads):
            pieces.append(head)
            pieces.extend(p for k in order if (p := blocks[k][1][f]) is not None)
        last, crc, size = self._section.get(openmetrics, ((), 0, 0))
        if len(last) != len(pieces) or not all(map(is_, last, pieces)):
            crc = crc_of_pieces(pieces, combine=self.crc.combine)
            size = sum(p.size for p in pieces)
        if maps is not self._maps:
            self._section = {}
        self._section[openmetrics] = (pieces, crc, size)
        self._body = {}
        self._maps = maps
        return pieces, crc, size

    def _openmetrics_seen(self, openmetrics: bool) -> bool:
        return openmetrics in self._section
