"""``dsi-ref audit-engine MODULE:CALLABLE``: the statistical audit of any engine.

``CALLABLE`` (no argument) returns a `dsi_ref.backends.harness.EngineUnderTest`: the engine's
sampler ``seed -> tokens`` and the reference model it must sample from. The command states the
audit's power before sampling, shows a progress bar, prints the report, writes it as JSON with
``--json`` (the path is checked before the work starts) and exits with status 0 (lossless at the
stated power), 1 (lossy) or 2 (a bad entry point or argument: one line ``dsi-ref: error: ...``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from ..audit.statistical import POLICY_ALPHA
from .args import check_output

__all__ = ["install"]


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an int >= 0, got {text!r}")
    return value


def _audit_engine(args: argparse.Namespace) -> int:
    if args.json is not None:
        check_output(args.json)
    from ..backends.harness import AuditPlan, audit_engine, load_engine, report_json

    engine = load_engine(args.entry)

    def announce(plan: AuditPlan) -> None:
        print(f"auditing {plan}", flush=True)

    start = time.perf_counter()
    report = audit_engine(engine, epsilon=args.epsilon, alpha=args.alpha, power=args.power,
                          seed=args.seed, progress=not args.no_progress, on_plan=announce)
    seconds = time.perf_counter() - start
    print(report)
    print(f"{engine.name}: {report.verdict.upper()} in {seconds:.1f} s "
          f"({report.samples_per_second:.1f} samples/s)")
    if args.json is not None:
        with open(args.json, "w") as fh:
            json.dump(report_json(report, engine=engine.name, entry=args.entry,
                                  epsilon=args.epsilon, seconds=seconds), fh, indent=2)
    sys.stdout.flush()
    return 0 if report.verdict == "lossless" else 1


def install(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``dsi-ref audit-engine`` to the sub-command parsers."""
    p = sub.add_parser(
        "audit-engine", help="statistical audit of any engine (MODULE:CALLABLE) at stated power",
        description="Import MODULE, call CALLABLE() for an EngineUnderTest (a sampler seed -> "
        "tokens and the reference model it must sample from; see docs/engine-harness.md), draw "
        "the number of samples that gives POWER against every law at TV >= EPSILON from the "
        "reference, and test at false-alarm rate ALPHA. Exit status 0: lossless at the stated "
        "power; 1: lossy; 2: a bad entry point or argument.")
    p.add_argument("entry", metavar="MODULE:CALLABLE",
                   help="e.g. my_engine:make_engine (the current folder is importable)")
    p.add_argument("--epsilon", type=_probability, default=0.2, metavar="E",
                   help="the TV distance the power is stated against (default 0.2)")
    p.add_argument("--alpha", type=_probability, default=POLICY_ALPHA, metavar="A",
                   help=f"false-alarm rate (default {POLICY_ALPHA:g})")
    p.add_argument("--power", type=_probability, default=0.99, metavar="P",
                   help="power required against TV >= E (default 0.99)")
    p.add_argument("--seed", type=_seed, default=0, metavar="S",
                   help="root of the per-sample seeds (default 0)")
    p.add_argument("--json", metavar="PATH", help="also write the verdict as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_audit_engine)
