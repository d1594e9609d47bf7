"""The package of a Go linker symbol, by the grammar the Go toolchain names symbols with.

A Go symbol is ``<import path>.<name>``; the import path's last element has its dots escaped
(``gopkg.in/yaml%2ev2.Marshal``), so the path ends at the first dot after its last element
starts. What makes that hard is what follows the dot, which may itself hold slashes:

  ``net/http.(*Client).Do``                       a method (pointer receiver)
  ``text/template.Template.text/template/parse.add``
                                                  a wrapper for an unexported method promoted
                                                  from an embedded type of another package
  ``pkg.F[go.shape.int]``, ``pkg.(*T[...]).M``    generic instances (``[`` never in a path)
  ``gopkg.in/square/go-jose.v2/jwt.Parse``        a dot in a middle element (not escaped)
  ``go.uber.org/zap.New``                         a host named go.*
  ``go.itab.*net/http.Header,io.Writer``          Go 1.19 linker data: ``go.`` + kind
  ``go:itab.*net/http.Header,io.Writer``          the same from Go 1.20 on (``go:``)
  ``type..eq.net/http.Cookie``, ``type:.eq.*``     the compiler's type functions
  ``type.*net/http.Client``, ``type:net/http.Client``   type descriptors

Pure string functions; the buckets for what has no package are the constants below.
"""

from __future__ import annotations

import re

#: buckets for what has no Go package of its own
TYPES = "(Go types)"
RUNTIME_DATA = "(Go linker data)"
C_CODE = "(C / assembly)"
UNNAMED = "(Go methods of unnamed types)"
FUNC_DATA = "(Go func data)"

#: the linker's own ``go.``/``go:`` symbol kinds (cmd/link, cmd/compile objabi names): a
#: name with one of these after the prefix is linker data, never a package on a go.* host
_GO_KINDS = ("itab.", "string.", "func.", "importpath.", "shape.", "info.", "cuinfo.",
             "map.", "weak.", "link.", "buildid", "builtin.", "interface", "constinfo.",
             "track.", "loc.", "range.", "debuglines.", "debugranges.", "plugin.",
             "typelink", "itablink", "fipsinfo")
_TYPE_FUNCS = ("type..eq.", "type:.eq.", "type..hash.", "type:.hash.")
#: the first element of a module path: lowercase ASCII, digits, dashes and at least one dot
_HOST = re.compile(r"[a-z0-9-]+(?:\.[a-z0-9-]+)+")
#: a middle path element's tail after a dot (``go-jose.v2/``): letters, digits, - _ ~ only
_ELEM_TAIL = re.compile(r"[A-Za-z0-9_~-]+")
_ARRAY = re.compile(r"^(\[[^\]]*\])+")
_UNNAMED_PREFIXES = ("struct {", "(*struct {", "interface {", "(*interface {", "func(",
                     "map[", "[]", "*struct {")


def path_end(name: str) -> int:
    """Index of the dot that ends the import path at the start of ``name``; -1 if none."""
    cut = name.find("[")
    end = len(name) if cut < 0 else cut
    i = 0
    first = True
    find = name.find
    while i < end:
        slash = find("/", i, end)
        elem_end = slash if slash >= 0 else end
        dot = find(".", i, elem_end)
        if dot < 0:
            if slash < 0:
                return -1
            i, first = slash + 1, False
            continue
        if slash >= 0:
            if first:
                # a host (github.com/, go.uber.org/) starts a path; a std or GOPATH path's
                # first element has no dot, so a dot there ends it (main.T.net/http.m)
                if _HOST.fullmatch(name, i, slash) and not name.startswith("main.", i):
                    i, first = slash + 1, False
                    continue
            elif _ELEM_TAIL.fullmatch(name, dot + 1, slash) and \
                    _ELEM_TAIL.fullmatch(name, i, dot) or (
                        name.endswith("/vendor/", 0, i) and _HOST.fullmatch(name, i, slash)):
                # a middle element with a dot (go-jose.v2/jwt), or a host after vendor/:
                # the path goes on; after a package a type name is followed by '.' or ')',
                # never by '/'
                i = slash + 1
                continue
        return dot
    return -1


def _fast_path_end(name: str) -> int:
    """:func:`path_end`, without its element walk for the usual names: no dot between the
    first and the last slash, and a first element that is a host or has no dot."""
    cut = name.find("[")
    base = name if cut < 0 else name[:cut]
    last = base.rfind("/")
    if last < 0:
        return base.find(".")
    first = base.find("/")
    if base.find(".", first, last) < 0:
        d = base.find(".", 0, first)
        if d < 0 or _HOST.fullmatch(base, 0, first) and not base.startswith("main."):
            return base.find(".", last + 1)
    return path_end(name)


def _unescape(path: str) -> str:
    if "%" not in path:
        return path
    return re.sub(r"%([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), path)


def package_of(name: str) -> str:
    """The Go package a function or data symbol belongs to, from its linker name (see the
    module docstring); a bucket name in parentheses for what has none."""
    c = name[:1]
    if c == "t" and name.startswith(("type:", "type.")):
        # the compiler's equality and hash functions of a type belong to its package
        for pre in _TYPE_FUNCS:
            if name.startswith(pre):
                pkg = package_of(_ARRAY.sub("", name[len(pre):].lstrip("*")))
                return pkg if not pkg.startswith("(") else TYPES
        return type_package(name[5:])
    if c == "g":
        if name.startswith(("go:", "go.")):
            rest = name[3:]
            if rest.startswith("itab."):
                # an itab belongs with its concrete type: go.itab.*T,I
                pkg = package_of(_first_type(rest[5:]).lstrip("*"))
                return pkg if not pkg.startswith("(") else TYPES
            if rest.startswith("importpath."):
                pkg = rest[11:].rstrip(".")
                return _unescape(pkg) if pkg else RUNTIME_DATA
            if rest.startswith(_GO_KINDS) or name[2] == ":" or not _on_go_host(name):
                if rest.startswith(_UNNAMED_PREFIXES):
                    return UNNAMED
                return RUNTIME_DATA
        elif name.startswith(("gclocals\u00b7", "gcargs\u00b7")):
            return FUNC_DATA
    elif c == "$":          # the compiler's constants: $f64.3ff0000000000000
        return RUNTIME_DATA
    if name.startswith(_UNNAMED_PREFIXES):
        return UNNAMED
    dot = _fast_path_end(name)
    if dot <= 0:
        return C_CODE
    if dot == 1 and c == "_":   # the runtime's linknamed closures: _.goready.func1
        return RUNTIME_DATA
    return _unescape(name[:dot])


#: what makes a type from another: pointer, slice, array, channel
_COMPOSITE = re.compile(r"^(?:\*|\[\]|\[[0-9]+\]|chan<- |<-chan |chan )+")


def type_package(t: str) -> str:
    """The package of a type descriptor named ``t`` (a type symbol less its ``type:``
    prefix): a named type's, or that of the named type a pointer, slice, array or channel
    is made of; TYPES for the rest (maps, funcs, structs, interfaces, the linker's type data
    such as ``.namedata.`` and ``.importpath.``)."""
    if t[:1] in "*[c<":
        m = _COMPOSITE.match(t)
        if m:
            t = t[m.end():]
    if t[:1] == "." or t.startswith(_UNNAMED_PREFIXES) or t.startswith(("map[", "func(",
                                                                          "go.", "go:")):
        return TYPES
    dot = path_end(t)
    if dot <= 0:
        return TYPES          # a predeclared type: int, string, error, unsafe.Pointer
    pkg = _unescape(t[:dot])
    return TYPES if pkg == "unsafe" else pkg


def _on_go_host(name: str) -> bool:
    """A package path on a host named go.* (go.uber.org/zap, go.etcd.io/bbolt)."""
    slash = name.find("/")
    return slash > 0 and _HOST.fullmatch(name, 0, slash) is not None


def _first_type(s: str) -> str:
    """The first of the comma-separated types of an itab name (commas inside brackets and
    parentheses belong to the type)."""
    depth = 0
    for k, ch in enumerate(s):
        if ch in "[({":
            depth += 1
        elif ch in "])}":
            depth -= 1
        elif ch == "," and depth == 0:
            return s[:k]
    return s


#: what :func:`package_of` gives, by a pattern, for the forms most names of a large binary
#: have: a function, variable, type function (``type..eq.``) or itab whose import path is
#: plain elements (a host or a dotless first one, then dotless ones, ones of one dot between
#: letters such as go-jose.v2, a host after vendor/; no escapes) and whose rest has no slash
#: before its type arguments (an itab's type: no brackets before its comma); and a type
#: descriptor's hashed name (``type.r+29J2dQ``, Go 1.19's stripped binaries), which names
#: no type: TYPES. The rest goes to :func:`package_of`.
_ELEM = r"[A-Za-z0-9_~+-]++"
_TAIL = r"[A-Za-z0-9_~-]++"
# not possessive: Debian 12's Python 3.11.2 matches a possessive repeat of a group that holds
# a possessive repeat wrongly ("b.c./b.c,main.hash" read as in package "b.c./b", not "b";
# 3.11.7 right)
_HOSTNAME = r"[a-z0-9-]+(?:\.[a-z0-9-]+)+"
_PATH = (rf"(?!type[.:]|go[.:]|_\.|main\.)((?>(?>{_ELEM}/|{_HOSTNAME}/)"
         rf"(?>(?:{_ELEM}|{_TAIL}\.{_TAIL}|(?<=/vendor/){_HOSTNAME})/)*)?{_ELEM})\.")
_PLAIN = rf"(?:type[.:]\.(?:eq|hash)\.\**(?:\[[^\]]*\])*)?{_PATH}[^/\[]*+(?:\[|\Z)"
_ITAB = rf"go[.:]itab\.\**{_PATH}[^/\[\](){{}},]*+,"
_HASHED = r"type[.:](?:\.(?!eq\.|hash\.)|[A-Za-z0-9+/]*\Z)"
#: the three in one pattern (one call a name; they exclude one another, the hashed names,
#: half of a stripped PIE's dynamic symbols, tried first): group 1 the package of the first
#: form, group 2 of an itab; neither when it is a hashed type name
_USUAL = re.compile(f"{_HASHED}|{_PLAIN}|{_ITAB}")


def packages_of(names) -> list[str]:
    """:func:`package_of` of each of ``names``, in one pass: the usual forms by a pattern,
    and a name that starts with the plain package the one before it had, then has no slash
    before its type arguments, in that package (a binary lists a package's functions
    together). Equal packages are one string."""
    out: list[str] = []
    add = out.append
    one: dict[str, str] = {}
    intern = one.setdefault
    usual = _USUAL.match
    pfx = "\0"          # no name starts with it
    n = 1
    pkg = ""
    for name in names:
        if name.startswith(pfx):
            s = name.find("/", n)
            if s < 0 or 0 <= name.find("[", n) < s:
                add(pkg)
                continue
        m = usual(name)
        if m is not None:
            got = m[1] or m[2]
            if got is None:             # a hashed type name
                add(TYPES)
                continue
            pkg = intern(got, got)
            pfx = pkg + "."
            n = len(pfx)
            add(pkg)
        else:
            p = package_of(name)
            add(intern(p, p))
    return out
