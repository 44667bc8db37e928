#!/usr/bin/env python3
"""Benchmark of the exact string-level audit of the cross-vocabulary decoders (issue 15); prints
numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_cross_vocab_exact.py [--repeats 3] [--table]

The law of output strings of SLEM, TLI and SLRS on the ``merges`` toy pair of
`dsi_ref.audit.strings.cross_vocab_pairs` (target vocabulary 4, drafter vocabulary 5 with
merges), 4 target tokens, lookahead 2, compared exactly with the target's law of strings.
Target: <= 10 s per algorithm. The best of ``--repeats`` runs is reported (the machine is
shared), with SLRS's cache of drafter laws emptied before each run. ``--table`` prints instead
the acceptance table of docs/cross-vocabulary.md (exact expectations, every pair, N = 4).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from dsi_ref.audit.strings import acceptance, check_lossless_strings, cross_vocab_pairs
from dsi_ref.decoders import vocab
from dsi_ref.decoders.vocab import CROSS_VOCAB_ALGORITHMS, cross_vocab_speculative


def audit(algorithm: str, n_tokens: int, lookahead: int) -> tuple[float, int, bool]:
    """Seconds, outcomes and verdict of one exact string-level audit on the ``merges`` pair."""
    pair = cross_vocab_pairs()[0]
    vocab.clear_block_laws()

    def program(rng: Any) -> tuple[int, ...]:
        return cross_vocab_speculative(pair.target, pair.drafter, pair.target_tokenizer,
                                       pair.drafter_tokenizer, pair.prompt, n_tokens, rng,
                                       lookahead=lookahead, algorithm=algorithm).tokens

    start = time.perf_counter()
    report = check_lossless_strings(program, pair.target, pair.target_tokenizer, pair.prompt,
                                    n_tokens)
    return time.perf_counter() - start, report.outcomes, report.equal


def table(n_tokens: int = 4, lookaheads: tuple[int, ...] = (1, 2)) -> str:
    """The markdown acceptance table: exact expected counters per pair, algorithm, lookahead."""
    lines = ["| pair | k | algorithm | E[target forwards] | E[drafts] | E[accepted] | "
             "E[drafter forwards] | tokens per target forward |",
             "|---|---|---|---|---|---|---|---|"]
    for pair in cross_vocab_pairs():
        for k in lookaheads:
            for algorithm in CROSS_VOCAB_ALGORITHMS:
                stats = acceptance(pair, algorithm, n_tokens, k)
                per_forward = stats["tokens"] / stats["iterations"]
                lines.append(f"| {pair.name} | {k} | {algorithm.upper()} | "
                             f"{float(stats['iterations']):.4f} | {float(stats['drafts']):.4f} | "
                             f"{float(stats['accepted']):.4f} | "
                             f"{float(stats['drafter_forwards']):.4f} | "
                             f"{float(per_forward):.4f} |")
    return "\n".join(lines)


def main() -> None:
    """Time each algorithm's audit (best of ``--repeats``), or print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=4)
    parser.add_argument("--lookahead", type=int, default=2)
    parser.add_argument("--table", action="store_true")
    args = parser.parse_args()
    if args.table:
        print(table(args.tokens))
        return
    for algorithm in CROSS_VOCAB_ALGORITHMS:
        runs = [audit(algorithm, args.tokens, args.lookahead) for _ in range(args.repeats)]
        best = min(r[0] for r in runs)
        print(f"{algorithm:5s} N={args.tokens} k={args.lookahead}: best {best:.2f} s of "
              f"{args.repeats}, {runs[0][1]} strings, "
              f"{'lossless' if all(r[2] for r in runs) else 'LOSSY'}")


if __name__ == "__main__":
    main()
