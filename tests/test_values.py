"""bpfmem.values.dataclass against the standard library's: the same class written twice, once
with each decorator, behaves the same (signature, repr, eq, hash, frozen, replace, fields,
asdict, pickle), before and after its __init__ is compiled."""

from __future__ import annotations

import copy
import dataclasses
import inspect
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
