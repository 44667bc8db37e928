#!/usr/bin/env python3
"""Benchmark of the exact core (issue 2's performance targets); prints numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_core.py [--repeats 3]

1. Exact SI audit: law of `speculative` (rejection sampling, lookahead 3) on a random bigram pair
   of vocabulary 4, 6 new tokens, compared with the target law.   Target: <= 5 s.
2. Sampled SI throughput: `speculative` with a keyed `Sampler` on the same pair (float rows and
   costs, and exact Fraction rows and costs), sequences of N = 100 and 1000 tokens, tokens per
   second of CPU time and of wall-clock time. Target: >= 10^5 tokens/s. Keys carry the context
   (docs/design.md's keyed randomness), so the cost per token grows with N.
"""

from __future__ import annotations

import argparse
import statistics
import time

import dsi_ref as dr


def exact_si_audit(vocab: int, n_tokens: int, lookahead: int) -> tuple[float, int]:
    target = dr.TableLM.random(vocab, 1, seed=1, name="target")
    drafter = dr.TableLM.random(vocab, 1, seed=2, name="drafter")
    start = time.perf_counter()
    report = dr.assert_lossless(
        lambda rng: dr.speculative(target, drafter, (), n_tokens, rng, lookahead).tokens,
        target, (), n_tokens)
    return time.perf_counter() - start, report.outcomes


def sampled_si_throughput(vocab: int, n_tokens: int, lookahead: int, seconds: float,
                          exact: bool) -> tuple[float, float]:
    """Tokens per second of wall-clock and of process CPU time (the latter is what a loaded
    machine does not distort), sampling fresh seeds until ``seconds`` of CPU time are spent."""
    target = dr.TableLM.random(vocab, 1, seed=1, exact=exact, name="target")
    drafter = dr.TableLM.random(vocab, 1, seed=2, exact=exact, name="drafter")
    latency = None if exact else dr.Latency(drafter=0.1, target=1.0)
    tokens, seed = 0, 0
    wall, cpu = time.perf_counter(), time.process_time()
    while time.process_time() - cpu < seconds:
        tokens += len(dr.speculative(target, drafter, (), n_tokens, dr.Sampler(seed),
                                     lookahead, latency=latency).tokens)
        seed += 1
    return tokens / (time.perf_counter() - wall), tokens / (time.process_time() - cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    times = []
    for _ in range(args.repeats):
        seconds, outcomes = exact_si_audit(4, 6, 3)
        times.append(seconds)
    print(f"exact SI audit (V=4, N=6, k=3): {outcomes} sequences, "
          f"min {min(times):.2f} s, median {statistics.median(times):.2f} s (target <= 5 s)")
    for exact, label in ((False, "float rows, float costs"), (True, "Fraction rows and costs")):
        for n_tokens in (100, 1000):
            runs = [sampled_si_throughput(4, n_tokens, 3, 2.0, exact) for _ in range(args.repeats)]
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            print(f"sampled SI (V=4 bigram, k=3, N={n_tokens}, {label}): "
                  f"{cpu:,.0f} tokens per CPU-second, {wall:,.0f} tokens/s wall "
                  "(target >= 100,000)")


if __name__ == "__main__":
    main()
