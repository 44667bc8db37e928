"""Tests that kill mutants of dsi_ref/decoders/dsi.py (issue #13, item 7): the config's errors,
the labels and keys of tasks and draft forwards, whole DSI runs pinned on one-hot models (every
event of the trace, every counter, the clock), the queue policies, the tie order, SP = 1, EOS,
block decisions with fixed and maximal windows, lean runs, and the merge state the exact checker
reads from a run (`dsi_ref.audit.exact.state.States.merge_state`), including the objects that
`States.extras` names.

Models with one-hot rows make every run deterministic (a draft or a verdict has one possible
value), so a `Run` is compared whole (``==``); a scheduler callable records every choice the run
asks for (the options, by label, and the key) and picks one. Each expected trace is derived by
hand from the rules of docs/dsi-semantics.md, event by event, in the comments.

Latency used throughout (``LAT``): drafter TTFT 1/2 then 1/10, target TTFT 3 then 1 — TTFT is per
target *server* (each server's first forward), so a verification server's first task costs 3.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence
from fractions import Fraction as F
from typing import Any, Literal, cast

import pytest
from recording_hooks import RecordingHooks

import dsi_ref as dr
from dsi_ref.audit.exact.state import Layout, NoMerge, States, fingerprint
from dsi_ref.base.errors import InvalidParameterError
from dsi_ref.base.exact_hooks import Checkpointing, StepRun
from dsi_ref.base.latency import Latency
from dsi_ref.base.models import Number
from dsi_ref.base.result import Event, Run
from dsi_ref.decoders.dsi import DraftForward, DSIConfig, DSIRun, Task, dsi
from dsi_ref.decoders.verification import BlockVerification, Decision, RejectionSampling

ONE = (F(0), F(1), F(0))  # always token 1
ZERO = (F(1), F(0), F(0))  # always token 0
TWO = (F(0), F(0), F(1))  # always token 2
TARGET = dr.TableLM(3, 0, {}, default=ONE, name="target")
AGREES = dr.TableLM(3, 0, {}, default=ONE, name="agrees")
DISAGREES = dr.TableLM(3, 0, {}, default=ZERO, name="disagrees")
#: agrees at position 0 (empty context), proposes 0 after a 1, agrees again after a 0
MIXED = dr.TableLM(3, 1, {(1,): ZERO}, default=ONE, name="mixed")
LAT = Latency(drafter=F(1, 10), target=F(1), drafter_first=F(1, 2), target_first=F(3))
UNIT = Latency(drafter=F(1), target=F(1))  # every forward costs 1: drafts and tasks tie

STATS = ("drafts", "accepted", "rejected", "bonus", "tasks", "frontier_tasks",
         "preempted_tasks", "preempted_drafts", "max_busy_servers")


def _stats(**counts: int) -> dict[str, int]:
    return {name: counts.get(name, 0) for name in STATS}


def _draft(pos: int, start: F, end: F) -> Event:
    return Event("drafter", "draft", start, end, (pos,))


def _commit(pos: int, kind: str, label: str, at: F) -> Event:
    return Event("committer", "commit", at, at, (pos,), f"{kind} via {label}")


def _front(i: int, pos: int) -> str:
    return f"task#{i}(frontier {pos}..{pos})"


def _verify(i: int, first: int, last: int) -> str:
    return f"task#{i}(verify {first}..{last})"


class _Policy:
    """A scheduler policy that records every choice (the options by label, and the key) and
    picks ``pick(number of options)``."""

    def __init__(self, pick: Callable[[int], int] = lambda n: 0) -> None:
        self.pick = pick
        self.calls: list[tuple[tuple[str, ...], Hashable]] = []

    def __call__(self, options: Sequence[object], key: Hashable) -> int:
        self.calls.append((tuple(cast(Any, o).label for o in options), key))
        return self.pick(len(options))


def _sampler(pick: Callable[[int], int] = lambda n: 0) -> tuple[dr.Sampler, _Policy]:
    policy = _Policy(pick)
    return dr.Sampler(0, scheduler=policy), policy


def _run(drafter: dr.TableLM, n: int, rng: Any, config: DSIConfig,
         target: dr.TableLM = TARGET) -> Run:
    return DSIRun(target, drafter, (), n, rng, config).run()


# -- DSIConfig -----------------------------------------------------------------------------------


def test_the_config_defaults() -> None:
    cfg = DSIConfig(1, 1)
    assert (cfg.lookahead, cfg.sp_degree, cfg.latency, cfg.verify, cfg.queue,
            cfg.sample_drafts_at, cfg.record, cfg.block_windows) == (
        1, 1, Latency(), "rejection", "fifo", "end", True, "fixed")


class _Count(int):
    """An integer of another type than ``int``."""


def test_the_config_stores_its_counts_as_ints() -> None:
    cfg = DSIConfig(_Count(2), _Count(3))
    assert type(cfg.lookahead) is int and type(cfg.sp_degree) is int
    assert (cfg.lookahead, cfg.sp_degree) == (2, 3)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"lookahead": 0}, "lookahead must be an int >= 1, got 0"),
    ({"sp_degree": 0}, "sp_degree must be an int >= 1, got 0"),
    ({"queue": "random"}, "queue must be one of ('fifo', 'lifo', 'any'), got 'random'"),
    ({"sample_drafts_at": "middle"},
     "sample_drafts_at must be one of ('end', 'start'), got 'middle'"),
    ({"block_windows": "all"}, "block_windows must be one of ('fixed', 'maximal'), got 'all'"),
    ({"latency": F(1)}, "latency must be a dsi_ref.Latency"),
    ({"record": 1}, "record must be a bool, got 1"),
    ({"verify": "nope"}, "verify must be one of ('rejection', 'exact_match', 'greedy', 'block') "
                         "or a Rule, got 'nope'"),
    ({"verify": 3}, "verify must be a rule name ('rejection', 'exact_match', 'greedy', 'block') "
                    "or a Rule object, got int"),
])
def test_the_config_refuses_each_bad_field_by_name(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"lookahead": 2, "sp_degree": 2, **kwargs}
    with pytest.raises(InvalidParameterError) as err:
        DSIConfig(**args)
    assert str(err.value) == message
    if "verify" in kwargs:  # re-raised from None: no chained traceback
        assert err.value.__cause__ is None and err.value.__suppress_context__


def test_the_config_accepts_every_named_choice() -> None:
    for queue in ("fifo", "lifo", "any"):
        for at in ("end", "start"):
            for windows in ("fixed", "maximal"):
                for record in (True, False):
                    cfg = DSIConfig(1, 1, queue=cast(Any, queue), sample_drafts_at=cast(Any, at),
                                    record=record, block_windows=cast(Any, windows))
                    assert (cfg.queue, cfg.sample_drafts_at, cfg.block_windows, cfg.record) \
                        == (queue, at, windows, record)
    rule = RejectionSampling()
    assert DSIConfig(1, 1, verify=rule).verify is rule


# -- Task and DraftForward -----------------------------------------------------------------------


def test_a_task_labels_and_keys_itself() -> None:
    task = Task(3, 4, 6, (1, 1), False, F(1, 2))
    assert (task.server, task.start, task.end) == (None, None, None)
    assert task.label == "task#3(verify 4..6)"
    assert task.key() == (3, 4, 6, (1, 1), False, F(1, 2), None, None, None)
    task = Task(7, 2, 2, (0,), True, F(1), 0, F(2), F(3))
    assert task.label == "task#7(frontier 2..2)"
    assert task.key() == (7, 2, 2, (0,), True, F(1), 0, F(2), F(3))


def test_a_draft_forward_labels_and_keys_itself() -> None:
    d = DraftForward(4, F(1), F(3, 2), None, ONE)
    assert d.label == "drafter(position 4)"
    assert d.key() == (4, F(1), F(3, 2), None)
    d = DraftForward(2, F(0), F(1), 0, ZERO)
    assert d.label == "drafter(position 2, token 0)"
    assert d.key() == (2, F(0), F(1), 0)


# -- whole runs ----------------------------------------------------------------------------------


def test_drafts_all_accepted_pinned_whole() -> None:
    """N = 3, k = 2, SP = 2, LAT. The drafter drafts 0 (0 → 1/2, TTFT), 1 (→ 3/5) and 2 (→ 7/10).
    At 3/5 the window 0..1 is full: task#1 supplies p at 0..2 (window + 1), on server 1 (first
    forward: 3, until 18/5). At 7/10 position N−1 = 2 is drafted: a partial window, task#2 (2..2),
    which waits in the queue (server 1 busy, server 0 reserved); nothing is drafted past N−1.
    At 3 the frontier task#0 (server 0, 0 → 3) accepts 0 and task#3 (frontier 1..1) starts at 3
    (server 0's second forward: 1, until 4). At 18/5 task#1 accepts 1 and 2: done; the queued
    task#2 is stale (last 2 < F = 3), then the running frontier task#3 is preempted."""
    run = _run(AGREES, 3, dr.Sampler(0), DSIConfig(2, 2, LAT))
    assert run == Run((1, 1, 1), F(18, 5), (
        _draft(0, F(0), F(1, 2)),
        _draft(1, F(1, 2), F(3, 5)),
        _draft(2, F(3, 5), F(7, 10)),
        Event("target-0", "forward", F(0), F(3), (0,), _front(0, 0)),
        _commit(0, "accepted", _front(0, 0), F(3)),
        Event("target-1", "verify", F(3, 5), F(18, 5), (0, 1, 2), _verify(1, 0, 2)),
        _commit(1, "accepted", _verify(1, 0, 2), F(18, 5)),
        _commit(2, "accepted", _verify(1, 0, 2), F(18, 5)),
        Event("queue", "preempted", F(7, 10), F(18, 5), (2,), f"{_verify(2, 2, 2)}: stale"),
        Event("target-0", "preempted", F(3), F(18, 5), (1,),
              f"{_front(3, 1)}: frontier moved"),
    ), _stats(drafts=3, accepted=3, tasks=2, frontier_tasks=2, preempted_tasks=2,
              max_busy_servers=2))
    assert tuple(run.stats) == STATS


def test_drafts_all_rejected_pinned_whole() -> None:
    """N = 2, k = 2, SP = 2, LAT. Drafts 0 (→ 1/2) and 1 (→ 3/5, position N−1 and a full
    window): task#1 (0..1) on server 1 until 18/5. At 3 the frontier task#0 rejects draft 0
    (residual: token 1), which preempts task#1 (built on it) and restarts the drafter at 1
    (no TTFT: 3 → 31/10); task#2 (frontier 1..1) runs 3 → 4. At 31/10 the draft at 1 = N−1 gives
    task#3 (1..1) on server 1 (no longer its first forward: until 41/10). At 4 task#2 rejects
    draft 1: done, and task#3 is preempted by the rejection."""
    run = _run(DISAGREES, 2, dr.Sampler(0), DSIConfig(2, 2, LAT))
    assert run == Run((1, 1), F(4), (
        _draft(0, F(0), F(1, 2)),
        _draft(1, F(1, 2), F(3, 5)),
        Event("target-0", "forward", F(0), F(3), (0,), _front(0, 0)),
        _commit(0, "rejected", _front(0, 0), F(3)),
        Event("target-1", "preempted", F(3, 5), F(3), (0, 1), f"{_verify(1, 0, 1)}: rejected at 0"),
        _draft(1, F(3), F(31, 10)),
        Event("target-0", "forward", F(3), F(4), (1,), _front(2, 1)),
        _commit(1, "rejected", _front(2, 1), F(4)),
        Event("target-1", "preempted", F(31, 10), F(4), (1,),
              f"{_verify(3, 1, 1)}: rejected at 1"),
    ), _stats(drafts=3, rejected=2, tasks=2, frontier_tasks=2, preempted_tasks=2,
              max_busy_servers=2))


def test_a_rejection_drops_the_rows_built_on_the_rejected_draft() -> None:
    """N = 3, k = 2, SP = 2, unit target and drafter 1/10 (no TTFT). MIXED drafts 1, 0, 1.
    Drafts at 1/10, 1/5 (window full: task#1 (0..2) on server 1, 1/5 → 6/5) and 3/10 (N−1:
    task#2 (2..2) queued). At 1 the frontier task#0 accepts 0; task#3 (frontier 1..1), 1 → 2.
    At 6/5 task#1 supplies p at 1 and 2 and rejects draft 1: the row at 2 (built on the rejected
    draft) is dropped, the queued task#2 preempted, the frontier task#3 moved; the drafter
    restarts at 2 (6/5 → 13/10) and task#4 (frontier 2..2) runs 6/5 → 11/5. At 13/10 the draft
    at 2 (0 again: MIXED proposes 0 after a 1) gives task#5 (2..2) on server 1 until 23/10. At
    11/5 task#4 rejects it (the row the rejection dropped is not used): done; task#5 is
    preempted by that rejection."""
    lat = Latency(drafter=F(1, 10), target=F(1))
    rule = _Logged()
    rng = RecordingHooks(0)
    run = _run(MIXED, 3, rng, DSIConfig(2, 2, lat, verify=rule))
    assert run == Run((1, 1, 1), F(11, 5), (
        _draft(0, F(0), F(1, 10)),
        _draft(1, F(1, 10), F(1, 5)),
        _draft(2, F(1, 5), F(3, 10)),
        Event("target-0", "forward", F(0), F(1), (0,), _front(0, 0)),
        _commit(0, "accepted", _front(0, 0), F(1)),
        Event("target-1", "verify", F(1, 5), F(6, 5), (0, 1, 2), _verify(1, 0, 2)),
        _commit(1, "rejected", _verify(1, 0, 2), F(6, 5)),
        Event("queue", "preempted", F(3, 10), F(6, 5), (2,), f"{_verify(2, 2, 2)}: rejected at 1"),
        Event("target-0", "preempted", F(1), F(6, 5), (1,), f"{_front(3, 1)}: frontier moved"),
        _draft(2, F(6, 5), F(13, 10)),
        Event("target-0", "forward", F(6, 5), F(11, 5), (2,), _front(4, 2)),
        _commit(2, "rejected", _front(4, 2), F(11, 5)),
        Event("target-1", "preempted", F(13, 10), F(11, 5), (2,),
              f"{_verify(5, 2, 2)}: rejected at 2"),
    ), _stats(drafts=4, accepted=1, rejected=2, tasks=3, frontier_tasks=3, preempted_tasks=3,
              max_busy_servers=2))
    # every draft on the speculative sequence, every verdict on the committed prefix
    assert rule.log == [
        ("draft", ONE, ()), ("draft", ZERO, (1,)), ("draft", ONE, (1, 0)),
        ("decide", ONE, ONE, 1, ()), ("decide", ONE, ZERO, 0, (1,)),
        ("draft", ZERO, (1, 1)), ("decide", ONE, ZERO, 0, (1, 1))]
    # the rows supplied at each merge point (the fields, beside the rule's log: a rule of the
    # user's is read as data): none survives the rejection at 6/5
    assert rng.entered == [RECORDING._replace(resumable=False, data_parts=(rule,))]
    fields = [cast(tuple[Any, ...], s)[0] for s, _ in rng.hints]
    supplied = [(_field(s, "supplied", RECORDING), _field(s, "now", RECORDING)) for s in fields]
    assert supplied == [((), F(0)), ((), F(1, 10)), ((), F(1, 5)), ((), F(3, 10)), ((), F(1)),
                        ((), F(6, 5)), ((), F(13, 10))]


def test_a_bonus_preempts_the_draft_in_flight_and_ties_go_to_the_scheduler() -> None:
    """N = 2, k = 1, SP = 2, every forward 1, the scheduler picks the last option. At 1 the
    draft of 0 and the frontier task#0 tie: the scheduler takes task#0, which finds no draft at
    0: a bonus; the draft in flight (for position 0) is preempted and the drafter restarts at 1
    (1 → 2); the stale draft still due at 1 is skipped; task#1 (frontier 1..1), 1 → 2. At 2 the
    draft and task#1 tie again: task#1 gives a bonus at 1 (done) and preempts the draft."""
    rng, policy = _sampler(lambda n: n - 1)
    run = _run(AGREES, 2, rng, DSIConfig(1, 2, UNIT))
    assert run == Run((1, 1), F(2), (
        Event("target-0", "forward", F(0), F(1), (0,), _front(0, 0)),
        _commit(0, "bonus", _front(0, 0), F(1)),
        Event("drafter", "preempted", F(0), F(1), (0,), "bonus at 0"),
        Event("target-0", "forward", F(1), F(2), (1,), _front(1, 1)),
        _commit(1, "bonus", _front(1, 1), F(2)),
        Event("drafter", "preempted", F(1), F(2), (1,), "bonus at 1"),
    ), _stats(bonus=2, frontier_tasks=2, preempted_drafts=2, max_busy_servers=1))
    assert policy.calls == [
        (("drafter(position 0)", _front(0, 0)), ("tie", F(1))),
        (("drafter(position 1)", _front(1, 1)), ("tie", F(2)))]


def test_drafts_sampled_at_the_start_are_visible_in_flight() -> None:
    """N = 2, k = 1, SP = 2, every forward 1, the scheduler picks the first option, drafts
    sampled when their forward starts (the labels show the token in flight). At 1 the draft of 0
    is delivered first: task#1 (verify 0..1) on server 1 (1 → 2), the drafter goes on at 1; then
    task#0 accepts 0 and task#2 (frontier 1..1) runs 1 → 2. At 2 three events tie: the draft of
    1 (task#3 (1..1) queued: both servers busy), then task#1 accepts 1 (done): the queued task#3
    is stale and the frontier task#2 preempted."""
    rng, policy = _sampler()
    run = _run(AGREES, 2, rng, DSIConfig(1, 2, UNIT, sample_drafts_at="start"))
    assert run == Run((1, 1), F(2), (
        _draft(0, F(0), F(1)),
        Event("target-0", "forward", F(0), F(1), (0,), _front(0, 0)),
        _commit(0, "accepted", _front(0, 0), F(1)),
        _draft(1, F(1), F(2)),
        Event("target-1", "verify", F(1), F(2), (0, 1), _verify(1, 0, 1)),
        _commit(1, "accepted", _verify(1, 0, 1), F(2)),
        Event("queue", "preempted", F(2), F(2), (1,), f"{_verify(3, 1, 1)}: stale"),
        Event("target-0", "preempted", F(1), F(2), (1,), f"{_front(2, 1)}: frontier moved"),
    ), _stats(drafts=2, accepted=2, tasks=2, frontier_tasks=2, preempted_tasks=2,
              max_busy_servers=2))
    assert policy.calls == [
        (("drafter(position 0, token 1)", _front(0, 0)), ("tie", F(1))),
        (("drafter(position 1, token 1)", _verify(1, 0, 1), _front(2, 1)), ("tie", F(2))),
        ((_verify(1, 0, 1), _front(2, 1)), ("tie", F(2)))]
    # sampled at the end, the same run shows no token in flight
    rng, policy = _sampler()
    assert _run(AGREES, 2, rng, DSIConfig(1, 2, UNIT)) == run
    assert policy.calls[0] == (("drafter(position 0)", _front(0, 0)), ("tie", F(1)))


def test_a_draft_sampled_at_the_start_is_the_one_delivered() -> None:
    run = DSIRun(TARGET, AGREES, (), 3, dr.Sampler(0), DSIConfig(2, 2, LAT,
                                                                 sample_drafts_at="start"))
    run.start_drafting()
    assert run.drafting is not None
    assert (run.drafting.key(), run.drafting.row) == ((0, F(0), F(1, 2), 1), ONE)
    run.drafting = DraftForward(0, F(0), F(1, 2), 2, ONE)  # a token the row cannot give
    run.now = F(1, 2)
    run.finish_draft(run.drafting)
    assert (run.drafts, run.draft_rows) == ([2], [ONE])
    run = DSIRun(TARGET, AGREES, (), 3, dr.Sampler(0), DSIConfig(2, 2, LAT))
    run.start_drafting()
    assert run.drafting is not None and run.drafting.key() == (0, F(0), F(1, 2), None)


def _wait_run(queue: str, pick: Callable[[int], int] = lambda n: 0) -> tuple[Run, _Policy]:
    rng, policy = _sampler(pick)
    return _run(AGREES, 3, rng, DSIConfig(1, 2, LAT, queue=cast(Any, queue))), policy


# The common part of the runs with k = 1, N = 3, SP = 2, LAT (agreeing drafter): drafts at 1/2
# (task#1 (0..1) starts on server 1 at once, first forward: until 7/2), 3/5 (task#2 (1..2) waits)
# and 7/10 (task#3 (2..2) waits). At 3 the frontier task#0 accepts 0; task#4 (frontier 1..1),
# 3 → 4. At 7/2 task#1 accepts 1, task#4 is preempted, task#5 (frontier 2..2) runs 7/2 → 9/2,
# and server 1 takes a queued task (which one is the queue policy), until 9/2: a tie.
_HEAD = (
    _draft(0, F(0), F(1, 2)),
    _draft(1, F(1, 2), F(3, 5)),
    _draft(2, F(3, 5), F(7, 10)),
    Event("target-0", "forward", F(0), F(3), (0,), _front(0, 0)),
    _commit(0, "accepted", _front(0, 0), F(3)),
    Event("target-1", "verify", F(1, 2), F(7, 2), (0, 1), _verify(1, 0, 1)),
    _commit(1, "accepted", _verify(1, 0, 1), F(7, 2)),
    Event("target-0", "preempted", F(3), F(7, 2), (1,), f"{_front(4, 1)}: frontier moved"),
)
_WAIT_STATS = _stats(drafts=3, accepted=3, tasks=3, frontier_tasks=3, preempted_tasks=3,
                     max_busy_servers=2)


def test_fifo_runs_the_oldest_queued_task_after_a_wait() -> None:
    """fifo: task#2 (1..2) waited from 3/5 to 7/2. At 9/2 the tie goes to task#5 (first: it
    started first), which accepts 2: done; task#2 (running) and task#3 (queued) are stale."""
    run, policy = _wait_run("fifo")
    assert run == Run((1, 1, 1), F(9, 2), (
        *_HEAD,
        Event("target-1", "wait", F(3, 5), F(7, 2), (1, 2), _verify(2, 1, 2)),
        Event("target-0", "forward", F(7, 2), F(9, 2), (2,), _front(5, 2)),
        _commit(2, "accepted", _front(5, 2), F(9, 2)),
        Event("target-1", "preempted", F(7, 2), F(9, 2), (1, 2), f"{_verify(2, 1, 2)}: stale"),
        Event("queue", "preempted", F(7, 10), F(9, 2), (2,), f"{_verify(3, 2, 2)}: stale"),
    ), _WAIT_STATS)
    assert policy.calls == [((_front(5, 2), _verify(2, 1, 2)), ("tie", F(9, 2)))]


def test_a_tie_given_to_the_verification_task() -> None:
    """fifo, ties to the last option: at 9/2 task#2 supplies p at 2 (not at 1, decided) and
    accepts 2: done; the queued task#3 is stale, the frontier task#5 preempted, and the event of
    task#5 still due at 9/2 is not delivered."""
    run, policy = _wait_run("fifo", lambda n: n - 1)
    assert run == Run((1, 1, 1), F(9, 2), (
        *_HEAD,
        Event("target-1", "wait", F(3, 5), F(7, 2), (1, 2), _verify(2, 1, 2)),
        Event("target-1", "verify", F(7, 2), F(9, 2), (1, 2), _verify(2, 1, 2)),
        _commit(2, "accepted", _verify(2, 1, 2), F(9, 2)),
        Event("queue", "preempted", F(7, 10), F(9, 2), (2,), f"{_verify(3, 2, 2)}: stale"),
        Event("target-0", "preempted", F(7, 2), F(9, 2), (2,), f"{_front(5, 2)}: frontier moved"),
    ), _WAIT_STATS)
    assert policy.calls == [((_front(5, 2), _verify(2, 1, 2)), ("tie", F(9, 2)))]


def test_lifo_runs_the_newest_queued_task() -> None:
    """lifo: task#3 (2..2) waited from 7/10 to 7/2; at 9/2 task#5 wins the tie and accepts 2;
    the running task#3, then the queued task#2, are stale."""
    run, policy = _wait_run("lifo")
    assert run == Run((1, 1, 1), F(9, 2), (
        *_HEAD,
        Event("target-1", "wait", F(7, 10), F(7, 2), (2,), _verify(3, 2, 2)),
        Event("target-0", "forward", F(7, 2), F(9, 2), (2,), _front(5, 2)),
        _commit(2, "accepted", _front(5, 2), F(9, 2)),
        Event("target-1", "preempted", F(7, 2), F(9, 2), (2,), f"{_verify(3, 2, 2)}: stale"),
        Event("queue", "preempted", F(3, 5), F(9, 2), (1, 2), f"{_verify(2, 1, 2)}: stale"),
    ), _WAIT_STATS)
    assert policy.calls == [((_front(5, 2), _verify(3, 2, 2)), ("tie", F(9, 2)))]


def test_any_lets_the_scheduler_pick_the_queued_task() -> None:
    """any, the scheduler picking the last option: at 7/2 it picks task#3 among the queued
    task#2, task#3 (key ``("queue", 7/2)``); at 9/2 it gives the tie to task#3, which supplies p
    at 2 and accepts it: the queued task#2 is stale, the frontier task#5 preempted."""
    run, policy = _wait_run("any", lambda n: n - 1)
    assert run == Run((1, 1, 1), F(9, 2), (
        *_HEAD,
        Event("target-1", "wait", F(7, 10), F(7, 2), (2,), _verify(3, 2, 2)),
        Event("target-1", "verify", F(7, 2), F(9, 2), (2,), _verify(3, 2, 2)),
        _commit(2, "accepted", _verify(3, 2, 2), F(9, 2)),
        Event("queue", "preempted", F(3, 5), F(9, 2), (1, 2), f"{_verify(2, 1, 2)}: stale"),
        Event("target-0", "preempted", F(7, 2), F(9, 2), (2,), f"{_front(5, 2)}: frontier moved"),
    ), _WAIT_STATS)
    assert policy.calls == [
        ((_verify(2, 1, 2), _verify(3, 2, 2)), ("queue", F(7, 2))),
        ((_front(5, 2), _verify(3, 2, 2)), ("tie", F(9, 2)))]
    run, policy = _wait_run("any")  # picking the first queued task is fifo
    assert run == _wait_run("fifo")[0]
    assert policy.calls[0] == ((_verify(2, 1, 2), _verify(3, 2, 2)), ("queue", F(7, 2)))


def test_one_server_runs_the_frontier_task_first() -> None:
    """SP = 1, N = 2, k = 1, LAT. The frontier task#0 takes the only server (0 → 3). Drafts at
    1/2 (task#1 (0..1) queued) and 3/5 (task#2 (1..1) queued). At 3 task#0 accepts 0; the new
    frontier task#3 goes ahead of the queue (3 → 4, no wait: submitted now) and accepts 1 at 4:
    done; both queued tasks are stale."""
    run = _run(AGREES, 2, dr.Sampler(0), DSIConfig(1, 1, LAT))
    assert run == Run((1, 1), F(4), (
        _draft(0, F(0), F(1, 2)),
        _draft(1, F(1, 2), F(3, 5)),
        Event("target-0", "forward", F(0), F(3), (0,), _front(0, 0)),
        _commit(0, "accepted", _front(0, 0), F(3)),
        Event("target-0", "forward", F(3), F(4), (1,), _front(3, 1)),
        _commit(1, "accepted", _front(3, 1), F(4)),
        Event("queue", "preempted", F(1, 2), F(4), (0, 1), f"{_verify(1, 0, 1)}: stale"),
        Event("queue", "preempted", F(3, 5), F(4), (1,), f"{_verify(2, 1, 1)}: stale"),
    ), _stats(drafts=2, accepted=2, tasks=2, frontier_tasks=2, preempted_tasks=2,
              max_busy_servers=1))


def test_three_servers() -> None:
    """SP = 3, N = 3, k = 1, LAT: task#1 (0..1, 1/2 → 7/2) and task#2 (1..2, 3/5 → 18/5) run on
    servers 1 and 2 (both first forwards); task#3 (2..2) waits. At 3 task#0 accepts 0 and
    task#4 (frontier 1..1) runs 3 → 4. At 7/2 task#1 accepts 1: task#4 is preempted, task#5
    (frontier 2..2) runs 7/2 → 9/2 and server 1 takes task#3 (7/2 → 9/2). At 18/5 task#2 accepts
    2 (done): task#3 is stale, task#5 preempted. Three servers busy at once."""
    run = _run(AGREES, 3, dr.Sampler(0), DSIConfig(1, 3, LAT))
    assert run == Run((1, 1, 1), F(18, 5), (
        *_HEAD,
        Event("target-1", "wait", F(7, 10), F(7, 2), (2,), _verify(3, 2, 2)),
        Event("target-2", "verify", F(3, 5), F(18, 5), (1, 2), _verify(2, 1, 2)),
        _commit(2, "accepted", _verify(2, 1, 2), F(18, 5)),
        Event("target-1", "preempted", F(7, 2), F(18, 5), (2,), f"{_verify(3, 2, 2)}: stale"),
        Event("target-0", "preempted", F(7, 2), F(18, 5), (2,),
              f"{_front(5, 2)}: frontier moved"),
    ), _stats(drafts=3, accepted=3, tasks=3, frontier_tasks=3, preempted_tasks=3,
              max_busy_servers=3))


def test_a_drafted_eos_closes_the_window_and_a_committed_eos_ends_the_run() -> None:
    """N = 5, k = 3, default latency. The EOS draft at 0 (1/10) submits task#1 (0..1) at once
    (a partial window) and stops the drafter; at 1 task#0 accepts it: done, task#1 preempted."""
    target = dr.TableLM(3, 0, {}, default=TWO, eos=2)
    drafter = dr.TableLM(3, 0, {}, default=TWO, eos=2)
    run = _run(drafter, 5, dr.Sampler(0), DSIConfig(3, 2), target)
    d = F(1, 10)
    assert run == Run((2,), F(1), (
        _draft(0, F(0), d),
        Event("target-0", "forward", F(0), F(1), (0,), _front(0, 0)),
        _commit(0, "accepted", _front(0, 0), F(1)),
        Event("target-1", "preempted", d, F(1), (0, 1), f"{_verify(1, 0, 1)}: done"),
    ), _stats(drafts=1, accepted=1, tasks=1, frontier_tasks=1, preempted_tasks=1,
              max_busy_servers=2))


def test_an_eos_residual_ends_the_run() -> None:
    """N = 5, k = 3, default latency. Drafts of 0 at 1/10, 1/5, 3/10 (task#1 (0..3) on server 1),
    2/5 and 1/2 (position N−1: task#2 (3..4) queued). At 1 task#0 rejects draft 0; the residual is
    EOS: done; the rejection preempts both tasks, and nothing is drafted after it."""
    target = dr.TableLM(3, 0, {}, default=TWO, eos=2)
    drafter = dr.TableLM(3, 0, {}, default=ZERO, eos=2)
    run = _run(drafter, 5, dr.Sampler(0), DSIConfig(3, 2), target)
    d = F(1, 10)
    assert run == Run((2,), F(1), (
        *(_draft(i, i * d, (i + 1) * d) for i in range(5)),
        Event("target-0", "forward", F(0), F(1), (0,), _front(0, 0)),
        _commit(0, "rejected", _front(0, 0), F(1)),
        Event("target-1", "preempted", 3 * d, F(1), (0, 1, 2, 3),
              f"{_verify(1, 0, 3)}: rejected at 0"),
        Event("queue", "preempted", 5 * d, F(1), (3, 4), f"{_verify(2, 3, 4)}: rejected at 0"),
    ), _stats(drafts=5, rejected=1, tasks=2, frontier_tasks=1, preempted_tasks=2,
              max_busy_servers=2))


def test_a_bonus_eos_preempts_the_draft_as_done() -> None:
    """N = 3, a drafter slower than the target: task#0 finds no draft at 0 and its bonus is EOS:
    the draft in flight is preempted by the bonus; nothing is restarted."""
    target = dr.TableLM(3, 0, {}, default=TWO, eos=2)
    drafter = dr.TableLM(3, 0, {}, default=TWO, eos=2)
    run = _run(drafter, 3, dr.Sampler(0), DSIConfig(1, 2, Latency(drafter=F(2))), target)
    assert run == Run((2,), F(1), (
        Event("target-0", "forward", F(0), F(1), (0,), _front(0, 0)),
        _commit(0, "bonus", _front(0, 0), F(1)),
        Event("drafter", "preempted", F(0), F(1), (0,), "bonus at 0"),
    ), _stats(bonus=1, frontier_tasks=1, preempted_drafts=1, max_busy_servers=1))


def test_a_budget_of_zero_and_of_one() -> None:
    assert _run(AGREES, 0, dr.Sampler(0), DSIConfig(2, 2, LAT)) == Run((), F(0), (), _stats())
    assert DSIRun(TARGET, AGREES, (), 0, dr.Sampler(0), DSIConfig(2, 2)).done
    assert not DSIRun(TARGET, AGREES, (), 1, dr.Sampler(0), DSIConfig(2, 2)).done
    # N = 1: the draft at 0 = N−1 submits task#1 (0..0, capped at N−1); task#0 accepts at 3
    run = _run(AGREES, 1, dr.Sampler(0), DSIConfig(2, 2, LAT))
    assert run == Run((1,), F(3), (
        _draft(0, F(0), F(1, 2)),
        Event("target-0", "forward", F(0), F(3), (0,), _front(0, 0)),
        _commit(0, "accepted", _front(0, 0), F(3)),
        Event("target-1", "preempted", F(1, 2), F(3), (0,), f"{_verify(1, 0, 0)}: stale"),
    ), _stats(drafts=1, accepted=1, tasks=1, frontier_tasks=1, preempted_tasks=1,
              max_busy_servers=2))


def test_a_lean_run_returns_tokens_and_time_only() -> None:
    for drafter in (AGREES, DISAGREES):
        full = _run(drafter, 3, dr.Sampler(0), DSIConfig(2, 2, LAT))
        lean = _run(drafter, 3, dr.Sampler(0), DSIConfig(2, 2, LAT, record=False))
        assert lean == Run(full.tokens, full.time)
        assert lean.trace == () and lean.stats == {}


# -- block decisions -----------------------------------------------------------------------------


def test_fixed_block_windows_wait_for_the_whole_window() -> None:
    """verify="block", fixed windows, N = 3, k = 2, SP = 2, LAT (the run of
    `test_drafts_all_accepted_pinned_whole`). At 3 the frontier task#0 supplies p at 0 only:
    the window 0..1 is not complete, nothing is decided (no new frontier task). At 18/5 task#1
    supplies 0..2: the window 0..1 is accepted as a block, then the partial window 2..2 (one
    draft, p at 2 supplied): done; the queued task#2 is stale."""
    rule = _LoggedBlock()
    run = _run(AGREES, 3, dr.Sampler(0), DSIConfig(2, 2, LAT, verify=rule))
    assert run == Run((1, 1, 1), F(18, 5), (
        _draft(0, F(0), F(1, 2)),
        _draft(1, F(1, 2), F(3, 5)),
        _draft(2, F(3, 5), F(7, 10)),
        Event("target-0", "forward", F(0), F(3), (0,), _front(0, 0)),
        Event("target-1", "verify", F(3, 5), F(18, 5), (0, 1, 2), _verify(1, 0, 2)),
        _commit(0, "accepted", _verify(1, 0, 2), F(18, 5)),
        _commit(1, "accepted", _verify(1, 0, 2), F(18, 5)),
        _commit(2, "accepted", _verify(1, 0, 2), F(18, 5)),
        Event("queue", "preempted", F(7, 10), F(18, 5), (2,), f"{_verify(2, 2, 2)}: stale"),
    ), _stats(drafts=3, accepted=3, tasks=2, frontier_tasks=1, preempted_tasks=1,
              max_busy_servers=2))
    assert rule.log == [
        ("draft", ONE, ()), ("draft", ONE, (1,)), ("draft", ONE, (1, 1)),
        ("window", [ONE, ONE], [ONE, ONE], [1, 1], ()),
        ("window", [ONE], [ONE], [1], (1, 1))]


def test_maximal_block_windows_decide_what_is_supplied() -> None:
    """The same with maximal windows: at 3 task#0 decides the lone draft at 0 (a window of one);
    at 18/5 task#1 supplies p at 1 and 2 and the two drafts there are one window. The run is
    the token-level one (`test_drafts_all_accepted_pinned_whole`)."""
    rule = _LoggedBlock()
    run = _run(AGREES, 3, dr.Sampler(0), DSIConfig(2, 2, LAT, verify=rule,
                                                   block_windows="maximal"))
    assert run == _run(AGREES, 3, dr.Sampler(0), DSIConfig(2, 2, LAT))
    assert rule.log == [
        ("draft", ONE, ()), ("draft", ONE, (1,)), ("draft", ONE, (1, 1)),
        ("window", [ONE], [ONE], [1], ()),
        ("window", [ONE, ONE], [ONE, ONE], [1, 1], (1,))]


def test_fixed_block_windows_with_rejections() -> None:
    """verify="block", fixed, DISAGREES, N = 2, k = 2, LAT. At 3 task#0 decides nothing (window
    0..1 incomplete). At 18/5 task#1 decides the window 0..1: nothing accepted, a correction at
    0 (token 1); the drafter restarts at 1 (18/5 → 37/10) and task#2 (frontier 1..1) runs
    18/5 → 23/5. At 37/10 the draft at N−1 = 1 gives task#3 (1..1), 37/10 → 47/10. At 23/5 the
    window at 1 is the partial window 1..1, whose p task#2 supplies: rejected, done."""
    run = _run(DISAGREES, 2, dr.Sampler(0), DSIConfig(2, 2, LAT, verify="block"))
    assert run == Run((1, 1), F(23, 5), (
        _draft(0, F(0), F(1, 2)),
        _draft(1, F(1, 2), F(3, 5)),
        Event("target-0", "forward", F(0), F(3), (0,), _front(0, 0)),
        Event("target-1", "verify", F(3, 5), F(18, 5), (0, 1), _verify(1, 0, 1)),
        _commit(0, "rejected", _verify(1, 0, 1), F(18, 5)),
        _draft(1, F(18, 5), F(37, 10)),
        Event("target-0", "forward", F(18, 5), F(23, 5), (1,), _front(2, 1)),
        _commit(1, "rejected", _front(2, 1), F(23, 5)),
        Event("target-1", "preempted", F(37, 10), F(23, 5), (1,),
              f"{_verify(3, 1, 1)}: rejected at 1"),
    ), _stats(drafts=3, rejected=2, tasks=2, frontier_tasks=2, preempted_tasks=1,
              max_busy_servers=2))


def test_a_fixed_block_window_not_yet_submitted_is_not_decided() -> None:
    """verify="block", fixed, DISAGREES, N = 2, k = 2, drafter 3/4, target 1. At 1 task#0 supplies
    p at 0 and a draft is there, but its window (0..1) is not yet complete: nothing is decided.
    At 3/2 the window is full: task#1 (0..1), 3/2 → 5/2, corrects 0; the drafter restarts at 1
    (5/2 → 13/4); task#2 (frontier 1..1) runs 5/2 → 7/2; the draft at N−1 gives task#3 (1..1)
    13/4 → 17/4; at 7/2 task#2 rejects the draft at 1 (a window of one): done."""
    lat = Latency(drafter=F(3, 4), target=F(1))
    run = _run(DISAGREES, 2, dr.Sampler(0), DSIConfig(2, 2, lat, verify="block"))
    assert run == Run((1, 1), F(7, 2), (
        _draft(0, F(0), F(3, 4)),
        Event("target-0", "forward", F(0), F(1), (0,), _front(0, 0)),
        _draft(1, F(3, 4), F(3, 2)),
        Event("target-1", "verify", F(3, 2), F(5, 2), (0, 1), _verify(1, 0, 1)),
        _commit(0, "rejected", _verify(1, 0, 1), F(5, 2)),
        _draft(1, F(5, 2), F(13, 4)),
        Event("target-0", "forward", F(5, 2), F(7, 2), (1,), _front(2, 1)),
        _commit(1, "rejected", _front(2, 1), F(7, 2)),
        Event("target-1", "preempted", F(13, 4), F(7, 2), (1,),
              f"{_verify(3, 1, 1)}: rejected at 1"),
    ), _stats(drafts=3, rejected=2, tasks=2, frontier_tasks=2, preempted_tasks=1,
              max_busy_servers=2))
    # token-level rejection (and maximal windows) decide the draft at 0 at once, at 1
    for config in (DSIConfig(2, 2, lat), DSIConfig(2, 2, lat, verify="block",
                                                    block_windows="maximal")):
        other = _run(DISAGREES, 2, dr.Sampler(0), config)
        assert other.trace[2] == _commit(0, "rejected", _front(0, 0), F(1))


def test_one_server_with_fixed_block_windows_runs_a_waiting_verification_task() -> None:
    """SP = 1, verify="block", fixed, N = 2, k = 2, LAT. task#0 holds the server 0 → 3; the full
    window 0..1 (3/5) gives task#1, which waits. At 3 task#0 decides nothing, so no frontier
    task is submitted and task#1 gets the server (a wait of 3/5 → 3), 3 → 4: it accepts 0 and 1."""
    run = _run(AGREES, 2, dr.Sampler(0), DSIConfig(2, 1, LAT, verify="block"))
    assert run == Run((1, 1), F(4), (
        _draft(0, F(0), F(1, 2)),
        _draft(1, F(1, 2), F(3, 5)),
        Event("target-0", "forward", F(0), F(3), (0,), _front(0, 0)),
        Event("target-0", "wait", F(3, 5), F(3), (0, 1), _verify(1, 0, 1)),
        Event("target-0", "verify", F(3), F(4), (0, 1), _verify(1, 0, 1)),
        _commit(0, "accepted", _verify(1, 0, 1), F(4)),
        _commit(1, "accepted", _verify(1, 0, 1), F(4)),
    ), _stats(drafts=2, accepted=2, tasks=1, frontier_tasks=1, max_busy_servers=1))


def test_a_fixed_block_window_after_a_committed_one_waits_for_its_own_task() -> None:
    """verify="block", fixed, N = 4, k = 2, drafter 3/4, target 1, AGREES. At 1 task#0 finds the
    draft at 0 in a window not yet submitted: nothing. At 3/2 the window 0..1 is full: task#1
    (0..2), 3/2 → 5/2; the drafter goes on (2: 3/2 → 9/4, 3: 9/4 → 3). At 5/2 task#1 accepts the
    window 0..1; p at 2 is supplied and draft 2 is there, but its window 2..3 is not submitted
    yet: nothing more, and the frontier task#2 (2..2) runs 5/2 → 7/2. At 3 the window 2..3 is
    full (and 3 = N−1): task#3 (2..3), 3 → 4. At 7/2 task#2 supplies p at 2 only: still
    incomplete. At 4 task#3 accepts 2 and 3: done."""
    lat = Latency(drafter=F(3, 4), target=F(1))
    run = _run(AGREES, 4, dr.Sampler(0), DSIConfig(2, 2, lat, verify="block"))
    assert run == Run((1, 1, 1, 1), F(4), (
        _draft(0, F(0), F(3, 4)),
        Event("target-0", "forward", F(0), F(1), (0,), _front(0, 0)),
        _draft(1, F(3, 4), F(3, 2)),
        _draft(2, F(3, 2), F(9, 4)),
        Event("target-1", "verify", F(3, 2), F(5, 2), (0, 1, 2), _verify(1, 0, 2)),
        _commit(0, "accepted", _verify(1, 0, 2), F(5, 2)),
        _commit(1, "accepted", _verify(1, 0, 2), F(5, 2)),
        _draft(3, F(9, 4), F(3)),
        Event("target-0", "forward", F(5, 2), F(7, 2), (2,), _front(2, 2)),
        Event("target-1", "verify", F(3), F(4), (2, 3), _verify(3, 2, 3)),
        _commit(2, "accepted", _verify(3, 2, 3), F(4)),
        _commit(3, "accepted", _verify(3, 2, 3), F(4)),
    ), _stats(drafts=4, accepted=4, tasks=2, frontier_tasks=2, max_busy_servers=2))


def test_a_maximal_block_window_leaves_the_row_after_the_last_draft_for_a_bonus() -> None:
    """Maximal windows stop at the last draft: with drafts at F only and p supplied at F and
    F + 1, the window is the one draft; the row at F + 1 then gives a bonus token there."""
    def stepped() -> DSIRun:
        run = DSIRun(TARGET, AGREES, (), 4, dr.Sampler(0), DSIConfig(
            2, 2, LAT, verify="block", block_windows="maximal"))
        run.drafts, run.draft_rows, run.window_start = [1], [ONE], 1
        run.supplied = {0: ONE, 1: ONE}
        return run

    run = stepped()
    assert run.decide_at_frontier() == [Decision(1, True, "accepted")]
    assert run.supplied == {1: ONE}
    run = stepped()
    run.commit_ready(Task(4, 0, 1, (1,), False, F(0), 1, F(0), F(1)))
    assert run.committed == [1, 1]
    assert [e.note for e in run.trace if e.kind == "commit"] == [
        f"accepted via {_verify(4, 0, 1)}", f"bonus via {_verify(4, 0, 1)}"]


class _AcceptsAsEos(RejectionSampling):
    """A wrong rule (as the zoo's are): it accepts every draft but commits EOS (2)."""

    def decide(self, target_probs: Sequence[Number], draft_probs: Sequence[Number] | None,
               draft: int | None, rng: Any, context: tuple[int, ...]) -> Decision:
        return Decision(2, True, "accepted")


def test_a_run_done_with_a_draft_in_flight_preempts_it_as_done() -> None:
    """N = 5, k = 3, drafter 3/10, target 1, a rule that commits EOS as an accepted draft: drafts
    at 3/10, 3/5, 9/10 (window 0..2 full: task#1 (0..3), 9/10 → 19/10), the draft of 3 in flight
    from 9/10. At 1 task#0's decision ends the run: the draft in flight and task#1 are preempted
    as done."""
    target = dr.TableLM(3, 0, {}, default=ONE, eos=2)
    drafter = dr.TableLM(3, 0, {}, default=ONE, eos=2)
    lat = Latency(drafter=F(3, 10), target=F(1))
    run = _run(drafter, 5, dr.Sampler(0), DSIConfig(3, 2, lat, verify=_AcceptsAsEos()), target)
    assert run == Run((2,), F(1), (
        _draft(0, F(0), F(3, 10)),
        _draft(1, F(3, 10), F(3, 5)),
        _draft(2, F(3, 5), F(9, 10)),
        Event("target-0", "forward", F(0), F(1), (0,), _front(0, 0)),
        _commit(0, "accepted", _front(0, 0), F(1)),
        Event("drafter", "preempted", F(9, 10), F(1), (3,), "done"),
        Event("target-1", "preempted", F(9, 10), F(1), (0, 1, 2, 3), f"{_verify(1, 0, 3)}: done"),
    ), _stats(drafts=3, accepted=1, tasks=1, frontier_tasks=1, preempted_tasks=1,
              preempted_drafts=1, max_busy_servers=2))


def test_preempting_the_draft_drops_it() -> None:
    run = DSIRun(TARGET, AGREES, (), 4, dr.Sampler(0), DSIConfig(2, 2, LAT))
    run.preempt_drafting("nothing in flight")
    assert (run.trace, run.stats["preempted_drafts"]) == ([], 0)
    run.start_drafting()
    run.now = F(1, 4)
    run.preempt_drafting("why")
    assert run.drafting is None
    assert run.trace == [Event("drafter", "preempted", F(0), F(1, 4), (0,), "why")]
    assert run.stats["preempted_drafts"] == 1


class _CountsChoices(dr.Sampler):
    """A sampler that records how many options each ``choose`` offers."""

    def __init__(self, seed: int, **kwargs: Any) -> None:
        super().__init__(seed, **kwargs)
        self.sizes: list[int] = []

    def choose(self, options: Sequence[Any], key: Hashable = None) -> Any:
        self.sizes.append(len(options))
        return super().choose(options, key)


def test_a_lone_event_is_no_choice() -> None:
    """Only events that tie are a choice for the scheduler (a lone event is delivered as is)."""
    rng = _CountsChoices(0)
    _run(AGREES, 3, rng, DSIConfig(2, 2, LAT))
    assert rng.sizes == []
    rng = _CountsChoices(0)
    _run(AGREES, 2, rng, DSIConfig(1, 2, UNIT))
    assert rng.sizes == [2, 3, 2]


def test_a_block_bonus_is_a_per_position_decision() -> None:
    """With no draft at the frontier a window rule draws a bonus token like any rule."""
    for windows in ("fixed", "maximal"):
        rng, _ = _sampler(lambda n: n - 1)
        run = _run(AGREES, 2, rng, DSIConfig(1, 2, UNIT, verify="block",
                                             block_windows=cast(Any, windows)))
        rng, _ = _sampler(lambda n: n - 1)
        assert run == _run(AGREES, 2, rng, DSIConfig(1, 2, UNIT))


# -- dsi() ---------------------------------------------------------------------------------------


def test_dsi_defaults_to_two_drafts_two_servers_rejection_fifo_and_the_default_latency() -> None:
    run = dsi(TARGET, AGREES, [], 4, dr.Sampler(0))
    assert run == _run(AGREES, 4, dr.Sampler(0), DSIConfig(2, 2))
    assert run != _run(AGREES, 4, dr.Sampler(0), DSIConfig(3, 2))
    assert run != _run(AGREES, 4, dr.Sampler(0), DSIConfig(2, 3))
    assert run != _run(AGREES, 4, dr.Sampler(0), DSIConfig(2, 2, LAT))


def test_dsi_passes_every_argument_on() -> None:
    rng, _ = _sampler(lambda n: n - 1)
    run = dsi(TARGET, AGREES, (0,), 3, rng, 1, 2, LAT, "greedy", "any", sample_drafts_at="start",
              record=True, block_windows="maximal")
    rng2, _ = _sampler(lambda n: n - 1)
    assert run == DSIRun(TARGET, AGREES, (0,), 3, rng2, DSIConfig(
        1, 2, LAT, "greedy", "any", "start", True, "maximal")).run()
    assert run == _wait_run("any", lambda n: n - 1)[0]
    assert dsi(DISAGREES, AGREES, [], 2, dr.Sampler(0), 2, 2, LAT, "block",
               block_windows="fixed") == \
        _run(AGREES, 2, dr.Sampler(0), DSIConfig(2, 2, LAT, verify="block"), DISAGREES)
    # fixed and maximal windows differ on this run: block_windows reaches the run
    assert dsi(TARGET, DISAGREES, [], 2, dr.Sampler(0), 2, 2, LAT, "block",
               block_windows="maximal") != \
        _run(DISAGREES, 2, dr.Sampler(0), DSIConfig(2, 2, LAT, verify="block"))
    lean = dsi(TARGET, AGREES, [], 3, dr.Sampler(0), 2, 2, LAT, record=False)
    assert lean == Run((1, 1, 1), F(18, 5))


def test_dsi_samples_at_the_start_when_asked() -> None:
    rng, policy = _sampler()
    dsi(TARGET, AGREES, [], 2, rng, 1, 2, UNIT, sample_drafts_at="start")
    assert policy.calls[0] == (("drafter(position 0, token 1)", _front(0, 0)), ("tie", F(1)))


def test_dsi_checks_its_inputs() -> None:
    wide = dr.TableLM(4, 0, {}, default=(F(1, 4),) * 4)
    with pytest.raises(InvalidParameterError,
                       match=re.escape("target and drafter vocabularies differ: 3 vs 4")):
        dsi(TARGET, wide, [], 2, dr.Sampler(0))
    with pytest.raises(InvalidParameterError, match=re.escape(
            "rng must be a dsi_ref.Randomness (categorical, bernoulli and choose), e.g. "
            "dsi_ref.Sampler(0), got int (a seed: use dsi_ref.Sampler(seed))")):
        dsi(TARGET, AGREES, [], 2, cast(Any, 0))
    with pytest.raises(InvalidParameterError,
                       match=re.escape("max_new_tokens must be an int >= 0, got -1")):
        dsi(TARGET, AGREES, [], -1, dr.Sampler(0))
    with pytest.raises(InvalidParameterError, match=re.escape("lookahead must be an int >= 1")):
        dsi(TARGET, AGREES, [], 2, dr.Sampler(0), 0)
    assert dsi(TARGET, AGREES, [2, 0], 1, dr.Sampler(0)).tokens == (1,)


def test_the_law_of_dsi_is_the_target_law_on_random_models() -> None:
    target = dr.TableLM.random(3, 1, seed=1)
    drafter = dr.TableLM.random(3, 1, seed=2)
    law = dr.exact_distribution(lambda rng: dsi(target, drafter, [0], 2, rng, 1, 2,
                                                record=False).tokens)
    assert law == dr.target_distribution(target, (0,), 2)


def test_a_random_latency_is_drawn_with_the_run_rng() -> None:
    lat = Latency(drafter={F(1, 10): F(1, 2), F(3, 10): F(1, 2)}, target=F(1))
    law = dr.exact_distribution(
        lambda rng: _run(AGREES, 1, rng, DSIConfig(1, 2, lat, record=False)).time)
    assert law == {F(1): F(1)}
    lat = Latency(target={F(1): F(1, 2), F(2): F(1, 2)})
    law = dr.exact_distribution(
        lambda rng: _run(AGREES, 1, rng, DSIConfig(1, 2, lat, record=False)).time)
    # the frontier task ends at 1 or 2; the verification task (0..0, drafted at 1/10) at 11/10
    # or 21/10: the first of the two commits
    assert law == {F(1): F(1, 2), F(11, 10): F(1, 4), F(2): F(1, 4)}


# -- rules that log what they are asked ----------------------------------------------------------


class _Logged(RejectionSampling):
    """Rejection sampling that logs each draft and decision with the rows and context."""

    def __init__(self) -> None:
        self.log: list[tuple[object, ...]] = []

    def draft(self, draft_probs: Sequence[Number], rng: Any, context: tuple[int, ...]) -> int:
        self.log.append(("draft", tuple(draft_probs), context))
        return super().draft(draft_probs, rng, context)

    def decide(self, target_probs: Sequence[Number], draft_probs: Sequence[Number] | None,
               draft: int | None, rng: Any, context: tuple[int, ...]) -> Decision:
        self.log.append(("decide", tuple(target_probs),
                         None if draft_probs is None else tuple(draft_probs), draft, context))
        return super().decide(target_probs, draft_probs, draft, rng, context)


class _LoggedBlock(BlockVerification):
    """Block verification that logs each draft and each window it decides."""

    def __init__(self) -> None:
        self.log: list[tuple[object, ...]] = []

    def draft(self, draft_probs: Sequence[Number], rng: Any, context: tuple[int, ...]) -> int:
        self.log.append(("draft", tuple(draft_probs), context))
        return super().draft(draft_probs, rng, context)

    def decide_window(self, target_rows: Sequence[Sequence[Number]],
                      draft_rows: Sequence[Sequence[Number]], drafts: Sequence[int],
                      rng: Any, context: tuple[int, ...]) -> list[Decision]:
        self.log.append(("window", [tuple(r) for r in target_rows],
                         [tuple(r) for r in draft_rows], list(drafts), context))
        return super().decide_window(target_rows, draft_rows, drafts, rng, context)


def test_a_bonus_is_decided_on_the_committed_prefix_without_a_draft() -> None:
    rule = _Logged()
    rng, _ = _sampler(lambda n: n - 1)
    _run(AGREES, 2, rng, DSIConfig(1, 2, UNIT, verify=rule))
    # sampled at the end, the drafts preempted in flight were never drawn
    assert rule.log == [("decide", ONE, None, None, ()), ("decide", ONE, None, None, (1,))]
    rule = _Logged()
    rng, _ = _sampler(lambda n: n - 1)
    _run(AGREES, 2, rng, DSIConfig(1, 2, UNIT, verify=rule, sample_drafts_at="start"))
    assert rule.log == [("draft", ONE, ()), ("decide", ONE, None, None, ()),
                        ("draft", ONE, (1,)), ("decide", ONE, None, None, (1,))]


# -- the merge state -----------------------------------------------------------------------------




def _kept(checkpointing: Checkpointing) -> tuple[str, ...]:
    """The fields of `DSIRun` a merge state keeps under ``checkpointing``, in order."""
    return tuple(f.name for f in Layout(DSIRun).fields
                 if (f.role != "history" or checkpointing.history)
                 and (f.role != "derived" or checkpointing.derived)
                 and (f.role != "clock" or checkpointing.absolute_time))


def _field(state: Hashable, name: str, checkpointing: Checkpointing) -> Any:
    """The field ``name`` of a plain merge state of `DSIRun`'s own code."""
    return cast(tuple[Any, ...], state)[_kept(checkpointing).index(name)]


def _states(*runs: DSIRun) -> list[Hashable]:
    """The merge states of ``runs`` now, read with one table (`States.merge_state`)."""
    states = States()
    return [states.merge_state(run, run.checkpointing()) for run in runs]


def _extras(run: DSIRun) -> Any:
    """What the merge state of ``run`` adds beside its fields (`States.extras`): the
    fingerprint of what a subclass keeps on the run, and those of the parts read as data."""
    state = cast(tuple[Any, ...], _states(run)[0])
    assert len(state) == 2, "a plain merge state: nothing beside the fields"
    return state[1]


LEAN = Checkpointing(own=True, resumable=True, history=False, absolute_time=True,
                     derived=False)
RECORDING = LEAN._replace(history=True)
TOP = ("top",)  # the step of a run at the merge point at the top of its loop


def test_the_fields_and_their_roles() -> None:
    """The fields of a run, in order, and what a merge state of `DSIRun`'s own code keeps: a
    lean one leaves out the history (trace, counters, next id; the tasks' ids too) and what
    the run's own code derives from the rest (the drafts' rows, the servers' tasks)."""
    assert [(f.name, f.role) for f in Layout(DSIRun).fields] == [
        ("now", "clock"), ("committed", "committed"), ("drafts", None),
        ("draft_rows", "derived"), ("window_start", None), ("drafting", None),
        ("drafter_first", None), ("tasks", None), ("queue", None), ("frontier_waiting", None),
        ("busy", "derived"), ("server_first", None), ("supplied", None), ("trace", "history"),
        ("next_id", "history"), ("done", None), ("stats", "history"), ("started", None),
        ("due", None), ("due_started", None), ("step", None), ("resuming", None)]
    assert [(f.name, f.role) for f in Layout(Task).fields] == [
        ("id", "history"), ("first", None), ("last", None), ("context", None),
        ("frontier", None), ("submitted", "instant"), ("server", None), ("start", "instant"),
        ("end", "instant")]
    assert [(f.name, f.role) for f in Layout(DraftForward).fields] == [
        ("position", None), ("start", "instant"), ("end", "instant"), ("token", None),
        ("row", "derived")]
    assert _kept(LEAN) == ("now", "committed", "drafts", "window_start", "drafting",
                           "drafter_first", "tasks", "queue", "frontier_waiting", "server_first",
                           "supplied", "done", "started", "due", "due_started", "step",
                           "resuming")


def _g_last(record: bool, cls: type[DSIRun] = DSIRun) -> tuple[DSIRun, RecordingHooks]:
    rng = RecordingHooks(0, scheduler="last")
    run = cls(TARGET, AGREES, (), 2, rng, DSIConfig(1, 2, UNIT, record=record))
    run.run()
    return run, rng


def test_the_lean_merge_points_of_a_run_pinned_whole() -> None:
    """The run of `test_a_bonus_preempts_the_draft_in_flight_and_ties_go_to_the_scheduler`,
    lean: one invocation entered (`DSIRun`'s own code, a built-in rule: resumable; a lean run:
    no history), and a merge point at each instant of the loop, at its top, before the events
    due. At 0: nothing committed, the draft of 0 in flight (0 → 1), the frontier task#0 on
    server 0 (0 → 1). At 1 (after the bonus at 0): the draft of 1 (1 → 2) and task#1
    (frontier 1..1) on server 0. The tasks' ids are not in a lean state."""
    _, rng = _g_last(False)
    assert rng.entered == [LEAN]
    assert rng.hints == [
        ((F(0), (), (), 0, (0, F(0), F(1), None), False,
          ((0, 0, (), True, F(0), 0, F(0), F(1)),), (), None, (False, True), (), False, True,
          None, False, TOP, False), ()),
        ((F(1), (1,), (), 1, (1, F(1), F(2), None), False,
          ((1, 1, (1,), True, F(1), 0, F(1), F(2)),), (), None, (False, True), (), False, True,
          None, False, TOP, False), (1,)),
    ]


def test_the_recording_merge_points_of_a_run_pinned_whole() -> None:
    """The same run, recording: the state adds the tasks' ids, the trace (as the id of its
    contents), the next id and the counters."""
    _, rng = _g_last(True)
    assert rng.entered == [RECORDING]
    trace = [
        Event("target-0", "forward", F(0), F(1), (0,), _front(0, 0)),
        _commit(0, "bonus", _front(0, 0), F(1)),
        Event("drafter", "preempted", F(0), F(1), (0,), "bonus at 0")]
    before = len(rng.states.prefixes)
    trace_id = rng.states.prefix_id(trace, (0, 0))[0]
    assert len(rng.states.prefixes) == before == 3  # the trace met at the merge point
    assert rng.hints == [
        ((F(0), (), (), 0, (0, F(0), F(1), None), False,
          ((0, 0, 0, (), True, F(0), 0, F(0), F(1)),), (), None, (False, True), (), 0, 1, False,
          tuple(_stats(frontier_tasks=1, max_busy_servers=1).items()), True, None, False, TOP,
          False), ()),
        ((F(1), (1,), (), 1, (1, F(1), F(2), None), False,
          ((1, 1, 1, (1,), True, F(1), 0, F(1), F(2)),), (), None, (False, True), (), trace_id,
          2, False, tuple(_stats(bonus=1, frontier_tasks=2, preempted_drafts=1,
                                 max_busy_servers=1).items()), True, None, False, TOP, False),
         (1,)),
    ]


def _stepped(record: bool = True, cls: type[DSIRun] = DSIRun) -> DSIRun:
    """A run stopped by hand with a draft in flight, a running task, a queued task and a waiting
    frontier task (ids 5, 6, 7), a supplied row and a draft."""
    run = cls(TARGET, AGREES, (), 4, dr.Sampler(0), DSIConfig(2, 3, LAT, record=record))
    run.now = F(2)
    run.committed, run.drafts, run.draft_rows = [1], [1], [ONE]
    run.window_start = 2
    run.drafting = DraftForward(2, F(1), F(3), None, ONE)
    running = Task(5, 1, 2, (1, 1), False, F(1), 1, F(1), F(4))
    run.tasks, run.busy = [running], [None, running, None]
    run.queue = [Task(6, 2, 3, (1, 1, 1), False, F(2))]
    run.frontier_waiting = Task(7, 1, 1, (1,), True, F(2))
    run.server_first = [False, False, True]
    run.drafter_first = False
    run.supplied = {1: ONE}
    run.next_id = 8
    return run


#: The lean merge state of `_stepped` (the run not started, between steps).
STEPPED_LEAN = (F(2), (1,), (1,), 2, (2, F(1), F(3), None), False,
                ((1, 2, (1, 1), False, F(1), 1, F(1), F(4)),),
                ((2, 3, (1, 1, 1), False, F(2), None, None, None),),
                (1, 1, (1,), True, F(2), None, None, None), (False, False, True), ((1, ONE),),
                False, False, None, False, None, False)
#: The same, recording: the tasks' ids, the trace (empty: id 0), next id 8 and the counters.
STEPPED_RECORDING = (F(2), (1,), (1,), 2, (2, F(1), F(3), None), False,
                     ((5, 1, 2, (1, 1), False, F(1), 1, F(1), F(4)),),
                     ((6, 2, 3, (1, 1, 1), False, F(2), None, None, None),),
                     (7, 1, 1, (1,), True, F(2), None, None, None), (False, False, True),
                     ((1, ONE),), 0, 8, False, tuple(_stats().items()), False, None, False,
                     None, False)


def test_the_state_of_a_stepped_run_lean_and_recording() -> None:
    lean = _stepped(False)
    assert lean.checkpointing() == LEAN
    assert _states(lean) == [STEPPED_LEAN]
    run = _stepped(True)
    assert run.checkpointing() == RECORDING
    assert _states(run) == [STEPPED_RECORDING]
    run.frontier_waiting = None
    assert _field(_states(run)[0], "frontier_waiting", RECORDING) is None
    run.drafting = None
    assert _field(_states(run)[0], "drafting", RECORDING) is None
    run.done = True
    assert _field(_states(run)[0], "done", RECORDING) is True
    run.trace.append(Event("drafter", "draft", F(0), F(1), (0,)))
    assert _field(_states(run)[0], "trace", RECORDING) == 1  # the id of a one-event trace


def test_a_subclass_that_overrides_a_method_reads_the_derived_parts() -> None:
    """Code the run does not own may read anything: the history (also in a lean run), the
    derived fields (the drafts' rows, the servers' tasks), the trace as it is (not an id: it
    may be changed in place), and the classes of the run and of what it holds."""
    class Own(DSIRun):
        def dispatch(self) -> None:
            super().dispatch()

    assert not Own.own_code and DSIRun.own_code
    run = _stepped(False, Own)
    assert run.checkpointing() == Checkpointing(own=False, resumable=False, history=True,
                                                absolute_time=True, derived=True)
    running = (Task, 5, 1, 2, (1, 1), False, F(1), 1, F(1), F(4))
    fields = (Own, F(2), (1,), (1,), (ONE,), 2, (DraftForward, 2, F(1), F(3), None, ONE), False,
              (running,), ((Task, 6, 2, 3, (1, 1, 1), False, F(2), None, None, None),),
              (Task, 7, 1, 1, (1,), True, F(2), None, None, None), (None, running, None),
              (False, False, True), ((1, ONE),), (), 8, False, tuple(_stats().items()), False,
              None, False, None, False)
    assert _states(run) == [(fields, ())]  # nothing beside the fields
    run.drafting, run.frontier_waiting = None, None
    state = cast(tuple[Any, ...], _states(run)[0])[0]
    assert (state[6], state[10]) == (None, None)
    assert state[:6] + state[7:10] + state[11:] == fields[:6] + fields[7:10] + fields[11:]


def test_a_subclass_that_overrides_nothing_merges_like_dsi_run() -> None:
    class Same(DSIRun):
        pass

    assert Same.own_code
    run = _stepped(False, Same)
    assert run.checkpointing() == LEAN
    assert _states(run) == [STEPPED_LEAN]


def test_a_rebound_part_is_read_as_data() -> None:
    a, b = _stepped(), _stepped()
    b.n = 5
    first, second = _states(b, b)
    assert _states(a) != [first] and first == second
    assert _extras(b) == (fingerprint({"n": 5}, {}), ())
    b.n = 4
    assert _states(a) == _states(b)


def test_a_rebound_model_is_not_data() -> None:
    run = _stepped()
    run.target = dr.FunctionLM(3, lambda prefix: ONE)
    own, parts = _extras(run)
    assert isinstance(own, NoMerge) and parts == ()


def test_the_attributes_of_a_rule_are_read() -> None:
    """A rule of the user's is read as data (its own attributes), and the run is not resumable
    (the checker's snapshot does not hold the rule's state)."""
    rule = _Logged()
    run = DSIRun(TARGET, AGREES, (), 4, dr.Sampler(0), DSIConfig(2, 2, verify=rule))
    assert run.checkpointing() == RECORDING._replace(resumable=False, data_parts=(rule,))
    assert _extras(run) == ((), (fingerprint({"log": []}, {}),))
    rule.log.append(("x",))
    assert _extras(run) == ((), (fingerprint({"log": [("x",)]}, {}),))


def _named(obj: object, name: str) -> Hashable:
    """The fingerprint of ``{"mine": obj}`` when ``obj`` is named ``name``."""
    return fingerprint({"mine": obj}, {id(obj): name})


@pytest.mark.parametrize("part", ["self", "committed", "drafts", "tasks", "queue", "supplied",
                                  "trace", "stats", "rng", "cfg", "prompt"])
@pytest.mark.parametrize("record", [True, False])
def test_known_names_the_run_and_its_containers(part: str, record: bool) -> None:
    """An attribute of a subclass that *is* the run, a part, or one of the run's own containers
    is read as that name (an alias grows with the run; a copy does not). The trace and the
    counters are named only when they are in the state (a recording run); a lean run reads an
    alias of them as data."""
    class Sub(DSIRun):
        pass

    run = _stepped(record, Sub)
    obj = run if part == "self" else getattr(run, part)
    cast(Any, run).mine = obj
    own, parts = _extras(run)
    assert parts == ()
    if part in ("trace", "stats") and not record:
        assert own == fingerprint({"mine": obj}, {})
    else:
        assert own == _named(obj, part)
    if part not in ("self", "rng", "cfg", "prompt"):
        # a copy of the container, read as data: a named alias is not a copy (a lean run
        # reads an alias of its trace or counters as data, and then they merge)
        other = _stepped(record, Sub)
        cast(Any, other).mine = cast(Any, getattr(other, part)).copy()
        named = record or part not in ("trace", "stats")
        mine, theirs = _states(run, other)
        assert (mine != theirs) is named


def test_an_overriding_lean_run_names_its_trace_and_counters() -> None:
    class Own(DSIRun):
        def release(self, task: Task) -> None:
            super().release(task)

    for part in ("trace", "stats"):
        run = _stepped(False, Own)
        obj = getattr(run, part)
        cast(Any, run).mine = obj
        assert _extras(run) == (_named(obj, part), ())


def test_a_rebound_part_is_not_named() -> None:
    """A part rebound after the run was built is read as data, not named as the part."""
    class Sub(DSIRun):
        pass

    run = _stepped(True, Sub)
    run.prompt = (0,)
    cast(Any, run).mine = run.prompt
    assert _extras(run) == (fingerprint({"mine": (0,), "prompt": (0,)}, {}), ())


def test_the_first_merge_point_is_the_state_after_the_start() -> None:
    rng = RecordingHooks(0)
    run = DSIRun(TARGET, AGREES, (), 3, rng, DSIConfig(2, 2, LAT))
    run.run()
    other = DSIRun(TARGET, AGREES, (), 3, dr.Sampler(0), DSIConfig(2, 2, LAT))
    other.start_drafting()
    other.submit(0, 0, frontier=True)
    other.started, other.step = True, TOP  # where the run is at its first merge point
    assert rng.entered == [RECORDING]
    assert rng.hints[0] == (rng.states.merge_state(other, RECORDING), ())
    # one merge point per instant: 0, 1/2, 3/5, 7/10, 3 (then 18/5 ends the run)
    assert [(h[1], _field(h[0], "now", RECORDING)) for h in rng.hints] == [
        ((), F(0)), ((), F(1, 2)), ((), F(3, 5)), ((), F(7, 10)), ((1,), F(3))]


class _Resuming(RecordingHooks):
    """`RecordingHooks` of a checker that resumes: it records the step of each resume point too."""

    resumes = True

    def __init__(self, seed: int, **kwargs: Any) -> None:
        super().__init__(seed, **kwargs)
        self.paused: list[tuple[object, ...] | None] = []

    def pause(self, run: StepRun) -> None:
        self.paused.append(cast(DSIRun, run).step)


@pytest.mark.parametrize("sample_drafts_at", ["end", "start"])
def test_a_merge_point_names_the_point_of_the_loop(
        sample_drafts_at: Literal["end", "start"]) -> None:
    """N = 2, k = 1, SP = 2, every forward 1, canonical order (the drafter first), under a
    checker that resumes: a merge point at the top of the loop (the clock still at the last
    batch's instant, nothing due) and, before each further event of a batch due at one instant,
    one with its step and the events still due. At 1 the draft of 0 (then task#1, verify
    0..1, on server 1) and the frontier task#0 are due: after the draft, task#0 (which accepts
    it). At 2 the draft of 1, task#1 and the frontier task#2 are due: after the draft, the two
    tasks (task#1 commits 1: done). A resume point inside an event only before a step that may
    draw: starting a draft when drafts are sampled at its start, never with constant costs
    otherwise."""
    rng = _Resuming(0, scheduler="first")
    config = DSIConfig(1, 2, UNIT, record=False, sample_drafts_at=sample_drafts_at)
    run = DSIRun(TARGET, AGREES, (), 2, rng, config)
    assert run.run() == Run((1, 1), F(2))
    assert run.resuming and rng.entered == [LEAN]
    names = ("now", "step", "due", "due_started")
    task0 = (0, 0, (), True, F(0), 0, F(0), F(1))
    task1 = (0, 1, (1,), False, F(1), 1, F(1), F(2))
    task2 = (1, 1, (1,), True, F(1), 0, F(1), F(2))
    assert [(tuple(_field(s, n, LEAN) for n in names), c) for s, c in rng.hints] == [
        ((F(0), TOP, None, False), ()),
        ((F(1), ("next",), (task0,), True), ()),
        ((F(1), TOP, None, False), (1,)),
        ((F(2), ("next",), (task1, task2), True), (1,)),
    ]
    assert rng.paused == ([] if sample_drafts_at == "end" else [("draft on",), ("draft on",)])


# -- the rules of the run, step by step ----------------------------------------------------------


def test_preempting_a_waiting_frontier_task() -> None:
    run = _stepped()
    waiting = run.frontier_waiting
    assert waiting is not None
    run.preempt(waiting, "frontier moved")
    assert run.frontier_waiting is None and len(run.queue) == 1
    assert run.trace == [Event("queue", "preempted", F(2), F(2), (1,),
                               f"{_front(7, 1)}: frontier moved")]
    assert run.stats["preempted_tasks"] == 1
    queued = run.queue[0]
    run.preempt(queued, "stale")
    assert run.queue == [] and run.stats["preempted_tasks"] == 2
    running = run.tasks[0]
    run.preempt(running, "done")
    assert run.tasks == [] and run.busy == [None, None, None]
    assert run.trace[-1] == Event("target-1", "preempted", F(1), F(2), (1, 2),
                                  f"{_verify(5, 1, 2)}: done")


class _CountsCommits(DSIRun):
    """Overrides the committer (`DSIRun.commit_ready`): counts its calls, by source task."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.commits: list[str] = []

    def commit_ready(self, source: Task) -> None:
        self.commits.append(source.label)
        super().commit_ready(source)


@pytest.mark.parametrize("exact", [False, True])
def test_an_overridden_committer_decides_every_finished_task(exact: bool) -> None:
    """A subclass that overrides a step has it called by the loop: `commit_ready` once per
    finished task, under a sampler and under the exact checker (which then neither resumes the
    run nor takes the committer's steps apart), with the run's law unchanged. N = 2, k = 1,
    SP = 2, every forward 1, the first option at each tie: at 1 the draft of 0 (task#1, verify
    0..1, on server 1), then the frontier task#0 accepts it; at 2 the draft of 1 (task#3,
    queued), then task#1 accepts it: done (the frontier task#2 and task#3 are preempted, never
    finished)."""
    config = DSIConfig(1, 2, UNIT)
    if not exact:
        run = _CountsCommits(TARGET, AGREES, (), 2, dr.Sampler(0), config)
        assert run.run().tokens == (1, 1)
        assert run.commits == [_front(0, 0), _verify(1, 0, 1)]
        return
    seen: list[list[str]] = []

    def program(rng: Any) -> tuple[int, ...]:
        run = _CountsCommits(TARGET, AGREES, (), 2, rng, config)
        tokens = run.run().tokens
        seen.append(run.commits)
        return tokens

    assert dr.exact_distribution(program, scheduler="first") == {(1, 1): 1}
    assert seen and all(commits == [_front(0, 0), _verify(1, 0, 1)] for commits in seen)


def test_a_commit_preempts_a_waiting_frontier_task() -> None:
    """SP = 1 and a frontier task waiting when the frontier moves: it is preempted, and the new
    frontier task takes the free server."""
    run = DSIRun(TARGET, AGREES, (), 4, dr.Sampler(0), DSIConfig(2, 1, LAT))
    run.now = F(2)
    run.drafts, run.draft_rows, run.window_start = [1], [ONE], 2
    run.frontier_waiting = Task(3, 0, 0, (), True, F(1))
    run.supplied = {0: ONE}
    run.server_first = [False]
    source = Task(2, 0, 1, (1,), False, F(0), 0, F(0), F(2))
    run.commit_ready(source)
    assert run.committed == [1]
    assert run.trace == [
        _commit(0, "accepted", _verify(2, 0, 1), F(2)),
        Event("queue", "preempted", F(1), F(2), (0,), f"{_front(3, 0)}: frontier moved")]
    assert cast(Any, run).frontier_waiting is None
    assert [t.key() for t in run.tasks] == [(0, 1, 1, (1,), True, F(2), 0, F(2), F(3))]


def test_release_forgets_a_task_once() -> None:
    run = _stepped()
    task = run.tasks[0]
    run.release(task)
    assert run.tasks == [] and run.busy == [None, None, None]
    run.release(task)  # no longer there: nothing to do
    assert run.tasks == []
    queued = run.queue[0]
    run.release(queued)  # never on a server
    assert run.busy == [None, None, None]


def test_target_rows_supply_p_from_the_frontier_on() -> None:
    target = dr.TableLM(3, 1, {(0,): ZERO, (1,): TWO}, default=ONE)
    run = DSIRun(target, AGREES, (2,), 5, dr.Sampler(0), DSIConfig(2, 2))
    run.committed = [1]
    task = Task(0, 0, 3, (1, 0, 1), False, F(0))
    assert run.target_rows(task) == {1: TWO, 2: ZERO, 3: TWO}
    run.committed = []
    assert run.target_rows(task) == {0: ONE, 1: TWO, 2: ZERO, 3: TWO}


def test_free_servers_reserve_server_zero_from_two_servers_on() -> None:
    run = DSIRun(TARGET, AGREES, (), 4, dr.Sampler(0), DSIConfig(2, 1))
    assert run.free_servers() == [0]
    run = DSIRun(TARGET, AGREES, (), 4, dr.Sampler(0), DSIConfig(2, 3))
    assert run.free_servers() == [1, 2]
    run.busy[1] = Task(0, 0, 0, (), False, F(0))
    assert run.free_servers() == [2]


def test_a_fresh_run() -> None:
    run = DSIRun(TARGET, AGREES, (5,), 4, dr.Sampler(0), DSIConfig(2, 3))
    assert (run.prompt, run.n, run.eos, run.now, run.committed, run.drafts, run.draft_rows,
            run.window_start, run.drafting, run.drafter_first, run.tasks, run.queue,
            run.frontier_waiting, run.busy, run.server_first, run.supplied, run.trace,
            run.next_id, run.done, run.stats, run.frontier, run.spec()) == (
        (5,), 4, None, F(0), [], [], [], 0, None, True, [], [], None, [None] * 3, [True] * 3,
        {}, [], 0, False, _stats(), 0, ())
    run.committed, run.drafts = [1], [0, 2]
    assert (run.frontier, run.spec()) == (1, (1, 0, 2))
