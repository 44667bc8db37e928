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

A third case is a user's decoder written on the library's step API: a subclass of `SIRun` with
its own verifier (it overrides ``verify`` and keeps a tally on ``self``), with no hint. `SIRun`
offers the engine its state at every iteration, with a fingerprint of the subclass's
attributes, so it merges soundly by itself.

Last, for the black box at each size, the number of complete paths a plain enumeration explores
(``--count-paths``): counted by dynamic programming over the run's merge states (the leaves below
a state are counted once), which is how the doc can say how far out of reach the black box is.

The issue's goal was <= 10 s without hints at V = 4, N = 6, lookahead 3: reached by the
subclass (no hint written) and by the hinted function; see docs/auditing-your-decoder.md.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import dsi_ref as dr
from dsi_ref.audit.exact.state import States
from dsi_ref.base.exact_hooks import Checkpointing, ExactHooks, ForwardedHooks, StepRun
from dsi_ref.decoders.speculative import SIRun, SpeculativeConfig

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


class Budgeted(Hidden, ForwardedHooks):
    """`Hidden`, with the checker's offer forwarded (`ForwardedHooks`): the same decoder, with
    its merge points."""

    def __init__(self, rng: Any, deadline: float, counter: list[int]) -> None:
        Hidden.__init__(self, rng, deadline, counter)
        ForwardedHooks.__init__(self, rng)


class MyVerifier(SIRun):
    """A user's decoder on the step API: its own verifier (rejection sampling, written out) and
    a tally of accepted drafts kept on ``self``; no hint anywhere."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.accepted_drafts = 0

    def verify(self) -> bool:
        for j in range(len(self.drafts)):
            decision = self.commit(self.target_rows[j], j)
            if not decision.accepted or self.done:
                return False
            self.accepted_drafts += 1
        return True


#: The three ways a user's decoder meets the engine.
KINDS = ("subclass", "hint", "black box")


def audit(vocab: int, n_tokens: int, lookahead: int, kind: str, max_seconds: float,
          progress: bool) -> tuple[str, float, int]:
    """(verdict or "over budget", seconds, choices made)."""
    target = dr.TableLM.random(vocab, 1, seed=1, name="target")
    drafter = dr.TableLM.random(vocab, 1, seed=2, name="drafter")
    start = time.perf_counter()
    counter = [0]
    wrap: Callable[..., Hidden] = Hidden if kind == "black box" else Budgeted
    config = SpeculativeConfig(lookahead)

    def program(rng: Any) -> tuple[int, ...]:
        budgeted = wrap(rng, start + max_seconds, counter)
        if kind == "subclass":
            return MyVerifier(target, drafter, (), n_tokens, budgeted, config).run().tokens
        return dr.speculative(target, drafter, (), n_tokens, budgeted, lookahead).tokens

    try:
        report = dr.check_lossless(program, target, (), n_tokens, max_paths=10**9,
                                   progress=progress)
        verdict = "LOSSLESS" if report else "LOSSY"
    except OverBudget:
        verdict = "over budget"
    return verdict, time.perf_counter() - start, counter[0]


class _Branch(Exception):
    """A run reached a choice past its replayed prefix."""


class _Merged(Exception):
    """A run reached a merge state whose leaves are counted already."""


class Counter:
    """Replays a program's choices (every option with positive probability, as the exact engine
    branches) and counts the complete paths, memoising the count below each merge state. The
    runs of `speculative` draw no key twice, so the tree is the engine's plain enumeration."""

    def __init__(self, program: Callable[[Any], object]) -> None:
        self.program = program
        self.memo: dict[Any, int] = {}
        self.states = States()  # one table for the history ids of every run's merge states

    def paths(self, prefix: tuple[int, ...] = ()) -> int:
        """The complete paths below the node reached by replaying ``prefix``."""
        replay = _CountingReplay(self, prefix)
        try:
            self.program(replay)
        except _Branch:
            pass
        except _Merged:
            return self.memo[replay.state]
        total = 1 if replay.options == 0 else sum(self.paths(prefix + (b,))
                                                  for b in range(replay.options))
        if replay.state is not None:
            self.memo[replay.state] = total
        return total


class _CountingReplay(ExactHooks):
    """A replay that offers merge points (`ExactHooks`) without resuming: a step-wise run's
    merge state is read as the checker reads it (`States.merge_state`)."""

    resumes = False

    def __init__(self, counter: Counter, prefix: tuple[int, ...]) -> None:
        self.counter, self.prefix, self.depth = counter, prefix, 0
        self.options = 0  # branching at the first new choice (0: the run ended)
        self.state: Any = None  # the last merge state passed after the prefix
        self.checkpointing: Checkpointing | None = None

    def _pick(self, options: int) -> int:
        if self.depth < len(self.prefix):
            self.depth += 1
            return self.prefix[self.depth - 1]
        self.options = options
        raise _Branch

    def categorical(self, weights: Sequence[Fraction | float], key: Any = None) -> int:
        support = [i for i, w in enumerate(weights) if w > 0]
        return support[self._pick(len(support))]

    def bernoulli(self, p: Fraction | float, key: Any = None) -> bool:
        values = [v for v, q in ((True, p), (False, 1 - p)) if q > 0]
        return values[self._pick(len(values))]

    def choose(self, options: Sequence[Any], key: Any = None) -> Any:
        return options[self._pick(len(options))]

    def merge_point(self, state: Any, **_: Any) -> None:
        if self.depth < len(self.prefix):
            return
        if self.state is None and state in self.counter.memo:  # the node itself is a state
            self.state = state
            raise _Merged
        self.state = state

    def resume_point(self, snapshot: Callable[[], object]) -> None:
        pass  # no resuming: every path is replayed from its start

    def enter(self, run: StepRun, checkpointing: Checkpointing) -> None:
        self.checkpointing = checkpointing

    def merge(self, run: StepRun) -> None:
        assert self.checkpointing is not None
        self.merge_point((type(run), self.counter.states.merge_state(run, self.checkpointing)))

    def pause(self, run: StepRun) -> None:
        pass


def count_paths(vocab: int, n_tokens: int, lookahead: int) -> int:
    """The complete paths of the black box's plain enumeration (`Counter` over `SIRun`'s merge
    states, with every choice the run makes)."""
    target = dr.TableLM.random(vocab, 1, seed=1, name="target")
    drafter = dr.TableLM.random(vocab, 1, seed=2, name="drafter")
    return Counter(lambda rng: dr.speculative(target, drafter, (), n_tokens, rng,
                                              lookahead).tokens).paths()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-seconds", type=float, default=60.0,
                        help="time budget per case (default 60)")
    parser.add_argument("--progress", action="store_true", help="progress bars on stderr")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help=f"comma-separated, among {KINDS} (default: all)")
    parser.add_argument("--count-paths", action="store_true",
                        help="also count the black box's paths (dynamic programming)")
    args = parser.parse_args()
    kinds = [k.strip() for k in args.kinds.split(",")]
    print(f"{'V':>2} {'N':>2} {'k':>2}  {'decoder':>9}  {'verdict':>12}  {'seconds':>8}  "
          f"{'choices':>10}")
    for vocab, n_tokens, lookahead in CASES:
        for kind in kinds:
            verdict, seconds, choices = audit(vocab, n_tokens, lookahead, kind,
                                              args.max_seconds, args.progress)
            print(f"{vocab:>2} {n_tokens:>2} {lookahead:>2}  {kind:>9}  {verdict:>12}  "
                  f"{seconds:>8.2f}  {choices:>10}", flush=True)
        if args.count_paths:
            print(f"{vocab:>2} {n_tokens:>2} {lookahead:>2}  black box: "
                  f"{count_paths(vocab, n_tokens, lookahead):,} paths in plain enumeration",
                  flush=True)


if __name__ == "__main__":
    main()
