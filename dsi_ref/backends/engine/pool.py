"""The server-pool interface: how a wall-clock DSI run talks to its ``SP`` target servers.

A DSI run (`dsi_ref.backends.engine.dsi.WallClockDSI`) hands each verification or frontier task
to a server slot as a `Job`, cancels the tasks it preempts, and reads one `Report` per job it
submitted. Three pools implement `ServerPool`, whatever the servers are:

* `dsi_ref.backends.engine.threads.ThreadPool`: a thread per server, each with its own session
  (KV cache, CUDA stream and graphs);
* `dsi_ref.backends.engine.batched.BatchedPool`: the servers as the rows of one batched forward,
  served by one thread;
* `dsi_ref.backends.ray.pool.RayPool`: a Ray actor per server, in its own process.

The run needs nothing else of them, so the run is written once (docs/gpu-backend.md,
docs/ray-backend.md). A report is one of four typed records, never a tagged tuple: `Done` (the
rows), `Preempted` (cancelled while running, or a cancelled call whose reply is never read),
`Skipped` (cancelled before it started: it never ran) and `Failed` (the server raised).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ...decoders.dsi import Task

__all__ = ["Done", "Failed", "Job", "Preempted", "Report", "ServerPool", "Skipped"]


@dataclass(frozen=True, slots=True)
class Job:
    """A task as a server runs it: ``count`` next-token rows after ``tokens`` (the prompt and
    the task's context)."""

    task: Task
    tokens: tuple[int, ...]
    count: int


@dataclass(frozen=True, slots=True)
class Done:
    """The job ran to its end: its ``rows`` [count, V], and the forward's ``seconds``."""

    task: Task
    rows: np.ndarray
    seconds: float


@dataclass(frozen=True, slots=True)
class Preempted:
    """The job was cancelled while it ran (it stopped at a layer segment boundary, or its call
    was cancelled): no rows. ``seconds``: how long it ran (0 when unknown)."""

    task: Task
    seconds: float


@dataclass(frozen=True, slots=True)
class Skipped:
    """The job was cancelled before it started: it never ran."""

    task: Task


@dataclass(frozen=True, slots=True)
class Failed:
    """The server raised ``error`` while it ran the job."""

    task: Task
    error: BaseException


#: What a server reports, once per job submitted.
Report = Done | Preempted | Skipped | Failed


class ServerPool(Protocol):
    """``SP`` target servers, addressed by slot ``0 .. SP - 1`` (the run's ``server`` index).

    A run calls `begin` once, then `submit` for each task it dispatches, `cancel` for each task
    it preempts, and `next_report` until every job submitted has been reported; `abandon` when
    it raises before that.
    """

    def limit(self, timeout: float | None) -> None:
        """Bound what follows, a run and its warm-up, to ``timeout`` seconds (``None``: no
        bound): a pool whose waits may hang (the Ray pool: an actor can die or freeze) raises
        `ServerTimeoutError` once it passes; a pool whose servers are threads of this process
        has nothing to bound and ignores it."""
        ...

    def begin(self) -> None:
        """Start a run: forget the previous run's cancellations (task ids restart at 0)."""
        ...

    def submit(self, slot: int, job: Job) -> None:
        """Run ``job`` on server ``slot`` (after the jobs already sent to it)."""
        ...

    def cancel(self, task_id: int) -> None:
        """Preempt task ``task_id``: a job not started never runs (`Skipped`), a running one
        stops at its next layer segment (`Preempted`); either way it supplies no rows."""
        ...

    def next_report(self, block: bool) -> Report | None:
        """The next report of a job; ``None`` when none is ready and not ``block``. With
        ``block``, waits until one is (the pool bounds the wait where its servers may fail)."""
        ...

    def abandon(self) -> None:
        """The run raised before it read every report: stop or forget the jobs still in flight
        if the pool can (the Ray pool cancels their calls and never reads them; a thread pool's
        servers finish them)."""
        ...
