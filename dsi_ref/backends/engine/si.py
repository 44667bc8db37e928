"""Non-SI and SI on the wall clock: the reference `SIRun` with real, cached forwards.

`Engine.speculative` and `Engine.autoregressive` *are* `dsi_ref.decoders.speculative.SIRun`
(non-SI is `SIRun` without a drafter): window, draft, score, verify and bonus are inherited. Only
the model seam (a cached `Session` forward; SI scores prefix + drafts in *one* target forward, as
the algorithm says), the clock (wall-clock seconds, prefill untimed) and the rule
(`vectorised_rule`) change.
"""

from __future__ import annotations

from typing import cast

from ...base.randomness import Randomness
from ...base.result import Event, Run
from ...decoders.speculative import ModelName, Rows, SIRun, SpeculativeConfig
from ..torch.session import SessionLike
from .vectorised import vectorised_rule
from .wallclock import Clock, EngineModels

__all__ = ["WallClockSI"]


class WallClockSI(SIRun):
    """`SIRun` with real forwards: cached sessions for the models, wall-clock seconds for the
    clock (a `Clock` started by `run`; the sessions are prefilled before): a forward spans its
    start to its end, a commit is a mark at the moment it is recorded; the vectorised rule.
    Without a drafter (``si=False``): non-SI."""

    def __init__(self, models: EngineModels, prompt: tuple[int, ...], max_new_tokens: int,
                 rng: Randomness, config: SpeculativeConfig, si: bool) -> None:
        super().__init__(models.target, models.drafter if si else None, prompt, max_new_tokens,
                         rng, config)
        self.rule = vectorised_rule(config.verify)
        self.device = models.device
        self.wall: Clock  # the wall clock, started by `run`
        self.sessions: dict[ModelName, SessionLike] = {"target": models.target_session}
        if si:
            self.sessions["drafter"] = models.drafter_session

    def model_rows(self, model: ModelName, context: tuple[int, ...], count: int) -> Rows:
        """``count`` rows of ``model`` after the prompt and ``context``: one cached forward."""
        return cast(Rows, self.sessions[model].rows(self.prompt + context, count))

    def forward(self, model: ModelName, kind: str, positions: tuple[int, ...],
                context: tuple[int, ...], count: int) -> Rows:
        """`SIRun.forward` on the wall clock: the trace's span is the forward's."""
        began = self.wall()
        rows = self.model_rows(model, context, count)
        end = self.wall()
        self.trace.append(Event(model, kind, began, end, positions, ""))
        self.time = end
        return rows

    def record_commit(self, positions: tuple[int, ...], note: str) -> None:
        """Mark a commit now."""
        now = self.wall()
        self.trace.append(Event("committer", "commit", now, now, positions, note))

    def run(self) -> Run:
        """`SIRun.run` on the wall clock (started now)."""
        self.wall = Clock(self.device)
        return super().run()

    def result(self) -> Run:
        """The finished `Run`: its time the clock's now (seconds)."""
        return Run(tuple(self.tokens), self.wall(), tuple(self.trace), self.counters())
