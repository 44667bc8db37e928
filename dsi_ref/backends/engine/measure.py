"""The paper's measurements on torch models: TTFT/TPOT, and acceptance rates of a pair.

Protocol (docs/paper.md, "Measurement protocol used by the authors"): batch 1, greedy;
warm-up first; TTFT = one synchronised forward over the prompt;
TPOT = (generate time − TTFT)/(new tokens − 1); mean and spread over N prompts. Forwards go
through the same `Session.rows` call that the execution engine uses (CUDA graph replay, float64
softmax, the row copied to the host), so the measured latencies are the ones the engine pays per
forward.

Acceptance rates:

* `greedy_acceptance` — the paper's estimator: the target generates greedily; at each position the
  drafter predicts one token (argmax) on the *target's* prefix; the match indicators form runs;
  with a geometric law of run lengths, ``a = 1 − 1/(1 + mean run length)``. Runs are the blocks of
  matches ended by a mismatch (a trailing unfinished block is censored and left out), so the mean
  run length is ``matches / mismatches`` and ``a = matches / (matches + mismatches)`` over the
  ended runs.
* `sampling_acceptance` — the acceptance probability of rejection sampling at a position,
  ``Σ_x min(p(x), q(x))``, averaged over the positions of sequences sampled from the target.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial

import numpy as np
import torch

from ...base.errors import BackendError
from ...base.randomness import Sampler
from ...sim.batched import BatchedCosts
from ...sim.params import Contention
from ..torch.session import BackendLM, SessionLike
from .engine import Engine

__all__ = [
    "AcceptanceEstimate",
    "ConcurrencyMeasurement",
    "LatencyStats",
    "PairMeasurement",
    "greedy_acceptance",
    "measure_batched_costs",
    "measure_concurrency",
    "measure_latency",
    "measure_pair",
    "measure_verify_cost",
    "random_prompts",
    "sampling_acceptance",
]


@dataclass(frozen=True)
class LatencyStats:
    """TTFT and TPOT of one model on one device, in milliseconds (mean and standard deviation
    over prompts)."""

    ttft_ms: float
    ttft_std_ms: float
    tpot_ms: float
    tpot_std_ms: float
    prompts: int
    new_tokens: int


@dataclass(frozen=True)
class AcceptanceEstimate:
    """An acceptance-rate estimate and what it was computed from."""

    acceptance: float
    positions: int
    matches: int = 0
    mismatches: int = 0

    @property
    def mean_run_length(self) -> float:
        """Mean number of matches before a mismatch (greedy estimator only)."""
        return self.matches / self.mismatches if self.mismatches else float("inf")


@dataclass(frozen=True)
class PairMeasurement:
    """What `dsi-ref table` needs for one target/drafter pair (latencies in ms)."""

    name: str
    target_ttft_ms: float
    target_tpot_ms: float
    drafter_ttft_ms: float
    drafter_tpot_ms: float
    acceptance: float
    sampling_acceptance: float

    @property
    def c(self) -> float:
        """Drafter TPOT over target TPOT (docs/paper.md's ``c``)."""
        return self.drafter_tpot_ms / self.target_tpot_ms

    def as_row(self) -> dict[str, float | str]:
        """Every field, flat (JSON)."""
        return asdict(self)

    def table_row(self, *, greedy: bool = True, sp_degree: int | None = None,
                  lookahead: int | None = None) -> dict[str, float | int | str]:
        """The row ``dsi-ref table --rows`` reads (its field names): the latencies and the greedy
        (paper's) or the sampling acceptance rate; ``sp_degree``/``lookahead`` when given."""
        row: dict[str, float | int | str] = {
            "name": self.name, "target_ttft_ms": self.target_ttft_ms,
            "target_tpot_ms": self.target_tpot_ms, "drafter_ttft_ms": self.drafter_ttft_ms,
            "drafter_tpot_ms": self.drafter_tpot_ms,
            "acceptance_rate": self.acceptance if greedy else self.sampling_acceptance}
        if sp_degree is not None:
            row["sp_degree"] = sp_degree
        if lookahead is not None:
            row["lookahead"] = lookahead
        return row


@dataclass(frozen=True)
class ConcurrencyMeasurement:
    """Forward times on one device while several target forwards run at once (milliseconds).

    ``target_ms[m − 1]``: wall time of one target forward while ``m`` run concurrently (each in
    its own thread, session and stream); ``drafter_ms[m]``: one drafter forward while ``m`` target
    forwards keep running. `contention` turns them into the simulator's slowdowns.
    """

    target_ms: tuple[float, ...]
    drafter_ms: tuple[float, ...]
    length: int
    forwards: int

    @property
    def parallelism(self) -> tuple[float, ...]:
        """``m · t(1) / t(m)``: 1 when concurrent forwards serialise, ``m`` when they overlap
        perfectly."""
        return tuple(m * self.target_ms[0] / t for m, t in enumerate(self.target_ms, 1))

    def contention(self) -> Contention:
        """The slowdowns relative to a forward alone, for ``expected_latency(contention=...)``."""
        return Contention.from_times(self.target_ms, self.drafter_ms)

    def as_dict(self) -> dict[str, object]:
        """Every field and the parallelism (JSON)."""
        return {**asdict(self), "parallelism": self.parallelism}


def measure_concurrency(target: BackendLM, drafter: BackendLM, prompt: Sequence[int],
                        sp_degree: int, *, forwards: int = 50,
                        length: int = 1) -> ConcurrencyMeasurement:
    """How much concurrent forwards slow each other down on the device (one device for all),
    up to ``SP`` = ``sp_degree`` target forwards at once (DSI's servers all busy).

    For ``m = 1 .. SP``: ``m`` threads, each with its own target session (KV cache,
    stream, graphs), run ``forwards`` forwards of ``length`` query tokens after ``prompt`` at
    once; ``t(m)`` = wall time / ``forwards``. Then for ``m = 0 .. SP``: ``forwards``
    drafter forwards (one token) while ``m`` target threads keep running. Sessions are warmed up
    (graphs captured, prompt cached) before any timing.
    """
    if sp_degree < 1 or forwards < 1 or length < 1:
        raise BackendError(f"need sp_degree, forwards and length >= 1, got {sp_degree}, "
                           f"{forwards} and {length}")
    _check_pair(target, drafter)
    context = tuple(prompt) + (1,) * length
    sessions = [target.session() for _ in range(sp_degree)]
    # the drafter's stream is the more urgent one, as in `Engine`
    drafter_session = drafter.session(priority=-1 if drafter.device.type == "cuda" else 0)
    for session in sessions:
        session.rows(context, length)                  # capture graphs, cache the prompt
    drafter_session.rows(tuple(prompt) + (1,), 1)

    def run(running: int, count: int | None, stop: threading.Event | None) -> float:
        """``running`` target threads (``count`` forwards each, or until ``stop``); seconds."""
        ready = threading.Barrier(running + 1)

        def work(session: SessionLike) -> None:
            ready.wait()
            done = 0
            while not (stop.is_set() if stop is not None else done >= (count or 0)):
                session.rows(context, length)
                done += 1

        threads = [threading.Thread(target=work, args=(s,), daemon=True)
                   for s in sessions[:running]]
        for thread in threads:
            thread.start()
        _sync(target)
        ready.wait()
        began = time.perf_counter()
        if stop is not None:                           # the drafter, beside the busy targets
            for _ in range(forwards):
                drafter_session.rows(tuple(prompt) + (1,), 1)
        for thread in threads if stop is None else ():
            thread.join()
        elapsed = time.perf_counter() - began
        if stop is not None:
            stop.set()
            for thread in threads:
                thread.join()
        return elapsed

    target_ms = tuple(run(m, forwards, None) / forwards * 1e3 for m in range(1, sp_degree + 1))
    drafter_ms = tuple(run(m, None, threading.Event()) / forwards * 1e3
                       for m in range(sp_degree + 1))
    return ConcurrencyMeasurement(target_ms, drafter_ms, length, forwards)


def measure_verify_cost(lm: BackendLM, prompt: Sequence[int], lengths: Sequence[int], *,
                        forwards: int = 50) -> dict[int, float]:
    """``v(L)``: the time of one forward over ``L`` query tokens after ``prompt``, over the time
    of a one-token forward, for each ``L`` in ``lengths`` (a verification of ``k`` drafts has
    ``L = k + 1``). What ``expected_latency(verify_cost=...)`` takes.

    One session (warmed up: graphs captured, prompt cached) runs ``forwards`` forwards of each
    length in turn, the one-token ones first and again last (their mean is the unit), through
    the same `Session.rows` call the engine uses.
    """
    if forwards < 1 or not lengths or min(lengths) < 1:
        raise BackendError(f"need forwards >= 1 and lengths >= 1, got {forwards} and "
                           f"{list(lengths)}")
    session = lm.session()
    order = [1, *lengths, 1]
    for length in order:                               # capture graphs, cache the prompt
        session.rows(tuple(prompt) + (1,) * length, length)
    seconds: dict[int, list[float]] = {}
    for length in order:
        context = tuple(prompt) + (1,) * length
        began = time.perf_counter()
        for _ in range(forwards):
            session.rows(context, length)              # rows reach the host: synchronised
        seconds.setdefault(length, []).append((time.perf_counter() - began) / forwards)
    unit = statistics.fmean(seconds[1])
    return {length: statistics.fmean(seconds[length]) / unit for length in lengths}


def _mean_ms(call: Callable[[], object], reps: int) -> float:
    """Milliseconds per call of ``call``, over ``reps`` calls after one warm-up call."""
    call()                                        # warm (graphs, caches)
    began = time.perf_counter()
    for _ in range(reps):
        call()                                    # every call returns host rows: synchronised
    return (time.perf_counter() - began) * 1e3 / reps


def measure_batched_costs(engine: Engine, sp_degree: int, lookahead: int, reps: int = 10
                          ) -> BatchedCosts:
    """This device's `BatchedCosts`, measured as issue 25 did: a 64-token prefix, windows of
    ``lookahead + 1`` new tokens; a one-token forward (TPOT), one window in a `Session`, ``b =
    1 .. sp`` windows in the engine's `BatchedSession`, a drafter forward alone and beside a
    running batched forward. The batched model of `dsi_ref.sim.batched` predicts from them
    (`dsi_ref.sim.batched.predict`); ``dsi-ref bench --batched`` and
    benchmarks/batched_loop_profile.py print that prediction beside the measurement."""
    vocab = engine.target.vocab_size
    context = tuple(1 + i % (vocab - 1) for i in range(64 + lookahead + 1))
    target, drafter = engine.target_session, engine.drafter_session
    batched = engine.batched_pool(sp_degree).session
    tpot = _mean_ms(lambda: target.rows(context, 1), reps)
    verify = _mean_ms(lambda: target.rows(context, lookahead + 1), reps)
    table = {b: _mean_ms(partial(batched.rows_batch,
                                 dict.fromkeys(range(b), (context, lookahead + 1))), reps)
             for b in range(1, sp_degree + 1)}
    alone = _mean_ms(lambda: drafter.rows(context, 1), reps)
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            batched.rows_batch(dict.fromkeys(range(sp_degree), (context, lookahead + 1)))

    thread = threading.Thread(target=busy)
    thread.start()
    try:
        beside = _mean_ms(lambda: drafter.rows(context, 1), reps)
    finally:
        stop.set()
        thread.join()
    return BatchedCosts(tpot, verify, table, alone, max(1.0, beside / alone), lookahead,
                        f"measured here (reps {reps})")


def random_prompts(vocab_size: int, count: int, length: int, seed: int) -> list[tuple[int, ...]]:
    """``count`` seeded random prompts of ``length`` tokens (ids ``1 .. vocab_size - 1``)."""
    if count < 1 or length < 1:
        raise BackendError(f"need count >= 1 and length >= 1, got {count} and {length}")
    gen = np.random.default_rng(seed)
    return [tuple(int(t) for t in gen.integers(1, vocab_size, size=length))
            for _ in range(count)]


def _sync(lm: BackendLM) -> None:
    if lm.device.type == "cuda":
        torch.cuda.synchronize(lm.device)


def measure_latency(lm: BackendLM, prompts: Sequence[Sequence[int]], new_tokens: int, *,
                    warmup: int = 2) -> LatencyStats:
    """TTFT and TPOT of ``lm`` (greedy generation of ``new_tokens`` tokens per prompt).

    The first ``warmup`` prompts are run once untimed first (CUDA graph capture, allocator,
    clocks). Each timed prompt starts from an empty cache.
    """
    if new_tokens < 2:
        raise BackendError(f"new_tokens must be >= 2 to separate TTFT from TPOT, got {new_tokens}")
    if not prompts:
        raise BackendError("measure_latency needs at least one prompt")
    session = lm.session()

    def generate(prompt: Sequence[int]) -> tuple[float, float]:
        session.reset()
        seq = list(prompt)
        _sync(lm)
        t0 = time.perf_counter()
        seq.append(int(np.argmax(session.rows(seq, 1)[0])))      # prefill: the first token
        ttft = time.perf_counter() - t0
        for _ in range(new_tokens - 1):
            seq.append(int(np.argmax(session.rows(seq, 1)[0])))
        _sync(lm)
        return ttft, time.perf_counter() - t0

    for prompt in list(prompts)[:warmup]:
        generate(prompt)
    ttfts, tpots = [], []
    for prompt in prompts:
        ttft, total = generate(prompt)
        ttfts.append(ttft * 1e3)
        tpots.append((total - ttft) / (new_tokens - 1) * 1e3)
    spread = statistics.pstdev
    return LatencyStats(statistics.fmean(ttfts), spread(ttfts), statistics.fmean(tpots),
                        spread(tpots), len(ttfts), new_tokens)


def _check_pair(target: BackendLM, drafter: BackendLM) -> None:
    if target.vocab_size != drafter.vocab_size:
        raise BackendError(f"target and drafter vocabularies differ: {target.vocab_size} vs "
                           f"{drafter.vocab_size}")


def greedy_acceptance(target: BackendLM, drafter: BackendLM, prompts: Sequence[Sequence[int]],
                      new_tokens: int) -> AcceptanceEstimate:
    """The paper's estimator ``a = 1 − 1/(1 + mean run length)`` (see the module docstring)."""
    _check_pair(target, drafter)
    engine = Engine(target)
    d_session = drafter.session()
    matches = mismatches = positions = 0
    for prompt in prompts:
        prompt = tuple(prompt)
        generated = engine.autoregressive(prompt, new_tokens, Sampler(0), greedy=True).tokens
        # the drafter's argmax after prompt + generated[:j], for every j, in one forward
        rows = d_session.rows(prompt + generated[:-1], len(generated))
        run = 0
        for predicted, token in zip(rows.argmax(axis=1).tolist(), generated, strict=True):
            if predicted == token:
                run += 1
            else:
                matches, mismatches, run = matches + run, mismatches + 1, 0
        positions += len(generated)
    if not mismatches:
        raise BackendError("no mismatch in the sample: the greedy estimator needs at least one "
                           "ended run; generate more tokens or use more prompts")
    mean_run = matches / mismatches
    return AcceptanceEstimate(1 - 1 / (1 + mean_run), positions, matches, mismatches)


def sampling_acceptance(target: BackendLM, drafter: BackendLM, prompts: Sequence[Sequence[int]],
                        new_tokens: int, seed: int) -> AcceptanceEstimate:
    """``Σ_x min(p(x), q(x))`` averaged over the positions of sequences sampled from the target
    (``Sampler(seed)``), with ``p``/``q`` the target's/drafter's rows on the same prefix."""
    _check_pair(target, drafter)
    engine = Engine(target)
    t_session, d_session = target.session(), drafter.session()
    total, positions = 0.0, 0
    for i, prompt in enumerate(prompts):
        prompt = tuple(prompt)
        generated = engine.autoregressive(prompt, new_tokens, Sampler(seed + i)).tokens
        context = prompt + generated[:-1]
        overlap = np.minimum(t_session.rows(context, len(generated)),
                             d_session.rows(context, len(generated))).sum(axis=1)
        total += float(overlap.sum())
        positions += len(generated)
    return AcceptanceEstimate(total / positions, positions)


def measure_pair(target: BackendLM, drafter: BackendLM, prompts: Sequence[Sequence[int]],
                 new_tokens: int, *, seed: int = 0, warmup: int = 2,
                 name: str | None = None) -> PairMeasurement:
    """Latencies of both models and both acceptance rates: one row of the paper's table.

    The greedy estimate is NaN when the sample has no mismatch (see `greedy_acceptance`)."""
    t = measure_latency(target, prompts, new_tokens, warmup=warmup)
    d = measure_latency(drafter, prompts, new_tokens, warmup=warmup)
    try:
        greedy = greedy_acceptance(target, drafter, prompts, new_tokens).acceptance
    except BackendError:   # no ended run (all matched): the estimator is undefined
        greedy = math.nan
    sampled = sampling_acceptance(target, drafter, prompts, new_tokens, seed)
    return PairMeasurement(name or f"{target.name}/{drafter.name}", t.ttft_ms,
                           t.tpot_ms, d.ttft_ms, d.tpot_ms, greedy, sampled.acceptance)
