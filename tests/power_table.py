"""The stated-versus-simulated power table of docs/statistical-policy.md, and its cases.

The cases (shared with tests/test_statistical_power.py): references of 2 to 64 outcomes, wrong
laws at a total-variation distance (`shifted`), least favourable laws at TV ``ε`` (`least_
favourable`), at the sample sizes `required_samples` gives for power 0.9 at ``POLICY_ALPHA``,
and the two-cell case of reference (0.9, 0.1) against (0.8, 0.2) at ``alpha = 1e-6``. Audits are
simulated as multinomial counts of the reference's pooled cells and decided by the audit's own
rule (`simulated`).

    python tests/power_table.py            # prints the table (100 000 audits per case)
    python tests/power_table.py --write    # and writes it into docs/statistical-policy.md

The table's seed and sizes are those of the slow test
(``test_the_tables_with_100_000_audits_each_and_their_sample_sizes``), which recomputes it and
fails while the page's table differs; the default run checks every column but the simulated one.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from dsi_ref.audit.statistical import (
    POLICY_ALPHA,
    Alternative,
    achieved_power,
    pool_cells,
    rejects,
)
from dsi_ref.audit.statistical.power import _miss_enumerated, _miss_threshold

Law = Mapping[Hashable, float]
MISS = 1e-9  # each Clopper-Pearson bound fails with at most this probability
PAGE = Path(__file__).resolve().parent.parent / "docs" / "statistical-policy.md"

#: Wrong laws at TV 0.01 ... 0.3 from references of 2 ... 64 cells (`shifted`), at the sample size
#: `required_samples` gives for power 0.9 at POLICY_ALPHA.
LAW_CASES = [(2, 0.01, 154_112), (2, 0.03, 17_216), (2, 0.1, 1_564), (2, 0.3, 171),
             (4, 0.01, 192_512), (4, 0.03, 21_440), (4, 0.1, 1_816), (4, 0.3, 189),
             (16, 0.01, 326_656), (16, 0.03, 36_224), (16, 0.1, 3_216), (16, 0.3, 310),
             (64, 0.01, 610_304), (64, 0.03, 67_840), (64, 0.1, 6_032), (64, 0.3, 596)]
#: Least favourable laws (`least_favourable`) at TV 0.03 ... 0.3, sizes as above for
#: `Alternative.tv`.
TV_CASES = [(2, 0.03, 17_280), (2, 0.1, 1_580), (2, 0.3, 174),
            (4, 0.03, 21_504), (4, 0.1, 1_936), (4, 0.3, 206),
            (16, 0.03, 36_864), (16, 0.1, 3_328), (16, 0.3, 367),
            (64, 0.03, 80_896), (64, 0.1, 7_296), (64, 0.3, 796)]
#: The two-cell case: reference, wrong law, alpha and the two sample sizes.
TWO_CELL: tuple[dict[Hashable, float], dict[Hashable, float], float, tuple[int, ...]] = (
    {"a": 0.9, "b": 0.1}, {"a": 0.8, "b": 0.2}, 1e-6, (618, 808))
#: The table's simulated audits per case (the two-cell case: ``TWO_CELL_REPEATS``) and seed.
REPEATS, TWO_CELL_REPEATS, SEED = 100_000, 1_000_000, 14


def reference(k: int) -> dict[Hashable, float]:
    """A law on ``k`` outcomes, probabilities rising linearly by half from the first to the last
    (every outcome its own cell at the sample sizes of the cases)."""
    weights = [1 + 0.5 * i / (k - 1) for i in range(k)]
    total = math.fsum(weights)
    return {i: w / total for i, w in enumerate(weights)}


def shifted(p: Law, tv: float, seed: int = 0) -> dict[Hashable, float]:
    """A wrong law at total-variation distance ``tv`` from ``p``: ``p (1 + s u)`` with ``u`` of
    alternating sign and random size (centred under ``p``), ``s`` scaled to the distance."""
    ps = np.array([p[i] for i in range(len(p))])
    u = np.where(np.arange(len(p)) % 2 == 0, 1.0, -1.0)
    u = u * np.random.default_rng(seed).uniform(0.5, 1.0, len(p))
    u -= float(ps @ u)
    q = ps * (1 + tv / (0.5 * float(ps @ np.abs(u))) * u)
    assert q.min() >= 0
    return {i: float(v) for i, v in enumerate(q / q.sum())}


def least_favourable(p: Law, eps: float) -> dict[Hashable, float]:
    """The law at TV ``eps`` that scales up the most likely outcomes holding at most half the
    mass and scales down the others: the binary reduction's worst case (a set of mass near 1/2
    moved by ``eps``, the law inside each side unchanged)."""
    up, mass = [], 0.0
    for o in sorted(p, key=lambda o: -p[o]):
        if mass + p[o] <= 0.5:
            up.append(o)
            mass += p[o]
    return {o: p[o] * (1 + eps / mass) if o in up else p[o] * (1 - eps / (1 - mass)) for o in p}


def simulated(ref: Law, law: Law, n: int, alpha: float, repeats: int,
              rng: np.random.Generator) -> int:
    """How many of ``repeats`` audits of ``n`` draws from ``law`` reject: the counts of the
    reference's pooled cells and of the outside of its support, drawn as one multinomial, and
    decided by the module's rule."""
    pooling = pool_cells(ref, n)
    masses, outside = pooling.cell_masses(law)
    probs = np.array([*masses, outside])
    draws = rng.multinomial(n, probs / probs.sum(), size=repeats)
    return int(rejects(draws, pooling, alpha=alpha).sum())


def upper(hits: int, repeats: int) -> float:
    """One-sided Clopper-Pearson upper bound on a rate, wrong with probability <= MISS."""
    return 1.0 if hits == repeats else float(stats.beta.ppf(1 - MISS, hits + 1, repeats - hits))


def lower(hits: int, repeats: int) -> float:
    """One-sided Clopper-Pearson lower bound on a rate, wrong with probability <= MISS."""
    return 0.0 if hits == 0 else float(stats.beta.ppf(MISS, hits, repeats - hits + 1))


def is_exact(ref: Law, law: Law, n: int, alpha: float) -> bool:
    """Whether the power against ``law`` is the exact enumeration (not a bound)."""
    pooling = pool_cells(ref, n)
    masses, _ = pooling.cell_masses(law)
    inside = [m / math.fsum(masses) for m in masses]
    return _miss_enumerated(n, pooling.probs, inside,
                            _miss_threshold(pooling.df, alpha, n)) is not None


@dataclass(frozen=True)
class Row:
    """One row of the table: the case, the stated power, whether it is exact, and (once
    simulated) the rejections among ``repeats`` simulated audits."""

    alternative: str
    cells: int
    tv: float
    n: int
    stated: float
    exact: bool
    hits: int = 0
    repeats: int = 0

    def cells_text(self) -> list[str]:
        rate = self.hits / self.repeats if self.repeats else math.nan
        se = math.sqrt(rate * (1 - rate) / self.repeats) if self.repeats else math.nan
        return [self.alternative, str(self.cells), f"{self.tv:g}", f"{self.n:,}".replace(",", " "),
                f"{self.stated:.4f}", f"{rate:.4f} ± {se:.4f}",
                "exact" if self.exact else "a bound"]


def rows(repeats: int = 0, two_cell_repeats: int = 0, seed: int = SEED) -> list[Row]:
    """The table's rows in its order (the two-cell case, wrong laws, least favourable laws),
    simulated with ``repeats`` audits per case (``two_cell_repeats`` for the two-cell case;
    0: not simulated), drawn from one generator in the slow test's order (wrong laws, least
    favourable laws, the two-cell case)."""
    rng = np.random.default_rng(seed)
    law_rows, tv_rows, two_rows = [], [], []
    for k, tv, n in LAW_CASES:
        ref, wrong = reference(k), shifted(reference(k), tv)
        hits = simulated(ref, wrong, n, POLICY_ALPHA, repeats, rng) if repeats else 0
        law_rows.append(Row("wrong law", k, tv, n, achieved_power(ref, Alternative.of_law(wrong),
                                                                  n),
                            is_exact(ref, wrong, n, POLICY_ALPHA), hits, repeats))
    for k, eps, n in TV_CASES:
        ref = reference(k)
        hits = (simulated(ref, least_favourable(ref, eps), n, POLICY_ALPHA, repeats, rng)
                if repeats else 0)
        tv_rows.append(Row("TV ≥ ε (least favourable law)", k, eps, n,
                           achieved_power(ref, Alternative.tv(eps), n), False, hits, repeats))
    ref2, wrong2, alpha2, sizes = TWO_CELL
    for n in sizes:
        hits = (simulated(ref2, wrong2, n, alpha2, two_cell_repeats, rng)
                if two_cell_repeats else 0)
        two_rows.append(Row("(0.8, 0.2) vs (0.9, 0.1), α 1e-6", 2, 0.1, n,
                            achieved_power(ref2, Alternative.of_law(wrong2), n, alpha=alpha2),
                            True, hits, two_cell_repeats))
    return [*two_rows, *law_rows, *tv_rows]


HEADER = ("| alternative | cells | TV | n | stated | simulated ± SE | stated power is |\n"
          "|---|---|---|---|---|---|---|")


def render(table: list[Row]) -> str:
    """The table in Markdown."""
    return "\n".join([HEADER, *("| " + " | ".join(r.cells_text()) + " |" for r in table)])


_BLOCK = re.compile(r"(<!-- power-table:begin[^>]*-->\n)(.*?)(\n<!-- power-table:end -->)", re.S)


def page_table(text: str | None = None) -> str:
    """The table as docs/statistical-policy.md shows it."""
    found = _BLOCK.search(PAGE.read_text() if text is None else text)
    assert found is not None, "docs/statistical-policy.md has no power-table block"
    return found.group(2)


def without_simulated(table: str) -> str:
    """A rendered table with the simulated column emptied (what the default run checks: the
    rest takes no sampling)."""
    return "\n".join(re.sub(r"^(\|(?:[^|]*\|){5})[^|]*\|", r"\1 |", line)
                     if line.startswith("| ") and "simulated" not in line else line
                     for line in table.splitlines())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The stated-versus-simulated power table of "
                                                 "docs/statistical-policy.md")
    parser.add_argument("--write", action="store_true", help="write it into the page")
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--two-cell-repeats", type=int, default=TWO_CELL_REPEATS)
    args = parser.parse_args(argv)
    table = render(rows(args.repeats, args.two_cell_repeats))
    print(table)
    if args.write:
        text = PAGE.read_text()
        page_table(text)
        PAGE.write_text(_BLOCK.sub(lambda m: m.group(1) + table + m.group(3), text))
        print(f"wrote {PAGE.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
