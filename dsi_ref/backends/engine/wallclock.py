"""What every wall-clock run of the engine shares: its clock, its recorder, and its models.

The engine's runs (non-SI and SI in `dsi_ref.backends.engine.si`, DSI in
`dsi_ref.backends.engine.dsi`, tree speculation in `dsi_ref.backends.engine.tree`) are the
reference runs with their seams overridden; these are the seams' common parts. A run needs of
its engine only `EngineModels` (the models, their prefilled sessions and the device), so the
runs do not depend on `Engine` and `Engine` composes them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

import torch

from ...base.latency import Time
from ...base.result import Event, Run
from ...decoders.common import DEFAULT_LATENCY, Recorder
from ..torch.session import BackendLM, SessionLike

__all__ = ["Clock", "EngineModels", "WallClockRecorder"]


class EngineModels(Protocol):
    """What a wall-clock run needs of its engine (`dsi_ref.backends.engine.Engine` is one)."""

    @property
    def target(self) -> BackendLM:
        """The target model."""
        ...

    @property
    def drafter(self) -> BackendLM:
        """The drafter."""
        ...

    @property
    def target_session(self) -> SessionLike:
        """The target's session (SI and non-SI; prefilled before the run)."""
        ...

    @property
    def drafter_session(self) -> SessionLike:
        """The drafter's session (prefilled before the run)."""
        ...

    @property
    def device(self) -> torch.device:
        """The device of the models (the clock synchronises with it at start)."""
        ...


class Clock:
    """Wall-clock seconds since the start of a run (synchronised with the device at start)."""

    def __init__(self, device: torch.device) -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        self.t0 = time.perf_counter()

    def __call__(self) -> float:
        return time.perf_counter() - self.t0


class WallClockRecorder(Recorder):
    """`Recorder` on the wall clock (SI, non-SI and tree runs): a forward spans ``began`` (set by
    the run when the forward starts) to the moment it is recorded; a commit is a mark at the
    moment it is recorded."""

    def __init__(self, clock: Callable[[], float], stats: Sequence[str]) -> None:
        super().__init__(DEFAULT_LATENCY, stats)
        self.clock = clock
        self.began = 0.0

    def forward(self, model: str, kind: str, positions: tuple[int, ...], rng: object,
                note: str = "") -> None:
        """Record the forward that started at ``began``."""
        end = self.clock()
        self.trace.append(Event(model, kind, self.began, end, positions, note))
        self.time = end

    def commit(self, positions: tuple[int, ...], note: str) -> None:
        """Mark a commit now."""
        now = self.clock()
        self.trace.append(Event("committer", "commit", now, now, positions, note))

    def result(self, tokens: list[int]) -> Run:
        """The finished `Run`, its time the clock's now (seconds)."""
        now: Time = self.clock()
        return Run(tuple(tokens), now, tuple(self.trace), dict(self.stats))
