"""The verification rules on numpy rows, deciding exactly as the reference rules do.

`vectorised_rule` returns a rule of `dsi_ref.decoders.verification` whose array steps (a draft ``x
~ q``,
the residual ``(p − q)+``, a bonus ``y ~ p``) run on float64 numpy rows. Under ``Sampler(seed)``
every draw is the same function of (row, key) as `Sampler.categorical`: the index of the first
*sequential* prefix sum ``S_i = (((w_0 + w_1) + w_2) + … + w_i)`` that exceeds ``u · S_{V−1}``,
with ``u`` the keyed uniform.

A sequential prefix sum of a 32 000-entry row is one long chain of dependent additions (about
0.1 ms here), and the host pays it for every draft. `categorical` gets the same index faster
with a *certified* search: block sums (vectorised) locate the block that holds the crossing,
one short sequential sum inside it gives a candidate index, and a rigorous rounding-error bound
decides whether that candidate is certainly the sequential answer. Any summation tree of ``n``
non-negative floats is within ``γ_n · Σ w`` of the exact sum (``γ_n = n ε / (1 − n ε)``,
``ε = 2^-53``; Higham, *Accuracy and Stability of Numerical Algorithms*, §4.2), so the blocked
and the sequential prefix sums differ by at most ``2 γ_n Σ w``; when the threshold is not within
that distance of a boundary the candidate is the answer, otherwise (at most about once in 10^6
draws for a 32 000-entry row) the full sequential sum decides. The result is the sequential one
every time.

Block verification (`BlockVerification`) also flips Bernoulli coins ``u < h_i`` with
``h_i = ρ_i / (ρ_i + 1 − w_i)`` (`stop_weight`), where the reference's residual mass ``ρ_i``
is a *sequential* sum (``sum(...)`` of the row's ``(w · p − q)+``). `_stop_coin` computes the
mass by numpy's pairwise sum, which differs from the sequential one by at most the same
rounding bound (`_rounding_bound`); the exact ``h(ρ) = ρ / (ρ + c)`` is non-decreasing in ``ρ``
and the float ``h`` is within a few ulps of it, so ``u`` below ``h`` at the low end of that
interval (or at or above it at the high end) decides the coin as the sequential ``h`` would;
otherwise (rarely) the sequential sum (``np.cumsum``, left to right as Python's ``sum``) decides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...base.errors import NumericalError
from ...base.models import Number
from ...base.randomness import Randomness, Sampler, check_probability
from ...decoders.verification import (
    BlockVerification,
    Decision,
    ExactMatch,
    Greedy,
    RejectionSampling,
    Rule,
    VerifyRule,
    as_rule,
    stop_weight,
)

__all__ = ["categorical", "sequential_index", "sequential_sum", "vectorised_rule",
           "weighted_residual"]

#: Entries per block of the certified search; rows shorter than 4 blocks take the plain path.
BLOCK = 128
_EPS = 2.0 ** -53


def sequential_index(weights: np.ndarray, u: float, key: object = None) -> int:
    """`Sampler.categorical`'s index for weights ``w >= 0``: the first ``i`` with
    ``S_i > u · S_{V−1}`` (sequential prefix sums; the last positive weight when rounding at
    ``u ≈ 1`` finds none). A zero sum is a ``ValueError``."""
    cumulative = np.cumsum(weights)
    total = float(cumulative[-1])
    if not total > 0:
        raise ValueError(f"categorical weights must have a positive sum (key {key!r})")
    index = int(np.searchsorted(cumulative, u * total, side="right"))
    if index >= len(weights):
        index = int(np.flatnonzero(weights > 0)[-1])
    return index


def _rounding_bound(n: int, total: float) -> float:
    """A bound on ``|a − b|`` for any two float64 summation orders ``a``, ``b`` of the same
    prefix of ``n`` weights ``>= 0``, given one such sum ``total`` of all ``n`` of them: each is
    within ``γ_n Σ w`` of the exact sum, and ``Σ w <= total (1 + γ_n)`` (Higham §4.2)."""
    gamma = n * _EPS / (1 - n * _EPS)
    return 2 * gamma * total * (1 + gamma) * (1 + 1e-6)


def sequential_sum(weights: np.ndarray) -> float:
    """`dsi_ref.base.models.sequential_sum` of an array: left to right (``np.cumsum`` is
    sequential)."""
    return float(np.cumsum(weights)[-1]) if len(weights) else 0.0


def _certified_index(weights: np.ndarray, u: float) -> int | None:
    """`sequential_index`, or ``None`` when the blocked sums cannot certify it."""
    n = len(weights)
    full = n // BLOCK * BLOCK
    sums = weights[:full].reshape(-1, BLOCK).sum(axis=1)
    if full < n:
        sums = np.append(sums, weights[full:].sum())
    ends = np.cumsum(sums)                          # blocked prefix sum at each block's end
    total = float(ends[-1])
    if not total > 0:                               # all zero (or not finite): decided slowly
        return None
    bound = _rounding_bound(n, total)               # |blocked − sequential| prefix sums
    x = u * total
    slack = bound + 4 * _EPS * total                # |x − u · S_{V−1}|, with two roundings
    block = int(np.searchsorted(ends, x, side="right"))
    if block >= len(sums):
        return None
    base = float(ends[block - 1]) if block else 0.0
    first = block * BLOCK
    prefix = base + np.cumsum(weights[first:first + BLOCK])
    j = int(np.searchsorted(prefix, x, side="right"))
    if j >= len(prefix):
        return None
    before = float(prefix[j - 1]) if j else (base if block else -np.inf)
    if float(prefix[j]) - bound > x + slack and before + bound <= x - slack:
        return first + j
    return None


def weighted_residual(weight: Number, target_probs: Sequence[Number],
                      draft_probs: Sequence[Number]) -> np.ndarray:
    """`dsi_ref.decoders.verification.weighted_residual` on float64 rows, entry for entry the
    same numbers: ``(w · p − q)+`` (``w · p`` is skipped for ``w == 1``, where it is ``p``), a new
    array."""
    target = np.asarray(target_probs)
    weights: np.ndarray = (np.subtract(target, np.asarray(draft_probs)) if weight == 1 else
                           np.multiply(target, float(weight)))
    if weight != 1:
        np.subtract(weights, np.asarray(draft_probs), out=weights)
    np.maximum(weights, 0.0, out=weights)   # exactly where(w p > q, w p − q, 0)
    return weights


def _stop_coin(weight: Number, residual: np.ndarray, rng: Randomness, key: object) -> bool:
    """``rng.bernoulli(stop_weight(weight, sum(residual)), key)`` with the reference's sequential
    ``sum``; for `Sampler`, certified from the pairwise sum when ``u`` is clear of the rounding
    interval of ``h`` (see the module docstring)."""
    if isinstance(rng, Sampler):
        total = float(residual.sum())
        if math.isfinite(total) and 0 <= weight <= 1:
            bound = _rounding_bound(len(residual), total) + 2 * _EPS * total  # + total ± bound
            low = stop_weight(weight, max(total - bound, 0.0))
            high = stop_weight(weight, total + bound)
            u = rng.uniform(key)
            if u < low * (1 - 16 * _EPS):
                return True
            if u >= high * (1 + 16 * _EPS):
                return False
            h = stop_weight(weight, sequential_sum(residual))
            check_probability(h)
            return bool(u < h)
    return rng.bernoulli(stop_weight(weight, sequential_sum(residual)), key=key)


def categorical(weights: np.ndarray, rng: Randomness, key: object, *,
                nonnegative: bool = False) -> int:
    """``rng.categorical(weights, key)`` for a float64 array: for `Sampler`, the index of
    `sequential_index` at the keyed uniform (by the certified search for long rows).
    ``nonnegative=True`` skips the check that every weight is ``>= 0`` (the caller built them
    so)."""
    if not isinstance(rng, Sampler):
        return rng.categorical([float(w) for w in weights], key=key)
    if not nonnegative and not (weights >= 0).all():
        raise ValueError(f"categorical weights must be >= 0 (key {key!r})")
    u = rng.uniform(key)
    if len(weights) >= 4 * BLOCK:
        index = _certified_index(weights, u)
        if index is not None:
            return index
    return sequential_index(weights, u, key)


class _Vectorised(RejectionSampling):
    """The array steps of `RejectionSampling` (draft, residual, bonus) on numpy rows."""

    def draft(self, draft_probs: Sequence[Number], rng: Randomness,
              context: tuple[int, ...]) -> int:
        """``x ~ q`` (key ``("draft", i, context)``)."""
        return categorical(np.asarray(draft_probs), rng, ("draft", len(context), context))

    def residual(self, target_probs: Sequence[Number], draft_probs: Sequence[Number],
                 rng: Randomness, context: tuple[int, ...]) -> int:
        """A token from the normalised ``(p − q)+`` (key ``("residual", i, context)``)."""
        weights = weighted_residual(1, target_probs, draft_probs)
        if not weights.sum() > 0:
            raise NumericalError(f"rejected the draft at position {len(context)} but the "
                                 "residual (p - q)+ is empty: float rounding in p or q")
        return categorical(weights, rng, ("residual", len(context), context), nonnegative=True)

    def bonus(self, target_probs: Sequence[Number], rng: Randomness,
              context: tuple[int, ...]) -> int:
        """A token from ``p`` (key ``("target", i, context)``)."""
        return categorical(np.asarray(target_probs), rng, ("target", len(context), context))


class _VectorisedRejection(_Vectorised):
    """`RejectionSampling` on numpy rows."""


class _VectorisedExactMatch(_Vectorised, ExactMatch):
    """`ExactMatch` on numpy rows (its ``decide`` is inherited; ``bonus`` is vectorised)."""


class _VectorisedGreedy(_Vectorised, Greedy):
    """`Greedy` on numpy rows: ``np.argmax`` returns the first maximum, the reference's tie rule."""

    def draft(self, draft_probs: Sequence[Number], rng: Randomness,
              context: tuple[int, ...]) -> int:
        """``argmax q``."""
        return int(np.argmax(np.asarray(draft_probs)))

    def decide(self, target_probs: Sequence[Number], draft_probs: Sequence[Number] | None,
               draft: int | None, rng: Randomness, context: tuple[int, ...]) -> Decision:
        """Commit ``argmax p``; the draft is accepted when equal."""
        y = int(np.argmax(np.asarray(target_probs)))
        if draft is None:
            return Decision(y, False, "bonus")
        return Decision(y, y == draft, "accepted" if y == draft else "rejected")


class _VectorisedBlock(_Vectorised, BlockVerification):
    """`BlockVerification` on numpy rows: the weights as the reference computes them, each
    ``h_i`` coin by `_stop_coin`, the correction by `categorical` from the residual the scan
    already computed at ``τ`` (``(w_τ p_{τ+1} − q_{τ+1})+``, the one whose coin succeeded)."""

    def scan(self, weights: Sequence[Number], target_rows: Sequence[Sequence[Number]],
             draft_rows: Sequence[Sequence[Number]], drafts: Sequence[int], rng: Randomness,
             context: tuple[int, ...]) -> tuple[int, np.ndarray | None]:
        """``τ`` (see `BlockVerification.select`) and the residual ``(w_τ p − q)+`` at
        ``τ + 1`` when the scan computed it (``0 < τ < m``)."""
        m = len(drafts)
        for i in range(m, 0, -1):
            accepted = context + tuple(drafts[:i])
            key = ("block", len(accepted), accepted)
            if i == m:
                if rng.bernoulli(weights[m], key=key):      # h_m = w_m
                    return m, None
                continue
            rest = weighted_residual(weights[i], target_rows[i], draft_rows[i])
            if _stop_coin(weights[i], rest, rng, key):
                return i, rest
        return 0, None

    def select(self, weights: Sequence[Number], target_rows: Sequence[Sequence[Number]],
               draft_rows: Sequence[Sequence[Number]], drafts: Sequence[int], rng: Randomness,
               context: tuple[int, ...]) -> int:
        """``τ``: scan ``i = m … 1`` with coins ``h_i`` (`scan`)."""
        return self.scan(weights, target_rows, draft_rows, drafts, rng, context)[0]

    def correction(self, weight: Number, target_row: Sequence[Number],
                   draft_row: Sequence[Number], rng: Randomness, context: tuple[int, ...]) -> int:
        """A token from the normalised ``(w_τ · p_{τ+1} − q_{τ+1})+``."""
        return self._correct(weighted_residual(weight, target_row, draft_row), rng, context)

    @staticmethod
    def _correct(rest: np.ndarray, rng: Randomness, context: tuple[int, ...]) -> int:
        if not rest.sum() > 0:   # Σ of weights >= 0 is > 0 in any order iff one is > 0
            raise NumericalError(f"block verification stopped before position {len(context)} "
                                 "but the residual (w p - q)+ is empty: float rounding in p or q")
        return categorical(rest, rng, ("residual", len(context), context), nonnegative=True)

    def decide_window(self, target_rows: Sequence[Sequence[Number]],
                      draft_rows: Sequence[Sequence[Number]], drafts: Sequence[int],
                      rng: Randomness, context: tuple[int, ...]) -> list[Decision]:
        """Accept ``x_1 … x_τ``; then a correction at ``τ + 1`` unless ``τ = m``."""
        weights = self.weights(target_rows, draft_rows, drafts)
        tau, rest = self.scan(weights, target_rows, draft_rows, drafts, rng, context)
        decisions = [Decision(x, True, "accepted") for x in drafts[:tau]]
        if tau < len(drafts):
            after = context + tuple(drafts[:tau])
            token = (self._correct(rest, rng, after) if rest is not None else
                     self.correction(weights[tau], target_rows[tau], draft_rows[tau], rng, after))
            decisions.append(Decision(token, False, "rejected"))
        return decisions


_VECTORISED: dict[type, type] = {RejectionSampling: _VectorisedRejection,
                                 ExactMatch: _VectorisedExactMatch, Greedy: _VectorisedGreedy,
                                 BlockVerification: _VectorisedBlock}


def vectorised_rule(verify: VerifyRule | Rule) -> Rule:
    """The rule ``verify`` with its array steps on numpy rows (built-in rules); a custom rule is
    returned as given (correct on numpy rows, only slower)."""
    rule = as_rule(verify)
    fast = _VECTORISED.get(type(rule))
    return fast() if fast is not None else rule
