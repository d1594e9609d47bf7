"""Strict decoding of the JSON and TOML documents users hand bpfmem (pure: text in), and a
typed view of a decoded document whose errors name the field (``maps[3].key_size``).

JSON refuses NaN and Infinity, numbers of more than 40 digits and nesting deeper than Python
can decode. The files themselves come in through :mod:`bpfmem.inputs`.
"""

from __future__ import annotations

import json
import math

from ..errors import InputError

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Fields", "parse_json", "parse_toml"]


def _finite(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"number out of range: {text[:40]}")
    return v


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > 40:
        raise ValueError(f"number of {len(text)} digits")
    return int(text)


def _no_constant(text: str):
    raise ValueError(f"{text} is not a JSON number")


def parse_json(text: str, name: str) -> Any:
    """Decode JSON text strictly (no NaN/Infinity, no huge numbers, bounded nesting)."""
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite,
                          parse_int=_integer)
    except json.JSONDecodeError as e:
        raise InputError(f"{name}: not JSON ({e.msg} at line {e.lineno} column {e.colno})") \
            from None
    except ValueError as e:
        raise InputError(f"{name}: not usable JSON ({e})") from None
    except RecursionError:
        raise InputError(f"{name}: nested too deeply") from None


def parse_toml(text: str, name: str) -> dict:
    """Decode TOML text (bounded nesting); InputError naming ``name`` when it is not TOML."""
    import tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{name}: not valid TOML: {e}") from None
    except RecursionError:
        raise InputError(f"{name}: nested too deeply") from None


_MISSING = object()


class Fields:
    """A typed view of one decoded JSON/TOML object: each accessor checks the field's type
    and range, and raises ValueError naming the field (``maps[3].key_size``)."""

    def __init__(self, value: Any, where: str = ""):
        if not isinstance(value, dict):
            raise ValueError(f"{where or 'the document'}: expected an object, not "
                             f"{_kind(value)}")
        self.value = value
        self.where = where

    def _name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def has(self, key: str) -> bool:
        return key in self.value

    def _get(self, key: str, default: Any):
        if key not in self.value or self.value[key] is None:
            if default is _MISSING:
                raise ValueError(f"{self._name(key)}: missing")
            return default
        return self.value[key]

    def uint(self, key: str, default: Any = _MISSING, bits: int = 64) -> Any:
        v = self._get(key, default)
        if v is default and default is not _MISSING:
            return v
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << bits:
            raise ValueError(f"{self._name(key)}: expected an integer in 0..2^{bits}-1, "
                             f"not {_show(v)}")
        return v

    def number(self, key: str, default: Any = _MISSING) -> Any:
        v = self._get(key, default)
        if v is default and default is not _MISSING:
            return v
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{self._name(key)}: expected a number, not {_show(v)}")
        return float(v)

    def text(self, key: str, default: Any = _MISSING) -> Any:
        v = self._get(key, default)
        if v is default and default is not _MISSING:
            return v
        if not isinstance(v, str):
            raise ValueError(f"{self._name(key)}: expected a string, not {_show(v)}")
        return v

    def flag(self, key: str, default: Any = _MISSING) -> Any:
        v = self._get(key, default)
        if v is default and default is not _MISSING:
            return v
        if not isinstance(v, bool):
            raise ValueError(f"{self._name(key)}: expected true or false, not {_show(v)}")
        return v

    def items(self, key: str) -> list[Any]:
        v = self._get(key, [])
        if not isinstance(v, list):
            raise ValueError(f"{self._name(key)}: expected a list, not {_show(v)}")
        return v

    def objects(self, key: str) -> list["Fields"]:
        return [Fields(v, f"{self._name(key)}[{i}]") for i, v in enumerate(self.items(key))]

    def texts(self, key: str) -> list[str]:
        out = self.items(key)
        for i, v in enumerate(out):
            if not isinstance(v, str):
                raise ValueError(f"{self._name(key)}[{i}]: expected a string, not {_show(v)}")
        return out

    def object(self, key: str) -> "Fields":
        return Fields(self._get(key, {}), self._name(key))


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "a number", float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _show(v: Any) -> str:
    if isinstance(v, (dict, list)):
        return _kind(v)
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."
