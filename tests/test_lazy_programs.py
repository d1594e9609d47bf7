"""Parsing without the program list (``parse_object(programs=False)``, ``maps --no-programs``,
``check``, ``diff``): the same maps, notes, refusals and totals as the full parse, for every
object the tests hold and every loader; the program list is then None ("not read"), never
an empty tuple; and the commands that never show programs do not decode them."""

from __future__ import annotations

import io
import json
import struct
from contextlib import redirect_stdout
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, HERE
from bpfmem import api
from bpfmem.cli import main
from bpfmem.errors import ParseError
from bpfmem.parse import objspec, programs
from bpfmem.parse.elf import SHT_REL, ElfFile
from bpfmem.parse.objspec import parse_object

EXAMPLES = HERE.parent / "src" / "bpfmem" / "examples"
OBJECTS = sorted({*FIXTURES.rglob("*.o"), *(HERE / "data").rglob("*.o"), *EXAMPLES.glob("*.o")})
LOADERS = ("libbpf", "cilium-ebpf", "cilium-ebpf@0.9", "auto")
DATA = {p: p.read_bytes() for p in OBJECTS}


def outcome(data: bytes, path: str, loader: str, *, programs: bool):
    """The spec, or the refusal's message."""
    try:
        return parse_object(data, path=path, loader=loader, programs=programs)
    except ParseError as e:
        return f"refused: {e}"


def assert_same(data: bytes, path: str, loader: str) -> objspec.ObjectSpec | str:
    full = outcome(data, path, loader, programs=True)
    lazy = outcome(data, path, loader, programs=False)
    if isinstance(full, str):
        assert lazy == full
        return full
    assert not isinstance(lazy, str), lazy
    assert lazy.programs is None                       # not read, not "no programs"
    assert full.programs is not None
    assert lazy == replace(full, programs=None)       # every other field, maps and notes
    return full


def test_every_object_is_covered():
    names = {p.name for p in OBJECTS}
    assert len(OBJECTS) >= 60
    assert {"large_synthetic.o", "cni_datapath.bpf.o", "kconfig.o", "struct_ops.o",
            "prog_array.o"} <= names
    assert any(p.is_relative_to(HERE / "data") for p in OBJECTS)


@pytest.mark.parametrize("loader", LOADERS)
def test_lazy_spec_equals_full_spec(loader):
    specs = refused = 0
    for path, data in DATA.items():
        r = assert_same(data, str(path), loader)
        if isinstance(r, str):
            refused += 1
        else:
            specs += 1
    assert specs >= 20     # the comparison ran on real specs, not only on refusals
    if loader == "cilium-ebpf@0.9":
        assert refused     # and on refusals (0.9.1 refuses .kconfig and more)


def _reads_programs(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = objspec.read_programs

    def counting(*a, **kw):
        calls.append(1)
        return real(*a, **kw)
    monkeypatch.setattr(objspec, "read_programs", counting)
    return calls


def test_no_programs_decodes_no_program(monkeypatch):
    calls = _reads_programs(monkeypatch)
    for name in ("large_synthetic.o", "prog_array.o", "struct_ops.o", "map_in_map.o"):
        parse_object(DATA[FIXTURES / name], path=name, programs=False)
    assert calls == []
    parse_object(DATA[FIXTURES / "prog_array.o"], path="prog_array.o")
    assert calls == [1]


def test_kconfig_per_program_reads_the_programs_it_needs(monkeypatch):
    """cilium/ebpf makes .kconfig once per program reading it: that count needs the
    programs, so they are read (and still not returned)."""
    calls = _reads_programs(monkeypatch)
    path = FIXTURES / "bpf2go" / "kconfig_readers_bpfel.o"
    lazy = parse_object(DATA[path], path=str(path), loader="cilium-ebpf", programs=False)
    assert calls == [1] and lazy.programs is None
    full = parse_object(DATA[path], path=str(path), loader="cilium-ebpf")
    readers = [p.name for p in full.programs if ".kconfig" in p.maps]
    assert len(readers) >= 2 and lazy.map(".kconfig") == full.map(".kconfig")
    assert lazy.map(".kconfig").instances == len(readers)
    lazy_lib = parse_object(DATA[path], path=str(path), loader="libbpf", programs=False)
    assert len(calls) == 2 and lazy_lib.programs is None   # libbpf: one map, no programs read


def _corrupted(data: bytes) -> list[tuple[str, bytes]]:
    """Variants whose program relocations are broken one way each: an offset misaligned or
    past the section, a symbol index out of the table, a symbol that is a map section's
    but no map (its section symbol at offset 0 is no map when the first map is elsewhere)."""
    elf = ElfFile(data)
    out = []
    execs = {s.index for s in elf.sections if s.is_exec}
    syms = elf.symbols
    for rsec in elf.relocation_sections():
        if rsec.type != SHT_REL or rsec.info not in execs or rsec.size < 16:
            continue
        for k in (0, rsec.size // 16 - 1):
            at = rsec.offset + 16 * k
            off, info = struct.unpack_from("<QQ", data, at)
            for what, new in (("misaligned", (off + 4, info)),
                              ("past the end", (elf.sections[rsec.info].size, info)),
                              ("symbol out of range", (off, (len(syms) + 7) << 32 | info & 0xFFFFFFFF)),
                              ("unknown symbol 0", (off, info & 0xFFFFFFFF))):
                b = bytearray(data)
                struct.pack_into("<QQ", b, at, *new)
                out.append((f"{rsec.name}[{k}] {what}", bytes(b)))
            # point it at each symbol of a map section (maps or not, in or outside a function)
            for i, s in enumerate(syms):
                if s.shndx < len(elf.sections) and elf.sections[s.shndx].name in (".maps", "maps"):
                    b = bytearray(data)
                    struct.pack_into("<QQ", b, at, off, i << 32 | info & 0xFFFFFFFF)
                    out.append((f"{rsec.name}[{k}] -> {s.name or 'section'}", bytes(b)))
            # a symbol inside .maps where no map starts: the file symbol moved there
            maps_idx = next((x.index for x in elf.sections if x.name == ".maps"), None)
            file_sym = next((i for i, x in enumerate(syms) if x.type == 4), None)  # STT_FILE
            if maps_idx is not None and file_sym is not None:
                b = bytearray(data)
                at_sym = elf.symtab.offset + 24 * file_sym
                struct.pack_into("<HQ", b, at_sym + 6, maps_idx, 4)  # st_shndx, st_value
                struct.pack_into("<QQ", b, at, off, file_sym << 32 | info & 0xFFFFFFFF)
                out.append((f"{rsec.name}[{k}] -> .maps+4", bytes(b)))
    return out


@pytest.mark.parametrize("name", ["map_in_map.o", "legacy_bpf_map_def.o", "prog_array.o",
                                  "callbacks.o", "struct_ops.o", "global_data.o", "kconfig.o"])
def test_broken_relocations_refuse_alike(name):
    variants = _corrupted(DATA[FIXTURES / name])
    assert variants
    refusals = []
    for what, data in variants:
        for loader in ("libbpf", "cilium-ebpf", "cilium-ebpf@0.9"):
            r = assert_same(data, f"{name} {what}", loader)
            if isinstance(r, str):
                refusals.append(r)
    assert refusals   # some of the variants are refused, and refused with the same words
    if name in ("map_in_map.o", "prog_array.o"):
        assert any("matches no map" in r for r in refusals)


@st.composite
def mutated(draw):
    data = bytearray(draw(st.sampled_from([d for p, d in DATA.items()
                                           if len(d) < 64 * 1024 and p.parent == FIXTURES])))
    for _ in range(draw(st.integers(1, 6))):
        pos = draw(st.integers(0, len(data) - 4))
        if draw(st.booleans()):
            data[pos] ^= 1 << draw(st.integers(0, 7))
        else:
            data[pos:pos + 4] = draw(st.integers(0, 2**32 - 1)).to_bytes(4, "little")
    return bytes(data)


@settings(max_examples=150, deadline=timedelta(seconds=2),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated(), st.sampled_from(LOADERS[:3]))
def test_mutated_objects_alike(data, loader):
    try:
        assert_same(data, "fuzz.o", loader)
    except RecursionError:
        pytest.skip("both parses hit the same nesting limit")


def test_api_load_object_programs_false():
    spec = api.load_object(api.example_object_path(), programs=False)
    assert spec.programs is None
    assert spec == replace(api.load_object(api.example_object_path()), programs=None)
    with pytest.raises(ValueError, match="code=True needs the programs"):
        api.load_object(api.example_object_path(), code=True, programs=False)


def run_cli(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(argv)
    return code, out.getvalue()


KERNEL = ["--kernel", "6.6", "--cpus", "8"]


def test_maps_no_programs_json(monkeypatch):
    objs = [str(FIXTURES / n) for n in ("prog_array.o", "struct_ops.o", "map_in_map.o",
                                        "kconfig.o")] + [str(EXAMPLES / "cni_datapath.bpf.o")]
    code, full = run_cli(["maps", *objs, "--format", "json", *KERNEL])
    assert code == 0
    calls = _reads_programs(monkeypatch)
    code, lazy = run_cli(["maps", *objs, "--format", "json", *KERNEL, "--no-programs"])
    assert code == 0 and calls == []
    f, z = json.loads(full), json.loads(lazy)
    assert all(o["programs"] for o in f["objects"])
    for o, lz in zip(f["objects"], z["objects"]):
        o["programs"] = None
        # the programs' memlock lower bound comes from the programs: not read, not there
        assert o.pop("program_memory")["lower_bound"] and lz.pop("program_memory", None) is None
    assert z == f      # the same maps, memory, totals and notes; programs null: not read


def test_maps_no_programs_table(monkeypatch):
    obj = str(FIXTURES / "prog_array.o")
    code, full = run_cli(["maps", obj, *KERNEL, "--width", "120"])
    calls = _reads_programs(monkeypatch)
    code2, lazy = run_cli(["maps", obj, *KERNEL, "--width", "120", "--no-programs"])
    assert code == code2 == 0 and calls == []
    spec = parse_object(DATA[FIXTURES / "prog_array.o"], path=obj)
    assert f"{len(spec.maps)} maps, {len(spec.programs)} programs" in full
    title = f"{obj}: {len(spec.maps)} maps"
    assert f"{title}, {len(spec.programs)} programs" in full
    assert [ln.strip() for ln in lazy.splitlines() if ln.strip().startswith(obj)] == [title]
    assert spec.programs[0].name in full and spec.programs[0].name not in lazy


def _with_programs(monkeypatch):
    """Make the gate read programs again, as it did before it stopped."""
    real = api.gate.load_all      # the gate's one loader of its inputs (objects, binaries)

    def full(sources, **kw):
        kw["programs"] = True
        return real(sources, **kw)
    monkeypatch.setattr(api.gate, "load_all", full)


@pytest.mark.parametrize("argv", [
    ["check", "LIMIT", "--limit", "64Mi", "--loader", "libbpf,cilium-ebpf"],
    ["check", "LIMIT", "--limit", "1Mi"],
    ["diff", "OLD", "NEW"],
])
def test_gates_read_no_programs_and_answer_alike(monkeypatch, argv):
    objs = [str(FIXTURES / n) for n in ("prog_array.o", "struct_ops.o", "percpu_lru.o")]
    argv = [x for a in argv for x in ({"LIMIT": objs, "OLD": [objs[0]],
                                       "NEW": [objs[1]]}.get(a, [a]))]
    argv += ["--format", "json", *KERNEL]
    calls = _reads_programs(monkeypatch)
    lazy = run_cli(argv)
    assert calls == []
    _with_programs(monkeypatch)
    full = run_cli(argv)
    assert calls        # the comparison side did read them
    assert lazy == full


def test_auto_reads_the_chosen_loaders_full_spec():
    """auto's answer is the chosen loader's full parse (its programs too), for every object."""
    for path, data in DATA.items():
        auto = outcome(data, str(path), "auto", programs=True)
        if isinstance(auto, str):
            continue
        one = parse_object(data, path=str(path), loader=auto.loader)
        assert auto == replace(one, loader_reason=auto.loader_reason), path


def test_auto_bpf2go_name_reads_libbpf_programs_only_when_it_is_the_answer(monkeypatch,
                                                                          tmp_path):
    calls = _reads_programs(monkeypatch)
    go = HERE / "data" / "cilium_examples" / "kprobe_bpfel.o"
    spec = parse_object(DATA[go], path=str(go), loader="auto")
    assert spec.loader == "cilium-ebpf" and spec.programs and calls == [1]  # cilium's only
    # cilium/ebpf refuses kconfig.o (a weak kconfig extern): under a bpf2go name libbpf's
    # full spec is the answer, programs and all
    data = DATA[FIXTURES / "kconfig.o"]
    name = str(tmp_path / "kconfig_bpfel.o")
    auto = parse_object(data, path=name, loader="auto")
    assert auto.loader == "libbpf" and "cilium/ebpf refuses it" in auto.loader_reason
    assert auto == replace(parse_object(data, path=name, loader="libbpf"),
                           loader_reason=auto.loader_reason)
    assert auto.programs
    lazy = parse_object(data, path=name, loader="auto", programs=False)
    assert lazy == replace(auto, programs=None)
