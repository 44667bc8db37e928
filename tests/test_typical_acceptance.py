"""Medusa's typical acceptance (`dsi_ref.decoders.typical`): lossy by design, so what is tested is
its exact TV against the target's law as a function of the posterior threshold ``ε``, checked
against laws computed here by hand, its lossless corners, and the generated table of
docs/verifiers.md."""

from __future__ import annotations

import doctest
import importlib.util
import math
from fractions import Fraction as F
from pathlib import Path
from types import ModuleType

import pytest

import dsi_ref as dr
import dsi_ref.audit.typical as typical_audit
import dsi_ref.decoders.typical as typical_rule
from dsi_ref.audit.laws import target_distribution
from dsi_ref.audit.registry import DECODERS
from dsi_ref.audit.suite import default_suite
from dsi_ref.audit.typical import typical_acceptance_report, typical_acceptance_tv
from dsi_ref.base.errors import InvalidParameterError
from dsi_ref.claims import CLAIMS
from dsi_ref.decoders.typical import TYPICAL_CORRECTIONS, TypicalAcceptance, typical_threshold
from dsi_ref.decoders.verification import RULES, VERIFY_RULES, Decision, argmax

ROOT = Path(__file__).resolve().parent.parent
SUITE = {p.name: p for p in default_suite()}


def test_doctests() -> None:
    for module in (typical_rule, typical_audit):
        assert doctest.testmod(module).failed == 0


# -- the rule ------------------------------------------------------------------------------------


def test_threshold_is_medusas() -> None:
    p = [F(1, 2), F(1, 3), F(1, 6)]
    entropy = -sum(float(x) * math.log(float(x) + 1e-5) for x in p)  # evaluate_posterior's
    assert typical_threshold(p, 0.09, 0.3) == min(0.09, 0.3 * math.exp(-entropy))
    rule = TypicalAcceptance()  # Medusa's defaults: posterior_threshold 0.09, alpha sqrt = 0.3
    assert (rule.epsilon, rule.delta, rule.correction) == (0.09, 0.3, "greedy")
    assert rule.threshold(p) == 0.09  # 0.3 * exp(-H) = 0.30 * 0.3679... > 0.09
    assert TypicalAcceptance(0.25).delta == 0.5
    # a zero entry adds nothing to the entropy (Medusa's log(0 + 1e-5) term is multiplied by 0)
    assert typical_threshold([F(1), F(0)], 1.0, 0.5) == 0.5 * math.exp(math.log(1 + 1e-5))


def test_accepts_exactly_above_the_threshold_and_commits_argmax() -> None:
    rule = TypicalAcceptance(0.09)
    p, q = [F(1, 2), F(1, 20), F(9, 20)], [F(1, 3)] * 3
    rng = dr.Sampler(0)
    assert rule.threshold(p) == 0.09
    assert rule.decide(p, q, 0, rng, ()) == Decision(0, True, "accepted")
    assert rule.decide(p, q, 1, rng, ()) == Decision(0, False, "rejected")  # argmax p
    assert rule.decide(p, q, None, rng, ()) == Decision(0, False, "bonus")
    # the comparison is exact: the float 0.09 is a binary fraction just below 9/100
    assert F(0.09) < F(9, 100)
    assert rule.accept([F(9, 100), F(1, 2), F(41, 100)], q, 0, rng, ())
    assert not rule.accept([F(0.09), F(1, 2), 1 - F(1, 2) - F(0.09)], q, 0, rng, ())


def test_a_refused_argmax_is_committed_again_as_the_correction() -> None:
    # delta > 1 can put the threshold above max p: every draft is refused, even argmax p, and
    # Medusa's greedy correction commits the very token it refused
    rule = TypicalAcceptance(10.0, 10.0)
    p = [F(1, 2), F(1, 3), F(1, 6)]
    assert rule.threshold(p) > 1
    assert rule.decide(p, p, 0, dr.Sampler(0), ()) == Decision(0, False, "rejected")
    # the typical correction has no token left: it falls back to argmax p
    typical = TypicalAcceptance(10.0, 10.0, correction="typical")
    assert typical.residual(p, p, dr.Sampler(0), ()) == argmax(p) == 0


def test_bad_arguments() -> None:
    for kwargs in ({"epsilon": -0.1}, {"epsilon": 0.1, "delta": -1.0},
                   {"epsilon": float("nan")}, {"epsilon": 0.1, "entropy_offset": -1.0}):
        with pytest.raises(InvalidParameterError):
            TypicalAcceptance(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="correction"):
        TypicalAcceptance(correction="residual")  # type: ignore[arg-type]


def test_never_registered_as_lossless() -> None:
    assert not any("typical" in name for name in (*VERIFY_RULES, *RULES))
    assert all(c.verdict == "lossy" for c in CLAIMS if "typical" in c.rule)
    for spec in DECODERS.values():
        for variant in spec.variants:
            assert not isinstance(variant.kwargs.get("verify"), TypicalAcceptance)


# -- its exact law, against a hand computation ----------------------------------------------------


def _by_hand(p: list[F], q: list[F], rule: TypicalAcceptance) -> dict[tuple[int, ...], F]:
    """SI with lookahead 1 and N = 2 on a context-free pair, enumerated here: the first token is
    the draft ``x ~ q`` if ``p(x)`` is above the threshold, else the correction; the second is
    the correction token (a bonus after an accepted draft, or the target's token after a
    correction)."""
    threshold = rule.threshold(p)
    kept = [x if x >= threshold else F(0) for x in p]
    correction = {"greedy": {argmax(p): F(1)},
                  "target": dict(enumerate(p)),
                  "typical": {y: w / sum(kept) for y, w in enumerate(kept)}}[rule.correction]
    law: dict[tuple[int, ...], F] = {}
    for x, qx in enumerate(q):
        if not qx:
            continue
        first = {x: F(1)} if p[x] > threshold else correction
        for a, pa in first.items():
            for b, pb in correction.items():
                law[(a, b)] = law.get((a, b), F(0)) + qx * pa * pb
    return {k: v for k, v in law.items() if v}


@pytest.mark.parametrize("correction", TYPICAL_CORRECTIONS)
@pytest.mark.parametrize("epsilon", [0.0, 0.09, 0.2, 0.3, 1.0])
def test_the_exact_law_is_the_hand_computed_one(correction: str, epsilon: float) -> None:
    p, q = [F(1, 2), F(1, 4), F(1, 4)], [F(1, 6), F(1, 3), F(1, 2)]
    t, d = dr.TableLM.context_free(tuple(p)), dr.TableLM.context_free(tuple(q))
    rule = TypicalAcceptance(epsilon, correction=correction)  # type: ignore[arg-type]
    report = typical_acceptance_report(t, d, (), 2, 1, epsilon,
                                       correction=correction)  # type: ignore[arg-type]
    expected = _by_hand(p, q, rule)
    assert report.decoder_law == expected
    target = target_distribution(t, (), 2)
    tv = sum(abs(expected.get(s, F(0)) - target.get(s, F(0)))
             for s in set(expected) | set(target)) / 2
    assert report.tv_distance == tv


# -- its TV as a function of the threshold --------------------------------------------------------


def test_tv_is_positive_for_every_threshold_and_not_monotonic() -> None:
    pair = SUITE["bigram"]
    thresholds = [0.0, 0.05, 0.09, 0.3, 1.0]
    for correction in TYPICAL_CORRECTIONS:
        tv = dict(typical_acceptance_tv(pair.target, pair.drafter, pair.prompt, 4, 2, thresholds,
                                        correction=correction))
        assert all(v > 0 for v in tv.values()), (correction, tv)
        # a step function: no row of the pair has an entry in (0, 0.05]
        assert tv[0.0] == tv[0.05]
        if correction == "greedy":  # Medusa's default: it decreases, then rises again
            assert tv[0.0] > tv[0.09] > tv[0.3] < tv[1.0]


def test_lossless_corners() -> None:
    # p == q, every draft accepted (threshold 0), correction from p: the output is p's law
    pair = SUITE["p==q"]
    assert typical_acceptance_tv(pair.target, pair.drafter, pair.prompt, 4, 2, [0.0],
                                 correction="target") == [(0.0, F(0))]
    # nothing accepted (threshold above 1): the output is the correction's law on every pair:
    # the target's for "target", the greedy sequence for "greedy"
    for pair in default_suite():
        [(_, tv)] = typical_acceptance_tv(pair.target, pair.drafter, pair.prompt, 3, 2, [10.0],
                                          delta=10.0, correction="target")
        assert tv == 0, pair.name
        [(_, tv)] = typical_acceptance_tv(pair.target, pair.drafter, pair.prompt, 3, 2, [10.0],
                                          delta=10.0)
        [greedy] = target_distribution(pair.target, pair.prompt, 3, greedy=True)
        assert tv == 1 - target_distribution(pair.target, pair.prompt, 3).get(greedy, F(0))


# -- the generated table of docs/verifiers.md -----------------------------------------------------


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("typical_tv_table",
                                                  ROOT / "benchmarks" / "typical_tv_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_table_is_the_generators_output() -> None:
    gen = _generator()
    page = (ROOT / "docs" / "verifiers.md").read_text()
    assert gen.committed_table(page) == gen.table(stability=False), (
        "docs/verifiers.md is stale: run .venv/bin/python benchmarks/typical_tv_table.py --write")


def test_the_medusa_row_is_robust_to_float_rounding() -> None:
    gen = _generator()
    columns = gen.tv_columns([0.09])
    assert gen.check_stability(columns, [0.09]) == []
    # and the check can fail: a threshold exactly at an entry of a row (p(x) = 1/4 on the
    # context-free pair below; 0.25 is exact in binary) is decided differently after a nudge
    t = dr.TableLM.context_free((F(1, 2), F(1, 4), F(1, 4)))
    d = dr.TableLM.context_free((F(1, 6), F(1, 3), F(1, 2)))
    at, above = (typical_acceptance_tv(t, d, (), 2, 1, [eps], delta=1.0)[0][1]
                 for eps in (0.25, 0.25 * (1 - gen.NUDGE)))
    assert at != above
