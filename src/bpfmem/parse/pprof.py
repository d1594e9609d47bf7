"""A pprof profile (``/debug/pprof/heap``): gzipped protobuf, decoded here without a protobuf
library (pure: bytes in).

Only what a heap profile's top list needs is read from ``profile.proto``: ``sample_type``
(1), ``sample`` (2: location ids, values), ``location`` (4: id, lines), ``function`` (5: id,
name), ``string_table`` (6) and ``default_sample_type`` (14). A location with several lines
is inlined code: its first line is the innermost function, as pprof counts it.

:func:`top_functions` mirrors ``go tool pprof -top`` at function granularity: a sample's
value is "flat" for the innermost function of its first location and "cum" once for every
distinct function on its stack.

A profile is hostile until read (any process of a pod can serve one): besides the byte
budget (:data:`MAX_PROFILE` decompressed), its counts are bounded -- samples, locations,
functions, strings, lines per location, locations per sample, values per sample -- and so is
the work of the top list (:data:`MAX_FRAMES` frames over all distinct stacks). Past a bound
it is a ParseError saying which, not minutes and gigabytes.
"""

from __future__ import annotations

import gzip
import io
import time
import zlib
from dataclasses import dataclass

from ..errors import ParseError
from ..units import format_size

__all__ = ["Profile", "TopFunction", "parse_pprof", "top_functions", "MAX_PROFILE"]

MAX_PROFILE = 64 << 20      # bytes of decompressed protobuf accepted
MAX_SAMPLES = 1 << 20       # a Go heap profile has one per allocation site: thousands
MAX_LOCATIONS = 1 << 20
MAX_FUNCTIONS = 1 << 20
MAX_STRINGS = 1 << 21
MAX_TYPES = 64              # sample types (a heap profile has 4)
MAX_LINES = 1024            # lines of one location (inlined frames)
MAX_STACK = 4096            # locations of one sample (Go records at most 128)
MAX_FRAMES = 1 << 22        # frames the top list walks over all distinct stacks
MAX_WORK = 1 << 22          # protobuf fields and packed integers decoded in all


@dataclass(frozen=True)
class Profile:
    sample_types: tuple[tuple[str, str], ...]        # (type, unit): ("inuse_space", "bytes")
    samples: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]   # (location ids, values)
    locations: dict                                  # id -> tuple of function ids, innermost first
    functions: dict                                  # id -> name
    default_sample_type: str | None

    def index_of(self, sample_type: str | None) -> int:
        names = [t for t, _u in self.sample_types]
        if not names:
            raise ParseError("no sample type in the profile", section="pprof")
        want = sample_type or self.default_sample_type
        if want is None:
            return len(names) - 1     # pprof's default: the last sample type
        if want not in names:
            raise ParseError(f"no sample type {want!r} in the profile (has {', '.join(names)})",
                             section="pprof")
        return names.index(want)


@dataclass(frozen=True)
class TopFunction:
    name: str
    flat: int
    cum: int


def _err(what: str, pos: int) -> ParseError:
    return ParseError(what, section="pprof", offset=pos)


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    n = len(buf)
    while True:
        if pos >= n:
            raise _err("truncated varint", pos)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise _err("varint longer than 10 bytes", pos)


class _Work:
    """What decoding may still cost: fields and integers (:data:`MAX_WORK`), and time (the
    caller's ``deadline``, a ``time.monotonic()`` value), checked every few thousand."""

    def __init__(self, deadline: float | None):
        self.left = MAX_WORK
        self.deadline = deadline
        self.tick = 0

    def spend(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise ParseError(f"over {MAX_WORK} fields and integers to decode",
                             section="pprof")
        self.tick += n
        if self.tick >= 1 << 14 and self.deadline is not None:
            self.tick = 0
            if time.monotonic() > self.deadline:
                raise ParseError("profile not decoded within its time bound",
                                 section="pprof")


def _fields(buf: bytes, work: _Work):
    """(field number, wire type, value) of one message; value is an int for varints and
    fixed widths, bytes for length-delimited fields."""
    pos, n = 0, len(buf)
    left = 0
    while pos < n:
        if left <= 0:
            work.spend(256)
            left = 256
        left -= 1
        key = buf[pos]          # one-byte varints (most keys and small values) inline
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            if pos < n and buf[pos] < 0x80:
                v, pos = buf[pos], pos + 1
            else:
                v, pos = _varint(buf, pos)
        elif wt == 1:
            if pos + 8 > n:
                raise _err("truncated fixed64", pos)
            v, pos = int.from_bytes(buf[pos:pos + 8], "little"), pos + 8
        elif wt == 2:
            if pos < n and buf[pos] < 0x80:
                ln, pos = buf[pos], pos + 1
            else:
                ln, pos = _varint(buf, pos)
            if ln > n - pos:
                raise _err(f"field {num} of {ln} bytes runs past its message", pos)
            v, pos = buf[pos:pos + ln], pos + ln
        elif wt == 5:
            if pos + 4 > n:
                raise _err("truncated fixed32", pos)
            v, pos = int.from_bytes(buf[pos:pos + 4], "little"), pos + 4
        else:
            raise _err(f"wire type {wt} (field {num})", pos)
        yield num, wt, v


def _ints(wt: int, v, out: list, work: _Work, signed: bool = False, most: int = MAX_STACK,
          what: str = "values") -> None:
    """A repeated integer field, packed (one length-delimited run) or not; at most
    ``most`` of them in ``out``."""
    if wt == 2 and len(v) > most * 10:
        raise ParseError(f"a sample with over {most} {what}", section="pprof")
    if wt == 2 and v.isascii():          # all one-byte varints: no loop in Python
        work.spend(len(v))
        out.extend(v)
    elif wt == 2:
        work.spend(len(v))
        pos = 0
        while pos < len(v):
            x, pos = _varint(v, pos)
            out.append(x - (1 << 64) if signed and x >= 1 << 63 else x)
            if len(out) > most:
                break
    elif wt == 0:
        out.append(v - (1 << 64) if signed and v >= 1 << 63 else v)
    if len(out) > most:
        raise ParseError(f"a sample with over {most} {what}", section="pprof")


def _over(what: str, most: int) -> ParseError:
    return ParseError(f"over {most} {what} in the profile", section="pprof")


def _decompress(data: bytes) -> bytes:
    if data[:2] != b"\x1f\x8b":
        return data
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as g:
            out = g.read(MAX_PROFILE + 1)
    except (OSError, EOFError, zlib.error) as e:
        raise ParseError(f"bad gzip: {e}", section="pprof") from None
    if len(out) > MAX_PROFILE:
        raise ParseError(f"profile larger than {format_size(MAX_PROFILE)} decompressed",
                         section="pprof")
    return out


def parse_pprof(data: bytes, deadline: float | None = None) -> Profile:
    """A profile from its bytes (gzipped or not). ParseError for anything else, and when
    decoding is not done by ``deadline`` (a ``time.monotonic()`` value)."""
    buf = _decompress(bytes(data))
    work = _Work(deadline)
    strings: list[str] = []
    types_raw: list[tuple[int, int]] = []
    samples_raw: list[tuple[bytes]] = []
    locations: dict[int, tuple[int, ...]] = {}
    functions_raw: dict[int, int] = {}
    default_type = None
    for num, wt, v in _fields(buf, work):
        if num == 6 and wt == 2:
            strings.append(bytes(v).decode(errors="replace"))
            if len(strings) > MAX_STRINGS:
                raise _over("strings", MAX_STRINGS)
        elif num == 1 and wt == 2:
            if len(types_raw) >= MAX_TYPES:
                raise _over("sample types", MAX_TYPES)
            t = u = 0
            for n2, w2, v2 in _fields(v, work):
                if n2 == 1 and w2 == 0:
                    t = v2
                elif n2 == 2 and w2 == 0:
                    u = v2
            types_raw.append((t, u))
        elif num == 2 and wt == 2:
            samples_raw.append(v)
            if len(samples_raw) > MAX_SAMPLES:
                raise _over("samples", MAX_SAMPLES)
        elif num == 4 and wt == 2:
            lid, funcs = 0, []
            for n2, w2, v2 in _fields(v, work):
                if n2 == 1 and w2 == 0:
                    lid = v2
                elif n2 == 4 and w2 == 2:
                    fid = next((v3 for n3, w3, v3 in _fields(v2, work) if n3 == 1 and w3 == 0), 0)
                    funcs.append(fid)
                    if len(funcs) > MAX_LINES:
                        raise ParseError(f"location {lid} with over {MAX_LINES} lines",
                                         section="pprof")
            locations[lid] = tuple(funcs)
            if len(locations) > MAX_LOCATIONS:
                raise _over("locations", MAX_LOCATIONS)
        elif num == 5 and wt == 2:
            fid = name = 0
            for n2, w2, v2 in _fields(v, work):
                if n2 == 1 and w2 == 0:
                    fid = v2
                elif n2 == 2 and w2 == 0:
                    name = v2
            functions_raw[fid] = name
            if len(functions_raw) > MAX_FUNCTIONS:
                raise _over("functions", MAX_FUNCTIONS)
        elif num == 14 and wt == 0:
            default_type = v
    if not strings and not samples_raw:
        raise ParseError("not a pprof profile (no strings, no samples)", section="pprof")

    def s(i: int) -> str:
        if not 0 <= i < len(strings):
            raise ParseError(f"string index {i} outside the table of {len(strings)}",
                             section="pprof")
        return strings[i]

    samples = []
    for raw in samples_raw:
        locs: list[int] = []
        vals: list[int] = []
        for n2, w2, v2 in _fields(raw, work):
            if n2 == 1:
                _ints(w2, v2, locs, work, most=MAX_STACK, what="locations")
            elif n2 == 2:
                _ints(w2, v2, vals, work, signed=True, most=MAX_TYPES, what="values")
        samples.append((tuple(locs), tuple(vals)))
    return Profile(tuple((s(t), s(u)) for t, u in types_raw), tuple(samples), locations,
                   {fid: s(n) for fid, n in functions_raw.items()},
                   s(default_type) if default_type else None)


def top_functions(prof: Profile, sample_type: str | None = None,
                  n: int | None = 10, deadline: float | None = None) -> list[TopFunction]:
    """Functions by flat value of ``sample_type`` (default: the profile's default, else the
    last type, as pprof chooses: ``inuse_space`` for a Go heap profile), largest first.
    ParseError past :data:`MAX_FRAMES` frames, or when not done by ``deadline``."""
    idx = prof.index_of(sample_type)
    by_stack: dict[tuple[int, ...], int] = {}   # a stack is walked once, however sampled
    for locs, vals in prof.samples:
        if idx >= len(vals):
            continue
        v = vals[idx]
        if v:
            by_stack[locs] = by_stack.get(locs, 0) + v
    flat: dict[str, int] = {}
    cum: dict[str, int] = {}
    frames = 0
    for locs, v in by_stack.items():
        stack = []
        for lid in locs:
            fids = prof.locations.get(lid, ())
            frames += len(fids) + 1
            if frames > MAX_FRAMES:
                raise ParseError(f"stacks of over {MAX_FRAMES} frames in all (the top list "
                                 "is not walked)", section="pprof")
            if deadline is not None and frames & 0xFFFF < len(fids) + 1 \
                    and time.monotonic() > deadline:
                raise ParseError("the top list not walked within its time bound",
                                 section="pprof")
            for fid in fids:
                stack.append(prof.functions.get(fid, f"<function {fid}>"))
        if not stack:
            stack = ["<unknown>"]
        flat[stack[0]] = flat.get(stack[0], 0) + v
        for name in set(stack):
            cum[name] = cum.get(name, 0) + v
    names = sorted(cum, key=lambda k: (-flat.get(k, 0), k))   # pprof's flat-then-name order
    out = [TopFunction(k, flat.get(k, 0), cum[k]) for k in names]
    return out if n is None else out[:n]
