"""DSI's target servers as threads: `ThreadPool`, the engine's default `ServerPool`.

Each server is a thread with its own session (KV cache, and on CUDA its own stream and CUDA
graphs), started on first use and reused across runs. A job cancelled before its server takes it
never runs (`Skipped`); a running one stops at the next boundary between layer segments
(`Preempted`; a GPU kernel cannot be interrupted, so the forward is split into CUDA graphs per
segment and the server checks its flag between them). On one GPU the servers' streams share the
device; `FrontierGate` is the optional policy that holds a frontier forward back while a
verification forward runs (``Engine(frontier_yields=True)``).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from functools import partial

from ..torch.session import SessionLike
from .pool import Done, Failed, Job, Preempted, Report, Skipped

__all__ = ["FrontierGate", "ThreadPool"]


class FrontierGate:
    """The one-GPU policy ``frontier_yields``: a frontier forward waits, before each of its layer
    segments, while some verification forward is running (hardware stream priorities cannot
    hold back kernels already running; this does, at segment granularity)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.active = 0                   # verification forwards running
        self.lock = threading.Lock()

    def change(self, delta: int) -> None:
        """``delta`` more verification forwards are running."""
        with self.lock:
            self.active += delta

    def wait(self, cancelled: Callable[[], bool]) -> bool:
        """Wait while a verification forward runs; return ``cancelled()``."""
        while self.enabled and self.active > 0 and not cancelled():
            time.sleep(50e-6)
        return cancelled()


class _Server:
    """A target server: a thread with its own session, reporting to its pool's outbox."""

    def __init__(self, index: int, session: SessionLike, outbox: queue.Queue[Report],
                 cancelled: set[int], gate: FrontierGate) -> None:
        self.index, self.session, self.outbox, self.cancelled = index, session, outbox, cancelled
        self.gate = gate
        self.inbox: queue.Queue[Job | None] = queue.Queue()
        self.thread = threading.Thread(target=self._serve, name=f"dsi-target-{index}",
                                       daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            job = self.inbox.get()
            if job is None:
                return
            task_id = job.task.id
            if task_id in self.cancelled:   # preempted before it started: never runs
                self.outbox.put(Skipped(job.task))
                continue
            began = time.perf_counter()
            check: Callable[[], bool] = partial(self.cancelled.__contains__, task_id)
            verification = not job.task.frontier
            if not verification and self.gate.enabled:
                check = partial(self.gate.wait, check)
                if check():                 # preempted while yielding, before it started
                    self.outbox.put(Skipped(job.task))
                    continue
            if verification:
                self.gate.change(+1)
            try:   # preempted while running: stops at the next layer segment
                rows = self.session.rows_unless(job.tokens, job.count, check)
            except BaseException as error:
                self.outbox.put(Failed(job.task, error))
                continue
            finally:
                if verification:
                    self.gate.change(-1)
            seconds = time.perf_counter() - began
            self.outbox.put(Done(job.task, rows, seconds) if rows is not None
                            else Preempted(job.task, seconds))


class ThreadPool:
    """Target servers as threads (a `ServerPool`; see the module docstring).

    Args:
        session: makes server ``index``'s session (its device, stream priority, segments).
        gate: the frontier policy the servers share.
    """

    def __init__(self, session: Callable[[int], SessionLike], gate: FrontierGate) -> None:
        self.make_session = session
        self.gate = gate
        self.outbox: queue.Queue[Report] = queue.Queue()
        self.cancelled: set[int] = set()
        self.servers: list[_Server] = []

    def grow(self, sp_degree: int) -> None:
        """Start servers until there are ``sp_degree`` (they are reused across runs)."""
        while len(self.servers) < sp_degree:
            index = len(self.servers)
            self.servers.append(_Server(index, self.make_session(index), self.outbox,
                                        self.cancelled, self.gate))

    def sessions(self, sp_degree: int) -> list[SessionLike]:
        """The sessions of the first ``sp_degree`` servers (started if needed), e.g. to
        prefill them before a run."""
        self.grow(sp_degree)
        return [server.session for server in self.servers[:sp_degree]]

    def limit(self, timeout: float | None) -> None:
        """Nothing to bound: the servers are threads of this process (`ServerPool.limit`)."""

    def begin(self) -> None:
        """Forget the previous run's cancellations."""
        self.cancelled.clear()

    def submit(self, slot: int, job: Job) -> None:
        """Queue ``job`` on server ``slot``'s thread."""
        self.servers[slot].inbox.put(job)

    def cancel(self, task_id: int) -> None:
        """Flag ``task_id``: its server skips it, or stops it at the next segment."""
        self.cancelled.add(task_id)

    def next_report(self, block: bool) -> Report | None:
        """The next report from any server (``None`` when none is ready and not ``block``)."""
        if block:
            return self.outbox.get()
        try:
            return self.outbox.get_nowait()
        except queue.Empty:
            return None

    def abandon(self) -> None:
        """Nothing to do: the servers finish the jobs in flight."""

    def close(self) -> None:
        """Stop the server threads (after the jobs they hold)."""
        for server in self.servers:
            server.inbox.put(None)
        for server in self.servers:
            server.thread.join()
        self.servers = []
