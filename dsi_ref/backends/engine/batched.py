"""DSI's target servers as the rows of one batched forward on one device (``Engine(batched=True)``).

The loop, stated (docs/gpu-backend.md, "One GPU, batched servers"): one thread owns the device.
Whenever it is free, one forward takes *every* task submitted and not preempted at that moment —
the frontier task and every verification window that has a server — one per server row, without
waiting for a full batch and without fixed rounds. When the forward ends, its results are handed
to the committer **in the same thread, before the next forward is gathered**: the tasks the
committer submits on them (the next frontier task, a queued window that gets the freed server)
join the very next forward instead of missing it. The drafter drafts continuously in the
calling thread; the run's state is shared under one lock, held by either thread only while it
applies the reference's rules (never during a forward).

Every rule is `dsi_ref.decoders.dsi.DSIRun`'s (inherited through `WallClockDSI`): windows,
dispatch to the ``sp_degree`` servers (server 0 reserved for the frontier task), the queue, the
committer and preemption. A task preempted before its forward starts never runs; a forward all
of whose tasks are preempted stops at the next layer segment (with the committer between
forwards, only the end of a run preempts a forward in flight). A draft whose context was
invalidated while its forward ran is dropped, as the reference drops a preempted draft.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from ...base.randomness import Randomness
from ...base.result import Run
from ...decoders.dsi import DSIConfig
from ..torch.session import BatchedSession
from .dsi import WallClockDSI
from .pool import Done, Failed, Job, Preempted, Report, Skipped
from .wallclock import Clock, EngineModels

__all__ = ["BatchedDSI", "BatchedPool"]


class BatchedPool:
    """All target servers as rows of one `BatchedSession`, served by one thread (a `ServerPool`;
    module docstring). ``handler`` (set by the run in progress) receives each forward's reports
    in this thread; without one they wait for `next_report`."""

    def __init__(self, session: BatchedSession) -> None:
        self.session = session
        self.outbox: queue.Queue[Report] = queue.Queue()
        self.cancelled: set[int] = set()
        self.inbox: queue.Queue[tuple[int, Job] | None] = queue.Queue()
        self.handler: Callable[[list[Report]], None] | None = None
        self.thread = threading.Thread(target=self._serve, name="dsi-target-batched",
                                       daemon=True)
        self.thread.start()

    # -- the ServerPool interface ---------------------------------------------------------------
    def limit(self, timeout: float | None) -> None:
        """Nothing to bound: the servers are threads of this process (`ServerPool.limit`)."""

    def begin(self) -> None:
        """Forget the previous run's cancellations."""
        self.cancelled.clear()

    def submit(self, slot: int, job: Job) -> None:
        """Queue ``job`` for row ``slot`` of a coming forward."""
        self.inbox.put((slot, job))

    def cancel(self, task_id: int) -> None:
        """Flag ``task_id``: it is left out of the next forwards (`Skipped`), and a forward all
        of whose tasks are flagged stops at its next segment (`Preempted`)."""
        self.cancelled.add(task_id)

    def next_report(self, block: bool) -> Report | None:
        """The next report handed over while no ``handler`` was set."""
        if block:
            return self.outbox.get()
        try:
            return self.outbox.get_nowait()
        except queue.Empty:
            return None

    def abandon(self) -> None:
        """Nothing to do: the thread finishes the forward in flight."""

    # -- the push interface of a pool with a thread of its own (`BatchedDSI`) ---------------------
    def listen(self, handler: Callable[[list[Report]], None] | None) -> None:
        """Hand each forward's reports to ``handler``, in the pool's thread, as the forward
        ends (``None``: queue them for `next_report` again)."""
        self.handler = handler

    def serving(self) -> bool:
        """Whether the pool's thread still serves (it can still report)."""
        return self.thread.is_alive()

    def close(self) -> None:
        """Serve what was submitted, then stop the thread."""
        self.inbox.put(None)
        self.thread.join()

    # -- the serving thread -----------------------------------------------------------------------
    def _serve(self) -> None:
        deferred: list[tuple[int, Job]] = []
        stop = False                              # told to stop: serve what is left, then end
        while True:
            items, deferred = deferred, []
            if not items:
                if stop:
                    return
                first = self.inbox.get()          # the device is free: wait for a task
                if first is None:
                    return
                items.append(first)
            stop = self._drain(items) or stop
            batch: dict[int, Job] = {}
            reports: list[Report] = []
            for slot, job in items:
                if job.task.id in self.cancelled:   # preempted before it started: never runs
                    reports.append(Skipped(job.task))
                elif slot in batch:                 # that row's previous task goes first
                    deferred.append((slot, job))
                else:
                    batch[slot] = job
            if batch:
                reports += self._forward(batch)
            self._hand_over(reports)

    def _drain(self, items: list[tuple[int, Job]]) -> bool:
        """Add every task submitted so far to ``items``; whether the server was told to stop."""
        while True:
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                return False
            if item is None:
                return True
            items.append(item)

    def _forward(self, batch: dict[int, Job]) -> list[Report]:
        ids = [job.task.id for job in batch.values()]
        began = time.perf_counter()
        try:   # stops between segments once every task of the forward is preempted
            rows = self.session.rows_batch(
                {slot: (job.tokens, job.count) for slot, job in batch.items()},
                lambda: all(i in self.cancelled for i in ids))
        except BaseException as error:
            return [Failed(job.task, error) for job in batch.values()]
        seconds = time.perf_counter() - began
        if rows is None:
            return [Preempted(job.task, seconds) for job in batch.values()]
        return [Done(job.task, rows[slot], seconds) for slot, job in batch.items()]

    def _hand_over(self, reports: list[Report]) -> None:
        handler = self.handler
        if handler is not None:
            handler(reports)
        else:
            for report in reports:
                self.outbox.put(report)


class BatchedDSI(WallClockDSI):
    """`WallClockDSI` on a `BatchedPool`: the committer handles each forward's reports in the
    pool's thread as soon as the forward ends (module docstring); the drafter drafts in this
    thread. ``Run.stats`` adds ``forwards`` (batched target forwards) and ``batched_rows``
    (tasks they carried) and ``committer_us`` (the pool thread's time in the committer)."""

    def __init__(self, models: EngineModels, pool: BatchedPool, prompt: tuple[int, ...],
                 max_new_tokens: int, rng: Randomness, config: DSIConfig) -> None:
        super().__init__(models, pool, prompt, max_new_tokens, rng, config)
        self.batched_pool = pool
        self.lock = threading.Condition()
        self.error: BaseException | None = None
        self.batched_forwards = 0
        self.batched_rows = 0
        self.committer_seconds = 0.0

    def handle(self, reports: list[Report]) -> None:
        """The reports of one forward (pool thread): the committer's rules, under the lock."""
        began = time.perf_counter()
        with self.lock:
            rows = sum(isinstance(report, Done | Preempted) for report in reports)
            self.batched_forwards += rows > 0
            self.batched_rows += rows
            for report in reports:
                if self.error is not None or self.done:
                    self.in_flight -= 1    # after an error or the last commit: only counted
                    if isinstance(report, Failed) and self.error is None:
                        self.error = report.error
                    continue
                try:
                    self.handle_report(report)
                except BaseException as error:
                    self.error = error
            self.committer_seconds += time.perf_counter() - began
            self.lock.notify_all()

    def over(self) -> bool:
        """Whether the last position is committed (read again after the lock was let go)."""
        return self.done

    def _wait(self) -> None:
        """Wait (holding the lock) for the pool thread's next hand-over."""
        assert self.clock is not None
        if not self.in_flight:
            raise RuntimeError("DSI event loop stalled: no draft to make and no task in flight "
                               "before the last commit (a bug)")
        waited = self.clock()
        self.lock.wait()
        self.wait_seconds += self.clock() - waited

    def run(self) -> Run:
        """The drafter's loop in this thread, the committer in the pool's (module docstring)."""
        session = self.models.drafter_session
        self.batched_pool.listen(self.handle)
        try:
            with self.lock:
                self.clock = clock = Clock(self.models.device)
                if not self.done:
                    self.start_drafting()
                    self.submit(0, 0, frontier=True)
            while True:
                with self.lock:
                    while self.error is None and not self.done and self.drafting is None:
                        self._wait()
                    if self.error is not None:
                        raise self.error
                    if self.done:
                        break
                    d, context = self.drafting, self.spec()
                began = clock()
                row = session.rows(self.prompt + context, 1)[0]   # q(. | speculative sequence)
                with self.lock:
                    if self.over():
                        break
                    self.now = clock()
                    self.drafter_seconds += self.now - began
                    if d is self.drafting:    # else invalidated meanwhile: dropped, like the
                        assert d is not None  # reference's preempted draft
                        d = self.drafting = replace(d, row=row)   # a new value, not a change
                        self.events += 1
                        self.finish_draft(d)
            with self.lock:
                latency = self.now        # the last commit (later results are only counted)
                if self.error is not None:
                    raise self.error
        finally:
            with self.lock:               # let the forwards in flight end before the next run
                while self.in_flight and self.batched_pool.serving():
                    self.lock.wait(0.1)
            self.batched_pool.listen(None)
        if self.error is not None:
            raise self.error
        return self.summary(latency, forwards=self.batched_forwards,
                            batched_rows=self.batched_rows,
                            committer_us=round(self.committer_seconds * 1e6))
