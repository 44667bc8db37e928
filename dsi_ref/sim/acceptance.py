"""Laws of accepted lengths per window: acceptance beyond the i.i.d. rate ``a``.

A **window** is the ``k`` drafts that one verification decides (SI: one iteration; DSI: one
verification task, see `dsi_ref.sim.event`). Its **accepted length** ``L ∈ {0, 1, …, k}`` is how
many of its drafts are accepted before the first rejection (``L = k``: all of them, then the
bonus token or the next window). An `AcceptanceLaw` is the law of ``L``; windows are
independent. The i.i.d. rate ``a`` is the special case ``P(L = j) = a^j (1 − a)`` for ``j < k``
and ``P(L = k) = a^k`` (`AcceptanceLaw.iid`).

Windows follow one another from a restart (the start of the run, a rejection, a bonus), so the
drafts accepted before the first rejection, ``G``, count ``k`` per fully accepted window plus the
accepted length of the first window that is not::

    P(G >= i) = S(i) = q^⌊i/k⌋ · P(L >= i mod k),    q = P(L = k)

`S` is the **survival function** every model of `dsi_ref.sim` reads; a window cut short by the
budget to ``m < k`` drafts accepts ``min(L, m)`` of them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeAlias

from ..base.errors import InvalidParameterError
from ..base.validate import check_int, check_number, is_finite, is_int

__all__ = ["AcceptanceLaw", "AcceptanceLike", "as_acceptance_law"]

Num: TypeAlias = Fraction | float | int


def _exact(values: Sequence[object]) -> bool:
    return all(isinstance(v, int | Fraction) and not isinstance(v, bool) for v in values)


@dataclass(frozen=True)
class AcceptanceLaw:
    """The law of a window's accepted length ``L``: ``probabilities[j] = P(L = j)``,
    ``j = 0 … k`` (``k = len(probabilities) − 1``, the lookahead it is for).

    Exact (``Fraction``) when every probability is an ``int`` or a ``Fraction``: they must then
    sum to 1 exactly; floats must sum to 1 within ``1e-9`` (their sum is not renormalised).
    Negative, NaN or infinite entries, and a law without a draft (``k = 0``), are an
    `InvalidParameterError`.

    >>> law = AcceptanceLaw.iid(Fraction(1, 2), 2)
    >>> law.probabilities
    (Fraction(1, 2), Fraction(1, 4), Fraction(1, 4))
    >>> law.mean_committed()
    Fraction(7, 4)
    """

    probabilities: tuple[Num, ...]

    def __post_init__(self) -> None:
        probs: object = self.probabilities
        if isinstance(probs, str | bytes) or not isinstance(probs, Sequence):
            raise InvalidParameterError(f"AcceptanceLaw needs a sequence of probabilities "
                                        f"P(L = 0) … P(L = k), got {probs!r}")
        probs = tuple(probs)
        if len(probs) < 2:
            raise InvalidParameterError(f"AcceptanceLaw needs k >= 1 (probabilities of "
                                        f"L = 0 … k, at least two), got {probs!r}")
        for j, value in enumerate(probs):
            if not is_finite(value) or value < 0:
                raise InvalidParameterError(f"AcceptanceLaw: P(L = {j}) must be a finite "
                                            f"number >= 0, got {value!r}")
        if _exact(probs):
            total = sum((Fraction(v) for v in probs), Fraction(0))
            if total != 1:
                raise InvalidParameterError(f"AcceptanceLaw: probabilities must sum to 1, "
                                            f"got {total}")
            probs = tuple(Fraction(v) for v in probs)
        else:
            total_f = math.fsum(float(v) for v in probs)
            if abs(total_f - 1.0) > 1e-9:
                raise InvalidParameterError(f"AcceptanceLaw: probabilities must sum to 1, "
                                            f"got {total_f!r}")
            probs = tuple(float(v) for v in probs)
        object.__setattr__(self, "probabilities", probs)

    # -- constructors
    @classmethod
    def iid(cls, a: Num, k: int) -> AcceptanceLaw:
        """The i.i.d. rate ``a``: ``P(L = j) = a^j (1 − a)`` for ``j < k``, ``P(L = k) = a^k``.

        >>> AcceptanceLaw.iid(0.5, 1).probabilities
        (0.5, 0.5)
        """
        check_number("acceptance rate a", a, low=0, high=1)
        k = check_int("k", k)
        one: Num = Fraction(1) if _exact([a]) else 1.0
        a = a * one
        return cls(tuple([a ** j * (one - a) for j in range(k)] + [a ** k]))

    @classmethod
    def from_mapping(cls, probabilities: Mapping[int, Num], k: int) -> AcceptanceLaw:
        """A law from ``{length: probability}``; lengths left out have probability 0.

        >>> AcceptanceLaw.from_mapping({0: Fraction(1, 4), 2: Fraction(3, 4)}, 2).probabilities
        (Fraction(1, 4), Fraction(0, 1), Fraction(3, 4))
        """
        k = check_int("k", k)
        if not isinstance(probabilities, Mapping):
            raise InvalidParameterError(f"acceptance must be a mapping {{length: probability}} "
                                        f"or an AcceptanceLaw, got {probabilities!r}")
        for length in probabilities:
            if not is_int(length) or not 0 <= length <= k:
                raise InvalidParameterError(f"acceptance: a length must be an int in 0..{k} "
                                            f"(k = {k}), got {length!r}")
        values = list(probabilities.values())
        zero: Num = Fraction(0) if _exact(values) else 0.0
        return cls(tuple(probabilities.get(j, zero) for j in range(k + 1)))

    @classmethod
    def from_counts(cls, counts: Mapping[int, int] | Sequence[int], k: int) -> AcceptanceLaw:
        """The empirical law of measured accepted lengths: ``counts[j]`` = windows of ``k``
        drafts that accepted exactly ``j`` (a sequence indexed by ``j`` or a mapping); exact.

        Only full windows count (a window cut short by the end of the generation accepts
        ``min(L, m)`` and would bias the law towards short lengths).

        >>> AcceptanceLaw.from_counts([1, 1, 2], 2).probabilities
        (Fraction(1, 4), Fraction(1, 4), Fraction(1, 2))
        """
        k = check_int("k", k)
        if isinstance(counts, Mapping):
            items = dict(counts)
        elif isinstance(counts, str | bytes) or not isinstance(counts, Sequence):
            raise InvalidParameterError(f"from_counts needs a sequence or a mapping of counts, "
                                        f"got {counts!r}")
        else:
            if len(counts) != k + 1:
                raise InvalidParameterError(f"from_counts: a sequence of counts needs k + 1 = "
                                            f"{k + 1} entries (lengths 0..k), got {len(counts)}")
            items = dict(enumerate(counts))
        for length, count in items.items():
            if not is_int(length) or not 0 <= length <= k:
                raise InvalidParameterError(f"from_counts: a length must be an int in 0..{k}, "
                                            f"got {length!r}")
            if not is_int(count) or count < 0:
                raise InvalidParameterError(f"from_counts: a count must be an int >= 0, got "
                                            f"{count!r} for length {length}")
        total = sum(int(c) for c in items.values())
        if total == 0:
            raise InvalidParameterError("from_counts: no window counted")
        return cls(tuple(Fraction(int(items.get(j, 0)), total) for j in range(k + 1)))

    # -- properties
    @property
    def k(self) -> int:
        """The window size: drafts per window (the lookahead the law is for)."""
        return len(self.probabilities) - 1

    @property
    def exact(self) -> bool:
        """True when the probabilities are ``Fraction``s."""
        return isinstance(self.probabilities[0], Fraction)

    @property
    def full(self) -> Num:
        """``q = P(L = k)``: the window is accepted whole."""
        return self.probabilities[-1]

    def at_least(self, j: int) -> Num:
        """``P(L >= j)`` for ``0 <= j <= k``."""
        zero: Num = Fraction(0) if self.exact else 0.0
        return sum(self.probabilities[j:], zero)

    def survival(self, i: int) -> Num:
        """``S(i) = P(G >= i)``: the first ``i`` drafts after a restart are all accepted
        (``q^⌊i/k⌋ P(L >= i mod k)``, module docstring).

        >>> AcceptanceLaw.iid(Fraction(1, 2), 2).survival(3)
        Fraction(1, 8)
        """
        windows, offset = divmod(i, self.k)
        return self.full ** windows * self.at_least(offset)

    def truncated(self, m: int) -> tuple[Num, ...]:
        """The law of ``min(L, m)`` (a window cut to ``m <= k`` drafts), ``m + 1`` entries."""
        return (*self.probabilities[:m], self.at_least(m))

    def mean_committed(self) -> Num:
        """``E[min(L, k) + 1] = E[L] + 1``: tokens one SI iteration with ``k`` drafts commits
        (its cost is ``k c + v``)."""
        one: Num = Fraction(1) if self.exact else 1.0
        return one + sum((j * p for j, p in enumerate(self.probabilities)), 0 * one)

    def __repr__(self) -> str:
        return f"AcceptanceLaw({self.probabilities!r})"


AcceptanceLike: TypeAlias = AcceptanceLaw | Mapping[int, Num]


def as_acceptance_law(acceptance: object, k: int) -> AcceptanceLaw:
    """``acceptance`` (an `AcceptanceLaw` or a mapping ``{length: probability}``) as a law for
    windows of ``k`` drafts; an `InvalidParameterError` when it is neither or its ``k`` differs.
    """
    if isinstance(acceptance, AcceptanceLaw):
        law = acceptance
    elif isinstance(acceptance, Mapping):
        law = AcceptanceLaw.from_mapping(acceptance, k)
    else:
        raise InvalidParameterError(f"acceptance must be an AcceptanceLaw or a mapping "
                                    f"{{length: probability}}, got {acceptance!r}")
    if law.k != k:
        raise InvalidParameterError(f"acceptance is a law of windows of {law.k} drafts but the "
                                    f"lookahead is {k}: they must be equal")
    return law
