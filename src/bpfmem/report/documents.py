"""Every versioned JSON document bpfmem writes, and the one place a finished result becomes one.

A document is what ``--format json`` prints and what scripts keep: its ``schema`` names it and
its version. Results (frozen values from ``analysis/``) never carry JSON; this module turns
each into its document, field by field. To find where a document's key comes from, start at
its ``*_document`` function here.
"""

from __future__ import annotations

from typing import Any, Callable

# every schema bpfmem writes (a document says which in its "schema" key)
MAPS = "bpfmem/maps/v1"
ESTIMATE = "bpfmem/estimate/v1"
CHECK = "bpfmem/check/v1"
DIFF = "bpfmem/diff/v1"
ADVISE = "bpfmem/advise/v1"
MEASURE = "bpfmem/measure/v1"
MATRIX = "bpfmem/matrix/v1"
SNAPSHOT = "bpfmem/snapshot/v1"
SNAPSHOT_DIFF = "bpfmem/snapshot-diff/v1"
POD = "bpfmem/pod/v1"
POD_TRACE = "bpfmem/pod-trace/v1"
SIZE = "bpfmem/size/v1"
SIZE_DIFF = "bpfmem/size-diff/v1"
BINARY_CHECK = "bpfmem/binary-check/v1"

# result type name -> the function below that makes its document (filled as results move here)
_MAKERS: dict[str, Callable[[Any], dict[str, Any]]] = {}


def maker(result_type: str):
    """Register the decorated function as the document maker of ``result_type``."""
    def register(fn):
        _MAKERS[result_type] = fn
        return fn
    return register


def document(result: Any) -> dict[str, Any]:
    """The versioned JSON document of a finished result."""
    try:
        make = _MAKERS[type(result).__name__]
    except KeyError:
        raise TypeError(f"no document for {type(result).__name__}") from None
    return make(result)
