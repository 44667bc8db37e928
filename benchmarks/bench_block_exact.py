#!/usr/bin/env python3
"""Benchmark of the exact audit of block SI (issue 14, item 7); prints numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_block_exact.py [--seeds 0 1 2] [--repeats 3] [--profile]

The law of `speculative(..., verify="block")` with lookahead 3 on a random bigram pair of
vocabulary 4 (`TableLM.random(4, 2, seed=s)` target, seed ``s + 100`` drafter), 6 new tokens,
compared exactly with the target law by `assert_lossless`. Target: <= 5 s. Per seed: the min and
the median of ``--repeats`` runs, wall clock and CPU time (the machine is shared);
``--profile`` prints cProfile's top functions for the first seed.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

import dsi_ref as dr

VOCAB, CONTEXT, N_TOKENS, LOOKAHEAD = 4, 2, 6, 3


def audit(seed: int) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one exact audit of block SI on the pair of ``seed`` (the
    CPU time is what a shared machine does not inflate)."""
    target = dr.TableLM.random(VOCAB, CONTEXT, seed=seed, name="target")
    drafter = dr.TableLM.random(VOCAB, CONTEXT, seed=seed + 100, name="drafter")
    start, cpu = time.perf_counter(), time.process_time()
    dr.assert_lossless(
        lambda rng: dr.speculative(target, drafter, (), N_TOKENS, rng, LOOKAHEAD,
                                   verify="block").tokens,
        target=target, prompt=(), max_new_tokens=N_TOKENS)
    return time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    print(f"block SI, V = {VOCAB}, context {CONTEXT}, N = {N_TOKENS}, lookahead {LOOKAHEAD} "
          f"(target <= 5 s)")
    print("seed  wall min  wall median  cpu min  cpu median")
    for seed in args.seeds:
        runs = [audit(seed) for _ in range(args.repeats)]
        wall, cpu = [w for w, _ in runs], [c for _, c in runs]
        print(f"{seed:4d}  {min(wall):8.2f}  {statistics.median(wall):11.2f}  {min(cpu):7.2f}  "
              f"{statistics.median(cpu):10.2f}")
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(audit, args.seeds[0])
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
