"""Language models: validation names the model, the prefix and the problem; nothing is repaired
but a float row off 1 by more than rounding, which is read as the law it stands for."""

from __future__ import annotations

import math
from fractions import Fraction as F

import pytest
from hypothesis import given
from hypothesis import strategies as st

import dsi_ref as dr
from dsi_ref.audit.strategies import exact_rows, language_models
from dsi_ref.base.models import read_row, validate_probs


@pytest.mark.parametrize(("row", "problem"), [
    ((F(1, 2), F(1, 2), F(0)), None),
    ((F(1, 2), F(1, 2)), "expected 3 probabilities, got 2"),
    ((F(1, 2), F(1, 2), F(1, 2)), "sum to 3/2, not 1"),
    ((F(3, 2), F(-1, 2), F(0)), "token 1 is -1/2 < 0"),
    ((0.5, 0.5, math.nan), "token 2 is nan"),
    ((0.5, 0.5, math.inf), "token 2 is inf"),
    ((0.5, 0.5 + 1e-6, 0.0), "not 1 (tolerance"),
    ((0.5, 0.5 + 1e-12, 0.0), None),
    (("a", 0.5, 0.5), "has type str"),
])
def test_validation_rejects_each_malformed_row_with_a_named_error(row: tuple[object, ...],
                                                                 problem: str | None) -> None:
    model = dr.FunctionLM(3, lambda prefix: row, name="my-model")  # type: ignore[arg-type,return-value]
    if problem is None:
        assert len(model.probs((0, 1))) == 3
        return
    with pytest.raises(dr.InvalidDistributionError) as info:
        model.probs((0, 1))
    message = str(info.value)
    assert problem in message and "my-model" in message and "(0, 1)" in message


def test_exact_rows_must_sum_to_exactly_one() -> None:
    nearly = (F(1, 3), F(1, 3), F(1, 3) + F(1, 10**30))
    with pytest.raises(dr.InvalidDistributionError, match="sum to"):
        validate_probs(nearly, 3)


def test_table_model_validates_rows_at_construction_and_reports_missing_contexts() -> None:
    with pytest.raises(dr.InvalidDistributionError, match="sum to 1/2"):
        dr.TableLM(vocab_size=2, context=0, table={(): (F(1, 4), F(1, 4))})
    bigram = dr.TableLM(vocab_size=2, context=1, table={(0,): (F(1), F(0))})
    assert bigram.probs((1, 0)) == (F(1), F(0))
    with pytest.raises(dr.InvalidDistributionError, match=r"no row for context \(1,\)"):
        bigram.probs((0, 1))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"vocab_size": 0}, "vocab_size must be a positive int"),
    ({"vocab_size": 2, "eos": 2}, "eos=2 is not a token id"),
])
def test_bad_model_parameters_are_rejected(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dr.FunctionLM(probs=lambda prefix: (F(1),), **kwargs)


def test_random_table_model_is_seeded_exact_and_has_zeros() -> None:
    a = dr.TableLM.random(4, 1, seed=3)
    b = dr.TableLM.random(4, 1, seed=3)
    assert a.table == b.table
    assert a.table != dr.TableLM.random(4, 1, seed=4).table
    rows = list(a.table.values())
    assert all(isinstance(x, F) for row in rows for x in row)
    assert all(sum(row) == 1 for row in rows)
    assert any(0 in row for row in rows)
    assert len(rows) == 1 + 4  # the empty context and one row per last token
    floats = dr.TableLM.random(4, 1, seed=3, exact=False)
    assert all(isinstance(x, float) for row in floats.table.values() for x in row)


@given(language_models(max_vocab=4, max_context=2, eos=True), st.lists(st.integers(0, 3),
                                                                        max_size=4))
def test_generated_models_return_valid_rows_for_every_prefix(model: dr.TableLM,
                                                             prefix: list[int]) -> None:
    prefix = [t % model.vocab_size for t in prefix]
    validate_probs(model.probs(tuple(prefix)), model.vocab_size)


@given(st.integers(1, 5).flatmap(lambda v: exact_rows(v)))
def test_exact_rows_strategy_gives_distributions(row: tuple[F, ...]) -> None:
    assert sum(row) == 1 and all(x >= 0 for x in row)


def test_language_model_protocol_is_satisfied_by_toy_models() -> None:
    assert isinstance(dr.TableLM.context_free((F(1),)), dr.LanguageModel)
    assert isinstance(dr.FunctionLM(1, lambda p: (F(1),)), dr.LanguageModel)


# -- float rows are read as the laws they stand for (#34, point 2) ------------------------------

U = 2.0**-53


def exact_sum(row: tuple[object, ...]) -> F:
    return sum((F(x) for x in row), F(0))  # type: ignore[arg-type]


def test_read_row_keeps_exact_rows_and_rows_within_rounding_of_one() -> None:
    """The same tuple back: an exact row, or a float row whose float64 sum is within ``V · u``
    of 1 (here exactly ``3u`` below, ``V = 3``: the boundary, kept; ``4u`` below is divided,
    next test)."""
    exact = (F(1, 2), F(1, 2), F(0))
    assert read_row(exact, 3) is exact
    for within in ((0.25, 0.25, 0.5 - 3 * U), (0.25, 0.25, 0.5 + 2 * U)):
        assert abs(exact_sum(within) - 1) in (3 * F(U), 2 * F(U))
        assert read_row(within, 3) is within


@pytest.mark.parametrize("excess", [-4 * U, 4 * U, 1e-10, 9e-10, -9e-10])
def test_read_row_divides_a_row_off_one_by_more_than_rounding_by_its_float64_sum(
        excess: float) -> None:
    row = (0.25, 0.25, 0.5 + excess)
    got = read_row(row, 3)
    total = math.fsum(row)
    assert got == (0.25 / total, 0.25 / total, (0.5 + excess) / total)
    assert all(type(x) is float for x in got)
    assert abs(exact_sum(got) - 1) <= 4 * F(U)  # (V + 1) · u: what the float tolerance assumes


def test_read_row_divides_float32_entries_in_float64_and_takes_any_sequence() -> None:
    import numpy as np

    row = [np.float32(0.5), np.float32(0.5), np.float32(2e-10)]
    got = read_row(row, 3)
    total = math.fsum(float(x) for x in row)
    assert got == tuple(float(x) / total for x in row)
    assert all(type(x) is float for x in got)
    assert read_row([0.5, 0.5], 2) == (0.5, 0.5)


def test_read_row_refuses_what_validation_refuses() -> None:
    with pytest.raises(dr.InvalidDistributionError,
                       match=r"^m at prefix \(1,\): probabilities sum to 1\.00000100+1, not 1 "):
        read_row((0.5, 0.500001), 2, model=dr.FunctionLM(2, lambda p: (F(1), F(0)), name="m"),
                 prefix=(1,))


def test_the_library_models_serve_rows_as_read_row_reads_them() -> None:
    """`FunctionLM` reads each row (and so declares ``prevalidated``); `TableLM` keeps its rows
    read at construction; the decoders' seam reads any other model's rows."""
    from dsi_ref.decoders.common import model_probs

    row = (0.25, 0.75 + 5e-10)
    divided = read_row(row, 2)
    assert divided != row
    function = dr.FunctionLM(2, lambda prefix: row)
    assert function.prevalidated and function.probs(()) == divided
    table = dr.TableLM(vocab_size=2, context=1, table={(0,): row}, default=row)
    assert table.table[(0,)] == divided and table.default == divided

    class Plain:
        vocab_size, eos = 2, None

        def probs(self, prefix: tuple[int, ...]) -> tuple[float, float]:
            return row

    assert model_probs(Plain(), ()) == divided  # type: ignore[arg-type]


def test_a_function_model_reads_each_exact_row_once_and_returns_the_same_object() -> None:
    """An exact row built afresh at each call is validated once and returned as the object kept
    (the exact engine caches rows by identity); a float row is read at each call; a bad row is
    refused at each call, never kept."""
    calls: list[tuple[int, ...]] = []

    def fresh(prefix: tuple[int, ...]) -> tuple[F, ...]:
        calls.append(prefix)
        return (F(1, 4), F(3, 4)) if len(prefix) < 2 else (F(1, 2), F(1, 4))

    model = dr.FunctionLM(2, fresh, name="fresh")
    first, again = model.probs((0,)), model.probs((1,))
    assert first == (F(1, 4), F(3, 4)) and first is again and len(calls) == 2
    for _ in range(2):
        with pytest.raises(dr.InvalidDistributionError, match="sum to 3/4"):
            model.probs((0, 0))
    floats = dr.FunctionLM(2, lambda prefix: [0.25, 0.75])
    assert floats.probs(()) == (0.25, 0.75) and floats.probs(()) is not floats.probs(())


# -- every message whole, and the boundaries of read_row (issue 34, point 8) -------------------


@pytest.mark.parametrize(("row", "message"), [
    ((0.5, 0.6, -0.1), "m at prefix (1,): probability of token 2 is -0.1 < 0"),
    ((True, F(0), F(0)), "m at prefix (1,): probability of token 0 is a bool (True)"),
    (("a", 0.5, 0.5), "m at prefix (1,): probability of token 0 has type str; use "
                      "fractions.Fraction (exact) or float"),
    ((F(1, 2), F(1, 4), F(0)), "m at prefix (1,): probabilities sum to 3/4, not 1"),
])
def test_every_refusal_names_the_model_the_prefix_and_the_problem_whole(
        row: tuple[object, ...], message: str) -> None:
    from dsi_ref.base.models import checked_probs
    from dsi_ref.decoders.common import model_probs

    class Plain:
        vocab_size, eos, name = 3, None, "m"

        def probs(self, prefix: tuple[int, ...]) -> tuple[object, ...]:
            return row

    for read in (lambda: checked_probs(Plain(), (1,)),  # type: ignore[arg-type]
                 lambda: model_probs(Plain(), (1,)),  # type: ignore[arg-type]
                 lambda: validate_probs(row, 3, model=Plain(), prefix=(1,)),  # type: ignore[arg-type]
                 lambda: read_row(row, 3, model=Plain(), prefix=(1,))):  # type: ignore[arg-type]
        with pytest.raises(dr.InvalidDistributionError) as caught:
            read()
        assert str(caught.value) == message


def test_a_function_model_keeps_exact_rows_only_and_takes_any_sequence(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A float row equal to an exact one is never returned for it (only exact rows are kept);
    a list is read as a row; at most `KNOWN_ROWS` rows are kept."""
    import dsi_ref.base.models as models

    rows = iter([[0.25, 0.75], [F(1, 4), F(3, 4)], [F(1, 4), F(3, 4)]])
    model = dr.FunctionLM(2, lambda prefix: next(rows))
    floats, exact, again = model.probs(()), model.probs(()), model.probs(())
    assert [type(x) for x in floats] == [float, float]
    assert [type(x) for x in exact] == [F, F] and exact is again and type(exact) is tuple
    monkeypatch.setattr(models, "KNOWN_ROWS", 1)
    kept = dr.FunctionLM(2, lambda prefix: (F(1, 4), F(3, 4)) if prefix else (F(1, 2), F(1, 2)))
    assert kept.probs(()) is kept.probs(())   # the first row is kept
    assert kept.probs((0,)) is not kept.probs((0,))   # the second is past the limit
