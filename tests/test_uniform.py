"""``rng.uniform``: a raw coin to compare, in every semantics (#24, item 1).

Under `Sampler` it is a float in [0, 1); under the exact engine a lazy uniform whose comparisons
are choices with the exact lengths of the sub-intervals. The library's rejection sampling,
written once more the way engines write it (``u <= p / q``, inverse-CDF draws on one uniform),
has the library's exact law; the float32 ``<=`` bug (a coin on the 2^-24 grid that can be 0
accepts a draft the target gives probability 0) gets its exact, tiny, nonzero TV.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction as F
from typing import Any

import pytest

import dsi_ref as dr
from dsi_ref.base.errors import InvalidParameterError
from dsi_ref.base.randomness import inverse_cdf
from dsi_ref.decoders.verification import RejectionSampling, residual


def law(program: Any, **kwargs: Any) -> dict[Any, F]:
    return dr.exact_distribution(program, **kwargs)


# -- the lazy uniform ---------------------------------------------------------------------------
def test_a_comparison_is_a_choice_with_the_exact_length() -> None:
    assert law(lambda rng: rng.uniform() < F(1, 3)) == {True: F(1, 3), False: F(2, 3)}
    assert law(lambda rng: rng.uniform() <= 0.25) == {True: F(1, 4), False: F(3, 4)}
    assert law(lambda rng: rng.uniform() * 3 < 1) == {True: F(1, 3), False: F(2, 3)}
    assert law(lambda rng: 1 - rng.uniform() > F(2, 3)) == {True: F(1, 3), False: F(2, 3)}
    assert law(lambda rng: (rng.uniform() + 1) / 2 >= F(3, 4)) == {True: F(1, 2), False: F(1, 2)}
    assert law(lambda rng: rng.uniform() < 2) == {True: F(1)}  # decided: no choice
    assert law(lambda rng: rng.uniform() < 0) == {False: F(1)}


def test_one_uniform_is_refined_by_every_comparison() -> None:
    def program(rng: Any) -> tuple[bool, bool]:
        u = rng.uniform()
        return u < F(1, 2), u < F(1, 4)

    assert law(program) == {(True, True): F(1, 4), (True, False): F(1, 4),
                            (False, False): F(1, 2)}


def test_a_key_is_one_uniform_shared_with_bernoulli_and_categorical() -> None:
    def program(rng: Any) -> tuple[bool, bool, int]:
        first = rng.uniform(key=("k", 0, ())) < F(1, 3)
        again = rng.bernoulli(F(1, 2), key=("k", 0, ()))  # u < 1/2
        return first, again, rng.categorical([1, 1, 1], key=("k", 0, ()))

    assert law(program) == {(True, True, 0): F(1, 3), (False, True, 1): F(1, 6),
                            (False, False, 1): F(1, 6), (False, False, 2): F(1, 3)}
    # without a key (or keyed=False) every uniform is its own
    assert law(lambda rng: (rng.uniform() < F(1, 2), rng.uniform() < F(1, 2)))[
        (True, False)] == F(1, 4)
    assert law(lambda rng: (rng.uniform(key="k") < F(1, 2), rng.uniform(key="k") < F(1, 2)),
               keyed=False)[(True, False)] == F(1, 4)


def test_the_grid_makes_zero_possible_and_le_differ_from_lt() -> None:
    grid = F(1, 2**24)
    assert law(lambda rng: rng.uniform(bits=24) <= 0) == {True: grid, False: 1 - grid}
    assert law(lambda rng: rng.uniform(bits=24) < 0) == {False: F(1)}
    assert law(lambda rng: rng.uniform() <= 0) == {False: F(1)}  # continuous: never 0
    assert law(lambda rng: rng.uniform(bits=2) == F(1, 4)) == {True: F(1, 4), False: F(3, 4)}
    # u < 1/3 on a 4-point grid: 0 and 1/4 of {0, 1/4, 1/2, 3/4}
    assert law(lambda rng: rng.uniform(bits=2) < F(1, 3)) == {True: F(1, 2), False: F(1, 2)}


def test_the_sampler_gives_floats_on_the_same_grid_and_keys() -> None:
    sampler = dr.Sampler(3)
    values = [sampler.uniform() for _ in range(1000)]
    assert all(0 <= v < 1 for v in values)
    assert sampler.uniform(key=("k", 0, ())) == sampler.uniform(key=("k", 0, ()))
    coarse = [sampler.uniform(bits=3) for _ in range(1000)]
    assert set(coarse) <= {i / 8 for i in range(8)} and 0.0 in coarse
    u = sampler.uniform(key=("k", 1, ()))
    assert sampler.bernoulli(0.5, key=("k", 1, ())) == (u < 0.5)


@pytest.mark.parametrize("bad", [0, 54, 24.0, True, "24"])
def test_bad_bits_are_refused_in_every_semantics(bad: object) -> None:
    with pytest.raises(InvalidParameterError, match="uniform bits"):
        dr.Sampler(0).uniform(bits=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="uniform bits"):
        law(lambda rng: rng.uniform(bits=bad) < F(1, 2))


def test_an_exact_uniform_is_not_a_number() -> None:
    with pytest.raises(TypeError, match="compare it"):
        law(lambda rng: float(rng.uniform()))
    with pytest.raises(TypeError, match="truth value"):
        law(lambda rng: bool(rng.uniform()))
    with pytest.raises(TypeError, match="real number"):
        law(lambda rng: rng.uniform() < "1")
    # times 0 it is a constant, compared without a choice (u * p < q with p = 0)
    assert law(lambda rng: (rng.uniform() * 0 < 1, rng.uniform() * 0 <= 0,
                            rng.uniform() * 0 > 0)) == {(True, True, False): F(1)}


def test_inverse_cdf_on_one_uniform_has_the_normalised_law() -> None:
    weights = [F(0), F(1, 6), F(0), F(1, 2), F(1, 3)]
    assert law(lambda rng: inverse_cdf(rng.uniform(), weights)) == {
        1: F(1, 6), 3: F(1, 2), 4: F(1, 3)}
    assert inverse_cdf(0.0, [0, 2, 1]) == 1 and inverse_cdf(0.999, [0, 2, 1]) == 2


# -- rejection sampling written the way engines write it ---------------------------------------
class UniformRejection(RejectionSampling):
    """The library's rejection sampling on raw coins, the way vLLM writes it: drafts and
    residual tokens by inverse CDF on one uniform, acceptance ``u <= p / q``. Same keys as the
    library's rule. ``bits``: the coins' grid (24: float32); ``strict``: ``<`` instead of
    ``<=``."""

    def __init__(self, bits: int | None = None, strict: bool = False) -> None:
        self.bits, self.strict = bits, strict

    def _coin(self, rng: Any, key: Any) -> Any:
        return rng.uniform(key=key, bits=self.bits)

    def draft(self, draft_probs: Sequence[Any], rng: Any, context: tuple[int, ...]) -> int:
        return inverse_cdf(self._coin(rng, ("draft", len(context), context)), draft_probs)

    def accept(self, target_probs: Sequence[Any], draft_probs: Sequence[Any], draft: int,
               rng: Any, context: tuple[int, ...]) -> bool:
        u = self._coin(rng, ("accept", len(context), context))
        ratio = target_probs[draft] / draft_probs[draft]
        return bool(u < ratio) if self.strict else bool(u <= ratio)

    def residual(self, target_probs: Sequence[Any], draft_probs: Sequence[Any], rng: Any,
                 context: tuple[int, ...]) -> int:
        return inverse_cdf(self._coin(rng, ("residual", len(context), context)),
                           residual(target_probs, draft_probs))

    def bonus(self, target_probs: Sequence[Any], rng: Any, context: tuple[int, ...]) -> int:
        return inverse_cdf(self._coin(rng, ("target", len(context), context)), target_probs)


TARGET = dr.TableLM.random(3, 1, seed=7, eos=2, name="target")
DRAFTER = dr.TableLM.random(3, 1, seed=8, eos=2, name="drafter")


def _si(rule: Any) -> Any:
    return lambda rng: dr.speculative(TARGET, DRAFTER, (), 3, rng, lookahead=2,
                                      verify=rule).tokens


def test_rejection_sampling_on_uniforms_has_the_librarys_exact_law() -> None:
    library = law(_si("rejection"))
    assert law(_si(UniformRejection())) == library
    assert library == dr.target_distribution(TARGET, (), 3)
    dr.assert_lossless(_si(UniformRejection()), TARGET, max_new_tokens=3)


def test_a_uniform_decoder_that_is_wrong_is_judged_lossy() -> None:
    class Inverted(UniformRejection):  # accepts with q / p: the ratio the wrong way round
        def accept(self, target_probs: Sequence[Any], draft_probs: Sequence[Any], draft: int,
                   rng: Any, context: tuple[int, ...]) -> bool:
            u = self._coin(rng, ("accept", len(context), context))
            return bool(u * target_probs[draft] < draft_probs[draft])

    report = dr.check_lossless(_si(Inverted()), TARGET, max_new_tokens=3)
    assert not report.equal and report.tv_distance > F(1, 100)


# dyadic rows, so that u < p / q is exact on a 2^-24 grid; p(0) = 0 where q(0) > 0
DYADIC_TARGET = dr.TableLM.context_free((F(0), F(3, 4), F(1, 4)), name="target")
DYADIC_DRAFTER = dr.TableLM.context_free((F(1, 4), F(1, 4), F(1, 2)), name="drafter")


def _dyadic(rule: Any) -> Any:
    return lambda rng: dr.speculative(DYADIC_TARGET, DYADIC_DRAFTER, (), 2, rng, lookahead=1,
                                      verify=rule).tokens


def test_the_float32_le_bug_has_its_exact_tiny_tv() -> None:
    """``u <= p / q`` with ``u`` on float32's grid ``{k / 2^24}`` accepts with probability
    ``p / q + 2^-24`` whenever ``p / q < 1``: the draft 0, which the target never gives, is
    accepted when ``u`` is exactly 0, and the draft 2 (ratio 1/2) a little too often. The first
    token's law is off by ``(q(0) + q(2)) · 2^-24``; the second is a bonus, drawn exactly (``<``
    on dyadic rows). ``<`` on the same grid, and ``<=`` on a continuous uniform, are exact."""
    reference = dr.target_distribution(DYADIC_TARGET, (), 2)
    assert law(_dyadic(UniformRejection(bits=24, strict=True))) == reference
    assert law(_dyadic(UniformRejection())) == reference
    report = dr.check_lossless(_dyadic(UniformRejection(bits=24)), DYADIC_TARGET,
                               max_new_tokens=2)
    assert not report.equal
    assert report.tv_distance == (F(1, 4) + F(1, 2)) * F(1, 2**24)
    bugged = report.decoder_law
    assert sum(p for tokens, p in bugged.items() if tokens[0] == 0) == F(1, 4) * F(1, 2**24)
