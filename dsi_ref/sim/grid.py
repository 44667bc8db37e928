"""The paper's heatmap (Figure 2): exact expected latencies on the ``c × a × k`` grid.

Grid (the official ``ConfigHeatmap``): ``c, a ∈ {0, 1/ndim, …, 1}`` with ``c ≤ 0.01 → 0.01``,
``a`` clipped to ``[0.01, 0.99]``; ``k = 1 … ndim``; ``N = 1000``; ``SP = 7``. Per ``(c, a)`` cell
each algorithm takes its best ``k``. Panels (speedups, ``< 1`` drawn pink): SI/non-SI,
DSI/SI, DSI/non-SI, DSI/baseline with baseline = the faster of (best) SI and non-SI.

Lookahead sets (`HeatmapSpec.si_lookahead_set`, the policy for which ``k`` each algorithm may
take in a cell):

* paper model: DSI only at ``k`` with ``SP >= ceil(1/(k c))`` (the simulator's server check);
* ``"quirks"`` (the official run): SI restricted to the same ``k`` — this flatters DSI at small
  ``c`` where SI's best ``k`` is excluded;
* ``"fair"``: SI at its own best ``k`` over ``1 … ndim``;
* event model: DSI at every ``k`` (its ``SP`` servers are simulated; waiting is modelled).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from ..base.errors import InvalidParameterError
from ..base.validate import check_choice, check_int
from .event import dsi_event_grid
from .paper import dsi_paper_grid, si_grid
from .params import MODELS, Model, SimParams, required_servers

__all__ = ["LOSS_TOLERANCE", "PANELS", "Heatmap", "HeatmapSpec", "compute_heatmap", "grid_axes",
           "losing", "render_summary", "summarize", "write_outputs"]

FloatArray = NDArray[np.float64]
#: panel name -> (title, numerator cost, denominator cost): speedup = numerator / denominator
PANELS: dict[str, tuple[str, str, str]] = {
    "si_vs_nonsi": ("SI speedup over non-SI", "nonsi", "si"),
    "dsi_vs_si": ("DSI speedup over SI", "si", "dsi"),
    "dsi_vs_nonsi": ("DSI speedup over non-SI", "nonsi", "dsi"),
    "dsi_vs_baseline": ("DSI speedup over the baseline (faster of SI and non-SI)",
                        "baseline", "dsi"),
}


@dataclass(frozen=True)
class HeatmapSpec:
    """One heatmap: grid resolution, model and the lookahead rule for SI.

    Args:
        ndim: grid steps (``ndim + 1`` values of ``c`` and of ``a``; ``k = 1 … ndim``).
        n_tokens: ``N``.
        sp_degree: ``SP`` (paper model: the server check; event model: the servers).
        model: ``"paper"`` or ``"event"``.
        si_lookahead_set: the policy for SI's set of lookaheads: ``"quirks"`` (SI restricted
            by the server check, as the official run) or ``"fair"`` (SI at its own best ``k``).
        c_min, a_min, a_max: the official clipping of the grid's ends.
    """

    ndim: int = 20
    n_tokens: int = 1000
    sp_degree: int = 7
    model: Model = "paper"
    si_lookahead_set: Literal["quirks", "fair"] = "quirks"
    c_min: Fraction = Fraction(1, 100)
    a_min: Fraction = Fraction(1, 100)
    a_max: Fraction = Fraction(99, 100)

    def __post_init__(self) -> None:
        for name in ("ndim", "n_tokens", "sp_degree"):
            object.__setattr__(self, name, check_int(name, getattr(self, name)))
        check_choice("si_lookahead_set", self.si_lookahead_set, ("quirks", "fair"))
        check_choice("model", self.model, MODELS)

    @property
    def label(self) -> str:
        """A short file-name-friendly label."""
        return f"{self.model}_sp{self.sp_degree}_{self.si_lookahead_set}_ndim{self.ndim}"


def grid_axes(spec: HeatmapSpec) -> tuple[list[Fraction], list[Fraction], list[int]]:
    """The exact grid values ``c``, ``a`` and ``k`` (official ``get_df_heatmap_params``)."""
    steps = [Fraction(i, spec.ndim) for i in range(spec.ndim + 1)]
    cs = [max(x, spec.c_min) if x > spec.c_min else spec.c_min for x in steps]
    accs = [min(max(x, spec.a_min), spec.a_max) for x in steps]
    return cs, accs, list(range(1, spec.ndim + 1))


@dataclass
class Heatmap:
    """Costs per ``(c, a, k)`` and the per-cell best over ``k``; speedup panels by name.

    ``c``, ``a`` and ``lookaheads`` are the grid's axes; ``best_lookahead`` is, per cell, the
    ``k`` at which each algorithm reaches its ``best`` cost.
    """

    spec: HeatmapSpec
    c: list[Fraction]
    a: list[Fraction]
    lookaheads: list[int]
    si: FloatArray                    # (c, a, k)
    dsi: FloatArray                   # (c, a, k), NaN where the lookahead is not allowed
    si_allowed: NDArray[np.bool_]     # (c, k)
    best: dict[str, FloatArray] = field(default_factory=dict)      # (c, a)
    best_lookahead: dict[str, NDArray[np.int64]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        si = np.where(self.si_allowed[:, None, :], self.si, np.inf)
        dsi = np.where(np.isnan(self.dsi), np.inf, self.dsi)
        n = float(self.spec.n_tokens)
        # a cell where no lookahead is allowed has no value (NaN, drawn blank)
        self.best = {"si": _nan_if_inf(si.min(axis=2)), "dsi": _nan_if_inf(dsi.min(axis=2)),
                     "nonsi": np.full(si.shape[:2], n)}
        self.best["baseline"] = np.fmin(self.best["si"], n)
        axis = np.array(self.lookaheads)
        self.best_lookahead = {"si": axis[si.argmin(axis=2)], "dsi": axis[dsi.argmin(axis=2)]}

    def panel(self, name: str) -> FloatArray:
        """Speedup panel ``name`` of `PANELS`, shape ``(len(c), len(a))``."""
        _, num, den = PANELS[name]
        result: FloatArray = self.best[num] / self.best[den]
        return result

    def write_csv(self, path: Path) -> None:
        """One row per ``(c, a)`` cell: best costs, best lookaheads, the four panels."""
        with path.open("w", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(["c", "a", "nonsi", "si", "si_lookahead", "dsi", "dsi_lookahead",
                          *PANELS])
            for i, ci in enumerate(self.c):
                for j, aj in enumerate(self.a):
                    out.writerow([float(ci), float(aj), self.spec.n_tokens,
                                  repr(float(self.best["si"][i, j])),
                                  self.best_lookahead["si"][i, j],
                                  repr(float(self.best["dsi"][i, j])),
                                  self.best_lookahead["dsi"][i, j],
                                  *(repr(float(self.panel(p)[i, j])) for p in PANELS)])


def _nan_if_inf(x: FloatArray) -> FloatArray:
    return np.where(np.isinf(x), np.nan, x)


def losing(values: FloatArray) -> NDArray[np.bool_]:
    """Cells where a speedup is below 1 beyond float rounding (relative 1e-9): exact ties,
    such as DSI = non-SI = N at tiny ``a``, do not count as losses."""
    return np.asarray(values < 1 - LOSS_TOLERANCE)


#: relative tolerance under which a speedup below 1 is float rounding of an exact tie
LOSS_TOLERANCE = 1e-9


def _event_column(args: tuple[HeatmapSpec, Fraction, int, list[float]]) -> FloatArray:
    spec, c, lookahead, a_values = args
    p = SimParams("dsi", c, Fraction(1, 2), lookahead, spec.n_tokens, "event", spec.sp_degree)
    return dsi_event_grid(p, np.array(a_values))


def compute_heatmap(spec: HeatmapSpec, *, jobs: int = 1,
                    progress: Callable[[Iterator[Any], int], Iterator[Any]] | None = None
                    ) -> Heatmap:
    """Exact expected latencies on the grid of ``spec``.

    The paper model is vectorised (the full ``ndim = 20`` grid takes about a second); the event
    model solves one dynamic programme per ``(c, k)`` for all ``a`` at once, in ``jobs``
    processes. ``progress(iterator, total)`` wraps the event model's loop (a progress bar).
    """
    if not isinstance(spec, HeatmapSpec):
        raise InvalidParameterError(f"spec must be a HeatmapSpec, got {spec!r}")
    jobs = check_int("jobs", jobs)
    cs, accs, lookaheads = grid_axes(spec)
    cf, af, kf = (np.array([float(x) for x in v]) for v in (cs, accs, lookaheads))
    c_grid, a_grid, k_grid = np.meshgrid(cf, af, kf, indexing="ij")
    si = si_grid(c_grid, a_grid, k_grid.astype(np.int64), spec.n_tokens)
    allowed = np.array([[required_servers(c, lookahead) <= spec.sp_degree
                         for lookahead in lookaheads] for c in cs])
    if spec.model == "paper":
        dsi = np.where(allowed[:, None, :], dsi_paper_grid(cf, af, kf.astype(np.int64),
                                                           spec.n_tokens), np.nan)
    else:
        dsi = np.empty(si.shape)
        tasks = [(spec, c, lookahead, [float(x) for x in accs])
                 for c in cs for lookahead in lookaheads]
        with ProcessPoolExecutor(jobs) if jobs > 1 else _Serial() as pool:
            results = pool.map(_event_column, tasks, chunksize=1)
            if progress is not None:
                results = progress(iter(results), len(tasks))
            for (i, j), column in zip(np.ndindex(len(cs), len(lookaheads)), results, strict=True):
                dsi[i, :, j] = column
    si_allowed = allowed if spec.si_lookahead_set == "quirks" else np.ones_like(allowed)
    return Heatmap(spec, cs, accs, lookaheads, si, dsi, si_allowed)


class _Serial:
    """A stand-in for a process pool with one worker (no pickling, same order)."""

    def __enter__(self) -> _Serial:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def map(self, fn: Callable[[Any], Any], items: list[Any], chunksize: int = 1) -> Iterator[Any]:
        return map(fn, items)


def summarize(heatmap: Heatmap) -> dict[str, Any]:
    """Min/median/max per panel, the cells where DSI loses, the largest DSI/baseline speedup."""
    out: dict[str, Any] = {"spec": {name: (str(v) if isinstance(v, Fraction) else v)
                                    for name, v in asdict(heatmap.spec).items()},
                           "cells": len(heatmap.c) * len(heatmap.a), "panels": {}}
    for name, (title, _, _) in PANELS.items():
        values = heatmap.panel(name)
        lost = np.argwhere(losing(values))
        out["panels"][name] = {
            "title": title, "min": float(np.nanmin(values)),
            "median": float(np.nanmedian(values)), "max": float(np.nanmax(values)),
            "cells_below_1": len(lost), "cells_without_value": int(np.isnan(values).sum()),
            "below_1": [[float(heatmap.c[i]), float(heatmap.a[j]), float(values[i, j])]
                        for i, j in lost][:50]}
    # the same comparison configuration by configuration (each (c, a, k), DSI allowed)
    allowed = ~np.isnan(heatmap.dsi)
    per_k = heatmap.si[allowed] / heatmap.dsi[allowed]
    out["per_lookahead"] = {
        "configurations": int(allowed.sum()),
        "dsi_slower_than_si_same_k": int(losing(per_k).sum()),
        "dsi_slower_than_nonsi": int(losing(heatmap.spec.n_tokens / heatmap.dsi[allowed]).sum()),
        "min_dsi_vs_si_same_k": float(per_k.min())}
    best = heatmap.panel("dsi_vs_baseline")
    i, j = np.unravel_index(int(np.nanargmax(best)), best.shape)
    out["largest_dsi_vs_baseline"] = {"speedup": float(best[i, j]), "c": float(heatmap.c[i]),
                                      "a": float(heatmap.a[j]),
                                      "dsi_lookahead": int(heatmap.best_lookahead["dsi"][i, j])}
    return out


def render_summary(summary: dict[str, Any]) -> str:
    """The summary as a few lines of text."""
    spec = summary["spec"]
    lines = [f"heatmap: model={spec['model']} SP={spec['sp_degree']} N={spec['n_tokens']} "
             f"ndim={spec['ndim']} SI lookahead set={spec['si_lookahead_set']} "
             f"({summary['cells']} cells)"]
    for name, p in summary["panels"].items():
        lines.append(f"  {name:16s} min {p['min']:.3f}  median {p['median']:.3f}  "
                     f"max {p['max']:.3f}  cells < 1: {p['cells_below_1']}")
    per_k = summary["per_lookahead"]
    lines.append(f"  per (c, a, k): DSI slower than SI at the same k in "
                 f"{per_k['dsi_slower_than_si_same_k']} of {per_k['configurations']} "
                 f"configurations (min DSI/SI {per_k['min_dsi_vs_si_same_k']:.3f}), slower than "
                 f"non-SI in {per_k['dsi_slower_than_nonsi']}")
    big = summary["largest_dsi_vs_baseline"]
    lines.append(f"  largest DSI/baseline speedup {big['speedup']:.3f} at c={big['c']:.2f}, "
                 f"a={big['a']:.2f} (DSI k={big['dsi_lookahead']})")
    return "\n".join(lines)


def write_outputs(heatmap: Heatmap, out_dir: Path) -> dict[str, Path]:
    """CSV and JSON summary under ``out_dir`` (the PNG is `dsi_ref.commands.plots`' job)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    label = heatmap.spec.label
    paths = {"csv": out_dir / f"heatmap_{label}.csv",
             "summary": out_dir / f"heatmap_{label}_summary.json"}
    heatmap.write_csv(paths["csv"])
    summary = summarize(heatmap)
    paths["summary"].write_text(json.dumps(summary, indent=2) + "\n")
    return paths

