#!/usr/bin/env python3
"""Benchmark of the exact audit of SI with stateful processors (issue 15, Done-when); prints
numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_stateful_exact.py [--repeats 3] [--rules rejection ...]

The law of `speculative` (lookahead 2) on a random bigram pair of vocabulary 4 (EOS = 3), 5 new
tokens, the target under a repetition penalty (θ = 2) and a grammar constraint
(``0(1|2)*0?``, then EOS), kept incrementally as an engine keeps them (advanced on drafts, rolled
back on rejection), the drafter under its own repetition penalty; compared exactly with the
recomputed processed target's law. Target: <= 10 s for rejection sampling (the issue's audit);
the other rules are reported too. The best of ``--repeats`` runs is reported per rule (the
machine is shared), with the number of outcomes, the verdict and the incremental target's
counters (calls, processor advances, rollbacks).
"""

from __future__ import annotations

import argparse
import time

import dsi_ref as dr
from dsi_ref.base.stateful import (
    GrammarConstraint,
    IncrementalLM,
    RepetitionPenalty,
    StatefulProcessor,
    TokenDFA,
    incremental,
    recomputed,
)

VOCAB, EOS, N, LOOKAHEAD = 4, 3, 5, 2


def audit(rule: str) -> tuple[float, int, bool, IncrementalLM]:
    """Seconds, outcomes, verdict and the incremental target of one exact audit."""
    target = dr.TableLM.random(VOCAB, 1, seed=3, zero_prob=0.0, eos=EOS, name="target")
    drafter = dr.TableLM.random(VOCAB, 1, seed=4, eos=EOS, name="drafter")
    grammar = GrammarConstraint(TokenDFA.from_regex("0(1|2)*0?", VOCAB, eos=EOS))
    processors: list[StatefulProcessor] = [RepetitionPenalty(2), grammar]
    start = time.perf_counter()
    t = incremental(target, processors)
    d = incremental(drafter, [RepetitionPenalty(2)])
    report = dr.check_lossless(
        lambda rng: dr.speculative(t, d, (), N, rng, lookahead=LOOKAHEAD,
                                   verify=rule).tokens,  # type: ignore[arg-type]
        recomputed(target, processors), (), N, greedy=rule == "greedy")
    return time.perf_counter() - start, report.outcomes, report.equal, t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rules", nargs="*", default=list(dr.VERIFY_RULES))
    args = parser.parse_args()
    print("rule          seconds  outcomes  verdict   calls  advances  rollbacks")
    for rule in args.rules:
        runs = [audit(rule) for _ in range(args.repeats)]
        best = min(seconds for seconds, _, _, _ in runs)
        _, outcomes, equal, t = runs[0]
        print(f"{rule:12s}  {best:7.3f}  {outcomes:8d}  {'lossless' if equal else 'LOSSY':8s}  "
              f"{t.stats['calls']:6d}  {t.stats['advances']:8d}  {t.stats['rollbacks']:9d}")
    print(f"SI, repetition penalty + grammar, V = {VOCAB}, N = {N}, lookahead {LOOKAHEAD} "
          "(target <= 10 s for rejection)")


if __name__ == "__main__":
    main()
