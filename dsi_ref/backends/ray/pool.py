"""The Ray backend's target servers and the driver's side of their calls (`RayEngine`'s parts).

* `_TargetServer` (`_RemoteServer` as a Ray actor): one target server in its own process, with
  its own copy of the target (built there from a `ModelSpec`, or unpickled) and its own session.
* `_RayOutbox`: the thread engine's outbox (finished tasks) over actor calls, with the per-task
  deadlines, and lost calls sent again to a live actor.
* `_RayDSI`: `_WallClockDSI` whose preemption also cancels the actor call.

The rules are documented with `RayEngine` (`dsi_ref.backends.ray`) and in docs/ray-backend.md.
"""

from __future__ import annotations

import contextlib
import os
import queue
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import ray
import ray.exceptions

from ...base.errors import BackendError, ServerTimeoutError
from ...base.result import Run
from ...decoders.dsi import Task
from ..engine.engine import _Job, _WallClockDSI
from ..torch.build import build_model
from ..torch.session import BackendLM
from ..torch.spec import ModelSpec

if TYPE_CHECKING:
    from .engine import RayEngine


# -- the target servers ------------------------------------------------------------------------
class _TargetServer:
    """A target server in its own process: its own copy of the target model (built here from a
    `ModelSpec`, or unpickled), its own session."""

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


_RemoteServer = ray.remote(_TargetServer)


@dataclass
class _Call:
    """An actor call in flight: its task, the job (to send again if the actor dies), the slot,
    the actor (index in `RayEngine.actors`)."""

    task: Task
    job: _Job
    slot: int
    actor: int


class _RayOutbox:
    """The thread engine's outbox (``get`` / ``get_nowait`` of finished tasks), over actor calls.

    Items are ``(status, task, payload, seconds)`` as a thread server puts them: ``done`` (rows),
    ``preempted`` (cancelled: no rows). A lost call still wanted goes to a live actor instead of
    becoming an item; `ServerLostError` when none is left. Every wait is bounded: an actor
    that does not answer within the per-task deadline is frozen, and lost like a dead one.
    """

    def __init__(self, engine: RayEngine) -> None:
        self.engine = engine
        self.calls: dict[ray.ObjectRef[Any], _Call] = {}      # calls whose reply is awaited
        self.ready: deque[tuple[str, Task, Any, float]] = deque()   # items of cancelled calls
        self.lost_tasks = 0
        self.frozen_servers = 0
        self.since: dict[int, float] = {}   # actor -> its last reply, or the call sent while idle
        self.deadline: float | None = None  # the run's (time.monotonic)
        self.timeout: float | None = None

    def submit(self, slot: int, job: _Job) -> None:
        index = self.engine.slots[slot]
        if all(call.actor != index for call in self.calls.values()):
            self.since[index] = time.monotonic()
        ref = self.engine.actors[index].rows.remote(job.tokens, job.count)
        self.calls[ref] = _Call(job.task, job, slot, index)

    def abandon(self) -> None:
        """Cancel every call in flight and forget them (a run that raised)."""
        for ref in self.calls:
            with contextlib.suppress(Exception):
                ray.cancel(ref)
        self.calls.clear()
        self.ready.clear()

    def check_deadline(self) -> None:
        """`ServerTimeoutError` when the run's ``timeout`` has passed."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise ServerTimeoutError(f"the DSI run did not end within its timeout of "
                                     f"{self.timeout:g} s; no token of an unfinished call was "
                                     "committed")

    def _budget(self) -> float:
        """Seconds until the next deadline: a server's (its per-task deadline, or
        ``start_timeout`` for an actor that never answered), a replacement's (`admit`), or the
        run's."""
        ends = [self.since[call.actor] + self.engine.actor_deadline(call.actor)
                for call in self.calls.values()] + self.engine.admission_checks()
        if self.deadline is not None:
            ends.append(self.deadline)
        return max(0.0, min(ends) - time.monotonic())

    def _expire(self) -> None:
        """Lose every actor past its per-task deadline (frozen) and send its calls again."""
        self.check_deadline()
        now, engine = time.monotonic(), self.engine
        frozen = sorted({call.actor for call in self.calls.values()
                         if now - self.since[call.actor] >= engine.actor_deadline(call.actor)})
        for index in frozen:
            self.frozen_servers += 1
            engine.lose_actor(index, frozen_after=engine.actor_deadline(index))
            for ref, call in [(r, c) for r, c in self.calls.items() if c.actor == index]:
                del self.calls[ref]
                self.lost_tasks += 1
                self.submit(call.slot, call.job)   # still wanted: on a live actor

    def cancel(self, task_id: int) -> None:
        """`ray.cancel` the task's call and hand the event loop its ``preempted`` item now: the
        call's reply (rows or `TaskCancelledError`) is never read, so nothing it computed can
        be committed, and the loop does not wait for Ray to confirm the cancellation (which
        may come late)."""
        for ref in [r for r, call in self.calls.items() if call.task.id == task_id]:
            call = self.calls.pop(ref)
            ray.cancel(ref)
            self.ready.append(("preempted", call.task, None, 0.0))

    def get(self) -> tuple[str, Task, Any, float]:
        while True:
            if self.ready:
                return self.ready.popleft()
            self.check_deadline()
            self.engine.admit()
            if not self.calls:
                raise BackendError("no actor call in flight (a bug of the event loop)")
            item = self._next(timeout=self._budget())
            if item is not None:
                return item

    def get_nowait(self) -> tuple[str, Task, Any, float]:
        while True:
            if self.ready:
                return self.ready.popleft()
            if not self.calls or not ray.wait(list(self.calls), num_returns=1, timeout=0)[0]:
                raise queue.Empty
            item = self._next(timeout=0)
            if item is not None:
                return item

    def _next(self, timeout: float | None) -> tuple[str, Task, Any, float] | None:
        """The next finished call as an item, or ``None`` when it was lost and sent again (or
        none finished within ``timeout`` seconds: frozen actors were lost)."""
        if not self.calls:
            raise BackendError("no actor call in flight (a bug of the event loop)")
        done, _ = ray.wait(list(self.calls), num_returns=1, timeout=timeout)
        if not done:
            self._expire()
            return None
        ref = done[0]
        call = self.calls.pop(ref)
        self.since[call.actor] = time.monotonic()
        try:
            rows, seconds = ray.get(ref, timeout=self.engine.task_deadline())
        except ray.exceptions.TaskCancelledError:
            return ("preempted", call.task, None, 0.0)
        except ray.exceptions.RayActorError:
            self.lost_tasks += 1
            self.engine.lose_actor(call.actor)    # (its slot may have moved already)
            self.submit(call.slot, call.job)   # still wanted: the same job on a live actor
            return None
        except ray.exceptions.RayError as error:
            return ("error", call.task, BackendError(f"target server failed: {error}"), 0.0)
        self.engine.observe(seconds)
        self.engine.answered.add(call.actor)
        if rows is None:
            return ("preempted", call.task, None, seconds)
        return ("done", call.task, rows, seconds)


@dataclass(frozen=True)
class _ActorInbox:
    outbox: _RayOutbox
    slot: int

    def put(self, job: _Job) -> None:
        self.outbox.submit(self.slot, job)


@dataclass(frozen=True)
class _ActorProxy:
    """Server ``slot`` as `_WallClockDSI` sees a server: an inbox that calls its actor."""

    inbox: _ActorInbox


class _RayDSI(_WallClockDSI):
    """`_WallClockDSI` whose servers are actors: preemption also cancels the actor call."""

    def preempt(self, task: Task, why: str) -> None:
        super().preempt(task, why)
        outbox = self.outbox
        assert isinstance(outbox, _RayOutbox)
        outbox.cancel(task.id)

    def run(self) -> Run:
        outbox = self.outbox
        assert isinstance(outbox, _RayOutbox)
        try:
            return super().run()
        except BaseException:
            outbox.abandon()
            raise
