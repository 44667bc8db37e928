"""Real (wall-clock) execution of non-SI, SI and DSI on torch models, with real concurrency.

The algorithms are the reference ones, run against real time instead of the virtual clock; the
engine subclasses the reference runs and overrides their seams, never their steps:

* `Engine.speculative` and `Engine.autoregressive` *are* `dsi_ref.decoders.speculative.SIRun`
  (non-SI is `SIRun` without a drafter): window, draft, score, verify and bonus are inherited.
  Only the model seam (a cached `Session` forward; SI scores prefix + drafts in *one* target
  forward, as the algorithm says), the clock (wall-clock seconds, prefill untimed) and the rule
  (`vectorised_rule`) change.
* `Engine.dsi` *is* `dsi_ref.decoders.dsi.DSIRun` — the committer, windows, frontier task,
  dispatch, queueing and preemption rules of docs/dsi-semantics.md are inherited, not rewritten.
  Only the event loop changes: ``sp_degree`` target servers are worker threads, each with its own
  KV cache and (on CUDA) its own stream and CUDA graphs; the drafter and the committer run in the
  calling thread, which drafts continuously and handles finished tasks between draft forwards.

Verification uses the rules of `dsi_ref.decoders.verification` (same keys, same keyed uniforms),
with the array work vectorised (`vectorised_rule`): under ``Sampler(seed)`` a decision is the same
function of (target row, draft row, draft, key) as in the reference decoders.

Differences from the virtual clock, stated (see docs/gpu-backend.md):

* **Preemption granularity.** A preempted task that has not started never starts; a running one
  stops at the next boundary between layer segments (``Engine(segments=...)``; a GPU kernel
  cannot be interrupted, so the forward is split into CUDA graphs per segment and the server
  checks between them), so its server takes the next task up to one segment late.
* **Committer latency.** The committer runs between the drafter's forwards, so a finished task is
  handled at most one drafter forward (``c``) after it finishes.
* **One GPU.** On one device the servers' streams share the GPU: their forwards overlap only as
  far as the hardware lets them (the frontier server gets the lowest stream priority;
  ``frontier_yields`` holds frontier forwards back; ``batched`` makes the servers rows of one
  batched forward instead). docs/gpu-backend.md has the measurements.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ...base.errors import BackendError
from ...base.latency import Time
from ...base.randomness import Randomness
from ...base.result import Event, Run
from ...decoders.autoregressive import non_si_config
from ...decoders.common import DEFAULT_LATENCY, Recorder, check_inputs
from ...decoders.dsi import DraftForward, DSIConfig, DSIRun, QueuePolicy, Task
from ...decoders.speculative import STATS, ModelName, Rows, SIRun, SpeculativeConfig
from ...decoders.tree import TreeRule, TreeVerifyRule
from ...decoders.verification import Rule, VerifyRule
from ..torch.model import TorchLM
from ..torch.session import BackendLM, BatchedSession, SessionLike
from ..torch.transformer import canonical_device
from .vectorised import vectorised_rule

if TYPE_CHECKING:
    from .batched import _BatchedServer, _SlotProxy

__all__ = ["Engine", "vectorised_rule"]


# -- the engine ------------------------------------------------------------------------------------
class _Clock:
    """Wall-clock seconds since the start of a run (synchronised with the device at start)."""

    def __init__(self, device: torch.device) -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        self.t0 = time.perf_counter()

    def __call__(self) -> float:
        return time.perf_counter() - self.t0


@dataclass(frozen=True)
class _Job:
    task: Task
    tokens: tuple[int, ...]
    count: int


class _Yield:
    """The one-GPU policy ``frontier_yields``: a frontier forward waits, before each of its layer
    segments, while some verification forward is running (hardware stream priorities cannot
    hold back kernels already running; this does, at segment granularity)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.active = 0                   # verification forwards running
        self.lock = threading.Lock()

    def change(self, delta: int) -> None:
        with self.lock:
            self.active += delta

    def wait(self, cancelled: Callable[[], bool]) -> bool:
        """Wait while a verification forward runs; return ``cancelled()``."""
        while self.enabled and self.active > 0 and not cancelled():
            time.sleep(50e-6)
        return cancelled()


class _Server:
    """A target server: a thread with its own session (KV cache, stream, graphs)."""

    def __init__(self, index: int, session: SessionLike, outbox: queue.Queue[Any],
                 cancelled: set[int], gate: _Yield) -> None:
        self.index, self.session, self.outbox, self.cancelled = index, session, outbox, cancelled
        self.gate = gate
        self.inbox: queue.Queue[_Job | None] = queue.Queue()
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
                self.outbox.put(("skipped", job.task, None, 0.0))
                continue
            began = time.perf_counter()
            check: Callable[[], bool] = partial(self.cancelled.__contains__, task_id)
            verification = not job.task.frontier
            if not verification and self.gate.enabled:
                check = partial(self.gate.wait, check)
                if check():                 # preempted while yielding, before it started
                    self.outbox.put(("skipped", job.task, None, 0.0))
                    continue
            if verification:
                self.gate.change(+1)
            try:   # preempted while running: stops at the next layer segment
                rows = self.session.rows_unless(job.tokens, job.count, check)
            except BaseException as error:
                self.outbox.put(("error", job.task, error, 0.0))
                continue
            finally:
                if verification:
                    self.gate.change(-1)
            seconds = time.perf_counter() - began
            self.outbox.put(("done", job.task, rows, seconds) if rows is not None
                            else ("preempted", job.task, None, seconds))


class _WallClockRecorder(Recorder):
    """`Recorder` on the wall clock (SI, non-SI and tree runs): a forward spans ``began`` (set by
    the run when the forward starts) to the moment it is recorded; a commit is a mark at the
    moment it is recorded."""

    def __init__(self, clock: Callable[[], float], stats: Sequence[str]) -> None:
        super().__init__(DEFAULT_LATENCY, stats)
        self.clock = clock
        self.began = 0.0

    def forward(self, model: str, kind: str, positions: tuple[int, ...], rng: object,
                note: str = "") -> None:
        """Record the forward that started at ``began``."""
        end = self.clock()
        self.trace.append(Event(model, kind, self.began, end, positions, note))
        self.time = end

    def commit(self, positions: tuple[int, ...], note: str) -> None:
        """Mark a commit now."""
        now = self.clock()
        self.trace.append(Event("committer", "commit", now, now, positions, note))

    def result(self, tokens: list[int]) -> Run:
        """The finished `Run`, its time the clock's now (seconds)."""
        now: Time = self.clock()
        return Run(tuple(tokens), now, tuple(self.trace), dict(self.stats))


class _WallClockSI(SIRun):
    """`SIRun` with real forwards: cached sessions for the models, wall-clock seconds for the
    clock (`_WallClockRecorder`, from `run`; the sessions are prefilled before), the vectorised
    rule. Without a drafter: non-SI."""

    def __init__(self, engine: Engine, prompt: tuple[int, ...], max_new_tokens: int,
                 rng: Randomness, config: SpeculativeConfig, si: bool) -> None:
        super().__init__(engine.target, engine.drafter if si else None, prompt, max_new_tokens,
                         rng, config)
        self.rule = vectorised_rule(config.verify)
        self.device = engine.device
        self.sessions = {"target": engine.target_session}
        if si:
            self.sessions["drafter"] = engine.drafter_session

    def model_rows(self, model: ModelName, context: tuple[int, ...], count: int) -> Rows:
        rows: Any = self.sessions[model].rows(self.prompt + context, count)   # one forward
        return rows  # type: ignore[no-any-return]

    def forward(self, model: ModelName, kind: str, positions: tuple[int, ...],
                context: tuple[int, ...], count: int) -> Rows:
        assert isinstance(self.rec, _WallClockRecorder)
        self.rec.began = self.rec.clock()
        return super().forward(model, kind, positions, context, count)

    def run(self) -> Run:
        self.rec = _WallClockRecorder(_Clock(self.device), STATS)
        self.stats = self.rec.stats
        return super().run()

    def result(self) -> Run:
        assert isinstance(self.rec, _WallClockRecorder)
        return Run(tuple(self.tokens), self.rec.clock(), tuple(self.rec.trace), self.counters())


class _WallClockDSI(DSIRun):
    """`DSIRun` with real forwards: drafter in this thread, target servers as threads."""

    def __init__(self, engine: Engine, prompt: tuple[int, ...], max_new_tokens: int,
                 rng: Randomness, config: DSIConfig) -> None:
        super().__init__(engine.target, engine.drafter, prompt, max_new_tokens, rng, config)
        self.rule = vectorised_rule(config.verify)
        self.engine = engine
        self.servers = engine.servers(config.sp_degree)
        self.outbox = engine.outbox
        self.cancelled = engine.cancelled
        self.cancelled.clear()
        self.in_flight = 0
        self.clock: _Clock | None = None
        self.drafter_seconds = 0.0
        self.wait_seconds = 0.0
        self.events = 0
        self.forward_seconds = 0.0      # completed (not preempted) target forwards
        self.forwards_completed = 0
        self.now = 0.0

    # the drafter: mark the position to draft; the event loop runs the forward
    def start_drafting(self) -> None:
        position = self.frontier + len(self.drafts)
        context = self.spec()
        if self.done or position >= self.n or (context and context[-1] == self.eos):
            self.drafting = None
            return
        self.drafting = DraftForward(position, self.now, self.now, None, ())

    # a server: send the task to its thread
    def run_on(self, task: Task, server: int) -> None:
        task.server, task.start, task.end = server, self.now, None
        self.busy[server] = task
        self.tasks.append(task)
        self.stats["max_busy_servers"] = max(self.stats["max_busy_servers"],
                                             sum(b is not None for b in self.busy))
        self.in_flight += 1
        self.servers[server].inbox.put(_Job(task, self.prompt + task.context,
                                            task.last - task.first + 1))

    def preempt(self, task: Task, why: str) -> None:
        self.cancelled.add(task.id)
        super().preempt(task, why)

    def finish_rows(self, task: Task, rows: np.ndarray) -> None:
        """`DSIRun.finish_task` with the rows the server computed."""
        self.release(task)
        self.trace.append(Event(f"target-{task.server}", "forward" if task.frontier else "verify",
                                task.start if task.start is not None else self.now, self.now,
                                tuple(range(task.first, task.last + 1)), task.label))
        for position in range(max(task.first, self.frontier), task.last + 1):
            self.supplied[position] = rows[position - task.first]
        self.commit_ready(task)
        self.dispatch()

    def deliver(self, block: bool) -> None:
        """Handle every finished task (waiting for one first when ``block``)."""
        assert self.clock is not None
        while True:
            try:
                if block:
                    if not self.in_flight:
                        raise RuntimeError("DSI event loop stalled: no draft to make and no "
                                           "task in flight before the last commit (a bug)")
                    waited = self.clock()
                    item = self.outbox.get()
                    self.wait_seconds += self.clock() - waited
                    block = False
                else:
                    item = self.outbox.get_nowait()
            except queue.Empty:
                return
            self.handle_result(item)

    def handle_result(self, item: tuple[str, Task, Any, float]) -> None:
        """One server report ``(status, task, rows or error, seconds)``: a finished task's rows
        go to the committer (`finish_rows`) unless the task was preempted meanwhile. After the
        last commit a report is only counted: the clock stays at that commit, the run's time."""
        assert self.clock is not None
        status, task, payload, seconds = item
        self.in_flight -= 1
        if status == "error":
            raise payload
        if not self.done:
            self.now = self.clock()
        if status == "done":
            self.forward_seconds += seconds
            self.forwards_completed += 1
        if status == "done" and task in self.tasks and not self.done:
            self.events += 1
            self.finish_rows(task, payload)

    def run(self) -> Run:
        session = self.engine.drafter_session
        self.clock = clock = _Clock(self.engine.device)
        if not self.done:
            self.start_drafting()
            self.submit(0, 0, frontier=True)
        while not self.done:
            self.deliver(block=self.drafting is None)
            if self.done or self.drafting is None:
                continue
            d = self.drafting
            began = clock()
            row = session.rows(self.prompt + self.spec(), 1)[0]   # q(. | speculative sequence)
            self.now = clock()
            self.drafter_seconds += self.now - began
            d.row = row
            self.events += 1
            self.finish_draft(d)
        latency = self.now
        while self.in_flight:        # let preempted forwards end before the next run
            status, _, payload, _ = self.outbox.get()
            self.in_flight -= 1
            if status == "error":
                raise payload
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


class Engine:
    """Sessions for a target/drafter pair, reused across runs (KV caches, streams, CUDA graphs).

    Every run prefills the sessions it uses on the prompt *before* its clock starts, so
    ``Run.time`` (seconds) is the decoding time of the new tokens, the quantity the simulator's
    TPOT-unit latencies predict.

    Args:
        target: the target model.
        drafter: the drafter (needed for SI and DSI).
        graphs: CUDA graphs in every session (default: on CUDA).
        segments: layer segments per target-server forward: a preempted task's running forward
            stops at the next segment boundary (1: runs to its end).
        frontier_yields: on one GPU, hold a frontier forward back (between its segments) while
            a verification forward runs. A scheduling policy for servers that share a device:
            the committer and every rule are unchanged (so are the tokens), but the
            frontier task no longer runs at full speed, so DSI's "never slower than non-SI"
            argument does not apply to it. Off by default (the faithful DSI).
        batched: the ``sp_degree`` target servers are the rows of one batched session served
            by one thread (`dsi_ref.backends.engine.batched`): whenever the device is free, one
            forward takes every task ready, and the committer handles its results before the
            next forward is gathered. A task submitted during a forward starts with the next
            one (up to one forward late, unlike the event model's idle server; the event
            model's ``Contention(batch=...)`` models this), and the forwards of concurrent tasks
            cost about one batch-1 forward on a latency-bound GPU instead of slowing each other
            down. `TorchLM` targets only.
        server_devices: the devices of the DSI target servers, server ``i`` on
            ``server_devices[i % len(server_devices)]`` (the paper's setting: one GPU per
            server, e.g. ``("cuda:1", "cuda:2", "cuda:3")``). Each device other than the
            target's gets a copy of the target's weights (`BackendLM.replica`); the drafter, SI
            and non-SI stay on the target's device. Default: every server on the target's
            device.
    """

    def __init__(self, target: BackendLM, drafter: BackendLM | None = None, *,
                 graphs: bool | None = None, segments: int = 4,
                 frontier_yields: bool = False, batched: bool = False,
                 server_devices: Sequence[str | torch.device] | None = None) -> None:
        if drafter is not None and drafter.device != target.device:
            raise BackendError(f"target on {target.device} but drafter on {drafter.device}")
        if server_devices is not None and not server_devices:
            raise BackendError("server_devices must name at least one device (or be None)")
        if server_devices is not None and batched:
            raise BackendError("batched=True runs every server in one forward on the target's "
                               "device: it cannot be combined with server_devices")
        home = canonical_device(target.device)
        self.server_devices = [home] if server_devices is None else \
            [canonical_device(d) for d in server_devices]
        self._replicas: dict[torch.device, BackendLM] = {home: target}
        for device in self.server_devices:
            if device not in self._replicas:
                self._replicas[device] = target.replica(device)
        self.target, self.drafter_lm, self.graphs = target, drafter, graphs
        self.segments = segments
        self.gate = _Yield(frontier_yields)
        if batched and not isinstance(target, TorchLM):
            raise BackendError("batched=True needs a TorchLM target (a BatchedSession)")
        self.batched = batched
        self._batched: dict[int, _BatchedServer] = {}
        self.device = target.device
        high = -1 if self.device.type == "cuda" else 0   # the more urgent CUDA stream priority
        self.target_session = target.session(graphs=graphs, priority=high)
        self._drafter_session = drafter.session(graphs=graphs, priority=high) \
            if drafter is not None else None
        self.outbox: queue.Queue[Any] = queue.Queue()
        self.cancelled: set[int] = set()
        self._servers: list[_Server] = []
        self._high = high

    @property
    def drafter(self) -> BackendLM:
        """The drafter (an error when the engine has no drafter)."""
        if self.drafter_lm is None:
            raise BackendError("this Engine has no drafter: pass drafter= for SI and DSI")
        return self.drafter_lm

    @property
    def drafter_session(self) -> SessionLike:
        """The drafter's session (an error when the engine has no drafter)."""
        if self._drafter_session is None:
            raise BackendError("this Engine has no drafter: pass drafter= for SI and DSI")
        return self._drafter_session

    def servers(self, sp_degree: int) -> Sequence[_Server | _SlotProxy]:
        """The first ``sp_degree`` target servers (threads started on first use, then reused).

        Server 0 (the frontier server when ``sp_degree >= 2``) gets the lowest stream priority,
        the verification servers the highest.
        """
        if self.batched:
            from .batched import _SlotInbox, _SlotProxy  # builds on this module

            server = self.batched_server(sp_degree)
            return [_SlotProxy(_SlotInbox(server, slot)) for slot in range(sp_degree)]
        while len(self._servers) < sp_degree:
            index = len(self._servers)
            lm = self._replicas[self.server_devices[index % len(self.server_devices)]]
            session = lm.session(graphs=self.graphs, segments=self.segments,
                                 priority=0 if index == 0 else self._high)
            self._servers.append(_Server(index, session, self.outbox, self.cancelled,
                                         self.gate))
        return self._servers[:sp_degree]

    def batched_server(self, sp_degree: int) -> _BatchedServer:
        """The batched server with ``sp_degree`` rows, one per target server (started on first
        use, then reused)."""
        if sp_degree not in self._batched:
            from .batched import _BatchedServer  # builds on this module

            assert isinstance(self.target, TorchLM)
            session = BatchedSession(self.target, sp_degree, graphs=self.graphs,
                                     segments=self.segments, priority=self._high)
            self._batched[sp_degree] = _BatchedServer(session, self.outbox, self.cancelled)
        return self._batched[sp_degree]

    def close(self) -> None:
        """Stop the server threads."""
        servers: list[_Server | _BatchedServer] = [*self._servers, *self._batched.values()]
        for server in servers:
            server.inbox.put(None)
        for server in servers:
            server.thread.join()
        self._servers = []
        self._batched = {}

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- non-SI and SI --------------------------------------------------------------------------
    def autoregressive(self, prompt: Sequence[int], max_new_tokens: int, rng: Randomness, *,
                       greedy: bool = False) -> Run:
        """`dsi_ref.decoders.autoregressive` on the target, timed: one cached target forward per
        token (`SIRun` without a drafter)."""
        prompt = check_inputs(self.target, prompt, max_new_tokens)
        self.target_session.rows(prompt, 1)                        # prefill, untimed
        return _WallClockSI(self, prompt, max_new_tokens, rng, non_si_config(greedy),
                            si=False).run()

    def speculative(self, prompt: Sequence[int], max_new_tokens: int, rng: Randomness,
                    lookahead: int = 3, verify: VerifyRule | Rule = "rejection") -> Run:
        """`dsi_ref.decoders.speculative`, timed: draft ``lookahead`` tokens, one target forward
        over prefix + drafts, verify left to right (`SIRun`, with cached sessions)."""
        config = SpeculativeConfig(lookahead, verify)
        prompt = check_inputs(self.target, prompt, max_new_tokens, self.drafter_lm)
        self.target_session.rows(prompt, 1)                        # prefill both, untimed
        self.drafter_session.rows(prompt, 1)
        return _WallClockSI(self, prompt, max_new_tokens, rng, config, si=True).run()

    # -- DSI ---------------------------------------------------------------------------------------
    def dsi(self, prompt: Sequence[int], max_new_tokens: int, rng: Randomness,
            lookahead: int = 2, sp_degree: int = 2, verify: VerifyRule | Rule = "rejection",
            queue: QueuePolicy = "fifo") -> Run:
        """`dsi_ref.decoders.dsi` with real concurrency: ``sp_degree`` target-server threads.

        ``Run.time`` is wall-clock seconds (the last commit); ``Run.stats`` adds ``events``
        (drafts and task results handled), ``orchestration_us`` (the committer thread's time
        outside drafter forwards and waits), ``drafter_us``, and the mean wall-clock time of a
        completed target-server forward and of a drafter forward *during the run*
        (``target_forward_us``, ``drafter_forward_us``: under the contention of the other
        servers, which is what one GPU shared by all servers costs).
        """
        config = DSIConfig(lookahead, sp_degree, verify=verify, queue=queue)
        prompt = check_inputs(self.target, prompt, max_new_tokens, self.drafter_lm)
        self.drafter_session.rows(prompt, 1)                       # prefill everything, untimed
        if self.batched:
            from .batched import _BatchedDSI  # builds on this module

            self.batched_server(sp_degree).session.rows_batch(
                dict.fromkeys(range(sp_degree), (prompt, 1)))
            return _BatchedDSI(self, prompt, max_new_tokens, rng, config).run()
        for server in self.servers(sp_degree):
            assert isinstance(server, _Server)
            server.session.rows(prompt, 1)
        return _WallClockDSI(self, prompt, max_new_tokens, rng, config).run()

    # -- tree speculation ------------------------------------------------------------------------
    def tree_speculative(self, prompt: Sequence[int], max_new_tokens: int, rng: Randomness, *,
                         tree: Sequence[int] = (2, 1), verify: TreeVerifyRule | TreeRule = "rrs"
                         ) -> Run:
        """`dsi_ref.decoders.tree.tree_speculative`, timed: the tree drafted level by level (one
        drafter forward per depth), scored by *one* target forward with a tree attention mask,
        the accepted path compacted in the KV caches (`dsi_ref.backends.engine.tree`; `TorchLM`
        models)."""
        from .tree import tree_speculative  # engine_tree builds on this module

        return tree_speculative(self, prompt, max_new_tokens, rng, tree=tree, verify=verify)
