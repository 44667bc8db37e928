"""DSI against scheduler classes (`dsi_ref.audit.schedulers`): which adversaries break which rule.

A content-aware scheduler sees a draft before it is delivered and decides whether its position is
verified against it or decided by the frontier task's bonus token. Rejection sampling's output is
biased towards the draft, so that steering changes the law; exact-match sampling commits
``y ~ p`` whatever the draft, so it does not. The checker finds the minimal witness, pinned here.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction as F
from typing import Any

import pytest

from dsi_ref.audit.exact import exact_distribution
from dsi_ref.audit.schedulers import (
    CONTAINED_IN,
    SCHEDULER_CLASSES,
    SchedulerClass,
    check_scheduler_class,
    default_random_latency,
    minimal_witness,
    oblivious_schedules,
    witness_summary,
)
from dsi_ref.audit.suite import default_suite
from dsi_ref.base.errors import InvalidParameterError, PathLimitError
from dsi_ref.base.latency import Latency
from dsi_ref.base.models import TableLM
from dsi_ref.base.randomness import Key
from dsi_ref.claims import dsi_claim, dsi_claims
from dsi_ref.decoders.dsi import dsi
from dsi_ref.decoders.verification import VerifyRule

#: p = (1/2, 1/2, 0), q = (0, 1/3, 2/3): a draft 1 is always accepted, a draft 2 always rejected
TARGET = TableLM.context_free((F(1, 2), F(1, 2), F(0)), name="t")
DRAFTER = TableLM.context_free((F(0), F(1, 3), F(2, 3)), name="d")
#: the drafter as slow as the target: draft 0 and the frontier task finish together at time 1
TIES = Latency(drafter=F(1))
KWARGS: dict[str, Any] = {"lookahead": 2, "sp_degree": 2, "latency": TIES, "queue": "any"}


def test_content_aware_scheduler_breaks_rejection_sampling_with_the_pinned_minimal_witness(
) -> None:
    verdict = minimal_witness("content-aware", TARGET, DRAFTER, (), 3, verify="rejection",
                              **KWARGS)
    assert not verdict.lossless and verdict.max_new_tokens == 1
    witness = verdict.witness
    assert witness is not None
    # the only choice before the scheduler's: the draft at position 0 comes out 1 (prob. 1/3)
    assert [(s.kind, s.key, s.chosen, s.probability) for s in witness.path] == [
        ("categorical", ("draft", 0, ()), "1", F(1, 3))]
    assert witness.path_probability == F(1, 3)
    # delivering the draft first commits it (p(1) >= q(1): accepted); the frontier task first
    # draws a bonus token from p
    assert witness.options == ("drafter(position 0, token 1)", "task#0(frontier 0..0)")
    assert witness.laws == ({(1,): F(1)}, {(0,): F(1, 2), (1,): F(1, 2)})
    assert witness_summary(witness).endswith("P(1,) = 1 vs 1/2")


def _deliver_token_1_drafts_first(options: Sequence[object], key: Key) -> int:
    labels = [str(getattr(option, "label", "")) for option in options]
    drafts = [i for i, label in enumerate(labels) if "drafter" in label and "token 1" in label]
    return drafts[0] if drafts else next(i for i, label in enumerate(labels)
                                         if "frontier" in label)


@pytest.mark.parametrize(("verify", "law"), [
    ("rejection", {(1,): F(2, 3), (0,): F(1, 3)}),
    ("exact_match", {(1,): F(1, 2), (0,): F(1, 2)}),
])
def test_the_steering_scheduler_of_the_witness_shifts_the_law_under_rejection_only(
        verify: VerifyRule, law: dict[tuple[int, ...], F]) -> None:
    """The scheduler the witness describes, run as a fixed policy: it lets a draft of token 1
    win the tie and the frontier task otherwise. The target's law is (1/2, 1/2)."""
    steered = exact_distribution(
        lambda rng: dsi(TARGET, DRAFTER, (), 1, rng, verify=verify, sample_drafts_at="start",
                        **KWARGS).tokens, scheduler=_deliver_token_1_drafts_first)
    assert steered == law


def test_content_aware_scheduler_does_not_break_exact_match_sampling() -> None:
    for budget in (1, 2, 3):
        verdict = check_scheduler_class("content-aware", TARGET, DRAFTER, (), budget,
                                        verify="exact_match", **KWARGS)
        assert verdict.lossless and verdict.witness is None, str(verdict)


def test_history_adaptive_scheduler_does_not_break_rejection_sampling() -> None:
    # the same ties, but the draft is sampled when it is delivered: the scheduler cannot see it
    verdict = check_scheduler_class("adaptive", TARGET, DRAFTER, (), 3, verify="rejection",
                                    **KWARGS)
    assert verdict.lossless, str(verdict)


@pytest.mark.parametrize("scheduler_class", SCHEDULER_CLASSES)
@pytest.mark.parametrize("rule", ["block", "exact_match", "greedy", "rejection"])
def test_dsi_verdict_per_scheduler_class_matches_the_stated_claim(
        scheduler_class: SchedulerClass, rule: VerifyRule) -> None:
    pair = next(p for p in default_suite() if p.name == "bigram")
    latency = default_random_latency(TIES) if scheduler_class == "random" else TIES
    verdict = minimal_witness(scheduler_class, pair.target, pair.drafter, pair.prompt,
                              2, lookahead=2, sp_degree=2, latency=latency, verify=rule,
                              queue="any")
    assert verdict.lossless == (scheduler_class in dsi_claims(rule)), str(verdict)


def test_random_class_requires_random_latencies() -> None:
    with pytest.raises(InvalidParameterError, match="random"):
        check_scheduler_class("random", TARGET, DRAFTER, (), 2, latency=TIES)


def test_unknown_scheduler_class_is_a_named_error() -> None:
    with pytest.raises(InvalidParameterError, match="scheduler_class"):
        check_scheduler_class("omniscient", TARGET, DRAFTER, (), 2)  # type: ignore[arg-type]


def test_oblivious_class_checks_every_schedule_the_runs_reach_first_and_last_among_them(
) -> None:
    verdict = check_scheduler_class("oblivious", TARGET, DRAFTER, (), 2, verify="rejection",
                                    **KWARGS)
    assert verdict.lossless and all(r.equal for r in verdict.reports)
    assert len(verdict.reports) == len(verdict.schedules) == len(set(verdict.schedules)) > 2
    ranks = [{(key, n): rank for key, n, rank in s.ranks} for s in verdict.schedules]
    assert any(all(r == 0 for r in t.values()) for t in ranks)  # the rule "first"
    assert any(all(r == n - 1 for (_, n), r in t.items()) for t in ranks)  # the rule "last"
    assert any(len(set(t.values())) > 1 for t in ranks)  # and mixed ones


def test_oblivious_laws_equal_the_laws_under_each_schedules_fixed_policy() -> None:
    def program(rng: Any) -> tuple[int, ...]:
        return dsi(TARGET, DRAFTER, (), 2, rng, verify="rejection", **KWARGS).tokens

    laws = oblivious_schedules(program)
    assert len(laws) == 4  # the bounded instance has two decision points reached, 2 ranks each
    for schedule, law in laws:
        assert exact_distribution(program, scheduler=schedule.policy()) == law
    first = next(law for s, law in laws if all(r == 0 for _, _, r in s.ranks))
    assert first == exact_distribution(program, scheduler="first")


def _mixed_schedule_decoder(target: Any, drafter: Any, prompt: Sequence[int],
                            max_new_tokens: int, rng: Any, **_: Any) -> Any:
    """A lossy decoder only a mixed oblivious schedule exposes: two ties, at times 1 and 2; the
    output is biased to token 0 exactly when the first tie goes to option 0 and the second to
    option 1 (uniform rules "first" and "last" both see the target's law (1/2, 1/2))."""
    a = rng.choose(["x", "y"], key=("tie", F(1)))
    b = rng.choose(["x", "y"], key=("tie", F(2)))
    token = 0 if (a, b) == ("x", "y") else rng.categorical([F(1), F(1)], key=("target", 0, ()))
    return type("Run", (), {"tokens": (token,)})


def test_the_oblivious_class_catches_a_bug_that_first_and_last_both_miss() -> None:
    target = TableLM.context_free((F(1, 2), F(1, 2)))
    for rule in ("first", "last"):
        law = exact_distribution(lambda rng: _mixed_schedule_decoder(
            target, target, (), 1, rng).tokens, scheduler=rule)
        assert law == {(0,): F(1, 2), (1,): F(1, 2)}
    verdict = check_scheduler_class("oblivious", target, target, (), 1,
                                    decoder=_mixed_schedule_decoder)
    assert not verdict.lossless and len(verdict.reports) == 4
    assert "under the schedule [('tie', Fraction(1, 1)) among 2: option 0, ('tie', " \
        "Fraction(2, 1)) among 2: option 1]" in str(verdict)
    assert "LOSSY: total-variation distance 1/2" in str(verdict)


def test_oblivious_is_weaker_than_content_aware_on_the_witness_instance() -> None:
    """The content-aware witness steers by the draft's value; no schedule fixed in advance can:
    under every oblivious schedule DSI with early-sampled drafts keeps the target law."""
    verdict = check_scheduler_class("oblivious", TARGET, DRAFTER, (), 1, verify="rejection",
                                    sample_drafts_at="start", **KWARGS)
    assert verdict.lossless and len(verdict.schedules) == 2


def test_oblivious_schedule_enumeration_is_bounded_and_refuses_a_scheduler() -> None:
    def program(rng: Any) -> tuple[int, ...]:
        return dsi(TARGET, DRAFTER, (), 2, rng, verify="rejection", **KWARGS).tokens

    with pytest.raises(PathLimitError, match="oblivious schedules"):
        oblivious_schedules(program, max_schedules=2)
    with pytest.raises(InvalidParameterError, match="scheduler="):
        oblivious_schedules(program, scheduler="first")



def _cancelling_decoder(target: Any, drafter: Any, prompt: Sequence[int], max_new_tokens: int,
                        rng: Any, latency: Latency | None = None, **_: Any) -> Any:
    """Lossy, yet lossless under the ties "first", "last" and "uniform": after a forward (its
    cost drawn from ``latency``), two ties; the output leans to token 0 when they go (x, y) and
    as much to token 1 when they go (y, x), so the fair die averages the two."""
    if latency is not None:
        latency.cost("target", False, rng)
    a = rng.choose(["x", "y"], key=("tie", F(1)))
    b = rng.choose(["x", "y"], key=("tie", F(2)))
    row = {("x", "y"): (F(3, 4), F(1, 4)), ("y", "x"): (F(1, 4), F(3, 4))}.get(
        (a, b), (F(1, 2), F(1, 2)))
    return type("Run", (), {"tokens": (rng.categorical(row),)})


def _steering_decoder(target: Any, drafter: Any, prompt: Sequence[int], max_new_tokens: int,
                      rng: Any, latency: Latency | None = None, **_: Any) -> Any:
    """Lossy only for a scheduler that reads the history: a fair token, then a tie whose two
    options keep it or flip it; a scheduler that has seen the token can always make it 0."""
    if latency is not None:
        latency.cost("target", False, rng)
    token = rng.categorical((F(1, 2), F(1, 2)))
    keep = rng.choose(["keep", "flip"], key=("tie", F(1))) == "keep"
    return type("Run", (), {"tokens": (token if keep else 1 - token,)})


def _verdicts(decoder: Any) -> dict[SchedulerClass, bool]:
    """``decoder``'s verdict (lossless?) per class on the fair one-token target; random costs
    for the random class."""
    target = TableLM.context_free((F(1, 2), F(1, 2)))
    random_costs = Latency(target={F(1): F(1, 2), F(2): F(1, 2)})
    return {cls: check_scheduler_class(cls, target, target, (), 1, decoder=decoder,
                                       latency=random_costs if cls == "random" else TIES
                                       ).lossless
            for cls in SCHEDULER_CLASSES}


def test_the_order_of_the_classes_is_exactly_contained_in() -> None:
    """#34, point 5: the classes are not a chain. For every ordered pair of classes, ``a`` is
    contained in ``b`` (`CONTAINED_IN`) exactly when no decoder here is lossy under ``a`` and
    lossless under ``b``: two toy decoders and the registry's rows of two DSI rules separate
    every pair it leaves out, and none contradicts a pair it holds. Before, schedulers.py listed
    the classes "from weakest to strongest" and a test took random to contain oblivious; the
    cancelling decoder is lossy under oblivious and lossless under random."""
    for a, b in CONTAINED_IN:
        assert a != b and all((a, c) in CONTAINED_IN for x, c in CONTAINED_IN if x == b)
    examples = {"cancelling": _verdicts(_cancelling_decoder),
                "steering": _verdicts(_steering_decoder)}
    for label in ("block, maximal windows", "rejection"):
        examples[label] = {cls: dsi_claim(label, cls).verdict == "lossless"
                           for cls in SCHEDULER_CLASSES}
    assert examples["cancelling"] == {"oblivious": False, "random": True, "adaptive": False,
                                      "content-aware": False}
    assert examples["steering"] == {"oblivious": True, "random": True, "adaptive": False,
                                    "content-aware": False}
    for a in SCHEDULER_CLASSES:
        for b in SCHEDULER_CLASSES:
            if a != b:
                separated = [name for name, v in examples.items() if not v[a] and v[b]]
                assert ((a, b) in CONTAINED_IN) == (not separated), (a, b, separated)
