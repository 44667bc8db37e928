"""Distributed speculative inference (DSI), event level, on the virtual clock.

The rules are those of docs/dsi-semantics.md (the contract shared with the acceptance-level event
model): one drafter drafting continuously; a verification task per window of ``lookahead`` drafts;
a frontier task that always computes ``p`` at the committed frontier; ``sp_degree`` target servers
(server 0 reserved for the frontier task when ``sp_degree >= 2``); a committer that decides
positions left to right with the verification rules of `dsi_ref.decoders.verification`; preemption
of
everything built on a rejected draft.

Concurrency is explicit nondeterminism: events due at the same instant are delivered in an order
chosen by ``rng.choose`` (canonical order first: the drafter, then tasks by start order), and with
``queue="any"`` so is the next queued task. The exact checker explores every choice.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from fractions import Fraction
from typing import Literal

from ..base.latency import Latency, Time
from ..base.models import LanguageModel, Number
from ..base.randomness import Randomness
from ..base.result import Event, Run
from .common import (
    DEFAULT_LATENCY,
    CostLaw,
    FixedParts,
    PrefixKey,
    check_inputs,
    cost_laws,
    forward_cost,
    merge_hint,
    model_probs,
    overridden,
    own_parts,
    resumes,
    reuse_config,
    stateless_rule,
)
from .dsi_parts import QUEUE_POLICIES, DraftForward, DSIConfig, QueuePolicy, Task
from .dsi_resume import restore, run_resuming, snapshot
from .verification import Decision, Rule, VerifyRule, as_rule, decide_window, is_window_rule

__all__ = ["QUEUE_POLICIES", "DSIConfig", "DSIRun", "DraftForward", "QueuePolicy", "Task", "dsi"]


class DSIRun:
    """One run of DSI: the state of the event loop and the rules that change it.

    Public so that variants override one rule (the zoo's mutants) or the event loop (the torch
    engine's `dsi_ref.backends.engine`); use `dsi` to run it. Its target forwards are `Task`
    objects and the drafter's forward in flight a `DraftForward`.
    """

    # where a resuming run is (set by `dsi_resume.run_resuming`, kept in its snapshots): the
    # events still due at ``now`` (``None``: none), the step it was stopped at, whether an event
    # of the batch was delivered, the trace's `PrefixKey`, and which steps may draw
    _due: list[DraftForward | Task] | None
    _step: tuple[object, ...] | None
    _due_started: bool
    _trace_key: PrefixKey
    _draws: tuple[bool, bool]

    def __init__(self, target: LanguageModel, drafter: LanguageModel, prompt: tuple[int, ...],
                 max_new_tokens: int, rng: Randomness, config: DSIConfig) -> None:
        self.target, self.drafter, self.prompt = target, drafter, prompt
        self.n, self.rng, self.cfg = max_new_tokens, rng, config
        self.eos = target.eos
        self.rule = as_rule(config.verify)
        self.now: Time = Fraction(0)
        self.committed: list[int] = []
        self.drafts: list[int] = []                 # speculative tokens at F, F+1, ...
        self.draft_rows: list[tuple[Number, ...]] = []
        self.window_start = 0                       # first position of the current window
        self.drafting: DraftForward | None = None
        self.drafter_first = True
        self.tasks: list[Task] = []                 # queued or running
        self.queue: list[Task] = []                 # waiting verification tasks, in submit order
        self.frontier_waiting: Task | None = None   # SP = 1: frontier task waiting for the server
        self.busy: list[Task | None] = [None] * config.sp_degree
        self.server_first = [True] * config.sp_degree
        self.supplied: dict[int, tuple[Number, ...]] = {}  # p(. | committed prefix) by position
        self.trace: list[Event] = []
        self.next_id = 0
        self.done = max_new_tokens == 0
        self.stats = dict.fromkeys(("drafts", "accepted", "rejected", "bonus", "tasks",
                                    "frontier_tasks", "preempted_tasks", "preempted_drafts",
                                    "max_busy_servers"), 0)
        self._fixed = FixedParts(self, _FIXED)
        self._laws: tuple[Latency, dict[tuple[str, bool], CostLaw]] = (
            config.latency, cost_laws(config.latency))

    # -- the speculative sequence --------------------------------------------------------------
    @property
    def frontier(self) -> int:
        """``F``: the number of committed tokens (the next position to decide)."""
        return len(self.committed)

    def spec(self) -> tuple[int, ...]:
        """Committed tokens followed by the drafts."""
        return tuple(self.committed) + tuple(self.drafts)

    # -- drafter -------------------------------------------------------------------------------
    def start_drafting(self) -> None:
        """Start the drafter on the next position of the speculative sequence (none past the
        budget or past a drafted EOS)."""
        position = self.frontier + len(self.drafts)
        context = self.spec()
        if self.done or position >= self.n or (context and context[-1] == self.eos):
            self.drafting = None  # nothing is drafted past the budget or past EOS
            return
        row = model_probs(self.drafter, self.prompt + context)        # q(. | spec sequence)
        cost = self._cost("drafter", self.drafter_first)
        self.drafter_first = False
        token = (self.rule.draft(row, self.rng, context)
                 if self.cfg.sample_drafts_at == "start" else None)
        self.drafting = DraftForward(position, self.now, self.now + cost, token, row)

    def finish_draft(self, d: DraftForward) -> None:
        """Deliver a draft ``x ~ q``; submit a verification task when its window is full (or at
        position ``N - 1``, or at an EOS draft); draft on."""
        window = self._deliver_draft(d)
        if window is not None:
            self.submit(*window)
            self.window_start = d.position + 1
        self.start_drafting()

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
        """Start ``task`` on ``server`` now (TTFT for the server's first forward, TPOT after)."""
        cost = self._cost("target", self.server_first[server])
        self.server_first[server] = False
        if task.submitted != self.now:
            self.trace.append(Event(f"target-{server}", "wait", task.submitted, self.now,
                                    tuple(range(task.first, task.last + 1)), task.label))
        task.server, task.start, task.end = server, self.now, self.now + cost
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
        """A task's forward completes: record its rows, let the committer decide, dispatch."""
        self.release(task)
        self.trace.append(Event(f"target-{task.server}", "forward" if task.frontier else "verify",
                                task.start if task.start is not None else self.now, self.now,
                                tuple(range(task.first, task.last + 1)), task.label))
        self.supplied.update(self.target_rows(task))
        self.commit_ready(task)
        self.dispatch()

    def target_rows(self, task: Task) -> dict[int, tuple[Number, ...]]:
        """What a finished task supplies: ``p(. | committed + drafts before j)`` at each position
        ``j`` of the task not yet decided (the task's context is still valid: a task built on a
        rejected draft was preempted). The one place where a target forward's output is read."""
        return {position: model_probs(self.target, self.prompt + task.context[:position])
                for position in range(max(task.first, self.frontier), task.last + 1)}

    # -- committer -----------------------------------------------------------------------------
    def commit_ready(self, source: Task) -> None:
        """Decide positions left to right while some finished task supplies p at the frontier."""
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
    def state(self) -> tuple[object, ...]:
        """Everything the rest of the run depends on, for the exact engine's merge points.

        Note: why a lean run merges more. The future of the run — which events happen when,
        which tokens are committed — depends on the committed tokens, the drafts, the task and
        draft in flight (context, timing, server), the queue, the rows supplied and the clock,
        but not on the trace, the counters or the tasks' ids (which only name tasks in labels).
        A recording run returns its trace and counters, so they must be part of the state; a
        lean run (``record=False``) returns neither, so paths with different histories but the
        same future merge. That is `DSIRun`'s own code: a subclass that overrides any method
        may read the history, so its lean runs keep it in the state (see `own_state`).
        """
        return self._state(self.own_state())

    def _state(self, own: Hashable, trace: Hashable = None) -> tuple[object, ...]:
        """`state` with ``own`` as its `own_state` (and ``trace`` for the trace, when given)."""
        if (not self.cfg.keep_time and not _overrides(type(self))
                and not getattr(self.rng, "keyed_choices", True)):
            return (*self._relative_state(), own)
        lean = (tuple(self.committed), tuple(self.drafts), self.window_start,
                self.drafting.key() if self.drafting else None,
                tuple(t.key()[1:] for t in self.tasks), tuple(t.key()[1:] for t in self.queue),
                self.frontier_waiting.key()[1:] if self.frontier_waiting else None,
                tuple(self.server_first), self.drafter_first, tuple(self.supplied.items()),
                self.now)
        if not self.cfg.record and not _overrides(type(self)):
            return (*lean, own)
        return (*lean, tuple(t.id for t in self.tasks), tuple(t.id for t in self.queue),
                self.frontier_waiting.id if self.frontier_waiting else None,
                tuple(self.trace) if trace is None else trace, tuple(self.stats.items()),
                self.next_id, own)

    def _relative_state(self) -> tuple[object, ...]:
        """The lean state with every time taken relative to ``now`` (``keep_time=False``): the
        rest of a run that returns no time depends on when its forwards in flight end relative
        to now, not on now. Only when the scheduler's choices do not read their keys (which hold
        ``now``): `dsi_ref.audit.exact`'s ``keyed_choices`` is false."""
        now = self.now

        def task(t: Task) -> tuple[object, ...]:
            return (t.first, t.last, t.context, t.frontier, _since(t.submitted, now), t.server,
                    None if t.start is None else _since(t.start, now),
                    None if t.end is None else _since(t.end, now))

        drafting = self.drafting
        waiting = self.frontier_waiting
        return (tuple(self.committed), tuple(self.drafts), self.window_start,
                None if drafting is None else (drafting.position, _since(drafting.start, now),
                                               _since(drafting.end, now), drafting.token),
                tuple([task(t) for t in self.tasks]), tuple([task(t) for t in self.queue]),
                None if waiting is None else task(waiting),
                tuple(self.server_first), self.drafter_first, tuple(self.supplied.items()))

    def own_state(self) -> Hashable:
        """The part of `state` that `DSIRun`'s own fields do not give: ``done`` and a
        `fingerprint` of every instance attribute not accounted for (whatever a subclass
        added), or a `NoMerge` (no merging at this point) when one of them is not plain data.

        Accounted for: the fields of `state`; the parts the run is built on (models, ``rng``,
        config, rule, prompt, ``n``, EOS) while they are the very objects they were before the
        run started (a rebound one is read as data; the rule's own attributes, if any, always
        are); and what `DSIRun`'s code keeps as a function of those fields (``draft_rows``, the
        servers' ``busy`` list, the draft's row, the tasks' class), which a subclass that
        overrides any method reads here too.
        """
        cls = type(self)
        skip = _ACCOUNTED
        derived: Hashable = ()
        if _overrides(cls):
            drafting = self.drafting
            derived = (tuple(self.draft_rows), tuple(t.key() if t else None for t in self.busy),
                       drafting.row if drafting else None,
                       tuple(type(t) for t in (*self.tasks, *self.queue)),
                       type(drafting), type(self.frontier_waiting))
        changed = self._fixed.changed(self)
        if changed:
            skip = skip - changed  # rebound: read as data (a model is not: no merging)
        rule_state, extra = own_parts(self, skip, lambda: self._known(changed))
        return (self.done, derived, rule_state, extra)

    def _known(self, changed: frozenset[str]) -> dict[int, str]:
        """The objects outside ``self``'s own data that a subclass attribute may refer to
        (the parts of the run that are still what they were, its own containers)."""
        known = self._fixed.known(changed)
        known.update({id(self): "self", id(self.committed): "committed",
                      id(self.drafts): "drafts", id(self.tasks): "tasks",
                      id(self.queue): "queue", id(self.supplied): "supplied"})
        if self.cfg.record or _overrides(type(self)):  # the history is in the state
            known.update({id(self.trace): "trace", id(self.stats): "stats"})
        return known

    def run(self) -> Run:
        """The event loop: deliver the earliest events (ties in an order the scheduler chooses)
        until the last position is committed."""
        hint = merge_hint(self.rng)
        if hint is not None and resumes(self.rng) and self._resumable():
            return run_resuming(self, hint)
        # what the run is built on, before it starts (a resuming run checks its parts when it
        # restores a snapshot, `same_parts`)
        if self._fixed.changed(self):
            self._fixed = FixedParts(self, _FIXED)
        if not self.done:
            self.start_drafting()
            self.submit(0, 0, frontier=True)
        first = True
        while not self.done:
            if hint:
                hint(self.state(), entry=first, committed=tuple(self.committed))
                first = False
            # canonical order: the drafter, then tasks in the order they started
            pending: list[tuple[Time, DraftForward | Task]] = (
                [(self.drafting.end, self.drafting)] if self.drafting else [])
            pending += [(t.end, t) for t in self.tasks if t.end is not None]
            self.now = min(end for end, _ in pending)
            due = [event for end, event in pending if end == self.now]
            while due and not self.done:
                event = due[0] if len(due) == 1 else self.rng.choose(due, key=("tie", self.now))
                due.remove(event)
                if isinstance(event, DraftForward):
                    if event is self.drafting:
                        self.finish_draft(event)
                elif event in self.tasks:
                    self.finish_task(event)
        return self.result()

    def result(self) -> Run:
        """The finished `Run` (no trace and no counters when ``record=False``)."""
        if not self.cfg.record:
            return Run(tuple(self.committed), self.now if self.cfg.keep_time else math.nan)
        return Run(tuple(self.committed), self.now, tuple(self.trace), dict(self.stats))

    # -- resuming (the exact engine's snapshots: `dsi_ref.decoders.dsi_resume`) ----------------
    def _snapshot(self) -> object:
        """Everything the run keeps, as immutable values (`dsi_resume.snapshot`)."""
        return snapshot(self)

    def _restore(self, saved: object) -> bool:
        """Back to a `_snapshot` of this invocation (`dsi_resume.restore`)."""
        return restore(self, saved)

    def _resumable(self) -> bool:
        """Whether `_snapshot` copies everything the rest of the run depends on: `DSIRun`'s own
        code (not a subclass) and a built-in rule. That is the fields of `state` with the trace,
        counters and ids, the servers' ``busy`` list and the drafts' rows that `DSIRun`'s code
        keeps in step with them, and where the run is (``_step``, ``_due``), besides the fixed
        parts."""
        return type(self) is DSIRun and stateless_rule(self.rule)

    def _parts(self) -> tuple[object, ...]:
        return (self.target, self.drafter, self.prompt, self.n, self.cfg, self.rule)

    def _state_resuming(self) -> tuple[object, ...]:
        """`state`, as it is for `DSIRun`'s own code on a built-in rule (`_resumable`: no method
        overridden, the parts never rebound, the rule without attributes): ``own_state`` is
        ``(done, (), (), ())`` unless the run was given attributes of its own."""
        if self.__dict__.keys() <= _ACCOUNTED and not vars(self.rule):
            # the trace as the id of its contents (`PrefixKey`): hashed once per event
            return self._state((self.done, (), (), ()), ("trace", self._trace_key.of(self.trace))
                               if self.cfg.record else None)
        return self.state()

def _since(time: Time, now: Time) -> object:
    """``time − now`` as a value for a merge state: for two `Fraction` s the difference in lowest
    terms as ``(numerator, denominator)`` (equal pairs for equal differences, without building a
    `Fraction`, which costs most of a relative state), else the difference itself."""
    if type(time) is Fraction and type(now) is Fraction:
        a, b = time.as_integer_ratio()
        c, d = now.as_integer_ratio()
        num, den = (a - c, b) if b == d else (a * d - c * b, b * d)
        g = math.gcd(num, den)
        return num // g, den // g
    return time - now


#: The parts a `DSIRun` is built on (`DSIRun.own_state`).
_FIXED = ("target", "drafter", "prompt", "n", "rng", "cfg", "eos", "rule")
#: What `DSIRun.state` accounts for besides the fixed parts (``draft_rows`` and ``busy`` are
#: functions of the rest in `DSIRun`'s own code; `DSIRun.own_state` reads them for a subclass).
_ACCOUNTED = frozenset(_FIXED) | {
    "now", "committed", "drafts", "draft_rows", "window_start", "drafting", "drafter_first",
    "tasks", "queue", "frontier_waiting", "busy", "server_first", "supplied", "trace",
    "next_id", "done", "stats", "_fixed", "_laws", "_due", "_step", "_due_started", "_trace_key",
    "_draws"}
#: Per class, whether it overrides a method of `DSIRun`.
_OVERRIDES: dict[type, bool] = {}


def _overrides(cls: type) -> bool:
    """Whether ``cls`` replaces a method of `DSIRun` (cached)."""
    known = _OVERRIDES.get(cls)
    if known is None:
        known = _OVERRIDES[cls] = overridden(cls, DSIRun)
    return known


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
