"""Stateful processors on the torch engine: a `BackendLM` whose sessions process their rows.

`processed_backend` wraps a backend model (`dsi_ref.backends.torch.model.TorchLM`, or the
checkpoint model) with the stateful processors of `dsi_ref.base.stateful` (penalties, a grammar).
Its sessions wrap the model's sessions: every row a forward computes is processed with the state
of its own prefix, kept *incrementally* per session, as an engine keeps it: advanced over the
drafts a forward scores, rolled back when the next forward's context leaves them (a rejection).
Each DSI target server has its own session, hence its own state (one state per task context it
serves), and no state is shared between threads.

`dsi_ref.backends.engine.Engine` needs no change: it runs SI and DSI on the wrapped models, and the
rows it verifies are the processed rows the reference decoders read through
`dsi_ref.base.stateful.recomputed` (``probs`` here is that law, on the model's own ``probs``).
Batched servers (``Engine(batched=True)``) need a `TorchLM` target and refuse a wrapped one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from ...base.models import Number
from ...base.stateful import IncrementalLM, StatefulProcessor, recomputed
from .session import BackendLM, SessionLike

__all__ = ["ProcessedBackendLM", "ProcessedSession", "processed_backend"]


class ProcessedSession:
    """A session whose rows are processed, with its own incremental state (`IncrementalLM`)."""

    def __init__(self, inner: SessionLike, lm: ProcessedBackendLM) -> None:
        self.inner = inner
        self.state = IncrementalLM(lm.inner, lm.processors, lm.prompt,
                                   name=f"{lm.name} (session)")

    @property
    def tokens(self) -> list[int]:
        """The inner session's cached tokens."""
        return self.inner.tokens

    @tokens.setter
    def tokens(self, value: list[int]) -> None:
        self.inner.tokens = value

    @property
    def forwards(self) -> int:
        """The inner session's forwards."""
        return self.inner.forwards

    @forwards.setter
    def forwards(self, value: int) -> None:
        self.inner.forwards = value

    def reset(self) -> None:
        """Forget the cached tokens (the processors' state is a function of each prefix)."""
        self.inner.reset()

    def rows(self, context: Sequence[int], count: int = 1) -> np.ndarray:
        """The processed rows [count, V] after the last ``count`` prefixes of ``context``."""
        return self._process(context, self.inner.rows(context, count))

    def rows_unless(self, context: Sequence[int], count: int,
                    cancelled: Callable[[], bool] | None) -> np.ndarray | None:
        """`rows`, or ``None`` when preempted."""
        rows = self.inner.rows_unless(context, count, cancelled)
        return None if rows is None else self._process(context, rows)

    def _process(self, context: Sequence[int], rows: np.ndarray) -> np.ndarray:
        context = tuple(int(t) for t in context)
        count = len(rows)
        end = len(context) - count + 1
        out: list[tuple[Number, ...]] = [
            self.state.process(context[:end + i], tuple(rows[i].tolist())) for i in range(count)]
        return np.asarray(out, dtype=np.float64)


class ProcessedBackendLM:
    """A `BackendLM` with stateful processors (module note). Use `processed_backend`."""

    def __init__(self, inner: BackendLM, processors: Sequence[StatefulProcessor],
                 prompt: Sequence[int]) -> None:
        self.inner = inner
        self.processors = tuple(processors)
        self.prompt = tuple(int(t) for t in prompt)
        self.reference = recomputed(inner, self.processors, self.prompt)
        self.name = self.reference.name
        self.vocab_size = inner.vocab_size
        self.eos = inner.eos
        self.bos = inner.bos

    def __repr__(self) -> str:
        return f"ProcessedBackendLM({self.name!r})"

    @property
    def device(self) -> torch.device:
        """The inner model's device."""
        return self.inner.device

    def session(self, *, graphs: bool | None = None, priority: int = 0,
                segments: int = 1) -> ProcessedSession:
        """A processed session over a new session of the inner model."""
        return ProcessedSession(self.inner.session(graphs=graphs, priority=priority,
                                                   segments=segments), self)

    def replica(self, device: str | torch.device) -> ProcessedBackendLM:
        """The same processors over the inner model's replica on ``device``."""
        return ProcessedBackendLM(self.inner.replica(device), self.processors, self.prompt)

    def probs(self, prefix: Sequence[int]) -> tuple[float, ...]:
        """The processed law (`dsi_ref.base.stateful.recomputed` over the inner ``probs``)."""
        return tuple(float(x) for x in self.reference.probs(tuple(prefix)))


def processed_backend(model: BackendLM, processors: Sequence[StatefulProcessor],
                      prompt: Sequence[int] = ()) -> ProcessedBackendLM:
    """``model`` with stateful ``processors`` for the torch engine (module note); every context
    must start with ``prompt``."""
    return ProcessedBackendLM(model, processors, prompt)
