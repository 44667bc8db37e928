"""DSI across processes and machines on Ray: target servers as actors, preemption as cancellation.

`RayEngine` is the thread engine (`dsi_ref.backends.engine.Engine`) with its DSI target servers
moved into Ray actors; everything else is inherited:

* `RayEngine.dsi` runs `_RayDSI`, a `_WallClockDSI` — itself a `dsi_ref.decoders.dsi.DSIRun` —
  so the committer, windows, frontier task, dispatch, queueing and preemption rules of
  docs/dsi-semantics.md are the reference ones, not rewritten. The drafter and the committer run
  in the driver (the calling process); non-SI and SI run there too, as in `Engine`.
* Each of the ``SP`` target servers is a Ray actor (`_TargetServer`) with its own copy of the
  target model and its own session (KV cache), on its own device (``num_gpus`` per actor, a
  fraction to share one GPU).
* A task is a call ``rows(tokens, count)`` on its server's actor. Preemption is `ray.cancel` of
  that call: a queued call never runs; a running one stops at the next layer segment (the actor
  checks ``is_canceled()`` between segments, as a thread server checks its flag). The result of
  a cancelled or stale call is discarded by the inherited rule (a task no longer in
  ``DSIRun.tasks`` supplies nothing).
* Faults. A call whose actor died (`ray.kill`, a lost node) is *lost*: it produced no rows, so
  nothing it computed can be committed. A lost task still wanted (not preempted) is sent again,
  with the same tokens, to a live actor, which gives the same rows (the same weights); its
  server slot moves to that actor. With no live actor left the run raises `ServerLostError`.
* Deadlines (no wait is unbounded). A server with calls in flight must answer one of them
  within the per-task deadline (``task_timeout``; by default ``task_timeout_factor`` times the
  slowest forward seen, at least ``task_timeout_floor`` seconds) counted from its last reply
  or from the call sent to it while idle; a server that does not is *frozen*: it is killed and
  treated as dead (its calls are lost and sent again). With no live actor left the run raises
  `ServerTimeoutError` (a `ServerLostError`). ``dsi(..., timeout=)`` bounds a whole run. An
  actor's first answer may take ``start_timeout`` (it builds its model). Server resources are
  reserved by a placement group that must be ready within ``schedule_timeout`` seconds, else
  `UnschedulableError`.
* `connect` (`dsi_ref.backends.ray_connect`) starts Ray in-process or joins a cluster;
  `sample_parallel` / `ray_map` (`dsi_ref.backends.ray_map`) fan the statistical audit's
  samples out over Ray workers. Both are re-exported here.

docs/ray-backend.md has the measured overheads and what they predict.
"""

from __future__ import annotations

import contextlib
import copy
import os
import queue
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray
import ray.exceptions
import ray.util
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from ..base.errors import (
    BackendError,
    ServerLostError,
    ServerTimeoutError,
    UnschedulableError,
)
from ..base.randomness import Randomness
from ..base.result import Run
from ..decoders.common import check_inputs
from ..decoders.dsi import DSIConfig, QueuePolicy, Task
from ..decoders.verification import Rule, VerifyRule
from .engine import Engine, _Job, _WallClockDSI
from .model_spec import LazyLM, ModelSpec
from .ray_connect import check_seconds, connect
from .ray_map import ray_map, sample_parallel
from .torch_session import BackendLM

__all__ = ["RayEngine", "ServerLostError", "ServerTimeoutError", "UnschedulableError", "connect",
           "ray_map", "sample_parallel"]


# -- the target servers ------------------------------------------------------------------------
class _TargetServer:
    """A target server in its own process: its own copy of the target model (built here from a
    `ModelSpec`, or unpickled), its own session."""

    def __init__(self, model: BackendLM | ModelSpec, device: str | None, segments: int,
                 graphs: bool | None, threads: int) -> None:
        import torch

        torch.set_num_threads(threads)
        lm: BackendLM = model.build() if isinstance(model, ModelSpec) else model
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
        """Seconds until the next deadline: a server's per-task deadline, or the run's."""
        limit = self.engine.task_deadline()
        ends = [self.since[call.actor] + limit for call in self.calls.values()]
        if self.deadline is not None:
            ends.append(self.deadline)
        return max(0.0, min(ends) - time.monotonic())

    def _expire(self) -> None:
        """Lose every actor past its per-task deadline (frozen) and send its calls again."""
        self.check_deadline()
        now, limit = time.monotonic(), self.engine.task_deadline()
        frozen = sorted({call.actor for call in self.calls.values()
                         if now - self.since[call.actor] >= limit})
        for index in frozen:
            self.frozen_servers += 1
            self.engine.lose_actor(index, frozen_after=limit)
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


class RayEngine(Engine):
    """`Engine` whose DSI target servers are Ray actors (non-SI, SI and the drafter stay local).

    Args:
        target: the target model; each actor gets its own copy (pickled, then moved to
            ``server_device``). Build it on the CPU when servers go to GPUs.
        drafter: the drafter (runs in this process).
        address: a Ray cluster to join (``"host:port"``, ``"ray://host:port"``, ``"auto"``);
            ``None`` starts a private Ray in this process (or reuses the one already running),
            never a cluster that runs on this machine unless ``join_existing``.
        join_existing: with no ``address``, join this machine's cluster (``"auto"``).
        runtime_env: Ray's ``runtime_env`` for this job, e.g. ``{"py_modules": [dsi_ref]}`` so
            that nodes without dsi_ref get this code (`connect`).
        server_resources: custom Ray resources each server actor asks for (e.g.
            ``{"dsi_node2": 1}`` puts the servers on the nodes started with that resource).
        num_cpus: CPUs of an in-process Ray.
        num_gpus: GPUs per server actor (a fraction shares one device: ``0.25`` puts four
            servers on one GPU); ``0`` = CPU servers.
        server_device: the device of each actor's model copy (default ``"cuda"`` when
            ``num_gpus > 0``, else ``"cpu"``).
        server_cpus: CPUs Ray reserves per server actor (``0``: any number share the CPUs).
        server_threads: torch threads in each actor.
        segments, graphs: as in `Engine` (the actors' sessions).
        connect_timeout: seconds for ``address`` to answer (`connect`).
        task_timeout: the per-task deadline in seconds: a server with calls in flight that
            answers none of them for this long (since its last reply, or since a call was sent
            to it while idle) is frozen, killed and lost like a dead one. ``None`` (default):
            ``task_timeout_factor`` times the slowest forward seen, at least
            ``task_timeout_floor``.
        task_timeout_factor, task_timeout_floor: the derived per-task deadline.
        start_timeout: seconds an actor that never answered may take to answer its first call
            (it unpickles and builds its model first).
        schedule_timeout: seconds for a server's resources (``num_gpus``, ``server_cpus``) to
            be reserved (a placement group); else `UnschedulableError`. The constructor checks
            the first server's now.
    """

    def __init__(self, target: BackendLM, drafter: BackendLM | None = None, *,
                 address: str | None = None, num_cpus: int | None = None,
                 num_gpus: float = 0.0, server_device: str | None = None,
                 server_cpus: float = 0.0, server_threads: int = 1, segments: int = 4,
                 graphs: bool | None = None, connect_timeout: float = 10.0,
                 task_timeout: float | None = None, task_timeout_factor: float = 10.0,
                 task_timeout_floor: float = 10.0, start_timeout: float = 300.0,
                 schedule_timeout: float = 5.0, join_existing: bool = False,
                 runtime_env: dict[str, Any] | None = None,
                 server_resources: dict[str, float] | None = None) -> None:
        if not num_gpus >= 0:
            raise BackendError(f"num_gpus must be >= 0, got {num_gpus!r}")
        for name, value in (("task_timeout_factor", task_timeout_factor),
                            ("task_timeout_floor", task_timeout_floor),
                            ("start_timeout", start_timeout),
                            ("schedule_timeout", schedule_timeout),
                            ("task_timeout", task_timeout)):
            check_seconds(name, value, optional=name == "task_timeout")
        self._owns_ray = connect(address, num_cpus=num_cpus, connect_timeout=connect_timeout,
                                 join_existing=join_existing, runtime_env=runtime_env)
        try:
            self._setup(target, drafter, num_gpus, server_device, server_cpus, server_threads,
                        segments, graphs)
            self.task_timeout, self.task_timeout_factor = task_timeout, task_timeout_factor
            self.task_timeout_floor, self.start_timeout = task_timeout_floor, start_timeout
            self.schedule_timeout = schedule_timeout
            self.server_resources = dict(server_resources or {})
            self._spare = self._placement()      # unschedulable: a named error, now
        except BaseException:
            if self._owns_ray:
                ray.shutdown()
                self._owns_ray = False
            raise

    def _setup(self, target: BackendLM, drafter: BackendLM | None, num_gpus: float,
               server_device: str | None, server_cpus: float, server_threads: int,
               segments: int, graphs: bool | None) -> None:
        super().__init__(target, drafter, graphs=graphs, segments=segments)
        self.num_gpus, self.server_cpus = num_gpus, server_cpus
        self.server_device = server_device or ("cuda" if num_gpus > 0 else "cpu")
        self.server_threads = server_threads
        self.ray_outbox = _RayOutbox(self)
        self.outbox = self.ray_outbox       # type: ignore[assignment]  # get / get_nowait
        self.actors: list[Any] = []         # actor handles, in creation order
        self.slots: list[int] = []          # server slot -> index in actors
        self.dead: set[int] = set()
        self.answered: set[int] = set()     # actors that answered a call (built their model)
        self.slowest_forward = 0.0          # seconds, over every reply seen
        self._groups: list[Any] = []        # placement groups of the actors
        self._model_ref: Any = None

    # -- deadlines ----------------------------------------------------------------------------
    def task_deadline(self) -> float:
        """The per-task deadline in seconds (``task_timeout``, or derived from the slowest
        forward seen)."""
        if self.task_timeout is not None:
            return self.task_timeout
        return max(self.task_timeout_floor, self.task_timeout_factor * self.slowest_forward)

    def observe(self, seconds: float) -> None:
        """A reply's forward took ``seconds``."""
        self.slowest_forward = max(self.slowest_forward, seconds)

    def _placement(self) -> Any:
        """A placement group holding one server's resources, ready within
        ``schedule_timeout`` seconds (`UnschedulableError` if not); ``None`` when a server
        asks for no resources."""
        bundle = {key: value for key, value in (("CPU", self.server_cpus),
                                                ("GPU", self.num_gpus)) if value > 0}
        bundle.update(self.server_resources)
        if not bundle:
            return None
        group = ray.util.placement_group([bundle])
        ready, _ = ray.wait([group.ready()], timeout=self.schedule_timeout)
        if not ready:
            ray.util.remove_placement_group(group)
            total = ray.cluster_resources()  # type: ignore[no-untyped-call]
            raise UnschedulableError(
                f"no Ray node can host target server {len(self.actors) + 1} asking for "
                + ", ".join(f"{v:g} {k}" for k, v in bundle.items())
                + f" within {self.schedule_timeout:g} s (the cluster has "
                f"{total.get('GPU', 0):g} GPU, {total.get('CPU', 0):g} CPU, some maybe taken); "
                "ask for fewer GPUs per server (num_gpus / --ray-gpus 0 runs on CPUs) or "
                "fewer servers")
        self._groups.append(group)
        return group

    # -- actors -------------------------------------------------------------------------------
    def _new_actor(self) -> int:
        if self._model_ref is None:
            shipped = copy.copy(self.target)
            if hasattr(shipped, "_session"):
                shipped._session = None     # the driver's default session stays here
            self._model_ref = ray.put(shipped)
        # out of order: Ray 2.60 stalls an in-order actor for 30 s, then fails its queue, when a
        # call is cancelled in transit (a gap in its sequence numbers; docs/ray-backend.md)
        group, self._spare = self._spare or self._placement(), None
        placed: dict[str, Any] = {} if group is None else {
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                group, placement_group_bundle_index=0)}
        actor = _RemoteServer.options(num_cpus=self.server_cpus, num_gpus=self.num_gpus,
                                      resources=self.server_resources, max_restarts=0,
                                      allow_out_of_order_execution=True,
                                      **placed).remote(
            self._model_ref, self.server_device, self.segments, self.graphs,
            self.server_threads)
        self.actors.append(actor)
        return len(self.actors) - 1

    def servers(self, sp_degree: int) -> Sequence[_ActorProxy]:  # type: ignore[override]
        """The first ``sp_degree`` server slots (an actor each, started on first use)."""
        while len(self.slots) < sp_degree:
            self.slots.append(self._new_actor())
        return [_ActorProxy(_ActorInbox(self.ray_outbox, s)) for s in range(sp_degree)]

    def actor_for(self, slot: int) -> Any:
        """The live actor serving ``slot``."""
        return self.actors[self.slots[slot]]

    def lose_actor(self, dead: int, frozen_after: float | None = None) -> None:
        """Actor ``dead`` died (or froze: no answer for ``frozen_after`` seconds; it is
        killed): move every slot it served to a live actor, or raise `ServerLostError`
        (`ServerTimeoutError` when frozen) when none is left."""
        if frozen_after is not None:
            with contextlib.suppress(Exception):
                ray.kill(self.actors[dead], no_restart=True)
        self.dead.add(dead)
        live = [i for i in dict.fromkeys(self.slots) if i not in self.dead]
        if not live:
            if frozen_after is not None:
                raise ServerTimeoutError(
                    f"every target-server actor died or froze ({len(self.dead)} lost; the "
                    f"last answered no call for {frozen_after:g} s, the per-task deadline); "
                    "no token of a lost call was committed")
            raise ServerLostError(f"every target-server actor died ({len(self.dead)} lost); "
                                  "no token of a lost call was committed")
        for s, index in enumerate(self.slots):
            if index == dead:
                self.slots[s] = live[s % len(live)]

    def server_pids(self) -> list[int]:
        """The process ids of the live server actors (in slot order, each once), within
        ``start_timeout`` (an actor that never answered) or the per-task deadline, else
        `ServerTimeoutError`."""
        live = [i for i in dict.fromkeys(self.slots) if i not in self.dead]
        timeout = (self.task_deadline() if self.answered.issuperset(live)
                   else self.start_timeout)
        try:
            pids = ray.get([self.actors[i].pid.remote() for i in live], timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            raise ServerTimeoutError(f"a target-server actor did not tell its pid within "
                                     f"{timeout:g} s") from None
        self.answered.update(live)
        return [int(pid) for pid in pids]

    def close(self) -> None:
        """Kill the actors (and stop Ray if this engine started it)."""
        for actor in self.actors:
            ray.kill(actor)
        for group in [*self._groups, *([self._spare] if self._spare is not None else [])]:
            with contextlib.suppress(Exception):
                ray.util.remove_placement_group(group)
        self._groups, self._spare = [], None
        self.actors, self.slots, self.dead = [], [], set()
        self.answered.clear()
        self.ray_outbox.calls.clear()
        self.ray_outbox.ready.clear()
        super().close()
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False

    # -- DSI ----------------------------------------------------------------------------------
    def dsi(self, prompt: Sequence[int], max_new_tokens: int, rng: Randomness,
            lookahead: int = 2, sp_degree: int = 2, verify: VerifyRule | Rule = "rejection",
            queue: QueuePolicy = "fifo", timeout: float | None = None) -> Run:
        """`Engine.dsi` with the ``sp_degree`` target servers as Ray actors.

        ``timeout``: seconds for the whole run (the servers' warm-up prefill included);
        `ServerTimeoutError` when it passes. ``None``: no bound but the per-task deadlines.

        ``Run.stats`` adds ``lost_tasks``: calls whose actor died or froze during the run (each
        sent again to a live actor when still wanted; none of them supplied a row), and
        ``frozen_servers``: actors lost for missing the per-task deadline.
        """
        check_seconds("timeout", timeout)
        config = DSIConfig(lookahead, sp_degree, verify=verify, queue=queue)
        prompt = check_inputs(self.target, prompt, max_new_tokens, self.drafter_lm)
        outbox = self.ray_outbox
        lost_before, frozen_before = outbox.lost_tasks, outbox.frozen_servers
        outbox.timeout = timeout
        outbox.deadline = None if timeout is None else time.monotonic() + timeout
        try:
            self.drafter_session.rows(prompt, 1)                   # prefill everything, untimed
            self.servers(sp_degree)
            self._warm_up(prompt, sp_degree)
            run = _RayDSI(self, prompt, max_new_tokens, rng, config).run()
        finally:
            outbox.deadline = outbox.timeout = None
        stats = dict(run.stats)
        stats["lost_tasks"] = outbox.lost_tasks - lost_before
        stats["frozen_servers"] = outbox.frozen_servers - frozen_before
        return Run(run.tokens, run.time, run.trace, stats)

    def _warm_up(self, prompt: tuple[int, ...], sp_degree: int) -> None:
        """Prefill the live servers on the prompt, each within its deadline (``start_timeout``
        for an actor that never answered, else the per-task deadline): one that misses it is
        frozen and lost (`ServerTimeoutError` when none is left)."""
        outbox = self.ray_outbox
        live = [i for i in dict.fromkeys(self.slots[:sp_degree]) if i not in self.dead]
        began = time.monotonic()
        pending = {self.actors[i].rows.remote(prompt, 1): i for i in live}
        ends = {ref: began + (self.task_deadline() if i in self.answered
                              else self.start_timeout) for ref, i in pending.items()}
        while pending:
            outbox.check_deadline()
            end = min([*ends.values(), *([outbox.deadline] if outbox.deadline else [])])
            done, _ = ray.wait(list(pending), num_returns=1,
                               timeout=max(0.0, end - time.monotonic()))
            if done:
                index = pending.pop(done[0])
                del ends[done[0]]
                # a dead actor is found, and replaced, by the run's first call to it
                with contextlib.suppress(ray.exceptions.RayActorError):
                    _, seconds = ray.get(done[0], timeout=self.task_deadline())
                    self.answered.add(index)
                    self.observe(seconds)
                continue
            now = time.monotonic()
            for ref in [r for r, e in ends.items() if e <= now]:
                index = pending.pop(ref)
                del ends[ref]
                outbox.frozen_servers += 1
                self.lose_actor(index, frozen_after=now - began)
