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

Every rule is `dsi_ref.decoders.dsi.DSIRun`'s (inherited through `_WallClockDSI`): windows,
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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...base.randomness import Randomness
from ...base.result import Run
from ...decoders.dsi import DSIConfig
from ..torch.session import BatchedSession
from .engine import _Clock, _Job, _WallClockDSI

if TYPE_CHECKING:
    from .engine import Engine

#: What a server reports per task: (status, task, rows or error, forward seconds).
Result = tuple[str, Any, Any, float]


class _BatchedServer:
    """All target servers as rows of one `BatchedSession`, served by one thread (module
    docstring). ``handler`` (set by the run in progress) receives each forward's results in
    this thread; without one they go to ``outbox``."""

    def __init__(self, session: BatchedSession, outbox: queue.Queue[Any],
                 cancelled: set[int]) -> None:
        self.session, self.outbox, self.cancelled = session, outbox, cancelled
        self.inbox: queue.Queue[tuple[int, _Job] | None] = queue.Queue()
        self.handler: Callable[[list[Result]], None] | None = None
        self.thread = threading.Thread(target=self._serve, name="dsi-target-batched",
                                       daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        deferred: list[tuple[int, _Job]] = []
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
            batch: dict[int, _Job] = {}
            results: list[Result] = []
            for slot, job in items:
                if job.task.id in self.cancelled:   # preempted before it started: never runs
                    results.append(("skipped", job.task, None, 0.0))
                elif slot in batch:                 # that row's previous task goes first
                    deferred.append((slot, job))
                else:
                    batch[slot] = job
            if batch:
                results += self._forward(batch)
            self._hand_over(results)

    def _drain(self, items: list[tuple[int, _Job]]) -> bool:
        """Add every task submitted so far to ``items``; whether the server was told to stop."""
        while True:
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                return False
            if item is None:
                return True
            items.append(item)

    def _forward(self, batch: dict[int, _Job]) -> list[Result]:
        ids = [job.task.id for job in batch.values()]
        began = time.perf_counter()
        try:   # stops between segments once every task of the forward is preempted
            rows = self.session.rows_batch(
                {slot: (job.tokens, job.count) for slot, job in batch.items()},
                lambda: all(i in self.cancelled for i in ids))
        except BaseException as error:
            return [("error", job.task, error, 0.0) for job in batch.values()]
        seconds = time.perf_counter() - began
        return [("done", job.task, rows[slot], seconds) if rows is not None
                else ("preempted", job.task, None, seconds) for slot, job in batch.items()]

    def _hand_over(self, results: list[Result]) -> None:
        handler = self.handler
        if handler is not None:
            handler(results)
        else:
            for result in results:
                self.outbox.put(result)


@dataclass(frozen=True)
class _SlotInbox:
    server: _BatchedServer
    slot: int

    def put(self, job: _Job) -> None:
        self.server.inbox.put((self.slot, job))


@dataclass(frozen=True)
class _SlotProxy:
    """Server ``slot`` of a `_BatchedServer`, as `_WallClockDSI` sees a server."""

    inbox: _SlotInbox


class _BatchedDSI(_WallClockDSI):
    """`_WallClockDSI` on a `_BatchedServer`: the committer handles each forward's results in
    the server's thread as soon as the forward ends (module docstring); the drafter drafts in
    this thread. ``Run.stats`` adds ``forwards`` (batched target forwards) and ``batched_rows``
    (tasks they carried) and ``committer_us`` (the server thread's time in the committer)."""

    def __init__(self, engine: Engine, prompt: tuple[int, ...], max_new_tokens: int,
                 rng: Randomness, config: DSIConfig) -> None:
        super().__init__(engine, prompt, max_new_tokens, rng, config)
        self.server = engine.batched_server(config.sp_degree)
        self.lock = threading.Condition()
        self.error: BaseException | None = None
        self.batched_forwards = 0
        self.batched_rows = 0
        self.committer_seconds = 0.0

    def handle(self, results: list[Result]) -> None:
        """The results of one forward (server thread): the committer's rules, under the lock."""
        began = time.perf_counter()
        with self.lock:
            rows = sum(status in ("done", "preempted") for status, *_ in results)
            self.batched_forwards += rows > 0
            self.batched_rows += rows
            for item in results:
                if self.error is not None or self.done:
                    self.in_flight -= 1    # after an error or the last commit: only counted
                    if item[0] == "error" and self.error is None:
                        self.error = item[2]
                    continue
                try:
                    self.handle_result(item)
                except BaseException as error:
                    self.error = error
            self.committer_seconds += time.perf_counter() - began
            self.lock.notify_all()

    def over(self) -> bool:
        """Whether the last position is committed (read again after the lock was let go)."""
        return self.done

    def _wait(self) -> None:
        """Wait (holding the lock) for the server thread's next hand-over."""
        assert self.clock is not None
        if not self.in_flight:
            raise RuntimeError("DSI event loop stalled: no draft to make and no task in flight "
                               "before the last commit (a bug)")
        waited = self.clock()
        self.lock.wait()
        self.wait_seconds += self.clock() - waited

    def run(self) -> Run:
        session = self.engine.drafter_session
        self.server.handler = self.handle
        try:
            with self.lock:
                self.clock = clock = _Clock(self.engine.device)
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
                        d.row = row
                        self.events += 1
                        self.finish_draft(d)
            with self.lock:
                latency = self.now        # the last commit (later results are only counted)
                if self.error is not None:
                    raise self.error
        finally:
            with self.lock:               # let the forwards in flight end before the next run
                while self.in_flight and self.server.thread.is_alive():
                    self.lock.wait(0.1)
            self.server.handler = None
        if self.error is not None:
            raise self.error
        return self.summary(latency, forwards=self.batched_forwards,
                            batched_rows=self.batched_rows,
                            committer_us=round(self.committer_seconds * 1e6))
