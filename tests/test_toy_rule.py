"""A new verification rule, written in this file alone, runs everywhere a built-in rule runs.

`UniformMatch` is a toy rule that no module of dsi_ref knows: it commits ``y = inverse_cdf(u, p)``
with one keyed uniform ``u`` of its own (key ``"toy"``) at every position, drafted or not, and
accepts the draft when ``y`` equals it. Each committed token is then ``p``-distributed given the
tokens before it whatever was drafted, so the rule is lossless, and schedule-free: a DSI run's
tokens do not depend on which positions had a draft.

Nothing else is touched to add it: it runs under SI and DSI (sampled), under the exact checker
(SI's law and DSI's verdict against the content-aware class, the strongest), and on the torch
engine, whose SI and DSI commit the reference decoders' tokens seed for seed. A rule that
ignores ``p`` (`UniformMatchOfQ`: ``y`` drawn from ``q``) is refused by the same checks, so they
can fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction as F

import pytest

import dsi_ref as dr
from dsi_ref.audit.schedulers import check_scheduler_class
from dsi_ref.base.models import Number
from dsi_ref.decoders.verification import Decision, RejectionSampling

PROMPT = (1, 2, 3)


class UniformMatch(RejectionSampling):
    """Draft ``x ~ q``; commit ``y = inverse_cdf(u, p)`` with one keyed uniform per position;
    accepted iff ``y = x``."""

    name = "uniform_match"

    def bonus(self, target_probs: Sequence[Number], rng: dr.Randomness,
              context: tuple[int, ...]) -> int:
        """``y = inverse_cdf(u, p)``, ``u`` keyed by the position and the tokens before it."""
        return dr.inverse_cdf(rng.uniform(key=("toy", len(context), context)), target_probs)

    def decide(self, target_probs: Sequence[Number], draft_probs: Sequence[Number] | None,
               draft: int | None, rng: dr.Randomness, context: tuple[int, ...]) -> Decision:
        """Commit ``y`` whatever the draft; it is accepted when equal."""
        y = self.bonus(target_probs, rng, context)
        if draft is None:
            return Decision(y, False, "bonus")
        return Decision(y, y == draft, "accepted" if y == draft else "rejected")


class UniformMatchOfQ(UniformMatch):
    """LOSSY: ``y`` is drawn from the drafter's row where there is one."""

    name = "uniform_match_of_q"

    def decide(self, target_probs: Sequence[Number], draft_probs: Sequence[Number] | None,
               draft: int | None, rng: dr.Randomness, context: tuple[int, ...]) -> Decision:
        """``y`` from ``q`` at a drafted position."""
        return super().decide(target_probs if draft_probs is None else draft_probs, draft_probs,
                              draft, rng, context)


TARGET = dr.TableLM(3, 1, {(): (F(1, 2), F(1, 3), F(1, 6)), (0,): (F(1, 5), F(3, 5), F(1, 5)),
                          (1,): (F(2, 3), F(1, 6), F(1, 6)), (2,): (F(1, 4), F(1, 4), F(1, 2))})
DRAFTER = dr.TableLM(3, 1, {(): (F(1, 3), F(1, 3), F(1, 3)), (0,): (F(1, 2), F(1, 4), F(1, 4)),
                           (1,): (F(1, 2), F(1, 2), F(0)), (2,): (F(1, 6), F(1, 6), F(2, 3))})
N = 3


def test_the_exact_checker_proves_si_with_the_new_rule_lossless() -> None:
    for lookahead in (1, 2):
        def program(rng: dr.Randomness, lookahead: int = lookahead) -> tuple[int, ...]:
            return dr.speculative(TARGET, DRAFTER, (), N, rng, lookahead=lookahead,
                                  verify=UniformMatch()).tokens
        assert dr.check_lossless(program, TARGET, (), N).equal


def test_the_exact_checker_proves_dsi_with_the_new_rule_lossless_under_content_aware() -> None:
    for sp_degree in (1, 2):
        verdict = check_scheduler_class(
            "content-aware", TARGET, DRAFTER, (), N, lookahead=2, sp_degree=sp_degree,
            verify=UniformMatch(), latency=dr.Latency(drafter=F(1, 3), target=F(1)))
        assert verdict.lossless, str(verdict)


def test_the_same_checks_refuse_a_wrong_rule_of_the_same_shape() -> None:
    def program(rng: dr.Randomness) -> tuple[int, ...]:
        return dr.speculative(TARGET, DRAFTER, (), N, rng, lookahead=2,
                              verify=UniformMatchOfQ()).tokens
    assert not dr.check_lossless(program, TARGET, (), N).equal
    verdict = check_scheduler_class("content-aware", TARGET, DRAFTER, (), N, lookahead=2,
                                       sp_degree=2, verify=UniformMatchOfQ(),
                                       latency=dr.Latency(drafter=F(1, 3), target=F(1)))
    assert not verdict.lossless


def test_sampled_si_and_dsi_commit_the_same_schedule_free_tokens() -> None:
    """The rule is schedule-free: SI's and DSI's tokens, for every lookahead and sp_degree, are
    non-SI's (an SI run with lookahead whose every draft is rejected commits the same ``y``)."""
    for seed in range(20):
        expected = dr.speculative(TARGET, DRAFTER, (), 6, dr.Sampler(seed), lookahead=1,
                                  verify=UniformMatch()).tokens
        for lookahead in (2, 3):
            assert dr.speculative(TARGET, DRAFTER, (), 6, dr.Sampler(seed), lookahead=lookahead,
                                  verify=UniformMatch()).tokens == expected
            for sp_degree in (1, 2, 3):
                assert dr.dsi(TARGET, DRAFTER, (), 6, dr.Sampler(seed), lookahead=lookahead,
                              sp_degree=sp_degree, verify=UniformMatch()).tokens == expected


@pytest.mark.torch
def test_the_torch_engine_runs_the_new_rule_as_the_reference_does(pair: object) -> None:
    pytest.importorskip("torch")
    from dsi_ref.backends.engine import Engine

    target, drafter = pair  # type: ignore[misc]
    with Engine(target, drafter) as engine:
        kinds: set[str] = set()
        for seed in range(4):
            ref = dr.speculative(target, drafter, PROMPT, 12, dr.Sampler(seed), lookahead=3,
                                 verify=UniformMatch())
            real = engine.speculative(PROMPT, 12, dr.Sampler(seed), lookahead=3,
                                      verify=UniformMatch())
            assert real.tokens == ref.tokens
            assert dict(real.stats) == dict(ref.stats)
            kinds.update(k for k in ("accepted", "rejected", "bonus") if ref.stats[k])
            real_dsi = engine.dsi(PROMPT, 12, dr.Sampler(seed), lookahead=2, sp_degree=2,
                                  verify=UniformMatch())
            assert real_dsi.tokens == ref.tokens  # schedule-free: DSI commits SI's tokens
        assert kinds == {"accepted", "rejected", "bonus"}  # every kind of decision was made
