"""advise fuzzed like the parser, but structure-aware: mutations of the section headers,
symbols, relocations and BTF of the fixtures and the bundled example, through parse, model
and advise. Every input gives an advise document or a ParseError, nothing else."""

from __future__ import annotations

import os
import struct
from datetime import timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import fixture_objects
from bpfmem.analysis.advise import advise_all
from bpfmem.report.documents import document
from bpfmem.errors import ParseError
from bpfmem import api as _api
from bpfmem.parse.access import analyze_code
from bpfmem.parse.elf import ElfFile
from bpfmem.parse.objspec import parse_object_code

EXAMPLE = Path(__file__).resolve().parent.parent / "src" / "bpfmem" / "examples" / \
    "cni_datapath.bpf.o"
# large_synthetic.o takes seconds per advise: it is fuzzed by test_fuzz.py's parser target
SEEDS = [p for p in fixture_objects() if p.name != "large_synthetic.o"] + [EXAMPLE]
PROFILE = _api.profile("6.18", cpus=4)

SHDR = [(0, 4, "name"), (4, 4, "type"), (8, 8, "flags"), (24, 8, "offset"), (32, 8, "size"),
        (40, 4, "link"), (44, 4, "info"), (56, 8, "entsize")]
SYM = [(0, 4, "name"), (4, 1, "info"), (5, 1, "other"), (6, 2, "shndx"), (8, 8, "value"),
       (16, 8, "size")]
RELA = [(0, 8, "offset"), (8, 4, "type"), (12, 4, "symbol"), (16, 8, "addend")]
REL = [(0, 8, "offset"), (8, 4, "type"), (12, 4, "symbol")]
BTF_HDR = [(4, 4, "hdr_len"), (8, 4, "type_off"), (12, 4, "type_len"), (16, 4, "str_off"),
           (20, 4, "str_len")]


def _fields(data: bytes) -> tuple[str, list[tuple[str, int, int]], list[tuple[int, int]]]:
    """(endian, [(what, offset, width)], [(offset of a function symbol, its size)]) of
    every structural field a loader reads."""
    elf = ElfFile(data)
    e = elf.endian
    shoff = struct.unpack_from(e + "Q", data, 0x28)[0]
    out: list[tuple[str, int, int]] = []
    funcs: list[tuple[int, int]] = []
    for sec in elf.sections:
        base = shoff + 64 * sec.index
        out += [(f"shdr {sec.name}.{n}", base + o, w) for o, w, n in SHDR]
        if sec.type == 2:  # SHT_SYMTAB
            for i in range(sec.size // 24):
                b = sec.offset + 24 * i
                out += [(f"sym {i}.{n}", b + o, w) for o, w, n in SYM]
                if data[b + 4] & 0xF == 2:   # STT_FUNC
                    funcs.append((b, i))
        elif sec.type in (4, 9):  # SHT_RELA, SHT_REL
            ent, layout = (24, RELA) if sec.type == 4 else (16, REL)
            for i in range(sec.size // ent):
                out += [(f"rel {sec.name}[{i}].{n}", sec.offset + ent * i + o, w)
                        for o, w, n in layout]
        elif sec.name in (".BTF", ".BTF.ext"):
            out += [(f"{sec.name} {n}", sec.offset + o, w) for o, w, n in BTF_HDR]
            if sec.name == ".BTF" and sec.size >= 24:
                hdr_len, type_off, type_len = struct.unpack_from(e + "III", data,
                                                                 sec.offset + 4)
                start = sec.offset + hdr_len + type_off
                for off in range(start, min(start + type_len, sec.offset + sec.size) - 3, 4):
                    out.append((".BTF type word", off, 4))
    return e, out, funcs


SEED_DATA = [p.read_bytes() for p in SEEDS]
SEED_FIELDS = [_fields(d) for d in SEED_DATA]


@st.composite
def mutated_objects(draw):
    k = draw(st.integers(0, len(SEED_DATA) - 1))
    data = bytearray(SEED_DATA[k])
    endian, fields, funcs = SEED_FIELDS[k]
    for _ in range(draw(st.integers(1, 4))):
        if funcs and draw(st.integers(0, 5)) == 0:
            # the crash that was found: a function symbol whose size became 0
            b, _i = draw(st.sampled_from(funcs))
            struct.pack_into(endian + "Q", data, b + 16, 0)
            continue
        _what, off, width = draw(st.sampled_from(fields))
        old = int.from_bytes(data[off:off + width], "little" if endian == "<" else "big")
        top = (1 << (8 * width)) - 1
        new = draw(st.sampled_from([0, 1, top, top >> 1, old + 1, old - 1, old * 2,
                                    old ^ (1 << draw(st.integers(0, 8 * width - 1))),
                                    draw(st.integers(0, top))])) & top
        data[off:off + width] = new.to_bytes(width, "little" if endian == "<" else "big")
    return bytes(data)


def _advise(data: bytes) -> None:
    try:
        code = parse_object_code(data, path="fuzz.o")
        uses = analyze_code(code)
    except ParseError:
        return
    doc = document(advise_all([(code.spec, uses)], PROFILE, {m.name: 1 for m in code.spec.maps}))
    assert doc["objects"] and doc["objects"][0]["name"] == code.spec.name


@settings(max_examples=int(os.environ.get("BPFMEM_FUZZ_EXAMPLES", "400")),
          deadline=timedelta(seconds=2), database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated_objects())
def test_advise_on_structure_aware_mutations(data):
    _advise(data)


def test_every_seed_advises_and_has_fields_to_mutate():
    for data, (_, fields, _) in zip(SEED_DATA, SEED_FIELDS):
        _advise(data)
        assert any(w.startswith("sym ") for w, _, _ in fields)


def test_a_zero_size_function_symbol_is_advised():
    """The crash the hostile tester found (IndexError in parse/access.py): a program symbol
    whose size became 0. ``maps`` accepts such an object; ``advise`` must too."""
    done = 0
    for data, (endian, _, funcs) in zip(SEED_DATA, SEED_FIELDS):
        for b, _ in funcs:
            out = bytearray(data)
            struct.pack_into(endian + "Q", out, b + 16, 0)
            _advise(bytes(out))
            done += 1
    assert done > 50
