"""The argument checks that every layer shares, written once.

Each check names the argument in its message and raises the caller's error class (by default
`InvalidParameterError`), so that a bad value is refused where it enters, never clipped or
silently converted. Integers: Python ``int`` and numpy integer types count, ``bool`` never does.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Collection
from fractions import Fraction
from typing import SupportsIndex, cast

from .errors import InvalidParameterError

__all__ = ["check_bool", "check_choice", "check_int", "check_number", "check_seed", "is_finite",
           "is_int"]


def is_int(value: object) -> bool:
    """True for an ``int`` or a numpy integer; False for ``bool`` (a flag is not a count)."""
    if type(value) is int:  # the usual case, without the abstract-class check
        return True
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return False
    return isinstance(value, numbers.Integral)


def is_finite(value: object) -> bool:
    """True for a finite real number: every ``int`` and ``Fraction`` (however large), a float
    that is neither infinite nor NaN; False for anything else (a ``bool`` included).

    >>> is_finite(10**400), is_finite(float("nan"))
    (True, False)
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    if isinstance(value, numbers.Rational):
        return True
    return math.isfinite(cast(float, value))


def check_int(name: str, value: object, *, low: int = 1, what: str = "",
              error: type[Exception] = InvalidParameterError) -> int:
    """``value`` as an ``int`` when it is an integer ``>= low``; ``error`` naming ``name``
    otherwise (``what`` adds what the int is for to the message).

    >>> check_int("lookahead", 3)
    3
    >>> check_int("lookahead", 0)
    Traceback (most recent call last):
    ...
    dsi_ref.base.errors.InvalidParameterError: lookahead must be an int >= 1, got 0
    """
    if type(value) is int and value >= low:  # the usual case, checked without conversions
        return value
    if not is_int(value) or operator.index(cast(SupportsIndex, value)) < low:
        raise error(f"{name} must be an int >= {low}{what}, got {value!r}")
    return operator.index(cast(SupportsIndex, value))


def check_bool(name: str, value: object, *,
               error: type[Exception] = InvalidParameterError) -> bool:
    """``value`` when it is a ``bool`` (or a numpy bool); ``error`` naming ``name`` otherwise
    (``1`` or ``"yes"`` is not a flag: a truthy value is never taken for ``True``).

    >>> check_bool("keyed", True)
    True
    """
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    raise error(f"{name} must be True or False, got {value!r}")


def check_seed(name: str, value: object, *,
               error: type[Exception] = InvalidParameterError) -> int:
    """``value`` as an ``int`` when it is a seed: an integer ``>= 0`` (numpy integers count,
    ``bool`` does not), as numpy's seeding requires.

    >>> check_seed("seed", 7)
    7
    """
    return check_int(name, value, low=0, what=" (a seed)", error=error)


def check_number(name: str, value: object, *, positive: bool = False, allow_none: bool = False,
                 low: float | Fraction | None = None, high: float | Fraction | None = None,
                 error: type[Exception] = InvalidParameterError) -> None:
    """Refuse anything but a finite real number (``int``, ``float``, ``Fraction``; no ``bool``),
    ``> 0`` when ``positive``, within ``[low, high]`` when given; ``None`` when ``allow_none``.

    >>> check_number("c", Fraction(1, 10), positive=True)
    >>> check_number("c", float("inf"), positive=True)
    Traceback (most recent call last):
    ...
    dsi_ref.base.errors.InvalidParameterError: c must be finite and > 0, got inf
    """
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise error(f"{name} must be a number, got {value!r}")
    number = cast(float, value)
    if not is_finite(number):
        raise error(f"{name} must be finite{' and > 0' if positive else ''}, got {value!r}")
    if positive and not number > 0:
        raise error(f"{name} must be finite and > 0, got {value!r}")
    if (low is not None and number < low) or (high is not None and number > high):
        raise error(f"{name} must lie in [{low}, {high}], got {value!r}")


def check_choice(name: str, value: object, choices: Collection[object], *,
                 error: type[Exception] = InvalidParameterError) -> None:
    """Refuse a ``value`` that is not one of ``choices``, listing them.

    >>> check_choice("queue", "fifo", ("fifo", "lifo", "any"))
    """
    if (not (isinstance(value, str | bool | None) or is_int(value)) or value not in choices
            or (isinstance(value, bool) and not any(c is value for c in choices))):
        raise error(f"{name} must be one of {tuple(choices)}, got {value!r}")
