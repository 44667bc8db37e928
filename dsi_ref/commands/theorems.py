"""``dsi-ref theorems``: every latency theorem of `proofs` (z3 on `theory`'s closed forms) with
its verdict, solver time and counterexample (the same table as the audit's ``theorems``
section, `dsi_ref.commands.sections.theorems`). Exit status 1 when a verdict is not the expected
one."""

from __future__ import annotations

import argparse

from proofs import THEOREMS, prove, render_markdown, render_text

from ..base.errors import InvalidParameterError
from .args import Subparsers
from .sections.core import progress_bar

__all__ = ["install"]


def _run(args: argparse.Namespace) -> int:
    unknown = set(args.theorem or ()) - {t.name for t in THEOREMS}
    if unknown:
        raise InvalidParameterError(f"unknown theorem(s): {', '.join(sorted(unknown))}; known: "
                                    f"{', '.join(t.name for t in THEOREMS)}")
    chosen = [t for t in THEOREMS if not args.theorem or t.name in args.theorem]
    results = [prove(t) for t in progress_bar(chosen, total=len(chosen), desc="theorems",
                                              enabled=not args.no_progress)]
    render = render_markdown if args.markdown else render_text
    print(render(results, times=not args.no_times))
    return 0 if all(r.as_expected for r in results) else 1


def install(sub: Subparsers) -> None:
    """Add ``dsi-ref theorems``."""
    p = sub.add_parser("theorems", help="prove the latency theorems with z3 (verdict table)",
                       description="Prove every latency theorem of the paper (per lookahead "
                       "k = 1..32 where powers of a appear) on theory's closed forms and print "
                       "PROVED / REFUTED (with a counterexample) / UNKNOWN. Exit status 1 when a "
                       "verdict is not the expected one. Same as python -m proofs.")
    p.add_argument("--theorem", action="append", metavar="NAME", help="only this theorem "
                   "(repeatable): " + ", ".join(t.name for t in THEOREMS))
    p.add_argument("--no-times", action="store_true", help="omit solver times (deterministic)")
    p.add_argument("--markdown", action="store_true", help="a Markdown table (docs/theory.md)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_run)
