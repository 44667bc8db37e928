#!/usr/bin/env python3
"""Generate docs/optimality.md: each verifier's exact acceptance beside the certified LP optimum.

    .venv/bin/python benchmarks/optimality_table.py            # print the page
    .venv/bin/python benchmarks/optimality_table.py --write    # write docs/optimality.md
    .venv/bin/python benchmarks/optimality_table.py --check    # exit 1 if the page is stale

Deterministic: every instance comes from `dr.TableLM.random` with the seeds given as arguments
(the defaults are the committed page's). Every optimum is a `Certificate` that `solve` checked
in `Fraction`s; the page shows its value, and the tests recompute the page and compare it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path

import dsi_ref as dr
from dsi_ref.audit import optimality as opt

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "optimality.md"

#: The committed page's instances: one-step rows (V = 4) and chain models.
ONE_STEP_SEEDS = (0, 1, 2)
ONE_STEP_VOCAB = 4
ONE_STEP_DRAFTS = (2, 3)
CHAIN_SEEDS = (0, 1, 2)
CHAIN_VOCABS = (2, 3)
CHAIN_GAMMAS = (1, 2, 3)
#: The drafter's seed is the target's plus this.
DRAFTER_OFFSET = 100


def one_step_rows(seed: int, vocab: int) -> tuple[tuple[Fraction, ...], tuple[Fraction, ...]]:
    """The instance of ``seed``: ``p`` a random row (zeros allowed), ``q`` a random row with
    full support (so that ``k <= V`` drafts without replacement exist)."""
    p = dr.TableLM.random(vocab, 0, seed).probs(())
    q = dr.TableLM.random(vocab, 0, seed + DRAFTER_OFFSET, zero_prob=0).probs(())
    return tuple(Fraction(v) for v in p), tuple(Fraction(v) for v in q)


def fmt(x: Fraction) -> str:
    """A probability or expectation as ``exact`` and its float."""
    return f"{x} | {float(x):.6f}"


def _row_text(row: Sequence[Fraction]) -> str:
    return "(" + ", ".join(str(v) for v in row) + ")"


def tree_rules() -> list[tuple[str, opt.DraftScheme | None, Callable[[int], opt.Decoder]]]:
    """The tree rules to measure, with the draft law each one draws its children by (``None``
    when the rule makes no lossless claim, so that no optimum applies)."""
    tree = getattr(dr, "tree_speculative", None)
    names: Sequence[str] = getattr(dr, "TREE_VERIFY_RULES", ())
    if tree is None:
        return []
    rules: list[tuple[str, opt.DraftScheme | None, Callable[[int], opt.Decoder]]] = []
    for name in names:
        scheme = opt.TREE_RULE_DRAFTS.get(name)

        def decoder(k: int, name: str = name) -> opt.Decoder:
            """The rule with ``k`` drafts at depth 1, as `one_step_acceptance` calls it."""
            return lambda t, d, pr, n, rng: tree(t, d, pr, n, rng, tree=(k,), verify=name)

        rules.append((name, scheme, decoder))
    return rules


def one_step_section(seeds: Sequence[int], vocab: int, drafts: Sequence[int]) -> list[str]:
    """Tables 1 and 2: the certified optima per draft law, and each rule's gap."""
    lines = ["## One step, several drafts", "",
             f"Instances: `p = TableLM.random({vocab}, 0, seed).probs(())`, `q = TableLM.random("
             f"{vocab}, 0, seed + {DRAFTER_OFFSET}, zero_prob=0).probs(())`.", "",
             "| seed | p | q |", "|---|---|---|"]
    instances = {s: one_step_rows(s, vocab) for s in seeds}
    for s, (p, q) in instances.items():
        lines.append(f"| {s} | {_row_text(p)} | {_row_text(q)} |")
    lines += ["", "### The certified optima", "",
              "`max P(Y ∈ {X_1..X_k})` over couplings of `Y ~ p` with the drafts, for each draft "
              "law; each value is an LP optimum with its exact certificate, and equals the "
              "min-cut closed form `1 − max_B (Q(X ⊆ B) − p(B))`.", "",
              "| seed | k | drafts | optimum | ≈ | certificate (primal support, dual rows) |",
              "|---|---|---|---|---|---|"]
    optima: dict[tuple[int, int, str], Fraction] = {}
    for s, (p, q) in instances.items():
        for k in (1, *drafts):
            for scheme in opt.DRAFT_SCHEMES if k > 1 else ("iid",):
                law = opt.draft_law(q, k, scheme)
                cert = opt.solve(opt.multidraft_program(p, law))
                cert.check()
                if cert.value != opt.min_cut_optimum(p, law):
                    raise AssertionError(f"seed {s}, k {k}, {scheme}: LP {cert.value} != min cut")
                optima[s, k, scheme] = cert.value
                support = sum(1 for z in cert.primal if z)
                nonzero = sum(1 for w in cert.dual if w)
                lines.append(f"| {s} | {k} | {scheme} | {fmt(cert.value)} | {support}, "
                             f"{nonzero} |")
    lines += ["", "### Each rule's gap to the optimum", "",
              "A rule's one-step acceptance is the exact expected `stats[\"accepted\"]` of a "
              "2-token run (`tree=(k,)`); the gap is the optimum for the rule's own draft law "
              "minus it (a lossless rule cannot have a negative gap). <!-- no verdict -->", "",
              "| seed | k | rule | drafts | acceptance | ≈ | optimum | gap |",
              "|---|---|---|---|---|---|---|---|"]
    for s, (p, q) in instances.items():
        acc = opt.one_step_acceptance(
            lambda t, d, pr, n, rng: dr.speculative(t, d, pr, n, rng, lookahead=1), p, q)
        gap = optima[s, 1, "iid"] - acc
        lines.append(f"| {s} | 1 | `speculative` rejection | iid | {fmt(acc)} | "
                     f"{optima[s, 1, 'iid']} | {gap} |")
        for k in drafts:
            for name, rule_drafts, decoder in tree_rules():
                value = opt.one_step_acceptance(decoder(k), p, q)
                if rule_drafts is None:
                    lines.append(f"| {s} | {k} | {name} | (no lossless claim) | {fmt(value)} | "
                                 f"— | — |")
                    continue
                best = optima[s, k, rule_drafts]
                lines.append(f"| {s} | {k} | {name} | {rule_drafts} | {fmt(value)} | {best} | "
                             f"{best - value} |")
    if not tree_rules():
        lines += ["", "`dr.tree_speculative` is not in this version: only the single-draft rule "
                  "is measured."]
    return lines


def chain_section(seeds: Sequence[int], vocabs: Sequence[int],
                  gammas: Sequence[int]) -> list[str]:
    """Table 3: block verification against the best valid chain verifier."""
    block = "block" in dr.VERIFY_RULES
    lines = ["## Chains: block verification against every valid verifier", "",
             "Target `TableLM.random(V, 1, seed)`, drafter `TableLM.random(V, 1, seed + "
             f"{DRAFTER_OFFSET}, zero_prob=0)` (full support), empty prompt, `γ` drafts. The "
             "optimum is the LP's maximum of `E[τ]` over valid chain verifiers (certified); "
             "block and token are the exact `E[τ]` of one SI iteration with "
             "`verify=\"block\"` and `verify=\"rejection\"`.",
             "", "| V | γ | seed | optimum | ≈ | block | token | block = optimum | "
             "token ≤ block |", "|---|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for vocab in vocabs:
        for gamma in gammas:
            for s in seeds:
                target = dr.TableLM.random(vocab, 1, s, name="target")
                drafter = dr.TableLM.random(vocab, 1, s + DRAFTER_OFFSET, zero_prob=0,
                                            name="drafter")
                cert = opt.chain_optimum(target, drafter, (), gamma)
                cert.check()
                token = opt.block_accepted(target, drafter, (), gamma, "rejection")
                if block:
                    value = opt.block_accepted(target, drafter, (), gamma, "block")
                    equal = value == cert.value
                    verdicts.append(equal)
                    lines.append(f"| {vocab} | {gamma} | {s} | {fmt(cert.value)} | {value} | "
                                 f"{token} | {'yes' if equal else 'NO'} | "
                                 f"{'yes' if token <= value else 'NO'} |")
                else:
                    lines.append(f"| {vocab} | {gamma} | {s} | {fmt(cert.value)} | — | {token} "
                                 f"| — | — |")
    lines.append("")
    if not block:
        lines.append("`\"block\"` is not in `dr.VERIFY_RULES` in this version: only the optimum "
                     "and token-level rejection are shown.")
    elif all(verdicts):
        lines.append(f"Block verification attains the certified optimum on all {len(verdicts)} "
                     "instances (equal `Fraction`s).")
    else:
        lines.append(f"Block verification misses the optimum on "
                     f"{verdicts.count(False)} of {len(verdicts)} instances (rows marked NO).")
    return lines


def page(one_step_seeds: Sequence[int] = ONE_STEP_SEEDS, vocab: int = ONE_STEP_VOCAB,
         drafts: Sequence[int] = ONE_STEP_DRAFTS, chain_seeds: Sequence[int] = CHAIN_SEEDS,
         chain_vocabs: Sequence[int] = CHAIN_VOCABS,
         chain_gammas: Sequence[int] = CHAIN_GAMMAS) -> str:
    """The whole page, as markdown."""
    lines = [
        "# Optimality, exactly", "",
        "<!-- Generated by benchmarks/optimality_table.py; do not edit by hand: "
        "tests/test_optimality.py regenerates it and compares. -->", "",
        "How close does each verification rule come to the best any lossless verifier can do? "
        "Each optimum below is a linear program over couplings, solved in floats by HiGHS and "
        "then certified in `Fraction`s by `dsi_ref.audit.optimality`: a primal `z >= 0` with "
        "`A z = b`, a dual `w` with `Aᵀ w >= c`, and `c·z = b·w`, all checked exactly. A "
        "certificate that does not check is an error, never a number on this page.", "",
        "Regenerate with `.venv/bin/python benchmarks/optimality_table.py --write`.", "",
    ]
    lines += one_step_section(one_step_seeds, vocab, drafts)
    lines.append("")
    lines += chain_section(chain_seeds, chain_vocabs, chain_gammas)
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one-step-seeds", type=int, nargs="+", default=ONE_STEP_SEEDS)
    parser.add_argument("--vocab", type=int, default=ONE_STEP_VOCAB)
    parser.add_argument("--drafts", type=int, nargs="+", default=ONE_STEP_DRAFTS)
    parser.add_argument("--chain-seeds", type=int, nargs="+", default=CHAIN_SEEDS)
    parser.add_argument("--chain-vocabs", type=int, nargs="+", default=CHAIN_VOCABS)
    parser.add_argument("--chain-gammas", type=int, nargs="+", default=CHAIN_GAMMAS)
    parser.add_argument("--write", action="store_true", help=f"write {PAGE.relative_to(ROOT)}")
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    text = page(args.one_step_seeds, args.vocab, args.drafts, args.chain_seeds,
                args.chain_vocabs, args.chain_gammas)
    elapsed = time.perf_counter() - start
    if args.check:
        stale = not PAGE.exists() or PAGE.read_text() != text
        print(f"{PAGE.relative_to(ROOT)} is {'stale' if stale else 'up to date'} "
              f"({elapsed:.1f} s)")
        return int(stale)
    if args.write:
        PAGE.write_text(text)
        print(f"wrote {PAGE.relative_to(ROOT)} ({elapsed:.1f} s)")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
