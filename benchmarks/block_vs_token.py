#!/usr/bin/env python3
"""Generate docs/block-vs-token.md and docs/figures/block_vs_token.png: block verification
against token-level rejection sampling on the paper's grid, for SI and DSI.

    .venv/bin/python benchmarks/block_vs_token.py            # print the page
    .venv/bin/python benchmarks/block_vs_token.py --write    # write the page and the figure
    .venv/bin/python benchmarks/block_vs_token.py --check    # exit 1 if the page is stale

Grid (`dsi_ref.sim.grid`, the official heatmap's): ``c, a ∈ {0, 1/ndim, …, 1}`` clipped
(``c >= 0.01``, ``0.01 <= a <= 0.99``), ``k = 1 … ndim``, ``N = 1000``, ``SP = 7``; ``ndim = 20``
by default (``--ndim`` for a coarser one). Pairs: for each grid ``a`` the context-free pair
``p = (a/2, 1 − a/2)``, ``q = (1 − a/2, a/2)`` (`mirrored_pair`), whose token-level acceptance
rate is ``Σ min(p, q) = a`` exactly. Laws, exact: token-level is ``AcceptanceLaw.iid(a, k)``;
block's is ``P(L >= i) = E_q[w_i]`` (`dsi_ref.audit.acceptance.block_survival`, equal to the
exact engine's law: tests/test_acceptance_from_models.py, and for ``k <= 3`` here:
tests/test_block_vs_token.py). Latencies, in floats from the exact laws: SI by
`expected_latency`; DSI by the event model with the law (`SP` servers): token-level with
position decisions, block with window decisions (``decisions="window"``: fixed windows, the
token-level ``dsi(..., verify="block")`` exactly, tests/test_acceptance_from_models.py), and
block's optimistic bound with position decisions; one spine family per ``(c, k)`` and decision
rule for every law at once (the event model's fast path, as `dsi_event_grid` does for rates;
tests compare it with `expected_latency` cell by cell). Each algorithm and rule takes its best
``k`` per cell.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

import dsi_ref as dr
from dsi_ref.audit.acceptance import block_survival, law_from_survival
from dsi_ref.commands.plots import PINK
from dsi_ref.sim import AcceptanceLaw
from dsi_ref.sim.event import _family_dp, _Windows
from dsi_ref.sim.event_spines import spine_family
from dsi_ref.sim.grid import HeatmapSpec, grid_axes
from dsi_ref.sim.params import SimParams

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "block-vs-token.md"
FIGURE = ROOT / "docs" / "figures" / "block_vs_token.png"
RULES = ("token", "block")
#: The DSI predictions: ``"dsi"`` = fixed-window block DSI (window decisions for block),
#: ``"dsi_bound"`` = position decisions for both rules (block's optimistic bound).
DSI_KINDS = ("dsi", "dsi_bound")
#: The drafter costs shown in the page's table (the figure shows every grid ``c``).
SHOWN_C = (Fraction(1, 20), Fraction(1, 4), Fraction(1, 2))
#: The lookaheads of the page's first table (per-window acceptance).
SHOWN_K = (1, 2, 5, 20)


def mirrored_pair(a: Fraction) -> tuple[dr.TableLM, dr.TableLM]:
    """``p = (a/2, 1 − a/2)``, ``q = (1 − a/2, a/2)``: context-free, ``Σ min(p, q) = a``
    for ``0 <= a <= 1``."""
    x = a / 2
    return (dr.TableLM.context_free((x, 1 - x), name="target"),
            dr.TableLM.context_free((1 - x, x), name="drafter"))


def window_laws(a: Fraction, k_max: int) -> dict[str, list[AcceptanceLaw]]:
    """The exact laws of the mirrored pair of ``a`` for ``k = 1 … k_max`` (index ``k − 1``)."""
    target, drafter = mirrored_pair(a)
    values = block_survival(target, drafter, k_max)
    return {"token": [AcceptanceLaw.iid(a, k) for k in range(1, k_max + 1)],
            "block": [AcceptanceLaw.from_mapping(law_from_survival(values[:k + 1]), k)
                      for k in range(1, k_max + 1)]}


def mean_accepted(law: AcceptanceLaw) -> Any:
    """``E[L]``."""
    return law.mean_committed() - 1


def floats(law: AcceptanceLaw) -> AcceptanceLaw:
    """The law in floats (the latencies at ``N = 1000`` are computed in floats)."""
    return AcceptanceLaw(tuple(float(v) for v in law.probabilities))


def dsi_event_laws(c: Fraction, k: int, laws: Sequence[AcceptanceLaw], n_tokens: int,
                   sp_degree: int, decisions: str = "position") -> NDArray[np.float64]:
    """``E[T_DSI]`` of the event model for every law (windows of ``k``) at once: one spine
    family for ``(c, k)`` and ``decisions``, the programme over an array of laws."""
    p = SimParams("dsi", float(c), None, k, n_tokens, "event", sp_degree,
                  acceptance=floats(laws[0]), decisions=decisions)  # type: ignore[arg-type]
    family = spine_family(p, n_tokens)
    probs = np.array([[float(v) for v in law.probabilities] for law in laws]).T  # (k + 1, L)
    windows = _Windows(k, probs[k], tuple(probs[j] for j in range(k)),
                       tuple(probs[j:].sum(axis=0) for j in range(k)))
    ticks = _family_dp(family, n_tokens, windows, exact=False)
    result: NDArray[np.float64] = np.asarray(ticks, float) / family.scale
    return result


@dataclass
class Results:
    """Best-``k`` latencies per cell: ``cost[algorithm][rule]`` has shape ``(len(c), len(a))``,
    ``best_k`` likewise; ``laws[rule][a index][k − 1]``. Algorithms: ``"si"``, ``"dsi"``
    (block with window decisions: fixed-window block DSI) and ``"dsi_bound"`` (block with
    position decisions: its optimistic bound); token-level DSI is the same in both."""

    spec: HeatmapSpec
    c: list[Fraction]
    a: list[Fraction]
    laws: dict[str, list[list[AcceptanceLaw]]]
    cost: dict[str, dict[str, NDArray[np.float64]]]
    best_k: dict[str, dict[str, NDArray[np.int64]]]
    seconds: float
    #: ``full[algorithm][rule]``: the latency at every ``(c, a, k)`` (axis 2: ``k = 1, 2, …``)
    full: dict[str, dict[str, NDArray[np.float64]]]

    def speedup(self, algorithm: str) -> NDArray[np.float64]:
        """Token-level's best latency over block's (``> 1``: block is faster)."""
        ratio: NDArray[np.float64] = self.cost[algorithm]["token"] / self.cost[algorithm]["block"]
        return ratio

    def same_k(self, algorithm: str) -> NDArray[np.float64]:
        """Token-level's latency over block's at the same ``(c, a, k)``, for ``k >= 2`` (with
        ``k = 1`` the rules are the same); shape ``(len(c), len(a), len(k) − 1)``."""
        ratio: NDArray[np.float64] = (self.full[algorithm]["token"][:, :, 1:]
                                      / self.full[algorithm]["block"][:, :, 1:])
        return ratio


def compute(spec: HeatmapSpec, c_values: Sequence[Fraction] | None = None,
            a_indices: Sequence[int] | None = None) -> Results:
    """Every ``(c, a, k)`` of the grid of ``spec`` (or the given ``c`` values and ``a`` rows)."""
    start = time.perf_counter()
    cs, accs, ks = grid_axes(spec)
    cs = list(c_values) if c_values is not None else cs
    accs = [accs[i] for i in a_indices] if a_indices is not None else accs
    laws = {rule: [] for rule in RULES}  # type: dict[str, list[list[AcceptanceLaw]]]
    for a in accs:
        per_k = window_laws(a, len(ks))
        for rule in RULES:
            laws[rule].append(per_k[rule])
    shape = (len(cs), len(accs), len(ks))
    full = {alg: {rule: np.full(shape, np.inf) for rule in RULES}
            for alg in ("si", *DSI_KINDS)}
    na = len(accs)
    for i, c in enumerate(cs):
        for kk, k in enumerate(ks):
            columns = [laws[rule][j][kk] for rule in RULES for j in range(na)]
            position = dsi_event_laws(c, k, columns, spec.n_tokens, spec.sp_degree)
            window = dsi_event_laws(c, k, columns[na:], spec.n_tokens, spec.sp_degree,
                                    decisions="window")
            full["dsi"]["token"][i, :, kk] = full["dsi_bound"]["token"][i, :, kk] = \
                position[:na]
            full["dsi_bound"]["block"][i, :, kk] = position[na:]
            full["dsi"]["block"][i, :, kk] = window
            for r, rule in enumerate(RULES):
                for j, law in enumerate(columns[r * na:(r + 1) * na]):
                    full["si"][rule][i, j, kk] = dr.expected_latency(
                        "si", c=float(c), acceptance=floats(law), lookahead=k,
                        n_tokens=spec.n_tokens)
    cost = {alg: {rule: full[alg][rule].min(axis=2) for rule in RULES} for alg in full}
    best = {alg: {rule: np.asarray(ks)[full[alg][rule].argmin(axis=2)] for rule in RULES}
            for alg in full}
    return Results(spec, cs, accs, laws, cost, best, time.perf_counter() - start, full)


def _f(x: Fraction | float) -> str:
    return f"{float(x):.2f}".rstrip("0").rstrip(".") if float(x) != 0.01 else "0.01"


def acceptance_rows(res: Results) -> list[str]:
    """Table 1's rows: per ``a``, ``E[L]`` under each rule at the shown lookaheads."""
    shown = [k for k in SHOWN_K if k <= len(res.laws["token"][0])]
    rows = []
    for j, a in enumerate(res.a):
        cells = []
        for k in shown:
            token, block = (float(mean_accepted(res.laws[r][j][k - 1])) for r in RULES)
            cells.append(f"{token:.3f} / {block:.3f}")
        rows.append(f"| {_f(a)} | " + " | ".join(cells) + " |")
    return rows


def latency_cells(res: Results, c: Fraction, j: int) -> str:
    """One ``(c, a)`` cell group of table 2 (``a = res.a[j]``): SI's and DSI's speedups of
    block over token (each at its best ``k``; DSI: fixed windows, exact, then the optimistic
    bound of position decisions), DSI over SI under block, and the best ``k`` as SI token/SI
    block/DSI token/DSI block (fixed windows)."""
    i = res.c.index(c)
    si, dsi, bound = (res.speedup(alg)[i, j] for alg in ("si", "dsi", "dsi_bound"))
    dsi_over_si = res.cost["si"]["block"][i, j] / res.cost["dsi"]["block"][i, j]
    ks = "/".join(str(res.best_k[alg][rule][i, j]) for alg in ("si", "dsi") for rule in RULES)
    return f"{si:.3f} | {dsi:.3f} | {bound:.3f} | {dsi_over_si:.2f} | {ks}"


def latency_rows(res: Results, c_values: Sequence[Fraction]) -> list[str]:
    """Table 2's rows: per ``a``, the `latency_cells` at each shown ``c``."""
    return [f"| {_f(a)} | " + " | ".join(latency_cells(res, c, j) for c in c_values) + " |"
            for j, a in enumerate(res.a)]


def _ranges(values: Sequence[Fraction], mask: NDArray[np.bool_]) -> str:
    """The grid values where ``mask`` holds, as runs ``lo–hi`` of consecutive grid points."""
    runs: list[str] = []
    j = 0
    while j < len(values):
        if not mask[j]:
            j += 1
            continue
        end = j
        while end + 1 < len(values) and mask[end + 1]:
            end += 1
        runs.append(_f(values[j]) if end == j else f"{_f(values[j])}–{_f(values[end])}")
        j = end + 1
    return ", ".join(runs) if runs else "—"


TIE = 1e-9


def where_row(res: Results, i: int) -> str:
    """Table 3's row at ``c = res.c[i]``: the ``a`` where fixed-window block DSI (best ``k``) is
    faster than token-level DSI (best ``k``), where it is slower, block's speedup range over
    the row; then, at the same ``k >= 2``, the share of ``(a, k)`` where block is slower and
    its smallest speedup."""
    s, same = res.speedup("dsi")[i], res.same_k("dsi")[i]
    return (f"| {_f(res.c[i])} | {_ranges(res.a, s > 1 + TIE)} | {_ranges(res.a, s < 1 - TIE)} "
            f"| {s.min():.3f} – {s.max():.3f} | {int((same < 1 - TIE).sum())} / {same.size} | "
            f"{same.min():.3f} |")


def where_rows(res: Results) -> list[str]:
    """Table 3's rows, one per ``c``."""
    return [where_row(res, i) for i in range(len(res.c))]


def _extremes(values: NDArray[np.float64], res: Results) -> str:
    lo = np.unravel_index(np.argmin(values), values.shape)
    hi = np.unravel_index(np.argmax(values), values.shape)
    return (f"from {values.min():.4f} (c = {_f(res.c[lo[0]])}, a = {_f(res.a[lo[1]])}) to "
            f"{values.max():.4f} (c = {_f(res.c[hi[0]])}, a = {_f(res.a[hi[1]])})")


def summary(res: Results) -> list[str]:
    """The grid-wide extremes of the speedups, and how many cells each rule wins."""
    lines = []
    for alg, name in (("si", "SI"), ("dsi", "DSI, fixed windows (exact)"),
                      ("dsi_bound", "DSI, position decisions (optimistic bound for block)")):
        s = res.speedup(alg)
        wins, losses = int((s > 1 + TIE).sum()), int((s < 1 - TIE).sum())
        lines.append(f"* {name}: block over token {_extremes(s, res)}; block faster in {wins}, "
                     f"slower in {losses}, equal (within 1e-9) in {s.size - wins - losses} of "
                     f"{s.size} cells.")
    for alg, name in (("dsi", "fixed windows"), ("dsi_bound", "position decisions")):
        same = res.same_k(alg)
        worst = np.unravel_index(np.argmin(same), same.shape)
        lines.append(f"* DSI at the same `k >= 2`, {name}: block slower than token-level in "
                     f"{int((same < 1 - TIE).sum())} of {same.size} `(c, a, k)`; smallest "
                     f"block / token {same.min():.4f} (c = {_f(res.c[worst[0]])}, "
                     f"a = {_f(res.a[worst[1]])}, k = {worst[2] + 2}).")
    ratio = res.cost["si"]["block"] / res.cost["dsi"]["block"]
    lines.append(f"* DSI (fixed windows) over SI, both with block: {_extremes(ratio, res)}; "
                 f"below 1 in {int((ratio < 1 - TIE).sum())} cells.")
    return lines


def reading(res: Results) -> list[str]:
    """What the numbers say, worded from them."""
    si_lost = int((res.speedup("si") < 1 - TIE).sum())
    dsi = res.speedup("dsi")
    dsi_lost, dsi_won = int((dsi < 1 - TIE).sum()), int((dsi > 1 + TIE).sum())
    si_verdict = ("For SI block never loses to token-level here: its law dominates "
                  "token-level's" if not si_lost else f"For SI block loses in {si_lost} cells "
                  "although its law dominates token-level's")
    won_c = (dsi > 1 + TIE).any(axis=1)
    last_win = _f(res.c[int(np.flatnonzero(won_c).max())]) if won_c.any() else ""
    same = res.same_k("dsi")
    same_lost = int((same < 1 - TIE).sum())
    one = res.best_k["dsi"]["block"] == 1
    tied = np.abs(dsi - 1) <= TIE
    token_one = res.best_k["dsi"]["token"] == 1
    dsi_verdict = textwrap.wrap(
        f"For DSI with fixed windows and each rule at its best `k`, block is slower than "
        f"token-level in {dsi_lost} of {dsi.size} cells and faster in {dsi_won} (table 3). With "
        "`k = 1` fixed windows are position decisions and block is rejection sampling, so block "
        "DSI's best is never above token-level DSI's value at `k = 1`: it can lose at its best "
        f"`k` only where token-level DSI's best `k` exceeds 1 ({int((~token_one).sum())} cells "
        f"here). Block's best `k` is 1 in {int(one.sum())} cells"
        f"{', every tie among them' if bool(np.all(one[tied])) else ''}. At the same "
        f"`k >= 2`, however, block is slower in {same_lost} of {same.size} `(c, a, k)`: there "
        "the frontier task's early decision of a drafted position, which fixed windows give "
        "up, is worth more than block's longer accepted runs."
        + (f" Block wins only with a fast drafter, `c <= {last_win}`; there long windows are "
           "worth waiting for." if won_c.any() else ""), width=92)
    return [f"Reading. {si_verdict}",
            "(`P(L ≥ i)` is never smaller; `theory.block_acceptance`). The mechanism: block's",
            "weight `w` carries the unused ratio `p/q` of an accepted draft over to the next",
            "draft, where token-level rejection starts again from `min(1, p/q)`. With `k = 1`",
            "the two rules are the same, so in a cell where both rules' best `k` is 1 block",
            "gains nothing. At `a` near 1 both rules accept almost everything.",
            "",
            *dsi_verdict]


def render(res: Results) -> str:
    """The page."""
    spec = res.spec
    shown_k = [k for k in SHOWN_K if k <= spec.ndim]
    shown_c = [c for c in SHOWN_C if c in res.c]
    head2 = " | ".join(f"SI c={_f(c)} | DSI c={_f(c)} | bound c={_f(c)} | DSI/SI c={_f(c)} | "
                       "best k" for c in shown_c)
    lines = [
        "# Block vs token verification on the paper's grid",
        "",
        "<!-- generated by benchmarks/block_vs_token.py; tests/test_block_vs_token.py checks it "
        "-->",
        "",
        "Block verification (Sun et al. 2024, `verify=\"block\"`) accepts more drafts per window",
        "than token-level rejection sampling (`verify=\"rejection\"`) from the same drafts. How",
        "much faster does that make SI and DSI? The simulator takes the **law of accepted lengths",
        "per window** ([acceptance-laws.md](acceptance-laws.md)), and the laws below are computed",
        "exactly from toy models.",
        "",
        "## Setting",
        "",
        f"* Grid: the paper's heatmap (`HeatmapSpec(ndim={spec.ndim})`): `c` and `a` in steps of "
        f"1/{spec.ndim}",
        f"  (`c >= 0.01`, `0.01 <= a <= 0.99`), `k = 1 … {spec.ndim}`, `N = {spec.n_tokens}`, "
        f"`SP = {spec.sp_degree}`.",
        "* Pairs: for each `a`, the context-free target `p = (a/2, 1 − a/2)` and drafter",
        "  `q = (1 − a/2, a/2)`: token-level acceptance `Σ min(p, q) = a` exactly.",
        "* Laws, exact (`Fraction`s): token-level's is `AcceptanceLaw.iid(a, k)`; block's is",
        "  `P(L ≥ i) = E_q[w_i]` (`dsi_ref.audit.acceptance.block_survival`), the exact engine's",
        "  law (`window_acceptance_law`) where the engine can run, and the closed form",
        "  `Σ_{x ∈ V^i} min_j q(x_1..x_j) p(x_{j+1}..x_i)` of `theory.block_acceptance`.",
        "* Latencies (target forward = 1): SI by `expected_latency(\"si\", acceptance=law)`, equal",
        "  to the token-level engine's exact latency for both rules on context-free pairs. DSI by",
        "  the event model with the law: token-level with position decisions (the default),",
        "  block with **window decisions** (`decisions=\"window\"`), both equal to the",
        "  token-level `dsi(...)`'s exact latency on context-free pairs",
        "  (`verify=\"rejection\"` and `verify=\"block\"`, tests/test_acceptance_from_models.py).",
        "  Each algorithm and rule takes its best `k` per cell.",
        "",
        "**Fixed-window block DSI can be slower than token-level DSI.** Token-level DSI with",
        "block verification and fixed windows (`dsi(..., verify=\"block\")`,",
        "[dsi-semantics.md](dsi-semantics.md#block-decisions)) decides a window only when it is",
        "complete and its task has supplied `p` at all of it; a frontier task that reaches a",
        "drafted position of an incomplete window decides nothing. Token-level rules commit that",
        "draft at once. Block accepts more per window but commits later: with `N = 5`, `k = 2`,",
        "`SP = 2`, `c = 1/3` and the pair `p = (1/2, 1/2)`, `q = (3/4, 1/4)`, block DSI takes",
        "2893/768 ≈ 3.767 target forwards against 871/256 ≈ 3.402 for rejection DSI (and at",
        "`c = 1` it takes 1735/256 ≈ 6.777 > `N = 5`: slower than non-SI, which DSI with a",
        "token-level rule never is). The **DSI** columns below are these exact predictions; the",
        "**bound** columns decide block's drafts per position (the event model's default), an",
        "optimistic bound that no fixed-window committer reaches.",
        "",
        "## Accepted drafts per window",
        "",
        "`E[L]`, token-level / block, for windows of `k` drafts:",
        "",
        "| a | " + " | ".join(f"k = {k}" for k in shown_k) + " |",
        "|---|" + "---|" * len(shown_k),
        *acceptance_rows(res),
        "",
        "## Latency: block over token, DSI over SI",
        "",
        "Per `a` and drafter cost `c`: SI's and DSI's speedup of block over token-level (best `k`",
        "each; `> 1` means block is faster; DSI with fixed windows, then the optimistic bound),",
        "DSI's speedup over SI with block (fixed windows), and the best `k` as SI token/SI",
        "block/DSI token/DSI block.",
        "",
        f"| a | {head2} |",
        "|---|" + "---|---|---|---|---|" * len(shown_c),
        *latency_rows(res, shown_c),
        "",
        "## Where fixed-window block DSI wins",
        "",
        "Per drafter cost `c`: the `a` at which block DSI (fixed windows, best `k`) is faster",
        "than token-level DSI (best `k`), those at which it is slower, and the range of block's",
        "speedup over the row (ties within 1e-9 are in neither column); then, comparing the two",
        "rules at the same lookahead `k = 2 … 20`, in how many `(a, k)` token-level is faster",
        "and block's smallest speedup.",
        "",
        "| c | block faster at a = | token faster at a = | block / token | same k ≥ 2: token "
        "faster in | same k ≥ 2: smallest block / token |",
        "|---|---|---|---|---|---|",
        *where_rows(res),
        "",
        "Over the whole grid:",
        "",
        *summary(res),
        "",
        "![Speedup of block over token-level verification, SI and DSI (fixed windows and the "
        "optimistic bound), and DSI over SI with block](figures/block_vs_token.png)",
        "",
        *reading(res),
        "",
    ]
    return "\n".join(lines)


def plot(res: Results, path: Path) -> Path:
    """Four panels over ``(c, a)``: SI block/token, DSI block/token with fixed windows and with
    position decisions (the bound), DSI/SI with block (fixed windows)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = np.array([float(x) for x in res.c])
    a = np.array([float(x) for x in res.a])
    panels = [("SI: block over token", res.speedup("si")),
              ("DSI, fixed windows: block over token", res.speedup("dsi")),
              ("DSI, position decisions (bound):\nblock over token", res.speedup("dsi_bound")),
              ("DSI over SI, both with block\n(fixed windows)",
               res.cost["si"]["block"] / res.cost["dsi"]["block"])]
    fig, axes = plt.subplots(1, 4, figsize=(20, 4.8), constrained_layout=True)
    for ax, (title, values) in zip(axes, panels, strict=True):
        lost = values < 1 - TIE
        mesh = ax.pcolormesh(c, a, np.ma.masked_where(lost, values).T, cmap="viridis",
                             vmin=1.0, shading="nearest")
        ax.pcolormesh(c, a, np.ma.masked_where(~lost, values).T,
                      cmap=matplotlib.colors.ListedColormap([PINK]), shading="nearest")
        ax.set_title(f"{title}\nmin {values.min():.3f}, max {values.max():.3f}", fontsize=10)
        ax.set_xlabel("drafter latency c (target forward = 1)")
        ax.set_ylabel("token-level acceptance rate a")
        fig.colorbar(mesh, ax=ax, label="speedup (x); pink: < 1")
    spec = res.spec
    fig.suptitle(f"Block vs token-level verification: N = {spec.n_tokens}, "
                 f"SP = {spec.sp_degree}, k = 1..{spec.ndim} (best per cell), "
                 f"pairs p = (a/2, 1 - a/2), q = (1 - a/2, a/2)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ndim", type=int, default=20)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="write the page and the figure")
    group.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    args = parser.parse_args(argv)
    res = compute(HeatmapSpec(ndim=args.ndim, model="event"))
    page = render(res)
    print(f"computed in {res.seconds:.1f} s", file=sys.stderr)
    if args.check:
        if PAGE.read_text() != page:
            print(f"{PAGE} is stale: run benchmarks/block_vs_token.py --write", file=sys.stderr)
            return 1
        return 0
    if args.write:
        PAGE.write_text(page)
        plot(res, FIGURE)
        print(f"wrote {PAGE} and {FIGURE}", file=sys.stderr)
    else:
        print(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
