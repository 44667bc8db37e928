"""The ``dsi-ref`` command line: ``dsi-ref audit`` (the main job) and friends.

Each sub-command is one module of `dsi_ref.commands` with an ``install(subparsers)`` function,
registered in `COMMANDS`; this module only builds the parser and dispatches.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from . import __version__
from .commands import (
    audit_command,
    bench_command,
    heatmap_command,
    table_command,
    theorems_command,
    timeline_command,
)
from .commands.audit_command import audit_sections, select_sections

__all__ = ["COMMANDS", "audit_sections", "build_parser", "main", "select_sections"]

#: Sub-command installers; each adds a parser with ``func`` set.
COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [  # type: ignore[type-arg]
    audit_command.install,
    bench_command.install,
    heatmap_command.install,
    table_command.install,
    theorems_command.install,
    timeline_command.install,
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
