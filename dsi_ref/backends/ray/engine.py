"""DSI across processes and machines on Ray: target servers as actors, preemption as cancellation.

`RayEngine` is the thread engine (`dsi_ref.backends.engine.Engine`) with its DSI target servers
moved into Ray actors; everything else is inherited:

* `RayEngine.dsi` runs `_RayDSI`, a `_WallClockDSI` — itself a `dsi_ref.decoders.dsi.DSIRun` —
  so the committer, windows, frontier task, dispatch, queueing and preemption rules of
  docs/dsi-semantics.md are the reference ones, not rewritten. The drafter and the committer run
  in the driver (the calling process); non-SI and SI run there too, as in `Engine`.
* Each of the ``SP`` target servers is a Ray actor (`_TargetServer`) with its own copy of the
  target model and its own session (KV cache), on its own device (``num_gpus`` per actor, a
  fraction to share one GPU). The actor builds its copy from the target's `ModelSpec` (a
  preset with its seed and dtype, or a checkpoint path: ``ship="spec"``, the default when the
  target has one), so no weights cross the object store; ``ship="pickle"`` sends a pickled copy
  instead. Given a `ModelSpec`, the driver's target is a `LazyLM`, built only if a forward needs
  it here (non-SI, SI): a DSI-only driver never holds the target's weights.
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
  the lost actor's slots at its first answer (`RayEngine.admit`, `RayEngine.recover`). With no
  live actor left the run waits for a replacement still building, else raises
  `ServerLostError`.
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
  samples out over Ray workers. Both are re-exported here.

docs/ray-backend.md has the measured overheads and what they predict.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Sequence
from typing import Any

import ray
import ray.exceptions
import ray.util
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from ...base.errors import (
    BackendError,
    ServerLostError,
    ServerTimeoutError,
    UnschedulableError,
)
from ...base.randomness import Randomness
from ...base.result import Run
from ...decoders.common import check_inputs
from ...decoders.dsi import DSIConfig, QueuePolicy
from ...decoders.verification import Rule, VerifyRule
from ..engine.engine import Engine
from ..torch.build import LazyLM
from ..torch.session import BackendLM
from ..torch.spec import ModelSpec
from .connect import check_seconds, connect
from .pool import _ActorInbox, _ActorProxy, _RayDSI, _RayOutbox, _RemoteServer

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
            self._setup(LazyLM(target) if isinstance(target, ModelSpec) else target, drafter,
                        num_gpus, server_device, server_cpus, server_threads, segments, graphs)
            self.shipped = shipped
            self.task_timeout, self.task_timeout_factor = task_timeout, task_timeout_factor
            self.task_timeout_floor, self.start_timeout = task_timeout_floor, start_timeout
            self.schedule_timeout = schedule_timeout
            self.max_replacements = max_replacements
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
        self.slots: list[int] = []          # server slot -> index in actors (who serves it)
        self.home: list[int] = []           # server slot -> the actor it belongs to
        self.dead: set[int] = set()
        self.answered: set[int] = set()     # actors that answered a call (built their model)
        # replacement -> (its first call, sent at, its placement group's ready() or None)
        self.joining: dict[int, tuple[Any, float, Any]] = {}
        self.replaced = 0                   # replacements started
        self.slowest_forward = 0.0          # seconds, over every reply seen
        self._groups: dict[int, Any] = {}   # actor -> its placement group
        self._model_ref: Any = None

    # -- deadlines ----------------------------------------------------------------------------
    def task_deadline(self) -> float:
        """The per-task deadline in seconds (``task_timeout``, or derived from the slowest
        forward seen)."""
        if self.task_timeout is not None:
            return self.task_timeout
        return max(self.task_timeout_floor, self.task_timeout_factor * self.slowest_forward)

    def actor_deadline(self, index: int) -> float:
        """Seconds actor ``index`` may take to answer: the per-task deadline, or
        ``start_timeout`` while it never answered (it builds its model first)."""
        return self.task_deadline() if index in self.answered else self.start_timeout

    def observe(self, seconds: float) -> None:
        """A reply's forward took ``seconds``."""
        self.slowest_forward = max(self.slowest_forward, seconds)

    def _bundle(self) -> dict[str, float]:
        """One server's resources."""
        bundle = {key: value for key, value in (("CPU", self.server_cpus),
                                                ("GPU", self.num_gpus)) if value > 0}
        bundle.update(self.server_resources)
        return bundle

    def _placement(self, wait: bool = True) -> Any:
        """A placement group holding one server's resources (``None`` when a server asks for
        none); with ``wait``, ready within ``schedule_timeout`` seconds, else
        `UnschedulableError` (a replacement's is not waited for: its actor starts when the
        group is ready, within ``start_timeout``)."""
        bundle = self._bundle()
        if not bundle:
            return None
        group = ray.util.placement_group([bundle])
        if not wait:
            return group
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
        return group

    # -- actors -------------------------------------------------------------------------------
    def _payload(self) -> Any:
        """What an actor builds its model from: the spec, or the object-store copy."""
        if isinstance(self.shipped, ModelSpec):
            return self.shipped
        if self._model_ref is None:
            shipped = copy.copy(self.shipped)
            if hasattr(shipped, "_session"):
                shipped._session = None     # the driver's default session stays here
            self._model_ref = ray.put(shipped)
        return self._model_ref

    def _new_actor(self, replacement: bool = False) -> int:
        """Start a server actor (it builds its model in its constructor); a replacement's
        placement group is not waited for."""
        payload = self._payload()
        if replacement:
            group = self._placement(wait=False)
        else:
            group, self._spare = self._spare or self._placement(), None
        placed: dict[str, Any] = {} if group is None else {
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                group, placement_group_bundle_index=0)}
        # out of order: Ray 2.60 stalls an in-order actor for 30 s, then fails its queue, when a
        # call is cancelled in transit (a gap in its sequence numbers; docs/ray-backend.md)
        actor = _RemoteServer.options(num_cpus=self.server_cpus, num_gpus=self.num_gpus,
                                      resources=self.server_resources, max_restarts=0,
                                      allow_out_of_order_execution=True,
                                      **placed).remote(
            payload, self.server_device, self.segments, self.graphs, self.server_threads)
        self.actors.append(actor)
        index = len(self.actors) - 1
        if group is not None:
            self._groups[index] = group
        return index

    def servers(self, sp_degree: int) -> Sequence[_ActorProxy]:  # type: ignore[override]
        """The first ``sp_degree`` server slots (an actor each, started on first use)."""
        while len(self.slots) < sp_degree:
            index = self._new_actor()
            self.slots.append(index)
            self.home.append(index)
        return [_ActorProxy(_ActorInbox(self.ray_outbox, s)) for s in range(sp_degree)]

    def actor_for(self, slot: int) -> Any:
        """The live actor serving ``slot``."""
        return self.actors[self.slots[slot]]

    def live_actors(self) -> list[int]:
        """The live actors serving server slots (indices in ``actors``, each once)."""
        return [i for i in dict.fromkeys(self.slots) if i not in self.dead]

    def replacement_budget(self) -> int:
        """How many replacements this engine may start in all (``max_replacements``, by
        default the number of server slots)."""
        return len(self.slots) if self.max_replacements is None else self.max_replacements

    def lose_actor(self, dead: int, frozen_after: float | None = None) -> None:
        """Actor ``dead`` died (or froze: no answer for ``frozen_after`` seconds; it is
        killed). The slots it belonged to get a replacement while the budget lasts
        (`replacement_budget`; it serves them from its first answer, `admit`); meanwhile every
        slot it served moves to a live actor (to a replacement still building when none is
        live), or `ServerLostError` (`ServerTimeoutError` when frozen) when none is left."""
        if dead in self.dead:
            return
        if frozen_after is not None:
            with contextlib.suppress(Exception):
                ray.kill(self.actors[dead], no_restart=True)
        self.dead.add(dead)
        self.joining.pop(dead, None)
        group = self._groups.pop(dead, None)
        if group is not None:              # its resources, for the replacement
            with contextlib.suppress(Exception):
                ray.util.remove_placement_group(group)
        orphans = [s for s, owner in enumerate(self.home) if owner == dead]
        if orphans and self.replaced < self.replacement_budget():
            self.replaced += 1
            index = self._new_actor(replacement=True)
            group = self._groups.get(index)
            self.joining[index] = (self.actors[index].pid.remote(), time.monotonic(),
                                   None if group is None else group.ready())
            for s in orphans:
                self.home[s] = index
        usable = [i for i in dict.fromkeys([*self.slots, *self.home]) if i not in self.dead]
        live = [i for i in usable if i not in self.joining] or usable
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

    def admit(self, timeout: float = 0.0) -> None:
        """Replacements that answered take back the slots they belong to; one that died while
        building, or did not answer within ``start_timeout``, is lost (and replaced while the
        budget lasts). Waits up to ``timeout`` seconds for a first answer."""
        if not self.joining:
            return
        refs = {probe: index for index, (probe, _, _) in self.joining.items()}
        done, _ = ray.wait(list(refs), num_returns=len(refs), timeout=timeout)
        for ref in done:
            index = refs[ref]
            try:
                ray.get(ref, timeout=self.start_timeout)
            except ray.exceptions.RayError:
                self.lose_actor(index)
                continue
            del self.joining[index]
            self.answered.add(index)
            for s, owner in enumerate(self.home):
                if owner == index:
                    self.slots[s] = index
        now = time.monotonic()
        for index, (probe, sent, placed) in list(self.joining.items()):
            if placed is not None and now - sent >= self.schedule_timeout:
                if not ray.wait([placed], timeout=0)[0]:
                    self._unplaceable(index)
                    continue
                self.joining[index] = (probe, sent, None)      # placed
            if now - sent >= self.start_timeout:
                self.lose_actor(index, frozen_after=self.start_timeout)

    def admission_checks(self) -> list[float]:
        """When `admit` must look at the replacements again (``time.monotonic``): a
        replacement's ``schedule_timeout`` while its resources are not known to be reserved,
        then its ``start_timeout``."""
        return [sent + (self.schedule_timeout if placed is not None else self.start_timeout)
                for _, sent, placed in self.joining.values()]

    def _unplaceable(self, index: int) -> None:
        """Replacement ``index``'s resources were not reserved within ``schedule_timeout``
        (no node can host it now): it is lost; `UnschedulableError` when no actor is left."""
        with contextlib.suppress(Exception):
            ray.kill(self.actors[index], no_restart=True)
        try:
            self.lose_actor(index)
        except ServerLostError:
            bundle = ", ".join(f"{v:g} {k}" for k, v in self._bundle().items())
            raise UnschedulableError(
                f"every target-server actor was lost, and no Ray node can host a replacement "
                f"asking for {bundle} within {self.schedule_timeout:g} s") from None

    def recover(self, timeout: float | None = None) -> int:
        """Wait for the replacements still building (up to ``timeout`` seconds, by default
        ``start_timeout``) and let them take their slots; the number of live server actors."""
        end = time.monotonic() + (self.start_timeout if timeout is None else timeout)
        while self.joining and time.monotonic() < end:
            self.admit(timeout=max(0.0, min(1.0, end - time.monotonic())))
        return len(self.live_actors())

    def server_pids(self) -> list[int]:
        """The process ids of the live server actors (in slot order, each once), within
        ``start_timeout`` (an actor that never answered) or the per-task deadline, else
        `ServerTimeoutError`."""
        live = self.live_actors()
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
        for group in [*self._groups.values(), *([self._spare] if self._spare else [])]:
            with contextlib.suppress(Exception):
                ray.util.remove_placement_group(group)
        self._groups, self._spare = {}, None
        self.actors, self.slots, self.home, self.dead = [], [], [], set()
        self.answered.clear()
        self.joining.clear()
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
        sent again to a live actor when still wanted; none of them supplied a row),
        ``frozen_servers``: actors lost for missing the per-task deadline, and
        ``replaced_servers``: replacement actors started during the run (see `lose_actor`;
        one still building when the run ends joins later: `admit`, `recover`).
        """
        check_seconds("timeout", timeout)
        config = DSIConfig(lookahead, sp_degree, verify=verify, queue=queue)
        prompt = check_inputs(self.target, prompt, max_new_tokens, self.drafter_lm)
        outbox = self.ray_outbox
        lost_before, frozen_before = outbox.lost_tasks, outbox.frozen_servers
        replaced_before = self.replaced
        self.admit()                                 # replacements built since the last run
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
        stats["replaced_servers"] = self.replaced - replaced_before
        return Run(run.tokens, run.time, run.trace, stats)

    def _warm_up(self, prompt: tuple[int, ...], sp_degree: int) -> None:
        """Prefill the live servers on the prompt, each within its deadline (``start_timeout``
        for an actor that never answered, else the per-task deadline): one that misses it is
        frozen and lost (`ServerTimeoutError` when none is left)."""
        outbox = self.ray_outbox
        live = [i for i in dict.fromkeys(self.slots[:sp_degree]) if i not in self.dead]
        began = time.monotonic()
        pending = {self.actors[i].rows.remote(prompt, 1): i for i in live}
        ends = {ref: began + self.actor_deadline(i) for ref, i in pending.items()}
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
