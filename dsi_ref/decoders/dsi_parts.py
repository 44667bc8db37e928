"""DSI's parameters (`DSIConfig`) and the forwards in flight of a run (`Task`, `DraftForward`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..base.errors import InvalidParameterError
from ..base.latency import Latency, Time
from ..base.models import Number
from ..base.validate import check_choice, check_int
from .common import check_record
from .verification import Rule, VerifyRule, as_rule

__all__ = ["QUEUE_POLICIES", "DSIConfig", "DraftForward", "QueuePolicy", "Task"]

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
            ``time`` matter (see Note: why a lean run merges more, in `DSIRun.state`).
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


@dataclass(eq=False)
class Task:
    """A target forward, queued or running: it supplies ``p`` at positions ``first..last``,
    built on the drafts at ``first..last-1`` (a verification task), or ``p`` at the frontier
    alone (``frontier``: the frontier task).

    Attributes:
        id: the task's number in submit order (names it in trace labels).
        first, last: the positions it supplies ``p`` at.
        context: the generated tokens before ``last`` (committed + drafts) it was built on.
        frontier: whether it is the frontier task.
        submitted: when it was submitted.
        server, start, end: where and when it runs (``None`` while queued; a wall-clock engine
            leaves ``end`` unknown until the forward returns).
    """

    id: int
    first: int
    last: int
    context: tuple[int, ...]  # generated tokens before `last` (committed + drafts)
    frontier: bool
    submitted: Time
    server: int | None = None
    start: Time | None = None
    end: Time | None = None

    @property
    def label(self) -> str:
        """How the trace names the task, e.g. ``task#3(verify 4..6)``."""
        kind = "frontier" if self.frontier else "verify"
        return f"task#{self.id}({kind} {self.first}..{self.last})"

    def key(self) -> tuple[object, ...]:
        """The task's fields as a hashable tuple (for `DSIRun.state`)."""
        return (self.id, self.first, self.last, self.context, self.frontier, self.submitted,
                self.server, self.start, self.end)


@dataclass(eq=False)
class DraftForward:
    """The drafter's forward in flight for ``position``, from ``start`` to ``end``: ``row`` is
    ``q`` there, and ``token`` the draft when it is sampled at the start (content visible in
    flight), else ``None`` until the forward completes."""

    position: int
    start: Time
    end: Time
    token: int | None  # sampled at the start (content visible in flight) or None
    row: tuple[Number, ...]

    @property
    def label(self) -> str:
        """How the trace and the schedulers name the forward."""
        token = "" if self.token is None else f", token {self.token}"
        return f"drafter(position {self.position}{token})"

    def key(self) -> tuple[object, ...]:
        """The forward's fields as a hashable tuple (for `DSIRun.state`)."""
        return (self.position, self.start, self.end, self.token)
