"""The certified search of `dsi_ref.backends.vectorised.categorical` returns `Sampler`'s index.

`categorical` must equal `sequential_index` (the first sequential prefix sum above ``u · total``,
which is what `Sampler.categorical` computes) for every row and every ``u``: on random rows of
many shapes, at thresholds placed exactly on and one ulp around prefix sums (where the rounding
bound cannot certify and the sequential path must decide), and against `Sampler.categorical`
itself. The fast path must also be the one taken almost always, or it would be pointless.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dsi_ref import Sampler
from dsi_ref.backends.vectorised import (  # numpy only: runs without torch too
    BLOCK,
    _certified_index,
    categorical,
    sequential_index,
)


class _FixedUniform(Sampler):
    """A Sampler whose keyed uniform is a chosen value."""

    def __init__(self, u: float) -> None:
        super().__init__(0)
        self.u = u

    def uniform(self, key: object = None) -> float:
        return self.u


SIZES = [4 * BLOCK, 4 * BLOCK + 1, 1000, 4097, 32000]


def _row(gen: np.random.Generator, size: int, kind: int) -> np.ndarray:
    if kind == 0:
        row = gen.random(size)
    elif kind == 1:                                   # heavy tail: a few tokens hold the mass
        row = np.exp(gen.standard_normal(size) * 6)
    elif kind == 2:                                   # mostly zeros
        row = gen.random(size) * (gen.random(size) < 0.05)
        row[gen.integers(size)] = 1.0
    elif kind == 3:                                   # one spike, the rest tiny
        row = gen.random(size) * 1e-12
        row[gen.integers(size)] = 1.0
    else:                                             # a softmax of logits, as the models give
        logits = gen.standard_normal(size) * 3
        row = np.exp(logits - logits.max())
    return row / row.sum()


# alpha: the certified search gives up only when u · total lies within bound + slack of one of
# the n prefix sums (_certified_index), so a draw falls back w.p. <= 2 n (bound + slack) / total
# = 9.2e-7 at n = 32000; fewer than 97% certified of 200 draws needs >= 7 fallbacks:
# scipy.stats.binom.sf(6, 200, 9.2e-7) = 1.3e-30 (smaller for the other sizes)
@pytest.mark.montecarlo(alpha=2e-30)
@pytest.mark.parametrize("size", SIZES)
def test_random_rows_and_uniforms_give_the_sequential_index(size: int) -> None:
    gen = np.random.default_rng(size)
    certified = 0
    draws = 0
    for kind in range(5):
        for _ in range(40):
            row = _row(gen, size, kind)
            u = float(gen.random())
            expected = sequential_index(row, u)
            assert categorical(row, _FixedUniform(u), "k") == expected
            fast = _certified_index(row, u)
            assert fast is None or fast == expected
            certified += fast is not None
            draws += 1
    assert certified >= 0.97 * draws      # the certified path is the one taken


@pytest.mark.montecarlo(alpha=0, reason="u is placed on a prefix sum (or one ulp from it), "
                        "inside the rounding bound, so every row falls back: no draw can fail")
@pytest.mark.parametrize("size", SIZES)
def test_thresholds_on_prefix_sums_fall_back_to_the_sequential_sum(size: int) -> None:
    gen = np.random.default_rng(1 + size)
    fallbacks = 0
    for kind in range(5):
        row = _row(gen, size, kind)
        cumulative = np.cumsum(row)
        total = float(cumulative[-1])
        for i in gen.integers(0, size, 12):
            on = float(cumulative[i]) / total          # u · total lands on S_i (or next to it)
            for u in (on, math.nextafter(on, 0.0), math.nextafter(on, 1.0)):
                if not 0.0 <= u < 1.0:
                    continue
                assert categorical(row, _FixedUniform(u), "k") == sequential_index(row, u)
                fallbacks += _certified_index(row, u) is None
        for u in (0.0, math.nextafter(1.0, 0.0)):     # the ends of [0, 1)
            assert categorical(row, _FixedUniform(u), "k") == sequential_index(row, u)
    assert fallbacks > 0          # the uncertain case happened and was decided sequentially


def test_the_keyed_draw_is_samplers_own() -> None:
    gen = np.random.default_rng(3)
    for seed in range(30):
        row = _row(gen, 2000, seed % 5)
        key = ("draft", seed, (1, 2, 3))
        assert categorical(row, Sampler(seed), key) == \
            Sampler(seed).categorical(tuple(row.tolist()), key=key)


@pytest.mark.parametrize("weights, match", [
    (np.array([0.5, -0.1] + [0.0] * 600), ">= 0"), (np.zeros(700), "positive sum"),
    (np.array([np.nan] * 600), ">= 0")])
def test_bad_weights_are_refused(weights: np.ndarray, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        categorical(weights, Sampler(0), "k")
