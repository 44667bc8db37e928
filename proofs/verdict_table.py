"""The verdict table of every theorem: plain text (``python -m proofs``, the audit) or
Markdown (docs/theory.md). Rows are in catalogue order; everything but the solver-time column is
deterministic (fixed seeds and resource limits), and ``times=False`` drops that column."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .core import TheoremResult, prove
from .theorems import THEOREMS

__all__ = ["COLUMNS", "render_markdown", "render_text", "rows", "run_all"]

COLUMNS = ("theorem", "range", "expected", "verdict", "solver s", "counterexample")


def run_all(names: Iterable[str] | None = None) -> list[TheoremResult]:
    """Prove every theorem of the catalogue (or those named), in catalogue order."""
    wanted = None if names is None else set(names)
    if wanted is not None:
        unknown = wanted - {t.name for t in THEOREMS}
        if unknown:
            raise KeyError(f"unknown theorem(s): {', '.join(sorted(unknown))}")
    return [prove(t) for t in THEOREMS if wanted is None or t.name in wanted]


def rows(results: Sequence[TheoremResult], *, times: bool = True) -> list[tuple[str, ...]]:
    """One row per result: name, range, expected verdict, verdict, solver time, counterexample
    (or the reason for an UNKNOWN)."""
    out: list[tuple[str, ...]] = []
    for r in results:
        detail = r.counterexample_text() if r.counterexample is not None else (r.reason or "-")
        out.append((r.theorem.name, r.theorem.range_label, r.theorem.expected.value,
                    r.verdict.value, f"{r.seconds:.2f}" if times else "-", detail))
    return out


def render_text(results: Sequence[TheoremResult], *, times: bool = True) -> str:
    """A fixed-width table, a summary line, and one note per theorem (wording and method)."""
    table = [COLUMNS, *rows(results, times=times)]
    widths = [max(len(row[i]) for row in table) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("")
    lines.append(summary(results))
    lines.append("")
    for r in results:
        t = r.theorem
        lines.append(f"{t.name}: {t.wording}")
        lines.append(f"    method: {t.method}")
        if t.dropped:
            lines.append(f"    dropped assumption: {t.dropped}")
        if t.witness is not None and r.counterexample is not None:
            lines.append(f"    witness: {t.witness(r.counterexample, r.counterexample_k)}")
    return "\n".join(lines)


def render_markdown(results: Sequence[TheoremResult], *, times: bool = False) -> str:
    """A Markdown table (wording in the last column), for docs/theory.md."""
    head = ["theorem", "claim (paper's wording)", "range", "verdict", "counterexample"]
    if times:
        head.insert(4, "solver s")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        t = r.theorem
        witness = (f" Witness: {t.witness(r.counterexample, r.counterexample_k)}."
                   if t.witness is not None and r.counterexample is not None else "")
        cells = [f"`{t.name}`",
                 t.wording + (f" *Drops: {t.dropped}.*" if t.dropped else "") + witness,
                 t.range_label, f"**{r.verdict.value}**",
                 r.counterexample_text() if r.counterexample is not None else (r.reason or "-")]
        if times:
            cells.insert(4, f"{r.seconds:.2f}")
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    out.append("")
    out.append(summary(results))
    return "\n".join(out)


def summary(results: Sequence[TheoremResult]) -> str:
    """``19 theorems: 13 PROVED, 6 REFUTED, 0 UNKNOWN; all as expected``."""
    counts = {v: sum(r.verdict.value == v for r in results)
              for v in ("PROVED", "REFUTED", "UNKNOWN")}
    off = [r.theorem.name for r in results if not r.as_expected]
    return (f"{len(results)} theorems: {counts['PROVED']} PROVED, {counts['REFUTED']} REFUTED, "
            f"{counts['UNKNOWN']} UNKNOWN; "
            + ("all as expected" if not off else "NOT as expected: " + ", ".join(off)))
