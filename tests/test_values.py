"""bpfmem.values.dataclass against the standard library's: the same class written twice, once
with each decorator, behaves the same (signature, repr, eq, hash, frozen, replace, fields,
asdict, pickle), before and after its __init__ is compiled."""

from __future__ import annotations

import collections
import copy
import dataclasses
import enum
import inspect
import json
import pickle

import pytest

from bpfmem import values

ORDER = (("plain", {}), ("frozen", {"frozen": True}),
         ("frozen_slots", {"frozen": True, "slots": True}))


def _classes(deco, **kw):
    f = values.field if deco is values.dataclass else dataclasses.field

    @deco(**kw)
    class Shape:
        """A shape."""
        type: int
        key_size: int
        name: str = "x"
        notes: tuple[str, ...] = ()
        extra: list = f(default_factory=list, repr=False, compare=False)
        hidden: int = f(default=0, init=False, compare=False, repr=False)
        tag: str = f(default="t", compare=False)

        def __post_init__(self) -> None:
            object.__setattr__(self, "hidden", self.key_size * 2) if kw.get("frozen") \
                else setattr(self, "hidden", self.key_size * 2)

        @property
        def twice(self) -> int:
            return self.type * 2

    @deco(**kw)
    class One:
        only: int

    @deco(**kw)
    class Own:
        a: int

        def __hash__(self) -> int:
            return 7
    return Shape, One, Own


@pytest.fixture(params=ORDER, ids=[o[0] for o in ORDER])
def pair(request):
    kw = request.param[1]
    return _classes(values.dataclass, **kw), _classes(dataclasses.dataclass, **kw), kw


def _same(ours, std):
    assert repr(ours).replace("_classes.<locals>.", "") == \
        repr(std).replace("_classes.<locals>.", "")
    assert dataclasses.asdict(ours) == dataclasses.asdict(std)
    assert [f.name for f in dataclasses.fields(ours)] == [f.name for f in dataclasses.fields(std)]
    assert [f.name for f in values.fields(ours)] == [f.name for f in dataclasses.fields(std)]


@pytest.mark.parametrize("rounds", [1, values._COMPILE_AFTER + 3])
def test_same_behaviour_as_the_standard_decorator(pair, rounds):
    (S, One, Own), (T, TOne, TOwn), kw = pair
    def params(init):
        return [(p.name, p.kind, "<factory>" if p.default is values.MISSING or "factory" in repr(p.default) else repr(p.default)) for p in
                inspect.signature(init).parameters.values()]
    assert params(values._compiled_init(S.__values_fields__, True)) == params(T.__init__)
    assert S.__match_args__ == T.__match_args__
    for _ in range(rounds):   # the generic __init__, then the compiled one
        a, b = S(1, 2, notes=("n",)), T(1, 2, notes=("n",))
        _same(a, b)
        assert a.hidden == b.hidden == 4 and a.twice == 2 and a.extra == [] == b.extra
        assert a == S(1, 2, notes=("n",), tag="other")     # tag: compare=False
        assert a != S(1, 3, notes=("n",)) and a != b       # other class: not equal
        for cls in (S, One, Own):
            with pytest.raises(TypeError):
                cls()
        with pytest.raises(TypeError):
            S(1, 2, 3, (), [], 0, "t", 9)
        with pytest.raises(TypeError):
            S(1, 2, nope=3)
        with pytest.raises(TypeError):
            S(1, 2, hidden=3)
        with pytest.raises(TypeError):
            S(1, type=1)
        assert S(key_size=2, type=1) == S(1, 2)
    if kw.get("frozen"):
        assert hash(S(1, 2)) == hash(T(1, 2)) and hash(One(3)) == hash(TOne(3))
        assert hash(Own(1)) == 7 == hash(TOwn(1))
        with pytest.raises(dataclasses.FrozenInstanceError):
            a.type = 5
        with pytest.raises(dataclasses.FrozenInstanceError):
            del a.type
    else:
        assert S.__hash__ is None is T.__hash__
        a.type = b.type = 5
        assert a.type == 5
    for rep in (values.replace, dataclasses.replace):
        r, s = rep(a, name="y"), dataclasses.replace(b, name="y")
        _same(r, s)
        with pytest.raises(ValueError):
            rep(a, hidden=1)
    assert dataclasses.is_dataclass(a) and dataclasses.is_dataclass(S)
    assert copy.deepcopy(a) == a and copy.copy(a) == a


def test_pickle_round_trip():
    from bpfmem.model.shape import MapShape
    sh = MapShape(1, 4, 8, 16)
    assert pickle.loads(pickle.dumps(sh)) == sh
    assert "__dict__" not in dir(sh)        # slots


def test_defaults_are_class_attributes_without_slots():
    @values.dataclass(frozen=True)
    class A:
        x: int = 3
        y: list = values.field(default_factory=list)
    assert A.x == 3 and not hasattr(A, "y")


def test_non_default_after_default_refused():
    with pytest.raises(TypeError):
        @values.dataclass
        class Bad:
            a: int = 1
            b: int


# -- Record against collections.namedtuple ----------------------------------------------------
class _Rec(values.Record):
    __slots__ = ()
    _fields = ("name", "type", "size")
    name, type, size = values.items(_fields)

    def __new__(cls, name: str, type: int, size: int = 8):
        return tuple.__new__(cls, (name, type, size))

    @property
    def twice(self) -> int:
        return self.size * 2


_StdRec = collections.namedtuple("_Rec", "name type size", defaults=(8,))


def test_record_reads_as_a_namedtuple():
    a, b = _Rec("x", 1), _StdRec("x", 1)
    assert a == b == ("x", 1, 8) and hash(a) == hash(b) and repr(a) == repr(b)
    assert (a.name, a.type, a.size, a.twice) == ("x", 1, 8, 16) and a[1] == 1
    assert a._fields == b._fields and a._asdict() == b._asdict()
    assert a._replace(size=4) == b._replace(size=4) == ("x", 1, 4)
    assert type(a._replace(size=4)) is _Rec and type(_Rec._make(["y", 2, 3])) is _Rec
    with pytest.raises(ValueError):
        a._replace(nope=1)
    with pytest.raises(TypeError):
        _Rec("x")
    with pytest.raises(AttributeError):
        a.name = "y"
    with pytest.raises(AttributeError):
        a.other = 1                      # __slots__: no instance dict
    for c in (copy.copy, copy.deepcopy, lambda r: pickle.loads(pickle.dumps(r))):
        assert c(a) == a and type(c(a)) is _Rec
    assert sorted([_Rec("b", 1), _Rec("a", 2)]) == [("a", 2, 8), ("b", 1, 8)]


def test_tuple_dataclass_is_a_frozen_dataclass_stored_as_a_tuple():
    """values.tuple_dataclass (LiveMap's kind): what @dataclass(frozen=True) of the same
    declaration gives (signature, repr, eq, hash, replace, fields, asdict, pickle), while
    an instance is a Record: one tuple.__new__ to make, fields by index too."""
    def declare(deco):
        @deco
        class Row:
            """A row."""
            id: int
            name: str
            owners: tuple = ()
            memlock: int | None = None

            @property
            def big(self) -> bool:
                return (self.memlock or 0) > 10
        return Row

    T, D = declare(values.tuple_dataclass), declare(dataclasses.dataclass(frozen=True))
    def params(c):
        return [(p.name, p.default) for p in inspect.signature(c).parameters.values()]
    assert params(T) == params(D)
    assert issubclass(T, values.Record) and T.__slots__ == () and T.__doc__ == "A row."
    for args, kw in (((1, "a"), {}), ((2, "b", (3,)), {"memlock": 11}), ((), {"id": 3,
                                                                          "name": "c"})):
        t, d = T(*args, **kw), D(*args, **kw)
        assert repr(t) == repr(d)[repr(d).index("Row("):]     # (a local class: its qualname)
        assert hash(t) == hash(d) and t == T(*args, **kw) and t.big == d.big
        assert tuple(t) == tuple(getattr(d, f.name) for f in dataclasses.fields(d))
        assert dataclasses.asdict(t) == dataclasses.asdict(d)
        assert [f.name for f in dataclasses.fields(t)] == [f.name for f in dataclasses.fields(d)]
        assert [f.name for f in values.fields(t)] == list(T._fields)
        for rep in (dataclasses.replace, values.replace):
            r = rep(t, memlock=5)
            assert type(r) is T and r == T(*tuple(t)[:3], memlock=5)
        assert dataclasses.is_dataclass(t) and T._make(tuple(t)) == t
        for c in (copy.copy, copy.deepcopy):
            assert c(t) == t and type(c(t)) is T
        with pytest.raises(AttributeError):
            t.id = 5
    with pytest.raises(TypeError):
        T(1)
    from bpfmem.records import LiveMap
    m = LiveMap(1, "m", 1, 4, 8, 16, 0, 0, 0, 4096, False, entries=4, entries_method="batch")
    assert issubclass(LiveMap, values.Record) and dataclasses.is_dataclass(LiveMap)
    assert pickle.loads(pickle.dumps(m)) == m and m.pressure == 0.25 and m[9] == m.memlock


def test_parse_records_are_records():
    """The parser's records (BTF types, ELF sections and symbols, instructions) are the cheap
    kind: no typing.NamedTuple on the start-up path."""
    from bpfmem.parse import btf, elf, insn
    for cls in (btf.Member, btf.EnumValue, btf.Param, btf.VarSecinfo, btf.BtfType,
                elf.Section, elf.Segment, elf.Symbol, elf.ImageSymbol, elf.Relocation,
                elf.SymbolColumns, insn.Insn, insn.Jump, insn.Label):
        assert issubclass(cls, values.Record) and cls.__slots__ == (), cls
        assert len(cls._fields) == len(set(cls._fields))
        for i, f in enumerate(cls._fields):
            assert getattr(cls, f).__get__(tuple(range(len(cls._fields)))) == i, (cls, f)


# -- IntEnum and IntFlag against the standard library's ----------------------------------------
def _enums(base_enum, base_flag):
    class Color(base_enum):
        RED = 1
        GREEN = 2
        CRIMSON = 1        # an alias
        BLUE = 4

        @property
        def lower(self) -> str:
            return self.name.lower()

    class Perm(base_flag):
        NONE = 0
        R = 1
        W = 2
        RW = 3             # a named combination
        X = 4
    return Color, Perm


def test_int_enum_behaves_as_the_standard_one():
    (C, P), (SC, SP) = _enums(values.IntEnum, values.IntFlag), _enums(enum.IntEnum, enum.IntFlag)
    assert [m.name for m in C] == [m.name for m in SC] == ["RED", "GREEN", "BLUE"]
    assert len(C) == len(SC) and list(C.__members__) == list(SC.__members__)
    assert C.CRIMSON is C.RED and C(1) is C.RED and C["BLUE"] is C.BLUE
    assert C(C.GREEN) is C.GREEN and C.RED.lower == "red"
    for ours, std in ((C.RED, SC.RED), (C.BLUE, SC.BLUE)):
        assert ours == std == int(std) and hash(ours) == hash(std)
        assert (repr(ours), str(ours), f"{ours}", f"{ours:>4}", ours.name, ours.value) == \
            (repr(std), str(std), f"{std}", f"{std:>4}", std.name, std.value)
        assert json.dumps([ours]) == json.dumps([std])
        assert type(ours + 1) is int and ours + 1 == std + 1
    for bad in (3, 99, "RED", None, [1]):
        with pytest.raises(ValueError) as ours_err:
            C(bad)
        with pytest.raises(ValueError) as std_err:
            SC(bad)
        assert str(ours_err.value).replace("Color", "C") == \
            str(std_err.value).replace("Color", "C")
    assert copy.copy(C.BLUE) is C.BLUE and copy.deepcopy(C.BLUE) is C.BLUE
    from bpfmem.uapi import MapFlag, MapType
    for c in (copy.copy, copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m))):
        assert c(MapType.HASH) is MapType.HASH
        assert c(MapFlag.RDONLY | MapFlag.CLONE) == MapFlag.RDONLY | MapFlag.CLONE
    assert 1 in C._value2member_map_ and 3 not in C._value2member_map_


def test_int_flag_behaves_as_the_standard_one():
    (C, P), (SC, SP) = _enums(values.IntEnum, values.IntFlag), _enums(enum.IntEnum, enum.IntFlag)
    assert [m.name for m in P] == [m.name for m in SP] == ["R", "W", "X"]
    assert len(P) == len(SP) and list(P.__members__) == list(SP.__members__)
    cases = [(P.R | P.W, SP.R | SP.W), (P.R | P.X, SP.R | SP.X), (P.R & 1, SP.R & 1),
             (P.RW & P.W, SP.RW & SP.W), (P.R ^ P.RW, SP.R ^ SP.RW), (5 | P.R, 5 | SP.R),
             (P.R | 64, SP.R | 64), (P(0), SP(0)), (P(7), SP(7)), (~P.R, ~SP.R),
             (P.NONE, SP.NONE)]
    for ours, std in cases:
        assert type(ours) is P and ours == std
        assert (repr(ours), str(ours), ours.name, bool(ours)) == \
            (repr(std), str(std), std.name, bool(std))
    assert P(3) is P.RW and (P.R | P.W) is P.RW and P(5) is P(5)
    with pytest.raises(TypeError):
        P.R | "x"
