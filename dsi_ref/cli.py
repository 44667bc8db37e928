"""The ``dsi-ref`` command line: ``dsi-ref audit`` (the main job) and friends.

Each sub-command is one module of `dsi_ref.commands` with an ``install(subparsers)`` function,
registered in `COMMANDS`; this module only builds the parser and dispatches.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from . import __version__
from .base.errors import (
    BackendError,
    InvalidAuditError,
    InvalidDistributionError,
    InvalidParameterError,
    UnderpoweredError,
)
from .commands import audit, audit_engine, bench, heatmap, table, theorems, timeline
from .commands.args import Subparsers
from .commands.audit import audit_sections, select_sections

__all__ = ["COMMANDS", "USER_ERRORS", "audit_sections", "build_parser", "main", "select_sections"]

#: Sub-command installers; each adds a parser with ``func`` set.
COMMANDS: list[Callable[[Subparsers], None]] = [
    audit.install,
    audit_engine.install,
    bench.install,
    heatmap.install,
    table.install,
    theorems.install,
    timeline.install,
]


#: The errors that mean "the user asked for something that cannot be done": `main` reports them
#: in one line and exits with status 2. Any other exception is a bug and keeps its traceback.
USER_ERRORS: tuple[type[Exception], ...] = (
    InvalidParameterError, InvalidDistributionError, InvalidAuditError, BackendError,
    UnderpoweredError, OSError)


class _Parser(argparse.ArgumentParser):
    """argparse with the CLI's one-line error format (sub-command parsers inherit it)."""

    def error(self, message: str) -> NoReturn:
        """Print ``dsi-ref: error: <prog>: <message>`` (and where to find the usage); exit 2."""
        where = self.prog.removeprefix("dsi-ref").strip()
        self.exit(2, f"dsi-ref: error: {where + ': ' if where else ''}{message} "
                  f"(see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``dsi-ref``."""
    parser = _Parser(
        prog="dsi-ref", description="Reference model and audits of (distributed) speculative "
        "inference: exact losslessness checks, latency theory, simulators.")
    parser.add_argument("--version", action="version", version=f"dsi-ref {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for install in COMMANDS:
        install(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dsi-ref`` script.

    Returns the command's exit status: 0 (success), 1 (an audit or a theorem failed), 2 (a
    user's error: one line ``dsi-ref: error: ...`` on stderr, no traceback; a usage error exits
    with status 2 through argparse's ``SystemExit``).
    """
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except USER_ERRORS as error:
        text = " ".join(str(error).split()) or type(error).__name__
        if isinstance(error, OSError) and error.filename is not None and \
                str(error.filename) not in text:
            text = f"{text}: {error.filename}"
        print(f"dsi-ref: error: {text}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
