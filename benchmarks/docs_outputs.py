"""The command outputs the docs show verbatim, regenerated from the commands themselves.

A block of a docs page between ``<!-- output:NAME begin ... -->`` and ``<!-- output:NAME end -->``
is the output of the `dsi-ref` command `OUTPUTS` names, run in this process, after `Output.shown`
(the excerpt the page shows: a table's per-row timing column cut, the rows of a long table cut
to its first and last). ``--write`` rewrites every block; ``--check`` lists the stale ones (exit
1); with neither, prints them. Timings (``3.8 s``) change from run to run: `comparable` masks
them, and tests/test_docs_outputs.py compares the pages with fresh runs through it.

    python benchmarks/docs_outputs.py --write
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _cut_timing_column(text: str) -> str:
    """A section table without its last column (the seconds each row took)."""
    out, table = [], False
    for line in text.splitlines():
        if line.startswith("== "):
            table = True
        elif line.startswith("note:") or not line.strip():
            table = False
        elif table:
            line = re.sub(r"\s+\S+\s*$", "", line)
        out.append(line)
    return "\n".join(out)


def _excerpt(first: int) -> Callable[[str], str]:
    """A section table cut to its header, its first ``first`` rows, ``...`` and its last row."""
    def shown(text: str) -> str:
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("---")) + 1
        end = next(i for i, line in enumerate(lines) if line.startswith("note:"))
        rows = lines[start:end]
        kept = rows if len(rows) <= first + 1 else [*rows[:first], "...", rows[-1]]
        return "\n".join([*lines[:start], *kept, *lines[end:]])
    return shown


@dataclass(frozen=True)
class Output:
    """One verbatim output: the page it is on, the ``dsi-ref`` arguments as the page shows
    them (continuation lines: ``wrap``), and the excerpt it shows."""

    page: str
    argv: tuple[str, ...]
    shown: Callable[[str], str] = lambda text: text
    wrap: int = 0  # the index of the argument the shown command continues on a new line

    def command(self) -> str:
        args = list(self.argv)
        if not self.wrap:
            return "$ dsi-ref " + " ".join(args)
        return ("$ dsi-ref " + " ".join(args[:self.wrap]) + " \\\n      "
                + " ".join(args[self.wrap:]))

    def run(self) -> str:
        """The command's output as the page shows it (a figure it writes goes to a temporary
        folder, and its path is printed as the page's)."""
        from dsi_ref.cli import main

        argv = list(self.argv)
        with tempfile.TemporaryDirectory() as tmp:
            if "--out" in argv:
                at = argv.index("--out") + 1
                wanted, argv[at] = argv[at], str(Path(tmp) / Path(argv[at]).name)
            buffer = io.StringIO()
            with contextlib.redirect_stdout(buffer):
                code = main(argv)
            text = buffer.getvalue()
            if "--out" in self.argv:
                text = text.replace(argv[argv.index("--out") + 1], wanted)
        if code not in (0, None):
            raise RuntimeError(f"dsi-ref {' '.join(self.argv)} exited {code}:\n{text}")
        return f"{self.command()}\n{self.shown(text.rstrip())}"


OUTPUTS: dict[str, Output] = {
    "timeline": Output("dsi-walkthrough.md", (
        "timeline", "--model", "bigram", "--tokens", "8", "--seed", "0", "--lookahead", "1",
        "--sp-degree", "2", "--drafter-cost", "1/4", "--out", "docs/figures/timeline-bigram.png"),
        wrap=11),
    "schedulers-audit": Output("dsi-walkthrough.md",
                               ("audit", "--section", "schedulers", "--no-progress"),
                               _cut_timing_column),
    "dsi-audit": Output("dsi-walkthrough.md", ("audit", "--section", "dsi", "--no-progress"),
                        lambda text: _excerpt(3)(_cut_timing_column(text))),
}

_BLOCK = re.compile(r"(<!-- output:(?P<name>[\w-]+) begin[^>]*-->\n```text\n)(?P<body>.*?)"
                    r"(\n```\n<!-- output:(?P=name) end -->)", re.S)
_TIME = re.compile(r"(?<![\w/.])\d+(\.\d+)? s\b")


def comparable(text: str) -> str:
    """``text`` with its timings masked: what must not change between two runs."""
    return _TIME.sub("… s", text)


def blocks(text: str) -> dict[str, str]:
    """The output blocks of a page's text, by name."""
    return {m.group("name"): m.group("body") for m in _BLOCK.finditer(text)}


def rewrite(text: str, fresh: dict[str, str]) -> str:
    """``text`` with the blocks named in ``fresh`` replaced."""
    return _BLOCK.sub(lambda m: m.group(1) + fresh.get(m.group("name"), m.group("body"))
                      + m.group(4), text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the docs' blocks")
    parser.add_argument("--check", action="store_true", help="list stale blocks (exit 1)")
    args = parser.parse_args(argv)
    fresh = {name: output.run() for name, output in OUTPUTS.items()}
    stale = []
    for page in sorted({o.page for o in OUTPUTS.values()}):
        path = DOCS / page
        text = path.read_text()
        for name, body in blocks(text).items():
            if comparable(body) != comparable(fresh[name]):
                stale.append(f"{page}: {name}")
        if args.write and rewrite(text, fresh) != text:
            path.write_text(rewrite(text, fresh))
            print(f"rewrote {page}")
    if args.check:
        print("\n".join(stale) or "every output block is current")
        return 1 if stale else 0
    if not args.write:
        for name, body in fresh.items():
            print(f"## {name}\n{body}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
