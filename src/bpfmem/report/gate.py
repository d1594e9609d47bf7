"""``bpfmem check`` with every gate it ran (:class:`bpfmem.analysis.gate.GateResult`): each
gate drawn by its own renderer, one after the other; one gate alone is drawn exactly as that
gate's result is."""

from __future__ import annotations

import io

from .formats import render

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import IO, Any


def _parts(r, fmt: str, out: IO[str], options: dict[str, Any]) -> None:
    for i, part in enumerate(r.parts):
        if i:
            out.write("\n")
        # the maps gate takes the command's options (width, the JUnit timestamp); the binary
        # gate's renderers take none
        render(part, fmt, out, **(options if part is r.maps else {}))


def gate_text(r, out: IO[str], **options: Any) -> None:
    _parts(r, "text", out, options)
    if len(r.parts) > 1:
        verdict = "PASS" if r.passed else "FAIL"
        failed = [n for n, p in (("maps budget", r.maps), ("binary sizes", r.binaries))
                  if not p.passed]
        out.write(f"\n{verdict}  every gate: maps budget and binary sizes"
                  + (f" ({' and '.join(failed)} failed)" if failed else "") + "\n")


def gate_markdown(r, out: IO[str], **options: Any) -> None:
    _parts(r, "markdown", out, options)


def gate_html(r, out: IO[str], **options: Any) -> None:
    """The maps gate's page (the binary gate has none: the CLI refuses html with it)."""
    if r.binaries is not None or r.maps is None:
        raise ValueError("the binary gate renders table, json, markdown or junit")
    render(r.maps, "html", out, **options)


def gate_json(r, out: IO[str], **options: Any) -> None:
    if len(r.parts) == 1:
        render(r.parts[0], "json", out, **options)
        return
    from .documents import render_json
    render_json(r, out, **options)


def gate_junit(r, out: IO[str], **options: Any) -> None:
    """One JUnit report: each gate's test suites under one <testsuites>, the counts summed."""
    if len(r.parts) == 1:
        part = r.parts[0]
        render(part, "junit", out, **(options if part is r.maps else {}))
        return
    import xml.etree.ElementTree as ET
    roots = []
    for part in r.parts:
        buf = io.StringIO()
        render(part, "junit", buf, **(options if part is r.maps else {}))
        roots.append(ET.fromstring(buf.getvalue().encode()))
    root = ET.Element("testsuites", name="bpfmem check")
    for attr in ("tests", "failures", "errors"):
        root.set(attr, str(sum(int(x.get(attr, "0")) for x in roots)))
    root.set("time", f"{sum(float(x.get('time', '0')) for x in roots):.3f}")
    for i, suite in enumerate(s for x in roots for s in x.iter("testsuite")):
        suite.set("id", str(i))
        root.append(suite)
    ET.indent(root)
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    out.write(ET.tostring(root, encoding="unicode") + "\n")
