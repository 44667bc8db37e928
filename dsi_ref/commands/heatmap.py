"""``dsi-ref heatmap``: the paper's Figure 2, exact, under the paper model or the event model."""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, Literal

import numpy as np
from tqdm import tqdm

from ..sim.grid import HeatmapSpec, compute_heatmap, render_summary, summarize, write_outputs
from .args import Subparsers, check_output, check_plotting, positive_int

__all__ = ["install", "sp_sweep_rows"]


def _bar(enabled: bool, desc: str) -> Any:
    def wrap(items: Iterator[Any], total: int) -> Iterator[Any]:
        if not enabled:
            return items
        return iter(tqdm(items, total=total, desc=desc, unit="(c,k)", leave=False,
                         file=sys.stderr))
    return wrap


def sp_sweep_rows(summaries: list[dict[str, Any]],
                  paper: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One row per SP of an event-model sweep: where DSI loses, its median/max speedups, and
    the paper model's values on the same grid for reference."""
    rows = []
    for s in summaries:
        cells = s["cells"]
        panels = s["panels"]
        row = {"sp_degree": s["spec"]["sp_degree"],
               "dsi_slower_than_si": panels["dsi_vs_si"]["cells_below_1"] / cells,
               "dsi_slower_than_nonsi": panels["dsi_vs_nonsi"]["cells_below_1"] / cells,
               "dsi_slower_than_baseline": panels["dsi_vs_baseline"]["cells_below_1"] / cells,
               "dsi_slower_than_si_same_k": s["per_lookahead"]["dsi_slower_than_si_same_k"]
               / s["per_lookahead"]["configurations"],
               "median_dsi_vs_si": panels["dsi_vs_si"]["median"],
               "min_dsi_vs_si": panels["dsi_vs_si"]["min"],
               "max_dsi_vs_baseline": panels["dsi_vs_baseline"]["max"]}
        if paper is not None:
            row["paper_median_dsi_vs_si"] = paper["panels"]["dsi_vs_si"]["median"]
            row["paper_max_dsi_vs_baseline"] = paper["panels"]["dsi_vs_baseline"]["max"]
        rows.append(row)
    return rows


def _run(args: argparse.Namespace) -> int:
    out = check_output(args.out, directory=True)
    if not args.no_plot:
        check_plotting()
    n_tokens = args.n_tokens or (1000 if args.model == "paper" else 200)
    lookahead_set: Literal["quirks", "fair"] = args.si_lookahead_set or (
        "quirks" if args.model == "paper" else "fair")
    summaries = []
    for sp_degree in args.sp_degree:
        spec = HeatmapSpec(ndim=args.ndim, n_tokens=n_tokens, sp_degree=sp_degree,
                           model=args.model, si_lookahead_set=lookahead_set)
        start = time.perf_counter()
        heatmap = compute_heatmap(spec, jobs=args.jobs,
                                  progress=_bar(not args.no_progress, f"SP={sp_degree}"))
        seconds = time.perf_counter() - start
        paths = write_outputs(heatmap, out)
        summary = summarize(heatmap)
        summaries.append(summary)
        text = render_summary(summary) + f"\n  computed in {seconds:.2f} s"
        print(text, flush=True)
        (out / f"heatmap_{spec.label}_summary.txt").write_text(text + "\n")
        if not args.no_plot:
            from .plots import plot_heatmap

            paths["png"] = plot_heatmap(heatmap, out / f"heatmap_{spec.label}.png")
        if args.model == "event":
            paper_map = compute_heatmap(replace(spec, model="paper"))
            ratio = paper_map.best["dsi"] / heatmap.best["dsi"]
            line = (f"  paper-model / event-model DSI latency (best k each): min "
                    f"{np.nanmin(ratio):.3f}, median {np.nanmedian(ratio):.3f}, max "
                    f"{np.nanmax(ratio):.3f} (> 1: the paper model understates DSI); "
                    f"{int(np.isnan(ratio).sum())} cells where the paper model allows no k")
            print(line)
            with (out / f"heatmap_{spec.label}_summary.txt").open("a") as fh:
                fh.write(line + "\n")
            if not args.no_plot:
                from .plots import plot_model_comparison

                paths["vs_paper"] = plot_model_comparison(
                    paper_map, heatmap, out / f"heatmap_{spec.label}_vs_paper.png")
        print("  wrote " + ", ".join(str(p) for p in paths.values()))
    if args.model == "event" and len(args.sp_degree) > 1:
        reference = HeatmapSpec(ndim=args.ndim, n_tokens=n_tokens, sp_degree=7, model="paper",
                                si_lookahead_set=lookahead_set)
        paper = summarize(compute_heatmap(reference))
        rows = sp_sweep_rows(summaries, paper)
        label = f"event_sweep_{lookahead_set}_ndim{args.ndim}_n{n_tokens}"
        with (out / f"heatmap_{label}.csv").open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        (out / f"heatmap_{label}.json").write_text(json.dumps(rows, indent=2) + "\n")
        print("SP sweep (event model; paper model with SP=7 for reference):")
        for r in rows:
            print(f"  SP={r['sp_degree']}: DSI slower than SI in {r['dsi_slower_than_si']:.0%}"
                  f", than non-SI in {r['dsi_slower_than_nonsi']:.0%} of cells; median DSI/SI "
                  f"{r['median_dsi_vs_si']:.3f} (paper {r['paper_median_dsi_vs_si']:.3f}); "
                  f"max DSI/baseline {r['max_dsi_vs_baseline']:.3f}")
        if not args.no_plot:
            from .plots import plot_sp_sweep

            print(f"  wrote {plot_sp_sweep(rows, out / f'heatmap_{label}.png')}")
    return 0


def install(sub: Subparsers) -> None:
    """Add ``dsi-ref heatmap``."""
    p = sub.add_parser(
        "heatmap", help="the paper's heatmap (Figure 2): exact expected latencies, 4 panels",
        description="Exact expected latencies of non-SI, SI and DSI on the paper's grid "
        "(c, a in steps of 1/ndim, k = 1..ndim, best k per cell) and the four speedup panels "
        "SI/non-SI, DSI/SI, DSI/non-SI, DSI/baseline (pink: < 1). Writes CSV, a JSON and text "
        "summary and a PNG per SP degree; with --model event and several SP degrees, also the "
        "SP sweep compared with the paper model.")
    p.add_argument("--model", choices=("paper", "event"), default="paper",
                   help="paper: the official offline simulator (per-segment min, no waiting); "
                   "event: DSI with SP simulated servers (docs/dsi-semantics.md)")
    p.add_argument("--ndim", type=positive_int, default=20,
                   help="grid steps (default 20, the paper's)")
    p.add_argument("--n-tokens", type=positive_int, default=None,
                   help="N (default 1000 for the paper model, 200 for the event model, whose "
                   "exact dynamic programme costs O(N^2) per (c, k))")
    p.add_argument("--sp-degree", type=positive_int, nargs="+", default=[7], metavar="SP",
                   help="target servers (default 7); several values run a sweep")
    p.add_argument("--jobs", type=positive_int, default=1, help="processes for the event model")
    p.add_argument("--out", default="heatmap-out", help="output folder (default heatmap-out)")
    lookahead_set = p.add_mutually_exclusive_group()
    lookahead_set.add_argument(
        "--si-lookahead-set", choices=("quirks", "fair"), default=None,
        help="the policy for SI's set of lookaheads: quirks = restricted by the paper's server "
        "check, as the official run does (default for the paper model); fair = SI at its own "
        "best lookahead (default for the event model)")
    lookahead_set.add_argument("--paper-quirks", dest="si_lookahead_set", action="store_const",
                               const="quirks", help="short for --si-lookahead-set quirks")
    lookahead_set.add_argument("--fair", dest="si_lookahead_set", action="store_const",
                               const="fair", help="short for --si-lookahead-set fair")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG (no matplotlib needed)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=_run)
