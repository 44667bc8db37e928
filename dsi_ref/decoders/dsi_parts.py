"""DSI's parameters (`DSIConfig`), the forwards in flight of a run (`Task`, `DraftForward`) and
everything a run changes as it goes (`DSIState`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

from ..base.errors import InvalidParameterError
from ..base.exact_hooks import CLOCK, COMMITTED, DERIVED, HISTORY, INSTANT
from ..base.latency import Latency, Time
from ..base.models import Number
from ..base.result import Event
from ..base.validate import check_choice, check_int
from .common import check_record
from .verification import Rule, VerifyRule, as_rule

__all__ = ["QUEUE_POLICIES", "DSIConfig", "DSIState", "DraftForward", "QueuePolicy", "Task"]

QueuePolicy = Literal["fifo", "lifo", "any"]
QUEUE_POLICIES: tuple[QueuePolicy, ...] = ("fifo", "lifo", "any")


@dataclass(frozen=True)
class DSIConfig:
    """Parameters of DSI, validated on construction.

    Args:
        lookahead: drafts per verification task (``k``), ``>= 1``.
        sp_degree: number of target servers (``SP``), ``>= 1``; with ``SP >= 2`` one is reserved
            for the frontier task.
        latency: forward costs (default: target 1, drafter 1/10).
        verify: ``"rejection"``, ``"exact_match"``, ``"greedy"``, or a `Rule` object.
        queue: order in which waiting verification tasks get a server.
        sample_drafts_at: ``"end"`` (default) samples a draft when its forward completes;
            ``"start"`` samples it when the forward starts, so that a scheduler may see the
            content of a forward still in flight (the content-aware adversary).
        block_windows: how a window rule (``verify="block"``) cuts the drafts into blocks
            (docs/dsi-semantics.md, "Block decisions"): ``"fixed"`` (default) decides each
            verification task's window as one block, once all its rows are supplied;
            ``"maximal"`` decides, whenever ``p`` is supplied at the frontier, the longest run of
            drafts with ``p`` supplied (the frontier task alone decides one draft).
        record: keep the trace and the counters (default). ``False`` gives a lean run (empty
            ``trace`` and ``stats``) whose exact enumeration merges every two paths that agree
            on what the future depends on — far fewer paths; use it when only ``tokens`` and
            ``time`` matter (see Note: why a lean run merges more, in `DSIRun.checkpointing`).
        keep_time: return the virtual time (default). ``False`` (with ``record=False``) returns
            ``Run.time`` as NaN, not measured, and lets the exact engine also merge paths whose
            futures agree up to a shift of the clock (the future of a run depends on the times
            of the forwards in flight relative to now, not on now itself): use it when only
            ``tokens`` matter.
    """

    lookahead: int
    sp_degree: int
    latency: Latency = field(default_factory=Latency)
    verify: VerifyRule | Rule = "rejection"
    queue: QueuePolicy = "fifo"
    sample_drafts_at: Literal["end", "start"] = "end"
    record: bool = True
    block_windows: Literal["fixed", "maximal"] = "fixed"
    keep_time: bool = True

    def __post_init__(self) -> None:
        for name in ("lookahead", "sp_degree"):
            object.__setattr__(self, name, check_int(name, getattr(self, name)))
        try:
            as_rule(self.verify)
        except (TypeError, ValueError) as error:
            raise InvalidParameterError(str(error)) from None
        check_choice("queue", self.queue, QUEUE_POLICIES)
        check_choice("sample_drafts_at", self.sample_drafts_at, ("end", "start"))
        check_choice("block_windows", self.block_windows, ("fixed", "maximal"))
        if not isinstance(self.latency, Latency):
            raise InvalidParameterError("latency must be a dsi_ref.Latency")
        check_record(self.record, self.keep_time)


@dataclass(eq=False, slots=True, frozen=True)
class Task:
    """A target forward, queued or running: it supplies ``p`` at positions ``first..last``,
    built on the drafts at ``first..last-1`` (a verification task), or ``p`` at the frontier
    alone (``frontier``: the frontier task). `DSIRun` never changes a task once made (starting
    one makes a new `Task`), so a snapshot may hold it as it is.

    Attributes:
        id: the task's number in submit order (names it in trace labels).
        first, last: the positions it supplies ``p`` at.
        context: the generated tokens before ``last`` (committed + drafts) it was built on.
        frontier: whether it is the frontier task.
        submitted: when it was submitted.
        server, start, end: where and when it runs (``None`` while queued; a wall-clock engine
            leaves ``end`` unknown until the forward returns).
    """

    id: int = field(metadata=HISTORY)
    first: int
    last: int
    context: tuple[int, ...]  # generated tokens before `last` (committed + drafts)
    frontier: bool
    submitted: Time = field(metadata=INSTANT)
    server: int | None = None
    start: Time | None = field(default=None, metadata=INSTANT)
    end: Time | None = field(default=None, metadata=INSTANT)

    @property
    def label(self) -> str:
        """How the trace names the task, e.g. ``task#3(verify 4..6)``."""
        kind = "frontier" if self.frontier else "verify"
        return f"task#{self.id}({kind} {self.first}..{self.last})"

    def key(self) -> tuple[object, ...]:
        """The task's fields as a hashable tuple."""
        return (self.id, self.first, self.last, self.context, self.frontier, self.submitted,
                self.server, self.start, self.end)


@dataclass(eq=False, slots=True, frozen=True)
class DraftForward:
    """The drafter's forward in flight for ``position``, from ``start`` to ``end``: ``row`` is
    ``q`` there, and ``token`` the draft when it is sampled at the start (content visible in
    flight), else ``None`` until the forward completes."""

    position: int
    start: Time = field(metadata=INSTANT)
    end: Time = field(metadata=INSTANT)
    token: int | None  # sampled at the start (content visible in flight) or None
    row: tuple[Number, ...] = field(metadata=DERIVED)  # q at `position`: the drafter's forward

    @property
    def label(self) -> str:
        """How the trace and the schedulers name the forward."""
        token = "" if self.token is None else f", token {self.token}"
        return f"drafter(position {self.position}{token})"

    def key(self) -> tuple[object, ...]:
        """The forward's fields as a hashable tuple (without its row)."""
        return (self.position, self.start, self.end, self.token)


@dataclass(eq=False, repr=False)
class DSIState:
    """Everything a DSI run changes as it goes: the fields of `dsi_ref.decoders.dsi.DSIRun`.

    The exact checker snapshots and restores these fields and reads its merge states from them
    (`dsi_ref.audit.exact.state`), each by its role (`dsi_ref.base.exact_hooks`): the clock and
    the instants of the forwards in flight; the committed tokens; what only the result reads
    (the trace, the counters, the tasks' ids); what `DSIRun`'s own code keeps as a function of
    the rest (the drafts' rows, which server runs which task). Each value is immutable or a
    container the run changes, of values it never changes in place.

    Attributes:
        now: the virtual clock.
        committed: the committed tokens (positions ``0 .. F − 1``).
        drafts, draft_rows: the speculative tokens at ``F, F + 1, …`` and ``q`` at each.
        window_start: the first position of the window being drafted.
        drafting, drafter_first: the drafter's forward in flight, and whether none was made yet.
        tasks, queue, frontier_waiting: the tasks running (in start order), queued (in submit
            order), and the frontier task waiting for the server (``SP = 1``).
        busy, server_first: each server's task, and whether it made no forward yet.
        supplied: ``p(· | committed prefix)`` at the positions a finished task supplied.
        trace, stats, next_id: the trace, the counters and the next task's id.
        done: the last position is committed (or EOS).
        started: the run has started (its first draft and frontier task are submitted).
        due, due_started: the events still due at ``now`` in the batch being delivered
            (``None``: none), and whether one of the batch was delivered.
        step: where the run is in an event or the loop (``None``: between steps), kept in a
            snapshot so that a restored run goes on from there.
        resuming: the run offers the exact checker resume points (set when it starts).
    """

    now: Time = field(default=Fraction(0), metadata=CLOCK)
    committed: list[int] = field(default_factory=list, metadata=COMMITTED)
    drafts: list[int] = field(default_factory=list)
    draft_rows: list[tuple[Number, ...]] = field(default_factory=list, metadata=DERIVED)
    window_start: int = 0
    drafting: DraftForward | None = None
    drafter_first: bool = True
    tasks: list[Task] = field(default_factory=list)
    queue: list[Task] = field(default_factory=list)
    frontier_waiting: Task | None = None
    busy: list[Task | None] = field(default_factory=list, metadata=DERIVED)
    server_first: list[bool] = field(default_factory=list)
    supplied: dict[int, tuple[Number, ...]] = field(default_factory=dict)
    trace: list[Event] = field(default_factory=list, metadata=HISTORY)
    next_id: int = field(default=0, metadata=HISTORY)
    done: bool = False
    stats: dict[str, int] = field(default_factory=dict, metadata=HISTORY)
    started: bool = False
    due: list[DraftForward | Task] | None = None
    due_started: bool = False
    step: tuple[object, ...] | None = None
    resuming: bool = False
