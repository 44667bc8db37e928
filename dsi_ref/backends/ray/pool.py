"""The Ray backend's `ServerPool`: each job an actor call, with deadlines and lost calls resent.

`RayPool` is what a wall-clock DSI run (`dsi_ref.backends.engine.dsi.WallClockDSI`) sees of the
server actors of a `Fleet`: `submit` calls ``rows`` on the actor serving the slot, `cancel` is
`ray.cancel` of the call (its `Preempted` report is ready at once: the reply is never read, so
nothing it computed can be committed, and the run does not wait for Ray to confirm), and
`next_report` waits for the next reply within the deadlines: an actor with calls in flight that
answers none of them within its deadline is *frozen* and lost like a dead one; a call whose actor
died is *lost* and sent again, with the same tokens, to a live actor (the same weights give the
same rows). Every wait is bounded. The rules are `RayEngine`'s (`dsi_ref.backends.ray.engine`),
documented in docs/ray-backend.md.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import ray
import ray.exceptions

from ...base.errors import BackendError, ServerTimeoutError
from ...decoders.dsi import Task
from ..engine.pool import Done, Failed, Job, Preempted, Report
from .fleet import Actor, Fleet

__all__ = ["RayPool"]


@dataclass
class _Call:
    """An actor call in flight: its task, the job (to send again if the actor dies), the slot,
    the actor."""

    task: Task
    job: Job
    slot: int
    actor: Actor


class RayPool:
    """A `ServerPool` over the actors of ``fleet`` (see the module docstring).

    ``lost_tasks`` and ``frozen_servers`` count, over the pool's life, the calls lost with their
    actor and the actors lost for missing their deadline. ``deadline`` (``time.monotonic``) and
    ``timeout`` bound the run in progress (`check_deadline`).
    """

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.calls: dict[ray.ObjectRef[Any], _Call] = {}      # calls whose reply is awaited
        self.ready: deque[Report] = deque()                   # reports of cancelled calls
        self.lost_tasks = 0
        self.frozen_servers = 0
        self.since: dict[Actor, float] = {}  # its last reply, or the call sent to it while idle
        self.deadline: float | None = None   # the run's (time.monotonic)
        self.timeout: float | None = None

    # -- the ServerPool interface ---------------------------------------------------------------
    def limit(self, timeout: float | None) -> None:
        """Bound what follows (the warm-up and the run) to ``timeout`` seconds from now
        (`check_deadline`); ``None`` lifts the bound (`ServerPool.limit`)."""
        self.timeout = timeout
        self.deadline = None if timeout is None else time.monotonic() + timeout

    def begin(self) -> None:
        """Nothing to forget: a run ends with no call in flight (or abandons them)."""

    def submit(self, slot: int, job: Job) -> None:
        """Call ``rows`` on the actor serving ``slot``."""
        actor = self.fleet.slots[slot].serving
        if all(call.actor is not actor for call in self.calls.values()):
            self.since[actor] = time.monotonic()
        ref = actor.handle.rows.remote(job.tokens, job.count)
        self.calls[ref] = _Call(job.task, job, slot, actor)

    def cancel(self, task_id: int) -> None:
        """`ray.cancel` the task's call and make its `Preempted` report ready now: the call's
        reply (rows or `TaskCancelledError`) is never read, so nothing it computed can be
        committed, and the run does not wait for Ray to confirm the cancellation (which may
        come late)."""
        for ref in [r for r, call in self.calls.items() if call.task.id == task_id]:
            call = self.calls.pop(ref)
            ray.cancel(ref)
            self.ready.append(Preempted(call.task, 0.0))

    def next_report(self, block: bool) -> Report | None:
        """The next report: a cancelled call's, else the next reply (a lost call is sent again
        instead of reported). With ``block``, waits within the deadlines; `ServerLostError`
        (or `ServerTimeoutError`) when no actor is left, `ServerTimeoutError` past the run's
        timeout."""
        while True:
            if self.ready:
                return self.ready.popleft()
            if block:
                self.check_deadline()
                self.fleet.admit()
                if not self.calls:
                    raise BackendError("no actor call in flight (a bug of the event loop)")
                report = self._next(timeout=self._budget())
            else:
                if not self.calls or not ray.wait(list(self.calls), num_returns=1,
                                                  timeout=0)[0]:
                    return None
                report = self._next(timeout=0)
            if report is not None:
                return report

    def abandon(self) -> None:
        """Cancel every call in flight and forget them (a run that raised)."""
        for ref in self.calls:
            with contextlib.suppress(Exception):
                ray.cancel(ref)
        self.calls.clear()
        self.ready.clear()

    def close(self) -> None:
        """Forget every call (the actors are gone)."""
        self.calls.clear()
        self.ready.clear()

    # -- deadlines --------------------------------------------------------------------------------
    def check_deadline(self) -> None:
        """`ServerTimeoutError` when the run's ``timeout`` has passed."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise ServerTimeoutError(f"the DSI run did not end within its timeout of "
                                     f"{self.timeout:g} s; no token of an unfinished call was "
                                     "committed")

    def _budget(self) -> float:
        """Seconds until the next deadline: a server's (its per-task deadline, or
        ``start_timeout`` for an actor that never answered), a replacement's (`Fleet.admit`),
        or the run's."""
        ends = [self.since[call.actor] + self.fleet.deadline(call.actor)
                for call in self.calls.values()] + self.fleet.admission_checks()
        if self.deadline is not None:
            ends.append(self.deadline)
        return max(0.0, min(ends) - time.monotonic())

    def _expire(self) -> None:
        """Lose every actor past its per-task deadline (frozen) and send its calls again."""
        self.check_deadline()
        now, fleet = time.monotonic(), self.fleet
        frozen = sorted({call.actor for call in self.calls.values()
                         if now - self.since[call.actor] >= fleet.deadline(call.actor)},
                        key=lambda actor: actor.index)
        for actor in frozen:
            self.frozen_servers += 1
            fleet.lose(actor, frozen_after=fleet.deadline(actor))
            for ref, call in [(r, c) for r, c in self.calls.items() if c.actor is actor]:
                del self.calls[ref]
                self.lost_tasks += 1
                self.submit(call.slot, call.job)   # still wanted: on a live actor

    def _next(self, timeout: float | None) -> Report | None:
        """The next finished call's report, or ``None`` when it was lost and sent again (or
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
            rows, seconds = ray.get(ref, timeout=self.fleet.task_deadline())
        except ray.exceptions.TaskCancelledError:
            return Preempted(call.task, 0.0)
        except ray.exceptions.RayActorError:
            self.lost_tasks += 1
            self.fleet.lose(call.actor)          # (its slot may have moved already)
            self.submit(call.slot, call.job)     # still wanted: the same job on a live actor
            return None
        except ray.exceptions.RayError as error:
            return Failed(call.task, BackendError(f"target server failed: {error}"))
        self.fleet.observe(seconds)
        call.actor.answered = True
        if rows is None:
            return Preempted(call.task, seconds)
        return Done(call.task, rows, seconds)

    # -- before a run -----------------------------------------------------------------------------
    def warm_up(self, prompt: tuple[int, ...], sp_degree: int) -> None:
        """Prefill the live servers of the first ``sp_degree`` slots on the prompt, each within
        its deadline (``start_timeout`` for an actor that never answered, else the per-task
        deadline): one that misses it is frozen and lost (`ServerTimeoutError` when none is
        left)."""
        fleet = self.fleet
        live = [a for a in dict.fromkeys(s.serving for s in fleet.slots[:sp_degree])
                if not a.dead]
        began = time.monotonic()
        pending = {a.handle.rows.remote(prompt, 1): a for a in live}
        ends = {ref: began + fleet.deadline(a) for ref, a in pending.items()}
        while pending:
            self.check_deadline()
            end = min([*ends.values(), *([self.deadline] if self.deadline else [])])
            done, _ = ray.wait(list(pending), num_returns=1,
                               timeout=max(0.0, end - time.monotonic()))
            if done:
                actor = pending.pop(done[0])
                del ends[done[0]]
                # a dead actor is found, and replaced, by the run's first call to it
                with contextlib.suppress(ray.exceptions.RayActorError):
                    _, seconds = ray.get(done[0], timeout=fleet.task_deadline())
                    actor.answered = True
                    fleet.observe(seconds)
                continue
            now = time.monotonic()
            for ref in [r for r, e in ends.items() if e <= now]:
                actor = pending.pop(ref)
                del ends[ref]
                self.frozen_servers += 1
                fleet.lose(actor, frozen_after=now - began)
