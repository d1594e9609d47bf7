"""The one renderer table: (result type, format) -> the function that draws that result so.

A renderer takes a finished result and a text stream and writes; it computes nothing, reads no
file and never touches the kernel. Renderers live by format: ``text`` (terminal tables),
``markdown``, ``json`` (the documents of :mod:`.documents`, also JSON lines), ``junit``,
``html``. The table names them as ``"module:function"`` inside ``report/`` so a command imports
only the renderer it runs (JSON output never imports rich or plotly).
"""

from __future__ import annotations

from importlib import import_module

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import IO, Any

# (result type name, format) -> "module:function" of report/
RENDERERS: dict[tuple[str, str], str] = {
    # the file-reading commands (results of analysis/ and model/)
    ("Inventory", "text"): "text:maps_text",
    ("Inventory", "json"): "documents:render_json",
    ("Inventory", "markdown"): "markdown:maps_markdown",
    ("Footprint", "text"): "text:estimate_text",
    ("Footprint", "json"): "documents:render_json",
    ("CheckResult", "text"): "text:check_text",
    ("CheckResult", "json"): "documents:render_json",
    ("CheckResult", "markdown"): "markdown:check_markdown",
    ("CheckResult", "junit"): "junit:check_junit",
    ("CheckResult", "html"): "html:check_html",
    ("GateResult", "text"): "gate:gate_text",
    ("GateResult", "json"): "gate:gate_json",
    ("GateResult", "markdown"): "gate:gate_markdown",
    ("GateResult", "junit"): "gate:gate_junit",
    ("GateResult", "html"): "gate:gate_html",
    ("DiffResult", "text"): "text:diff_text",
    ("DiffResult", "json"): "documents:render_json",
    ("DiffResult", "markdown"): "markdown:diff_markdown",
    ("DiffResult", "html"): "html:diff_html",
    ("AdviseResult", "text"): "text:advise_text",
    ("AdviseResult", "json"): "documents:render_json",
    ("AdviseResult", "markdown"): "markdown:advise_markdown",
    ("MeasureResult", "text"): "text:measure_text",
    ("MeasureResult", "json"): "documents:render_json",
    ("Matrix", "text"): "text:matrix_text",
    ("Matrix", "json"): "documents:render_json",
    ("Matrix", "markdown"): "markdown:matrix_markdown",
    # the pod and size families (analysis/pod.py, analysis/size.py)
    ("PodView", "text"): "pod:pod_text",
    ("PodView", "json"): "documents:render_json",
    ("PodTrace", "text"): "pod:trace_text",
    ("PodTrace", "json"): "documents:render_json",
    ("PodTrace", "jsonl"): "pod:trace_jsonl",
    ("PodTrace", "html"): "pod:trace_html",
    ("SizeResult", "text"): "size:size_table",
    ("SizeResult", "json"): "documents:render_json",
    ("SizeResult", "markdown"): "size:size_markdown",
    ("SizeDiff", "text"): "size:diff_table",
    ("SizeDiff", "json"): "documents:render_json",
    ("SizeDiff", "markdown"): "size:diff_markdown",
    ("SizeDiff", "html"): "size:size_html",
    ("BinaryCheck", "text"): "size:check_table",
    ("BinaryCheck", "json"): "documents:render_json",
    ("BinaryCheck", "markdown"): "size:check_markdown",
    ("BinaryCheck", "junit"): "size:check_junit",
    # the live node (analysis/live.py)
    ("SnapshotView", "text"): "snapshot:render_table",
    ("SnapshotView", "json"): "snapshot:render_json",
    ("SnapshotView", "html"): "node_html:render_html",
    ("SnapshotDiff", "text"): "snapshot:render_diff_table",
    ("SnapshotDiff", "json"): "snapshot:render_json",
    ("SnapshotDiff", "markdown"): "snapshot:render_diff_markdown",
}


def formats_of(result_type: str) -> tuple[str, ...]:
    """The formats a result type can be rendered in, in the table's order."""
    return tuple(fmt for (kind, fmt) in RENDERERS if kind == result_type)


def renderer(result: Any, fmt: str):
    """The function that renders ``result`` as ``fmt`` (ValueError if there is none)."""
    kind = type(result).__name__
    try:
        where = RENDERERS[(kind, fmt)]
    except KeyError:
        known = ", ".join(formats_of(kind)) or "none"
        raise ValueError(f"{kind} has no {fmt} renderer (formats: {known})") from None
    module, _, function = where.partition(":")
    return getattr(import_module(f"{__package__}.{module}"), function)


def render(result: Any, fmt: str, out: IO[str], **options: Any) -> None:
    """Draw ``result`` as ``fmt`` on ``out``; ``options`` go to the renderer (width, ...)."""
    renderer(result, fmt)(result, out, **options)

#: the renderers that draw from the result's document because the same page also redraws
#: JSON saved before (every other renderer reads the typed result), with the reason
REDRAWS_SAVED_JSON: dict[tuple[str, str], str] = {
    ("PodTrace", "text"): "a trace saved as JSON lines is shown again (pod --from FILE)",
    ("PodTrace", "html"): "a trace saved as JSON lines is drawn again (pod --from FILE --plot PAGE)",
}
