"""Tests that pin dsi_ref/audit/exact/uniform.py exactly, so that mutation testing (issue 34,
point 8; docs/mutation-testing.md) kills its mutants: the law of every comparison on each side
of its threshold, after every affine map (``+``, ``-`` from either side, ``*``, ``/``, negation),
on and off a grid, at the grid's edges, with the choices it makes or does not make, the
inexact flag of a float threshold, and every message whole. Every expected value is worked out
by hand."""

from __future__ import annotations

from fractions import Fraction as F
from typing import Any

import pytest

from dsi_ref.audit.exact import exact_distribution, exact_law
from dsi_ref.audit.exact.uniform import ExactUniform, Unshared
from dsi_ref.base.errors import InvalidParameterError

HALF, THIRD, QUARTER = F(1, 2), F(1, 3), F(1, 4)


def law(compare: Any, bits: int | None = None) -> dict[Any, F]:
    """The exact law of ``compare(u)`` for one uniform ``u``."""
    return exact_distribution(lambda rng: compare(rng.uniform(bits=bits)))


def coin(p: F) -> dict[Any, F]:
    """The law of a comparison true with probability ``p``."""
    return {v: q for v, q in ((True, p), (False, 1 - p)) if q}


@pytest.mark.parametrize(("compare", "p"), [
    (lambda u: u < THIRD, THIRD), (lambda u: u <= THIRD, THIRD),
    (lambda u: u > THIRD, 1 - THIRD), (lambda u: u >= THIRD, 1 - THIRD),
    (lambda u: THIRD > u, THIRD), (lambda u: THIRD < u, 1 - THIRD),  # noqa: SIM300 (reflected)
    (lambda u: u + QUARTER < HALF, QUARTER), (lambda u: QUARTER + u > HALF, 1 - QUARTER),
    (lambda u: u - QUARTER < QUARTER, HALF), (lambda u: HALF - (u + QUARTER) > 0, QUARTER),
    (lambda u: 1 - u > THIRD, 1 - THIRD), (lambda u: -u > -THIRD, THIRD),
    (lambda u: u * 2 < HALF, QUARTER), (lambda u: 3 * u >= 1, 1 - THIRD),
    (lambda u: u * -2 > -HALF, QUARTER), (lambda u: u / 4 < F(1, 8), HALF),
    (lambda u: u / -2 < -QUARTER, HALF), (lambda u: (u + 1) / 2 < F(3, 4), HALF),
    (lambda u: u * 0 < HALF, F(1)), (lambda u: u * 0 > HALF, F(0)),
    (lambda u: u * 0 + HALF <= HALF, F(1)), (lambda u: u * 0 + HALF < HALF, F(0)),
    (lambda u: u * 0 + HALF >= HALF, F(1)), (lambda u: u * 0 + HALF > HALF, F(0)),
    (lambda u: u * 0 + HALF >= QUARTER, F(1)), (lambda u: u * 0 + HALF > QUARTER, F(1)),
    (lambda u: u * 0 + HALF <= QUARTER, F(0)), (lambda u: u * 0 + HALF < QUARTER, F(0)),
    (lambda u: -(u + QUARTER) > -HALF, QUARTER), (lambda u: u / 4 < F(1, 16), QUARTER),
    (lambda u: u * F(1, 2) > F(1, 8), F(3, 4)), (lambda u: 1 - u / 2 > F(7, 8), QUARTER),
])
def test_every_comparison_has_its_exact_law(compare: Any, p: F) -> None:
    assert law(compare) == coin(p)


def test_equality_is_a_point_of_measure_zero_off_the_grid_and_a_cell_on_it() -> None:
    assert law(lambda u: u == THIRD) == {False: F(1)}
    assert law(lambda u: u != THIRD) == {True: F(1)}
    assert law(lambda u: u == QUARTER, bits=2) == coin(QUARTER)  # v = 1/4: u in [1/4, 1/2)
    assert law(lambda u: u != QUARTER, bits=2) == coin(1 - QUARTER)


@pytest.mark.parametrize(("compare", "p"), [
    (lambda u: u < 0, F(0)), (lambda u: u <= 0, QUARTER), (lambda u: u > 0, 1 - QUARTER),
    (lambda u: u >= 0, F(1)), (lambda u: u < F(1, 10), QUARTER),
    (lambda u: u <= F(1, 10), QUARTER), (lambda u: u < QUARTER, QUARTER),
    (lambda u: u <= QUARTER, HALF), (lambda u: u > F(3, 4), F(0)),
    (lambda u: u >= F(3, 4), QUARTER), (lambda u: u < 1, F(1)), (lambda u: u <= 1, F(1)),
    (lambda u: u < -1, F(0)), (lambda u: u > 2, F(0)),
    (lambda u: u * 1 <= 0, QUARTER), (lambda u: u + 0 <= 0, QUARTER),
    (lambda u: -u >= 0, QUARTER), (lambda u: (u - QUARTER) * 2 < 0, QUARTER),
])
def test_the_grid_of_two_bits_puts_the_value_on_quarters(compare: Any, p: F) -> None:
    """``v = floor(4u) / 4`` takes 0, 1/4, 1/2, 3/4 with probability 1/4 each."""
    assert law(compare, bits=2) == coin(p)


@pytest.mark.parametrize(("compare", "choices"), [
    (lambda u: u < 0, 0), (lambda u: u < 1, 0), (lambda u: u >= 0, 0), (lambda u: u > 1, 0),
    (lambda u: u < -F(1, 2), 0), (lambda u: u > F(3, 2), 0), (lambda u: u < HALF, 1),
])
def test_a_comparison_the_interval_decides_makes_no_choice(compare: Any, choices: int) -> None:
    assert exact_law(lambda rng: compare(rng.uniform())).longest_path == choices
    assert exact_law(lambda rng: compare(rng.uniform(bits=3))).longest_path == choices


def test_a_float_threshold_is_inexact_only_where_it_makes_a_choice() -> None:
    assert exact_law(lambda rng: rng.uniform() < 0.5).inexact
    assert exact_law(lambda rng: rng.uniform(bits=2) < 0.3).inexact
    for threshold in (0.0, 1.0, -0.5, 2.0):
        assert not exact_law(lambda rng, t=threshold: rng.uniform() < t).inexact
        assert not exact_law(lambda rng, t=threshold: rng.uniform(bits=2) < t).inexact
    assert not exact_law(lambda rng: rng.uniform() < HALF).inexact


def test_one_uniform_refined_twice_on_either_side() -> None:
    def program(rng: Any) -> tuple[bool, bool]:
        u = rng.uniform()
        return u > THIRD, u >= HALF

    assert exact_distribution(program) == {(False, False): THIRD, (True, False): F(1, 6),
                                           (True, True): HALF}


def test_unkeyed_uniforms_are_numbered_and_keyed_ones_shared() -> None:
    keys: list[object] = []

    def program(rng: Any) -> bool:
        a, b, c = rng.uniform(), rng.uniform(), rng.uniform(key="k")
        keys.extend(x._key for x in (a, b, c))
        return bool(c < HALF) and bool(rng.uniform(key="k") < HALF)

    assert exact_distribution(program) == coin(HALF)
    assert keys[:3] == [Unshared(1), Unshared(2), "k"]
    assert Unshared(1) == Unshared(1) and Unshared(1) != Unshared(2) and Unshared(1) != 1


def test_repr_names_the_affine_map_the_grid_and_the_key() -> None:
    seen: list[str] = []

    def program(rng: Any) -> int:
        u = rng.uniform(key="k")
        seen.extend([repr(u), repr(u * 2 + 1), repr(u * 2), repr(u + 1),
                     repr(rng.uniform(bits=24))])
        return 0

    exact_distribution(program)
    assert seen == ["ExactUniform(u, key='k')", "ExactUniform(1 + 2·u, key='k')",
                    "ExactUniform(0 + 2·u, key='k')", "ExactUniform(1 + 1·u, key='k')",
                    "ExactUniform(u on a 2^-24 grid, key=Unshared(n=1))"]


@pytest.mark.parametrize(("use", "error", "message"), [
    (lambda u: float(u), TypeError, "an exact uniform has no single value: compare it (u < p) "
     "instead of converting it; the exact engine branches on each comparison"),
    (lambda u: bool(u), TypeError, "an exact uniform has no truth value: compare it (u < p)"),
    (lambda u: u / 0, ZeroDivisionError, "an exact uniform divided by 0"),
    (lambda u: u + "x", TypeError, "an exact uniform can be added to a real number only, got "
     "str"),
    (lambda u: u - True, TypeError, "an exact uniform can be added to a real number only, got "
     "bool"),
    (lambda u: "1" - u, TypeError, "an exact uniform can be added to a real number only, got "
     "str"),
    (lambda u: u * None, TypeError, "an exact uniform can be multiplied by a real number only, "
     "got NoneType"),
    (lambda u: u / "2", TypeError, "an exact uniform can be divided by a real number only, got "
     "str"),
    (lambda u: u < "x", TypeError, "an exact uniform can be compared with a real number only, "
     "got str"),
    (lambda u: u < float("nan"), InvalidParameterError, "an exact uniform cannot be compared "
     "with nan"),
    (lambda u: u + float("inf"), InvalidParameterError, "an exact uniform cannot be added to "
     "inf"),
    (lambda u: hash(u), TypeError, "unhashable type: 'ExactUniform'"),
])
def test_every_misuse_is_refused_with_its_message(use: Any, error: type, message: str) -> None:
    with pytest.raises(error) as caught:
        exact_distribution(lambda rng: use(rng.uniform()))
    assert str(caught.value) == message


def test_dividing_by_one_and_by_numpy_and_float_numbers_is_exact() -> None:
    import numpy as np

    assert law(lambda u: u / 1 < THIRD) == coin(THIRD)
    assert law(lambda u: u * np.int64(2) < HALF) == coin(QUARTER)
    assert law(lambda u: u * 0.5 < QUARTER) == coin(HALF)
    assert law(lambda u: u < np.float64(0.25)) == coin(QUARTER)


def test_an_exact_uniform_is_built_on_the_splitter_it_is_given() -> None:
    calls: list[tuple[object, F, bool]] = []

    class Splitter:
        def split_uniform(self, key: object, threshold: F, inexact: bool) -> bool:
            calls.append((key, threshold, inexact))
            return True

    u = ExactUniform(Splitter(), "k", None)
    assert u < THIRD and not (u >= THIRD)
    assert (2 * u - 1 > 0) is False
    assert calls == [("k", THIRD, False), ("k", THIRD, False), ("k", HALF, False)]
