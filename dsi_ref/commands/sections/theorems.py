"""The ``theorems`` audit section: every latency theorem of `proofs` (z3 on `theory`'s closed
forms) with its verdict, solver time and counterexample.

The verdicts are deterministic (seeded solvers with resource limits); the solver-time column
varies from run to run. The section fails when a verdict differs from the theorem's expected one
(an UNKNOWN included: it never counts as proved).
"""

from __future__ import annotations

import time

from proofs import THEOREMS, TheoremResult, prove
from proofs.verdict_table import COLUMNS, rows, summary

from .core import Section, SectionSpec, progress_bar

__all__ = ["SECTION", "theorems_section"]


def _prove_all(progress: bool) -> list[TheoremResult]:
    return [prove(t) for t in progress_bar(THEOREMS, total=len(THEOREMS), desc="theorems",
                                           enabled=progress)]


def theorems_section(*, quick: bool = False, progress: bool = True) -> Section:
    """Prove every theorem; one row each (``quick`` changes nothing: the section is fast)."""
    start = time.perf_counter()
    section = Section("theorems", "Latency theorems (z3 on theory's closed forms)", COLUMNS)
    results = _prove_all(progress)
    section.rows = [tuple(row) for row in rows(results)]
    section.ok = all(r.as_expected for r in results)
    section.notes = [summary(results),
                     "verdicts are deterministic (seeded, resource-limited z3); solver times vary",
                     "details: python -m proofs (wording and method of each theorem); "
                     "docs/theory.md"]
    section.seconds = time.perf_counter() - start
    return section


SECTION = SectionSpec("theorems", theorems_section)
