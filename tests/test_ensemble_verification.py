"""Static ensemble verification (DIVERSE; transformers 5.25's ``assistant_ensemble_weight``):
the rule is written once (`dsi_ref.decoders.ensemble`), its exact law computed by the exact
engine (`dsi_ref.audit.ensemble`), and the table of docs/verifiers.md is its generator's output.

What is checked, exactly (no sampling): ``w = 1`` is rejection sampling (lossless) and ``p = q``
is lossless at every ``w``; for ``w < 1`` and ``p ≠ q`` the law is neither the target's nor the
mixture's, the first token follows ``v = w·p + (1 − w)·q`` and the last follows ``p`` given the
prefix; the acceptance probability is ``min(1, 1 − w + w·p/q)`` on a family of rows."""

from __future__ import annotations

import importlib.util
import sys
from fractions import Fraction as F
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsi_ref as dr
from dsi_ref.audit.ensemble import ensemble_distances, ensemble_law
from dsi_ref.audit.exact import exact_distribution
from dsi_ref.audit.suite import default_suite
from dsi_ref.base.errors import InvalidParameterError
from dsi_ref.decoders.ensemble import (
    EnsembleVerification,
    GreedyEnsembleVerification,
    ensemble_row,
    ensemble_target,
)

ROOT = Path(__file__).resolve().parent.parent
SUITE = {pair.name: pair for pair in default_suite()}


def _table() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ensemble_tv_table",
                                                  ROOT / "benchmarks" / "ensemble_tv_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ensemble_tv_table"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["bigram", "zeros", "eos", "parity", "one-hot"])
def test_weight_one_is_rejection_sampling_and_lossless(name: str) -> None:
    pair = SUITE[name]
    n = min(pair.max_new_tokens, 4)
    law = ensemble_law(pair.target, pair.drafter, pair.prompt, n, 2, F(1))
    assert law == dr.target_distribution(pair.target, pair.prompt, n)


@pytest.mark.parametrize("weight", [F(0), F(1, 3), F(9, 10)])
def test_a_drafter_equal_to_the_target_is_lossless_at_every_weight(weight: F) -> None:
    pair = SUITE["p==q"]
    assert ensemble_law(pair.target, pair.drafter, (), 4, 2, weight) == dr.target_distribution(
        pair.target, (), 4)


@pytest.mark.parametrize("weight", [F(0), F(1, 4), F(1, 2), F(9, 10)])
@pytest.mark.parametrize("lookahead", [1, 2, 3])
def test_first_token_follows_the_mixture_and_last_token_the_target(weight: F,
                                                                   lookahead: int) -> None:
    pair = SUITE["bigram"]
    n = 4
    law = ensemble_law(pair.target, pair.drafter, (), n, lookahead, weight)
    v = ensemble_row(weight, pair.target.probs(()), pair.drafter.probs(()))
    first = {x: sum((pr for seq, pr in law.items() if seq[0] == x), F(0)) for x in range(3)}
    assert [first[x] for x in range(3)] == list(v)
    # the last position is never drafted: given the first n - 1 tokens, it follows p
    prefixes: dict[tuple[int, ...], F] = {}
    for seq, pr in law.items():
        prefixes[seq[:-1]] = prefixes.get(seq[:-1], F(0)) + pr
    for seq, pr in law.items():
        assert pr / prefixes[seq[:-1]] == pair.target.probs(seq[:-1])[seq[-1]]
    row = ensemble_distances(pair.target, pair.drafter, (), n, lookahead, [weight])[0]
    assert row.to_target > 0 and row.to_mixture > 0   # exact against neither


def _row(values: list[int]) -> tuple[F, ...]:
    total = sum(values)
    return tuple(F(v, total) for v in values)


rows = st.lists(st.integers(0, 5), min_size=3, max_size=3).filter(lambda r: sum(r) > 0).map(_row)


@settings(max_examples=60, deadline=None)
@given(p=rows, q=rows, weight=st.fractions(0, 1))
def test_one_position_is_speculative_sampling_against_the_mixture(p: tuple[F, ...],
                                                                  q: tuple[F, ...],
                                                                  weight: F) -> None:
    """A drafted position's token follows ``v`` exactly, and each draft ``x`` is accepted with
    probability ``min(1, 1 − w + w·p(x)/q(x))``, on hypothesis-drawn rows with zeros."""
    rule = EnsembleVerification(weight)

    def position(rng: dr.Randomness) -> tuple[int, bool]:
        x = rule.draft(q, rng, ())
        decision = rule.decide(p, q, x, rng, ())
        return decision.token, decision.accepted

    law = exact_distribution(position)
    v = ensemble_row(weight, p, q)
    for y in range(3):
        assert sum((pr for (t, _), pr in law.items() if t == y), F(0)) == v[y]
        if q[y] > 0:
            accepted = law.get((y, True), F(0))
            assert accepted == q[y] * min(F(1), 1 - weight + weight * p[y] / q[y])


def test_the_greedy_path_commits_argmax_of_the_mixture_at_drafted_positions() -> None:
    t = dr.TableLM.context_free(_row([5, 4, 1]), name="t")
    d = dr.TableLM.context_free(_row([0, 9, 1]), name="d")
    half = GreedyEnsembleVerification(F(1, 2))
    tokens = dr.speculative(t, d, (), 3, dr.Sampler(0), 2, verify=half).tokens
    assert tuple(tokens) == (1, 1, 0)   # v = (1/4, 13/20, 1/10): argmax 1; the bonus argmax p
    one = GreedyEnsembleVerification(F(1))
    assert tuple(dr.speculative(t, d, (), 3, dr.Sampler(0), 2, verify=one).tokens) == (0, 0, 0)


def test_the_mixture_model_and_the_rule_refuse_bad_weights() -> None:
    pair = SUITE["bigram"]
    for bad in (F(3, 2), -1, float("nan")):
        with pytest.raises(InvalidParameterError):
            EnsembleVerification(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidParameterError):
            ensemble_target(pair.target, pair.drafter, bad)  # type: ignore[arg-type]


def test_the_docs_table_is_the_generators_output() -> None:
    table = _table()
    assert not table.polynomial_misfits()
    page = (ROOT / "docs" / "verifiers.md").read_text()
    assert table.committed_table(page) == table.table(check_polynomial=False), (
        "docs/verifiers.md is stale: run .venv/bin/python benchmarks/ensemble_tv_table.py --write")


def test_a_wrong_weight_is_not_a_polynomial_fit_of_the_right_one() -> None:
    """The polynomial check can fail: the law at w = 1/2 is not predicted by fitting the laws of
    a rule that ignores w (accept-all at w = 0) at every weight."""
    table = _table()
    pair = SUITE["bigram"]
    laws = [(w, ensemble_law(pair.target, pair.drafter, (), 2, 1, F(0))) for w in (F(0), F(1))]
    outcome = next(iter(laws[0][1]))
    points = [(w, law[outcome]) for w, law in laws]
    right = ensemble_law(pair.target, pair.drafter, (), 2, 1, F(1, 2))[outcome]
    assert table.interpolate(points, F(1, 2)) != right
