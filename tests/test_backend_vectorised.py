"""The certified search of `dsi_ref.backends.engine.vectorised.categorical` returns `Sampler`'s
index.

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
from dsi_ref.backends.engine.vectorised import (  # numpy only: runs without torch too
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


# --- block verification on numpy rows -------------------------------------------------------

def _block_rows(gen: np.random.Generator, size: int, m: int, case: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """``m + 1`` target rows and ``m`` drafter rows: random with zeros, equal rows (``p = q``:
    weight 1, empty residual), tied entries, and softmaxes of related logits (the engine's)."""
    if case == 3:
        logits = gen.standard_normal((m + 1, size)) * 4
        target = np.exp(logits - logits.max(axis=1, keepdims=True))
        noisy = logits[:m] + gen.standard_normal((m, size)) * 1.2
        drafter = np.exp(noisy - noisy.max(axis=1, keepdims=True))
    else:
        target = gen.random((m + 1, size)) * (gen.random((m + 1, size)) > 0.3)
        drafter = gen.random((m, size)) * (gen.random((m, size)) > 0.3)
        target[np.arange(m + 1), gen.integers(size, size=m + 1)] += 0.1
        drafter[np.arange(m), gen.integers(size, size=m)] += 0.1
        if case == 1:
            drafter[: m // 2 + 1] = target[: m // 2 + 1]            # p = q at some positions
        if case == 2:
            target[:, : size // 2] = 1.0 / size                     # ties
            drafter[:, size // 4: size // 2 + 1] = 1.0 / size
    return (target / target.sum(axis=1, keepdims=True),
            drafter / drafter.sum(axis=1, keepdims=True))


def _window(rule: object, target: np.ndarray, drafter: np.ndarray, seed: int,
            context: tuple[int, ...], m: int, rng: Sampler | None = None) -> list[object]:
    """Draft ``m`` tokens with ``rule`` and decide the window: the reference on tuples of
    Python floats, the vectorised rule on the numpy rows."""
    from dsi_ref.backends.engine.vectorised import vectorised_rule
    from dsi_ref.decoders.verification import BlockVerification, decide_window

    reference = isinstance(rule, BlockVerification) and type(rule) is BlockVerification
    rows_p = [tuple(r.tolist()) for r in target] if reference else target
    rows_q = [tuple(r.tolist()) for r in drafter] if reference else list(drafter)
    fast = vectorised_rule("rejection")          # drafts: the (tested) vectorised draft
    drafts = [fast.draft(drafter[i], Sampler(seed), context + (i,)) for i in range(m)]
    got = decide_window(rule, rows_p, rows_q, drafts,  # type: ignore[arg-type]
                        rng if rng is not None else Sampler(seed), context)
    return [drafts, got]


# alpha: the kinds are a coverage check; each of the 4 kinds of window (all accepted, some, none
# accepted, a lone draft) fails to occur in 600 random windows with probability far below 1e-30
@pytest.mark.montecarlo(alpha=1e-30)
def test_block_verification_on_numpy_rows_decides_like_the_reference() -> None:
    from dsi_ref.backends.engine.vectorised import _VectorisedBlock, vectorised_rule
    from dsi_ref.decoders.verification import BlockVerification

    reference, fast = BlockVerification(), vectorised_rule("block")
    assert isinstance(fast, _VectorisedBlock) and fast.name == "block"
    gen = np.random.default_rng(11)
    seen = set()
    for seed in range(600):
        size = int(gen.integers(2, 60)) if seed % 10 else int(gen.integers(500, 3000))
        m = 1 + seed % 6
        target, drafter = _block_rows(gen, size, m, seed % 4)
        context = tuple(int(t) for t in gen.integers(0, size, seed % 4))
        ref = _window(reference, target, drafter, seed, context, m)
        out = _window(fast, target, drafter, seed, context, m)
        assert out == ref, seed
        accepted = sum(d.accepted for d in out[1])       # type: ignore[attr-defined]
        seen.add("lone" if m == 1 else "all" if accepted == m else "none" if not accepted
                 else "some")
    assert seen == {"lone", "all", "none", "some"}


def test_block_verification_at_the_engines_vocabulary() -> None:
    from dsi_ref.backends.engine.vectorised import vectorised_rule
    from dsi_ref.decoders.verification import BlockVerification

    gen = np.random.default_rng(5)
    for seed in range(12):
        target, drafter = _block_rows(gen, 32000, 5, 3)
        assert _window(vectorised_rule("block"), target, drafter, seed, (seed,), 5) == \
            _window(BlockVerification(), target, drafter, seed, (seed,), 5)


@pytest.mark.montecarlo(alpha=0, reason="u is placed on the reference's h (and one ulp around "
                        "it), so the pairwise sum cannot certify the coin: no draw can fail")
def test_block_coins_at_the_boundary_follow_the_sequential_sum() -> None:
    from dsi_ref.backends.engine.vectorised import (
        _rounding_bound,
        _stop_coin,
        sequential_sum,
        weighted_residual,
    )
    from dsi_ref.decoders.verification import stop_weight
    from dsi_ref.decoders.verification import weighted_residual as reference_residual

    gen = np.random.default_rng(9)
    differ = 0
    for case in range(40):
        size = [7, 1000, 32000][case % 3]
        target, drafter = _block_rows(gen, size, 1, case % 4)
        weight = float(gen.random()) if case % 5 else 1.0
        rest = weighted_residual(weight, target[0], drafter[0])
        listed = reference_residual(weight, target[0].tolist(), drafter[0].tolist())
        assert rest.tolist() == listed                    # entry for entry the same numbers
        h = stop_weight(weight, sum(listed))
        assert sequential_sum(rest) == sum(listed)
        differ += float(rest.sum()) != sum(listed)
        assert abs(float(rest.sum()) - sum(listed)) <= _rounding_bound(size, float(rest.sum()))
        for u in (h, math.nextafter(h, 0.0), math.nextafter(h, 1.0), 0.0):
            if 0.0 <= u < 1.0:
                assert _stop_coin(weight, rest, _FixedUniform(float(u)), "k") == (u < h)
    assert differ > 0             # pairwise and sequential sums did differ somewhere


def test_the_engine_runs_block_verification_vectorised() -> None:
    pytest.importorskip("torch")
    import dsi_ref as dr
    from dsi_ref.backends.engine import Engine
    from dsi_ref.backends.engine.dsi import WallClockDSI
    from dsi_ref.backends.engine.si import WallClockSI
    from dsi_ref.backends.engine.vectorised import _VectorisedBlock, vectorised_rule
    from dsi_ref.backends.torch.model import build_pair
    from dsi_ref.decoders.dsi import DSIConfig
    from dsi_ref.decoders.speculative import SpeculativeConfig
    from dsi_ref.decoders.verification import BlockVerification

    assert isinstance(vectorised_rule(BlockVerification()), _VectorisedBlock)

    class Custom(BlockVerification):
        pass

    custom = Custom()
    assert vectorised_rule(custom) is custom                  # a subclass keeps its own steps
    with Engine(*build_pair()) as engine:
        si = WallClockSI(engine, (1, 2), 4, dr.Sampler(0), SpeculativeConfig(3, "block"), True)
        dsi = WallClockDSI(engine, engine.pool(2), (1, 2), 4, dr.Sampler(0),
                           DSIConfig(3, 2, verify="block"))
        assert isinstance(si.rule, _VectorisedBlock) and isinstance(dsi.rule, _VectorisedBlock)
