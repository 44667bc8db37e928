"""The engine of the event model: DSI of docs/dsi-semantics.md at the acceptance level, rule by
rule.

`EventEngine` replays the rules of the token-level `dsi_ref.decoders.dsi` (one drafter drafting
continuously, a verification task per window of ``k`` drafts supplying ``p`` at the window and the
position after it, a frontier task, ``SP`` servers with server 0 reserved for the frontier task
when ``SP >= 2``, a queue, preemption, the canonical tie order: the drafter first, then tasks in
the order they started) with tokens abstracted away: the verification of a present draft is a
decision of ``decide`` (an independent Bernoulli(``a``) acceptance in a run); a bonus (no draft
at the frontier) draws nothing. `_SharedEngine` is the same rules on one shared device
(`Contention`): only the clock changes; `_BatchedEngine` the same rules with the servers as the
rows of one batched forward (`Contention.batch`).

**Decisions** (``SimParams.decisions``). ``"position"``: the committer decides each draft as
soon as ``p`` is supplied there (token-level rules). ``"window"``: block verification with fixed
windows (docs/dsi-semantics.md, "Block decisions"): the window at the frontier ``F`` — its
``m <= k`` drafts — is decided as one block once it is complete (its task was submitted) and
``p`` is supplied at all of ``F … F + m − 1``; it accepts ``min(L, m)`` drafts, then a
correction when ``L < m`` (a restart, as a rejection) or, when ``L >= m``, the next window
starts at the frontier (no bonus). A frontier task that supplies ``p`` at a drafted position of
an incomplete window decides nothing; with no draft at ``F`` it commits a bonus.

Times are kept exact: rational costs are scaled to integers (`EventCosts`). The spines
(`dsi_ref.sim.event_spines`) and the expectation and simulation (`dsi_ref.sim.event`) are built
on this engine.
"""

from __future__ import annotations

import copy
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from .params import Contention, Num, SimParams

#: Public: the commit record and its kinds. `EventEngine`, `EventCosts`, `EventTask` and
#: `make_engine` are shared with `dsi_ref.sim.event` and `dsi_ref.sim.event_spines` only (the
#: simulator's internals, not an API).
__all__ = ["Commit", "Kind"]


Kind = Literal["accepted", "rejected", "bonus"]


@dataclass(frozen=True)
class Commit:
    """A committed position: when, how, and how many verification servers had been used."""

    time: Num
    position: int
    kind: Kind
    used: int


class EventTask:
    __slots__ = ("end", "first", "frontier", "last", "server", "slow", "work")

    def __init__(self, first: int, last: int, frontier: bool) -> None:
        self.first, self.last, self.frontier = first, last, frontier
        self.server = -1
        self.end: int | float | None = None
        self.slow: float | None = None   # the slowdown ``end`` was computed with (shared device)
        self.work: int | float = 0       # solo cost (batched servers: known before it starts)


class _Draft:
    __slots__ = ("end", "position", "slow")

    def __init__(self, position: int, end: int | float) -> None:
        self.position, self.end = position, end
        self.slow: float | None = None


@dataclass(frozen=True)
class EventCosts:
    """Costs on the engine's clock (integers when exact: ``scale`` ticks per target forward)."""

    c: int | float
    target: int | float
    target_first: int | float | None     # None: a server's first forward costs the plain cost
    drafter_first: int | float
    verify: int | float
    scale: int

    @classmethod
    def of(cls, p: SimParams) -> EventCosts:
        t1 = p.target_first if p.target_first is not None else 1
        d1 = p.drafter_first if p.drafter_first is not None else p.c
        costs: list[int | float]
        o = p.overhead          # a remote server's per-task overhead, on every target task
        if p.exact:
            values = [Fraction(p.c), 1 + Fraction(o), Fraction(t1) + Fraction(o), Fraction(d1),
                      Fraction(p.verify) + Fraction(o)]
            scale = math.lcm(*(v.denominator for v in values))
            costs = [int(x * scale) for x in values]
        else:
            costs, scale = [float(p.c), 1.0 + float(o), float(t1) + float(o), float(d1),
                            float(p.verify) + float(o)], 1
        c, t, tf, df, v = costs
        return cls(c, t, tf if p.target_first is not None else None, df, v, scale)

    def time(self, ticks: int | float) -> Num:
        return Fraction(int(ticks), self.scale) if self.scale != 1 or isinstance(ticks, int) \
            else float(ticks)


class EventEngine:
    """One run (or one spine) of acceptance-level DSI; docs/dsi-semantics.md, rule by rule."""

    def __init__(self, n: int, lookahead: int, sp_degree: int, costs: EventCosts, lifo: bool,
                 fresh: bool, used: int, decide: Callable[[int], bool],
                 stop_on_restart: bool) -> None:
        self.n, self.lookahead, self.sp_degree = n, lookahead, sp_degree
        self.costs, self.lifo = costs, lifo
        self.decide, self.stop_on_restart = decide, stop_on_restart
        self.now: int | float = 0
        self.frontier = 0
        self.drafts = 0                      # drafts present at frontier, frontier + 1, ...
        self.window_start = 0
        self.origin = 0                      # the frontier at the last restart: windows start
        #                                      at origin, origin + k, ... (acceptance laws)
        self.drafting: _Draft | None = None
        self.drafter_first = fresh
        self.server_first = [fresh or s > used for s in range(sp_degree)]
        self.used = 0 if fresh else used
        self.tasks: list[EventTask] = []         # running, in start order
        self.queue: deque[EventTask] = deque()   # waiting verification tasks, in submit order
        self.frontier_waiting: EventTask | None = None
        self.busy: list[EventTask | None] = [None] * sp_degree
        self.supplied: set[int] = set()
        self.done = n == 0
        self.stopped = False
        self.commits: list[tuple[int | float, int, Kind, int]] = []  # (ticks, position, kind, used)

    #: ``decisions="window"``: the committer decides a window at once (module docstring), with
    #: ``decide_window(first, m)`` = the drafts accepted of the ``m`` at ``first …``.
    window_decisions = False

    @staticmethod
    def decide_window(first: int, m: int) -> int:
        """Every draft of the window accepted (a spine); runs replace it (`event_run`)."""
        return m

    # -- drafter
    def start_drafting(self) -> None:
        position = self.frontier + self.drafts
        if self.done or position >= self.n:
            self.drafting = None
            return
        cost = self.costs.drafter_first if self.drafter_first else self.costs.c
        self.drafter_first = False
        self.drafting = _Draft(position, self.now + cost)

    def finish_draft(self, d: _Draft) -> None:
        self.drafts += 1
        self.drafting = None
        if d.position + 1 - self.window_start >= self.lookahead or d.position == self.n - 1:
            self.submit(self.window_start, min(d.position + 1, self.n - 1), frontier=False)
            self.window_start = d.position + 1
        self.start_drafting()

    # -- servers
    def submit(self, first: int, last: int, frontier: bool) -> None:
        task = EventTask(first, last, frontier)
        if frontier and self.sp_degree >= 2:
            self.run_on(task, 0)
            return
        if frontier:
            self.frontier_waiting = task
        else:
            self.queue.append(task)
        self.dispatch()

    def dispatch(self) -> None:
        reserved = 1 if self.sp_degree >= 2 else 0
        while True:
            free = [s for s in range(reserved, self.sp_degree) if self.busy[s] is None]
            if not free:
                return
            if self.frontier_waiting is not None:
                task, self.frontier_waiting = self.frontier_waiting, None
            elif self.queue:
                task = self.queue.pop() if self.lifo else self.queue.popleft()
            else:
                return
            self.run_on(task, free[0])

    def run_on(self, queued: EventTask, server: int) -> None:
        task = EventTask(queued.first, queued.last, queued.frontier)  # queued ones stay immutable
        first = self.server_first[server]
        self.server_first[server] = False
        task.server = server
        cost = self.costs.target if task.frontier else self.costs.verify
        if first and self.costs.target_first is not None:
            cost = self.costs.target_first      # prefill: the TTFT, whatever the task
        self.place(task, cost)
        self.busy[server] = task
        self.tasks.append(task)
        self.used = max(self.used, server)

    def place(self, task: EventTask, cost: int | float) -> None:
        """Start ``task`` (solo cost ``cost``) on its server now."""
        task.end = self.now + cost

    def preempt(self, task: EventTask) -> None:
        if task.end is not None:
            self.busy[task.server] = None
            self.tasks.remove(task)
        elif task is self.frontier_waiting:
            self.frontier_waiting = None
        else:
            self.queue.remove(task)

    def finish_task(self, task: EventTask) -> None:
        self.busy[task.server] = None
        self.tasks.remove(task)
        self.supplied.update(range(max(task.first, self.frontier), task.last + 1))
        self.commit_ready()
        self.dispatch()

    # -- committer
    def commit_window(self) -> bool | None:
        """``decisions="window"``: decide the window at the frontier as one block, if it is
        complete and supplied (None otherwise: nothing decided). Returns whether every draft
        was accepted (False: a correction, committed here)."""
        position = self.frontier
        m = min(self.lookahead, self.window_start - position, self.drafts)
        if m < 1 or any(position + j not in self.supplied for j in range(1, m)):
            return None
        self.supplied.difference_update(range(position, position + m))
        accepted = self.decide_window(position, m)
        for i in range(position, position + accepted):
            self.commits.append((self.now, i, "accepted", self.used))
        self.frontier += accepted
        self.drafts -= accepted
        if accepted == m:
            self.done = self.frontier >= self.n
            return True
        self.commits.append((self.now, self.frontier, "rejected", self.used))
        self.frontier += 1
        self.done = self.frontier >= self.n
        return False

    def commit_ready(self) -> None:
        moved = False
        while not self.done and self.frontier in self.supplied:
            if self.drafts and self.window_decisions:
                whole = self.commit_window()
                if whole is None:
                    break          # the window at the frontier is incomplete or not supplied
                moved = True
                if whole:
                    continue
                if self.stop_on_restart:
                    self.stopped = True
                    return
                self.invalidate()
                continue
            position = self.frontier
            self.supplied.discard(position)
            if self.drafts:
                accepted = self.decide(position)
                kind: Kind = "accepted" if accepted else "rejected"
            else:
                accepted, kind = False, "bonus"
            self.commits.append((self.now, position, kind, self.used))
            self.frontier += 1
            moved = True
            self.done = self.frontier >= self.n
            if accepted:
                self.drafts -= 1
                continue
            if self.stop_on_restart:
                self.stopped = True   # a restart: the state is (tokens left, servers used)
                return
            self.invalidate()
        if not moved:
            return
        for task in [t for t in self.tasks if not t.frontier and t.last < self.frontier]:
            self.preempt(task)                                  # stale
        while self.queue and self.queue[0].last < self.frontier:
            self.queue.popleft()      # stale; queued in window order, so a prefix
        for task in [t for t in self.tasks if t.frontier]:
            self.preempt(task)                                  # the frontier moved
        if self.frontier_waiting is not None:
            self.preempt(self.frontier_waiting)
        if self.done:
            self.drafting = None
            for task in list(self.tasks):
                self.preempt(task)
            self.queue.clear()
            return
        self.submit(self.frontier, self.frontier, frontier=True)

    def invalidate(self) -> None:
        self.drafts = 0
        self.supplied = {p for p in self.supplied if p < self.frontier}
        self.drafting = None
        for task in [t for t in self.tasks if not t.frontier]:
            self.preempt(task)
        self.queue.clear()
        self.window_start = self.origin = self.frontier
        self.start_drafting()

    # -- event loop
    def step(self, hold_draft: int | None = None) -> bool:
        """Process the next instant; with ``hold_draft``, stop before the instant at which the
        drafter completes that position (returns False then)."""
        pending: list[_Draft | EventTask] = [self.drafting] if self.drafting else []
        pending += self.tasks
        self.now = min(e.end for e in pending if e.end is not None)
        if self.drafting is not None and self.drafting.position == hold_draft \
                and self.drafting.end == self.now:
            return False
        for event in [e for e in pending if e.end == self.now]:
            if self.done or self.stopped:
                break
            if isinstance(event, _Draft):
                if event is self.drafting:
                    self.finish_draft(event)
            elif any(event is t for t in self.tasks):
                self.finish_task(event)
        return True

    def start(self) -> None:
        if not self.done:
            self.start_drafting()
            self.submit(0, 0, frontier=True)

    def finish(self) -> list[tuple[int | float, int, Kind, int]]:
        while not (self.done or self.stopped):
            self.step()
        return self.commits

    def run(self) -> list[Commit]:
        self.start()
        return [Commit(self.costs.time(t), pos, kind, used)
                for t, pos, kind, used in self.finish()]

    def clone(self, n: int) -> EventEngine:
        """A copy of this state with budget ``n`` (task objects are never mutated: shared)."""
        return self.copy_as(type(self), n, list(self.commits))

    def copy_as(self, cls: type[EventEngine], n: int,
                commits: list[tuple[int | float, int, Kind, int]]) -> EventEngine:
        """This state as a ``cls`` with budget ``n`` and ``commits``: the mutable containers are
        copied, everything else (immutable, or never mutated) is shared."""
        new = object.__new__(cls)
        new.__dict__.update(self.__dict__)
        new.n = n
        new.tasks = list(self.tasks)
        new.queue = deque(self.queue)
        new.busy = list(self.busy)
        new.server_first = list(self.server_first)
        new.supplied = set(self.supplied)
        new.commits = commits
        return new


class _SharedEngine(EventEngine):
    """`EventEngine` on one shared device (`Contention`): processor sharing between forwards.

    The rules are `EventEngine`'s; only the clock changes. A forward's ``end`` is its projected
    finish at the current speeds: after every instant at which forwards start, end or are
    preempted, each running forward's remaining solo work ``(end − now) / slow`` is rescaled by
    the new slowdown. A forward started at this instant has ``end − now`` = its solo cost.
    """

    contention: Contention

    def step(self, hold_draft: int | None = None) -> bool:
        going = super().step(hold_draft)
        if going:
            self.reschedule()
        return going

    def start(self) -> None:
        super().start()
        self.reschedule()

    def reschedule(self) -> None:
        running = len(self.tasks)
        items: list[EventTask | _Draft] = list(self.tasks)
        slowdowns = [self.contention.target_slowdown(running)] * running
        if self.drafting is not None:
            items.append(self.drafting)
            slowdowns.append(self.contention.drafter_slowdown(running))
        for item, slow in zip(items, slowdowns, strict=True):
            assert item.end is not None
            work = (item.end - self.now) / (item.slow or 1.0)    # solo work still to do
            item.end, item.slow = self.now + work * slow, slow

    def clone(self, n: int) -> EventEngine:
        """`EventEngine.clone`, with copies of the running forwards (their ends are rescaled)."""
        new = super().clone(n)
        copies = {id(t): copy.copy(t) for t in self.tasks}
        new.tasks = [copies[id(t)] for t in self.tasks]
        new.busy = [None if t is None else copies[id(t)] for t in self.busy]
        new.drafting = copy.copy(self.drafting)
        return new


class _BatchedEngine(_SharedEngine):
    """`EventEngine` with the target servers as the rows of one batched forward (`Contention`
    with ``batch``): the rules are `EventEngine`'s, only the device changes. A task started on a
    server waits (``end`` None, in ``waiting``) until the device is free; then one forward takes
    every waiting task, costs ``batch_cost(b)`` times the longest of their solo costs, and ends
    them all at once. The drafter runs beside at ``drafter_slowdown(1)`` while a forward runs
    (processor sharing, as in `_SharedEngine`)."""

    waiting: list[EventTask]

    def place(self, task: EventTask, cost: int | float) -> None:
        task.work = cost
        self.waiting.append(task)        # started by `reschedule` when the device is free

    def preempt(self, task: EventTask) -> None:
        if task.end is None and any(task is t for t in self.waiting):
            self.waiting.remove(task)    # on a server, waiting for the device: never runs
            self.busy[task.server] = None
            self.tasks.remove(task)
            return
        super().preempt(task)

    def reschedule(self) -> None:
        running = any(t.end is not None for t in self.tasks)
        if not running and self.waiting:             # the device is free: one forward
            batch, self.waiting = self.waiting, []
            cost = self.contention.batch_cost(len(batch)) * max(t.work for t in batch)
            for task in batch:
                task.end = self.now + cost
            running = True
        d = self.drafting
        if d is not None:
            slow = self.contention.drafter_slowdown(1 if running else 0)
            work = (d.end - self.now) / (d.slow or 1.0)    # solo work still to do
            d.end, d.slow = self.now + work * slow, slow

    def clone(self, n: int) -> EventEngine:
        """`_SharedEngine.clone`, with the waiting tasks mapped to their copies."""
        new = super().clone(n)
        assert isinstance(new, _BatchedEngine)
        copies = {id(old): t for old, t in zip(self.tasks, new.tasks, strict=True)}
        new.waiting = [copies[id(t)] for t in self.waiting]
        return new


def make_engine(p: SimParams, n: int, fresh: bool, used: int, decide: Callable[[int], bool],
            stop: bool) -> EventEngine:
    assert p.sp_degree is not None
    engine: EventEngine
    if p.contention is None:
        engine = EventEngine(n, p.lookahead, p.sp_degree, EventCosts.of(p), p.queue == "lifo",
                             fresh, used, decide, stop)
    else:
        kind = _SharedEngine if p.contention.batch is None else _BatchedEngine
        shared = kind(n, p.lookahead, p.sp_degree, EventCosts.of(p), p.queue == "lifo", fresh, used,
                      decide, stop)
        shared.contention = p.contention
        if isinstance(shared, _BatchedEngine):
            shared.waiting = []
        engine = shared
    engine.window_decisions = p.decisions == "window"
    return engine
