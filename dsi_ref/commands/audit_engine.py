"""``dsi-ref audit-engine MODULE:CALLABLE``: the statistical audit of any engine.

``dsi-ref audit-engine --vllm [...]`` audits a vLLM configuration instead (speculative method,
drafter, draft length, sampling settings) on the tiny checkpoints of
`dsi_ref.backends.vllm.models`, or on a local checkpoint folder (``--model DIR``, ``--draft
DIR``), against the exact law of its first tokens (`dsi_ref.backends.vllm.user`).

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
from typing import Any

from ..audit.statistical import POLICY_ALPHA
from .args import Subparsers, check_output, nonnegative_int, positive_int

__all__ = ["install"]


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}")
    return value


def _vllm_engine(args: argparse.Namespace) -> tuple[Any, Any]:
    from ..backends.vllm.sampling import Sampling
    from ..backends.vllm.user import vllm_engine

    sampling = Sampling(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                        min_p=args.min_p, repetition_penalty=args.repetition_penalty,
                        presence_penalty=args.presence_penalty,
                        frequency_penalty=args.frequency_penalty)
    method = None if args.method == "none" else args.method
    kwargs: dict[str, Any] = {}
    if args.prompt is not None:
        kwargs["prompt"] = args.prompt
    if args.tokens is not None:
        kwargs["max_new_tokens"] = args.tokens
    return vllm_engine(model=args.model, drafter=args.draft, method=method, k=args.k,
                       draft_sample_method=args.draft_sample_method, expand=args.expand,
                       sampling=sampling, **kwargs)


def _audit_engine(args: argparse.Namespace) -> int:
    if args.json is not None:
        check_output(args.json)
    from ..base.errors import InvalidParameterError

    if (args.entry is None) == (not args.vllm):
        raise InvalidParameterError("give MODULE:CALLABLE or --vllm (one of the two)")
    from ..backends.harness import AuditPlan, audit_engine, load_engine, report_json

    process = None
    if args.vllm:
        engine, process = _vllm_engine(args)
    else:
        engine = load_engine(args.entry)

    def announce(plan: AuditPlan) -> None:
        print(f"auditing {plan}", flush=True)

    start = time.perf_counter()
    try:
        report = audit_engine(engine, epsilon=args.epsilon, alpha=args.alpha,
                              power=args.power, seed=args.seed,
                              progress=not args.no_progress, on_plan=announce,
                              max_samples=args.max_samples)
    finally:
        if process is not None:
            process.close()
    seconds = time.perf_counter() - start
    print(report)
    print(f"{engine.name}: {report.verdict.upper()} in {seconds:.1f} s "
          f"({report.samples_per_second:.1f} samples/s)")
    if args.json is not None:
        with open(args.json, "w") as fh:
            json.dump(report_json(report, engine=engine.name, entry=args.entry or "--vllm",
                                  epsilon=args.epsilon, seconds=seconds), fh, indent=2)
    sys.stdout.flush()
    return 0 if report.verdict == "lossless" else 1


def _tokens(text: str) -> tuple[int, ...]:
    try:
        tokens = tuple(int(t) for t in text.split(","))
    except ValueError:
        tokens = ()
    if not tokens or min(tokens) < 0:
        raise argparse.ArgumentTypeError(f"expected token ids like 0,1,2, got {text!r}")
    return tokens


def _nonnegative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def install(sub: Subparsers) -> None:
    """Add ``dsi-ref audit-engine`` to the sub-command parsers."""
    p = sub.add_parser(
        "audit-engine", help="statistical audit of any engine (MODULE:CALLABLE) at stated power",
        description="Import MODULE, call CALLABLE() for an EngineUnderTest (a sampler seed -> "
        "tokens and the reference model it must sample from; see docs/engine-harness.md), draw "
        "the number of samples that gives POWER against every law at TV >= EPSILON from the "
        "reference, and test at false-alarm rate ALPHA. Exit status 0: lossless at the stated "
        "power; 1: lossy; 2: a bad entry point or argument.")
    p.add_argument("entry", metavar="MODULE:CALLABLE", nargs="?",
                   help="e.g. my_engine:make_engine (the current folder is importable); or "
                   "--vllm")
    p.add_argument("--epsilon", type=_probability, default=0.2, metavar="E",
                   help="the TV distance the power is stated against (default 0.2)")
    p.add_argument("--alpha", type=_probability, default=POLICY_ALPHA, metavar="A",
                   help=f"false-alarm rate (default {POLICY_ALPHA:g})")
    p.add_argument("--power", type=_probability, default=0.99, metavar="P",
                   help="power required against TV >= E (default 0.99)")
    p.add_argument("--seed", type=nonnegative_int, default=0, metavar="S",
                   help="root of the per-sample seeds (default 0)")
    p.add_argument("--max-samples", type=positive_int, default=None, metavar="N",
                   help="the budget: refuse (status 2) a plan that needs more than N samples "
                   "for the stated power, before drawing any")
    p.add_argument("--json", metavar="PATH", help="also write the verdict as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    v = p.add_argument_group("vLLM", "audit a vLLM configuration (in the vLLM environment: "
                             "python3 run.py audit --vllm builds it) instead of MODULE:CALLABLE")
    v.add_argument("--vllm", action="store_true", help="audit vLLM")
    v.add_argument("--model", metavar="DIR", help="the target's checkpoint folder (default: the "
                   "tiny target built in code)")
    v.add_argument("--draft", metavar="DIR", help="the drafter's checkpoint folder (default: "
                   "the tiny near drafter, or the tiny EAGLE head)")
    v.add_argument("--method", default="draft_model", metavar="M",
                   help="speculative method: draft_model (default), ngram, suffix, eagle, ..., "
                   "or none (no speculation)")
    v.add_argument("--k", type=positive_int, default=2, help="num_speculative_tokens (2)")
    v.add_argument("--draft-sample-method", choices=("greedy", "probabilistic"),
                   default="greedy")
    v.add_argument("--expand", choices=("stock", "copy-back", "fixed"), default="stock",
                   help="the CPU expand shim: stock (as released), copy-back, fixed (#55005)")
    v.add_argument("--temperature", type=_nonnegative, default=1.0)
    v.add_argument("--top-k", type=positive_int, default=None)
    v.add_argument("--top-p", type=_probability, default=None)
    v.add_argument("--min-p", type=_probability, default=None)
    v.add_argument("--repetition-penalty", type=_nonnegative, default=None)
    v.add_argument("--presence-penalty", type=float, default=None)
    v.add_argument("--frequency-penalty", type=float, default=None)
    v.add_argument("--prompt", type=_tokens, default=None, metavar="IDS",
                   help="the prompt's token ids (default 0,1,2,1,2)")
    v.add_argument("--tokens", type=positive_int, default=None,
                   help="new tokens per request (default 3)")
    p.set_defaults(func=_audit_engine)
