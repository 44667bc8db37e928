"""A DSI target server in its own process: the Ray actor behind each server slot of `RayEngine`.

`TargetServer` holds its own copy of the target (built here from a `ModelSpec` with
`build_model`, or unpickled) and its own session; `RemoteServer` is the class as a Ray actor. A
call ``rows(tokens, count)`` is one task's forward; `ray.cancel` of the call stops it at the next
layer segment (the session checks ``is_canceled()`` between segments, as a thread server checks
its flag).
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
import ray

from ..torch.build import build_model
from ..torch.session import BackendLM
from ..torch.spec import ModelSpec

__all__ = ["RemoteServer", "TargetServer"]


class TargetServer:
    """A target server in its own process: its own copy of the target model (built here from a
    `ModelSpec`, or unpickled), its own session.

    Args:
        model: the target's spec, or the target itself (pickled through the object store).
        device: where the copy runs (moved there if it was built elsewhere); ``None``: where
            it was built.
        segments, graphs: the session's (`dsi_ref.backends.torch.session.Session`).
        threads: torch threads in this process.
    """

    def __init__(self, model: BackendLM | ModelSpec, device: str | None, segments: int,
                 graphs: bool | None, threads: int) -> None:
        import torch

        torch.set_num_threads(threads)
        lm: BackendLM = build_model(model) if isinstance(model, ModelSpec) else model
        if device is not None and torch.device(device) != lm.device:
            lm = lm.replica(device)
        self.session = lm.session(graphs=graphs, segments=segments)

    def rows(self, tokens: tuple[int, ...], count: int) -> tuple[np.ndarray | None, float]:
        """The task's rows (``None`` when cancelled while running) and the forward's seconds."""
        cancelled = ray.get_runtime_context().is_canceled
        began = time.perf_counter()
        rows = self.session.rows_unless(tokens, count, cancelled)
        return rows, time.perf_counter() - began

    def ping(self, payload: Any = None) -> Any:
        """Return ``payload`` (round trips and transfers are measured with it)."""
        return payload

    def pid(self) -> int:
        """The actor's process id."""
        return os.getpid()


#: `TargetServer` as a Ray actor class (``RemoteServer.options(...).remote(...)``).
RemoteServer = ray.remote(TargetServer)
