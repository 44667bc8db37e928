"""The exact engine's shortcuts never change a law (#23, point 6).

With ``merge=True`` the engine resumes SI and DSI runs from snapshots taken at their merge and
resume points instead of replaying them from the start, keeps laws as integers over one
denominator, and (``keep_time=False``) merges DSI paths whose futures agree up to a shift of the
clock. ``merge=False`` does none of it: a plain enumeration of every path. Here both are run on
instances hypothesis draws (EOS or none, zeros, ties, random costs, every rule, both block
windows, queues, tie rules, recorded or lean runs) and must give the same law, as exact
`Fraction` s. The relative-time merge is also checked against a scheduler that reads the time in
its keys, where it must not merge.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import replace
from fractions import Fraction as F
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import dsi_ref as dr
from dsi_ref.audit.exact.state import States
from dsi_ref.audit.schedulers import tie_rule_law
from dsi_ref.base.errors import InvalidParameterError
from dsi_ref.base.exact_hooks import Checkpointing, ExactHooks, StepRun

RULES = ("rejection", "exact_match", "block")


@st.composite
def rows(draw: st.DrawFn, vocab: int) -> tuple[F, ...]:
    """A row of exact probabilities over ``vocab`` tokens, with zeros and ties allowed."""
    weights = draw(st.lists(st.integers(0, 3), min_size=vocab, max_size=vocab)
                   .filter(lambda w: sum(w) > 0))
    return tuple(F(w, sum(weights)) for w in weights)


@st.composite
def pairs(draw: st.DrawFn) -> tuple[dr.TableLM, dr.TableLM]:
    """A context-free (target, drafter) pair; EOS or none. The drafter has full support where
    the target does, so that every rule (exact match included) is well defined."""
    vocab = draw(st.integers(2, 3))
    eos = draw(st.sampled_from([None, vocab - 1]))
    target = draw(rows(vocab))
    drafter = draw(rows(vocab))
    return (dr.TableLM.context_free(target, eos=eos, name="target"),
            dr.TableLM.context_free(drafter, eos=eos, name="drafter"))


@st.composite
def latencies(draw: st.DrawFn) -> dr.Latency:
    """Constant or random costs with 1-2 support points."""
    def cost() -> Any:
        points = draw(st.lists(st.integers(1, 3), min_size=1, max_size=2, unique=True))
        if len(points) == 1:
            return F(points[0])
        return {F(c): F(1, len(points)) for c in points}
    return dr.Latency(drafter=cost(), target=cost())


SETTINGS = settings(max_examples=12, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))


@SETTINGS
@given(pair=pairs(), latency=latencies(), rule=st.sampled_from(RULES),
       windows=st.sampled_from(["fixed", "maximal"]), queue=st.sampled_from(["fifo", "lifo"]),
       lean=st.sampled_from(["record", "lean", "no time"]),
       tie=st.sampled_from(["first", "last", "uniform"]),
       lookahead=st.integers(1, 2), sp_degree=st.integers(1, 3), n=st.integers(1, 3))
def test_dsi_resuming_and_relative_time_keep_the_law(
        pair: tuple[dr.TableLM, dr.TableLM], latency: dr.Latency, rule: str, windows: str,
        queue: str, lean: str, tie: str, lookahead: int, sp_degree: int, n: int) -> None:
    target, drafter = pair
    kwargs: dict[str, Any] = {"record": lean == "record", "keep_time": lean != "no time"}

    def program(rng: Any) -> Any:
        run = dr.dsi(target, drafter, (), n, rng, lookahead=lookahead, sp_degree=sp_degree,
                     latency=latency, verify=rule, queue=queue, block_windows=windows,
                     **kwargs)
        return run.tokens if lean == "no time" else (run.tokens, run.time, run.trace)

    merged = tie_rule_law(program, tie)  # type: ignore[arg-type]
    assert merged == tie_rule_law(program, tie, merge=False)  # type: ignore[arg-type]
    assert sum(merged.values()) == 1


@SETTINGS
@given(pair=pairs(), latency=latencies(), rule=st.sampled_from(RULES),
       lookahead=st.integers(1, 3), n=st.integers(1, 4),
       lean=st.sampled_from(["record", "lean", "no time"]))
def test_si_resuming_keeps_the_law(pair: tuple[dr.TableLM, dr.TableLM], latency: dr.Latency,
                                   rule: str, lookahead: int, n: int, lean: str) -> None:
    target, drafter = pair

    def program(rng: Any) -> Any:
        run = dr.speculative(target, drafter, (), n, rng, lookahead=lookahead, verify=rule,
                             latency=latency, record=lean == "record",
                             keep_time=lean != "no time")
        if lean == "no time":
            return run.tokens
        return run.tokens, run.time, run.trace, tuple(sorted(run.stats.items()))

    merged = dr.exact_distribution(program)
    assert merged == dr.exact_distribution(program, merge=False)


def test_every_schedule_quantified_with_resuming() -> None:
    """Quantifying over every schedule (no fixed scheduler) with resuming and relative times:
    the same law, or the same verdict, as the plain enumeration."""
    target = dr.TableLM.context_free((F(1, 2), F(1, 3), F(1, 6)), eos=2)
    drafter = dr.TableLM.context_free((F(1, 3), F(1, 3), F(1, 3)), eos=2)
    latency = dr.Latency(drafter=F(1), target={F(1): F(1, 2), F(2): F(1, 2)})

    def program(rng: Any) -> tuple[int, ...]:
        return dr.dsi(target, drafter, (), 3, rng, lookahead=2, sp_degree=2, latency=latency,
                      record=False, keep_time=False).tokens

    merged = dr.exact_distribution(program)
    assert merged == dr.exact_distribution(program, merge=False)
    assert merged == dr.target_distribution(target, (), 3)


class _Rng(ExactHooks):
    """A stand-in for the exact checker's offer (`ExactHooks`) that says whether its
    ``choose`` reads keys; it draws nothing (the runs below are stepped by hand)."""

    def __init__(self, keyed_choices: bool) -> None:
        self.keyed_choices = keyed_choices

    def merge_point(self, state: Hashable, *, entry: bool = False,
                    committed: tuple[int, ...] | None = None,
                    snapshot: Callable[[], object] | None = None,
                    restore: Callable[[object], bool] | None = None) -> None:
        raise AssertionError("not called")

    def resume_point(self, snapshot: Callable[[], object]) -> None:
        raise AssertionError("not called")

    def enter(self, run: StepRun, checkpointing: Checkpointing) -> None:
        raise AssertionError("not called")

    def merge(self, run: StepRun) -> None:
        raise AssertionError("not called")

    def pause(self, run: StepRun) -> None:
        raise AssertionError("not called")


def _shifted_states(keyed_choices: bool, keep_time: bool) -> tuple[object, object]:
    """The merge state of one DSI run with its forwards in flight (as the exact checker reads
    it: `States.merge_state`), before and after moving its clock and every time in it by 2."""
    target = dr.TableLM.context_free((F(1, 2), F(1, 2)))
    config = dr.DSIConfig(2, 2, dr.Latency(drafter=F(1), target=F(3)), record=False,
                          keep_time=keep_time)
    run = dr.DSIRun(target, target, (), 3, _Rng(keyed_choices), config)  # type: ignore[arg-type]
    # relative times exactly when the run keeps no time and the choices do not read keys
    assert run.checkpointing().absolute_time is (keyed_choices or keep_time)
    states = States()
    run.start_drafting()
    run.submit(0, 0, frontier=True)
    assert run.tasks and run.drafting is not None  # times in flight to shift
    before = states.merge_state(run, run.checkpointing())
    run.now += 2
    # forwards in flight are values (frozen): the shifted run holds shifted copies of them
    moved = {id(task): replace(task, submitted=task.submitted + 2,
                               start=None if task.start is None else task.start + 2,
                               end=None if task.end is None else task.end + 2)
             for task in [*run.tasks, *run.queue]}
    run.tasks[:] = [moved[id(task)] for task in run.tasks]
    run.queue[:] = [moved[id(task)] for task in run.queue]
    run.busy[:] = [None if task is None else moved.get(id(task), task) for task in run.busy]
    assert run.frontier_waiting is None
    assert run.drafting is not None
    run.drafting = replace(run.drafting, start=run.drafting.start + 2,
                           end=run.drafting.end + 2)
    return before, states.merge_state(run, run.checkpointing())


def test_the_relative_time_merge_applies_only_when_nothing_reads_the_clock() -> None:
    """Two runs in the same state up to a shift of the clock share one merge state when the run
    keeps no time and the scheduler's choices do not read their keys (which hold ``now``), and
    only then: an oblivious table names its decision points by ``("tie", now)``, so the engine
    sets ``keyed_choices`` for a policy function, and a run that returns its time keeps it."""
    before, after = _shifted_states(keyed_choices=False, keep_time=False)
    assert before == after
    for keyed_choices, keep_time in ((True, False), (False, True), (True, True)):
        before, after = _shifted_states(keyed_choices, keep_time)
        assert before != after


def test_uniform_ties_keep_the_checkers_offer() -> None:
    """Under the ``"uniform"`` tie rule the decoder sees the checker through a wrapper that
    turns each ``choose`` into a draw; the wrapper is still the checker's offer
    (`dsi_ref.base.exact_hooks.exact_hooks`), so a DSI run merges and resumes under it: the
    plain law in fewer runs."""
    target = dr.TableLM.context_free((F(1, 2), F(1, 3), F(1, 6)), eos=2)
    drafter = dr.TableLM.context_free((F(1, 3), F(1, 3), F(1, 3)), eos=2)
    calls = [0]
    offered: list[bool] = []

    def program(rng: Any) -> tuple[int, ...]:
        calls[0] += 1
        offered.append(isinstance(rng, ExactHooks) and rng.resumes)
        return dr.dsi(target, drafter, (), 3, rng, lookahead=2, sp_degree=2,
                      latency=dr.Latency(drafter=F(1), target=F(2)), record=False).tokens

    merged = tie_rule_law(program, "uniform")
    merged_runs, calls[0] = calls[0], 0
    assert all(offered)
    plain = tie_rule_law(program, "uniform", merge=False)
    assert merged == plain == dr.target_distribution(target, (), 3)
    assert merged_runs < calls[0]


def test_the_engine_says_which_schedulers_read_keys() -> None:
    seen: dict[object, bool] = {}

    def program(rng: Any) -> int:
        seen[scheduler] = rng.keyed_choices
        return 0

    for scheduler in (None, "first", "last", lambda options, key: 0):
        dr.exact_distribution(program, scheduler=scheduler)  # type: ignore[arg-type]
    assert [seen[s] for s in seen] == [False, False, False, True]


@pytest.mark.parametrize("decoder", [dr.dsi, dr.speculative])
def test_keep_time_false_returns_no_time_and_needs_a_lean_run(decoder: Any) -> None:
    target = dr.TableLM.context_free((F(1, 2), F(1, 2)))
    run = decoder(target, target, (), 2, dr.Sampler(0), record=False, keep_time=False)
    assert math.isnan(run.time) and len(run.tokens) == 2 and not run.trace and not run.stats
    lean = decoder(target, target, (), 2, dr.Sampler(0), record=False)
    recorded = decoder(target, target, (), 2, dr.Sampler(0))
    assert (lean.tokens, lean.time) == (recorded.tokens, recorded.time) and recorded.trace
    with pytest.raises(InvalidParameterError, match="keep_time=False needs record=False"):
        decoder(target, target, (), 2, dr.Sampler(0), keep_time=False)
    with pytest.raises(InvalidParameterError, match="keep_time must be a bool"):
        decoder(target, target, (), 2, dr.Sampler(0), record=False, keep_time=0)
    with pytest.raises(InvalidParameterError, match="record must be a bool"):
        decoder(target, target, (), 2, dr.Sampler(0), record="no")


def test_max_runs_bounds_the_work() -> None:
    """``max_runs`` bounds the runs of the program (the work), which ``max_paths`` does not
    when merging ends most runs early; a bad value is refused."""
    from dsi_ref.base.errors import InvalidAuditError, PathLimitError

    def program(rng: Any) -> tuple[int, ...]:
        return tuple(rng.categorical([1, 1, 1]) for _ in range(3))

    assert len(dr.exact_distribution(program, max_runs=100)) == 27
    with pytest.raises(PathLimitError, match="more than 5 runs"):
        dr.exact_distribution(program, max_runs=5)
    with pytest.raises(InvalidAuditError, match="max_runs"):
        dr.exact_distribution(program, max_runs=0)


@SETTINGS
@given(vocab=st.integers(2, 3), seeds=st.tuples(st.integers(0, 99), st.integers(0, 99)),
       latency=latencies(), rule=st.sampled_from(("rejection", "exact_match", "greedy")),
       lookahead=st.integers(1, 3), n=st.integers(1, 4), record=st.booleans())
def test_si_drawing_drafts_only_when_needed_keeps_the_law(
        vocab: int, seeds: tuple[int, int], latency: dr.Latency, rule: str, lookahead: int,
        n: int, record: bool) -> None:
    """Without EOS, a resuming SI run draws each draft only once the one before it is accepted
    (`SIRun.draw`); on context-dependent (bigram) models, where each draft's row
    depends on the drafts before it, the law of the whole run is the plain enumeration's."""
    target = dr.TableLM.random(vocab, 1, seed=seeds[0], name="target")
    drafter = dr.TableLM.random(vocab, 1, seed=seeds[1], name="drafter")

    def program(rng: Any) -> Any:
        run = dr.speculative(target, drafter, (), n, rng, lookahead=lookahead, verify=rule,
                             latency=latency, record=record)
        return run.tokens, run.time, run.trace, tuple(sorted(run.stats.items()))

    merged = dr.exact_distribution(program)
    assert merged == dr.exact_distribution(program, merge=False)
    assert merged == dr.exact_distribution(program, keyed=False)


# -- resuming keeps every counter of the run (#34, point 3) ------------------------------------
#
# A toy decoder that interprets a list of operations: draws of every kind (a uniform compared
# with thresholds, optionally on a float grid; a Bernoulli coin; a categorical draw), each with
# a shared key or none, and merge and resume points that offer a snapshot of its state. The
# outcomes are summed, so different paths reach equal states and merge. A program invokes it
# once or twice (the second invocation's entry point is another scope). `merge=True` resumes
# from the snapshots; `merge=False` replays every path from the start: the laws must be equal.

_KEYS = st.sampled_from([None, None, "a", "b"])
_PROBABILITY = st.fractions(F(1, 8), F(7, 8), max_denominator=8)


@st.composite
def _operations(draw: st.DrawFn) -> tuple[tuple[Any, ...], ...]:
    ops: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["uniform", "bernoulli", "categorical", "merge", "resume"]))
        if kind == "uniform":
            thresholds = tuple(draw(st.lists(_PROBABILITY, min_size=1, max_size=2)))
            ops.append((kind, draw(_KEYS), thresholds, draw(st.sampled_from([None, 2, 3]))))
        elif kind == "bernoulli":
            ops.append((kind, draw(_KEYS), draw(_PROBABILITY)))
        elif kind == "categorical":
            weights = draw(st.lists(st.integers(0, 3), min_size=2, max_size=3)
                           .filter(lambda w: sum(w) > 0))
            ops.append((kind, draw(_KEYS), tuple(F(w) for w in weights)))
        else:
            ops.append((kind,))
    return tuple(ops)


def _toy_decoder(ops: tuple[tuple[Any, ...], ...], rng: Any) -> int:
    """Run ``ops``; the state is ``[next operation, sum of the outcomes]``."""
    state = [0, 0]

    def snapshot() -> object:
        return tuple(state)

    def restore(copy: object) -> bool:
        state[:] = copy  # type: ignore[call-overload]
        return True

    dr.merge_point(rng, ("toy", ops), entry=True, snapshot=snapshot, restore=restore)
    while state[0] < len(ops):
        op = ops[state[0]]
        state[0] += 1
        if op[0] == "merge":
            dr.merge_point(rng, tuple(state), snapshot=snapshot, restore=restore)
        elif op[0] == "resume":
            if getattr(rng, "resumes", False):
                rng.resume_point(snapshot)
        elif op[0] == "uniform":
            u = rng.uniform(op[1], bits=op[3])
            state[1] += sum(1 for t in op[2] if u < t)
        elif op[0] == "bernoulli":
            state[1] += rng.bernoulli(op[2], op[1])
        else:
            state[1] += rng.categorical(op[2], op[1])
    return state[1]


_UNSHARED_AFTER_A_MERGE = (("uniform", None, (F(1, 3),), None), ("merge",),
                           ("uniform", None, (F(1, 3),), None), ("merge",),
                           ("uniform", None, (F(1, 3),), None))


@settings(max_examples=60, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(ops=_operations(), twice=st.booleans(), keyed=st.booleans())
@example(ops=_UNSHARED_AFTER_A_MERGE, twice=False, keyed=True)
def test_resuming_keeps_every_counter_of_the_run(ops: tuple[tuple[Any, ...], ...], twice: bool,
                                                 keyed: bool) -> None:
    """Before #34 a snapshot did not keep the count of uniforms drawn without a key, so the
    first such uniform after a restore reused an earlier one's key and interval: a spurious
    `NondeterministicProgramError` under ``merge=True`` (the example)."""
    def program(rng: Any) -> tuple[int, ...]:
        return tuple(_toy_decoder(ops, rng) for _ in range(2 if twice else 1))

    merged = dr.exact_distribution(program, keyed=keyed)
    assert merged == dr.exact_distribution(program, keyed=keyed, merge=False)
    assert sum(merged.values()) == 1
