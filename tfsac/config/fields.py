"""How an option is declared (`option`: default, help, group, flag, choices and the check of
its own values), the checks themselves, and the functions that apply them."""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import os
import types
import typing
from typing import Any, Callable, Optional

import numpy as np

from tfsac.errors import TfsacError


@dataclasses.dataclass(frozen=True)
class Check:
    """The values an option takes on its own: `ok(value)`, said as '<name> must be <must>,
    got <value>' with the value formatted by `got` ('' leaves ', got ...' out)."""

    ok: Callable[[Any], bool]
    must: str
    got: str = "{}"

    def error(self, name: str, value: Any) -> Optional[str]:
        if self.ok(value):
            return None
        return f"{name} must be {self.must}" + (
            f", got {self.got.format(value)}" if self.got else ""
        )


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


POSITIVE_INT = Check(lambda v: _is_int(v) and v > 0, "a positive integer", "{!r}")
POSITIVE_FINITE = Check(lambda v: 0 < v < math.inf, "positive and finite")
NON_EMPTY_TEXT = Check(lambda v: isinstance(v, str) and bool(v), "a non-empty string", "")
RATE = Check(lambda v: 0 < v < 1, "in (0, 1)")
WIDTHS = Check(lambda v: v and all(h > 0 for h in v), "one or more positive integers")
# What numpy's and gymnasium's seeding take.
SEED = Check(lambda v: _is_int(v) and 0 <= v < 2**32, "in [0, 2**32 - 1]")
# An evaluation keeps every episode's seed and return (and prints the returns).
EPISODES = Check(lambda v: _is_int(v) and 0 < v <= 10**6, "in [1, 1000000]", "{!r}")


def at_least(low: int, note: str = "") -> Check:
    return Check(lambda v: v >= low, f">= {low}{note}")


def interval(low: float, high: float, ends: str) -> Check:
    """Between `low` and `high`, each end closed ('[', ']') or open ('(', ')')."""
    above = (lambda v: v >= low) if ends[0] == "[" else (lambda v: v > low)
    below = (lambda v: v <= high) if ends[1] == "]" else (lambda v: v < high)
    return Check(lambda v: above(v) and below(v), f"in {ends[0]}{low}, {high}{ends[1]}")


def option(default, help: str, check=None, *, group=None, flag=None, choices=None, text=None):
    """A config field with what its flag needs: `check`, the values it takes (None passes
    where None is the default), `group` (default: its class's, `options`), `flag` (default:
    the field's name), `choices` for an enum and `text`, the flag's default for fields with
    a string form."""
    metadata = dict(help=help, group=group, flag=flag, choices=choices, text=text, check=check)
    if callable(default):
        return dataclasses.field(default_factory=default, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def auto_option(help: str, check=None, **kwargs):
    """An option whose default, None, its flag writes 'auto'."""
    return option(None, help, check, text="auto", **kwargs)


def json_option(help: str):
    """An option holding a JSON object, {} by default."""
    return option(dict, help, Check(lambda v: isinstance(v, dict), "a dict", "{!r}"), text="{}")


def options(group: str):
    """A dataclass of options, those that name no group of their own in help group `group`."""

    def make(cls):
        for value in vars(cls).values():
            if isinstance(value, dataclasses.Field) and value.metadata["group"] is None:
                value.metadata = types.MappingProxyType({**value.metadata, "group": group})
        return dataclasses.dataclass(cls)

    return make


def field_errors(config) -> Optional[str]:
    """The first option of `config` whose value its own declaration refuses, said."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if value is None and field.default is None:
            continue
        choices, check = field.metadata.get("choices"), field.metadata.get("check")
        if choices and value not in choices:
            listed = " or ".join(repr(c) for c in choices)
            return f"{field.name} must be {listed}, got {value!r}"
        if check is not None and (error := check.error(field.name, value)):
            return error
    return None


_KINDS = {bool: "a bool", int: "an integer", float: "a number", str: "a string", dict: "a dict"}


def _typed(hint, value):
    """`value` as a field of type `hint` takes it, or TypeError saying what the field takes."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:  # Optional[X]
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _typed(inner, value)
    if origin is tuple:  # Tuple[int, ...]
        what = f"a tuple of {_KINDS[args[0]].split(' ', 1)[1]}s"
        if not isinstance(value, (tuple, list)):
            raise TypeError(what)
        try:
            return tuple(_typed(args[0], v) for v in value)
        except TypeError:
            raise TypeError(what) from None
    kind = origin or hint
    if kind is bool:
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
    elif kind in (int, float) and isinstance(value, (bool, np.bool_)):
        pass  # a bool is no number here
    elif kind is int:
        if isinstance(value, numbers.Integral):
            return value if type(value) is int else int(value)
        # 1e6, as the flags take '1e6'; not 1.5 or nan.
        if isinstance(value, numbers.Real) and float(value).is_integer():
            return int(value)
    elif kind is float:
        if isinstance(value, numbers.Real):
            return value if type(value) in (int, float) else float(value)
    elif kind in (str, dict):
        if isinstance(value, kind):
            return value
        if kind is str and isinstance(value, os.PathLike):
            if isinstance(path := os.fspath(value), str):
                return path
    else:  # a type no option has had so far: no check
        return value
    raise TypeError(_KINDS[kind])


_hints = functools.cache(typing.get_type_hints)


def check_field_types(config) -> None:
    """Checks every field of the dataclass `config` against its type hint; TfsacError names
    the first of another type. Numpy scalars become Python's."""
    hints = _hints(type(config))
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if value is None and field.default is None:
            continue  # 'auto' or 'off'
        try:
            typed = _typed(hints[field.name], value)
        except TypeError as e:
            raise TfsacError(
                f"{field.name} must be {e}, got {value!r} ({type(value).__name__})"
            ) from None
        if typed is not value:
            setattr(config, field.name, typed)


# The arguments of the callbacks a user makes (SaveBestPolicy, StopTraining*), checked as
# they are made: at the run's first use, its files would already be written.
def refuse_unless(check: Check, name: str, value) -> None:
    """TfsacError '<name> must be <check.must>, got ...' where `check` does not take `value`."""
    error = check.error(name, value)
    if error:
        raise TfsacError(error)


def checked_number(name: str, value) -> float:
    """`value` as a float: a real number (not a bool), not NaN."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TfsacError(f"{name} must be a number, got {value!r:.60} ({type(value).__name__})")
    if math.isnan(value):
        raise TfsacError(f"{name} is NaN")
    return float(value)
