"""What a decoder returns: the generated tokens, the virtual latency and a trace of events."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .latency import Time

__all__ = ["Event", "Run"]


@dataclass(frozen=True)
class Event:
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
