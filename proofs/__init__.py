"""Theorems about `theory`'s closed forms, checked by z3: PROVED, REFUTED (with a
counterexample) or UNKNOWN (never counted as proved).

`proofs.solver` holds the one solver factory and the sympy → z3 translation, `proofs.core` the
`Theorem` object and `prove`, `proofs.theorems` the catalogue, `proofs.verdict_table` the verdict
table printed by ``python -m proofs`` and by the ``theorems`` section of ``dsi-ref audit``.
Imports `theory`, sympy and z3 only.
"""

from .core import Theorem, TheoremResult, prove
from .solver import Check, TranslationError, Verdict, check_claim, make_solver, to_z3
from .theorems import K_RANGE, THEOREMS, by_name
from .verdict_table import render_markdown, render_text, run_all

__all__ = [
    "K_RANGE",
    "THEOREMS",
    "Check",
    "Theorem",
    "TheoremResult",
    "TranslationError",
    "Verdict",
    "by_name",
    "check_claim",
    "make_solver",
    "prove",
    "render_markdown",
    "render_text",
    "run_all",
    "to_z3",
]
