"""The ``dsi-ref`` command line: ``dsi-ref audit`` (the main job) and friends.

Sections of the audit report live in `dsi_ref.report` (one function each); sub-commands are
registered in `COMMANDS`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

from . import __version__
from .commands import TOP_SECTIONS, bench, heatmap, table, theorems, timeline
from .report import SECTIONS, Section, SectionSpec, render_section

__all__ = ["COMMANDS", "main"]


def audit_sections() -> list[SectionSpec]:
    """Every section of ``dsi-ref audit``: the core's, then the top floor's."""
    return [*SECTIONS, *TOP_SECTIONS]


def select_sections(names: Sequence[str] = (), *, hf: bool = False) -> list[SectionSpec]:
    """The sections an audit runs: those named, else every section that is not opt-in; ``hf``
    adds the Hugging Face section. Raises `KeyError` naming unknown sections."""
    sections = audit_sections()
    wanted = set(names) or {s.name for s in sections if not s.opt_in}
    if hf:
        wanted.add("hf")
    unknown = wanted - {s.name for s in sections}
    if unknown:
        raise KeyError(f"unknown section(s): {', '.join(sorted(unknown))}; "
                       f"known: {', '.join(s.name for s in sections)}")
    return [s for s in sections if s.name in wanted]


def _audit(args: argparse.Namespace) -> int:
    try:
        selected = select_sections(args.section or (), hf=args.hf)
    except KeyError as error:
        print(error.args[0], file=sys.stderr)
        return 2
    results: list[Section] = []
    for make in selected:
        section = make.run(quick=args.quick, progress=not args.no_progress)
        results.append(section)
        print(render_section(section), flush=True)
    failed = [s.title for s in results if not s.ok]
    total = sum(s.seconds for s in results)
    print(f"\n{'FAIL' if failed else 'PASS'}: {len(results) - len(failed)}/{len(results)} "
          f"sections passed in {total:.1f} s" + (f" (failed: {', '.join(failed)})" if failed
                                                  else ""))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([s.as_dict() for s in results], fh, indent=2, default=str)
    return 1 if failed else 0


def _add_audit(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("audit", help="the main job: exact losslessness audits and the theorems",
                       description="Run the exact audit of every registered decoder on the "
                       "default suite of toy models, DSI under every schedule and against each "
                       "scheduler class, the zoo of wrong decoders (each must be caught) and the "
                       "latency theorems, and print one table per section (--hf adds the "
                       "statistical audit of Hugging Face assisted generation). Exit status 1 "
                       "if anything fails.")
    p.add_argument("--section", action="append", metavar="NAME",
                   help="run only this section (repeatable): "
                   + ", ".join(s.name for s in audit_sections()))
    p.add_argument("--quick", action="store_true", help="smaller budgets (a smoke test)")
    p.add_argument("--hf", action="store_true", help="add the statistical audits of Hugging Face "
                   "assisted generation and the torch adapter (about a minute; needs the [torch] "
                   "extra)")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=_audit)


#: Sub-command installers; each adds a parser with ``func`` set.
COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [  # type: ignore[type-arg]
    _add_audit,
    bench.install,
    heatmap.install,
    table.install,
    theorems.install,
    timeline.install,
]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``dsi-ref``."""
    parser = argparse.ArgumentParser(
        prog="dsi-ref", description="Reference model and audits of (distributed) speculative "
        "inference: exact losslessness checks, latency theory, simulators.")
    parser.add_argument("--version", action="version", version=f"dsi-ref {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for install in COMMANDS:
        install(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dsi-ref`` script."""
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
