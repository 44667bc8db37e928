#!/usr/bin/env python3
"""Benchmark of the event model's heatmap sweep (issue 14, item 7): prints JSON.

    .venv/bin/python benchmarks/bench_event_sweep.py [--ndim 20] [--n-tokens 1000] [--jobs 2]
        [--reference-columns 3]

Times `compute_heatmap` on ``HeatmapSpec(ndim, n_tokens, sp_degree, model="event")``: every
``(c, a, k)`` of the paper grid with the event model's DSI (and SI, vectorised), one exact
dynamic programme per ``(c, k)`` for all ``a`` at once, in ``--jobs`` processes. Target for
``ndim = 20``, ``N = 1000``, ``SP = 7``: <= 60 s on 2 cores.

``--reference-columns n`` also times ``n`` columns ``(c, k)`` (the slowest of the grid first:
the smallest ``c`` and ``k``) with the reference programme `dsi_event_grid_reference`, and
reports the largest relative difference of the fast path from it on those columns.
"""

from __future__ import annotations

import argparse
import json
import time
from fractions import Fraction

import numpy as np

from dsi_ref.sim.event import dsi_event_grid, dsi_event_grid_reference
from dsi_ref.sim.grid import HeatmapSpec, compute_heatmap, grid_axes
from dsi_ref.sim.params import SimParams


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ndim", type=int, default=20)
    parser.add_argument("--n-tokens", type=int, default=1000)
    parser.add_argument("--sp-degree", type=int, default=7)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--reference-columns", type=int, default=0)
    args = parser.parse_args()
    spec = HeatmapSpec(ndim=args.ndim, n_tokens=args.n_tokens, sp_degree=args.sp_degree,
                       model="event")
    cs, accs, lookaheads = grid_axes(spec)
    start = time.perf_counter()
    heatmap = compute_heatmap(spec, jobs=args.jobs)
    seconds = time.perf_counter() - start
    out: dict[str, object] = {
        "ndim": args.ndim, "n_tokens": args.n_tokens, "sp_degree": args.sp_degree,
        "jobs": args.jobs, "seconds": round(seconds, 3),
        "configurations": len(cs) * len(accs) * len(lookaheads),
        "columns_c_k": len(cs) * len(lookaheads),
        "dsi_finite": int(np.isfinite(heatmap.dsi).sum())}
    if args.reference_columns:
        a = np.array([float(x) for x in accs])
        columns = [(c, k) for c in cs for k in lookaheads][: args.reference_columns]
        worst, fast_s, ref_s = 0.0, 0.0, 0.0
        for c, k in columns:
            p = SimParams("dsi", c, Fraction(1, 2), k, args.n_tokens, "event", args.sp_degree)
            t0 = time.perf_counter()
            fast = dsi_event_grid(p, a)
            t1 = time.perf_counter()
            ref = dsi_event_grid_reference(p, a)
            t2 = time.perf_counter()
            fast_s, ref_s = fast_s + t1 - t0, ref_s + t2 - t1
            worst = max(worst, float(np.max(np.abs(fast / ref - 1))))
        out["reference"] = {"columns": [[str(c), k] for c, k in columns],
                            "fast_seconds": round(fast_s, 3),
                            "reference_seconds": round(ref_s, 3),
                            "max_relative_difference": worst}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
