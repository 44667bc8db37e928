"""Toy categorical language models: the `LanguageModel` seam and its validation.

A language model here is only its next-token law: ``probs(prefix)`` returns the distribution of the
next token after ``prefix`` (a tuple of token ids, the prompt included). Toy models return
`fractions.Fraction` rows so that every law computed downstream is exact; float rows are accepted
too (tolerance 1e-9 on the sum), for the torch backend and for speed.

Nothing here clips or falls back: a bad row raises `InvalidDistributionError` naming the model, the
prefix and the problem. A valid float row is read as the law it stands for (`read_row`): one that
sums to 1 only within validation's 1e-9, not within rounding, is divided by its float64 sum, so
that no decoder computes with rows that are not laws (the float tolerance of the exact audit,
`dsi_ref.audit.laws.default_float_tolerance`, relies on it).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol, TypeAlias, runtime_checkable

import numpy as np

from .errors import InvalidDistributionError, InvalidParameterError
from .validate import check_int, check_number, check_seed, is_int

__all__ = [
    "FLOAT_TOLERANCE",
    "KNOWN_ROWS",
    "UNIT_ROUNDOFF",
    "FunctionLM",
    "InvalidDistributionError",
    "LanguageModel",
    "Number",
    "Prefix",
    "Probs",
    "TableLM",
    "checked_probs",
    "read_row",
    "sequential_sum",
    "validate_probs",
]

Number: TypeAlias = Fraction | float
Prefix: TypeAlias = tuple[int, ...]
Probs: TypeAlias = Sequence[Number]



def normalised(weights: Iterable[Number]) -> tuple[Number, ...]:
    """``w / Σ w``: a row of nonnegative weights made a distribution (exact on `Fraction`s)."""
    row = list(weights)
    total = sum(row)
    return tuple(w / total for w in row)


def sequential_sum(values: Iterable[Number]) -> Number:
    """``Σ values`` added left to right from ``Fraction(0)``, on every Python version: exact for
    `Fraction` s; for floats the plain sequential float sum (Python 3.12's built-in ``sum``
    compensates float sums, so it could differ in the last bits from the engines' sequential
    sums, `dsi_ref.backends.engine.vectorised.sequential_sum`).

    >>> sequential_sum([0.1, 0.2, 0.3]) == (0.1 + 0.2) + 0.3
    True
    """
    return sum(values, Fraction(0))


#: Largest |sum - 1| accepted for a float distribution.
FLOAT_TOLERANCE = 1e-9
#: The unit roundoff of float64, ``u = 2^-53``: a rounded operation errs by a relative ``u``.
UNIT_ROUNDOFF = 2.0 ** -53



@runtime_checkable
class LanguageModel(Protocol):
    """The one seam where a model is called.

    Attributes:
        vocab_size: number of tokens; ids are ``0 .. vocab_size - 1``.
        eos: the end-of-sequence token id, or ``None`` when generation only stops at the budget.
    """

    @property
    def vocab_size(self) -> int:
        """Number of tokens; ids are ``0 .. vocab_size - 1``."""
        ...

    @property
    def eos(self) -> int | None:
        """The end-of-sequence id, or ``None``."""
        ...

    def probs(self, prefix: Prefix) -> Probs:
        """The next-token distribution after ``prefix`` (prompt and generated tokens)."""
        ...


def validate_probs(probs: Probs, vocab_size: int, *, model: object = None,
                   prefix: Prefix = ()) -> None:
    """Raise `InvalidDistributionError` unless ``probs`` is a distribution over ``vocab_size`` ids.

    Exact rows (all `Fraction`/int) must sum to exactly 1; float rows to within `FLOAT_TOLERANCE`.
    Negative entries, NaN and infinities are rejected.
    """
    _check_row(probs, vocab_size, model, prefix)


def read_row(probs: Probs, vocab_size: int, *, model: object = None, prefix: Prefix = ()
             ) -> tuple[Number, ...]:
    """A row as decoders read it: validated (`validate_probs`), and, when it has a float entry
    and its float64 sum (``math.fsum``, correctly rounded) is off 1 by more than ``V · u``
    (``u = 2^-53``, `UNIT_ROUNDOFF`), each entry divided by that sum in float64.

    So every float row read sums to 1 within ``(V + 1) · u``, exactly: a row kept is within
    ``V · u`` of its rounded sum, which is within ``u`` of its exact sum; a divided row is within
    about ``2u`` (each quotient rounds by a relative ``u``, the sum by ``u``). A row that sums
    to 1 only within what validation accepts (`FLOAT_TOLERANCE`) stands for the law it sums to
    (`dsi_ref.audit.exact.exact_probabilities` reads it so), and a decoder computing with it as
    it is (``min(1, p/q)``, ``(p − q)+``) would move its law by about that deviation: the
    float tolerance of the exact audit could not tell that from float32 rounding. Exact rows
    and rows within rounding of 1 are returned as they are (the same tuple).

    >>> read_row((0.5, 0.5 + 4e-10), 2)
    (0.4999999998, 0.5000000002)
    """
    row = probs if type(probs) is tuple else tuple(probs)
    if _check_row(row, vocab_size, model, prefix):
        return row
    total = math.fsum(float(x) for x in row)
    if abs(total - 1.0) <= len(row) * UNIT_ROUNDOFF:
        return row
    return tuple(float(x) / total for x in row)


def _check_row(probs: Probs, vocab_size: int, model: object, prefix: Prefix) -> bool:
    """`validate_probs`; whether the row is exact (no float entry)."""
    def where() -> str:  # named only in an error: a row is read thousands of times
        return f"{_name(model)} at prefix {prefix!r}"

    if len(probs) != vocab_size:
        raise InvalidDistributionError(
            f"{where()}: expected {vocab_size} probabilities, got {len(probs)}")
    exact = True
    for i, x in enumerate(probs):
        if isinstance(x, bool):
            raise InvalidDistributionError(f"{where()}: probability of token {i} is a bool ({x})")
        if isinstance(x, Fraction | int):
            if x < 0:
                raise InvalidDistributionError(f"{where()}: probability of token {i} is {x} < 0")
        elif isinstance(x, float | np.floating):
            exact = False
            if math.isnan(x) or math.isinf(x):
                raise InvalidDistributionError(f"{where()}: probability of token {i} is {x}")
            if x < 0:
                raise InvalidDistributionError(f"{where()}: probability of token {i} is {x} < 0")
        else:
            raise InvalidDistributionError(
                f"{where()}: probability of token {i} has type {type(x).__name__}; "
                "use fractions.Fraction (exact) or float")
    total = sum(probs)
    if exact:
        if total != 1:
            raise InvalidDistributionError(f"{where()}: probabilities sum to {total}, not 1")
    elif abs(float(total) - 1.0) > FLOAT_TOLERANCE:
        raise InvalidDistributionError(
            f"{where()}: probabilities sum to {float(total)!r}, not 1 (tolerance "
            f"{FLOAT_TOLERANCE})")
    return exact


def checked_probs(model: LanguageModel, prefix: Prefix) -> tuple[Number, ...]:
    """``model.probs(prefix)`` as a tuple, validated and read as a law (see `read_row`)."""
    return read_row(model.probs(prefix), model.vocab_size, model=model, prefix=prefix)


def _name(model: object) -> str:
    if model is None:
        return "model"
    name = getattr(model, "name", None)
    return str(name) if name else type(model).__name__


def _check_vocab(vocab_size: int, eos: int | None) -> None:
    if not is_int(vocab_size) or vocab_size < 1:
        raise InvalidParameterError(f"vocab_size must be a positive int, got {vocab_size!r}")
    if eos is not None and (not is_int(eos) or not 0 <= eos < vocab_size):
        raise InvalidParameterError(f"eos={eos!r} is not a token id of a vocabulary of size "
                                    f"{vocab_size}")


#: The most distinct exact rows a `FunctionLM` remembers (beyond, it validates each call anew).
KNOWN_ROWS = 1 << 16


class FunctionLM:
    """A model given by a function ``probs(prefix) -> row``; every row it returns is validated
    and read as a law (`read_row`), so decoders need not check them again (``prevalidated``).

    An exact row (all `Fraction` s) is validated once: the model keeps the rows it has read, up
    to `KNOWN_ROWS` of them, and returns the one it kept for a row equal to it. So a function
    that builds its rows afresh at each call gives the same row object for the same row, which
    the exact engine reads once (it caches rows by identity); float rows are read at each call.

    >>> m = FunctionLM(vocab_size=2, probs=lambda prefix: (Fraction(3, 5), Fraction(2, 5)))
    >>> m.probs((0, 1))
    (Fraction(3, 5), Fraction(2, 5))
    """

    __slots__ = ("_known", "eos", "fn", "name", "vocab_size")

    #: ``probs`` validates every row it returns.
    prevalidated = True

    def __init__(self, vocab_size: int, probs: Callable[[Prefix], Probs], eos: int | None = None,
                 name: str = "FunctionLM") -> None:
        _check_vocab(vocab_size, eos)
        if not callable(probs):
            raise InvalidParameterError(f"probs must be a function prefix -> row, got {probs!r}")
        self.vocab_size = vocab_size
        self.fn = probs
        self.eos = eos
        self.name = name
        self._known: dict[tuple[Number, ...], tuple[Number, ...]] = {}

    def __repr__(self) -> str:
        return f"FunctionLM(vocab_size={self.vocab_size}, eos={self.eos}, name={self.name!r})"

    def probs(self, prefix: Prefix) -> tuple[Number, ...]:
        """The validated row ``fn(prefix)``, read as a law (`read_row`); for an exact row, the
        row kept from an earlier call when one was equal to it."""
        prefix = tuple(prefix)
        row = self.fn(prefix)
        row = row if type(row) is tuple else tuple(row)
        exact = all(type(x) is Fraction for x in row)
        if exact:
            known = self._known.get(row)
            if known is not None:
                return known
        read = read_row(row, self.vocab_size, model=self, prefix=prefix)
        if exact and len(self._known) < KNOWN_ROWS:
            self._known[row] = read
        return read


@dataclass(frozen=True, eq=False)
class TableLM:
    """An n-gram model: the row depends on the last ``context`` tokens of the prefix only.

    ``table`` maps each context tuple (length ``context``, or shorter at the start of a sequence)
    to a row; ``default`` is used for contexts missing from the table (e.g. the empty context).
    ``context = 0`` gives a context-free model (one row for every prefix). Rows are validated once,
    at construction, and kept as decoders read them (`read_row`).
    """

    #: Rows are validated once, at construction, so decoders need not re-check them per call.
    prevalidated = True

    vocab_size: int
    context: int
    table: Mapping[Prefix, tuple[Number, ...]] = field(repr=False)
    default: tuple[Number, ...] | None = field(default=None, repr=False)
    eos: int | None = None
    name: str = "TableLM"

    def __post_init__(self) -> None:
        _check_vocab(self.vocab_size, self.eos)
        check_int("context", self.context, low=0)
        if not isinstance(self.table, Mapping):
            raise InvalidParameterError(f"{self.name}: table must be a mapping context -> row, "
                                        f"got {type(self.table).__name__}")
        rows = {tuple(k): tuple(v) for k, v in self.table.items()}
        for key, row in rows.items():
            if len(key) > self.context:
                raise InvalidParameterError(f"{self.name}: context key {key!r} longer than "
                                            f"{self.context}")
            if not all(is_int(t) and 0 <= t < self.vocab_size for t in key):
                raise InvalidParameterError(f"{self.name}: context key {key!r} holds a token "
                                            f"that is not an id below {self.vocab_size}")
            rows[key] = read_row(row, self.vocab_size, model=self, prefix=key)
        if self.default is not None:
            object.__setattr__(self, "default", read_row(self.default, self.vocab_size,
                                                         model=self, prefix=()))
        object.__setattr__(self, "table", rows)

    def probs(self, prefix: Prefix) -> tuple[Number, ...]:
        """The row of the last ``context`` tokens of ``prefix`` (or ``default``)."""
        key = tuple(prefix[len(prefix) - self.context:]) if self.context else ()
        row = self.table.get(key, self.default)
        if row is None:
            raise InvalidDistributionError(
                f"{self.name} at prefix {tuple(prefix)!r}: no row for context {key!r} "
                "and no default row")
        return row

    @classmethod
    def context_free(cls, row: Sequence[Number], eos: int | None = None,
                     name: str = "context-free") -> TableLM:
        """One row for every prefix: the same next-token law at every position."""
        return cls(vocab_size=len(row), context=0, table={(): tuple(row)}, eos=eos, name=name)

    @classmethod
    def random(cls, vocab_size: int, context: int, seed: int, *, denominator: int = 12,
               zero_prob: float = 0.25, eos: int | None = None,
               exact: bool = True, name: str | None = None) -> TableLM:
        """A seeded random n-gram model with rational rows (denominator ``denominator``).

        Each entry is zero with probability about ``zero_prob`` (at least one entry stays
        positive), so rows with zeros are common. Every context of length ``context`` gets a row,
        and shorter contexts (the start of a sequence) get one too. ``exact=False`` converts the
        rows to floats.
        """
        _check_vocab(vocab_size, eos)
        check_int("context", context, low=0)
        check_seed("seed", seed)
        if not is_int(denominator) or denominator < vocab_size:
            raise InvalidParameterError(f"denominator must be an int >= vocab_size so every row "
                                        f"can be represented, got {denominator!r}")
        check_number("zero_prob", zero_prob, low=0, high=1)
        gen = np.random.default_rng(seed)
        table: dict[Prefix, tuple[Number, ...]] = {}
        for length in range(context + 1):
            for key in _all_contexts(vocab_size, length):
                table[key] = _random_row(gen, vocab_size, denominator, zero_prob, exact)
        return cls(vocab_size=vocab_size, context=context, table=table, eos=eos,
                   name=name or f"random(V={vocab_size},ctx={context},seed={seed})")


def _all_contexts(vocab_size: int, length: int) -> Iterator[Prefix]:
    """Every context of ``length`` tokens, the last varying fastest (no cache: a table of
    ``V^length`` contexts is built once per model, and a cache would keep every one alive)."""
    return itertools.product(range(vocab_size), repeat=length)


def _random_row(gen: np.random.Generator, vocab_size: int, denominator: int, zero_prob: float,
                exact: bool) -> tuple[Number, ...]:
    support = gen.random(vocab_size) >= zero_prob
    if not support.any():
        support[gen.integers(vocab_size)] = True
    n = int(support.sum())
    # Split `denominator` units among the support, each support entry getting at least one.
    cuts = np.sort(gen.choice(np.arange(1, denominator), size=n - 1, replace=False))
    counts = np.diff(np.concatenate(([0], cuts, [denominator])))
    row: list[Number] = [Fraction(0)] * vocab_size
    for idx, cnt in zip(np.flatnonzero(support), counts, strict=True):
        row[int(idx)] = Fraction(int(cnt), denominator)
    return tuple(float(x) for x in row) if not exact else tuple(row)
