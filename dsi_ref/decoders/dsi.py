"""Distributed speculative inference (DSI), event level, on the virtual clock.

The rules are those of docs/dsi-semantics.md (the contract shared with the acceptance-level event
model): one drafter drafting continuously; a verification task per window of ``lookahead`` drafts;
a frontier task that always computes ``p`` at the committed frontier; ``sp_degree`` target servers
(server 0 reserved for the frontier task when ``sp_degree >= 2``); a committer that decides
positions left to right with the verification rules of `dsi_ref.decoders.verification`;
preemption of everything built on a rejected draft.

Concurrency is explicit nondeterminism: events due at the same instant are delivered in an order
chosen by ``rng.choose`` (canonical order first: the drafter, then tasks by start order), and with
``queue="any"`` so is the next queued task. The exact checker explores every choice.

The run is its state (`dsi_ref.decoders.dsi_parts.DSIState`) and one loop (`DSIRun.run`) over
steps named after the algorithm. Under the exact checker the loop offers a merge point at each
instant, and a resumable run (`DSIRun`'s own code, a built-in rule) offers resume points inside
an event too (`DSIRun.point`): the checker snapshots and restores the fields itself, so the
speed-ups need no second copy of the loop.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import ClassVar, Literal, cast

from ..base.exact_hooks import Checkpointing, exact_hooks
from ..base.latency import Latency, Time
from ..base.models import LanguageModel, Number
from ..base.randomness import Randomness
from ..base.result import Event, Run
from .common import (
    DEFAULT_LATENCY,
    check_inputs,
    cost_laws,
    forward_cost,
    model_probs,
    reuse_config,
)
from .dsi_parts import QUEUE_POLICIES, DraftForward, DSIConfig, DSIState, QueuePolicy, Task
from .stepping import built_parts, overridden, stateless_rule, with_built
from .verification import Decision, Rule, VerifyRule, as_rule, decide_window, is_window_rule

__all__ = ["QUEUE_POLICIES", "DSIConfig", "DSIRun", "DSIState", "DraftForward", "QueuePolicy",
           "Task", "dsi"]

#: Where a run is at its merge points: at the top of the loop, before the events due now; before
#: the next event of a batch due at the same instant.
_TOP: tuple[object, ...] = ("top",)
_NEXT: tuple[object, ...] = ("next",)


class DSIRun(DSIState):
    """One run of DSI: its state (the fields of `DSIState`) and the rules that change it.

    Public so that variants override one rule (the zoo's mutants) or the event loop (the torch
    engine, `dsi_ref.backends.engine`); use `dsi` to run it. Its target forwards are `Task`
    objects and the drafter's forward in flight a `DraftForward`. Every other attribute its
    ``__init__`` sets is a part it is built on (`built_on`).
    """

    #: Whether the class is `DSIRun`'s own code: it replaces none of its methods (set for each
    #: subclass when it is made).
    own_code: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.own_code = not overridden(cls, DSIRun)

    def __init__(self, target: LanguageModel, drafter: LanguageModel, prompt: tuple[int, ...],
                 max_new_tokens: int, rng: Randomness, config: DSIConfig) -> None:
        self.target, self.drafter, self.prompt = target, drafter, prompt
        self.n, self.rng, self.cfg = max_new_tokens, rng, config
        self.eos = target.eos
        self.rule = as_rule(config.verify)
        self._laws = (config.latency, cost_laws(config.latency))
        random_cost = not config.latency.is_constant
        # which steps inside an event may draw, else a resume point before them saves nothing:
        # starting a target forward (a random cost, or the scheduler's pick of the queue), and
        # starting a draft (a random cost, or a draft sampled when its forward starts)
        self._draws = (random_cost or config.queue == "any",
                       random_cost or config.sample_drafts_at == "start")
        self._hooks = exact_hooks(rng)
        self._built = built_parts(self)
        super().__init__()
        self.busy = [None] * config.sp_degree
        self.server_first = [True] * config.sp_degree
        self.done = max_new_tokens == 0
        self.stats = dict.fromkeys(("drafts", "accepted", "rejected", "bonus", "tasks",
                                    "frontier_tasks", "preempted_tasks", "preempted_drafts",
                                    "max_busy_servers"), 0)

    # -- the speculative sequence --------------------------------------------------------------
    @property
    def frontier(self) -> int:
        """``F``: the number of committed tokens (the next position to decide)."""
        return len(self.committed)

    def spec(self) -> tuple[int, ...]:
        """Committed tokens followed by the drafts."""
        return tuple(self.committed) + tuple(self.drafts)

    # -- drafter -------------------------------------------------------------------------------
    def next_draft_position(self) -> int | None:
        """The position the drafter drafts next, the one after the speculative sequence, or
        ``None``: nothing is drafted once the run is done, past the budget or past a drafted
        EOS (the stop rule, read by every engine that runs DSI's steps)."""
        position = self.frontier + len(self.drafts)
        context = self.spec()
        if self.done or position >= self.n or (context and context[-1] == self.eos):
            return None
        return position

    def start_drafting(self) -> None:
        """Start the drafter on the next position of the speculative sequence
        (`next_draft_position`)."""
        position = self.next_draft_position()
        if position is None:
            self.drafting = None
            return
        context = self.spec()
        row = model_probs(self.drafter, self.prompt + context)        # q(. | spec sequence)
        cost = self._cost("drafter", self.drafter_first)
        self.drafter_first = False
        token = (self.rule.draft(row, self.rng, context)
                 if self.cfg.sample_drafts_at == "start" else None)
        self.drafting = DraftForward(position, self.now, self.now + cost, token, row)

    def finish_draft(self, d: DraftForward) -> None:
        """Deliver a draft ``x ~ q``; submit a verification task when its window is full (or at
        position ``N - 1``, or at an EOS draft); draft on (`finish_event`)."""
        window = self._deliver_draft(d)
        self.finish_event(("draft on",) if window is None
                          else ("submit", window[0], window[1], d.position + 1))

    def _deliver_draft(self, d: DraftForward) -> tuple[int, int] | None:
        """`finish_draft` up to the submission: the draft delivered; the positions of the
        verification task to submit, if its window is now complete."""
        context = self.spec()
        token = d.token if d.token is not None else self.rule.draft(d.row, self.rng, context)
        self.drafts.append(token)
        self.draft_rows.append(d.row)
        self.stats["drafts"] += 1
        self.trace.append(Event("drafter", "draft", d.start, self.now, (d.position,)))
        self.drafting = None
        window_full = d.position + 1 - self.window_start >= self.cfg.lookahead
        if window_full or d.position == self.n - 1 or token == self.eos:
            return self.window_start, min(d.position + 1, self.n - 1)
        return None

    def preempt_drafting(self, why: str) -> None:
        """Drop the draft in flight (recorded in the trace)."""
        d = self.drafting
        if d is not None:
            self.trace.append(Event("drafter", "preempted", d.start, self.now, (d.position,), why))
            self.stats["preempted_drafts"] += 1
            self.drafting = None

    def _cost(self, model: str, first: bool) -> Time:
        """One forward's cost (`Latency.cost`, its laws read once per run: `cost_laws`)."""
        latency = self.cfg.latency
        if self._laws[0] is not latency:
            self._laws = (latency, cost_laws(latency))
        return forward_cost(self._laws[1], model, first, self.rng)

    # -- target servers ------------------------------------------------------------------------
    def submit(self, first: int, last: int, frontier: bool = False) -> None:
        """Submit a target forward supplying ``p`` at ``first..last`` over the current
        speculative sequence (the frontier task goes to server 0 when ``SP >= 2``)."""
        task = Task(self.next_id, first, last, self.spec()[:last], frontier, self.now)
        self.next_id += 1
        self.stats["frontier_tasks" if frontier else "tasks"] += 1
        if frontier and self.cfg.sp_degree >= 2:
            self.run_on(task, 0)
            return
        if frontier:
            self.frontier_waiting = task
        else:
            self.queue.append(task)
        self.dispatch()

    def free_servers(self) -> list[int]:
        """Idle servers that may run verification tasks (server 0 is reserved when ``SP >= 2``)."""
        reserved = 1 if self.cfg.sp_degree >= 2 else 0
        return [s for s in range(reserved, self.cfg.sp_degree) if self.busy[s] is None]

    def dispatch(self) -> None:
        """Start waiting tasks on free servers (the frontier task first)."""
        while True:
            free = self.free_servers()
            if not free:
                return
            if self.frontier_waiting is not None:
                task, self.frontier_waiting = self.frontier_waiting, None
            elif self.queue:
                if self.cfg.queue == "fifo":
                    task = self.queue[0]
                elif self.cfg.queue == "lifo":
                    task = self.queue[-1]
                else:
                    task = self.rng.choose(self.queue, key=("queue", self.now))
                self.queue.remove(task)
            else:
                return
            self.run_on(task, free[0])

    def run_on(self, task: Task, server: int) -> None:
        """Start ``task`` on ``server`` now (TTFT for the server's first forward, TPOT after),
        as a new `Task` with its server and times."""
        cost = self._cost("target", self.server_first[server])
        self.server_first[server] = False
        if task.submitted != self.now:
            self.trace.append(Event(f"target-{server}", "wait", task.submitted, self.now,
                                    tuple(range(task.first, task.last + 1)), task.label))
        task = Task(task.id, task.first, task.last, task.context, task.frontier, task.submitted,
                    server, self.now, self.now + cost)
        self.busy[server] = task
        self.tasks.append(task)
        self.stats["max_busy_servers"] = max(self.stats["max_busy_servers"],
                                             sum(b is not None for b in self.busy))

    def release(self, task: Task) -> None:
        """Free the server of ``task`` and forget it."""
        if task.server is not None:
            self.busy[task.server] = None
        if task in self.tasks:
            self.tasks.remove(task)

    def preempt(self, task: Task, why: str) -> None:
        """Cut ``task`` short (running or queued), recorded in the trace: it supplies nothing."""
        if task.start is not None:
            self.trace.append(Event(f"target-{task.server}", "preempted", task.start, self.now,
                                    tuple(range(task.first, task.last + 1)),
                                    f"{task.label}: {why}"))
            self.release(task)
        else:
            self.trace.append(Event("queue", "preempted", task.submitted, self.now,
                                    tuple(range(task.first, task.last + 1)),
                                    f"{task.label}: {why}"))
            if task in self.queue:
                self.queue.remove(task)
            if task is self.frontier_waiting:
                self.frontier_waiting = None
        self.stats["preempted_tasks"] += 1

    def finish_task(self, task: Task) -> None:
        """A task's forward completes: its rows (`target_rows`) go to the committer
        (`deliver_rows`)."""
        self.deliver_rows(task, self.target_rows(task))

    def deliver_rows(self, task: Task, rows: Mapping[int, Sequence[Number]]) -> None:
        """A finished task's rows ``p`` by position (from `target_rows`, or from a real server):
        free its server, record its forward, let the committer decide (`commit_ready`), and
        finish the event (`finish_event`: dispatch). A resuming run (`DSIRun`'s own code, whose
        `commit_ready` is this class's) takes the committer's two steps apart, so that a resume
        point comes between its decisions and their consequences."""
        self.release(task)
        self.trace.append(Event(f"target-{task.server}", "forward" if task.frontier else "verify",
                                task.start if task.start is not None else self.now, self.now,
                                tuple(range(task.first, task.last + 1)), task.label))
        self.supplied.update(cast("Mapping[int, tuple[Number, ...]]", rows))
        if not self.resuming:  # a subclass's committer, if it has one
            self.commit_ready(task)
            self.finish_event(("dispatch",))
            return
        moved = self._commit_decisions(task)
        self.finish_event(("after commits",) if moved else ("dispatch",))

    def target_rows(self, task: Task) -> dict[int, tuple[Number, ...]]:
        """What a finished task supplies: ``p(. | committed + drafts before j)`` at each position
        ``j`` of the task not yet decided (the task's context is still valid: a task built on a
        rejected draft was preempted). The one place where a target forward's output is read."""
        return {position: model_probs(self.target, self.prompt + task.context[:position])
                for position in range(max(task.first, self.frontier), task.last + 1)}

    # -- committer -----------------------------------------------------------------------------
    def commit_ready(self, source: Task) -> None:
        """Decide positions left to right while some finished task supplies p at the frontier,
        and apply the commits' consequences (`deliver_rows` does both, step by step)."""
        if self._commit_decisions(source):
            self._after_commits()

    def _commit_decisions(self, source: Task) -> bool:
        """`commit_ready`'s decisions; whether the frontier moved."""
        moved = False
        while not self.done and self.frontier in self.supplied:
            decisions = self.decide_at_frontier()
            if not decisions:
                break  # block decisions with fixed windows: the window at F is not complete
            for decision in decisions:
                position = self.frontier
                self.committed.append(decision.token)
                moved = True
                self.stats[decision.kind] += 1
                self.trace.append(Event("committer", "commit", self.now, self.now, (position,),
                                        f"{decision.kind} via {source.label}"))
                self.done = decision.token == self.eos or self.frontier >= self.n
                if decision.accepted:
                    self.drafts.pop(0)
                    self.draft_rows.pop(0)
                    if self.done:
                        break
                    continue
                self.invalidate(f"{decision.kind} at {position}")
                break
        return moved

    def _after_commits(self) -> None:
        """`commit_ready` after the frontier moved: stale tasks preempted, the frontier task
        resubmitted (or everything stopped at the end)."""
        # tasks with nothing left to supply are stale
        for task in [t for t in self.tasks + self.queue if not t.frontier
                     and t.last < self.frontier]:
            self.preempt(task, "stale")
        # the frontier task follows the frontier
        for task in [t for t in self.tasks if t.frontier]:
            self.preempt(task, "frontier moved")
        if self.frontier_waiting is not None:
            self.preempt(self.frontier_waiting, "frontier moved")
        if self.done:
            self.preempt_drafting("done")
            for task in list(self.tasks) + list(self.queue):
                self.preempt(task, "done")
            return
        self.submit(self.frontier, self.frontier, frontier=True)

    def decide_at_frontier(self) -> list[Decision]:
        """The decisions the committer takes now that ``p`` is supplied at the frontier ``F``.

        A per-position rule decides ``F`` alone: the draft there, or a bonus token when there is
        none. A `WindowRule` (block verification) decides the longest window it can: the drafts
        at ``F, F + 1, …`` for which ``p`` is supplied (docs/dsi-semantics.md, "Block
        decisions"); with no draft at ``F``, a bonus token. The rows it reads are used up."""
        position = self.frontier
        if self.drafts and is_window_rule(self.rule):
            if self.cfg.block_windows == "fixed":
                # the window at F: its drafts were all delivered (a task was submitted for it)
                m = min(self.cfg.lookahead, self.window_start - position, len(self.drafts))
                if m < 1 or any(position + i not in self.supplied for i in range(m)):
                    return []
            else:
                m = 1
                while m < len(self.drafts) and position + m in self.supplied:
                    m += 1
            rows = [self.supplied.pop(position + i) for i in range(m)]
            return decide_window(self.rule, rows, self.draft_rows[:m], self.drafts[:m],
                                 self.rng, tuple(self.committed))
        row = self.supplied.pop(position)
        has_draft = bool(self.drafts)
        return [self.rule.decide(row, self.draft_rows[0] if has_draft else None,
                                 self.drafts[0] if has_draft else None, self.rng,
                                 tuple(self.committed))]

    def invalidate(self, why: str) -> None:
        """After a rejection or a bonus token: everything speculative past the frontier is built
        on a token that is not the committed one. Drop it, preempt it, restart drafting."""
        self.drafts.clear()
        self.draft_rows.clear()
        self.supplied = {p: r for p, r in self.supplied.items() if p < self.frontier}
        self.preempt_drafting(why)
        for task in [t for t in self.tasks + self.queue if not t.frontier]:
            self.preempt(task, why)
        self.window_start = self.frontier
        self.start_drafting()

    # -- the event loop ------------------------------------------------------------------------
    def run(self) -> Run:
        """The event loop: deliver the earliest events (ties in an order the scheduler chooses)
        until the last position is committed.

        Under the exact checker the run enters first (the checker may restore a later snapshot
        of the same path), then offers a merge point at each instant before the events due, and,
        when it resumes, before each further event of a batch due at the same instant and inside
        an event (`point`)."""
        hooks = self._hooks
        if hooks is not None:
            checkpointing = self.checkpointing()
            self.resuming = hooks.resumes and checkpointing.resumable
            hooks.enter(self, checkpointing)  # may put the run where a snapshot of this path was
        if not self.started:
            self.started = True
            if not self.done:
                self.start_drafting()
                self.submit(0, 0, frontier=True)
        elif self.step is not None and self.step is not _TOP and self.step is not _NEXT:
            self.finish_event(self.step, paused=True)  # the event it was restored in
        while True:
            if self.due is None:
                if self.done:
                    break
                self.merge_point(_TOP)
                # canonical order: the drafter, then tasks in the order they started
                pending: list[tuple[Time, DraftForward | Task]] = (
                    [(self.drafting.end, self.drafting)] if self.drafting else [])
                pending += [(t.end, t) for t in self.tasks if t.end is not None]
                self.now = min(end for end, _ in pending)
                self.due = [event for end, event in pending if end == self.now]
            due = self.due
            while due and not self.done:
                if self.due_started and self.resuming:
                    self.merge_point(_NEXT)
                event = due[0] if len(due) == 1 else self.rng.choose(due, key=("tie", self.now))
                due.remove(event)
                self.due_started = True
                if isinstance(event, DraftForward):
                    if event is self.drafting:
                        self.finish_draft(event)
                elif event in self.tasks:
                    self.finish_task(event)
            self.due = None
            self.due_started = False
        return self.result()

    def finish_event(self, step: tuple[object, ...], *, paused: bool = False) -> None:
        """The rest of an event, step by step, from ``step``: ``("after commits",)`` (stale
        tasks preempted, the frontier task resubmitted), then ``("dispatch",)`` (the end of
        `deliver_rows`); or ``("submit", first, last, window_start)`` (`finish_draft`'s
        verification task), then ``("draft on",)`` (its `start_drafting`). A resume point comes
        before each step (`point`), but the first when ``paused`` (a run restored there)."""
        next_step: tuple[object, ...] | None = step
        while next_step is not None:
            if not paused:
                self.point(next_step)
            paused = False
            kind = next_step[0]
            if kind == "after commits":
                self._after_commits()
                next_step = ("dispatch",)
            elif kind == "dispatch":
                self.dispatch()
                next_step = None
            elif kind == "submit":
                first, last, window_start = cast("tuple[int, int, int]", next_step[1:])
                self.submit(first, last)
                self.window_start = window_start
                next_step = ("draft on",)
            else:  # "draft on"
                self.start_drafting()
                next_step = None
        self.step = None

    # -- what the exact checker reads (`dsi_ref.base.exact_hooks`) -----------------------------
    def point(self, step: tuple[object, ...]) -> None:
        """A resume point before ``step`` of an event (`finish_event`): the run is there (a
        snapshot keeps ``step``), and a resuming run offers the checker a snapshot when the
        step may draw."""
        self.step = step
        if self.resuming and self._draws[step[0] == "draft on"] and self._hooks is not None:
            self._hooks.pause(self)

    def merge_point(self, where: tuple[object, ...]) -> None:
        """A merge point of the loop (``where``: at its top, or before the next event of a batch),
        unless the run was just restored there (the point is behind it)."""
        if self.step is where:
            self.step = None
            return
        if self._hooks is not None:
            self.step = where
            self._hooks.merge(self)
            self.step = None

    def built_on(self) -> Mapping[str, object]:
        """The parts the run is built on: what its ``__init__`` set before its fields (models,
        ``rng``, configuration, rule, the cost laws...)."""
        return with_built(self._built)

    def invocation(self) -> tuple[object, ...]:
        """What identifies the invocation: models, prompt, budget, configuration, rule."""
        return (self.target, self.drafter, self.prompt, self.n, self.cfg, self.rule)

    def checkpointing(self) -> Checkpointing:
        """How the exact checker may treat the run (`dsi_ref.base.exact_hooks.Checkpointing`).

        Note: why a lean run merges more. The future of the run — which events happen when,
        which tokens are committed — depends on the committed tokens, the drafts, the task and
        draft in flight (context, timing, server), the queue, the rows supplied and the clock,
        but not on the trace, the counters or the tasks' ids (which only name tasks in labels).
        A recording run returns its trace and counters, so they are in its merge state; a lean
        run (``record=False``) returns neither, so paths with different histories but the same
        future merge. A run that returns no time (``keep_time=False``) merges paths whose
        futures agree up to a shift of the clock: its future depends on when its forwards in
        flight end relative to now, not on now, unless the scheduler's choices read their keys,
        which hold ``now`` (`dsi_ref.base.exact_hooks.ExactHooks.keyed_choices`). That is
        `DSIRun`'s own code: a subclass that overrides any method may read the history, the
        clock and what `DSIRun` keeps as a function of the rest, so its merge state keeps them.
        """
        own = type(self).own_code
        stateless = stateless_rule(self.rule)
        hooks = self._hooks
        relative = (own and not self.cfg.keep_time and hooks is not None
                    and not hooks.keyed_choices)
        return Checkpointing(own=own, resumable=own and stateless,
                             history=self.cfg.record or not own, absolute_time=not relative,
                             derived=not own, data_parts=() if stateless else (self.rule,))

    def result(self) -> Run:
        """The finished `Run` (no trace and no counters when ``record=False``)."""
        if not self.cfg.record:
            return Run(tuple(self.committed), self.now if self.cfg.keep_time else math.nan)
        return Run(tuple(self.committed), self.now, tuple(self.trace), dict(self.stats))


def dsi(target: LanguageModel, drafter: LanguageModel, prompt: Sequence[int],
        max_new_tokens: int, rng: Randomness, lookahead: int = 2, sp_degree: int = 2,
        latency: Latency | None = None, verify: VerifyRule | Rule = "rejection",
        queue: QueuePolicy = "fifo", *, sample_drafts_at: Literal["end", "start"] = "end",
        record: bool = True, block_windows: Literal["fixed", "maximal"] = "fixed",
        keep_time: bool = True) -> Run:
    """Distributed speculative inference on the virtual clock (docs/dsi-semantics.md).

    Returns a `Run`: the committed tokens (lossless for every scheduler that cannot see drafts
    in flight — `dsi_ref.audit.schedulers` states and checks the classes), the latency (time of the
    last commit) and the trace (drafts, verify/frontier forwards, waits, preemptions, commits).
    ``record=False`` returns no trace and no counters, and lets the exact engine merge far more
    paths (`DSIConfig`); the law of ``(tokens, time)`` is the same. ``keep_time=False`` (with
    ``record=False``) returns no time either (``Run.time`` is NaN) and merges more still: the same
    law of ``tokens``.
    """
    config = reuse_config(DSIConfig, lookahead, sp_degree,
                          DEFAULT_LATENCY if latency is None else latency, verify, queue,
                          sample_drafts_at, record, block_windows, keep_time)
    prompt = check_inputs(target, prompt, max_new_tokens, drafter, rng=rng)
    return DSIRun(target, drafter, prompt, max_new_tokens, rng, config).run()
