"""Parameters of the acceptance-level simulator, validated in one place.

Notation (docs/paper.md): drafter forward ``c`` (target forward = 1), acceptance rate ``a``,
lookahead ``k``, ``N`` = ``n_tokens`` tokens to generate, ``SP`` = ``sp_degree`` target servers.
Prefill: ``target_first`` / ``drafter_first`` are the costs of a model's first forward (TTFT in
units of the target's TPOT); ``None`` means the plain cost. ``verify_cost`` is the cost ``v`` of a
verification forward (the target over a window of drafts plus one token) in the same unit; the
paper takes ``v = 1`` (``None``), i.e. a forward's cost does not depend on its query length.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, TypeAlias

from ..base.errors import InsufficientServersError, InvalidParameterError
from ..base.validate import check_int, check_number
from .acceptance import AcceptanceLaw, as_acceptance_law

__all__ = ["ALGORITHMS", "DECISIONS", "MODELS", "Algorithm", "Contention", "Decisions",
           "InsufficientServersError", "Model", "Num", "SimParams", "is_exact",
           "required_servers"]

Num: TypeAlias = Fraction | float | int
Algorithm = Literal["nonsi", "si", "dsi"]
Model = Literal["paper", "event"]
ALGORITHMS: tuple[Algorithm, ...] = ("nonsi", "si", "dsi")
MODELS: tuple[Model, ...] = ("paper", "event")
Decisions = Literal["position", "window"]
#: How the event model's committer decides drafts: ``"position"``, each draft when ``p``
#: reaches it (token-level rules); ``"window"``, a verification task's window at once when it
#: is complete and ``p`` is supplied at all of it (block verification, fixed windows).
DECISIONS: tuple[Decisions, ...] = ("position", "window")
QUEUES = ("fifo", "lifo", "any")



def is_exact(*values: object) -> bool:
    """True when every value is an ``int`` or a ``Fraction`` (results are then ``Fraction``)."""
    return all(v is None or (isinstance(v, int | Fraction) and not isinstance(v, bool))
               for v in values)


def required_servers(c: Num, lookahead: int) -> int:
    """``SP = ceil(1 / (k c))`` with ``k`` = ``lookahead``: the target servers the paper model
    needs so that no verification task waits. The one place the core computes it (`theory`'s
    ``sp_requirement`` is the independent derivation the bridge tests compare it with).

    >>> required_servers(Fraction(1, 20), 3)
    7
    """
    check_number("c", c, positive=True)
    lookahead = check_int("lookahead", lookahead)
    if is_exact(c):
        return math.ceil(Fraction(1) / (lookahead * Fraction(c)))
    return math.ceil(1.0 / (lookahead * float(c)))


@dataclass(frozen=True)
class Contention:
    """One device shared by DSI's target servers and its drafter (the event model's forwards
    otherwise run at full speed whatever else runs): measured slowdowns, processor-sharing style.

    While ``m`` target forwards run at once, each progresses at ``1 / target[m − 1]`` of its
    solo speed (``target[m − 1]`` = wall time of one forward when ``m`` run together, over the
    time of one alone; ``target[0] = 1``), and a drafter forward at ``1 / drafter[m]``
    (``drafter[0] = 1``). Beyond the table the last step is extended linearly. A forward's
    work is its solo cost (``1``, ``c``, or TTFT for a first forward); it finishes when that work
    is done, so its end moves whenever a forward starts, ends or is preempted.

    `dsi_ref.backends.engine.measure.measure_concurrency` measures both tables on a device.

    **Batched servers** (``batch``, ``Engine(batched=True)``): the target servers are the rows
    of one batched forward, and forwards run one at a time. Whenever the device is free, one
    forward takes every task started on a server and not preempted; a task started while a
    forward runs waits for its end. A forward over ``b`` tasks costs ``batch[b − 1]`` times the
    longest solo cost among them (``1``, ``v``, or TTFT) and all of them end with it; the drafter
    beside a running forward progresses at ``1 / drafter[1]``. ``target`` is then unused (no two
    forwards overlap). `dsi_ref.sim.batched` holds a measured table (one H100, llama-7b).

    >>> Contention((1.0, 1.5)).target_slowdown(3)
    2.0
    >>> Contention((1.0,), batch=(1.0, 1.25, 1.5)).batch_cost(4)
    1.75
    """

    target: tuple[float, ...]
    drafter: tuple[float, ...] = (1.0,)
    batch: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.batch is not None:
            table = self.batch
            if not isinstance(table, tuple) or not table or any(
                    isinstance(v, bool) or not isinstance(v, int | float | Fraction)
                    or not (math.isfinite(v) and v > 0) for v in table):
                raise InvalidParameterError(f"Contention.batch must be None or a non-empty "
                                            f"tuple of finite numbers > 0, got {table!r}")
        for name in ("target", "drafter"):
            table = getattr(self, name)
            if not isinstance(table, tuple) or not table or any(
                    isinstance(v, bool) or not isinstance(v, int | float | Fraction)
                    or not (math.isfinite(v) and v > 0) for v in table):
                raise InvalidParameterError(f"Contention.{name} must be a non-empty tuple of "
                                            f"finite numbers > 0, got {table!r}")
            if not math.isclose(float(table[0]), 1.0, rel_tol=1e-12):
                raise InvalidParameterError(f"Contention.{name}[0] must be 1 (a forward alone "
                                            f"runs at its own speed), got {table[0]!r}")

    @classmethod
    def from_times(cls, target: Sequence[float], drafter: Sequence[float]) -> Contention:
        """The slowdowns of measured wall times: ``target[m − 1]`` = one target forward with
        ``m`` running, ``drafter[m]`` = one drafter forward beside ``m`` (any unit).

        >>> Contention.from_times((3.0, 4.5), (0.5, 0.75)).drafter
        (1.0, 1.5)
        """
        for name, times in (("target", target), ("drafter", drafter)):
            given: object = times
            if isinstance(given, str | bytes) or not hasattr(given, "__len__") or not len(times):
                raise InvalidParameterError(f"Contention.from_times needs a non-empty sequence "
                                            f"of {name} times, got {times!r}")
            for t in times:
                check_number(f"Contention.from_times: a {name} time", t, positive=True)
        return cls(tuple(t / target[0] for t in target), tuple(d / drafter[0] for d in drafter))

    @staticmethod
    def _lookup(table: tuple[float, ...], index: int) -> float:
        if index < len(table):
            return float(table[index])
        step = float(table[-1]) - float(table[-2]) if len(table) >= 2 else 0.0
        return float(table[-1]) + step * (index - len(table) + 1)

    def target_slowdown(self, running: int) -> float:
        """Wall time of one target forward over its solo time, ``running >= 1`` at once."""
        return self._lookup(self.target, max(running, 1) - 1)

    def batch_cost(self, rows: int) -> float:
        """``batch`` servers: the cost of one forward over ``rows >= 1`` tasks, in units of the
        solo cost of its longest task (`InvalidParameterError` without a ``batch`` table)."""
        if self.batch is None:
            raise InvalidParameterError("this Contention has no batch table (batched servers)")
        return self._lookup(self.batch, max(rows, 1) - 1)

    def drafter_slowdown(self, running: int) -> float:
        """Wall time of one drafter forward over its solo time, ``running`` target forwards
        at once."""
        return self._lookup(self.drafter, running)


@dataclass(frozen=True)
class SimParams:
    """One configuration of the acceptance-level simulator.

    Args:
        algorithm: ``"nonsi"``, ``"si"`` or ``"dsi"``.
        c: drafter forward cost (target forward = 1), ``> 0``.
        a: acceptance rate, ``0 <= a <= 1`` (i.i.d. per draft); ``None`` when ``acceptance``
            gives a law instead.
        lookahead: ``k``, drafts per verification, ``>= 1``; ignored for ``nonsi``.
        n_tokens: ``N >= 1``.
        model: ``"paper"`` (official offline simulator) or ``"event"`` (docs/dsi-semantics.md).
        sp_degree: ``SP``; for the paper model ``None`` = unlimited, an int = check
            ``SP >= ceil(1/(k c))`` as the official simulator does; required for the event model.
        queue: event model only, order of waiting verification tasks (``"any"`` = the
            canonical schedule, i.e. FIFO).
        target_first, drafter_first: cost of the first forward (prefill); ``None`` = plain cost.
        contention: event model only: the servers and the drafter share one device
            (`Contention`); results are then floats. Non-SI and SI never run two forwards at
            once, so it changes DSI only. ``None``: independent servers (the paper's setting).
        verify_cost: ``v``, the cost of a verification forward (the target over up to ``k``
            drafts plus one token; target forward of one token = 1): SI's iterations with at
            least one draft and the event model's verification tasks cost ``v``, non-SI's
            forwards and the event model's frontier tasks 1. ``None`` = 1 (the paper's
            assumption). Not for the paper model's DSI, whose segments charge no forward of
            their own.
        acceptance: instead of ``a``, the law of accepted lengths per window of ``lookahead``
            drafts (`dsi_ref.sim.acceptance.AcceptanceLaw`, or a mapping ``{length:
            probability}``); exactly one of ``a`` and ``acceptance`` is given.
        decisions: how DSI's committer decides drafts (`DECISIONS`): ``"position"`` (each
            draft as soon as ``p`` is supplied there: token-level rules) or ``"window"`` (a
            verification task's window as one block once it is complete and ``p`` is supplied
            at all of it: block verification with fixed windows, docs/dsi-semantics.md "Block
            decisions"). The event model only; non-SI and SI decide a window at once either
            way (their value does not change).
        task_overhead: ``o``, what a DSI target task costs beyond its forward when the servers
            are remote (an actor call's round trip, the transfer of its tokens and rows; target
            forward = 1): event model only, added to every target-server task (frontier,
            verification, first forward). Non-SI and SI run in one process: unchanged.
            ``None`` = 0. `dsi_ref.backends.ray` measures it (docs/ray-backend.md).
    """

    algorithm: Algorithm
    c: Num
    a: Num | None
    lookahead: int
    n_tokens: int
    model: Model = "paper"
    sp_degree: int | None = None
    queue: Literal["fifo", "lifo", "any"] = "fifo"
    target_first: Num | None = None
    drafter_first: Num | None = None
    contention: Contention | None = None
    verify_cost: Num | None = None
    acceptance: AcceptanceLaw | None = None
    decisions: Decisions = "position"
    task_overhead: Num | None = None

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise InvalidParameterError(f"algorithm must be one of {ALGORITHMS}, "
                                        f"got {self.algorithm!r}")
        if self.model not in MODELS:
            raise InvalidParameterError(f"model must be one of {MODELS}, got {self.model!r}")
        check_number("c", self.c, positive=True)
        object.__setattr__(self, "lookahead", check_int("lookahead", self.lookahead))
        if (self.a is None) == (self.acceptance is None):
            raise InvalidParameterError("give exactly one of the acceptance rate a and the law "
                                        f"acceptance=, got a={self.a!r}, "
                                        f"acceptance={self.acceptance!r}")
        if self.acceptance is None:
            check_number("acceptance rate a", self.a, low=0, high=1)
        else:
            # non-SI never drafts: its law is checked but its window size is not the lookahead
            given: object = self.acceptance
            k = given.k if isinstance(given, AcceptanceLaw) and self.algorithm == "nonsi" \
                else self.lookahead
            object.__setattr__(self, "acceptance", as_acceptance_law(given, k))
        object.__setattr__(self, "n_tokens", check_int("n_tokens", self.n_tokens))
        check_number("target_first", self.target_first, positive=True, allow_none=True)
        check_number("drafter_first", self.drafter_first, positive=True, allow_none=True)
        check_number("verify_cost", self.verify_cost, positive=True, allow_none=True)
        check_number("task_overhead", self.task_overhead, low=0, allow_none=True)
        if self.queue not in QUEUES:
            raise InvalidParameterError(f"queue must be one of {QUEUES}, got {self.queue!r}")
        if not isinstance(self.decisions, str) or self.decisions not in DECISIONS:
            raise InvalidParameterError(f"decisions must be one of {DECISIONS}, got "
                                        f"{self.decisions!r}")
        if self.decisions == "window" and self.model == "paper" and self.algorithm == "dsi":
            raise InvalidParameterError("the paper model has no committer: decisions='window' "
                                        "needs model='event'")
        if self.sp_degree is not None:
            object.__setattr__(self, "sp_degree", check_int("sp_degree", self.sp_degree))
        if self.model == "event" and self.algorithm == "dsi" and self.sp_degree is None:
            raise InvalidParameterError("the event model simulates the servers: pass "
                                        "sp_degree (an int >= 1)")
        if self.contention is not None and not isinstance(self.contention, Contention):
            raise InvalidParameterError(f"contention must be a Contention, got "
                                        f"{self.contention!r}")
        if self.contention is not None and self.model == "paper" and self.algorithm == "dsi":
            raise InvalidParameterError("the paper model has unlimited independent servers: "
                                        "contention needs model='event'")
        if self.verify_cost is not None and self.model == "paper" and self.algorithm == "dsi":
            raise InvalidParameterError("the paper model charges DSI per segment, not per "
                                        "forward: verify_cost needs model='event'")
        if self.task_overhead is not None and self.model == "paper" and self.algorithm == "dsi":
            raise InvalidParameterError("the paper model has no target tasks to charge: "
                                        "task_overhead needs model='event'")
        if self.model == "paper" and self.algorithm == "dsi" and self.sp_degree is not None:
            need = required_servers(self.c, self.lookahead)
            if self.sp_degree < need:
                raise InsufficientServersError(
                    f"the paper model needs SP >= ceil(1/(k c)) = {need} target servers for "
                    f"lookahead={self.lookahead}, c={self.c} (got sp_degree={self.sp_degree}); "
                    "raise sp_degree or lookahead, pass sp_degree=None (unlimited), or use "
                    "model='event'")

    @property
    def exact(self) -> bool:
        """True when every number is rational (results are then exact ``Fraction``s)."""
        law_exact = self.acceptance is None or self.acceptance.exact
        return self.contention is None and law_exact and is_exact(
            self.c, self.a, self.target_first, self.drafter_first, self.verify_cost,
            self.task_overhead)

    @property
    def rate(self) -> Num:
        """``a``, the i.i.d. acceptance rate (`InvalidParameterError` when a law was given)."""
        if self.a is None:
            raise InvalidParameterError("this configuration gives a law of accepted lengths, "
                                        "not a rate a")
        return self.a

    @property
    def law(self) -> AcceptanceLaw:
        """The law of accepted lengths per window of ``lookahead`` drafts (`AcceptanceLaw.iid`
        of ``a`` when a rate was given)."""
        if self.acceptance is not None:
            return self.acceptance
        return AcceptanceLaw.iid(self.rate, self.lookahead)

    @property
    def verify(self) -> Num:
        """``v``: the cost of a verification forward (``verify_cost``, 1 when ``None``)."""
        return 1 if self.verify_cost is None else self.verify_cost

    @property
    def overhead(self) -> Num:
        """``o``: the per-task overhead of a remote target server (``task_overhead``, 0 when
        ``None``)."""
        return 0 if self.task_overhead is None else self.task_overhead

    def prefill_extra(self, *, drafter: bool) -> Num:
        """``(target_first − 1) + (drafter_first − c)`` (the drafter part only if it drafts)."""
        extra: Num = 0
        if self.target_first is not None:
            extra = extra + self.target_first - 1
        if drafter and self.drafter_first is not None:
            extra = extra + self.drafter_first - self.c
        return extra
