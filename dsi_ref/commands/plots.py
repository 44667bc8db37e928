"""Figures of the simulator: heatmap panels, the SP sweep, the table's speedup curves.

matplotlib is the ``[plot]`` extra: it is imported lazily, inside each function, with the
non-interactive Agg backend. Every function writes one PNG and returns its path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..base.errors import InvalidParameterError

if TYPE_CHECKING:
    from ..sim.grid import Heatmap
    from ..sim.paper_table import TableResult

__all__ = ["PINK", "plot_heatmap", "plot_model_comparison", "plot_sp_sweep", "plot_table"]

#: the paper's colour for speedups below 1 (a loss)
PINK = (248 / 256, 24 / 256, 148 / 256, 1.0)


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:  # pragma: no cover - depends on the environment
        raise InvalidParameterError("plots need matplotlib: pip install 'dsi-ref[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_heatmap(heatmap: Heatmap, path: Path, *, vmax: float = 3.0) -> Path:
    """The four panels (SI/non-SI, DSI/SI, DSI/non-SI, DSI/baseline) over ``(c, a)``.

    Speedups below 1 (beyond float rounding, `dsi_ref.sim.grid.losing`) are pink; the colour
    scale runs from 1 to ``vmax`` (values above are clipped to the top colour); cells with
    no allowed lookahead are left white.
    """
    from ..sim.grid import PANELS, losing

    plt = _pyplot()
    cmap = plt.get_cmap("viridis").copy()
    c = np.array([float(x) for x in heatmap.c])
    a = np.array([float(x) for x in heatmap.a])
    fig, axes = plt.subplots(2, 2, figsize=(11, 9), constrained_layout=True)
    spec = heatmap.spec
    mesh = None
    for ax, (name, (title, _, _)) in zip(axes.flat, PANELS.items(), strict=True):
        values = heatmap.panel(name)
        shown = np.ma.masked_where(np.isnan(values) | losing(values), values)
        mesh = ax.pcolormesh(c, a, shown.T, cmap=cmap, vmin=1.0, vmax=vmax, shading="nearest")
        lost = np.ma.masked_where(~losing(np.nan_to_num(values, nan=2.0)), values)
        ax.pcolormesh(c, a, lost.T, cmap=plt.matplotlib.colors.ListedColormap([PINK]),
                      shading="nearest")
        n_lost = int(losing(np.nan_to_num(values, nan=2.0)).sum())
        ax.set_title(f"{title}\nmin {np.nanmin(values):.2f}, max {np.nanmax(values):.2f}, "
                     f"{n_lost} pink cells", fontsize=10)
        ax.set_xlabel("drafter latency c (target forward = 1)")
        ax.set_ylabel("acceptance rate a")
    fig.colorbar(mesh, ax=axes, shrink=0.6, label="speedup (x); pink: < 1")
    fig.suptitle(f"{spec.model} model, SP = {spec.sp_degree}, N = {spec.n_tokens}, "
                 f"k = 1..{spec.ndim}, SI lookahead set: {spec.si_lookahead_set}")
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_model_comparison(paper: Heatmap, event: Heatmap, path: Path) -> Path:
    """Where the paper model's shortcut misstates DSI: per ``(c, a)`` cell, the ratio
    ``paper-model best DSI latency / event-model best DSI latency`` (> 1: the paper model
    understates DSI, < 1: it overstates it), and the event model's DSI/baseline speedup."""
    from ..sim.grid import losing

    plt = _pyplot()
    c = np.array([float(x) for x in event.c])
    a = np.array([float(x) for x in event.a])
    ratio = paper.best["dsi"] / event.best["dsi"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8), constrained_layout=True)
    bound = max(float(np.log(1.05)), float(np.nanmax(np.abs(np.log(ratio)))))
    mesh = left.pcolormesh(c, a, np.log(ratio).T, cmap="coolwarm", vmin=-bound, vmax=bound,
                           shading="nearest")
    ticks = np.linspace(-bound, bound, 5)
    bar = fig.colorbar(mesh, ax=left, ticks=ticks)
    bar.ax.set_yticklabels([f"{np.exp(t):.2f}" for t in ticks])
    left.set_title(f"paper-model DSI / event-model DSI latency (SP = {event.spec.sp_degree})\n"
                   f"red: the paper model understates DSI; blue: it overstates it; "
                   f"range {np.nanmin(ratio):.2f}..{np.nanmax(ratio):.2f}", fontsize=9)
    speedup = event.panel("dsi_vs_baseline")
    shown = np.ma.masked_where(losing(np.nan_to_num(speedup, nan=2.0)), speedup)
    mesh2 = right.pcolormesh(c, a, shown.T, cmap="viridis", vmin=1, vmax=3, shading="nearest")
    lost = np.ma.masked_where(~losing(np.nan_to_num(speedup, nan=2.0)), speedup)
    right.pcolormesh(c, a, lost.T, cmap=plt.matplotlib.colors.ListedColormap([PINK]),
                     shading="nearest")
    fig.colorbar(mesh2, ax=right, label="speedup (x); pink: < 1")
    right.set_title(f"event model: DSI over the baseline (SP = {event.spec.sp_degree})",
                    fontsize=9)
    for ax in (left, right):
        ax.set_xlabel("drafter latency c")
        ax.set_ylabel("acceptance rate a")
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_sp_sweep(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Event model vs paper model over SP: per SP, the share of cells where DSI is slower than
    SI / non-SI and the median DSI/SI speedup; ``rows`` are `sp_sweep_rows` dicts."""
    plt = _pyplot()
    sp_degrees = [r["sp_degree"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for key, label in (("dsi_slower_than_si", "DSI slower than SI"),
                       ("dsi_slower_than_nonsi", "DSI slower than non-SI"),
                       ("dsi_slower_than_baseline", "DSI slower than the baseline"),
                       ("dsi_slower_than_si_same_k",
                        "DSI slower than SI at the same k (share of (c, a, k))")):
        left.plot(sp_degrees, [r[key] for r in rows], marker="o", label=label)
    left.set_xlabel("SP (target servers)")
    left.set_ylabel("share of (c, a) cells, best k each")
    left.set_title("event model: where DSI loses")
    left.legend(fontsize=8)
    for key, label in (("median_dsi_vs_si", "median DSI/SI"),
                       ("max_dsi_vs_baseline", "max DSI/baseline")):
        right.plot(sp_degrees, [r[key] for r in rows], marker="o", label=f"event model, {label}")
        if f"paper_{key}" in rows[0]:
            right.axhline(rows[0][f"paper_{key}"], linestyle="--",
                          color=right.lines[-1].get_color(), label=f"paper model, {label}")
    right.axhline(1.0, color=PINK, linewidth=1)
    right.set_xlabel("SP (target servers)")
    right.set_ylabel("speedup (x)")
    right.set_title("event model vs the paper model's shortcut")
    right.legend(fontsize=8)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_table(results: Sequence[TableResult], path: Path) -> Path:
    """Per table row: DSI/SI speedup against the lookahead, one curve per SP degree."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(results), figsize=(5.5 * len(results), 4.2),
                             squeeze=False, constrained_layout=True)
    for ax, result in zip(axes.flat, results, strict=True):
        for sp_degree in result.sp_degrees:
            ax.plot(result.lookaheads, [result.speedup("si", lookahead, sp_degree)
                                        for lookahead in result.lookaheads],
                    marker=".", label=f"event model, SP = {sp_degree}")
        ax.plot(result.lookaheads, [result.paper_speedup("si", lookahead)
                                    for lookahead in result.lookaheads],
                "k--", label="paper model (no waiting assumed)")
        ax.axhline(1.0, color=PINK, linewidth=1)
        ax.set_xlabel("lookahead k")
        ax.set_ylabel("DSI speedup over SI (x), same k")
        ax.set_title(result.row.name, fontsize=10)
        ax.legend(fontsize=7)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
