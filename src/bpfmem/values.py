"""Value classes that cost little to define: the standard ``@dataclass`` for the classes on
every command's start-up path, without its import (``dataclasses`` brings ``inspect``, and
with it ``ast``, ``dis`` and ``tokenize``) or its per-class code generation (a class made by
the standard decorator costs about 5 M instructions; one made here a few thousand until it
is instantiated often enough to deserve a compiled ``__init__``).

Behaviour is the standard decorator's for what bpfmem uses: ``frozen``, ``slots``, ``eq``,
``field(default=, default_factory=, init=, repr=, compare=)``, ``__post_init__``, a
``__hash__`` of one's own kept, and the same ``__init__`` signature, ``__repr__``, ``__eq__``
and ``__hash__`` values. The classes are dataclasses for the standard library too
(``dataclasses.fields``, ``replace``, ``asdict``, ``is_dataclass``): their
``__dataclass_fields__`` is built on first use. :func:`replace` and :func:`fields` here work on
both kinds without importing ``dataclasses``. Anything else asked of the decorator (a base
with fields, ``order``, ``kw_only``...) is handed to the standard one.

Beside it, two more standard kinds of value class, made cheaply for the same reason:

- :class:`Record`, a named tuple declared as a plain class (``typing.NamedTuple`` imports
  ``typing``, resolves every annotation and compiles a ``__new__`` per class), and
  :func:`tuple_dataclass`, a frozen dataclass stored as one (for records made by the
  thousand);
- :class:`IntEnum` and :class:`IntFlag`, the parts of ``enum``'s that bpfmem uses (the
  standard ones cost about 100,000 instructions a member to make: the kernel's UAPI enums
  alone were 15 M).
"""

from __future__ import annotations

from operator import attrgetter, itemgetter
from types import MappingProxyType, MemberDescriptorType

try:                    # the fields' reader collections.namedtuple uses (C)
    from _collections import _tuplegetter
except ImportError:     # pragma: no cover - another interpreter: a property
    def _tuplegetter(index, doc):
        return property(itemgetter(index), doc=doc)

__all__ = ["dataclass", "field", "fields", "replace", "MISSING", "Record", "items",
           "tuple_dataclass", "IntEnum", "IntFlag"]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()
_setattr = object.__setattr__
_COMPILE_AFTER = 16      # instances made by the generic __init__ before one is compiled


class Field:
    """One field: what :func:`field` was given, with its name and annotation."""
    __slots__ = ("name", "type", "default", "default_factory", "init", "repr", "compare")

    def __init__(self, default=MISSING, default_factory=MISSING, init=True, repr=True,
                 compare=True):
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = self.type = None
        self.default, self.default_factory = default, default_factory
        self.init, self.repr, self.compare = init, repr, compare

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, default={self.default!r})"


def field(*, default=MISSING, default_factory=MISSING, init=True, repr=True, compare=True):
    """As ``dataclasses.field`` (the arguments bpfmem uses)."""
    return Field(default, default_factory, init, repr, compare)


def fields(obj) -> tuple:
    """The fields of a value class or instance (ours or the standard library's)."""
    got = getattr(obj, "__values_fields__", None)
    if got is not None:
        return got
    import dataclasses
    return dataclasses.fields(obj)


def replace(obj, /, **changes):
    """A copy of ``obj`` with ``changes`` (as ``dataclasses.replace``)."""
    fs = getattr(obj, "__values_fields__", None)
    if fs is None:
        import dataclasses
        return dataclasses.replace(obj, **changes)
    for f in fs:
        if f.init:
            if f.name not in changes:
                changes[f.name] = getattr(obj, f.name)
        elif f.name in changes:
            raise ValueError(f"field {f.name} is declared with init=False, it cannot be "
                             "specified with replace()")
    return obj.__class__(**changes)


def dataclass(cls=None, /, *, frozen: bool = False, slots: bool = False, eq: bool = True,
              repr: bool = True, **other):
    """``@dataclass`` / ``@dataclass(frozen=True, slots=True)``, cheaply (see the module)."""
    def wrap(c):
        return _make(c, frozen, slots, eq, repr, other)
    return wrap if cls is None else wrap(cls)


class _LazyStdFields:
    """``__dataclass_fields__`` for the standard library, made on first access."""

    def __get__(self, obj, owner):
        import dataclasses
        out = {}
        for f in owner.__values_fields__:
            kw = {"init": f.init, "repr": f.repr, "compare": f.compare}
            if f.default is not MISSING:
                kw["default"] = f.default
            if f.default_factory is not MISSING:
                kw["default_factory"] = f.default_factory
            std = dataclasses.field(**kw)
            std.name, std.type, std._field_type = f.name, f.type, dataclasses._FIELD
            out[f.name] = std
        type.__setattr__(owner, "__dataclass_fields__", out)
        return out


def _standard(cls, frozen, slots, eq, repr, other):
    import dataclasses
    return dataclasses.dataclass(cls, frozen=frozen, slots=slots, eq=eq, repr=repr, **other)


def _make(cls, frozen, slots, eq, repr, other):
    if other or any(hasattr(b, "__dataclass_fields__") for b in cls.__mro__[1:]):
        return _standard(cls, frozen, slots, eq, repr, other)
    ns = cls.__dict__
    fs = []
    for name, ann in ns.get("__annotations__", {}).items():
        if isinstance(ann, str) and ann.replace("typing.", "").startswith(("ClassVar",
                                                                           "InitVar")):
            return _standard(cls, frozen, slots, eq, repr, other)
        value = ns.get(name, MISSING)
        f = value if isinstance(value, Field) else Field(default=value)
        f.name, f.type = name, ann
        fs.append(f)
    fs = tuple(fs)
    seen_default = False
    for f in fs:
        if not f.init:
            continue
        if f.default is MISSING and f.default_factory is MISSING:
            if seen_default:
                raise TypeError(f"non-default argument {f.name!r} follows default argument")
        else:
            seen_default = True

    attrs = {}
    if slots:
        attrs = {k: v for k, v in ns.items() if k not in ("__dict__", "__weakref__")}
        for f in fs:
            attrs.pop(f.name, None)
        attrs["__slots__"] = tuple(f.name for f in fs)
    else:
        for f in fs:            # class attributes: the plain defaults, as the standard one
            if f.default is MISSING:
                if f.name in ns:
                    delattr(cls, f.name)
            else:
                setattr(cls, f.name, f.default)

    def put(name, value):
        if name not in ns:
            attrs[name] = value

    owner: list = []     # the class, once made (slots: a new one)
    put("__init__", _generic_init(fs, hasattr(cls, "__post_init__"), owner, frozen))
    if repr:
        put("__repr__", _repr(fs))
    compared = tuple(f.name for f in fs if f.compare)
    key = _getter(compared)
    if eq:
        put("__eq__", _eq(key))
    own_hash = "__hash__" in ns and not (ns["__hash__"] is None and "__eq__" in ns)
    if eq and frozen and not own_hash:
        attrs["__hash__"] = lambda self: hash(key(self))
    elif eq and not frozen and not own_hash:
        attrs["__hash__"] = None
    if frozen:
        names = frozenset(f.name for f in fs)
        for n in ("__setattr__", "__delattr__"):
            if n in ns:
                raise TypeError(f"cannot overwrite attribute {n} in class {cls.__name__}")
        attrs["__setattr__"], attrs["__delattr__"] = _frozen_guards(names, owner)
        if slots:
            put("__getstate__", lambda self: [getattr(self, f.name) for f in fs])
            put("__setstate__", _setstate(fs))
    attrs["__match_args__"] = tuple(f.name for f in fs if f.init)
    attrs["__values_fields__"] = fs
    attrs["__dataclass_fields__"] = _LazyStdFields()

    if slots:
        new = type(cls)(cls.__name__, cls.__bases__, attrs)
        new.__qualname__ = cls.__qualname__
        owner.append(new)
        return new
    for k, v in attrs.items():
        setattr(cls, k, v)
    owner.append(cls)
    return cls


def _getter(names: tuple[str, ...]):
    """A function giving the tuple of ``names`` of an instance (the standard decorator's
    eq and hash compare and hash that tuple)."""
    if not names:
        return lambda self: ()
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda self: (one(self),)
    return attrgetter(*names)


def _eq(key):
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented
    return __eq__


def _repr(fs):
    shown = tuple(f.name for f in fs if f.repr)

    def __repr__(self):
        return (self.__class__.__qualname__ + "("
                + ", ".join(f"{n}={getattr(self, n)!r}" for n in shown) + ")")
    return __repr__


def _frozen_guards(names, owner: list):
    """The standard decorator's guards: no field assigned or deleted once made (``owner``
    holds the class, known once it is made)."""
    def __setattr__(self, name, value):
        if type(self) is owner[0] or name in names:
            from dataclasses import FrozenInstanceError
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(owner[0], self).__setattr__(name, value)

    def __delattr__(self, name):
        if type(self) is owner[0] or name in names:
            from dataclasses import FrozenInstanceError
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(owner[0], self).__delattr__(name)
    return __setattr__, __delattr__


def _setstate(fs):
    def __setstate__(self, state):
        for f, v in zip(fs, state):
            _setattr(self, f.name, v)
    return __setstate__


def _generic_init(fs, post_init: bool, owner: list, frozen: bool = False):
    """An ``__init__`` made without compiling anything; after ``_COMPILE_AFTER`` instances
    it compiles the class's own (faster than the standard decorator's) and steps aside."""
    init = tuple(f for f in fs if f.init)
    n = len(init)
    names = tuple(f.name for f in init)
    later = tuple(f for f in fs if not f.init)
    calls = [0]

    def __init__(self, *args, **kw):
        calls[0] += 1
        if calls[0] > _COMPILE_AFTER:
            fast = _compiled_init(fs, post_init, owner[0], frozen)
            owner[0].__init__ = fast
            return fast(self, *args, **kw)
        if len(args) > n:
            raise TypeError(f"__init__() takes {n + 1} positional arguments but "
                            f"{len(args) + 1} were given")
        for name, v in zip(names, args):
            _setattr(self, name, v)
        for f in init[len(args):]:
            if f.name in kw:
                _setattr(self, f.name, kw.pop(f.name))
            elif f.default is not MISSING:
                _setattr(self, f.name, f.default)
            elif f.default_factory is not MISSING:
                _setattr(self, f.name, f.default_factory())
            else:
                raise TypeError(f"__init__() missing 1 required positional argument: "
                                f"{f.name!r}")
        if kw:
            bad = next(iter(kw))
            raise TypeError(f"__init__() got {'multiple values for' if bad in names else 'an unexpected keyword'} argument {bad!r}")
        for f in later:
            if f.default is not MISSING:
                _setattr(self, f.name, f.default)
            elif f.default_factory is not MISSING:
                _setattr(self, f.name, f.default_factory())
        if post_init:
            self.__post_init__()
    return __init__


def _compiled_init(fs, post_init: bool, cls=None, frozen: bool = True):
    """The ``__init__`` of fields ``fs``, compiled. A field is set the quickest way its class
    allows: on a mutable class by assignment; on a frozen one past its guard, through the
    slot's descriptor (``__slots__``) or straight into the instance's dict (the standard
    decorator calls ``object.__setattr__`` for each field, ~4x slower than a dict store).
    Without ``cls`` every field goes through ``object.__setattr__``."""
    glob = {"_s": _setattr, "MISSING": MISSING}
    params, body = [], []
    own = cls.__dict__ if cls is not None else {}
    through_dict = cls is not None and frozen and any(
        type(own.get(f.name)) is not MemberDescriptorType for f in fs)

    def store(i: int, f, value: str) -> str:
        if cls is None:
            return f"_s(self, {f.name!r}, {value})"
        if not frozen:
            return f"self.{f.name} = {value}"
        slot = own.get(f.name)
        if type(slot) is MemberDescriptorType:
            glob[f"_m{i}"] = slot.__set__
            return f"_m{i}(self, {value})"
        return f"_o[{f.name!r}] = {value}"

    if through_dict:
        body.append("_o = self.__dict__")
    for i, f in enumerate(fs):
        if f.default_factory is not MISSING:
            glob[f"_f{i}"] = f.default_factory
            if f.init:
                params.append(f"{f.name}=MISSING")
                body.append(store(i, f, f"_f{i}() if {f.name} is MISSING else {f.name}"))
            else:
                body.append(store(i, f, f"_f{i}()"))
            continue
        if f.default is not MISSING:
            glob[f"_d{i}"] = f.default
        if f.init:
            params.append(f.name if f.default is MISSING else f"{f.name}=_d{i}")
            body.append(store(i, f, f.name))
        elif f.default is not MISSING:
            body.append(store(i, f, f"_d{i}"))
    if post_init:
        body.append("self.__post_init__()")
    src = (f"def __init__(self, {', '.join(params)}):\n    "
           + ("\n    ".join(body) or "pass") + "\n")
    exec(src, glob)
    return glob["__init__"]


class Record(tuple):
    """A named tuple declared as a plain class: what ``typing.NamedTuple`` gives a reader
    (fields by name and by index, a tuple's equality, hash and order, ``_fields``,
    ``_replace``, ``_asdict``, its repr, pickling) with nothing made at import. A subclass
    lists its fields, reads them with :func:`items` and writes its ``__new__`` (as fast as
    the one ``collections.namedtuple`` compiles)::

        class Member(Record):
            __slots__ = ()
            _fields = ("name", "type")
            name, type = items(_fields)

            def __new__(cls, name: str, type: int = 0):
                return tuple.__new__(cls, (name, type))
    """

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return (self.__class__.__name__ + "("
                + ", ".join(f"{n}={v!r}" for n, v in zip(self._fields, self)) + ")")

    def __getnewargs__(self):
        return tuple(self)

    def _asdict(self) -> dict:
        return dict(zip(self._fields, self))

    def _replace(self, **changes):
        new = tuple.__new__(self.__class__, map(changes.pop, self._fields, self))
        if changes:
            raise ValueError(f"Got unexpected field names: {list(changes)!r}")
        return new

    @classmethod
    def _make(cls, iterable):
        return tuple.__new__(cls, iterable)


def items(names: tuple[str, ...]) -> tuple:
    """The readers of a :class:`Record`'s fields ``names``, in order."""
    return tuple(_tuplegetter(i, f"Alias for field number {i}") for i in range(len(names)))


def tuple_dataclass(cls):
    """A frozen value class declared as a dataclass is (annotations, defaults, methods,
    properties) but stored as a :class:`Record`: an instance is a tuple of its fields, made
    with one ``tuple.__new__`` (a frozen dataclass with slots sets each field through its
    descriptor: 17 fields cost 2.5x more), read by index or name. It is still a dataclass
    to :func:`fields`, :func:`replace` and the standard library's ``fields``, ``replace``,
    ``asdict`` and ``is_dataclass``; ``repr``, ``==`` and ``hash`` give what
    ``@dataclass(frozen=True)`` gives (equal to a plain tuple of the same values, too).
    ``cls._make(values)`` makes one from the values in field order, unchecked."""
    ns = cls.__dict__
    ann = ns.get("__annotations__", {})
    names = tuple(ann)
    fs = []
    for name in names:
        value = ns.get(name, MISSING)
        if isinstance(value, Field) or isinstance(value, (list, dict, set)):
            raise TypeError(f"{cls.__name__}.{name}: a tuple dataclass takes plain defaults")
        f = Field(default=value)
        f.name, f.type = name, ann[name]
        fs.append(f)
    attrs = {k: v for k, v in ns.items()
             if k not in names and k not in ("__dict__", "__weakref__")}
    attrs.update(__slots__=(), _fields=names, __values_fields__=tuple(fs),
                 __dataclass_fields__=_LazyStdFields(), __match_args__=names)
    attrs.update(zip(names, items(names)))
    glob = {"_new": tuple.__new__}
    params = []
    for i, f in enumerate(fs):
        if f.default is MISSING:
            params.append(f.name)
        else:
            glob[f"_d{i}"] = f.default
            params.append(f"{f.name}=_d{i}")
    exec(f"def __new__(_cls, {', '.join(params)}):\n"
         f"    return _new(_cls, ({', '.join(names)},))\n", glob)
    attrs["__new__"] = glob["__new__"]
    new = type(cls.__name__, (Record,), attrs)
    new.__qualname__ = cls.__qualname__
    return new


class _EnumType(type):
    """The class of :class:`IntEnum` and :class:`IntFlag` classes: the members (the class's
    public ``int`` attributes) made once with the class; a value given twice names one
    member (the first name; the others are its aliases)."""

    def __new__(mcls, name, bases, ns):
        ns = dict(ns)
        named = {k: v for k, v in ns.items() if type(v) is int and not k.startswith("_")}
        for k in named:
            del ns[k]
        cls = super().__new__(mcls, name, bases, ns)
        by_value: dict[int, IntEnum] = {}
        listed = []
        for k, v in named.items():
            m = by_value.get(v)
            if m is None:
                m = int.__new__(cls, v)
                m._name_ = k
                by_value[v] = m
                if cls._listed(v):
                    listed.append(m)
            type.__setattr__(cls, k, m)
        cls._member_map_ = {k: by_value[v] for k, v in named.items()}
        cls._value2member_map_ = by_value
        cls._member_list_ = tuple(listed)
        return cls

    def _listed(cls, value: int) -> bool:
        return True

    @property
    def __members__(cls):
        """Every name, aliases included, to its member."""
        return MappingProxyType(cls._member_map_)

    def __iter__(cls):
        return iter(cls._member_list_)

    def __len__(cls) -> int:
        return len(cls._member_list_)

    def __getitem__(cls, name: str):
        return cls._member_map_[name]

    def __contains__(cls, value) -> bool:
        return value in cls._value2member_map_


class IntEnum(int, metaclass=_EnumType):
    """``enum.IntEnum`` for what bpfmem asks of it: members are ints with a ``name``
    and a ``value``, ``Cls(value)`` is the member (``ValueError`` if none), ``Cls[name]``,
    ``Cls.__members__`` and ``_value2member_map_``, iteration in definition order without
    aliases, ``repr`` ``<Cls.NAME: value>``, ``str`` and ``format`` the number's,
    pickled and copied as themselves."""

    def __new__(cls, value):
        try:
            return cls._value2member_map_[value]
        except (KeyError, TypeError):
            pass
        found = cls._missing_(value)
        if found is None:
            raise ValueError(f"{value!r} is not a valid {cls.__qualname__}")
        return found

    @classmethod
    def _missing_(cls, value):
        return None

    @property
    def name(self) -> str | None:
        return self._name_

    @property
    def value(self) -> int:
        return int(self)

    def __repr__(self) -> str:
        if self._name_ is None:
            return f"<{self.__class__.__name__}: {int(self)}>"
        return f"<{self.__class__.__name__}.{self._name_}: {int(self)}>"

    __str__ = int.__repr__
    __format__ = int.__format__

    def __reduce_ex__(self, protocol):
        return self.__class__, (int(self),)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


class IntFlag(IntEnum):
    """``enum.IntFlag`` the same way: ``|``, ``&`` and ``^`` of members (or of a member and
    an int) and ``~`` give the class's member for the result, one made for a value no name
    has (named after its bits, unknown bits kept: ``NO_PREALLOC|MMAPABLE``,
    ``NO_PREALLOC|1073741824``); iteration gives the single-bit members."""

    @classmethod
    def _listed(cls, value: int) -> bool:
        return value > 0 and value & (value - 1) == 0

    @classmethod
    def _missing_(cls, value):
        if not isinstance(value, int):
            return None
        value = int(value)
        pseudo = cls.__dict__.get("_pseudo_")
        if pseudo is None:
            pseudo = {}
            type.__setattr__(cls, "_pseudo_", pseudo)
        m = pseudo.get(value)
        if m is None:
            m = int.__new__(cls, value)
            rest = value
            names = []
            for one in cls._member_list_:
                if rest & int(one):
                    names.append(one._name_)
                    rest &= ~int(one)
            if rest:
                names.append(str(rest))
            m._name_ = "|".join(names) if names else None
            pseudo[value] = m
        return m

    def _mask(self) -> int:
        out = 0
        for one in self.__class__._member_list_:
            out |= int(one)
        return out

    def __or__(self, other):
        if not isinstance(other, int):
            return NotImplemented
        return self.__class__(int(self) | int(other))

    def __and__(self, other):
        if not isinstance(other, int):
            return NotImplemented
        return self.__class__(int(self) & int(other))

    def __xor__(self, other):
        if not isinstance(other, int):
            return NotImplemented
        return self.__class__(int(self) ^ int(other))

    __ror__, __rand__, __rxor__ = __or__, __and__, __xor__

    def __invert__(self):
        return self.__class__(self._mask() & ~int(self))
