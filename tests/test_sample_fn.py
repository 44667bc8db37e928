"""`dsi_ref.sample_fn` (issue 24, item 4): a ``program(rng)`` as the statistical audit's
``seed -> outcome``, optionally decoded into strings; and a sample function that returns ``None``
is refused with a named error instead of a "lossy" verdict."""

from __future__ import annotations

import pickle
from collections import Counter
from fractions import Fraction as F
from typing import Any

import pytest

import dsi_ref as dr
from dsi_ref.audit.sampling import ProgramSampler
from dsi_ref.audit.statistical import Alternative, sample_seeds
from dsi_ref.base.errors import InvalidAuditError

T = dr.TableLM.random(3, 1, seed=11, name="target")
D = dr.TableLM.random(3, 1, seed=12, name="drafter")
ABC = dr.Tokenizer(("a", "b", "ab"), name="ABC")


def program(rng: Any) -> dr.Run:
    return dr.speculative(T, D, (), 3, rng, lookahead=2)


def forgets_its_return(rng: Any) -> None:
    dr.speculative(T, D, (), 3, rng, lookahead=2)


def test_each_seed_runs_the_program_once_under_a_sampler_of_that_seed() -> None:
    draw = dr.sample_fn(program)
    for seed in (0, 1, 2**63 + 5):
        assert draw(seed) == program(dr.Sampler(seed)).tokens  # a Run counts as its tokens
    assert draw(3) == draw(3)


@pytest.mark.parametrize("tokenizer", [ABC, ABC.decode, type("HF", (), {"decode": ABC.decode})()],
                         ids=["Tokenizer", "function", "object-with-decode"])
def test_the_ids_are_decoded_when_a_tokenizer_is_given(tokenizer: Any) -> None:
    draw = dr.sample_fn(program, tokenizer=tokenizer)
    for seed in range(5):
        assert draw(seed) == ABC.decode(program(dr.Sampler(seed)).tokens)


def test_the_audit_counts_what_the_program_draws_under_its_seeds() -> None:
    """Deterministic: the counts of the audit are those of the program run under each
    per-sample seed (the verdict is not read)."""
    reference = dr.target_string_distribution(T, ABC, (), 3)
    report = dr.statistical_audit(dr.sample_fn(program, tokenizer=ABC), reference, 300,
                                  alternative=Alternative.tv(0.5), on_underpowered="report")
    expected = Counter(ABC.decode(program(dr.Sampler(s)).tokens) for s in sample_seeds(0, 300))
    assert report.counts == dict(expected) and report.n_samples == 300


def _module_level(rng: Any) -> tuple[int, ...]:
    return dr.autoregressive(T, (), 2, rng).tokens


def test_the_sample_function_pickles_for_a_parallel_sample_map() -> None:
    draw = dr.sample_fn(_module_level, tokenizer=ABC)
    again = pickle.loads(pickle.dumps(draw))
    assert isinstance(again, ProgramSampler) and again(4) == draw(4)
    assert repr(draw).startswith("sample_fn(") and "decoded" in repr(draw)


def test_a_program_that_returns_none_raises_a_named_error() -> None:
    draw = dr.sample_fn(forgets_its_return)
    with pytest.raises(InvalidAuditError, match=r"returned None for seed 7: return the "
                                                r"generated tokens"):
        draw(7)


def test_a_statistical_audit_whose_sample_function_returns_none_raises() -> None:
    """Before issue 24 every sample was the outcome ``None``, outside the reference law: the
    audit said "lossy". It now stops at the first sample, naming its seed."""
    law = dr.target_distribution(T, (), 3)
    first = sample_seeds(0, 1)[0]
    with pytest.raises(InvalidAuditError, match=rf"sample_fn returned None for seed {first}"):
        dr.statistical_audit(lambda seed: None, law, 100, on_underpowered="report")


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(InvalidAuditError, match="program must be a function"):
        dr.sample_fn((0, 1))  # type: ignore[arg-type]
    with pytest.raises(InvalidAuditError, match="tokenizer must have a decode"):
        dr.sample_fn(program, tokenizer=("a", "b"))
    with pytest.raises(InvalidAuditError, match="not a sequence of ids to decode"):
        dr.sample_fn(lambda rng: rng.categorical((F(1, 2), F(1, 2))), tokenizer=ABC)(0)
