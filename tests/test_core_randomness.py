"""Randomness as a parameter: the sampling interpreter and the exact interpreter agree on what
each choice means; the exact one quantifies over nondeterministic choices and reports witnesses."""

from __future__ import annotations

from fractions import Fraction as F
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import dsi_ref as dr
from dsi_ref.audit.strategies import exact_rows


# alpha: two independent 53-bit uniforms are equal w.p. 2^-53; two such != checks: 2.2e-16
@pytest.mark.montecarlo(alpha=3e-16)
def test_keyed_draws_depend_only_on_seed_and_key() -> None:
    a, b = dr.Sampler(7), dr.Sampler(7)
    b.uniform()  # consuming the unkeyed stream does not move keyed draws
    keys = [("draft", 0, ()), ("accept", 2, (1, 0)), ("target", 1, (3,))]
    assert [a.uniform(k) for k in keys] == [b.uniform(k) for k in reversed(keys)][::-1]
    assert dr.Sampler(8).uniform(keys[0]) != a.uniform(keys[0])
    assert a.uniform(("draft", 0, (1,))) != a.uniform(("draft", 0, (2,)))
    assert dr.keyed_uniform(7, keys[1]) == a.uniform(keys[1])


def test_unkeyed_sampler_streams_are_reproducible_and_seed_dependent() -> None:
    assert [dr.Sampler(1).categorical([1, 1, 1]) for _ in range(1)] == \
        [dr.Sampler(1).categorical([1, 1, 1])]
    s1, s2 = dr.Sampler(1, keyed=False), dr.Sampler(1, keyed=False)
    assert [s1.uniform(("k",)) for _ in range(50)] == [s2.uniform(("k",)) for _ in range(50)]
    s3 = dr.Sampler(2, keyed=False)
    assert [s1.uniform() for _ in range(5)] != [s3.uniform() for _ in range(5)]


@given(st.integers(1, 6).flatmap(exact_rows), st.integers(0, 2**32))
def test_sampler_never_draws_a_zero_weight_token(row: tuple[F, ...], seed: int) -> None:
    rng = dr.Sampler(seed)
    assert all(row[rng.categorical(row)] > 0 for _ in range(20))


@pytest.mark.parametrize(("call", "message"), [
    (lambda r: r.categorical([F(0), F(0)]), "positive sum"),
    (lambda r: r.categorical([F(1), F(-1), F(1)]), ">= 0"),
    (lambda r: r.bernoulli(F(3, 2)), r"lie in \[0, 1\]"),
    (lambda r: r.choose([]), "at least one option"),
])
@pytest.mark.parametrize("interpreter", ["sampler", "exact"])
def test_both_interpreters_reject_malformed_choices(call: Any, message: str,
                                                   interpreter: str) -> None:
    with pytest.raises(ValueError, match=message):
        if interpreter == "sampler":
            call(dr.Sampler(0))
        else:
            dr.exact_distribution(lambda rng: call(rng))


@pytest.mark.montecarlo(alpha=3e-14)  # 80 seeds miss one of 3 options w.p. < 3 (2/3)^80
def test_sampler_scheduler_policies() -> None:
    options = ["a", "b", "c"]
    assert dr.Sampler(0).choose(options) == "a"
    assert dr.Sampler(0, scheduler="last").choose(options) == "c"
    assert dr.Sampler(0, scheduler=lambda opts, key: 1).choose(options) == "b"
    picks = {dr.Sampler(s, scheduler="random").choose(options) for s in range(80)}
    assert picks == set(options)
    with pytest.raises(ValueError, match="index 5"):
        dr.Sampler(0, scheduler=lambda opts, key: 5).choose(options)
    with pytest.raises(dr.InvalidParameterError, match="seed must be an int"):
        dr.Sampler("0")  # type: ignore[arg-type]


def test_exact_law_of_a_small_program() -> None:
    def program(rng: dr.Randomness) -> tuple[int, ...]:
        first = rng.categorical([F(1, 2), F(1, 4), F(1, 4)])
        second = rng.bernoulli(F(1, 3))
        return (first, int(second))

    law = dr.exact_distribution(program)
    assert law == {(i, b): p * (F(1, 3) if b else F(2, 3))
                   for i, p in enumerate([F(1, 2), F(1, 4), F(1, 4)]) for b in (0, 1)}
    assert sum(law.values()) == 1


def test_keyed_draws_share_one_uniform_in_the_exact_interpreter() -> None:
    """Two draws with the same key are one uniform: comonotone, not independent."""
    def program(rng: dr.Randomness) -> tuple[int, int]:
        return (rng.categorical([F(1, 2), F(1, 2)], key=("k", 0, ())),
                rng.categorical([F(1, 4), F(3, 4)], key=("k", 0, ())))

    assert dr.exact_distribution(program) == {(0, 0): F(1, 4), (0, 1): F(1, 4), (1, 1): F(1, 2)}
    unkeyed = dr.exact_distribution(program, keyed=False)
    assert unkeyed[(1, 0)] == F(1, 8)


def test_keyed_bernoulli_and_categorical_share_the_uniform() -> None:
    def program(rng: dr.Randomness) -> tuple[bool, int]:
        return (rng.bernoulli(F(1, 3), key=("u",)), rng.categorical([1, 1, 1], key=("u",)))

    assert dr.exact_distribution(program) == {(True, 0): F(1, 3), (False, 1): F(1, 3),
                                              (False, 2): F(1, 3)}
    rng = dr.Sampler(5)
    for _ in range(1):
        coin, token = program(rng)
        assert coin == (token == 0)


def test_schedule_robust_choice_is_quantified_over() -> None:
    def program(rng: dr.Randomness) -> int:
        order = rng.choose(["ab", "ba"])
        x = rng.categorical([F(1), F(1)], key=("x",))
        y = rng.categorical([F(1), F(2)], key=("y",))
        return x + 2 * y if order == "ab" else 2 * y + x

    assert dr.exact_distribution(program) == {0: F(1, 6), 1: F(1, 6), 2: F(1, 3), 3: F(1, 3)}


def test_schedule_dependent_program_raises_with_the_shortest_witness() -> None:
    def program(rng: dr.Randomness) -> int:
        x = rng.categorical([F(1, 2), F(1, 2)])
        if x == 0:
            rng.bernoulli(F(1, 2))
            return 0
        # after x = 1 the scheduler decides the outcome
        return rng.choose([1, 2], key=("who",))

    with pytest.raises(dr.ScheduleDependenceError) as info:
        dr.exact_distribution(program, witness="shortest")
    witness = info.value.witness
    assert [s.chosen for s in witness.path] == ["1"]
    assert witness.options == ("1", "2")
    assert witness.path_probability == F(1, 2)
    assert witness.laws == ({1: F(1)}, {2: F(1)})
    assert "scheduler's options 1 and 2" in str(info.value)


def test_fixed_scheduler_resolves_choices_instead_of_quantifying() -> None:
    def program(rng: dr.Randomness) -> str:
        return rng.choose(["a", "b"])

    assert dr.exact_distribution(program, scheduler="first") == {"a": F(1)}
    assert dr.exact_distribution(program, scheduler="last") == {"b": F(1)}
    with pytest.raises(dr.ScheduleDependenceError):
        dr.exact_distribution(program)


def test_runaway_programs_hit_a_clear_limit() -> None:
    def forever(rng: dr.Randomness) -> int:
        n = 0
        while rng.bernoulli(F(1, 2)):
            n += 1
        return n

    with pytest.raises(dr.PathLimitError, match="choices"):
        dr.exact_distribution(forever, max_choices=50)

    def wide(rng: dr.Randomness) -> tuple[int, ...]:
        return tuple(rng.categorical([1] * 10) for _ in range(4))

    with pytest.raises(dr.PathLimitError, match="more than 1000 paths"):
        dr.exact_distribution(wide, max_paths=1000)


def test_hidden_randomness_is_detected() -> None:
    calls = iter(range(10**6))

    def program(rng: dr.Randomness) -> int:
        n = next(calls) % 2  # state outside rng: replays differ
        return sum(rng.categorical([1, 1]) for _ in range(n + 1))

    with pytest.raises(RuntimeError, match="not a deterministic function of its draws"):
        dr.exact_distribution(program)


def test_exact_expectation_is_a_fraction_for_rational_values() -> None:
    value = dr.exact_expectation(lambda rng: F(1, 3) * rng.categorical([F(1), F(2), F(3)]))
    assert value == F(1, 3) * (F(2, 6) + 2 * F(3, 6))
    assert isinstance(value, F)


def test_total_variation_of_exact_laws() -> None:
    assert dr.total_variation({0: F(1)}, {1: F(1)}) == 1
    assert dr.total_variation({0: F(1, 2), 1: F(1, 2)}, {0: F(1, 4), 1: F(3, 4)}) == F(1, 4)


@given(st.data())
def test_merge_points_and_keys_do_not_change_a_decoders_law(data: st.DataObject) -> None:
    """The DP shortcut (merging paths at equal states) and keyed draws are optimisations and a
    coupling: the law computed with them equals the plain path enumeration's."""
    from dsi_ref.audit.strategies import lookaheads, model_pairs

    target, drafter = data.draw(model_pairs(max_vocab=2))
    k = data.draw(lookaheads(2))
    decoder = data.draw(st.sampled_from(["speculative", "dsi"]))

    def program(rng: dr.Randomness) -> tuple[int, ...]:
        if decoder == "speculative":
            return dr.speculative(target, drafter, (), 3, rng, k).tokens
        return dr.dsi(target, drafter, (), 3, rng, lookahead=k, sp_degree=2).tokens

    merged = dr.exact_distribution(program)
    assert merged == dr.exact_distribution(program, merge=False)
    assert merged == dr.exact_distribution(program, keyed=False, scheduler="first")
