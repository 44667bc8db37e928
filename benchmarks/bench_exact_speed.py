#!/usr/bin/env python3
"""Speed of the exact engine against `target_distribution` on three instances (the exact audit
must be fast enough to search with).

    .venv/bin/python benchmarks/bench_exact_speed.py [--repeats 3] [--instances si,dsi,block]
                                                     [--src PATH]

Instances (the limit is the target):

* ``si`` — the exact law of SI (`dsi_ref.speculative`, rejection sampling) on a random bigram
  pair (``TableLM.random(4, 1, seed=1)`` target, ``seed=2`` drafter), vocabulary 4,
  ``max_new_tokens = 6``, lookahead 3: at most 20 × `target_distribution` on the same target.
* ``si-lean`` — the same law of tokens from lean SI runs (``record=False, keep_time=False``:
  no trace, counters or time, so paths that reach the same tokens merge).
* ``dsi`` — the exact law of DSI (`dsi_ref.dsi`) on the same pair, lookahead 3, sp_degree 2,
  every other setting at its default (latency: drafter 1/10, target 1; rejection; fifo queue;
  ``record=True``), quantified over every schedule (``exact_distribution``'s default): at most
  200 × `target_distribution`.
* ``dsi-lean`` (not in the default list) — the same with ``record=False`` (no trace, no
  counters: far more merging).
* ``point1-first``, ``point1-last``, ``point1-uniform`` — the instance of issue 23's point 1
  (the refuted block-DSI claim): block verification with maximal windows
  (``verify="block"``, ``block_windows="maximal"``) on a context-free pair with EOS (target
  ``(1/3, 4/9, 2/9)``, drafter ``(4/11, 4/11, 3/11)``, EOS = 2: the rows of the claims
  registry's witness), vocabulary 3, ``max_new_tokens = 6``, lookahead 3, sp_degree 3, drafter
  cost 1 and a random target cost (1 or 3 with probability 1/2 each), run as the claims
  registry runs it (``record=False, keep_time=False``), under one tie rule each (the
  ``random`` class checks all three): at most 20 seconds each. The law is lossy (it is the
  witness); the column ``law == target`` says so.
* ``block-fixed`` (not in the default list) — the same with fixed windows (lossless), tie rule
  ``first``.

``--family si`` / ``--family dsi`` (issue 34) measures instead a family of 12 random bigram pairs
(`family`), vocabulary 4, ``max_new_tokens = 6``, lookahead 3 (DSI: ``sp_degree`` 2, every
schedule): `TableLM.random` pairs with denominators 4 to 100 and `FunctionLM` pairs whose rows
are integer weights 1 to 3 ... 1 to 9 over their sum (denominators up to 36), half of each with an
EOS token; a table per pair and the median and the worst ratio (the goals: SI median <= 10x,
worst <= 25x; DSI median <= 100x, worst <= 250x). ``--profile INSTANCE`` profiles one exact
law of an instance (of the family's pairs with ``--family``) with cProfile instead.

Each instance is measured in ``--repeats`` pairs: `target_distribution` (the median of 5
calls) right before one exact law, in the same process, so that each ratio compares two numbers
measured under the same conditions; the table gives the medians of the two times and of the
ratios. Times are this process's CPU seconds (``time.process_time``; ``--clock wall`` for wall
seconds): on a shared machine the wall time of a 10-second law takes in every other process's
load while a 0.03-second reference often runs in a quiet moment, which inflates wall ratios by
up to 1.5x; CPU time counts only the work of this process. Each exact law is also compared with
the target law (``point1-*`` are lossy, the others lossless); the comparison is printed. A
progress line per instance goes to stderr. ``--src`` imports ``dsi_ref`` from another checkout
(e.g. a ``git worktree`` of an older commit) to measure the engine before a change in the same
session.

Prints a table; asserts nothing (the tests hold the laws, not the timings).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any


@dataclass(frozen=True)
class Instance:
    """One benchmark instance: the exact law to time and its reference."""

    name: str
    description: str
    exact: Callable[[], dict[Any, Fraction]]
    reference: Callable[[], dict[Any, Fraction]]
    limit: str  # "20x" (a ratio) or "20s" (seconds)


def instances(dr: Any) -> dict[str, Instance]:
    """The instances, built with the ``dsi_ref`` module ``dr`` (possibly another checkout's)."""
    from dsi_ref.audit.exact import exact_distribution
    from dsi_ref.audit.laws import target_distribution
    from dsi_ref.audit.schedulers import tie_rule_law

    F = Fraction
    target = dr.TableLM.random(4, 1, seed=1, name="target")
    drafter = dr.TableLM.random(4, 1, seed=2, name="drafter")
    n = 6

    def si(lean: bool) -> Callable[[], dict[Any, Fraction]]:
        options = {"record": False, "keep_time": False} if lean else {}

        def law() -> dict[Any, Fraction]:
            return exact_distribution(
                lambda rng: dr.speculative(target, drafter, (), n, rng, lookahead=3,
                                           **options).tokens)
        return law

    def dsi(record: bool) -> Callable[[], dict[Any, Fraction]]:
        def law() -> dict[Any, Fraction]:
            return exact_distribution(
                lambda rng: dr.dsi(target, drafter, (), n, rng, lookahead=3, sp_degree=2,
                                   record=record).tokens)
        return law

    cf_target = dr.TableLM.context_free((F(1, 3), F(4, 9), F(2, 9)), eos=2, name="cf-target")
    cf_drafter = dr.TableLM.context_free((F(4, 11), F(4, 11), F(3, 11)), eos=2,
                                         name="cf-drafter")
    random_latency = dr.Latency(drafter=F(1), target={F(1): F(1, 2), F(3): F(1, 2)})

    def point1(tie_rule: str, windows: str = "maximal") -> Callable[[], dict[Any, Fraction]]:
        def law() -> dict[Any, Fraction]:
            return tie_rule_law(
                lambda rng: tuple(dr.dsi(cf_target, cf_drafter, (), n, rng, lookahead=3,
                                         sp_degree=3, latency=random_latency, verify="block",
                                         block_windows=windows, record=False,
                                         keep_time=False).tokens),
                tie_rule)  # type: ignore[arg-type]
        return law

    def reference() -> dict[Any, Fraction]:
        return target_distribution(target, (), n)

    def cf_reference() -> dict[Any, Fraction]:
        return target_distribution(cf_target, (), n)

    return {
        "si": Instance("si", "SI, V=4 bigram, N=6, k=3", si(False), reference, "20x"),
        "si-lean": Instance("si-lean", "SI as si, record=False, keep_time=False", si(True),
                            reference, "20x"),
        "dsi": Instance("dsi", "DSI, V=4 bigram, N=6, k=3, SP=2, record", dsi(True),
                        reference, "200x"),
        "dsi-lean": Instance("dsi-lean", "DSI as dsi, record=False", dsi(False), reference,
                             "200x"),
        **{f"point1-{tie}": Instance(
            f"point1-{tie}", f"block DSI, maximal windows, V=3 ctx-free+EOS, N=6, k=3, SP=3, "
            f"target cost {{1,3}}, ties {tie}", point1(tie), cf_reference, "20s")
           for tie in ("first", "last", "uniform")},
        "block-fixed": Instance("block-fixed", "as point1-first with fixed windows",
                                point1("first", "fixed"), cf_reference, "20s"),
    }


def _function_bigram(dr: Any, vocab_size: int, seed: int, high: int, eos: int | None) -> Any:
    """A `FunctionLM` bigram whose row after token ``t`` is a seeded vector of integer weights
    1..``high`` over their sum, computed afresh at each call (as a function model does)."""
    import numpy as np

    gen = np.random.default_rng(seed)
    weights = {t: [int(w) for w in gen.integers(1, high + 1, size=vocab_size)]
               for t in range(-1, vocab_size)}

    def probs(prefix: tuple[int, ...]) -> tuple[Fraction, ...]:
        row = weights[prefix[-1] if prefix else -1]
        total = sum(row)
        return tuple(Fraction(w, total) for w in row)

    return dr.FunctionLM(vocab_size, probs, eos=eos, name=f"function bigram {seed}")


def family(dr: Any, decoder: str) -> dict[str, Instance]:
    """Issue 34's family: 12 pairs (module docstring), SI or DSI (``decoder``) on each."""
    from dsi_ref.audit.exact import exact_distribution
    from dsi_ref.audit.laws import target_distribution

    n, out = 6, {}
    denominators, highs = (12, 4, 36, 100, 24, 60), (9, 5, 3, 9, 7, 4)
    for i in range(12):
        eos = 3 if i % 4 in (2, 3) else None
        if i % 2 == 0:
            den = denominators[(i // 2) % 6]
            target = dr.TableLM.random(4, 1, seed=100 + i, denominator=den, eos=eos)
            drafter = dr.TableLM.random(4, 1, seed=200 + i, denominator=den, eos=eos)
            name = f"table-d{den}"
        else:
            high = highs[(i // 2) % 6]
            target = _function_bigram(dr, 4, 100 + i, high, eos)
            drafter = _function_bigram(dr, 4, 200 + i, high, eos)
            name = f"function-w{high}"
        name += "-eos" if eos is not None else ""

        def law(t: Any = target, d: Any = drafter) -> dict[Any, Fraction]:
            if decoder == "si":
                return exact_distribution(
                    lambda rng: dr.speculative(t, d, (), n, rng, lookahead=3).tokens)
            return exact_distribution(
                lambda rng: dr.dsi(t, d, (), n, rng, lookahead=3, sp_degree=2).tokens)

        def reference(t: Any = target) -> dict[Any, Fraction]:
            return target_distribution(t, (), n)

        out[name] = Instance(name, f"{decoder.upper()} on {name}", law, reference,
                             "10x" if decoder == "si" else "100x")
    return out


CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}


def seconds(fn: Callable[[], object], clock: str = "cpu") -> tuple[float, object]:
    """The time of one call of ``fn`` on ``clock`` (`CLOCKS`), and its result."""
    now = CLOCKS[clock]
    start = now()
    result = fn()
    return now() - start, result


def paired(inst: Instance, repeats: int, progress: Callable[[int, float, float], None],
           clock: str = "cpu") -> tuple[float, float, float, object, object]:
    """``repeats`` pairs, each `target_distribution` (the median of 5 calls) then the exact law,
    so that a ratio compares two numbers measured one right after the other: the medians of
    the reference's and the exact law's times and of the ratios, the last law and reference."""
    refs: list[float] = []
    exacts: list[float] = []
    law: object = None
    reference: object = None
    for i in range(repeats):
        ref_times = []
        for _ in range(5):
            took, reference = seconds(inst.reference, clock)
            ref_times.append(took)
        refs.append(statistics.median(ref_times))
        took, law = seconds(inst.exact, clock)
        exacts.append(took)
        progress(i + 1, refs[-1], exacts[-1])
    ratios = [e / r for e, r in zip(exacts, refs, strict=True)]
    return (statistics.median(refs), statistics.median(exacts), statistics.median(ratios), law,
            reference)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="exact laws per instance")
    parser.add_argument("--instances",
                        default="si,si-lean,dsi,point1-first,point1-last,point1-uniform",
                        help="comma-separated, from si, si-lean, dsi, dsi-lean, point1-first, "
                        "point1-last, point1-uniform, block-fixed")
    parser.add_argument("--clock", default="cpu", choices=sorted(CLOCKS),
                        help="cpu: this process's CPU seconds (default); wall: wall seconds")
    parser.add_argument("--src", default=None,
                        help="import dsi_ref from this checkout (e.g. an older worktree)")
    parser.add_argument("--family", choices=("si", "dsi"), default=None,
                        help="measure SI or DSI on the family of 12 pairs instead")
    parser.add_argument("--profile", default=None, metavar="INSTANCE",
                        help="profile one exact law of INSTANCE (cProfile, by own time) instead "
                             "of timing; with --family, INSTANCE names a pair")
    args = parser.parse_args()
    if args.src:
        sys.path.insert(0, args.src)
    import dsi_ref as dr

    table = instances(dr) if args.family is None else family(dr, args.family)
    if args.profile is not None:
        import cProfile
        import pstats

        if args.profile not in table:
            parser.error(f"unknown instance {args.profile!r}; choose from {sorted(table)}")
        table[args.profile].exact()  # warm: the caches a first law fills
        profiler = cProfile.Profile()
        profiler.runcall(table[args.profile].exact)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        return
    names = ([name.strip() for name in args.instances.split(",") if name.strip()]
             if args.family is None else list(table))
    unknown = [name for name in names if name not in table]
    if unknown:
        parser.error(f"unknown instances {unknown}; choose from {sorted(table)}")
    print(f"dsi_ref from {dr.__file__}; medians of {args.repeats} pairs; {args.clock} seconds")
    rows = []
    for number, name in enumerate(names, 1):
        inst = table[name]
        print(f"[{number}/{len(names)}] {name}: {inst.description}", file=sys.stderr,
              flush=True)

        def progress(i: int, ref: float, exact: float, name: str = name,
                     number: int = number) -> None:
            print(f"[{number}/{len(names)}] {name}: pair {i}/{args.repeats}: "
                  f"target_distribution {ref:.4f} s, exact law {exact:.2f} s", file=sys.stderr,
                  flush=True)

        ref_seconds, exact_seconds, ratio, law, reference = paired(inst, args.repeats, progress,
                                                                    args.clock)
        if inst.limit.endswith("x"):
            meets = ratio <= float(inst.limit[:-1])
        else:
            meets = exact_seconds <= float(inst.limit[:-1])
        same = "yes" if law == reference else "no (lossy)"
        rows.append((name, ref_seconds, exact_seconds, ratio, inst.limit,
                     "meets" if meets else "MISSES", same))
    print(f"{'instance':<15} {'target_dist s':>13} {'exact s':>9} {'ratio':>8} {'limit':>6} "
          f"{'verdict':>7} {'law == target':>13}")
    for name, ref_seconds, exact_seconds, ratio, limit, verdict, same in rows:
        print(f"{name:<15} {ref_seconds:13.4f} {exact_seconds:9.3f} {ratio:7.1f}x {limit:>6} "
              f"{verdict:>7} {same:>13}")
    if args.family is not None:
        ratios = [row[3] for row in rows]
        goals = (10, 25) if args.family == "si" else (100, 250)
        print(f"{args.family.upper()} on the family: median {statistics.median(ratios):.1f}x "
              f"(goal <= {goals[0]}x), worst {max(ratios):.1f}x (goal <= {goals[1]}x)")


if __name__ == "__main__":
    main()
