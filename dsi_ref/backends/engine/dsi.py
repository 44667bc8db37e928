"""DSI on the wall clock: the reference `DSIRun` with its target servers in a `ServerPool`.

`Engine.dsi` *is* `dsi_ref.decoders.dsi.DSIRun`: the committer, windows, frontier task, dispatch,
queueing and preemption rules of docs/dsi-semantics.md are inherited, not rewritten. Only the
event loop changes: the drafter and the committer run in the calling thread, which drafts
continuously and handles the servers' reports between draft forwards; a task dispatched to a
server is a `Job` submitted to the pool, a preempted task is cancelled in the pool. The pool is
any `ServerPool` (threads, the rows of one batched forward, Ray actors): the run needs nothing
else of it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...base.latency import Time
from ...base.randomness import Randomness
from ...base.result import Run
from ...decoders.dsi import DraftForward, DSIConfig, DSIRun, Task
from .pool import Done, Failed, Job, Report, ServerPool
from .vectorised import vectorised_rule
from .wallclock import Clock, EngineModels

__all__ = ["WallClockDSI"]


class WallClockDSI(DSIRun):
    """`DSIRun` with real forwards: the drafter in this thread, the target servers in ``pool``
    (`begin` is called here: one run at a time per pool)."""

    def __init__(self, models: EngineModels, pool: ServerPool, prompt: tuple[int, ...],
                 max_new_tokens: int, rng: Randomness, config: DSIConfig) -> None:
        super().__init__(models.target, models.drafter, prompt, max_new_tokens, rng, config)
        self.rule = vectorised_rule(config.verify)
        self.models = models
        self.pool = pool
        pool.begin()
        self.in_flight = 0              # jobs submitted and not reported yet
        self.clock: Clock | None = None
        self.drafter_seconds = 0.0
        self.wait_seconds = 0.0
        self.events = 0
        self.forward_seconds = 0.0      # completed (not preempted) target forwards
        self.forwards_completed = 0
        self.now = 0.0

    # the drafter: mark the position to draft; the event loop runs the forward
    def start_drafting(self) -> None:
        """`DSIRun.start_drafting`: the position to draft next (`DSIRun.next_draft_position`,
        the same stop rule); `run` makes the forward."""
        position = self.next_draft_position()
        self.drafting = (None if position is None
                         else DraftForward(position, self.now, self.now, None, ()))

    # a server: submit the task to the pool
    def run_on(self, task: Task, server: int) -> None:
        """`DSIRun.run_on`: the task, started, becomes a `Job` on server slot ``server`` (a new
        `Task`, as `DSIRun` makes one: a task never changes once made; its end is unknown until
        the forward returns)."""
        task = replace(task, server=server, start=self.now, end=None)
        self.busy[server] = task
        self.tasks.append(task)
        self.stats["max_busy_servers"] = max(self.stats["max_busy_servers"],
                                             sum(b is not None for b in self.busy))
        self.in_flight += 1
        self.pool.submit(server, Job(task, self.prompt + task.context,
                                     task.last - task.first + 1))

    def preempt(self, task: Task, why: str) -> None:
        """`DSIRun.preempt`, and the task cancelled in the pool."""
        self.pool.cancel(task.id)
        super().preempt(task, why)

    def finish_rows(self, task: Task, rows: np.ndarray) -> None:
        """`DSIRun.deliver_rows` with the rows the server computed, at the positions of the task
        not decided yet (`DSIRun.target_rows`'s positions)."""
        self.deliver_rows(task, {position: rows[position - task.first]
                                 for position in range(max(task.first, self.frontier),
                                                       task.last + 1)})

    def deliver(self, block: bool) -> None:
        """Handle every report ready (waiting for one first when ``block``)."""
        assert self.clock is not None
        if block:
            if not self.in_flight:
                raise RuntimeError("DSI event loop stalled: no draft to make and no task in "
                                   "flight before the last commit (a bug)")
            waited = self.clock()
            report = self.pool.next_report(block=True)
            self.wait_seconds += self.clock() - waited
        else:
            report = self.pool.next_report(block=False)
        while report is not None:
            self.handle_report(report)
            report = self.pool.next_report(block=False)

    def handle_report(self, report: Report) -> None:
        """One server report: a finished task's rows go to the committer (`finish_rows`)
        unless the task was preempted meanwhile; a failure raises. After the last commit a
        report is only counted: the clock stays at that commit, the run's time."""
        assert self.clock is not None
        self.in_flight -= 1
        if isinstance(report, Failed):
            raise report.error
        if not self.done:
            self.now = self.clock()
        if isinstance(report, Done):
            self.forward_seconds += report.seconds
            self.forwards_completed += 1
            if report.task in self.tasks and not self.done:
                self.events += 1
                self.finish_rows(report.task, report.rows)

    def run(self) -> Run:
        """The event loop: draft whenever there is a draft to make, else wait for a report;
        after the last commit, wait for the jobs still in flight (so the next run starts on
        idle servers). A run that raises abandons them (`ServerPool.abandon`)."""
        try:
            return self._run()
        except BaseException:
            self.pool.abandon()
            raise

    def _run(self) -> Run:
        session = self.models.drafter_session
        self.clock = clock = Clock(self.models.device)
        if not self.done:
            self.start_drafting()
            self.submit(0, 0, frontier=True)
        while not self.done:
            self.deliver(block=self.drafting is None)
            if self.done or self.drafting is None:
                continue
            began = clock()
            row = session.rows(self.prompt + self.spec(), 1)[0]   # q(. | speculative sequence)
            self.now = clock()
            self.drafter_seconds += self.now - began
            d = self.drafting = replace(self.drafting, row=row)  # a new value, as DSIRun's
            self.events += 1
            self.finish_draft(d)
        latency = self.now
        while self.in_flight:        # let preempted forwards end before the next run
            report = self.pool.next_report(block=True)
            self.in_flight -= 1
            if isinstance(report, Failed):
                raise report.error
        return self.summary(latency)

    def summary(self, latency: Time, **extra: int) -> Run:
        """The finished `Run`: the committed tokens, ``latency`` and the stats (``extra``
        added)."""
        stats = dict(self.stats)
        overhead = max(0.0, latency - self.drafter_seconds - self.wait_seconds)
        stats.update(extra)
        stats.update(events=self.events, orchestration_us=round(overhead * 1e6),
                     drafter_us=round(self.drafter_seconds * 1e6),
                     target_forward_us=round(self.forward_seconds * 1e6
                                             / max(1, self.forwards_completed)),
                     drafter_forward_us=round(self.drafter_seconds * 1e6   # one per draft
                                              / max(1, self.stats["drafts"])))
        return Run(tuple(self.committed), latency, tuple(self.trace), stats)
