"""The one treatment of weights on exact paths: a row of weights (or a Bernoulli probability)
read as exact `Fraction` s.

A float weight is read as the `Fraction` of its binary value and a row is divided by its exact
sum; malformed rows are refused by the rule `Sampler` applies
(`dsi_ref.base.randomness.check_weights`), so both interpreters refuse alike. Shared by the exact
engine and by `dsi_ref.target_distribution`. Re-exported by `dsi_ref.audit.exact`.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, cast

from ...base.randomness import check_probability, check_weights

__all__ = ["exact_probabilities", "exact_probability", "exact_row"]



def exact_probabilities(weights: Sequence[Fraction | float]) -> list[Fraction]:
    """The law a row of weights stands for, exactly: each weight over their sum, as `Fraction`s.

    A float weight is read as the `Fraction` of its binary value (``Fraction(0.25) == 1/4``;
    ``Fraction(1/3)`` is the double nearest 1/3, exactly), and the row is divided by its exact
    sum, so a float row that sums to ``1 ± 1e-16`` still stands for a law. This is the one
    treatment of float rows on both sides of an exact audit: the enumerator reads every
    ``rng.categorical`` this way, and `dsi_ref.target_distribution` reads the target's rows this
    way, so a float model's own autoregressive law *equals* its target law. (Float arithmetic
    *inside* a decoder, e.g. ``min(1, p/q)``, still rounds: `dsi_ref.check_lossless` reports that
    noise apart, see its ``float_tolerance``.)

    Raises:
        InvalidParameterError: a weight that is not a finite number >= 0 (NaN, inf, a ``bool``,
            a string), no positive weight, or a float sum that overflows: the rule of `Sampler`
            (`dsi_ref.base.randomness.check_weights`), so both interpreters refuse alike (a
            row of `Fraction`s >= 0 is read exactly, however large: it is not checked again).

    >>> exact_probabilities([0.25, 0.75]), exact_probabilities([Fraction(1), 3])
    ([Fraction(1, 4), Fraction(3, 4)], [Fraction(1, 4), Fraction(3, 4)])
    """
    return exact_row(weights)[0]


#: Exact numbers: ints, numpy's integers, Fractions (a float is not one).
_RATIONAL: tuple[type[Any], ...] = (numbers.Rational,)


def exact_row(weights: Sequence[Fraction | float]) -> tuple[list[Fraction], bool]:
    """`exact_probabilities`, and whether some weight was a float (not a rational number).

    >>> exact_row((0.5, 0.5)), exact_row((Fraction(1, 2), Fraction(1, 2)))
    (([Fraction(1, 2), Fraction(1, 2)], True), ([Fraction(1, 2), Fraction(1, 2)], False))
    """
    if all(type(w) is Fraction and w >= 0 for w in weights):  # the usual row: valid if total > 0
        exact = list(cast(Sequence[Fraction], weights))
        total = sum(exact, Fraction(0))
        if total > 0:
            return (exact if total == 1 else [w / total for w in exact]), False
    check_weights(weights)  # the rule `Sampler` applies, so both interpreters refuse alike
    exact = []
    inexact = False
    for w in weights:
        if isinstance(w, Fraction):
            exact.append(w)
        elif isinstance(w, _RATIONAL):
            exact.append(Fraction(w))
        else:
            inexact = True
            exact.append(Fraction(float(w)))
    total = sum(exact, Fraction(0))
    if total != 1:
        exact = [w / total for w in exact]
    return exact, inexact


def exact_probability(p: Fraction | float) -> tuple[Fraction, bool]:
    """A Bernoulli probability as a `Fraction` (a float: its binary value), and whether it was
    a float."""
    check_probability(p)  # the rule `Sampler` applies
    if isinstance(p, Fraction):
        return p, False
    if isinstance(p, _RATIONAL):
        return Fraction(p), False
    return Fraction(float(p)), True

