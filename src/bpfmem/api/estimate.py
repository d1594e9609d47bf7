"""The model of one map shape, and ``estimate --batch`` (one JSON spec per line)."""

from __future__ import annotations

from typing import IO, Iterable

from ..analysis.batch import MEMO, BatchError, batch_results
from ..inputs import input_lines
from ..model.estimate import Footprint, estimate
from ..model.kernel import KernelProfile
from ..model.shape import MapShape
from ..parse.jsonlines import parse_json_lines
from ..report.documents import batch_error_line, batch_line
from ..uapi import MapType, parse_flags


def shape_from_args(type_name: str, key_size: int, value_size: int, max_entries: int,
                    flags: str | int = 0, map_extra: int = 0) -> MapShape:
    """A MapShape from people's spellings ('lru_hash', 'no_prealloc,numa_node')."""
    return MapShape(int(MapType.from_name(type_name)), key_size, value_size, max_entries,
                    parse_flags(flags) if flags not in ("", None) else 0, map_extra)


def estimate_map(shape: MapShape, profile: KernelProfile, entries: int = 0) -> Footprint:
    """The Footprint of one map shape on ``profile`` (:func:`bpfmem.api.profile`)."""
    return estimate(shape, profile, entries)


def estimate_batch_stream(lines: Iterable[str], out: IO[str], profile: KernelProfile) -> int:
    """``bpfmem estimate --batch``: one JSON spec per line in, one JSON result per line out,
    in the same order. A bad line gives {"error": ...} on its line. Returns 1 when a line
    was bad, else 0 (the command's exit status).

    Capacity plans repeat shapes, so a result line is built once per distinct spec."""
    from dataclasses import replace
    makers: dict = {}           # possible CPUs of the line -> its result line maker

    def result_text(key, fp):
        cpus = key[7] if len(key) > 7 else None
        make = makers.get(cpus)
        if make is None:
            prof = profile if cpus is None else replace(profile, possible_cpus=cpus)
            make = makers[cpus] = batch_line(prof.describe())
        return make(fp)
    texts: dict[tuple, str] = {}
    status = 0
    write = out.write
    for key, r in batch_results(parse_json_lines(lines), profile):
        if isinstance(r, BatchError):
            status = 1
            write(batch_error_line(r.line, r.message))
            continue
        text = texts.get(key)
        if text is None:
            text = result_text(key, r)
            if len(texts) < MEMO:
                texts[key] = text
        write(text)
    return status


def read_lines(path: str):
    """The lines of a text file users give (``estimate --batch FILE``), bounded per line."""
    return input_lines(path)
