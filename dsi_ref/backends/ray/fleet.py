"""The Ray backend's server actors: each one's life cycle in one record, and who serves each slot.

An `Actor` is one target-server actor from its start to its loss: its handle, its placement
group (the resources it holds), whether it answered a call (its model is built), whether it is
dead, and while it is a replacement being built, how it `Joining`. A `Slot` is one of the ``SP``
server slots a DSI run dispatches to: the actor serving it now, and the actor it belongs to (its
*home*; they differ while the home is lost or a replacement of it is still building). `Fleet`
starts actors, loses them (dead, or frozen past their deadline), replaces them while the budget
lasts, and admits a replacement into its slots at its first answer. The rules are `RayEngine`'s
(`dsi_ref.backends.ray.engine`), documented in docs/ray-backend.md.
"""

from __future__ import annotations

import contextlib
import copy
import time
from dataclasses import dataclass
from typing import Any

import ray
import ray.exceptions
import ray.util
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from ...base.errors import ServerLostError, ServerTimeoutError, UnschedulableError
from ..torch.session import BackendLM
from ..torch.spec import ModelSpec
from .server import RemoteServer

__all__ = ["Actor", "Deadlines", "Fleet", "Joining", "ServerOptions", "Slot"]


@dataclass
class Joining:
    """A replacement still building: its first call (``probe``), when it was sent
    (``time.monotonic``), and its placement group's ``ready()`` while the group is not known to
    be placed (``None`` once it is, or when it holds no resources)."""

    probe: Any
    sent: float
    placing: Any


@dataclass(eq=False)
class Actor:
    """One target-server actor, its whole life cycle (compared by identity).

    Attributes:
        index: its order of creation.
        handle: the Ray actor handle.
        group: the placement group holding its resources (``None``: it asks for none, or they
            were released when it was lost).
        answered: it answered a call (so it built its model: its deadline is the per-task one).
        dead: it died or froze; it serves nothing again.
        joining: while it is a replacement that never answered, how it joins (else ``None``).
    """

    index: int
    handle: Any
    group: Any = None
    answered: bool = False
    dead: bool = False
    joining: Joining | None = None


@dataclass(eq=False)
class Slot:
    """A server slot: the actor ``serving`` it now, and its ``home``, the actor it belongs to."""

    serving: Actor
    home: Actor


@dataclass(frozen=True)
class ServerOptions:
    """How each server actor is started (`RayEngine`'s arguments)."""

    num_gpus: float
    server_cpus: float
    server_device: str
    server_threads: int
    segments: int
    graphs: bool | None
    resources: dict[str, float]


@dataclass(frozen=True)
class Deadlines:
    """The per-task deadline and the start and schedule timeouts (`RayEngine`'s arguments)."""

    task_timeout: float | None
    task_timeout_factor: float
    task_timeout_floor: float
    start_timeout: float
    schedule_timeout: float


class Fleet:
    """The server actors of a `RayEngine` and its ``SP`` slots (see the module docstring).

    Args:
        shipped: what each actor builds its model from: a `ModelSpec`, or the built target (to
            pickle through the object store).
        options: how each actor is started.
        deadlines: the deadlines and timeouts.
        max_replacements: the replacement budget (``None``: the number of slots started).
    """

    def __init__(self, shipped: BackendLM | ModelSpec, options: ServerOptions,
                 deadlines: Deadlines, max_replacements: int | None) -> None:
        self.shipped, self.options, self.deadlines = shipped, options, deadlines
        self.max_replacements = max_replacements
        self.actors: list[Actor] = []        # in creation order
        self.slots: list[Slot] = []
        self.replaced = 0                    # replacements started
        self.slowest_forward = 0.0           # seconds, over every reply seen
        self._model_ref: Any = None
        self._spare: Any = None              # the first server's group, reserved at once

    # -- views ----------------------------------------------------------------------------------
    def live(self) -> list[Actor]:
        """The live actors serving slots (in slot order, each once)."""
        return [a for a in dict.fromkeys(s.serving for s in self.slots) if not a.dead]

    def dead(self) -> list[Actor]:
        """The actors lost (died or froze), in creation order."""
        return [a for a in self.actors if a.dead]

    def joining(self) -> list[Actor]:
        """The replacements still building, in creation order."""
        return [a for a in self.actors if a.joining is not None]

    def replacement_budget(self) -> int:
        """How many replacements may be started in all (``max_replacements``, by default the
        number of server slots)."""
        return len(self.slots) if self.max_replacements is None else self.max_replacements

    # -- deadlines ------------------------------------------------------------------------------
    def task_deadline(self) -> float:
        """The per-task deadline in seconds (``task_timeout``, or derived from the slowest
        forward seen)."""
        d = self.deadlines
        if d.task_timeout is not None:
            return d.task_timeout
        return max(d.task_timeout_floor, d.task_timeout_factor * self.slowest_forward)

    def deadline(self, actor: Actor) -> float:
        """Seconds ``actor`` may take to answer: the per-task deadline, or ``start_timeout``
        while it never answered (it builds its model first)."""
        return self.task_deadline() if actor.answered else self.deadlines.start_timeout

    def observe(self, seconds: float) -> None:
        """A reply's forward took ``seconds``."""
        self.slowest_forward = max(self.slowest_forward, seconds)

    # -- starting actors ------------------------------------------------------------------------
    def bundle(self) -> dict[str, float]:
        """One server's resources."""
        o = self.options
        bundle = {key: value for key, value in (("CPU", o.server_cpus), ("GPU", o.num_gpus))
                  if value > 0}
        bundle.update(o.resources)
        return bundle

    def placement(self, wait: bool = True) -> Any:
        """A placement group holding one server's resources (``None`` when a server asks for
        none); with ``wait``, ready within ``schedule_timeout`` seconds, else
        `UnschedulableError` (a replacement's is not waited for: its actor starts when the
        group is ready, within ``start_timeout``)."""
        bundle = self.bundle()
        if not bundle:
            return None
        group = ray.util.placement_group([bundle])
        if not wait:
            return group
        timeout = self.deadlines.schedule_timeout
        ready, _ = ray.wait([group.ready()], timeout=timeout)
        if not ready:
            ray.util.remove_placement_group(group)
            total = ray.cluster_resources()
            raise UnschedulableError(
                f"no Ray node can host target server {len(self.actors) + 1} asking for "
                + ", ".join(f"{v:g} {k}" for k, v in bundle.items())
                + f" within {timeout:g} s (the cluster has "
                f"{total.get('GPU', 0):g} GPU, {total.get('CPU', 0):g} CPU, some maybe taken); "
                "ask for fewer GPUs per server (num_gpus / --ray-gpus 0 runs on CPUs) or "
                "fewer servers")
        return group

    def reserve_first(self) -> None:
        """Reserve the first server's resources now (an unschedulable server is a named error
        at construction, not at the first run)."""
        self._spare = self.placement()

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

    def start(self, replacement: bool = False) -> Actor:
        """Start a server actor (it builds its model in its constructor); a replacement's
        placement group is not waited for."""
        payload = self._payload()
        if replacement:
            group = self.placement(wait=False)
        else:
            group, self._spare = self._spare or self.placement(), None
        placed: dict[str, Any] = {} if group is None else {
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                group, placement_group_bundle_index=0)}
        o = self.options
        # out of order: Ray 2.60 stalls an in-order actor for 30 s, then fails its queue, when a
        # call is cancelled in transit (a gap in its sequence numbers; docs/ray-backend.md)
        handle = RemoteServer.options(num_cpus=o.server_cpus, num_gpus=o.num_gpus,
                                      resources=o.resources, max_restarts=0,
                                      allow_out_of_order_execution=True,
                                      **placed).remote(
            payload, o.server_device, o.segments, o.graphs, o.server_threads)
        actor = Actor(len(self.actors), handle, group)
        self.actors.append(actor)
        return actor

    def grow(self, sp_degree: int) -> None:
        """Start an actor for each of the first ``sp_degree`` slots that has none."""
        while len(self.slots) < sp_degree:
            actor = self.start()
            self.slots.append(Slot(actor, actor))

    # -- losing and replacing actors ------------------------------------------------------------
    def lose(self, dead: Actor, frozen_after: float | None = None) -> None:
        """``dead`` died (or froze: no answer for ``frozen_after`` seconds; it is killed). The
        slots it belonged to get a replacement while the budget lasts (`replacement_budget`;
        it serves them from its first answer, `admit`); meanwhile every slot it served moves to
        a live actor (to a replacement still building when none is live), or `ServerLostError`
        (`ServerTimeoutError` when frozen) when none is left."""
        if dead.dead:
            return
        if frozen_after is not None:
            with contextlib.suppress(Exception):
                ray.kill(dead.handle, no_restart=True)
        dead.dead, dead.joining = True, None
        group, dead.group = dead.group, None
        if group is not None:              # its resources, for the replacement
            with contextlib.suppress(Exception):
                ray.util.remove_placement_group(group)
        orphans = [slot for slot in self.slots if slot.home is dead]
        if orphans and self.replaced < self.replacement_budget():
            self.replaced += 1
            actor = self.start(replacement=True)
            actor.joining = Joining(actor.handle.pid.remote(), time.monotonic(),
                                    None if actor.group is None else actor.group.ready())
            for slot in orphans:
                slot.home = actor
        usable = [a for a in dict.fromkeys([*(s.serving for s in self.slots),
                                             *(s.home for s in self.slots)]) if not a.dead]
        live = [a for a in usable if a.joining is None] or usable
        if not live:
            lost = len(self.dead())
            if frozen_after is not None:
                raise ServerTimeoutError(
                    f"every target-server actor died or froze ({lost} lost; the last answered "
                    f"no call for {frozen_after:g} s, the per-task deadline); no token of a "
                    "lost call was committed")
            raise ServerLostError(f"every target-server actor died ({lost} lost); no token of "
                                  "a lost call was committed")
        for s, slot in enumerate(self.slots):
            if slot.serving is dead:
                slot.serving = live[s % len(live)]

    def admit(self, timeout: float = 0.0) -> None:
        """Replacements that answered take back the slots they belong to; one that died while
        building, or did not answer within ``start_timeout``, is lost (and replaced while the
        budget lasts). Waits up to ``timeout`` seconds for a first answer."""
        joining = self.joining()
        if not joining:
            return
        refs = {actor.joining.probe: actor for actor in joining if actor.joining is not None}
        done, _ = ray.wait(list(refs), num_returns=len(refs), timeout=timeout)
        for ref in done:
            actor = refs[ref]
            try:
                ray.get(ref, timeout=self.deadlines.start_timeout)
            except ray.exceptions.RayError:
                self.lose(actor)
                continue
            actor.joining, actor.answered = None, True
            for slot in self.slots:
                if slot.home is actor:
                    slot.serving = actor
        now = time.monotonic()
        for actor in self.joining():
            j = actor.joining
            if j is None:
                continue
            if j.placing is not None and now - j.sent >= self.deadlines.schedule_timeout:
                if not ray.wait([j.placing], timeout=0)[0]:
                    self._unplaceable(actor)
                    continue
                j.placing = None                   # placed
            if now - j.sent >= self.deadlines.start_timeout:
                self.lose(actor, frozen_after=self.deadlines.start_timeout)

    def admission_checks(self) -> list[float]:
        """When `admit` must look at the replacements again (``time.monotonic``): a
        replacement's ``schedule_timeout`` while its resources are not known to be reserved,
        then its ``start_timeout``."""
        d = self.deadlines
        return [a.joining.sent + (d.schedule_timeout if a.joining.placing is not None
                                  else d.start_timeout)
                for a in self.actors if a.joining is not None]

    def _unplaceable(self, actor: Actor) -> None:
        """Replacement ``actor``'s resources were not reserved within ``schedule_timeout`` (no
        node can host it now): it is lost; `UnschedulableError` when no actor is left."""
        with contextlib.suppress(Exception):
            ray.kill(actor.handle, no_restart=True)
        try:
            self.lose(actor)
        except ServerLostError:
            bundle = ", ".join(f"{v:g} {k}" for k, v in self.bundle().items())
            raise UnschedulableError(
                f"every target-server actor was lost, and no Ray node can host a replacement "
                f"asking for {bundle} within {self.deadlines.schedule_timeout:g} s") from None

    def recover(self, timeout: float | None = None) -> int:
        """Wait for the replacements still building (up to ``timeout`` seconds, by default
        ``start_timeout``) and let them take their slots; the number of live server actors."""
        end = time.monotonic() + (self.deadlines.start_timeout if timeout is None else timeout)
        while self.joining() and time.monotonic() < end:
            self.admit(timeout=max(0.0, min(1.0, end - time.monotonic())))
        return len(self.live())

    def server_pids(self) -> list[int]:
        """The process ids of the live server actors (in slot order, each once), within
        ``start_timeout`` (an actor that never answered) or the per-task deadline, else
        `ServerTimeoutError`."""
        live = self.live()
        timeout = self.task_deadline() if all(a.answered for a in live) \
            else self.deadlines.start_timeout
        try:
            pids = ray.get([a.handle.pid.remote() for a in live], timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            raise ServerTimeoutError(f"a target-server actor did not tell its pid within "
                                     f"{timeout:g} s") from None
        for actor in live:
            actor.answered = True
        return [int(pid) for pid in pids]

    def close(self) -> None:
        """Kill every actor and release the resources held."""
        for actor in self.actors:
            ray.kill(actor.handle)
        groups = [a.group for a in self.actors if a.group is not None]
        for group in [*groups, *([self._spare] if self._spare else [])]:
            with contextlib.suppress(Exception):
                ray.util.remove_placement_group(group)
        self._spare = None
        self.actors, self.slots = [], []
