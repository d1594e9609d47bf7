"""JSON lines (one JSON value per line, blank lines skipped): ``bpfmem estimate --batch``'s
input, and a pod trace saved as JSON lines."""

from __future__ import annotations

import json
from itertools import islice
from typing import Any, Iterable, Iterator


def parse_json_lines(lines: Iterable[str], chunk: int = 8192) -> Iterator[tuple[int, Any]]:
    """(line number, decoded value or the ValueError that line raised) for each non-blank
    line. A chunk of lines is decoded with one ``json.loads`` (line by line only when the
    chunk holds a bad line): decoding dominates a batch of cheap estimates."""
    it = iter(enumerate(lines, 1))
    while True:
        raw = list(islice(it, chunk))
        if not raw:
            return
        block = [(n, line) for n, line in raw if line.strip()]
        if not block:
            continue
        try:
            values = json.loads("[" + ",".join(line for _, line in block) + "]")
            if len(values) != len(block):
                raise ValueError("line count")
        except (ValueError, RecursionError):
            values = []
            for _, line in block:
                try:
                    values.append(json.loads(line))
                except ValueError as e:
                    values.append(e)
                except RecursionError:
                    values.append(ValueError("nested too deeply"))
        yield from zip((n for n, _ in block), values)


def parse_trace_jsonl(lines: Iterable[str]) -> dict[str, Any]:
    """A ``bpfmem pod --trace -o FILE.jsonl`` trace back as its ``bpfmem/pod-trace/v1``
    document (header, samples, summary lines)."""
    doc: dict[str, Any] = {"samples": []}
    for line in lines:
        if not line.strip():
            continue
        d = json.loads(line)
        kind = d.pop("kind", None)
        if kind == "header":
            doc.update(d)
        elif kind == "sample":
            doc["samples"].append(d)
        elif kind == "summary":
            doc["summary"] = d.get("summary")
            doc["at_peak"] = d.get("at_peak")
    return doc
