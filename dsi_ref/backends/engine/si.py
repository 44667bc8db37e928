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
from ...base.result import Run
from ...decoders.speculative import STATS, ModelName, Rows, SIRun, SpeculativeConfig
from ..torch.session import SessionLike
from .vectorised import vectorised_rule
from .wallclock import Clock, EngineModels, WallClockRecorder

__all__ = ["WallClockSI"]


class WallClockSI(SIRun):
    """`SIRun` with real forwards: cached sessions for the models, wall-clock seconds for the
    clock (`WallClockRecorder`, from `run`; the sessions are prefilled before), the vectorised
    rule. Without a drafter (``si=False``): non-SI."""

    def __init__(self, models: EngineModels, prompt: tuple[int, ...], max_new_tokens: int,
                 rng: Randomness, config: SpeculativeConfig, si: bool) -> None:
        super().__init__(models.target, models.drafter if si else None, prompt, max_new_tokens,
                         rng, config)
        self.rule = vectorised_rule(config.verify)
        self.device = models.device
        self.sessions: dict[ModelName, SessionLike] = {"target": models.target_session}
        if si:
            self.sessions["drafter"] = models.drafter_session

    def model_rows(self, model: ModelName, context: tuple[int, ...], count: int) -> Rows:
        """``count`` rows of ``model`` after the prompt and ``context``: one cached forward."""
        return cast(Rows, self.sessions[model].rows(self.prompt + context, count))

    def forward(self, model: ModelName, kind: str, positions: tuple[int, ...],
                context: tuple[int, ...], count: int) -> Rows:
        """`SIRun.forward`, its span starting now."""
        assert isinstance(self.rec, WallClockRecorder)
        self.rec.began = self.rec.clock()
        return super().forward(model, kind, positions, context, count)

    def run(self) -> Run:
        """`SIRun.run` on the wall clock (started now)."""
        self.rec = WallClockRecorder(Clock(self.device), STATS)
        self.stats = self.rec.stats
        return super().run()

    def result(self) -> Run:
        """The finished `Run`: its time the clock's now (seconds)."""
        assert isinstance(self.rec, WallClockRecorder)
        return Run(tuple(self.tokens), self.rec.clock(), tuple(self.rec.trace), self.counters())
