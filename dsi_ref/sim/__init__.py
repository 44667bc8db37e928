"""Acceptance-level latency simulator: non-SI, SI and DSI at the paper's scale, exactly.

Tokens are abstracted away: each draft is accepted i.i.d. with rate ``a`` (docs/paper.md), or
each window of ``k`` drafts accepts a length drawn from a law (``acceptance=``, an
`AcceptanceLaw`; docs/acceptance-laws.md). Two models of DSI:

* ``model="paper"`` — the official offline simulator (per-segment ``min(speculative cost,
  target-only cost)``, shortened last window, unlimited servers), `dsi_ref.sim.paper`;
* ``model="event"`` — the DSI of docs/dsi-semantics.md (frontier task, ``sp_degree`` servers,
  queue, preemption, canonical tie order), `dsi_ref.sim.event`; bridge tests tie it to the
  token-level `dsi_ref.decoders.dsi` exactly: with ``decisions="position"`` (the default) for
  token-level rules, with ``decisions="window"`` for block verification (fixed windows).

`expected_latency` is exact (a ``Fraction`` when every input is rational); `simulate_latency`
draws run latencies by Monte Carlo, vectorised over runs and seeded. Time unit: one target
forward; `dsi_ref.sim.paper_table` converts TTFT/TPOT pairs in milliseconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..base.errors import InsufficientServersError, InvalidParameterError
from ..base.validate import check_int, check_seed
from .acceptance import AcceptanceLaw, AcceptanceLike
from .event import dsi_event_exact, simulate_event
from .paper import dsi_paper_exact, nonsi_exact, si_exact, simulate_paper
from .params import (
    ALGORITHMS,
    DECISIONS,
    MODELS,
    Algorithm,
    Contention,
    Model,
    Num,
    SimParams,
    required_servers,
)

__all__ = ["ALGORITHMS", "DECISIONS", "MODELS", "AcceptanceLaw", "Contention",
           "InsufficientServersError", "SimParams", "expected_latency", "required_servers",
           "simulate_latency"]


class _Unset:
    """The default of ``lookahead`` and ``k``: "not given" (``None`` is a legitimate lookahead
    for non-SI, so it cannot mark a missing one)."""

    def __repr__(self) -> str:
        return "<not given>"


_UNSET: Any = _Unset()


def _resolve_lookahead(lookahead: int | None, k: int | None) -> int | None:
    """The lookahead given as ``lookahead=`` or as its documented alias ``k=`` (the paper's
    letter, kept so that callers of the public API written before the rename keep working).

    `_UNSET` marks an argument left out; giving both is an `InvalidParameterError`.

    >>> _resolve_lookahead(_UNSET, 3)
    3
    """
    if lookahead is not _UNSET and k is not _UNSET:
        raise InvalidParameterError("give the lookahead once: lookahead= (k= is its alias), "
                                    f"got lookahead={lookahead!r} and k={k!r}")
    if lookahead is not _UNSET:
        return lookahead
    return None if k is _UNSET else k


def _params(algorithm: Algorithm, c: Num, a: Num | None, lookahead: int | None, k: int | None,
            n_tokens: int, model: Model, sp_degree: int | None, queue: str,
            target_first: Num | None, drafter_first: Num | None,
            contention: Contention | None = None, verify_cost: Num | None = None,
            acceptance: AcceptanceLike | None = None, decisions: str = "position",
            task_overhead: Num | None = None) -> SimParams:
    given = _resolve_lookahead(lookahead, k)
    if given is None:
        if algorithm != "nonsi":
            raise InvalidParameterError(f"{algorithm} needs a lookahead (an int >= 1): pass "
                                        "lookahead=")
        given = 1
    return SimParams(algorithm, c, a, given, n_tokens, model, sp_degree,
                     queue,  # type: ignore[arg-type]
                     target_first, drafter_first, contention, verify_cost,
                     acceptance,  # type: ignore[arg-type]  # a mapping is converted there
                     decisions,  # type: ignore[arg-type]  # checked there
                     task_overhead)


def expected_latency(algorithm: Algorithm, *, c: Num, a: Num | None = None,
                     lookahead: int | None = _UNSET, n_tokens: int, model: Model = "paper",
                     sp_degree: int | None = None, queue: str = "fifo",
                     target_first: Num | None = None, drafter_first: Num | None = None,
                     contention: Contention | None = None, verify_cost: Num | None = None,
                     k: int | None = _UNSET, acceptance: AcceptanceLike | None = None,
                     decisions: str = "position", task_overhead: Num | None = None) -> Num:
    """The exact expected latency ``E[T]`` of generating ``N = n_tokens`` tokens.

    Args:
        algorithm: ``"nonsi"``, ``"si"`` or ``"dsi"``.
        c: drafter forward cost (target forward = 1).
        a: acceptance rate in ``[0, 1]`` (each draft accepted i.i.d.); give it or ``acceptance``.
        lookahead: ``k``, drafts per verification (ignored for ``nonsi``, where it may be
            ``None`` or left out; required otherwise).
        n_tokens: ``N``.
        model: ``"paper"`` or ``"event"`` (only DSI differs between them).
        sp_degree: paper model: ``None`` = unlimited, an int = check ``SP >= ceil(1/(k c))``
            (`InsufficientServersError` otherwise); event model: the number of target servers.
        queue: event model: ``"fifo"`` (= ``"any"`` under the canonical schedule) or ``"lifo"``.
        target_first, drafter_first: cost of each model's first forward (prefill/TTFT).
        contention: event model: the servers and the drafter share one device, with the
            measured slowdowns of a `Contention` (a float result); ``None`` = independent
            servers. Only DSI runs forwards concurrently, so only DSI changes.
        verify_cost: ``v``, the cost of a verification forward (the target over a window of
            drafts plus one token); ``None`` = 1, the paper's assumption. SI and the event
            model's DSI (not the paper model's); measured, it is the forward time at query
            length ``k + 1`` over the TPOT.
        k: an alias of ``lookahead``, for callers written before the rename; giving both is an
            `InvalidParameterError`.
        acceptance: instead of ``a``, the law of a window's accepted length ``L ∈ {0 … k}``
            (`AcceptanceLaw`, or a mapping ``{length: probability}``; ``k`` = the lookahead):
            SI draws one per iteration, DSI one per verification task's window
            (`dsi_ref.sim.event`), the paper model one per window of a segment. Exactly one of
            ``a`` and ``acceptance`` (`InvalidParameterError` otherwise).
        decisions: how the event model's committer decides drafts (`DECISIONS`):
            ``"position"`` (default), each draft as soon as ``p`` is supplied there — token-level
            rules; ``"window"``, a verification task's window as one block once it is complete
            and ``p`` is supplied at all of it — block verification with fixed windows
            (docs/dsi-semantics.md, "Block decisions"; give block's law as ``acceptance``). DSI
            with ``model="event"`` only (`InvalidParameterError` with the paper model); non-SI
            and SI decide a window at once either way, so their value does not change.
        task_overhead: event model's DSI: ``o``, added to every target-server task's cost (the
            remote servers of `dsi_ref.backends.ray`: an actor call's round trip and
            transfers, measured); ``None`` = 0. Non-SI and SI are unchanged.

    Returns a ``Fraction`` when every number given is rational (and no contention), else a
    float.

    >>> from fractions import Fraction
    >>> expected_latency("si", c=Fraction(1, 10), a=Fraction(1, 2), lookahead=1,
    ...                  n_tokens=2)
    Fraction(8, 5)
    """
    p = _params(algorithm, c, a, lookahead, k, n_tokens, model, sp_degree, queue, target_first,
                drafter_first, contention, verify_cost, acceptance, decisions, task_overhead)
    if p.algorithm == "nonsi":
        return nonsi_exact(p)
    if p.algorithm == "si":
        return si_exact(p)
    return dsi_paper_exact(p) if p.model == "paper" else dsi_event_exact(p)


def simulate_latency(algorithm: Algorithm, *, c: Num, a: Num | None = None,
                     lookahead: int | None = _UNSET, n_tokens: int, n_repeats: int,
                     seed: int | np.random.Generator, model: Model = "paper",
                     sp_degree: int | None = None, queue: str = "fifo",
                     target_first: Num | None = None, drafter_first: Num | None = None,
                     contention: Contention | None = None, verify_cost: Num | None = None,
                     k: int | None = _UNSET, acceptance: AcceptanceLike | None = None,
                     decisions: str = "position",
                     task_overhead: Num | None = None) -> NDArray[np.float64]:
    """Latencies of ``n_repeats`` independent runs (Monte Carlo, vectorised over runs).

    Same arguments as `expected_latency`, plus ``n_repeats`` and ``seed`` (an int or a numpy
    ``Generator``; nothing else is random), the same alias ``k=`` of ``lookahead`` and the same
    ``acceptance=`` (a law of accepted lengths per window, instead of ``a``) and ``decisions=``
    (``"window"``: block decisions with fixed windows), and ``task_overhead=``. The mean
    converges to
    `expected_latency`.

    >>> simulate_latency("nonsi", c=0.1, a=0.5, n_tokens=7, n_repeats=3, seed=0)
    array([7., 7., 7.])
    """
    n_repeats = check_int("n_repeats", n_repeats)
    p = _params(algorithm, c, a, lookahead, k, n_tokens, model, sp_degree, queue, target_first,
                drafter_first, contention, verify_cost, acceptance, decisions, task_overhead)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(
        check_seed("seed", seed))
    if p.model == "event" and p.algorithm == "dsi":
        return simulate_event(p, n_repeats, rng)
    return simulate_paper(p, n_repeats, rng)
