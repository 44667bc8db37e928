"""``python -m proofs``: prove every theorem and print the verdict table.

Options: ``--no-times`` (drop the solver-time column: the output is then byte-for-byte
deterministic), ``--markdown`` (the table of docs/theory.md), ``--theorem NAME`` (repeatable).
Exit status 1 when a verdict differs from the expected one (an UNKNOWN included).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from .verdict_table import render_markdown, render_text, run_all


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="python -m proofs",
                                     description="Prove the latency theorems with z3 and "
                                     "print PROVED / REFUTED (with a counterexample) / UNKNOWN.")
    parser.add_argument("--no-times", action="store_true", help="omit solver times")
    parser.add_argument("--markdown", action="store_true", help="Markdown table (docs)")
    parser.add_argument("--theorem", action="append", metavar="NAME", help="only this theorem")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        results = run_all(args.theorem)
    except KeyError as error:
        print(error.args[0], file=sys.stderr)
        return 2
    render = render_markdown if args.markdown else render_text
    print(render(results, times=not args.no_times))
    if not args.no_times:
        print(f"\ntotal {time.perf_counter() - start:.1f} s")
    return 0 if all(r.as_expected for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
