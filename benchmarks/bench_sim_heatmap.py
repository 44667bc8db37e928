#!/usr/bin/env python3
"""Benchmark of the acceptance-level simulator (issue 5's performance target); prints numbers.

    .venv/bin/python benchmarks/bench_sim_heatmap.py [--repeats 3] [--event]

1. The full ndim = 20 paper-model heatmap: 21 × 21 × 20 configurations, N = 1000, exact expected
   latencies of SI and DSI (and the panels). Target: <= 5 s on the 2-core machine; the official
   simulator needed about 70 s with 5 Monte Carlo repeats per configuration.
2. What 5 repeats cost in accuracy: the vectorised Monte Carlo of the same model with 5 runs
   per configuration, on a sample of configurations, against the exact values.
3. (--event) One event-model column (all 21 a at once) at N = 1000 and N = 200, for a few
   (c, k, SP): the exact dynamic programme's cost.
"""

from __future__ import annotations

import argparse
import statistics
import time
from fractions import Fraction

import numpy as np

import dsi_ref as dr
from dsi_ref.sim.event import dsi_event_grid
from dsi_ref.sim.grid import HeatmapSpec, compute_heatmap
from dsi_ref.sim.params import SimParams


def full_heatmap(repeats: int) -> list[float]:
    compute_heatmap(HeatmapSpec(ndim=3, n_tokens=10))  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        compute_heatmap(HeatmapSpec())
        times.append(time.perf_counter() - start)
    return times


def five_repeat_noise(samples: int, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    errors = []
    for _ in range(samples):
        c = float(rng.choice(np.linspace(0.05, 1, 20)))
        a = float(rng.choice(np.linspace(0.05, 0.95, 19)))
        lookahead = int(rng.integers(1, 21))
        exact = dr.expected_latency("dsi", c=c, a=a, lookahead=lookahead, n_tokens=1000)
        mc = dr.simulate_latency("dsi", c=c, a=a, lookahead=lookahead, n_tokens=1000,
                                 n_repeats=5, seed=rng)
        errors.append(abs(mc.mean() / exact - 1))
    return errors


def event_columns() -> None:
    a = np.clip(np.linspace(0, 1, 21), 0.01, 0.99)
    for n in (200, 1000):
        for c, lookahead, sp_degree in [(Fraction(1, 20), 5, 7), (Fraction(1, 2), 2, 7),
                         (Fraction(1, 100), 20, 2), (Fraction(1, 10), 1, 2)]:
            start = time.perf_counter()
            dsi_event_grid(SimParams("dsi", c, Fraction(1, 2), lookahead, n, "event", sp_degree),
                           a)
            print(f"  event column N={n} c={c} k={lookahead} SP={sp_degree}: "
                  f"{time.perf_counter() - start:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--event", action="store_true", help="also time event-model columns")
    args = parser.parse_args()
    times = full_heatmap(args.repeats)
    print(f"full paper heatmap (8820 configurations, N = 1000, exact SI + DSI): "
          f"median {statistics.median(times):.2f} s, min {min(times):.2f} s "
          f"over {args.repeats} runs (target <= 5 s; official simulator ~70 s)")
    errors = five_repeat_noise(200, seed=5)
    print(f"5-repeat Monte Carlo vs exact (DSI, 200 random configurations): relative error "
          f"median {100 * statistics.median(errors):.2f} %, max {100 * max(errors):.2f} %")
    if args.event:
        event_columns()


if __name__ == "__main__":
    main()
