"""DSI's output law equals the target's for every schedule: tie orders, queue choices, latencies.

`exact_distribution` quantifies over every resolution of DSI's ``rng.choose`` (which of the events
due at one instant is delivered first; with ``queue="any"``, which waiting task gets a free
server) and requires every option to lead to the same law — the history-adaptive adversary. The
registry tests (tests/test_lossless_registry.py) already run DSI's default configuration; here the
queue policies, server counts down to one, random latencies and the fixed schedules are varied.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction as F
from typing import Any

import pytest
from hypothesis import given, note, reject, settings
from hypothesis import strategies as st

from dsi_ref import InvalidParameterError, Latency, Sampler, check_lossless, dsi
from dsi_ref.audit.exact import exact_distribution
from dsi_ref.audit.strategies import latencies, lookaheads, model_pairs, prompts
from dsi_ref.audit.suite import default_suite
from dsi_ref.base.randomness import Key
from dsi_ref.decoders.dsi import QUEUE_POLICIES, DSIConfig, QueuePolicy
from dsi_ref.decoders.verification import VERIFY_RULES


@settings(max_examples=6 * settings.default.max_examples)
@given(st.data(), st.sampled_from([(2, 3), (3, 2)]))
def test_dsi_output_law_equals_target_law_for_every_schedule(
        data: st.DataObject, size: tuple[int, int]) -> None:
    """Vocabulary 2 with up to 3 new tokens, or vocabulary 3 with up to 2."""
    max_vocab, max_tokens = size
    target, drafter = data.draw(model_pairs(max_vocab=max_vocab, max_context=1), label="pair")
    prompt = data.draw(prompts(target.vocab_size, max_len=1), label="prompt")
    n = data.draw(st.integers(1, max_tokens), label="max_new_tokens")
    verify = data.draw(st.sampled_from(VERIFY_RULES), label="verify")
    kwargs: dict[str, Any] = {
        "lookahead": data.draw(lookaheads(3), label="lookahead"),
        "sp_degree": data.draw(st.integers(1, 3), label="sp_degree"),
        "queue": data.draw(st.sampled_from(QUEUE_POLICIES), label="queue"),
        "latency": data.draw(latencies(random=True), label="latency"),
        "verify": verify,
    }
    report = check_lossless(lambda rng: dsi(target, drafter, prompt, n, rng, **kwargs),
                            target, prompt, n, greedy=verify == "greedy")
    note(str(report))
    assert report.equal, str(report)


@pytest.mark.parametrize("queue", QUEUE_POLICIES)
@pytest.mark.parametrize("sp_degree", [1, 2, 3, 4])
def test_dsi_law_is_the_same_under_every_fixed_schedule_and_all_schedules(queue: QueuePolicy,
                                                                          sp_degree: int
                                                                          ) -> None:
    """On a model with zeros and context dependence, with a drafter at half the target's cost
    (ties every target forward): the law quantified over schedules, and the laws under the fixed
    'first' and 'last' schedulers, all equal the target's."""
    pair = next(p for p in default_suite() if p.name == "bigram")
    def program(rng: Any) -> tuple[int, ...]:
        return dsi(pair.target, pair.drafter, (), 3, rng, lookahead=1, sp_degree=sp_degree,
                   latency=Latency(drafter=F(1, 2)), queue=queue).tokens
    reference = check_lossless(program, pair.target, (), 3)
    assert reference.equal, str(reference)
    for policy in ("first", "last"):
        assert exact_distribution(program, scheduler=policy) == reference.target_law


def test_queue_any_hands_the_choice_of_the_next_task_to_the_scheduler() -> None:
    """Non-vacuity of the quantification over queue orders: with one verification server and a
    fast drafter, tasks wait and the scheduler is asked which one runs next."""
    pair = next(p for p in default_suite() if p.name == "bigram")
    asked: list[Key] = []

    def policy(options: Sequence[object], key: Key) -> int:
        asked.append(key)
        return len(options) - 1

    dsi(pair.target, pair.drafter, (), 6, Sampler(0, scheduler=policy), lookahead=1,
        sp_degree=2, queue="any")
    assert any(isinstance(k, tuple) and k[0] == "queue" for k in asked), asked


def test_ties_between_drafter_and_tasks_are_scheduler_choices() -> None:
    pair = next(p for p in default_suite() if p.name == "bigram")
    asked: list[Key] = []

    def policy(options: Sequence[object], key: Key) -> int:
        asked.append(key)
        return 0

    dsi(pair.target, pair.drafter, (), 3, Sampler(0, scheduler=policy), lookahead=2,
        sp_degree=2, latency=Latency(drafter=F(1)))
    assert ("tie", F(1)) in asked


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"lookahead": 0}, "lookahead"),
    ({"sp_degree": 0}, "sp_degree"),
    ({"sp_degree": True}, "sp_degree"),
    ({"queue": "random"}, "queue"),
    ({"verify": "typical"}, "verify"),
])
def test_dsi_rejects_bad_parameters_with_a_named_error(kwargs: dict[str, Any], match: str
                                                       ) -> None:
    pair = next(p for p in default_suite() if p.name == "bigram")
    with pytest.raises(InvalidParameterError, match=match):
        dsi(pair.target, pair.drafter, (), 2, Sampler(0), **kwargs)


def test_dsi_default_arguments_just_work() -> None:
    pair = next(p for p in default_suite() if p.name == "bigram")
    run = dsi(pair.target, pair.drafter, (), 4, Sampler(0), lookahead=2, sp_degree=2)
    assert len(run.tokens) == 4 and run.time > 0
    assert DSIConfig(2, 2).latency == Latency()


#: The replay budget of one example of the lean-vs-recording test (seconds, not minutes).
LEAN_MAX_RUNS = 20_000


class _TooLarge(Exception):
    """An example of the lean-vs-recording test ran past `LEAN_MAX_RUNS` replays."""


@given(st.data())
def test_a_lean_run_has_the_same_law_of_tokens_and_time_as_a_recording_run(
        data: st.DataObject) -> None:
    """``record=False`` drops the trace and counters so that the exact engine merges paths with
    different histories; what the future depends on is unchanged, so the joint law of the tokens
    and the latency is the same."""
    target, drafter = data.draw(model_pairs(max_vocab=2, max_context=1), label="pair")
    n = data.draw(st.integers(1, 3), label="max_new_tokens")
    kwargs: dict[str, Any] = {
        "lookahead": data.draw(lookaheads(2), label="lookahead"),
        "sp_degree": data.draw(st.integers(1, 3), label="sp_degree"),
        "queue": data.draw(st.sampled_from(QUEUE_POLICIES), label="queue"),
        "latency": data.draw(latencies(random=True), label="latency"),
        "verify": data.draw(st.sampled_from(VERIFY_RULES), label="verify"),
    }

    runs = [0]

    def law(record: bool, scheduler: Any, with_time: bool) -> dict[Any, F]:
        def program(rng: Any) -> object:
            runs[0] += 1
            if runs[0] > LEAN_MAX_RUNS:
                raise _TooLarge
            run = dsi(target, drafter, (), n, rng, record=record, **kwargs)
            return (run.tokens, run.time) if with_time else run.tokens
        return exact_distribution(program, scheduler=scheduler)

    try:
        # the latency may depend on the schedule: its joint law is compared per fixed scheduler
        for policy in ("first", "last"):
            assert law(False, policy, True) == law(True, policy, True)
        assert law(False, None, False) == law(True, None, False)  # every schedule
    except _TooLarge:
        # a recording run merges far less (its trace tells histories apart): with random
        # latencies a few drawn instances need millions of replays under every schedule; they
        # are dropped rather than run for minutes (the bound counts replays, not seconds)
        reject()


def test_a_lean_run_records_nothing() -> None:
    pair = next(p for p in default_suite() if p.name == "bigram")
    lean = dsi(pair.target, pair.drafter, (), 4, Sampler(3), record=False)
    full = dsi(pair.target, pair.drafter, (), 4, Sampler(3))
    assert (lean.tokens, lean.time) == (full.tokens, full.time)
    assert lean.trace == () and dict(lean.stats) == {} and full.trace
