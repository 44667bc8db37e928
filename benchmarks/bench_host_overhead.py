#!/usr/bin/env python3
"""The engine's host cost per token, with models that cost nothing: what a GPU cannot hide.

    .venv/bin/python benchmarks/bench_host_overhead.py [--vocab 32000] [--tokens 128]
        [--verify rejection,greedy,block] [--tree 4,2,1,1] [--tree-verify rrs,...]
        [--sections engine,rules]

`dsi_ref.backends.engine.Engine` runs non-SI, SI and DSI on *instant* models: each session
returns precomputed float64 rows without any forward or copy (a bank of rows per model; the row
after a prefix depends only on its length, and a session hands out views; the drafter's rows are
a perturbation of the target's, so that Σ min(p, q) ≈ 0.6). Everything else is what a real run
pays on the host per token: sampling a draft from a V-entry row (the same arithmetic as
`dsi_ref.Sampler`, see `dsi_ref.backends.engine.vectorised`), the verification decision and the
residual, the committer's bookkeeping and, for DSI, the server threads and queues. On a GPU
these costs add to the forwards that the simulator models; the wall time per token here is their
size on this machine's CPU. DSI's row is not comparable per token: with instant forwards its
drafter runs far ahead and most drafts are discarded, so its committer's time per event (a draft
or a task result handled) is printed too. ``--verify`` picks the rules (every rule the engine
runs: rejection, exact_match, greedy, block); each rule after the first also gets a line with its
SI cost per token as a multiple of the first rule's. Prints numbers, asserts nothing.

Section ``rules``: the host cost per token of the verification rules *alone* (drafting from the
drafter's rows and deciding, nothing else), on the same instant rows, for the window rules
``rejection`` and ``block`` (windows of ``--lookahead`` drafts) and every tree rule of
`dsi_ref.TREE_VERIFY_RULES` on a static tree of widths ``--tree`` (default ``4,2,1,1``: four
children of the root, two for each of them, then chains: 28 drafted nodes, EAGLE-like); each node
reads its own bank row (no cache sees a row twice in a row). Each rule runs twice: the engine's
numpy version (`dsi_ref.backends.engine.vectorised.vectorised_rule`,
`dsi_ref.backends.engine.vectorised_tree.vectorised_tree_rule`) on float64 rows, and the reference
rule on the same rows as tuples of Python floats (fewer tokens, ``--reference-tokens``: it is slow
at V = 32 000); same seeds, so the tokens must agree (printed), and the ratio is the speed-up.
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
from dsi_ref.backends.engine.vectorised import vectorised_rule
from dsi_ref.backends.engine.vectorised_tree import vectorised_tree_rule
from dsi_ref.decoders.tree import TreeNode, TreeRule, as_tree_rule
from dsi_ref.decoders.verification import Rule, as_rule, decide_window


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
    parser.add_argument("--tree", default="4,2,1,1",
                        help="children per node at each depth (section rules)")
    parser.add_argument("--tree-verify", default=",".join(dr.TREE_VERIFY_RULES),
                        help=f"comma-separated tree rules, from {', '.join(dr.TREE_VERIFY_RULES)}")
    parser.add_argument("--reference-tokens", type=int, default=24,
                        help="tokens per run of the reference rules (section rules)")
    parser.add_argument("--sections", default="engine,rules", help="engine, rules or both")
    args = parser.parse_args()
    tree_rules = args.tree_verify.split(",")
    unknown_tree = [r for r in tree_rules if r not in dr.TREE_VERIFY_RULES]
    if unknown_tree:
        parser.error(f"unknown tree rules {unknown_tree}; choose from {dr.TREE_VERIFY_RULES}")
    sections = args.sections.split(",")
    rules = args.verify.split(",")
    unknown = [r for r in rules if r not in dr.VERIFY_RULES]
    if unknown:
        parser.error(f"unknown rules {unknown}; choose from {dr.VERIFY_RULES}")
    target, drafter = instant_pair(args.vocab, 64, seed=0)
    overlap = float(np.minimum(target.bank, drafter.bank).sum(axis=1).mean())
    assert args.lookahead + 1 <= 64, "rows of one forward must fit in the bank"
    if "rules" in sections:
        rule_costs(target, drafter, ["rejection", "block"], tree_rules,
                   tuple(int(w) for w in args.tree.split(",")), args)
    if "engine" not in sections:
        return
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


Rows = Sequence[object]


def _window_run(rule: Rule, rows_q: Rows, rows_p: Rows, lookahead: int, n: int,
                seed: int) -> tuple[list[int], float, int]:
    """Windows of ``lookahead`` drafts (``rule.draft``) decided by `decide_window`, and a bonus
    after a fully accepted window, until ``n`` tokens: the tokens (``>= n``), the seconds in
    the rule and the windows decided.
    Position ``i`` of the run reads bank row ``i`` (``p`` and ``q`` at one position are related
    rows)."""
    rng, tokens, spent, iterations = dr.Sampler(seed), [], 0.0, 0
    while len(tokens) < n:
        iterations += 1
        at = len(tokens)
        rows = [(rows_q[(at + i) % len(rows_q)], rows_p[(at + i) % len(rows_p)])
                for i in range(lookahead + 1)]
        began = time.perf_counter()
        drafts: list[int] = []
        for i in range(lookahead):
            drafts.append(rule.draft(rows[i][0], rng,  # type: ignore[arg-type]
                                     tuple(tokens) + tuple(drafts)))
        decisions = decide_window(rule, [p for _, p in rows],  # type: ignore[misc]
                                  [q for q, _ in rows[:-1]], drafts, rng, tuple(tokens))
        tokens += [d.token for d in decisions]
        if len(decisions) == lookahead and decisions[-1].accepted:
            tokens.append(rule.bonus(rows[-1][1], rng, tuple(tokens)))  # type: ignore[attr-defined]
        spent += time.perf_counter() - began
    return tokens, spent, iterations


def _tree_run(rule: TreeRule, rows_q: Rows, rows_p: Rows, tree: tuple[int, ...], n: int,
              seed: int) -> tuple[list[int], float, int]:
    """Iterations of tree speculation (children level by level, then `TreeRule.verify`) until
    ``n`` tokens: the tokens (``>= n``), the seconds in the rule and the iterations. Every
    node reads its own bank row (``p`` and ``q`` of one node are related rows); the rows are
    handed out untimed."""
    rng, tokens, spent, row, iterations = dr.Sampler(seed), [], 0.0, 0, 0
    while len(tokens) < n:
        iterations += 1
        root = TreeNode(None, tuple(tokens))
        level, nodes = [root], [root]
        for width in tree:
            nxt: list[TreeNode] = []
            for node in level:
                node.q, node.p = rows_q[row % len(rows_q)], rows_p[row % len(rows_p)]  # type: ignore[assignment]
                row += 1
                began = time.perf_counter()
                children = rule.children(node.q, width, rng, node.context)  # type: ignore[arg-type]
                spent += time.perf_counter() - began
                for j, (x, law) in enumerate(children):
                    node.children.append(TreeNode(x, node.context + (x,), j, law))
                nxt += node.children
            level = nxt
            nodes += nxt
        for node in level:                                      # the leaves' rows
            node.p = rows_p[row % len(rows_p)]  # type: ignore[assignment]
            row += 1
        began = time.perf_counter()
        verdict = rule.verify(root, rng, None)
        spent += time.perf_counter() - began
        tokens += [*verdict.path, *([] if verdict.last is None else [verdict.last])]
    return tokens, spent, iterations


def rule_costs(target: InstantLM, drafter: InstantLM, window_rules: list[str],
               tree_rules: list[str], tree: tuple[int, ...], args: argparse.Namespace) -> None:
    """Print each rule's host cost per token, numpy and reference, on the same rows."""
    period = target.period
    fast_q, fast_p = list(drafter.bank[:period]), list(target.bank[:period])
    # the reference reads tuples of floats, a new tuple per node (its caches key on identity)
    lists_q, lists_p = [r.tolist() for r in fast_q], [r.tolist() for r in fast_p]

    class _Fresh(Sequence[object]):
        def __init__(self, rows: list[list[float]]) -> None:
            self.rows = rows

        def __len__(self) -> int:
            return len(self.rows)

        def __getitem__(self, i: int) -> object:  # type: ignore[override]
            return tuple(self.rows[i])

    ref_q, ref_p = _Fresh(lists_q), _Fresh(lists_p)
    print(f"rules alone (drafting + verification), vocabulary {args.vocab}, lookahead "
          f"{args.lookahead}, tree {tree}; {args.runs} runs; milliseconds per token (median): "
          f"numpy x {args.tokens} tokens, reference x {args.reference_tokens} tokens")
    jobs: dict[str, tuple[Callable[..., tuple[list[int], float, int]], object, object, object]] = {}
    for name in window_rules:
        jobs[name] = (_window_run, vectorised_rule(name),  # type: ignore[arg-type]
                      as_rule(name), args.lookahead)  # type: ignore[arg-type]
    for name in tree_rules:
        jobs[f"tree {name}"] = (_tree_run, vectorised_tree_rule(name),  # type: ignore[arg-type]
                                as_tree_rule(name), tree)  # type: ignore[arg-type]
    for label, (run, fast, reference, shape) in jobs.items():
        fast_ms: list[float] = []
        ref_ms: list[float] = []
        same, committed, iterations = True, 0, 0
        run(fast, fast_q, fast_p, shape, 8, 0)                  # warm-up
        for seed in range(1, args.runs + 1):
            tokens, spent, count = run(fast, fast_q, fast_p, shape, args.tokens, seed)
            fast_ms.append(spent / len(tokens) * 1e3)
            committed, iterations = committed + len(tokens), iterations + count
            ref_tokens, ref_spent, _ = run(reference, ref_q, ref_p, shape,
                                           args.reference_tokens, seed)
            ref_ms.append(ref_spent / len(ref_tokens) * 1e3)
            shared = min(len(tokens), len(ref_tokens))
            same &= tokens[:shared] == ref_tokens[:shared]
        fast_median, ref_median = statistics.median(fast_ms), statistics.median(ref_ms)
        print(f"  {label:30s} numpy {fast_median:7.3f} ms/token (min {min(fast_ms):.3f})   "
              f"reference {ref_median:8.2f} ms/token   speed-up {ref_median / fast_median:6.1f}x"
              f"   {committed / iterations:.2f} tokens per iteration   "
              f"same tokens: {'yes' if same else 'NO'}", flush=True)


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
