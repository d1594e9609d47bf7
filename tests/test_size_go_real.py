"""`bpfmem size` on real Go binaries nobody here built (tests/goreal.py lists them and the
oracles): every package row is a real package of the binary, ``--by module`` lists no linker
data, and each package's code is what Go's own debug/gosym reads from the pclntab, to the byte.
"""

from __future__ import annotations

import pytest

from bpfmem import api
from bpfmem.parse.gobin import package_of
from goreal import (build_pclnfuncs, known_packages, pclntab_funcs, real_binaries,
                    std_packages, toolchain_for)

BINARIES = real_binaries()
pytestmark = pytest.mark.skipif(not BINARIES, reason="no real Go binaries here (tests/run)")


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("goreal")
    return tmp, build_pclnfuncs(tmp)


@pytest.fixture(scope="module")
def reports():
    return {}


def _report(reports, name):
    if name not in reports:
        reports[name] = api.load_binary_size(BINARIES[name])
    return reports[name]


@pytest.mark.parametrize("name", sorted(BINARIES))
def test_every_row_is_a_real_package(name, oracle, reports):
    tmp, _tool = oracle
    rep = _report(reports, name)
    go = toolchain_for(rep.go_version)
    if go is None:
        pytest.skip(f"no {rep.go_version} toolchain here for its standard library list")
    real = known_packages(rep, BINARIES[name], std_packages(go, tmp))
    rows = [r for r in rep.group("package") if not r.name.startswith("(")]
    bogus = {r.name: r.file for r in rows if not real(r.name)}
    total = sum(r.file for r in rows)
    print(f"{name}: {len(rows)} package rows, {len(bogus)} not real "
          f"({sum(bogus.values())} of {total} bytes)")
    assert not bogus, sorted(bogus.items(), key=lambda kv: -kv[1])[:20]
    assert len(rows) > 100
    mods = [r.name for r in rep.group("module")]
    assert not [m for m in mods if m.startswith(("go.itab", "go:", "go.string", "type"))]


@pytest.mark.parametrize("name", sorted(BINARIES))
def test_code_per_package_is_the_pclntab_extents(name, oracle, reports):
    _tmp, tool = oracle
    rep = _report(reports, name)
    theirs: dict[str, int] = {}
    funcs = pclntab_funcs(tool, BINARIES[name])
    for entry, end, fn in funcs:
        pkg = package_of(fn)
        theirs[pkg] = theirs.get(pkg, 0) + end - entry
    ours: dict[str, int] = {}
    for p in rep.pieces:
        if p[0] == ".text" and p[2] != p[0]:
            ours[p[1]] = ours.get(p[1], 0) + p[3]
    go_pk = {k for k in theirs if not k.startswith("(")}
    wrong = {k: (ours.get(k, 0), theirs[k]) for k in go_pk if ours.get(k, 0) != theirs[k]}
    print(f"{name}: {len(funcs)} functions, {len(go_pk)} packages, {len(wrong)} differ")
    assert not wrong, sorted(wrong.items())[:20]
    assert rep.functions == len(funcs)


@pytest.mark.parametrize("name", [n for n in sorted(BINARIES) if n.endswith("-new")])
def test_funcdata_inside_the_pclntab_goes_to_functions(name, reports):
    """Go 1.26+ puts the functions' funcdata (stack maps, ...) inside .gopclntab, after the
    _func records: it goes to each function's package, and what stays in the pclntab's own
    bucket under "functab" is the function index (8 bytes a function) and the records'
    alignment (under 8 bytes each)."""
    rep = _report(reports, name)
    assert sum(p[3] for p in rep.pieces) == rep.file_size
    rest = {p[2]: p[3] for p in rep.pieces if p[1] == "(Go pclntab)"}
    print(f"{name}: pclntab rest {rest}")
    assert rest["pclntab functab"] <= rep.functions * 15 + 4
    assert "pclntab funcdata" not in rest or rest["pclntab funcdata"] < 64 * 1024
    pcln = sum(p[3] for p in rep.pieces if p[0] == ".gopclntab")
    on_packages = sum(p[3] for p in rep.pieces if p[0] == ".gopclntab" and
                      not p[1].startswith("("))
    assert on_packages > 0.85 * pcln
