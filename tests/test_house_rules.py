"""House rules that were kept by convention, checked from the source (beside the import
contract of tests/test_layers.py):

- analysis/ names no command-line flag: a message it returns says what to do, the CLI and
  report layers say how to type it (report/hints.py words a Hinted note's remedy). Docstrings
  may name flags (they document, they are never shown); every other string may not.
- every renderer of the one renderer table (report/formats.RENDERERS) takes the typed result:
  it never draws from the result's JSON document, except the JSON renderers themselves and
  the pages that also redraw saved JSON (report/formats.REDRAWS_SAVED_JSON).
- analysis/ and model/ read no bytes: a format is decoded in parse/ (one reader per format),
  so neither imports struct nor casts or unpacks a buffer."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "bpfmem"
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if (n.body and isinstance(n.body[0], ast.Expr)
                    and isinstance(n.body[0].value, ast.Constant)
                    and isinstance(n.body[0].value.value, str)):
                out.add(id(n.body[0].value))
    return out


def flag_names(source: str, name: str = "<source>") -> list[str]:
    """``name:line --flag`` for every flag spelled in a string of ``source`` that is no
    docstring (f-strings' literal parts included)."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    return [f"{name}:{n.lineno} {m.group()}" for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
            for m in FLAG.finditer(n.value)]


def test_analysis_names_no_flag():
    found = [hit for p in sorted((PACKAGE / "analysis").rglob("*.py"))
             for hit in flag_names(p.read_text(), str(p.relative_to(PACKAGE)))]
    assert found == []


def test_the_flag_check_sees_what_it_must():
    source = '''"""A docstring may say --set."""
def f(name, kp):
    """So may this one: --interval."""
    a = f"price it: --set '{name}.max_entries=N'"
    b = "sample faster with " + "--interval"
    c = "a range 1--2, a dash -- alone, -x"
    return a, b, c
'''
    assert flag_names(source) == ["<source>:4 --set", "<source>:5 --interval"]


def test_hinted_notes_are_worded_by_the_report_layer():
    """The remedy of every kind of Hinted note has its words in report/hints.WORDS, and a
    note reads without them as a plain string."""
    from bpfmem.analysis import hints
    from bpfmem.report.hints import WORDS, word
    kinds = {v for k, v in vars(hints).items() if k.isupper() and isinstance(v, str)}
    assert kinds == set(WORDS)
    n = hints.Hinted("price the real size", hints.RESIZE, "flows")
    assert n == "price the real size" and "--" not in n
    assert word(n) == "price the real size: --set 'flows.max_entries=N'"
    assert word("plain") == "plain"


# -- renderers take typed results --------------------------------------------------------------

def _calls_document(tree: ast.Module, function: str) -> list[str]:
    """The functions of the module reached from ``function`` (calls by plain name within the
    module) that call ``document`` or a ``*_document`` maker."""
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    seen, todo, bad = set(), [function], []
    while todo:
        f = todo.pop()
        if f in seen or f not in defs:
            continue
        seen.add(f)
        for n in ast.walk(defs[f]):
            if isinstance(n, ast.Call):
                name = (n.func.id if isinstance(n.func, ast.Name)
                        else n.func.attr if isinstance(n.func, ast.Attribute) else "")
                if name == "document" or name.endswith("_document"):
                    bad.append(f)
                todo.append(name)
    return bad


def renderers_drawing_documents(renderers: dict, exempt: set, read) -> list[str]:
    out = []
    for (kind, fmt), where in sorted(renderers.items()):
        if fmt in ("json", "jsonl") or (kind, fmt) in exempt:
            continue
        module, _, function = where.partition(":")
        if _calls_document(ast.parse(read(module)), function):
            out.append(f"{kind} {fmt}: {where}")
    return out


#: renderers known to draw from the document though no page redraws that saved JSON, each
#: with the change that removes it
PENDING: dict[str, str] = {}


def test_every_renderer_takes_the_typed_result():
    from bpfmem.report.formats import REDRAWS_SAVED_JSON, RENDERERS

    def read(module):
        return (PACKAGE / "report" / f"{module}.py").read_text()
    # the pending ones still draw from documents (when one stops, it leaves PENDING)
    assert renderers_drawing_documents(RENDERERS, REDRAWS_SAVED_JSON, read) == sorted(PENDING)
    # the exemptions are renderers of the table, each with its reason
    assert set(REDRAWS_SAVED_JSON) <= set(RENDERERS)
    assert all(isinstance(why, str) and why for why in REDRAWS_SAVED_JSON.values())


def test_the_renderer_check_sees_what_it_must():
    source = {"a": '''
from .documents import document
def page(result, out):
    out.write(_draw(result))
def _draw(result):
    return str(document(result))
def typed(result, out):
    out.write(result.name)
'''}
    table = {("X", "html"): "a:page", ("X", "text"): "a:typed", ("X", "json"): "a:page"}
    assert renderers_drawing_documents(table, set(), source.__getitem__) == ["X html: a:page"]
    assert renderers_drawing_documents(table, {("X", "html")}, source.__getitem__) == []


_BYTES = re.compile(r"^\s*(?:import struct|from struct import)|\bstruct\.(?:un)?pack|\bstruct\.Struct|"
                    r"\bstruct\.iter_unpack|\.cast\(|"
                    r"\bunpack(?:_from)?\(|int\.from_bytes\(", re.M)


def byte_reading(source: str, name: str = "<source>") -> list[str]:
    """``name:line`` of every line where ``source`` decodes bytes itself."""
    lines = sorted({source.count("\n", 0, m.start()) + 1 for m in _BYTES.finditer(source)})
    return [f"{name}:{n}" for n in lines]


def test_analysis_and_model_read_no_bytes():
    found = [hit for layer in ("analysis", "model")
             for p in sorted((PACKAGE / layer).rglob("*.py"))
             for hit in byte_reading(p.read_text(), str(p.relative_to(PACKAGE)))]
    assert found == []


def test_the_byte_check_sees_what_it_must():
    source = ("import struct\nx = struct.unpack_from('<I', b, 0)\n"
              "y = memoryview(b).cast('Q')\nz = int.from_bytes(b[:4], 'little')\n")
    assert byte_reading(source + "# a struct.member in a comment\n") == [
        "<source>:1", "<source>:2", "<source>:3", "<source>:4"]
