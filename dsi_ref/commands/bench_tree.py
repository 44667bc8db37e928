"""``dsi-ref bench --tree W,W,...``: tree speculation against the chain of the same depth.

For a tree of widths ``tree`` (children per node at each depth, `dsi_ref.decoders.tree`), each
prompt runs three decoders on the engine, interleaved so that drift hits all alike:

* ``tree``: `Engine.tree_speculative` with that shape (one target forward per iteration over the
  whole tree, a tree attention mask);
* ``chain``: the same with ``(1,) * len(tree)``, a chain of the same depth (SI's window, under
  the same tree rule);
* ``nonsi``: `Engine.autoregressive` (greedy for ``--verify greedy``).

It prints, per decoder, the tokens per target forward (the number tree speculation raises) and
the wall-clock ms per token, and with ``--json`` writes them. No prediction: the simulator has
no tree model.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..base.errors import InvalidParameterError
from ..decoders.tree import TREE_VERIFY_RULES

__all__ = ["check_tree_args", "tree_bench", "tree_nodes"]


def tree_nodes(tree: list[int]) -> int:
    """The drafted nodes of a full tree of widths ``tree`` (``2,2,1``: 2 + 4 + 4 = 10)."""
    total, level = 0, 1
    for width in tree:
        level *= width
        total += level
    return total


def check_tree_args(args: argparse.Namespace) -> None:
    """With ``--tree``, ``--verify`` must be a tree rule and the backend the threads'."""
    if args.verify not in TREE_VERIFY_RULES:
        raise InvalidParameterError(f"--tree needs a tree rule: --verify one of "
                                    f"{', '.join(TREE_VERIFY_RULES)}; got {args.verify!r}")
    if args.backend != "thread":
        raise InvalidParameterError("--tree runs on the thread backend (--backend thread)")


def tree_bench(engine: Any, prompts: list[tuple[int, ...]], args: argparse.Namespace) -> int:
    """Run tree, chain and non-SI on every prompt (after a warm-up); print and write the
    results (see the module docstring)."""
    from ..base.randomness import Sampler

    tree = tuple(args.tree)
    shapes = {"tree": tree, "chain": (1,) * len(tree)}
    greedy = args.verify == "greedy"
    warm, count = prompts[0], min(8, args.new_tokens)
    for shape in shapes.values():
        engine.tree_speculative(warm, count, Sampler(0), tree=shape, verify=args.verify)
    engine.autoregressive(warm, count, Sampler(0), greedy=greedy)
    names = ("tree", "chain", "nonsi")
    seconds = dict.fromkeys(names, 0.0)
    tokens = dict.fromkeys(names, 0)
    forwards = dict.fromkeys(names, 0)
    drafter_forwards = dict.fromkeys(names, 0)
    for i, prompt in enumerate(prompts):
        seed = args.seed + i
        runs = {name: engine.tree_speculative(prompt, args.new_tokens, Sampler(seed), tree=shape,
                                              verify=args.verify)
                for name, shape in shapes.items()}
        runs["nonsi"] = engine.autoregressive(prompt, args.new_tokens, Sampler(seed),
                                              greedy=greedy)
        for name, run in runs.items():
            seconds[name] += float(run.time)
            tokens[name] += len(run.tokens)
            forwards[name] += run.stats["target_forwards"]
            drafter_forwards[name] += run.stats.get("drafter_forwards", 0)
    results: dict[str, Any] = {}
    print(f"\ntree {','.join(map(str, tree))} ({tree_nodes(list(tree))} nodes) vs chain "
          f"{','.join('1' * len(tree))}, verify={args.verify}")
    for name in names:
        results[name] = {
            "shape": list(shapes[name]) if name in shapes else None,
            "tokens": tokens[name], "target_forwards": forwards[name],
            "drafter_forwards": drafter_forwards[name],
            "tokens_per_target_forward": tokens[name] / max(1, forwards[name]),
            "ms_per_token": 1e3 * seconds[name] / max(1, tokens[name])}
        print(f"  {name:6s} {results[name]['tokens_per_target_forward']:.3f} tokens per target "
              f"forward ({tokens[name]} tokens, {forwards[name]} target and "
              f"{drafter_forwards[name]} drafter forwards), "
              f"{results[name]['ms_per_token']:.3f} ms/token", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"tree": list(tree), "verify": args.verify, "prompts": args.prompts,
                       "new_tokens": args.new_tokens, "dtype": args.dtype,
                       "results": results}, fh, indent=2)
    return 0
