"""Spines of the event model (`dsi_ref.sim.event_engine`): the run from a restart in which
every draft is accepted.

A rejection or a bonus preempts every task, restarts the frontier task and the drafter: the state
after it is only ``(R, u)`` = (tokens left, verification servers already used — it matters only
for a server's first forward, TTFT). Between restarts the run is deterministic until the first
rejection; the *spine* from ``(R, u)`` is that run with every draft accepted, up to the first
bonus (`Spine`). `spine` runs one; `spines` gives every budget from one held run; for
`fast_eligible` configurations `spine_family` gives them from one run, as rows sharing a prefix;
`SpineTable` serves them by restart state to the expectation and the simulation of
`dsi_ref.sim.event`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .event_engine import Commit, EventCosts, EventEngine, EventTask, Kind, make_engine
from .params import SimParams

#: Public: the spines. `SpineFamily`, `SpineTable`, `spine_family`, `fast_eligible` and
#: `unit_mode` are shared with `dsi_ref.sim.event` only (the simulator's internals).
__all__ = ["Spine", "spine", "spines"]


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
    def of(cls, raw: list[tuple[int | float, int, Kind, int]], costs: EventCosts,
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
    engine = make_engine(p, tokens_left, fresh, used, lambda _: True, True)
    engine.start()
    return Spine.of(engine.finish(), engine.costs, p.exact)


def spines(p: SimParams, max_left: int, *, used: int = 0) -> list[Spine]:
    """The spines from a restart (not the run's start) for every budget ``1 .. max_left``.

    One run with budget ``max_left + 1`` is advanced to the instant at which the drafter would
    complete position ``R − 1``; up to that instant nothing depends on the budget (the budget is
    read only when position ``R − 1`` is drafted), so a copy of that state continued with budget
    ``R`` is the spine for ``R``. Cost: one run plus the tails after each copy.
    """
    base = make_engine(p, max_left + 1, False, used, lambda _: True, True)
    base.start()
    out: list[Spine] = []
    for left in range(1, max_left + 1):
        while not (base.stopped or base.done) and base.step(hold_draft=left - 1):
            pass
        # after a bonus, the copy of the stopped base returns base's commits
        out.append(Spine.of(base.clone(left).finish(), base.costs, p.exact))
    return out


def unit_mode(p: SimParams) -> bool:
    """No prefill: the restart state does not depend on the servers used (or on freshness)."""
    return p.target_first is None and p.drafter_first is None


def fast_eligible(p: SimParams) -> bool:
    """The configurations whose spines `spine_family` builds from one run (below): no prefill,
    independent servers, FIFO, ``SP >= 2`` (server 0 reserved for the frontier task)."""
    return (unit_mode(p) and p.contention is None and p.queue != "lifo"
            and p.sp_degree is not None and p.sp_degree >= 2)


class _RecordingEngine(EventEngine):
    """`EventEngine` that records, per window (by its first position), when its verification task
    was submitted and when it started."""

    submitted: dict[int, int | float]
    started: dict[int, int | float]

    def submit(self, first: int, last: int, frontier: bool) -> None:
        if not frontier:
            self.submitted.setdefault(first, self.now)
        super().submit(first, last, frontier)

    def run_on(self, queued: EventTask, server: int) -> None:
        if not queued.frontier:
            self.started.setdefault(queued.first, self.now)
        super().run_on(queued, server)


def _lite_clone(engine: EventEngine, n: int) -> EventEngine:
    """A plain `EventEngine` copy of ``engine``'s state with budget ``n`` and no commits yet (its
    commits are the ones after the copy)."""
    return engine.copy_as(EventEngine, n, [])


@dataclass(frozen=True, eq=False)
class SpineFamily:
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


def spine_family(p: SimParams, max_left: int) -> SpineFamily:
    """The spines of `spines` (equal to them, tick for tick: tests/test_sim_acceptance_law.py),
    from one run instead of one run per budget, for `fast_eligible` configurations.

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
    assert p.sp_degree is not None and fast_eligible(p)
    costs = EventCosts.of(p)
    k = p.lookahead
    base = _RecordingEngine(max_left + 1, k, p.sp_degree, costs, False, False, 0,
                            lambda _: True, True)
    base.submitted, base.started = {}, {}
    base.window_decisions = windowed = p.decisions == "window"
    base.start()
    held: dict[int, tuple[EventEngine, int, int, bool]] = {}   # R -> (copy, commits, w, boundary)
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
    return SpineFamily(ticks, prefix, tails, complete, costs.scale, p.exact)


class SpineTable:
    """Spines of one configuration by restart state, computed a family at a time
    (``reference``: always by `spines`, never by `spine_family`)."""

    def __init__(self, p: SimParams, *, reference: bool = False) -> None:
        self.p, self.unit = p, unit_mode(p)
        self.families: dict[int, list[Spine]] = {}
        self.start: Spine | None = None
        self.fast = None if reference or not fast_eligible(p) else \
            spine_family(p, p.n_tokens)
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
