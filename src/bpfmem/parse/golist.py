"""The import graph of a Go program from ``go list -deps -json`` output (a stream of JSON
objects, one per package). Pure: it takes the text."""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..errors import ParseError


@dataclass(frozen=True)
class GoPackage:
    import_path: str
    name: str
    imports: tuple[str, ...]
    standard: bool
    module: str | None


@dataclass(frozen=True)
class ImportGraph:
    packages: dict[str, GoPackage]
    main: str                       # import path of the main package (the root)

    def edges(self):
        for p in self.packages.values():
            for q in p.imports:
                if q in self.packages:
                    yield p.import_path, q


def parse_go_list(text: str) -> ImportGraph:
    """The packages of a ``go list -deps -json`` run; the root is its main package (the last
    package named main: ``-deps`` lists a package after all it imports)."""
    dec = json.JSONDecoder()
    pkgs: dict[str, GoPackage] = {}
    main = None
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        try:
            obj, i = dec.raw_decode(text, i)
        except json.JSONDecodeError as e:
            raise ParseError(f"go list output is not a JSON stream: {e.msg}",
                             offset=e.pos) from None
        except RecursionError:
            raise ParseError("go list output: JSON nested too deeply", offset=i) from None
        if not isinstance(obj, dict) or not isinstance(obj.get("ImportPath"), str):
            raise ParseError("go list output: an object without ImportPath")
        if obj.get("Error") and not obj.get("GoFiles"):
            err = obj["Error"].get("Err") if isinstance(obj["Error"], dict) else obj["Error"]
            err = "".join(c if c.isprintable() else "?" for c in str(err)[:200])
            raise ParseError(f"go list: {obj['ImportPath'][:200]}: {err}")
        mod = obj.get("Module")
        raw_imports = obj.get("Imports") or []
        name = obj.get("Name", "")
        mod_path = mod.get("Path") if isinstance(mod, dict) else None
        if (not isinstance(raw_imports, list) or not all(isinstance(x, str) for x in raw_imports)
                or not isinstance(name, str) or not isinstance(mod_path, (str, type(None)))):
            raise ParseError(f"go list output: {obj['ImportPath'][:200]}: Imports, Name or "
                             "Module of the wrong type")
        # a cgo package imports the pseudo-package "C": what it links is runtime/cgo
        imports = tuple("runtime/cgo" if i == "C" else i for i in raw_imports)
        p = GoPackage(obj["ImportPath"], name, imports, bool(obj.get("Standard")), mod_path)
        pkgs[p.import_path] = p
        if p.name == "main":
            main = p.import_path
    if main is None:
        raise ParseError("go list found no main package (give --go-src the directory of the "
                         "program's main package)")
    return ImportGraph(pkgs, main)
