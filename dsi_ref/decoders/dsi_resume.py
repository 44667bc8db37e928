"""Resuming DSI runs from snapshots: `DSIRun`'s event loop as the exact engine runs it when it
resumes (``rng.resumes``; see `dsi_ref.base.randomness.merge_point`).

`run_resuming` takes the same steps as `DSIRun.run`, `DSIRun.finish_draft`, `DSIRun.finish_task`
and `DSIRun.commit_ready`, in the same order, with the same merge points, and offers the engine
a `snapshot` of the run at each of them and at *resume points* inside an event; `restore` puts
a snapshot back. A run the engine restores goes on from its snapshot instead of replaying the
choices before it (the engine's cross-check with ``merge=False`` is tests/test_exact_resume.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from ..base.latency import Time
from ..base.models import Number
from ..base.result import Event, Run
from .common import PrefixKey, same_parts
from .dsi_parts import DraftForward, Task

if TYPE_CHECKING:
    from .dsi import DSIRun

__all__ = ["restore", "run_resuming", "snapshot"]


def run_resuming(run: DSIRun, hint: Callable[..., None]) -> Run:
    """`run` for an interpreter that resumes (`DSIRun`'s own code only, `_resumable`).

    The same steps as `run`, `finish_draft`, `finish_task` and `commit_ready`, in the same
    order, with the same merge points at the top of the event loop, and besides them
    snapshots at *resume points* that say where the run is (``_step``): ``start`` (before
    anything: the entry merge point, where the engine may restore a later snapshot of the
    same path), ``top`` (a merge point), ``next`` (before the next event of a batch due at
    the same time, ``_due`` holding those still due), and inside an event (`_steps`). A run
    the engine restores goes on from its snapshot instead of replaying the choices before
    it."""
    run._due = None
    run._due_started = False
    run._trace_key = PrefixKey()
    # whether a step may draw, else a resume point before it saves nothing: starting a
    # target forward (a random cost, or the scheduler's pick of the queue: the steps
    # ``after commits``, ``dispatch``, ``submit``), and `start_drafting` (a random cost, or a
    # draft sampled when its forward starts: ``draft on``)
    random_cost = not run.cfg.latency.is_constant
    run._draws = (random_cost or run.cfg.queue == "any",
                   random_cost or run.cfg.sample_drafts_at == "start")
    run._step = ("start",)
    # the entry: nothing has happened yet, so the invocation (which the engine's key holds)
    # is the whole state
    hint(("start",), entry=True, committed=tuple(run.committed), snapshot=run._snapshot,
         restore=run._restore)  # may put the run anywhere
    step = cast("tuple[object, ...]", run._step)
    run._step = None
    at_top = step[0] == "top"  # restored at a merge point: it is behind
    if step[0] == "start":
        if not run.done:
            run.start_drafting()
            run.submit(0, 0, frontier=True)
    elif step[0] not in ("top", "next"):
        _steps(run, step, paused=True)  # the rest of the event it was restored in
    while True:
        if run._due is None:
            if run.done:
                break
            if not at_top:
                run._step = ("top",)
                hint(run._state_resuming(), committed=tuple(run.committed),
                     snapshot=run._snapshot, restore=run._restore)
                run._step = None
            at_top = False
            # canonical order: the drafter, then tasks in the order they started
            pending: list[tuple[Time, DraftForward | Task]] = (
                [(run.drafting.end, run.drafting)] if run.drafting else [])
            pending += [(t.end, t) for t in run.tasks if t.end is not None]
            run.now = min(end for end, _ in pending)
            run._due = [event for end, event in pending if end == run.now]
        due = run._due
        while due and not run.done:
            if run._due_started:  # a merge point inside a batch of events due together
                run._step = ("next",)
                hint(_next_state(run, due), committed=tuple(run.committed),
                     snapshot=run._snapshot, restore=run._restore)
                run._step = None
            event = due[0] if len(due) == 1 else run.rng.choose(due, key=("tie", run.now))
            due.remove(event)
            run._due_started = True
            if isinstance(event, DraftForward):
                if event is run.drafting:  # finish_draft, step by step
                    window = run._deliver_draft(event)
                    _steps(run, ("draft on",) if window is None else
                                ("submit", *window, event.position + 1), paused=False)
            elif event in run.tasks:  # finish_task, step by step
                run.release(event)
                run.trace.append(Event(f"target-{event.server}",
                                        "forward" if event.frontier else "verify",
                                        event.start if event.start is not None else run.now,
                                        run.now, tuple(range(event.first, event.last + 1)),
                                        event.label))
                run.supplied.update(run.target_rows(event))
                moved = run._commit_decisions(event)
                _steps(run, ("after commits",) if moved else ("dispatch",), paused=False)
        run._due = None
        run._due_started = False
    return run.result()

def _steps(run: DSIRun, step: tuple[object, ...] | None, *, paused: bool) -> None:
    """The rest of an event from ``step`` on, with a resume point before each step (but the
    first when ``paused``: the run was just restored there): ``after commits``
    (`commit_ready` after its decisions), then ``dispatch`` (`finish_task`'s end); or
    ``submit`` (``first``, ``last``, the next window's start: `finish_draft`'s submission),
    then ``draft on`` (its `start_drafting`)."""
    while step is not None:
        if not paused and run._draws[step[0] == "draft on"]:
            _resume_point(run, step)
        paused = False
        kind = step[0]
        if kind == "after commits":
            run._after_commits()
            step = ("dispatch",)
        elif kind == "dispatch":
            run.dispatch()
            step = None
        elif kind == "submit":
            first, last, window_start = cast("tuple[int, int, int]", step[1:])
            run.submit(first, last)
            run.window_start = window_start
            step = ("draft on",)
        else:  # "draft on"
            run.start_drafting()
            step = None

def _resume_point(run: DSIRun, step: tuple[object, ...]) -> None:
    """Offer the engine a snapshot here (``step``: where the run is, see `run_resuming`)."""
    run._step = step
    run.rng.resume_point(run._snapshot)  # type: ignore[attr-defined]
    run._step = None


def snapshot(run: DSIRun) -> object:
    """Everything the run keeps, as immutable values (a task as its `Task.key`; a task that
    is running, in ``busy`` or due, as its index in ``tasks``)."""
    tasks = run.tasks
    due = run._due
    return (run._parts(), run.now, tuple(run.committed), tuple(run.drafts),
            tuple(run.draft_rows), run.window_start, run.drafting, run.drafter_first,
            tuple([t.key() for t in tasks]), tuple([t.key() for t in run.queue]),
            None if run.frontier_waiting is None else run.frontier_waiting.key(),
            tuple([_ref(tasks, t) for t in run.busy]), tuple(run.server_first),
            tuple(run.supplied.items()), tuple(run.trace), run.next_id, run.done,
            tuple(run.stats.items()),
            None if due is None else tuple([_ref(tasks, e) for e in due]),
            run._step, run._due_started, run._trace_key.state())

def restore(run: DSIRun, saved: object) -> bool:
    """Put a `snapshot` back into ``run``: True, or False (``run`` unchanged) when it was taken
    by a run built on other parts (models, prompt, budget, configuration, rule)."""
    (parts, now, committed, drafts, draft_rows, window_start, drafting, drafter_first,
     tasks, queue, waiting, busy, server_first, supplied, trace, next_id, done, stats, due,
     step, due_started, trace_key) = cast(_Snapshot, saved)
    if not same_parts(parts, run._parts()):
        return False
    run.now = now
    run.committed[:] = committed
    run.drafts[:] = drafts
    run.draft_rows[:] = draft_rows
    run.window_start = window_start
    run.drafting = drafting  # never changed once made
    run.drafter_first = drafter_first
    running = [Task(*key) for key in tasks]
    run.tasks[:] = running
    run.queue[:] = [Task(*key) for key in queue]
    run.frontier_waiting = None if waiting is None else Task(*waiting)
    run.busy[:] = [cast("Task | None", _deref(running, ref)) for ref in busy]
    run.server_first[:] = server_first
    run.supplied.clear()
    run.supplied.update(supplied)
    run.trace[:] = trace
    run.next_id = next_id
    run.done = done
    run.stats.update(stats)
    run._due = None if due is None else [
        cast("DraftForward | Task", _deref(running, ref)) for ref in due]
    run._step, run._due_started = step, due_started
    run._trace_key.set_state(trace_key)
    return True



#: A task, a draft forward or nothing, as `DSIRun._snapshot` keeps it: a draft forward or None
#: as itself (neither ever changes), a task as its index in ``tasks`` or, when it is not there,
#: its `Task.key`.
_Ref: TypeAlias = "DraftForward | int | tuple[Any, ...] | None"
#: What `DSIRun._snapshot` keeps (see `DSIRun._restore` for the order).
_Snapshot: TypeAlias = tuple[
    tuple[object, ...], Time, tuple[int, ...], tuple[int, ...], tuple[tuple[Number, ...], ...],
    int, "DraftForward | None", bool, tuple[tuple[Any, ...], ...], tuple[tuple[Any, ...], ...],
    "tuple[Any, ...] | None", tuple[_Ref, ...], tuple[bool, ...],
    tuple[tuple[int, tuple[Number, ...]], ...], tuple[Event, ...], int, bool,
    tuple[tuple[str, int], ...], "tuple[_Ref, ...] | None", "tuple[object, ...] | None", bool,
    tuple[int, int]]


def _ref(tasks: list[Task], item: DraftForward | Task | None) -> _Ref:
    if not isinstance(item, Task):
        return item
    for i, task in enumerate(tasks):
        if task is item:
            return i
    return item.key()


def _deref(tasks: list[Task], ref: _Ref) -> DraftForward | Task | None:
    if type(ref) is int:
        return tasks[ref]
    if type(ref) is tuple:
        return Task(*ref)
    return cast("DraftForward | None", ref)


def _next_state(run: DSIRun, due: list[DraftForward | Task]) -> tuple[object, ...]:
    """The merge state before the next event of a batch due at ``now``: the state at the top of
    the loop (`DSIRun._state_resuming`, which holds the tasks in order) and the events still
    due, in their order (the draft forward, or a task as its index in ``tasks``)."""
    return (run._state_resuming(), "next",
            tuple(["draft" if e is run.drafting else _ref(run.tasks, e) for e in due]))
