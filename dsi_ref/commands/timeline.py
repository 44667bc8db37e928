"""``dsi-ref timeline``: Gantt charts of non-SI, SI and DSI on the same model and seed."""

from __future__ import annotations

import argparse
from fractions import Fraction
from pathlib import Path

from ..audit.suite import default_suite
from ..base.latency import Latency
from .args import (
    FIGURE_SUFFIXES,
    Subparsers,
    bounded_int,
    check_figure,
    check_plotting,
    nonnegative_int,
    positive_int,
)
from .gantt import compare_runs, plot_timelines, timeline_text

__all__ = ["MAX_TOKENS", "install"]

#: The largest ``--tokens``: three runs of 1000 tokens take about a second, DSI's time grows
#: faster than linearly (100,000 tokens ran for minutes, silently), and a chart of more tokens
#: is unreadable.
MAX_TOKENS = 1000


def _fraction(text: str) -> Fraction:
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"expected a number such as 1/10 or 0.5, got {text!r}"
                                         ) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a cost must be > 0, got {text}")
    return value


def _run(args: argparse.Namespace) -> int:
    if not args.no_plot:
        check_figure(args.out)
        check_plotting()
    pairs = {p.name: p for p in default_suite()}
    pair = pairs[args.model]
    latency = Latency(drafter=args.drafter_cost, target=args.target_cost,
                      target_first=args.target_first)
    runs = compare_runs(pair.target, pair.drafter, pair.prompt, args.tokens, args.seed,
                        lookahead=args.lookahead, sp_degree=args.sp_degree, latency=latency,
                        verify=args.verify, queue=args.queue)
    print(f"model {pair.name!r} (prompt {pair.prompt}), N={args.tokens}, seed {args.seed}, "
          f"lookahead {args.lookahead}, sp_degree {args.sp_degree}, drafter cost "
          f"{args.drafter_cost}, verify {args.verify}, queue {args.queue}")
    for name, run in runs.items():
        print(timeline_text(run, name) if args.text else
              f"{name}: tokens {run.tokens}, time {run.time} ({float(run.time):.3g})")
    if not args.no_plot:
        title = (f"{pair.name}, seed {args.seed}, k={args.lookahead}, SP={args.sp_degree}, "
                 f"c={args.drafter_cost}, {args.verify}")
        print(f"wrote {plot_timelines(runs, Path(args.out), title=title)}")
    return 0


def install(sub: Subparsers) -> None:
    """Add ``dsi-ref timeline``."""
    names = [p.name for p in default_suite()]
    p = sub.add_parser(
        "timeline", help="Gantt chart of non-SI, SI and DSI runs on the same model and seed",
        description="Run non-SI, SI and DSI on one toy model of the default suite with the same "
        "Sampler seed and draw their traces as a Gantt chart PNG: the drafter and each target "
        "server on its own row; drafts, verified forwards, preempted forwards and waiting "
        "spans in distinct colours; commits marked with the committed token. Needs matplotlib "
        "(the [plot] extra) unless --no-plot.")
    p.add_argument("--model", choices=names, default="bigram",
                   help="model pair of the default suite (default bigram)")
    p.add_argument("--tokens", type=bounded_int(1, MAX_TOKENS, " (the limit of a timeline)"),
                   default=8, help=f"max_new_tokens (default 8, at most {MAX_TOKENS})")
    p.add_argument("--seed", type=nonnegative_int, default=0,
                   help="Sampler seed shared by the three runs")
    p.add_argument("--lookahead", type=positive_int, default=2,
                   help="drafts per verification (k)")
    p.add_argument("--sp-degree", type=positive_int, default=3,
                   help="DSI target servers (default 3)")
    p.add_argument("--drafter-cost", type=_fraction, default=Fraction(1, 4),
                   help="drafter forward cost c in target forwards (default 1/4)")
    p.add_argument("--target-cost", type=_fraction, default=Fraction(1),
                   help="target forward cost, TPOT (default 1)")
    p.add_argument("--target-first", type=_fraction, default=None,
                   help="target's first forward, TTFT (default: same as --target-cost)")
    p.add_argument("--verify", choices=("rejection", "exact_match", "greedy"),
                   default="rejection", help="verification rule (default rejection)")
    p.add_argument("--queue", choices=("fifo", "lifo", "any"), default="fifo",
                   help="DSI queue policy (default fifo)")
    p.add_argument("--out", default="timeline.png",
                   help=f"figure path, {' '.join(FIGURE_SUFFIXES)} (default timeline.png)")
    p.add_argument("--text", action="store_true", help="also print every span as text")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG (no matplotlib needed)")
    p.set_defaults(func=_run)
