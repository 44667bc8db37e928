"""``rng.uniform`` under the exact engine: a lazy uniform, refined at each comparison.

Engines compare a raw coin with a ratio (``u < p / q``, ``u * q < p``, ``coin <= threshold``,
inverse-CDF sampling with one uniform). Under `dsi_ref.Sampler`, ``rng.uniform(key)`` is a float
in ``[0, 1)``; under the exact engine it is an `ExactUniform`: the interval of values still
possible, with exact rational endpoints, split at each comparison. A comparison whose answer the
interval already decides makes no choice; otherwise it is a probabilistic choice whose two
options have the exact lengths of the two sub-intervals.

The value is affine in one uniform ``u`` (``a + b·u``; ``b = 0`` is a constant): adding,
subtracting, multiplying or dividing by a number gives another `ExactUniform` on the same ``u``,
so ``u * q < p`` and ``1 - u > p`` are judged exactly. Keys work as for the other draws: one
key, one ``u``, shared with ``bernoulli`` and ``categorical`` draws of the same key (``u < p``
and the inverse CDF at ``u``).

``bits=b`` puts the value on the grid ``{k / 2^b}`` (``bits=24``: a float32 ``torch.rand``;
``53``: a float64): the value is ``floor(u · 2^b) / 2^b``, which can be exactly 0, so that a
``<``-versus-``<=`` bug has its exact, tiny, nonzero TV. Without ``bits`` the value is ``u``
itself, continuous: ``u < t`` and ``u <= t`` have the same law.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

from ...base.errors import InvalidParameterError

__all__ = ["ExactUniform", "Unshared"]


class _Splitter(Protocol):
    def split_uniform(self, key: object, threshold: Fraction, inexact: bool) -> bool:
        """Whether ``u(key) < threshold`` (a choice unless the interval decides it);
        ``inexact``: the threshold came from a float."""
        ...


def _exact(value: object, what: str) -> Fraction:
    """A real number as a `Fraction` (a float exactly, a numpy scalar through ``float``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"an exact uniform can be {what} a real number only, got "
                        f"{type(value).__name__}")
    if isinstance(value, numbers.Rational):
        return Fraction(int(value.numerator), int(value.denominator))
    number = float(value)
    if not math.isfinite(number):
        raise InvalidParameterError(f"an exact uniform cannot be {what} {number!r}")
    return Fraction(number)


class ExactUniform:
    """The value ``offset + scale · v`` of one uniform ``v`` (``v = u``, or ``floor(u · 2^bits)
    / 2^bits`` on a grid), under the exact engine: compare it with ``<``, ``<=``, ``>``, ``>=``,
    ``==``, ``!=`` (each a choice that splits the interval of ``u``), or combine it with numbers
    by ``+``, ``-``, ``*``, ``/``. It is not a number: ``float(u)`` raises, as does any other use
    that would need its value."""

    __slots__ = ("_bits", "_key", "_offset", "_rng", "_scale")

    def __init__(self, rng: _Splitter, key: object, bits: int | None,
                 offset: Fraction = Fraction(0), scale: Fraction = Fraction(1)) -> None:
        self._rng, self._key, self._bits = rng, key, bits
        self._offset, self._scale = offset, scale

    def __repr__(self) -> str:
        grid = "" if self._bits is None else f" on a 2^-{self._bits} grid"
        value = "u" if self._offset == 0 and self._scale == 1 else \
            f"{self._offset} + {self._scale}·u"
        return f"ExactUniform({value}{grid}, key={self._key!r})"

    # -- arithmetic: another affine function of the same uniform --------------------------------
    def _affine(self, offset: Fraction, scale: Fraction) -> ExactUniform:
        return ExactUniform(self._rng, self._key, self._bits, offset, scale)

    def __add__(self, other: object) -> ExactUniform:
        return self._affine(self._offset + _exact(other, "added to"), self._scale)

    __radd__ = __add__

    def __sub__(self, other: object) -> ExactUniform:
        return self._affine(self._offset - _exact(other, "added to"), self._scale)

    def __rsub__(self, other: object) -> ExactUniform:
        return self._affine(_exact(other, "added to") - self._offset, -self._scale)

    def __neg__(self) -> ExactUniform:
        return self._affine(-self._offset, -self._scale)

    def __mul__(self, other: object) -> ExactUniform:
        factor = _exact(other, "multiplied by")
        return self._affine(self._offset * factor, self._scale * factor)

    __rmul__ = __mul__

    def __truediv__(self, other: object) -> ExactUniform:
        divisor = _exact(other, "divided by")
        if divisor == 0:
            raise ZeroDivisionError("an exact uniform divided by 0")
        return self._affine(self._offset / divisor, self._scale / divisor)

    def __float__(self) -> float:
        raise TypeError("an exact uniform has no single value: compare it (u < p) instead of "
                        "converting it; the exact engine branches on each comparison")

    def __bool__(self) -> bool:
        raise TypeError("an exact uniform has no truth value: compare it (u < p)")

    # -- comparisons ----------------------------------------------------------------------------
    def _below(self, threshold: Fraction, strict: bool, inexact: bool) -> bool:
        """Whether ``v < threshold`` (``strict``) or ``v <= threshold``, for the uniform ``v``
        itself (before the affine map)."""
        bits = self._bits
        if bits is None:  # continuous: P(v = threshold) = 0, so both are u < threshold
            cut = threshold
        else:  # v = K / 2^b with K = floor(u 2^b): v < t iff K < ceil(t 2^b), i.e. u < that / 2^b
            grid = threshold * (1 << bits)
            count = math.ceil(grid) if strict else math.floor(grid) + 1
            cut = Fraction(count, 1 << bits)
        if cut <= 0:
            return False
        if cut >= 1:
            return True
        return self._rng.split_uniform(self._key, cut, inexact)

    def _compare(self, other: object, less: bool, strict: bool) -> bool:
        """``self < other`` (``less``, ``strict``), ``<=``, ``>`` or ``>=``."""
        bound = _exact(other, "compared with")
        if self._scale == 0:  # u * 0: the constant `offset`, compared without a choice
            if self._offset == bound:
                return not strict
            return (self._offset < bound) == less
        threshold = (bound - self._offset) / self._scale
        inexact = not isinstance(other, numbers.Rational)
        if self._scale < 0:  # a + b v < t with b < 0 is v > (t - a) / b
            less = not less
        if less:
            return self._below(threshold, strict, inexact)
        return not self._below(threshold, not strict, inexact)  # v > t is not v <= t

    def __lt__(self, other: object) -> bool:
        return self._compare(other, True, True)

    def __le__(self, other: object) -> bool:
        return self._compare(other, True, False)

    def __gt__(self, other: object) -> bool:
        return self._compare(other, False, True)

    def __ge__(self, other: object) -> bool:
        return self._compare(other, False, False)

    def __eq__(self, other: object) -> bool:
        return self._compare(other, False, False) and self._compare(other, True, False)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class Unshared:
    """The key of a uniform drawn without one (or under ``keyed=False``): the ``n``-th such
    uniform of the run, the same in every replay of the path, and equal to no key a program
    can pass."""

    n: int

