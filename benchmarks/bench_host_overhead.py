#!/usr/bin/env python3
"""The engine's host cost per token, with models that cost nothing: what a GPU cannot hide.

    .venv/bin/python benchmarks/bench_host_overhead.py [--vocab 32000] [--tokens 128]
        [--verify rejection,greedy,block]

`dsi_ref.backends.engine.Engine` runs non-SI, SI and DSI on *instant* models: each session
returns precomputed float64 rows without any forward or copy (a bank of rows per model; the row
after a prefix depends only on its length, and a session hands out views; the drafter's rows are
a perturbation of the target's, so that Σ min(p, q) ≈ 0.6). Everything else is what a real run
pays on the host per token: sampling a draft from a V-entry row (the same arithmetic as
`dsi_ref.Sampler`, see `dsi_ref.backends.vectorised`), the verification decision and the
residual, the committer's bookkeeping and, for DSI, the server threads and queues. On a GPU
these costs add to the forwards that the simulator models; the wall time per token here is their
size on this machine's CPU. DSI's row is not comparable per token: with instant forwards its
drafter runs far ahead and most drafts are discarded, so its committer's time per event (a draft
or a task result handled) is printed too. ``--verify`` picks the rules (every rule the engine
runs: rejection, exact_match, greedy, block); each rule after the first also gets a line with its
SI cost per token as a multiple of the first rule's. Prints numbers, asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence

import numpy as np
import torch

import dsi_ref as dr
from dsi_ref.backends.engine import Engine


class _InstantSession:
    """A session whose rows cost nothing: the model's bank row for each prefix."""

    def __init__(self, lm: InstantLM) -> None:
        self.lm = lm
        self.tokens: list[int] = []
        self.forwards = 0

    def reset(self) -> None:
        self.tokens = []

    def rows(self, context: Sequence[int], count: int = 1) -> np.ndarray:
        return self.lm.rows(context, count)

    def rows_unless(self, context: Sequence[int], count: int,
                    cancelled: Callable[[], bool] | None) -> np.ndarray | None:
        self.forwards += 1
        return self.lm.rows(context, count)


class InstantLM:
    """A `BackendLM` on the CPU whose forwards are free (see the module docstring)."""

    def __init__(self, bank: np.ndarray, name: str) -> None:
        self.period = len(bank)
        self.bank = np.concatenate([bank, bank])         # rows i .. i + count never wrap
        self.name = name
        self.vocab_size = bank.shape[1]
        self.eos: int | None = None
        self.bos = 0
        self.device = torch.device("cpu")

    def row(self, prefix: Sequence[int]) -> np.ndarray:
        row: np.ndarray = self.bank[len(prefix) % self.period]
        return row

    def rows(self, context: Sequence[int], count: int) -> np.ndarray:
        first = (len(context) + 1 - count) % self.period
        return self.bank[first:first + count]          # a view: the bank repeats its rows

    def session(self, *, graphs: bool | None = None, priority: int = 0,
                segments: int = 1) -> _InstantSession:
        return _InstantSession(self)

    def replica(self, device: str | torch.device) -> InstantLM:
        return self

    def probs(self, prefix: Sequence[int]) -> tuple[float, ...]:
        return tuple(self.row(tuple(prefix)).tolist())


def instant_pair(vocab: int, bank: int, seed: int) -> tuple[InstantLM, InstantLM]:
    """A target and a drafter whose rows are softmaxes of related logits (a ≈ 0.7)."""
    gen = np.random.default_rng(seed)
    logits = gen.standard_normal((bank, vocab)) * 4.0
    noisy = logits + gen.standard_normal((bank, vocab)) * 1.2

    def softmax(x: np.ndarray) -> np.ndarray:
        e = np.exp(x - x.max(axis=1, keepdims=True))
        out: np.ndarray = e / e.sum(axis=1, keepdims=True)
        return out

    return InstantLM(softmax(logits), "instant-target"), InstantLM(softmax(noisy),
                                                                    "instant-drafter")


def main() -> None:
    """Print the host cost per token of each algorithm."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--lookahead", type=int, default=5)
    parser.add_argument("--sp-degree", type=int, default=2)
    parser.add_argument("--verify", default="rejection,greedy,block",
                        help=f"comma-separated rules, from {', '.join(dr.VERIFY_RULES)}")
    args = parser.parse_args()
    rules = args.verify.split(",")
    unknown = [r for r in rules if r not in dr.VERIFY_RULES]
    if unknown:
        parser.error(f"unknown rules {unknown}; choose from {dr.VERIFY_RULES}")
    target, drafter = instant_pair(args.vocab, 64, seed=0)
    overlap = float(np.minimum(target.bank, drafter.bank).sum(axis=1).mean())
    assert args.lookahead + 1 <= 64, "rows of one forward must fit in the bank"
    print(f"instant models, vocabulary {args.vocab}, acceptance Σ min(p, q) = {overlap:.3f}; "
          f"{args.runs} runs x {args.tokens} tokens; host microseconds per token "
          "(median over runs):")
    prompt = (1, 2, 3)
    si_cost: dict[str, float] = {}
    with Engine(target, drafter, graphs=False) as engine:
        runners = {verify: _runners(engine, prompt, verify, args) for verify in rules}
        for name in runners[rules[0]]:
            per_token: dict[str, list[float]] = {verify: [] for verify in rules}
            per_event: dict[str, list[float]] = {verify: [] for verify in rules}
            for verify in rules:
                runners[verify][name](0)                     # warm-up
            for seed in range(1, args.runs + 1):     # rules interleaved: drift hits them alike
                for verify in rules:
                    began = time.perf_counter()
                    out = runners[verify][name](seed)
                    per_token[verify].append((time.perf_counter() - began) / len(out.tokens)
                                             * 1e6)
                    if "events" in out.stats:
                        per_event[verify].append(out.stats["orchestration_us"]
                                                 / out.stats["events"])
            for verify in rules:
                times = per_token[verify]
                extra = f"; {statistics.median(per_event[verify]):.1f} us per committer " \
                    "event" if per_event[verify] else ""
                print(f"  {verify:11s} {name:16s} {statistics.median(times):8.1f} us/token "
                      f"(min {min(times):.1f}, max {max(times):.1f}){extra}", flush=True)
                if name.startswith("SI"):
                    si_cost[verify] = statistics.median(times)
    first = rules[0]
    for verify in rules[1:]:
        print(f"SI host cost per token, {verify} / {first}: "
              f"{si_cost[verify] / si_cost[first]:.2f}x")


def _runners(engine: Engine, prompt: tuple[int, ...], verify: str,
             args: argparse.Namespace) -> dict[str, Callable[[int], dr.Run]]:
    """One run of each algorithm, by seed."""
    lookahead, sp_degree, n = args.lookahead, args.sp_degree, args.tokens
    return {
        "non-SI": lambda s: engine.autoregressive(prompt, n, dr.Sampler(s),
                                                  greedy=verify == "greedy"),
        f"SI k={lookahead}": lambda s: engine.speculative(
            prompt, n, dr.Sampler(s), lookahead=lookahead,
            verify=verify),  # type: ignore[arg-type]
        f"DSI k={lookahead} SP={sp_degree}": lambda s: engine.dsi(
            prompt, n, dr.Sampler(s), lookahead=lookahead, sp_degree=sp_degree,
            verify=verify),  # type: ignore[arg-type]
    }


if __name__ == "__main__":
    main()
