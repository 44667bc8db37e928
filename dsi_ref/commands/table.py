"""``dsi-ref table``: DSI/SI and DSI/non-SI speedups for measured pairs (the paper's table)."""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..sim.paper_table import PHI3_MBPP, TableResult, compute_row, read_rows
from ..sim.params import required_servers
from .args import Subparsers, check_output, check_plotting, positive_int

__all__ = ["install", "render_result"]


def _range(text: str) -> list[int]:
    """``"1-10"`` or ``"1,2,5"`` → a non-empty list of ints >= 1 (a usage error otherwise:
    ``"5-1"`` is an empty range, not an empty run)."""
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-"))
            values = list(range(lo, hi + 1))
        else:
            values = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a range like 1-10 or a list like 1,2,5, "
                                         f"got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected ints >= 1 (a range lo-hi with lo <= hi, or "
                                         f"a list), got {text!r}")
    return values


def render_result(result: TableResult) -> str:
    """A text table: per lookahead, latencies (ms) and DSI speedups; then best vs best."""
    row = result.row
    sp_degree = row.sp_degree if row.sp_degree in result.sp_degrees else result.sp_degrees[-1]
    c = row.units["c"]
    lines = [f"{row.name}: a = {float(row.acceptance_rate):.3f}, c = {float(c):.4f}, "
             f"N = {result.n_tokens}, non-SI {result.nonsi_ms / 1000:.2f} s",
             f"  {'k':>3} {'SI s':>8} {'DSI paper s':>11} {'DSI event s':>11} "
             f"{'paper/SI':>8} {'event/SI':>8} {'event/nonSI':>11}  "
             f"(event model: SP = {sp_degree})"]
    for lookahead in result.lookaheads:
        need = required_servers(c, lookahead)
        flag = f"  paper needs SP >= {need}" if need > sp_degree else ""
        mark = "  <- reported lookahead" if lookahead == row.lookahead else ""
        pair = (lookahead, sp_degree)
        lines.append(f"  {lookahead:>3} {result.si_ms[lookahead] / 1000:>8.2f} "
                     f"{result.paper_dsi_ms[lookahead] / 1000:>11.2f} "
                     f"{result.dsi_ms[pair] / 1000:>11.2f} "
                     f"{result.paper_speedup('si', lookahead):>8.3f} "
                     f"{result.speedup('si', *pair):>8.3f} "
                     f"{result.speedup('nonsi', *pair):>11.3f}{flag}{mark}")
    lines.append("  best lookahead each (event model): " + "; ".join(
        f"SP={s}: DSI/SI {b['dsi_vs_si']:.3f} (SI k={b['si_lookahead']}, "
        f"DSI k={b['dsi_lookahead']}), "
        f"DSI/non-SI {b['dsi_vs_nonsi']:.3f}"
        for s in result.sp_degrees for b in [result.best(s)]))
    return "\n".join(lines)


def _run(args: argparse.Namespace) -> int:
    out = check_output(args.out, directory=True)
    if not args.no_plot:
        check_plotting()
    rows = [PHI3_MBPP] + (read_rows(Path(args.rows)) if args.rows else [])
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for row in rows:
        def bar(items: Iterator[Any], total: int, name: str = row.name) -> Iterator[Any]:
            if args.no_progress:
                return items
            return iter(tqdm(items, total=total, desc=name[:30], unit="config", leave=False,
                             file=sys.stderr))

        result = compute_row(row, n_tokens=args.n_tokens, lookaheads=args.lookaheads,
                             sp_degrees=args.sp_degrees, jobs=args.jobs, progress=bar)
        results.append(result)
        print(render_result(result), flush=True)
    with (out / "table.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(TableResult.CSV_HEADER)
        for result in results:
            writer.writerows(result.csv_rows())
    (out / "table.txt").write_text("\n\n".join(render_result(r) for r in results) + "\n")
    print(f"wrote {out / 'table.csv'}, {out / 'table.txt'}")
    if not args.no_plot:
        from .plots import plot_table

        print(f"wrote {plot_table(results, out / 'table.png')}")
    return 0


def install(sub: Subparsers) -> None:
    """Add ``dsi-ref table``."""
    p = sub.add_parser(
        "table", help="DSI/SI and DSI/non-SI speedups for measured (target, drafter) pairs",
        description="Exact expected latencies (ms) of non-SI, SI and DSI (paper model and event "
        "model) from TTFT/TPOT latencies and acceptance rates, per lookahead and SP degree, "
        "for the public Phi-3-medium/Phi-3-mini/MBPP row of the paper and any rows given with "
        "--rows. Writes table.csv, table.txt and table.png (speedup vs lookahead per SP).")
    p.add_argument("--rows", metavar="FILE", help="extra rows: a .toml file of [[row]] tables "
                   "or a .csv file, with the fields name, target_ttft_ms, target_tpot_ms, "
                   "drafter_ttft_ms, drafter_tpot_ms, acceptance_rate (sp_degree, lookahead "
                   "optional)")
    p.add_argument("--n-tokens", type=positive_int, default=200, help="N (default 200)")
    p.add_argument("--lookaheads", type=_range, default=list(range(1, 11)),
                   help="lookaheads, e.g. 1-10 (default) or 1,5,10")
    p.add_argument("--sp-degrees", type=_range, default=[2, 3, 4, 5, 6, 7, 8],
                   help="SP degrees of the event model, e.g. 2-8 (default)")
    p.add_argument("--jobs", type=positive_int, default=1, help="processes for the event model")
    p.add_argument("--out", default="table-out", help="output folder (default table-out)")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG (no matplotlib needed)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=_run)
