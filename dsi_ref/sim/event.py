"""The event model: DSI of docs/dsi-semantics.md at the acceptance level, exactly.

The engine below replays the rules of the token-level `dsi_ref.decoders.dsi` (one drafter drafting
continuously, a verification task per window of ``k`` drafts supplying ``p`` at the window and the
position after it, a frontier task, ``SP`` servers with server 0 reserved for the frontier task
when ``SP >= 2``, a queue, preemption, the canonical tie order: the drafter first, then tasks in
the order they started) with tokens abstracted away: the verification of a present draft is an
independent Bernoulli(``a``) acceptance; a bonus (no draft at the frontier) draws nothing.

**Decisions** (``SimParams.decisions``). ``"position"``: the committer decides each draft as
soon as ``p`` is supplied there (token-level rules). ``"window"``: block verification with fixed
windows (docs/dsi-semantics.md, "Block decisions"): the window at the frontier ``F`` — its
``m <= k`` drafts — is decided as one block once it is complete (its task was submitted) and
``p`` is supplied at all of ``F … F + m − 1``; it accepts ``min(L, m)`` drafts, then a
correction when ``L < m`` (a restart, as a rejection) or, when ``L >= m``, the next window
starts at the frontier (no bonus). A frontier task that supplies ``p`` at a drafted position of
an incomplete window decides nothing; with no draft at ``F`` it commits a bonus.

Exact expectation (Note: "renewal at every restart" in docs/reproducing-the-paper.md). A
rejection or a bonus preempts every task, restarts the frontier task and the drafter: the state
after it is only ``(R, u)`` = (tokens left, verification servers already used — it matters only
for a server's first forward, TTFT). Between restarts the run is deterministic until the first
rejection, so with the *spine* = the run from ``(R, u)`` in which every draft is accepted,
committing position ``i`` at time ``τ_i``::

    E(R, u) = Σ_i a^i (1 − a) [τ_i + E(R − i − 1, u_i)]   (draft at i rejected)
            + a^b [τ_b + E(R − b − 1, u_b)]                (first bonus at b, if any)
            + a^R τ_{R−1}                                   (everything accepted)

Times are kept exact: rational costs are scaled to integers.
"""

from __future__ import annotations

import copy
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from .params import Contention, Num, SimParams

__all__ = [
    "Commit",
    "Spine",
    "dsi_event_exact",
    "dsi_event_exact_reference",
    "dsi_event_grid",
    "dsi_event_grid_reference",
    "event_run",
    "simulate_event",
    "spine",
]

Kind = Literal["accepted", "rejected", "bonus"]


@dataclass(frozen=True)
class Commit:
    """A committed position: when, how, and how many verification servers had been used."""

    time: Num
    position: int
    kind: Kind
    used: int


class _Task:
    __slots__ = ("end", "first", "frontier", "last", "server", "slow")

    def __init__(self, first: int, last: int, frontier: bool) -> None:
        self.first, self.last, self.frontier = first, last, frontier
        self.server = -1
        self.end: int | float | None = None
        self.slow: float | None = None   # the slowdown ``end`` was computed with (shared device)


class _Draft:
    __slots__ = ("end", "position", "slow")

    def __init__(self, position: int, end: int | float) -> None:
        self.position, self.end = position, end
        self.slow: float | None = None


@dataclass(frozen=True)
class _Costs:
    """Costs on the engine's clock (integers when exact: ``scale`` ticks per target forward)."""

    c: int | float
    target: int | float
    target_first: int | float | None     # None: a server's first forward costs the plain cost
    drafter_first: int | float
    verify: int | float
    scale: int

    @classmethod
    def of(cls, p: SimParams) -> _Costs:
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


class _Engine:
    """One run (or one spine) of acceptance-level DSI; docs/dsi-semantics.md, rule by rule."""

    def __init__(self, n: int, lookahead: int, sp_degree: int, costs: _Costs, lifo: bool,
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
        self.tasks: list[_Task] = []         # running, in start order
        self.queue: deque[_Task] = deque()   # waiting verification tasks, in submit order
        self.frontier_waiting: _Task | None = None
        self.busy: list[_Task | None] = [None] * sp_degree
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
        task = _Task(first, last, frontier)
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

    def run_on(self, queued: _Task, server: int) -> None:
        task = _Task(queued.first, queued.last, queued.frontier)  # queued ones stay immutable
        first = self.server_first[server]
        self.server_first[server] = False
        task.server = server
        cost = self.costs.target if task.frontier else self.costs.verify
        if first and self.costs.target_first is not None:
            cost = self.costs.target_first      # prefill: the TTFT, whatever the task
        task.end = self.now + cost
        self.busy[server] = task
        self.tasks.append(task)
        self.used = max(self.used, server)

    def preempt(self, task: _Task) -> None:
        if task.end is not None:
            self.busy[task.server] = None
            self.tasks.remove(task)
        elif task is self.frontier_waiting:
            self.frontier_waiting = None
        else:
            self.queue.remove(task)

    def finish_task(self, task: _Task) -> None:
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
        pending: list[_Draft | _Task] = [self.drafting] if self.drafting else []
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

    def clone(self, n: int) -> _Engine:
        """A copy of this state with budget ``n`` (task objects are never mutated: shared)."""
        return self.copy_as(type(self), n, list(self.commits))

    def copy_as(self, cls: type[_Engine], n: int,
                commits: list[tuple[int | float, int, Kind, int]]) -> _Engine:
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


class _SharedEngine(_Engine):
    """`_Engine` on one shared device (`Contention`): processor sharing between forwards.

    The rules are `_Engine`'s; only the clock changes. A forward's ``end`` is its projected
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
        items: list[_Task | _Draft] = list(self.tasks)
        slowdowns = [self.contention.target_slowdown(running)] * running
        if self.drafting is not None:
            items.append(self.drafting)
            slowdowns.append(self.contention.drafter_slowdown(running))
        for item, slow in zip(items, slowdowns, strict=True):
            assert item.end is not None
            work = (item.end - self.now) / (item.slow or 1.0)    # solo work still to do
            item.end, item.slow = self.now + work * slow, slow

    def clone(self, n: int) -> _Engine:
        """`_Engine.clone`, with copies of the running forwards (their ends are rescaled)."""
        new = super().clone(n)
        copies = {id(t): copy.copy(t) for t in self.tasks}
        new.tasks = [copies[id(t)] for t in self.tasks]
        new.busy = [None if t is None else copies[id(t)] for t in self.busy]
        new.drafting = copy.copy(self.drafting)
        return new


def _engine(p: SimParams, n: int, fresh: bool, used: int, decide: Callable[[int], bool],
            stop: bool) -> _Engine:
    assert p.sp_degree is not None
    engine: _Engine
    if p.contention is None:
        engine = _Engine(n, p.lookahead, p.sp_degree, _Costs.of(p), p.queue == "lifo", fresh,
                         used, decide, stop)
    else:
        shared = _SharedEngine(n, p.lookahead, p.sp_degree, _Costs.of(p), p.queue == "lifo",
                               fresh, used, decide, stop)
        shared.contention = p.contention
        engine = shared
    engine.window_decisions = p.decisions == "window"
    return engine


@dataclass(frozen=True, eq=False)
class Spine:
    """The run from a restart in which every draft is accepted, up to the first bonus.

    Position ``i`` (``0 .. len − 1``, counted from the restart) is committed at
    ``ticks[i] / scale`` with ``used[i]`` verification servers used so far.
    """

    ticks: NDArray[np.float64] | NDArray[np.int64]
    used: NDArray[np.int64]
    complete: bool          # reaches the budget (no bonus)
    scale: int
    exact: bool

    @classmethod
    def of(cls, raw: list[tuple[int | float, int, Kind, int]], costs: _Costs,
           exact: bool) -> Spine:
        return cls(np.array([r[0] for r in raw]), np.array([r[3] for r in raw], dtype=np.int64),
                   not raw or raw[-1][2] != "bonus", costs.scale, exact)

    def __len__(self) -> int:
        return len(self.ticks)

    @property
    def times(self) -> NDArray[np.float64]:
        """Commit times as floats."""
        times: NDArray[np.float64] = self.ticks / self.scale
        return times

    @property
    def commits(self) -> list[Commit]:
        """The commits, exact when the configuration is."""
        last = len(self) - 1
        return [Commit(Fraction(int(t), self.scale) if self.exact else float(t) / self.scale,
                       i, "bonus" if i == last and not self.complete else "accepted", int(u))
                for i, (t, u) in enumerate(zip(self.ticks, self.used, strict=True))]


def spine(p: SimParams, tokens_left: int, *, fresh: bool = False, used: int = 0) -> Spine:
    """The spine from a restart with ``tokens_left`` tokens to go (``fresh``: the run's start).

    >>> path = spine(SimParams("dsi", c=Fraction(1, 2), a=Fraction(1, 2), lookahead=1,
    ...                        n_tokens=2, model="event", sp_degree=2), 2, fresh=True)
    >>> [(c.time, c.kind) for c in path.commits]
    [(Fraction(1, 1), 'accepted'), (Fraction(3, 2), 'accepted')]
    """
    engine = _engine(p, tokens_left, fresh, used, lambda _: True, True)
    engine.start()
    return Spine.of(engine.finish(), engine.costs, p.exact)


def spines(p: SimParams, max_left: int, *, used: int = 0) -> list[Spine]:
    """The spines from a restart (not the run's start) for every budget ``1 .. max_left``.

    One run with budget ``max_left + 1`` is advanced to the instant at which the drafter would
    complete position ``R − 1``; up to that instant nothing depends on the budget (the budget is
    read only when position ``R − 1`` is drafted), so a copy of that state continued with budget
    ``R`` is the spine for ``R``. Cost: one run plus the tails after each copy.
    """
    base = _engine(p, max_left + 1, False, used, lambda _: True, True)
    base.start()
    out: list[Spine] = []
    for left in range(1, max_left + 1):
        while not (base.stopped or base.done) and base.step(hold_draft=left - 1):
            pass
        # after a bonus, the copy of the stopped base returns base's commits
        out.append(Spine.of(base.clone(left).finish(), base.costs, p.exact))
    return out


def _unit_mode(p: SimParams) -> bool:
    """No prefill: the restart state does not depend on the servers used (or on freshness)."""
    return p.target_first is None and p.drafter_first is None


def _fast_eligible(p: SimParams) -> bool:
    """The configurations whose spines `_spine_family` builds from one run (below): no prefill,
    independent servers, FIFO, ``SP >= 2`` (server 0 reserved for the frontier task)."""
    return (_unit_mode(p) and p.contention is None and p.queue != "lifo"
            and p.sp_degree is not None and p.sp_degree >= 2)


class _RecordingEngine(_Engine):
    """`_Engine` that records, per window (by its first position), when its verification task
    was submitted and when it started."""

    submitted: dict[int, int | float]
    started: dict[int, int | float]

    def submit(self, first: int, last: int, frontier: bool) -> None:
        if not frontier:
            self.submitted.setdefault(first, self.now)
        super().submit(first, last, frontier)

    def run_on(self, queued: _Task, server: int) -> None:
        if not queued.frontier:
            self.started.setdefault(queued.first, self.now)
        super().run_on(queued, server)


def _lite_clone(engine: _Engine, n: int) -> _Engine:
    """A plain `_Engine` copy of ``engine``'s state with budget ``n`` and no commits yet (its
    commits are the ones after the copy)."""
    return engine.copy_as(_Engine, n, [])


@dataclass(frozen=True, eq=False)
class _SpineFamily:
    """The spines from a restart for every budget ``R = 1 … max_left``, as rows that share a
    prefix with one *base* spine: spine ``R`` commits position ``i`` at
    ``base[i]`` for ``i < prefix[R − 1]`` and at ``tails[R − 1][i − prefix[R − 1]]`` after.

    Unit mode only (no prefill): the servers used are not tracked.
    """

    base: NDArray[Any]
    prefix: list[int]
    tails: list[NDArray[Any]]
    complete: list[bool]
    scale: int
    exact: bool

    def ticks(self, left: int) -> NDArray[Any]:
        tail = self.tails[left - 1]
        head = self.base[: self.prefix[left - 1]]
        return np.concatenate([head, tail]) if tail.size else head

    def spine(self, left: int) -> Spine:
        ticks = self.ticks(left)
        return Spine(ticks, np.zeros(len(ticks), dtype=np.int64), self.complete[left - 1],
                     self.scale, self.exact)


def _spine_family(p: SimParams, max_left: int) -> _SpineFamily:
    """The spines of `spines` (equal to them, tick for tick: tests/test_sim_acceptance_law.py),
    from one run instead of one run per budget, for `_fast_eligible` configurations.

    As in `spines`, one run with budget ``max_left + 1`` (the *base*) is held at the instant
    the drafter completes position ``R − 1``; budget ``R`` changes the run only from there: its
    last window ``W = [w, R − 1]`` is submitted at once (shortened) and the drafter stops. The
    spine for ``R`` is the base's first ``R`` commits when

    * ``R − w = k``: the base submits its window at the same instant, so ``W`` starts when
      the base's window does; or
    * the base's window at ``w`` waited in the queue (started after it was submitted): with
      ``SP >= 2`` only verification tasks use servers ``1 … SP − 1`` and the queue is FIFO, so
      no server was free for ``W`` before, and ``W`` starts when the base's window does.

    Either way ``W`` and the base's window run on the same server over the same interval (a
    verification costs ``v`` whatever its length), every earlier task and the frontier task are
    the same, and the tasks the base submits later queue behind ``W``. With window decisions
    (``decisions="window"``) the queued case also needs ``R − w >= 2``: a one-draft ``W`` is
    decided by the frontier task's row alone, which the base's incomplete window never is (with
    two drafts or more, ``W`` waits for its own task as the base's window does). Any other
    budget is run
    from a copy of the held state, as `spines` does; its commits are kept only where they
    differ from the base's. A base that stops first (a bonus) gives its commits to every
    larger budget, as in `spines`.
    """
    assert p.sp_degree is not None and _fast_eligible(p)
    costs = _Costs.of(p)
    k = p.lookahead
    base = _RecordingEngine(max_left + 1, k, p.sp_degree, costs, False, False, 0,
                            lambda _: True, True)
    base.submitted, base.started = {}, {}
    base.window_decisions = windowed = p.decisions == "window"
    base.start()
    held: dict[int, tuple[_Engine, int, int, bool]] = {}   # R -> (copy, commits, w, boundary)
    whole_from = max_left + 1         # budgets from here on get the stopped base's commits
    for left in range(1, max_left + 1):
        while not (base.stopped or base.done) and base.step(hold_draft=left - 1):
            pass
        if base.stopped or base.done:
            whole_from = left
            break
        held[left] = (_lite_clone(base, left), len(base.commits), base.window_start,
                      left - base.window_start >= k)
    while not (base.stopped or base.done):
        base.step()
    raw = base.commits
    dtype = np.int64 if isinstance(raw[0][0] if raw else 0, int) else np.float64
    ticks = np.array([r[0] for r in raw], dtype=dtype)
    first_bonus = next((i for i, r in enumerate(raw) if r[2] == "bonus"), len(raw))
    empty = ticks[:0]
    prefix: list[int] = []
    tails: list[NDArray[Any]] = []
    complete: list[bool] = []
    for left in range(1, max_left + 1):
        if left >= whole_from:
            prefix.append(len(raw))
            tails.append(empty)
            complete.append(not raw or raw[-1][2] != "bonus")
            continue
        copy_, offset, w, boundary = held[left]
        queued = w in base.started and base.started[w] > base.submitted[w] \
            and not (windowed and left - w < 2)
        if (boundary or queued) and first_bonus >= left and len(raw) >= left:
            prefix.append(left)
            tails.append(empty)
            complete.append(True)
            continue
        own = copy_.finish()
        own_ticks = np.array([r[0] for r in own], dtype=dtype)
        same = offset
        while (same - offset < len(own) and same < len(raw)
               and own_ticks[same - offset] == ticks[same]):
            same += 1
        prefix.append(same)
        tails.append(own_ticks[same - offset:])
        last_kind = own[-1][2] if own else (raw[offset - 1][2] if offset else "accepted")
        complete.append(last_kind != "bonus")
    return _SpineFamily(ticks, prefix, tails, complete, costs.scale, p.exact)


class _SpineTable:
    """Spines of one configuration by restart state, computed a family at a time
    (``reference``: always by `spines`, never by `_spine_family`)."""

    def __init__(self, p: SimParams, *, reference: bool = False) -> None:
        self.p, self.unit = p, _unit_mode(p)
        self.families: dict[int, list[Spine]] = {}
        self.start: Spine | None = None
        self.fast = None if reference or not _fast_eligible(p) else \
            _spine_family(p, p.n_tokens)
        self.built: dict[int, Spine] = {}

    def get(self, left: int, used: int, fresh: bool) -> Spine:
        if self.fast is not None:
            if left not in self.built:
                self.built[left] = self.fast.spine(left)
            return self.built[left]
        if fresh and not self.unit:
            assert left == self.p.n_tokens
            if self.start is None:
                self.start = spine(self.p, left, fresh=True)
            return self.start
        used = 0 if self.unit else used
        if used not in self.families:
            self.families[used] = spines(self.p, self.p.n_tokens, used=used)
        return self.families[used][left - 1]


# -- the law of the first rejection ---------------------------------------------------------------

@dataclass(frozen=True)
class _Windows:
    """The survival function ``S(i) = q^⌊i/K⌋ T(i mod K)`` of the drafts accepted after a
    restart (`dsi_ref.sim.acceptance`), as numbers or as arrays over a grid of rates: period
    ``K``, ``q = P(L = K)``, ``ell[j] = P(L = j)`` and ``at_least[j] = P(L >= j)`` for
    ``j < K``. The rate ``a`` is ``K = 1``, ``q = a``, ``ell = (1 − a,)``."""

    period: int
    q: Any
    ell: tuple[Any, ...]
    at_least: tuple[Any, ...]

    @classmethod
    def of(cls, p: SimParams) -> _Windows:
        exact = p.exact
        if p.acceptance is None:
            a: Num = Fraction(p.rate) if exact else float(p.rate)
            return cls(1, a, (1 - a,), (a ** 0,))
        law = p.acceptance
        def conv(x: Num) -> Num:
            return Fraction(x) if exact else float(x)
        return cls(law.k, conv(law.full), tuple(conv(x) for x in law.probabilities[:-1]),
                   tuple(conv(law.at_least(j)) for j in range(law.k)))

    @classmethod
    def rates(cls, a_values: NDArray[np.float64]) -> _Windows:
        a = np.asarray(a_values, float)
        return cls(1, a, (1 - a,), (np.ones_like(a),))

    def weight(self, i: int) -> Any:
        """``P(G = i)``: the first rejection is draft ``i``."""
        return self.q ** (i // self.period) * self.ell[i % self.period]

    def survival(self, i: int) -> Any:
        """``S(i) = P(G >= i)``."""
        return self.q ** (i // self.period) * self.at_least[i % self.period]

    def draw(self, size: int, cap: int, rng: np.random.Generator) -> NDArray[np.int64]:
        """``size`` draws of ``G`` (capped at ``cap``): full windows are geometric, then the
        accepted length of the first window that is not full."""
        q = float(self.q)
        if q >= 1:
            return np.full(size, cap, dtype=np.int64)
        full = np.zeros(size, dtype=np.int64) if q <= 0 else \
            rng.geometric(1 - q, size=size).astype(np.int64) - 1
        if self.period == 1:
            partial = np.zeros(size, dtype=np.int64)
        else:
            probs = np.array([float(x) for x in self.ell]) / (1 - q)
            partial = rng.choice(self.period, size=size, p=probs / probs.sum()).astype(np.int64)
        drawn: NDArray[np.int64] = np.minimum(full * self.period + partial, cap)
        return drawn


# -- exact expectations ----------------------------------------------------------------------------

def dsi_event_exact_reference(p: SimParams) -> Num:
    """Exact ``E[T_DSI]`` of the event model by the direct dynamic programme (the reference the
    fast path `dsi_event_exact` is tested against): over restart states ``(tokens left,
    servers used)``, one spine per state from `spines`, ``O(N²)`` per configuration.

    >>> dsi_event_exact_reference(SimParams("dsi", c=Fraction(1, 2), a=Fraction(1, 2),
    ...                                     lookahead=1, n_tokens=2, model="event",
    ...                                     sp_degree=2))
    Fraction(7, 4)
    """
    exact = p.exact
    unit = _unit_mode(p)
    table = _SpineTable(p, reference=True)
    if p.acceptance is None:
        a: Num = Fraction(p.rate) if exact else float(p.rate)

        def weight(i: int) -> Num:
            return a ** i * (1 - a)

        def surv(i: int) -> Num:
            return a ** i
    else:
        windows = _Windows.of(p)
        weight, surv = windows.weight, windows.survival

    @cache
    def value(left: int, used: int, fresh: bool) -> Num:
        if left == 0:
            return Fraction(0) if exact else 0.0
        total: Num = Fraction(0) if exact else 0.0
        commits = table.get(left, used, fresh).commits
        for cm in commits:
            i = cm.position
            nxt = value(left - i - 1, 0 if unit else cm.used, False)
            if cm.kind == "bonus":
                return total + surv(i) * (cm.time + nxt)
            total += weight(i) * (cm.time + nxt)
        return total + surv(left) * commits[-1].time

    return value(p.n_tokens, 0, True)


def _family_dp(family: _SpineFamily, n: int, windows: _Windows, exact: bool) -> Any:
    """``E(n)`` (in ticks) from the spines of ``family``, for ``windows`` (numbers or arrays).

    With ``r_i = P(G = i)`` and spine ``R`` = ``τ_0 … τ_{m−1}``::

        E(R) = Σ_{i<m'} r_i (τ_i + E(R − 1 − i)) + [complete] S(R) τ_{R−1}
                                                + [bonus at m − 1] S(m − 1) (τ_{m−1} + E(R − m))

    (``m' = m`` when complete, ``m − 1`` otherwise). The sums over a prefix shared with the base
    spine are prefix sums of ``r_i τ_i``; for a complete spine the continuation is
    ``Σ_{j<K} ell_j V(R − 1 − j)`` with ``V(x) = E(x) + q V(x − K)``. Every term is ``>= 0``: the
    float path has no cancellation.
    """
    period = windows.period
    if exact:
        zero: Any = Fraction(0)
        weights: Any = [windows.weight(i) for i in range(n + 1)]
        survival: Any = [windows.survival(i) for i in range(n + 1)]
        base: Any = [int(t) for t in family.base]
        value: Any = [zero] * (n + 1)
        carried: Any = [zero] * (n + 1)      # V

        def dot(lo: int, hi: int, rows: Any) -> Any:
            return sum((weights[i] * rows[i - lo] for i in range(lo, hi)), zero)
    else:
        zero = np.zeros_like(np.atleast_1d(np.asarray(windows.q, float)))
        weights = np.array([windows.weight(i) * np.ones_like(zero) for i in range(n + 1)])
        survival = np.array([windows.survival(i) * np.ones_like(zero) for i in range(n + 1)])
        base = family.base.astype(float)
        value = np.zeros((n + 1, zero.size))
        carried = np.zeros((n + 1, zero.size))

        def dot(lo: int, hi: int, rows: Any) -> Any:
            rows = np.asarray(rows, float)
            if rows.ndim == 1:
                rows = rows[:, None]
            return (weights[lo:hi] * rows).sum(axis=0)
    prefix_sum = [zero]
    for i in range(min(len(base), n)):
        prefix_sum.append(prefix_sum[-1] + weights[i] * base[i])
    for left in range(1, n + 1):
        start = family.prefix[left - 1]
        tail = [int(t) for t in family.tails[left - 1]] if exact else \
            family.tails[left - 1].astype(float)
        m = start + len(tail)
        done = m if family.complete[left - 1] else m - 1
        last = base[m - 1] if m - 1 < start else tail[m - 1 - start]
        total = prefix_sum[min(start, done)]
        if done > start:
            total = total + dot(start, done, tail[: done - start])
        if family.complete[left - 1]:
            total = total + survival[left] * last
            for j in range(min(period, left)):
                total = total + windows.ell[j] * carried[left - 1 - j]
        else:
            total = total + dot(0, done, [value[left - 1 - i] for i in range(done)]) \
                + survival[m - 1] * (last + value[left - m])
        value[left] = total
        carried[left] = total + (windows.q * carried[left - period] if left >= period else zero)
    return value[n]


def dsi_event_exact(p: SimParams) -> Num:
    """Exact ``E[T_DSI]`` of the event model (a ``Fraction`` for rational inputs).

    Dynamic programming over restart states ``(tokens left, servers used)`` (module docstring).
    For `_fast_eligible` configurations (no prefill, independent servers, FIFO, ``SP >= 2``)
    the spines come from `_spine_family` and the programme runs in ``O(N K)`` beyond the spines'
    own tails (`_family_dp`); otherwise it is `dsi_event_exact_reference`. The two are equal
    (exactly for ``Fraction``s: tests/test_sim_acceptance_law.py).

    >>> dsi_event_exact(SimParams("dsi", c=Fraction(1, 2), a=Fraction(1, 2), lookahead=1,
    ...                           n_tokens=2, model="event", sp_degree=2))
    Fraction(7, 4)
    """
    if not _fast_eligible(p):
        return dsi_event_exact_reference(p)
    family = _spine_family(p, p.n_tokens)
    ticks = _family_dp(family, p.n_tokens, _Windows.of(p), p.exact)
    if p.exact:
        return Fraction(ticks) / family.scale
    return float(np.asarray(ticks, float).ravel()[0]) / family.scale


def dsi_event_grid_reference(p: SimParams, a_values: NDArray[np.float64]) -> NDArray[np.float64]:
    """`dsi_event_grid` by the direct programme (its reference): tokens left ``1, 2, …, N``
    with numpy over the spine and over ``a``, one spine per state from `spines`."""
    a = np.asarray(a_values, float)
    n = p.n_tokens
    unit = _unit_mode(p)
    assert p.sp_degree is not None
    states = 1 if unit else p.sp_degree
    table = _SpineTable(p, reference=True)
    power = a[None, :] ** np.arange(n + 1)[:, None]             # a^i, shape (N + 1, len(a))
    value = np.zeros((n + 1, states, a.size))

    def solve(left: int, used: int, fresh: bool) -> NDArray[np.float64]:
        path = table.get(left, used, fresh)
        m = len(path)
        times = path.times[:, None]
        cont = value[left - np.arange(m) - 1, 0 if unit else path.used]   # (m, len(a))
        weight = power[:m] * (1 - a[None, :])
        if path.complete:
            tail = power[left] * times[-1]
        else:
            weight[-1] = power[m - 1]                           # the bonus: no draw
            tail = np.zeros(a.size)
        result: NDArray[np.float64] = (weight * (times + cont)).sum(axis=0) + tail
        return result

    for left in range(1, n):
        for used in range(states):
            value[left, used] = solve(left, used, False)
    return solve(n, 0, True)


def dsi_event_grid(p: SimParams, a_values: NDArray[np.float64]) -> NDArray[np.float64]:
    """Exact ``E[T_DSI]`` (floats) of the event model for every ``a`` in ``a_values`` at once
    (the spines do not depend on ``a``); ``p.a`` and ``p.acceptance`` are ignored.

    `_fast_eligible` configurations: the spines of `_spine_family` and `_family_dp` over the
    array of rates (every term ``>= 0``, so it agrees with `dsi_event_grid_reference` to float
    rounding, within ``1e-12`` relative: tests/test_sim_acceptance_law.py); others: the
    reference.
    """
    if not _fast_eligible(p):
        return dsi_event_grid_reference(p, a_values)
    family = _spine_family(p, p.n_tokens)
    ticks = _family_dp(family, p.n_tokens, _Windows.rates(a_values), exact=False)
    result: NDArray[np.float64] = np.asarray(ticks, float) / family.scale
    return result


# -- Monte Carlo -----------------------------------------------------------------------------------

class _WindowDecider:
    """Acceptances drawn per window from a law: the draft at offset ``j`` of its window (counted
    from the last restart, ``origin``) is accepted iff ``L > j``, ``L`` drawn once per window."""

    def __init__(self, p: SimParams, rng: np.random.Generator) -> None:
        law = p.law
        self.k, self.rng = law.k, rng
        self.probs = np.array([float(x) for x in law.probabilities])
        self.probs = self.probs / self.probs.sum()
        self.drawn: dict[tuple[int, int], int] = {}

    def __call__(self, position: int, origin: int) -> bool:
        window, offset = divmod(position - origin, self.k)
        key = (origin, window)
        if key not in self.drawn:
            self.drawn[key] = int(self.rng.choice(self.k + 1, p=self.probs))
        return self.drawn[key] > offset


def event_run(p: SimParams, rng: np.random.Generator) -> list[Commit]:
    """One run of the event model with acceptances drawn from ``rng``: with a rate ``a``, one
    uniform per verified draft, in commit order; with a law (``p.acceptance``), one accepted
    length per window, when its first draft is decided (`_WindowDecider`). With
    ``decisions="window"``: one accepted length ``L`` per window (from ``p.law``, the i.i.d. law
    of ``a`` when a rate is given), drawn when the window is decided; it accepts
    ``min(L, m)`` of its ``m`` drafts."""
    if p.decisions == "window":
        law = p.law
        probs = np.array([float(x) for x in law.probabilities])
        probs = probs / probs.sum()
        engine = _engine(p, p.n_tokens, True, 0, lambda _: True, False)

        def decide_window(first: int, m: int) -> int:
            return min(int(rng.choice(law.k + 1, p=probs)), m)

        engine.decide_window = decide_window  # type: ignore[method-assign]
        return engine.run()
    if p.acceptance is None:
        a = float(p.rate)
        return _engine(p, p.n_tokens, True, 0, lambda _: bool(rng.random() < a), False).run()
    decider = _WindowDecider(p, rng)
    engine = _engine(p, p.n_tokens, True, 0, lambda _: True, False)
    engine.decide = lambda position: decider(position, engine.origin)
    return engine.run()


def simulate_event(p: SimParams, n_repeats: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """Latencies of ``n_repeats`` runs of the event model, vectorised over runs.

    Each run is a sequence of restarts; from a restart state the exit (first rejection or
    bonus) is drawn for all runs in that state at once from the spine's exit law. Randomness:
    per round, one vector of ``G`` draws for the runs still going (a rate: geometric; a law:
    `_Windows.draw`).
    """
    n = p.n_tokens
    unit = _unit_mode(p)
    windows = None if p.acceptance is None else _Windows.of(p)
    a = 0.0 if windows is not None else float(p.rate)
    table = _SpineTable(p)
    latency = np.zeros(n_repeats)
    left = np.full(n_repeats, n, dtype=np.int64)
    used = np.zeros(n_repeats, dtype=np.int64)
    fresh = True
    while True:
        live = np.flatnonzero(left > 0)
        if live.size == 0:
            return latency
        if windows is not None:
            g = windows.draw(live.size, n, rng)
        elif a >= 1:
            g = np.full(live.size, n, dtype=np.int64)
        elif a <= 0:
            g = np.zeros(live.size, dtype=np.int64)
        else:
            g = rng.geometric(1 - a, size=live.size).astype(np.int64) - 1
        state = left[live] * (p.sp_degree or 1) + (0 if unit else used[live])
        for key in np.unique(state):
            group = state == key
            idx = live[group]
            path = table.get(int(left[idx[0]]), int(used[idx[0]]), fresh)
            exit_at = np.minimum(g[group], len(path) - 1)  # a rejection, the bonus, or the end
            latency[idx] += path.times[exit_at]
            left[idx] -= exit_at + 1
            used[idx] = 0 if unit else path.used[exit_at]
        fresh = False
