#!/usr/bin/env python3
"""Benchmark of the exact core (issue 2's performance targets); prints numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_core.py [--repeats 3]

1. Exact SI audit: law of `speculative` (rejection sampling, lookahead 3) on a random bigram pair
   of vocabulary 4, 6 new tokens, compared with the target law.   Target: <= 5 s.
2. Sampled SI throughput: `speculative` with `Sampler` on the same pair, tokens per second.
   Target: >= 10^5 tokens/s.
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


def sampled_si_throughput(vocab: int, n_tokens: int, lookahead: int, seconds: float) -> float:
    target = dr.TableLM.random(vocab, 1, seed=1, name="target")
    drafter = dr.TableLM.random(vocab, 1, seed=2, name="drafter")
    tokens, seed = 0, 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        tokens += len(dr.speculative(target, drafter, (), n_tokens, dr.Sampler(seed),
                                     lookahead).tokens)
        seed += 1
    return tokens / (time.perf_counter() - start)


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
    rates = [sampled_si_throughput(4, 1000, 3, seconds=2.0) for _ in range(args.repeats)]
    print(f"sampled SI (V=4, N=1000, k=3): median {statistics.median(rates):,.0f} tokens/s, "
          f"min {min(rates):,.0f} (target >= 100,000)")


if __name__ == "__main__":
    main()
