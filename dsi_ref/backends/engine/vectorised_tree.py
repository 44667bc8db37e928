"""The tree verification rules on numpy rows, deciding exactly as the reference rules do.

`vectorised_tree_rule` returns a rule of `dsi_ref.decoders.tree` (`TREE_VERIFY_RULES`) whose row
arithmetic runs on float64 numpy rows. The rules' steps (which child is tested how, which row is
updated to what, which key each draw takes) are the reference's own: every step of a
`TreeRule` reads and builds rows only through its row-arithmetic methods (`TreeRule.law`,
``mass``, ``excess``, ``without``, ``as_row``, ``draw``, ``best``, ``most_likely``), and the
classes here override those methods only. Each override computes the same float64 numbers as
the reference's pure-Python one on the same rows:

* ``law``: ``w / Σ w`` with the sequential sum (``np.cumsum``, left to right as the reference's
  ``sum(w, Fraction(0))``), then one IEEE division per entry: bit for bit the reference's law.
  On long valid rows it is computed when first read (`_Law`): a sequential sum of 32 000 entries
  costs about 0.1 ms, and the i.i.d. rule makes a law at every drafted node but reads the laws
  only along the path verification takes;
* ``mass``: the same sequential sum (its value feeds Traversal's ``α``, not only a sign test);
* ``excess``: `dsi_ref.backends.engine.vectorised.weighted_residual`, entry for entry the
  reference's ``(w · p − q)+``;
* ``draw``: `dsi_ref.backends.engine.vectorised.categorical` at the same keyed uniform: the index of
  `Sampler.categorical` (certified search, see that module);
* ``best`` and ``most_likely``: ``np.argmax`` (the first maximum) and `top_k_index` (candidates
  from block maxima, then a sort by value and id), the reference's tie rule.

Scalars read from a row are ``np.float64`` (a Python float from a `_Law`): the same IEEE numbers
in the inherited scalar steps (``min(1, p'(x)/q(x))``, ``α``). Two edges differ (a token of
probability below 1e-308 drawn; a sum above 1e308): a drafted token whose normalised proposal
underflows to 0 (a subnormal weight) makes the reference's Python division raise
``ZeroDivisionError`` where numpy gives ``inf`` (so ``α = 1``), and a draw from finite weights
whose sum overflows is refused by ``rng.categorical`` but not here. The rows are read as floats:
a `Fraction` row is rounded to float64 (use the reference rules for exact rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np
from numpy.typing import DTypeLike

from ...base.errors import InvalidParameterError, NumericalError
from ...base.models import Number
from ...base.randomness import Randomness
from ...decoders.tree import (
    EagleTopK,
    GreedyTree,
    RecursiveRejectionWithoutReplacement,
    Traversal,
    TreeRule,
    TreeVerifyRule,
    as_tree_rule,
)
from ...decoders.verification import argmax
from .vectorised import BLOCK, categorical, sequential_sum, weighted_residual

__all__ = ["top_k_index", "vectorised_tree_rule"]

Row = Sequence[Number]

#: Rows from this length on get their law when first read (`_Law`); shorter rows at once.
_LAZY = 512


def _floats(weights: Row) -> np.ndarray:
    """``weights`` as a float64 array (no copy when it is one already)."""
    return np.asarray(weights, dtype=np.float64)


def _as_row(array: np.ndarray) -> Row:
    """A float64 array where the rules expect a `Row`: it indexes, iterates and has a length as
    a sequence does (numpy's stubs do not declare it one)."""
    return cast(Row, array)


def top_k_index(weights: np.ndarray, k: int) -> list[int]:
    """`dsi_ref.decoders.tree.top_k` of a float64 row: the ``k`` largest entries ``> 0``, largest
    first, ties to the lowest id."""
    if k == 1:
        first = int(np.argmax(weights))          # the first maximum; the first NaN if any
        if weights[first] > 0:
            return [first]
    chosen = _candidates(weights, k)
    order = np.lexsort((chosen, -weights[chosen]))          # by −w, then by id
    return [int(t) for t in chosen[order[:k]]]


def _candidates(weights: np.ndarray, k: int) -> np.ndarray:
    """The indices of the entries ``> 0`` that are ``>= t`` for some ``t`` at most the ``k``-th
    largest entry: every entry of the top ``k``, its ties included. ``t`` is the ``k``-th largest
    of the maxima of blocks of `BLOCK` entries (``k`` distinct entries are ``>= t``), else of the
    row; every entry ``> 0`` when no such ``t > 0`` is known (NaN among the largest: none)."""
    n = len(weights)
    blocks = n // BLOCK
    if 0 < k <= blocks:
        maxima = weights[:blocks * BLOCK].reshape(blocks, BLOCK).max(axis=1)
        top = np.partition(maxima, blocks - k)[blocks - k:]
        if not np.isnan(top).any() and top.min() > 0:
            chosen = np.flatnonzero(weights >= top.min())
            if len(chosen) <= 4 * BLOCK:
                return chosen
    if 0 < k < n:
        top = np.partition(weights, n - k)[n - k:]          # the k largest, NaN counted largest
        if not np.isnan(top).any() and top.min() > 0:
            return np.flatnonzero(weights >= top.min())
    return np.flatnonzero(weights > 0)


class _Law:
    """``w / Σ w`` (sequential sum) of a row of finite weights ``>= 0``, one of them ``> 0``,
    computed when a step first reads it (an index, or the array). A node's proposal law is made
    when its children are drafted but read only if verification tests them, which it does along
    one path of the tree; the row's check (`_NumpyRows.law`) already ruled out the
    `NumericalError` the reference would raise when making it."""

    __slots__ = ("_law", "_weights")

    def __init__(self, weights: np.ndarray) -> None:
        self._weights = weights
        self._law: np.ndarray | None = None

    def array(self) -> np.ndarray:
        """The law, computed on the first call."""
        if self._law is None:
            self._law = self._weights / sequential_sum(self._weights)
        return self._law

    def __array__(self, dtype: DTypeLike | None = None, copy: bool | None = None) -> np.ndarray:
        law = self.array() if dtype is None else self.array().astype(dtype, copy=False)
        return law.copy() if copy and law is self._law else law   # np.array(law): a copy

    def __getitem__(self, token: int) -> float:
        return float(self.array()[token])

    def __len__(self) -> int:
        return len(self._weights)


class _NumpyRows(TreeRule):
    """The row arithmetic of `TreeRule` on float64 numpy rows (see the module docstring)."""

    def law(self, weights: Row, mass: Number | None = None) -> Row:
        """``w / Σ w`` (the sequential sum, or ``mass`` when given: `mass`'s value);
        `NumericalError` when nothing is left. Without ``mass``, the law of a row of finite
        weights ``>= 0`` with one ``> 0`` (whose sum is ``> 0`` in any order) is a `_Law`,
        computed when first read."""
        array = _floats(weights)
        if mass is None and len(array) >= _LAZY:
            low, high = float(array.min()), float(array.max())
            if low >= 0 and 0 < high < np.inf:
                return cast(Row, _Law(array))
        total = sequential_sum(array) if mass is None else float(mass)
        if not total > 0:
            raise NumericalError(f"a tree rule's distribution has no mass left (sum {total!r} "
                                 f"of {len(array)} weights; float rounding in p or q)")
        return _as_row(array / total)

    def mass(self, weights: Row) -> Number:
        """``Σ weights``, left to right."""
        return sequential_sum(_floats(weights))

    def excess(self, weight: Number, target: Row, proposal: Row) -> Row:
        """``(w · p' − q)+`` (`dsi_ref.backends.engine.vectorised.weighted_residual`)."""
        return _as_row(weighted_residual(weight, target, proposal))

    def without(self, weights: Row, token: int) -> Row:
        """A copy with ``token``'s entry zeroed."""
        out = np.array(weights, dtype=np.float64)
        out[token] = 0.0
        return _as_row(out)

    def as_row(self, weights: Row) -> Row:
        """The float64 array itself (no step writes into a row)."""
        return _as_row(_floats(weights))

    def draw(self, weights: Row, rng: Randomness, key: tuple[str, int, tuple[int, ...]]) -> int:
        """`Sampler.categorical`'s token (`dsi_ref.backends.engine.vectorised.categorical`); weights
        that are not finite and ``>= 0`` are an `InvalidParameterError`, as for
        ``rng.categorical``."""
        array = _floats(weights)
        low, high = float(array.min()), float(array.max())   # NaN: both NaN
        if not (low >= 0 and high < np.inf):
            raise InvalidParameterError(f"categorical weights must be finite numbers >= 0 "
                                        f"(key {key!r})")
        if not high > 0:
            raise InvalidParameterError(f"categorical weights must have a positive sum (key "
                                        f"{key!r})")
        return categorical(array, rng, key, nonnegative=True)

    def best(self, weights: Row) -> int:
        """``np.argmax`` (the first maximum); a row with a NaN goes to the reference `argmax`,
        whose comparisons skip it."""
        array = _floats(weights)
        if np.isnan(array).any():
            return argmax(array.tolist())
        return int(np.argmax(array))

    def most_likely(self, weights: Row, k: int) -> list[int]:
        """`top_k_index`."""
        return top_k_index(_floats(weights), k)


class _VectorisedRecursiveRejection(_NumpyRows, TreeRule):
    """``"rrs"`` on numpy rows."""


class _VectorisedWithoutReplacement(_NumpyRows, RecursiveRejectionWithoutReplacement):
    """``"rrs_without_replacement"`` on numpy rows."""


class _VectorisedEagleTopK(_NumpyRows, EagleTopK):
    """``"eagle_topk"`` on numpy rows."""


class _VectorisedTraversal(_NumpyRows, Traversal):
    """``"traversal"`` on numpy rows."""


class _VectorisedGreedyTree(_NumpyRows, GreedyTree):
    """``"greedy"`` on numpy rows."""


_VECTORISED_TREE: dict[type, type[TreeRule]] = {
    TreeRule: _VectorisedRecursiveRejection,
    RecursiveRejectionWithoutReplacement: _VectorisedWithoutReplacement,
    EagleTopK: _VectorisedEagleTopK, Traversal: _VectorisedTraversal,
    GreedyTree: _VectorisedGreedyTree}


def vectorised_tree_rule(verify: TreeVerifyRule | TreeRule) -> TreeRule:
    """The tree rule ``verify`` (a name of `TREE_VERIFY_RULES` or a rule) with its row arithmetic
    on numpy rows (built-in rules: a new instance); a custom rule, a subclass included, is
    returned as given (correct on numpy rows, only slower). A bad name is an
    `InvalidParameterError` (`as_tree_rule`)."""
    rule = as_tree_rule(verify)
    fast = _VECTORISED_TREE.get(type(rule))
    return fast() if fast is not None else rule
