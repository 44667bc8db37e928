#!/usr/bin/env python3
"""Benchmark of the exact, schedule-robust audit of DSI (issue 3's performance target).

    .venv/bin/python benchmarks/bench_dsi_exact.py [--repeats 3] [--suite]

1. Target: the exact schedule-robust audit of `dsi` with vocabulary 3, 4 new tokens, lookahead 2,
   sp_degree 2 in <= 10 s. The pair is a random bigram pair of vocabulary 3 (seeds 1 and 2, as in
   bench_core.py); the law is computed quantifying over every schedule (every tie order and, with
   ``queue="any"``, every queue choice) and compared with the target law. Each configuration —
   drafter cost c in {1/10 (default), 1/2 (ties every target forward), 1 (draft/task ties)},
   queue in {fifo, any}, rule in {rejection, exact_match, greedy} — is timed on its own (best of
   ``--repeats``, wall clock and process CPU time) and the total is reported, for the default
   recording run and for a lean run (``record=False``: no trace, more merging, same law).
2. (--suite) The same audit over the seven pairs of the default suite (`dsi_ref.audit.suite`), per
pair
   and in total, at c = 1/10 and c = 1/2 with ``queue="any"``: the worst cases of the exact engine.

Prints numbers; asserts nothing (the suite's tests do).
"""

from __future__ import annotations

import argparse
import time
from fractions import Fraction

import dsi_ref as dr
from dsi_ref.audit.suite import default_suite

COSTS = (Fraction(1, 10), Fraction(1, 2), Fraction(1))
TARGET_SECONDS = 10.0


def audit_once(target: dr.LanguageModel, drafter: dr.LanguageModel, prompt: tuple[int, ...],
               n_tokens: int, cost: Fraction, queue: str, verify: str, record: bool = True
               ) -> tuple[float, float, int]:
    """One exact schedule-robust audit: (wall seconds, CPU seconds, outcomes)."""
    latency = dr.Latency(drafter=cost)
    wall, cpu = time.perf_counter(), time.process_time()
    report = dr.assert_lossless(
        lambda rng: dr.dsi(target, drafter, prompt, n_tokens, rng, lookahead=2, sp_degree=2,
                           latency=latency, verify=verify, queue=queue,  # type: ignore[arg-type]
                           record=record).tokens,
        target, prompt, n_tokens, greedy=verify == "greedy")
    return time.perf_counter() - wall, time.process_time() - cpu, report.outcomes


def best_of(repeats: int, *args: object) -> tuple[float, float, int]:
    """The fastest of ``repeats`` runs (wall and CPU taken from the same, fastest run)."""
    return min((audit_once(*args) for _ in range(repeats)), key=lambda r: r[0])  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--suite", action="store_true", help="also the default suite")
    args = parser.parse_args()

    target = dr.TableLM.random(3, 1, seed=1, name="target")
    drafter = dr.TableLM.random(3, 1, seed=2, name="drafter")
    print("1. exact schedule-robust audit of DSI: vocab 3, N = 4, lookahead 2, sp_degree 2 "
          f"(best of {args.repeats}; target <= {TARGET_SECONDS:g} s per audit)")
    print(f"   {'c':>5} {'queue':>5} {'rule':>12} {'wall s':>7} {'cpu s':>7} "
          f"{'lean wall':>9} {'lean cpu':>8} outcomes")
    totals = {True: 0.0, False: 0.0}
    worst = {True: 0.0, False: 0.0}
    for cost in COSTS:
        for queue in ("fifo", "any"):
            for verify in ("rejection", "exact_match", "greedy"):
                cells = []
                for record in (True, False):
                    wall, cpu, outcomes = best_of(args.repeats, target, drafter, (), 4, cost,
                                                  queue, verify, record)
                    totals[record] += wall
                    worst[record] = max(worst[record], wall)
                    cells.append(f"{wall:7.3f} {cpu:7.3f}")
                print(f"   {cost!s:>5} {queue:>5} {verify:>12} {cells[0]} {cells[1]:>18} "
                      f"{outcomes}")
    for record, name in ((True, "recording runs (default)"), (False, "lean runs")):
        verdict = "meets" if worst[record] <= TARGET_SECONDS else "MISSES"
        print(f"   {name}: slowest configuration {worst[record]:.2f} s ({verdict} the "
              f"{TARGET_SECONDS:g} s target); all {len(COSTS) * 2 * 3} configurations "
              f"{totals[record]:.2f} s")

    if args.suite:
        print("\n2. the default suite (N = 4, lookahead 2, sp_degree 2, queue any, lean runs), "
              "one run each")
        for cost in (Fraction(1, 10), Fraction(1, 2)):
            grand = 0.0
            for pair in default_suite():
                row = []
                for verify in ("rejection", "exact_match", "greedy"):
                    wall, _, _ = audit_once(pair.target, pair.drafter, pair.prompt,
                                            pair.max_new_tokens, cost, "any", verify, False)
                    grand += wall
                    row.append(f"{verify} {wall:6.2f} s")
                print(f"   c={cost!s:<5} {pair.name:<8} " + "  ".join(row))
            print(f"   c={cost}: suite total {grand:.1f} s")


if __name__ == "__main__":
    main()
