"""A sampler that is the exact checker's offer too and records what a step-wise run gives it
(shared by the SI and DSI merge-state tests; tests/ is on sys.path)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import dsi_ref as dr
from dsi_ref.audit.exact.state import States
from dsi_ref.base.exact_hooks import Checkpointing, ExactHooks, StepRun


class RecordingHooks(dr.Sampler, ExactHooks):
    """A `Sampler` that is an `ExactHooks` and records: the `Checkpointing` of each invocation
    it enters, and at each merge point the merge state the checker reads (`States.merge_state`,
    one table for the whole run: equal traces get equal ids), the committed tokens it forgets
    dead keys by, and whether the state is the fields alone (`States.plain`). It does not resume,
    so a run offers it no free-form point and no resume point (each raises)."""

    def __init__(self, seed: int, **kwargs: Any) -> None:
        super().__init__(seed, **kwargs)
        self.states = States()
        self.entered: list[Checkpointing] = []
        self.hints: list[tuple[Hashable, tuple[int, ...]]] = []
        self.plain: list[bool] = []

    def merge_point(self, state: Hashable, *, entry: bool = False,
                    committed: tuple[int, ...] | None = None,
                    snapshot: Callable[[], object] | None = None,
                    restore: Callable[[object], bool] | None = None) -> None:
        raise AssertionError("a step-wise run offers no free-form merge point")

    def resume_point(self, snapshot: Callable[[], object]) -> None:
        raise AssertionError("a step-wise run offers no free-form resume point")

    def enter(self, run: StepRun, checkpointing: Checkpointing) -> None:
        self.entered.append(checkpointing)

    def merge(self, run: StepRun) -> None:
        layout = self.states.layout(type(run))
        assert layout.committed is not None
        checkpointing = run.checkpointing()  # the invocation's (a test may merge unentered)
        self.hints.append((self.states.merge_state(run, checkpointing),
                           tuple(getattr(run, layout.committed))))
        self.plain.append(self.states.plain(run, layout, run.built_on(), checkpointing))

    def pause(self, run: StepRun) -> None:
        raise AssertionError("a run under a checker that does not resume offers no resume point")
