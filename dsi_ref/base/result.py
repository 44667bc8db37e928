"""What a decoder returns: the generated tokens, the virtual latency and a trace of events."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from .latency import Time

__all__ = ["Event", "Run", "decision_kinds"]


class Event(NamedTuple):
    """One span on one resource of the virtual clock.

    Attributes:
        resource: ``"drafter"``, ``"target"`` (SI, non-SI) or ``"target-<i>"`` (DSI server i),
            or ``"committer"`` for commit marks (``start == end``).
        kind: ``"draft"``, ``"verify"``, ``"forward"`` (a target forward with no drafts),
            ``"preempted"``, ``"wait"`` or ``"commit"``.
        start, end: virtual times.
        positions: indices of the generated tokens the span is about.
        note: free text (e.g. ``"rejected at 3"``).
    """

    resource: str
    kind: str
    start: Time
    end: Time
    positions: tuple[int, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class Run:
    """The result of one decoder run.

    Attributes:
        tokens: the generated tokens (prompt excluded; ends at EOS or at ``max_new_tokens``).
        time: the latency on the virtual clock.
        trace: the events, in the order they were recorded.
        stats: counters (``drafts``, ``accepted``, ``rejected``, ``bonus``, ``target_forwards``...).
    """

    tokens: tuple[int, ...]
    time: Time
    trace: tuple[Event, ...] = ()
    stats: Mapping[str, int] = field(default_factory=dict)


def decision_kinds(run: Run) -> tuple[str, ...]:
    """How each committed position was decided, from the trace's commit marks, in position order:
    ``"accepted"`` (a draft), ``"rejected"`` (a residual token) or ``"bonus"`` (no draft)."""
    kinds: dict[int, str] = {}
    for event in run.trace:
        if event.kind == "commit":
            for position in event.positions:
                kinds[position] = event.note.split()[0]
    return tuple(kinds[i] for i in sorted(kinds))
