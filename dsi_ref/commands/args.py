"""Argument types and checks shared by the sub-commands.

Every count a sub-command takes is parsed by one of the types here (a usage error, exit status 2,
for a bad value), and every output path is checked by `check_output` *before* the work starts
(only when the output will be written): a run never fails at its end because its output cannot
be written.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeAlias

from ..base.errors import InvalidParameterError

__all__ = ["FIGURE_SUFFIXES", "Subparsers", "bounded_int", "check_figure", "check_figure_format",
           "check_output", "check_plotting", "nonnegative_int", "positive_int"]

#: What a sub-command's ``install`` is given: the ``dsi-ref`` parser's sub-parsers (of the CLI's
#: own parser class, which the sub-command parsers inherit; argparse's type is invariant in it).
Subparsers: TypeAlias = "argparse._SubParsersAction[Any]"

#: The figure formats a command that draws one writes (matplotlib infers it from the suffix).
FIGURE_SUFFIXES = (".png", ".pdf", ".svg")


def _int(text: str, low: int, high: int | None = None, why: str = "") -> int:
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if value < low:
        raise argparse.ArgumentTypeError(f"expected an int >= {low}, got {text!r}")
    if high is not None and value > high:
        raise argparse.ArgumentTypeError(f"expected an int <= {high}{why}, got {text!r}")
    return value


def bounded_int(low: int, high: int, why: str = "") -> Callable[[str], int]:
    """An argparse type: an int in ``[low, high]`` (a clear usage error otherwise, with
    ``why``, e.g. ``" (the limit of a timeline)"``, after the bound)."""
    def parse(text: str) -> int:
        return _int(text, low, high, why)
    return parse


def positive_int(text: str) -> int:
    """An argparse type: an int >= 1 (a clear usage error otherwise)."""
    return _int(text, 1)


def nonnegative_int(text: str) -> int:
    """An argparse type: an int >= 0 (a clear usage error otherwise)."""
    return _int(text, 0)


def check_plotting() -> None:
    """Refuse, before the work starts, a run that will draw a PNG when matplotlib is missing."""
    if importlib.util.find_spec("matplotlib") is None:
        raise InvalidParameterError("drawing the PNG needs matplotlib: pip install "
                                    "'dsi-ref[plot]', or pass --no-plot")


def check_figure(path: str | Path) -> Path:
    """`check_output` and `check_figure_format`: a figure can be written at ``path``."""
    return check_figure_format(check_output(path))


def check_figure_format(path: str | Path) -> Path:
    """Refuse a figure path whose suffix is not one of `FIGURE_SUFFIXES` (matplotlib would fail
    only after the work, with a traceback); return it."""
    out = Path(path)
    if out.suffix.lower() not in FIGURE_SUFFIXES:
        raise InvalidParameterError(f"output file {str(out)!r}: a figure is written as "
                                    f"{', '.join(FIGURE_SUFFIXES)}; got "
                                    f"{repr(out.suffix) if out.suffix else 'no extension'}")
    return out


def _nearest_existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (the current directory for a relative path
    with no existing part)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path.cwd()


def check_output(path: str | Path, *, directory: bool = False) -> Path:
    """Check, without writing anything, that an output can be written at ``path``; return it.

    A file (``directory=False``): ``path`` is not a directory, its parent directory exists and
    is writable, and an existing file there is writable. A folder (``directory=True``): ``path``
    is a writable directory, or does not exist and its nearest existing ancestor is a writable
    directory (the command creates the missing levels). Anything else raises
    `InvalidParameterError` saying what is wrong.
    """
    if not str(path):
        raise InvalidParameterError("an output path must not be empty")
    out = Path(path)
    if directory:
        if out.exists() and not out.is_dir():
            raise InvalidParameterError(f"output folder {str(out)!r} exists and is not a folder")
        base = _nearest_existing(out)
        if not base.is_dir():
            raise InvalidParameterError(f"output folder {str(out)!r}: {str(base)!r} is a file, "
                                        "not a folder")
        if not os.access(base, os.W_OK | os.X_OK):
            raise InvalidParameterError(f"output folder {str(out)!r}: {str(base)!r} is not "
                                        "writable")
        return out
    if out.is_dir():
        raise InvalidParameterError(f"output file {str(out)!r} is a folder; give a file name")
    parent = out.parent
    if not parent.is_dir():
        raise InvalidParameterError(f"output file {str(out)!r}: the folder {str(parent)!r} "
                                    "does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (out.exists()
                                                    and not os.access(out, os.W_OK)):
        raise InvalidParameterError(f"output file {str(out)!r} is not writable")
    return out
