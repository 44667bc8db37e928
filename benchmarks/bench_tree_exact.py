#!/usr/bin/env python3
"""Benchmark of the exact audit of tree speculation (issue 14, item 7); prints numbers, asserts
nothing.

    .venv/bin/python benchmarks/bench_tree_exact.py [--repeats 3]

The law of `tree_speculative` with tree (2, 2) on a random bigram pair of vocabulary 3, 4 new
tokens, compared exactly with the target law (the greedy sequence for ``"greedy"``), for every
rule of `TREE_VERIFY_RULES`. Target: <= 10 s for all rules together. The best of ``--repeats``
runs is reported per rule (the machine is shared), with the number of outcomes and the verdict.
"""

from __future__ import annotations

import argparse
import time

import dsi_ref as dr


def audit(rule: str, tree: tuple[int, ...], vocab: int, n_tokens: int) -> tuple[float, int, bool]:
    """Seconds, outcomes and verdict of one exact audit."""
    target = dr.TableLM.random(vocab, 1, seed=1, name="target")
    drafter = dr.TableLM.random(vocab, 1, seed=2, name="drafter")
    start = time.perf_counter()
    report = dr.check_lossless(
        lambda rng: dr.tree_speculative(target, drafter, (), n_tokens, rng, tree=tree,
                                        verify=rule).tokens,  # type: ignore[arg-type]
        target, (), n_tokens, greedy=rule == "greedy")
    return time.perf_counter() - start, report.outcomes, report.equal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    total = 0.0
    print("rule                      seconds  outcomes  verdict")
    for rule in dr.TREE_VERIFY_RULES:
        runs = [audit(rule, (2, 2), 3, 4) for _ in range(args.repeats)]
        best = min(seconds for seconds, _, _ in runs)
        _, outcomes, equal = runs[0]
        total += best
        print(f"{rule:24s}  {best:7.3f}  {outcomes:8d}  {'lossless' if equal else 'LOSSY'}")
    print(f"all rules, tree (2, 2), V = 3, N = 4: {total:.3f} s (target <= 10 s)")


if __name__ == "__main__":
    main()
