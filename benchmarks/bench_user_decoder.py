#!/usr/bin/env python3
"""Benchmark of the exact audit of a user's own decoder (#13, item 5); prints numbers, asserts
nothing.

    .venv/bin/python benchmarks/bench_user_decoder.py [--max-seconds 60] [--progress]

A user's decoder that gives the exact engine no hint is modelled by `speculative` run through a
`Randomness` wrapper that forwards ``categorical``/``bernoulli``/``choose`` and hides
``merge_point``: the engine then sees a black box and enumerates every path. The same decoder
with the hint (the library's own `speculative`, which calls ``merge_point`` once per
iteration) turns the enumeration into dynamic programming over the states it names. Each case
is `check_lossless` on a random bigram pair (rejection sampling), timed with and without the
hint, with a budget of ``--max-seconds`` per case (a case over budget is reported as such, with
the paths explored so far).

The issue's goal was <= 10 s without hints at V = 4, N = 6, lookahead 3; see
docs/auditing-your-decoder.md for why the hint is what reaches it.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import dsi_ref as dr

CASES: tuple[tuple[int, int, int], ...] = (  # (V, N, lookahead)
    (2, 4, 2), (3, 4, 2), (3, 5, 3), (4, 4, 3), (4, 5, 3), (5, 5, 3), (4, 6, 3))


class OverBudget(Exception):
    """The case ran past its time budget."""


class Hidden:
    """A `Randomness` that forwards every choice and has no ``merge_point``: what the engine
    sees of a decoder written without hints. It also enforces the time budget."""

    def __init__(self, rng: Any, deadline: float, counter: list[int]) -> None:
        self.rng, self.deadline, self.counter = rng, deadline, counter

    def _tick(self) -> None:
        self.counter[0] += 1
        if self.counter[0] % 1024 == 0 and time.perf_counter() > self.deadline:
            raise OverBudget

    def categorical(self, weights: Sequence[Fraction | float], key: Any = None) -> int:
        self._tick()
        return int(self.rng.categorical(weights, key))

    def bernoulli(self, p: Fraction | float, key: Any = None) -> bool:
        self._tick()
        return bool(self.rng.bernoulli(p, key))

    def choose(self, options: Sequence[Any], key: Any = None) -> Any:
        return self.rng.choose(options, key)


class Budgeted(Hidden):
    """`Hidden`, with the hint forwarded: the same decoder, written with ``merge_point``."""

    def merge_point(self, state: Any, **kwargs: Any) -> None:
        self.rng.merge_point(state, **kwargs)


def audit(vocab: int, n_tokens: int, lookahead: int, hint: bool, max_seconds: float,
          progress: bool) -> tuple[str, float, int]:
    """(verdict or "over budget", seconds, choices made)."""
    target = dr.TableLM.random(vocab, 1, seed=1, name="target")
    drafter = dr.TableLM.random(vocab, 1, seed=2, name="drafter")
    start = time.perf_counter()
    counter = [0]
    wrap: Callable[..., Hidden] = Budgeted if hint else Hidden

    def program(rng: Any) -> tuple[int, ...]:
        return dr.speculative(target, drafter, (), n_tokens,
                              wrap(rng, start + max_seconds, counter), lookahead).tokens

    try:
        report = dr.check_lossless(program, target, (), n_tokens, max_paths=10**9,
                                   progress=progress)
        verdict = "LOSSLESS" if report else "LOSSY"
    except OverBudget:
        verdict = "over budget"
    return verdict, time.perf_counter() - start, counter[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-seconds", type=float, default=60.0,
                        help="time budget per case (default 60)")
    parser.add_argument("--progress", action="store_true", help="progress bars on stderr")
    args = parser.parse_args()
    print(f"{'V':>2} {'N':>2} {'k':>2}  {'hint':>5}  {'verdict':>12}  {'seconds':>8}  "
          f"{'choices':>10}")
    for vocab, n_tokens, lookahead in CASES:
        for hint in (True, False):
            verdict, seconds, choices = audit(vocab, n_tokens, lookahead, hint,
                                              args.max_seconds, args.progress)
            print(f"{vocab:>2} {n_tokens:>2} {lookahead:>2}  {'yes' if hint else 'no':>5}  "
                  f"{verdict:>12}  {seconds:>8.2f}  {choices:>10}", flush=True)


if __name__ == "__main__":
    main()
