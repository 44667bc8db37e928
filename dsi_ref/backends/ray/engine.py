"""DSI across processes and machines on Ray: target servers as actors, preemption as cancellation.

`RayEngine` is the thread engine (`dsi_ref.backends.engine.Engine`) with its DSI target servers
moved into Ray actors; everything else is inherited:

* `RayEngine.dsi` runs the engine's `dsi_ref.backends.engine.dsi.WallClockDSI` — itself a
  `dsi_ref.decoders.dsi.DSIRun` — on a `RayPool` (`dsi_ref.backends.ray.pool`), so the
  committer, windows, frontier task, dispatch, queueing and preemption rules of
  docs/dsi-semantics.md are the reference ones, not rewritten. The drafter and the committer run
  in the driver (the calling process); non-SI and SI run there too, as in `Engine`.
* Each of the ``SP`` target servers is a Ray actor (`dsi_ref.backends.ray.server.TargetServer`)
  with its own copy of the target model and its own session (KV cache), on its own device
  (``num_gpus`` per actor, a fraction to share one GPU). The actor builds its copy from the
  target's `ModelSpec` (a preset with its seed and dtype, or a checkpoint path: ``ship="spec"``,
  the default when the target has one), so no weights cross the object store; ``ship="pickle"``
  sends a pickled copy instead. Given a `ModelSpec`, the driver's target is a `LazyLM`, built
  only if a forward needs it here (non-SI, SI): a DSI-only driver never holds the target's
  weights.
* A task is a call ``rows(tokens, count)`` on its server's actor. Preemption is `ray.cancel` of
  that call: a queued call never runs; a running one stops at the next layer segment (the actor
  checks ``is_canceled()`` between segments, as a thread server checks its flag). The result of
  a cancelled or stale call is discarded by the inherited rule (a task no longer in
  ``DSIRun.tasks`` supplies nothing).
* Faults. A call whose actor died (`ray.kill`, a lost node) is *lost*: it produced no rows, so
  nothing it computed can be committed. A lost task still wanted (not preempted) is sent again,
  with the same tokens, to a live actor, which gives the same rows (the same weights); its
  server slot moves to that actor. A lost actor is *replaced* while ``max_replacements``
  lasts (default ``SP``): a new actor, built from the spec while the run goes on, takes back
  the lost actor's slots at its first answer (`Fleet.admit`, `RayEngine.recover`; each actor's
  life cycle is one record of the `Fleet`, `dsi_ref.backends.ray.fleet`). With no live actor
  left the run waits for a replacement still building, else raises `ServerLostError`.
* Deadlines (no wait is unbounded). A server with calls in flight must answer one of them
  within the per-task deadline (``task_timeout``; by default ``task_timeout_factor`` times the
  slowest forward seen, at least ``task_timeout_floor`` seconds) counted from its last reply
  or from the call sent to it while idle; a server that does not is *frozen*: it is killed and
  treated as dead (its calls are lost and sent again). With no live actor left the run raises
  `ServerTimeoutError` (a `ServerLostError`). ``dsi(..., timeout=)`` bounds a whole run. An
  actor's first answer may take ``start_timeout`` (it builds its model). Server resources are
  reserved by a placement group that must be ready within ``schedule_timeout`` seconds, else
  `UnschedulableError`.
* `connect` (`dsi_ref.backends.ray.connect`) starts Ray in-process or joins a cluster;
  `sample_parallel` / `ray_map` (`dsi_ref.backends.ray.map`) fan the statistical audit's
  samples out over Ray workers. Both are re-exported by `dsi_ref.backends.ray`.

docs/ray-backend.md has the measured overheads and what they predict.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ray

from ...base.errors import BackendError
from ...base.randomness import Randomness
from ...base.result import Run
from ...decoders.common import check_inputs
from ...decoders.dsi import DSIConfig, QueuePolicy
from ...decoders.verification import Rule, VerifyRule
from ..engine.dsi import WallClockDSI
from ..engine.engine import Engine
from ..torch.build import LazyLM
from ..torch.session import BackendLM
from ..torch.spec import ModelSpec
from .connect import check_seconds, connect
from .fleet import Deadlines, Fleet, ServerOptions
from .pool import RayPool

__all__ = ["RayEngine"]


_SHIPS = ("auto", "spec", "pickle")


def _shipped(target: BackendLM | ModelSpec, ship: str) -> BackendLM | ModelSpec:
    """What the server actors get (`RayEngine`'s ``ship``): a `ModelSpec` to build, or the
    built target, to pickle."""
    if ship not in _SHIPS:
        raise BackendError(f"ship must be one of {', '.join(_SHIPS)}, got {ship!r}")
    if isinstance(target, ModelSpec):
        if ship == "pickle":
            raise BackendError("ship='pickle' sends a built model's weights: pass the model, "
                               "not its ModelSpec")
        return target
    spec = getattr(target, "spec", None)
    if ship == "pickle" or (ship == "auto" and spec is None):
        return target
    if spec is None:
        raise BackendError(f"ship='spec': {type(target).__name__} has no spec() (TorchLM and "
                           "CheckpointLM have one); use ship='pickle'")
    built: ModelSpec = spec()
    return built


class RayEngine(Engine):
    """`Engine` whose DSI target servers are Ray actors (non-SI, SI and the drafter stay local).

    Args:
        target: the target model, or a `ModelSpec` of it. Each actor builds its own copy from
            the model's spec (``ship``), or gets a pickled copy; it then moves it to
            ``server_device``. Given a `ModelSpec`, this process builds its own copy only if a
            forward needs it here (non-SI, SI, ``probs``): a DSI-only driver never holds the
            target's weights (`LazyLM`).
        drafter: the drafter (runs in this process).
        ship: how the actors get the target: ``"spec"`` (each builds it from ``target.spec()``
            or the `ModelSpec` given: nothing large crosses the object store), ``"pickle"``
            (a copy of the built target through the object store: for a small model, or one
            whose weights were changed after it was built), ``"auto"`` (default: ``"spec"``
            when the target has one, else ``"pickle"``).
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
            (it builds or unpickles its model first).
        schedule_timeout: seconds for a server's resources (``num_gpus``, ``server_cpus``) to
            be reserved (a placement group); else `UnschedulableError`. The constructor checks
            the first server's now.
        max_replacements: how many lost (dead or frozen) server actors this engine replaces
            over its life; a replacement is built while the run goes on without it, and takes
            its server slots back at its first answer. ``None`` (default): the number of server
            slots started (``SP``): every server may be replaced once on average, while a fault
            that repeats (a model that cannot be built, a node that keeps failing) cannot
            start actors forever. ``0``: none (capacity only shrinks).
    """

    def __init__(self, target: BackendLM | ModelSpec, drafter: BackendLM | None = None, *,
                 ship: str = "auto", address: str | None = None, num_cpus: int | None = None,
                 num_gpus: float = 0.0, server_device: str | None = None,
                 server_cpus: float = 0.0, server_threads: int = 1, segments: int = 4,
                 graphs: bool | None = None, connect_timeout: float = 10.0,
                 task_timeout: float | None = None, task_timeout_factor: float = 10.0,
                 task_timeout_floor: float = 10.0, start_timeout: float = 300.0,
                 schedule_timeout: float = 5.0, join_existing: bool = False,
                 runtime_env: dict[str, Any] | None = None,
                 server_resources: dict[str, float] | None = None,
                 max_replacements: int | None = None) -> None:
        if not num_gpus >= 0:
            raise BackendError(f"num_gpus must be >= 0, got {num_gpus!r}")
        for name, value in (("task_timeout_factor", task_timeout_factor),
                            ("task_timeout_floor", task_timeout_floor),
                            ("start_timeout", start_timeout),
                            ("schedule_timeout", schedule_timeout),
                            ("task_timeout", task_timeout)):
            check_seconds(name, value, optional=name == "task_timeout")
        if max_replacements is not None and not (type(max_replacements) is int
                                                 and max_replacements >= 0):
            raise BackendError(f"max_replacements must be an int >= 0 or None, got "
                               f"{max_replacements!r}")
        shipped = _shipped(target, ship)
        self._owns_ray = connect(address, num_cpus=num_cpus, connect_timeout=connect_timeout,
                                 join_existing=join_existing, runtime_env=runtime_env)
        try:
            super().__init__(LazyLM(target) if isinstance(target, ModelSpec) else target,
                             drafter, graphs=graphs, segments=segments)
            self.shipped = shipped
            options = ServerOptions(num_gpus, server_cpus,
                                    server_device or ("cuda" if num_gpus > 0 else "cpu"),
                                    server_threads, segments, graphs, dict(server_resources or {}))
            deadlines = Deadlines(task_timeout, task_timeout_factor, task_timeout_floor,
                                  start_timeout, schedule_timeout)
            self.fleet = Fleet(shipped, options, deadlines, max_replacements)
            self.ray_pool = RayPool(self.fleet)
            self.fleet.reserve_first()           # unschedulable: a named error, now
        except BaseException:
            if self._owns_ray:
                ray.shutdown()
                self._owns_ray = False
            raise

    # -- the servers ------------------------------------------------------------------------------
    def pool(self, sp_degree: int) -> RayPool:
        """The pool of the first ``sp_degree`` server slots (an actor each, started on first
        use)."""
        self.fleet.grow(sp_degree)
        return self.ray_pool

    def actor_for(self, slot: int) -> Any:
        """The handle of the live actor serving ``slot``."""
        return self.fleet.slots[slot].serving.handle

    def recover(self, timeout: float | None = None) -> int:
        """Wait for the replacements still building (up to ``timeout`` seconds, by default
        ``start_timeout``) and let them take their slots; the number of live server actors
        (`Fleet.recover`)."""
        return self.fleet.recover(timeout)

    def server_pids(self) -> list[int]:
        """The process ids of the live server actors (in slot order, each once), within
        ``start_timeout`` (an actor that never answered) or the per-task deadline, else
        `ServerTimeoutError` (`Fleet.server_pids`)."""
        return self.fleet.server_pids()

    def close(self) -> None:
        """Kill the actors (and stop Ray if this engine started it)."""
        self.fleet.close()
        self.ray_pool.close()
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
        sent again to a live actor when still wanted; none of them supplied a row),
        ``frozen_servers``: actors lost for missing the per-task deadline, and
        ``replaced_servers``: replacement actors started during the run (see `Fleet.lose`;
        one still building when the run ends joins later: `Fleet.admit`, `recover`).
        """
        check_seconds("timeout", timeout)
        config = DSIConfig(lookahead, sp_degree, verify=verify, queue=queue)
        prompt = check_inputs(self.target, prompt, max_new_tokens, self.drafter_lm)
        pool = self.ray_pool
        lost_before, frozen_before = pool.lost_tasks, pool.frozen_servers
        replaced_before = self.fleet.replaced
        self.fleet.admit()                           # replacements built since the last run
        pool.limit(timeout)
        try:
            self.drafter_session.rows(prompt, 1)                   # prefill everything, untimed
            self.pool(sp_degree)
            pool.warm_up(prompt, sp_degree)
            run = WallClockDSI(self, pool, prompt, max_new_tokens, rng, config).run()
        finally:
            pool.limit(None)
        stats = dict(run.stats)
        stats["lost_tasks"] = pool.lost_tasks - lost_before
        stats["frozen_servers"] = pool.frozen_servers - frozen_before
        stats["replaced_servers"] = self.fleet.replaced - replaced_before
        return Run(run.tokens, run.time, run.trace, stats)
