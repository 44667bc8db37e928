"""The docs' verdict tables, rendered from the registry, and the scan that keeps docs honest.

A generated table sits between ``<!-- claims:NAME begin ... -->`` and ``<!-- claims:NAME end -->``
on a docs page; ``python -m dsi_ref.claims --write`` rewrites every such block from the registry,
and `stale_blocks` lists the blocks that differ (a test fails on any). `stray_verdicts` lists
every Markdown table row of a docs page that states a verdict outside a generated block (a test
fails on any): a verdict on a docs page is a registry row, or a measurement of a page that
`MEASUREMENT_PAGES` names with the generator and the test that own it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from ..audit.schedulers import SCHEDULER_CLASSES
from .registry import CLAIMS, DSI_RULES, LATENCY_CLAIMS, InstanceWitness, dsi_claim

__all__ = ["MEASUREMENT_PAGES", "TABLES", "VERDICT_CELL", "render_table", "rewrite",
           "stale_blocks", "stray_verdicts"]

#: Pages whose verdicts are measurements (statistical audits of engines outside dsi-ref), not
#: claims: the generator that writes them and the test that keeps them current.
MEASUREMENT_PAGES: dict[str, str] = {
    "engine-findings.md": "benchmarks/engine_findings.py (statistical audits of third-party "
                          "engines, per release), kept current by tests/test_engine_findings.py",
}
#: A table cell that states a verdict.
VERDICT_CELL = re.compile(r"^\**(lossless|lossy|LOSSY|LOSSLESS|PROVED|REFUTED)\**(\s|$|\()")


def _cell(verdict: str) -> str:
    return "lossless" if verdict == "lossless" else "**lossy**"


def _dsi_table(labels: tuple[str, ...]) -> str:
    rules = [r for r in DSI_RULES if r.label in labels]
    lines = ["| rule | " + " | ".join(SCHEDULER_CLASSES) + " |",
             "|---|" + "---|" * len(SCHEDULER_CLASSES)]
    witnesses: list[str] = []
    for rule in rules:
        cells = []
        for cls in SCHEDULER_CLASSES:
            claim = dsi_claim(rule.label, cls)
            cell = _cell(claim.verdict)
            if isinstance(claim.witness, InstanceWitness):
                witnesses.append(f"{len(witnesses) + 1}. {rule.label}, {cls}: "
                                 f"{claim.witness.description}")
                cell += f" ({len(witnesses)})"
            cells.append(cell)
        lines.append(f"| `{rule.label}` | " + " | ".join(cells) + " |")
    lines += ["", "Minimal witnesses (each re-checked exactly by tests/test_claims.py):", "",
              *witnesses]
    return "\n".join(lines)


def _latency_table() -> str:
    lines = ["| latency claim | verdict |", "|---|---|"]
    lines += [f"| {c.name} | {c.verdict if c.value is None else c.value} |"
              for c in LATENCY_CLAIMS]
    return "\n".join(lines)


def _sequential_table() -> str:
    lines = ["| decoder | rule | options | verdict | checked by |", "|---|---|---|---|---|"]
    for c in CLAIMS:
        if c.scheduler_class is None:
            options = ", ".join(f"{k}={v}" for k, v in c.options) or "-"
            lines.append(f"| `{c.decoder}` | {c.rule} | {options} | {_cell(c.verdict)} | "
                         f"{c.checked_by} |")
    return "\n".join(lines)


#: The generated tables, by block name.
TABLES: dict[str, Callable[[], str]] = {
    "dsi": lambda: _dsi_table(tuple(r.label for r in DSI_RULES)),
    "dsi-block": lambda: _dsi_table(("block", "block, maximal windows")),
    "sequential": _sequential_table,
    "latency": _latency_table,
}


def render_table(name: str) -> str:
    """The Markdown of generated table ``name`` (a key of `TABLES`)."""
    return TABLES[name]()


_BLOCK = re.compile(r"(<!-- claims:(?P<name>[\w-]+) begin[^>]*-->\n)(?P<body>.*?)"
                    r"(<!-- claims:(?P=name) end -->)", re.S)


def rewrite(text: str) -> str:
    """``text`` with every generated block rendered anew."""
    return _BLOCK.sub(lambda m: m.group(1) + render_table(m.group("name")) + "\n" + m.group(4),
                      text)


def stale_blocks(docs: Path) -> list[str]:
    """``page: block`` for every generated block of ``docs/*.md`` that differs from the
    registry."""
    out = []
    for page in sorted(docs.glob("*.md")):
        for m in _BLOCK.finditer(page.read_text()):
            if m.group("body").strip() != render_table(m.group("name")).strip():
                out.append(f"{page.name}: {m.group('name')}")
    return out


#: Where generated verdicts begin and end: the registry's blocks, and docs/theory.md's table of
#: the ``proofs`` theorems (the registry's `LATENCY_CLAIMS`; tests/test_proofs_verdicts.py keeps it
#: current and tests/test_claims.py checks each of its rows against the registry).
_OPENS = r"<!-- (claims:[\w-]+ begin|proofs-table:begin)"
_CLOSES = r"<!-- (claims:[\w-]+ end|proofs-table:end)"


def stray_verdicts(docs: Path) -> list[str]:
    """``page:line: row`` for every table row of ``docs/*.md`` that states a verdict outside a
    generated block (code blocks are examples, run by the tests, and are not scanned)."""
    out = []
    for page in sorted(docs.glob("*.md")):
        if page.name in MEASUREMENT_PAGES:
            continue
        inside = fenced = False
        for number, line in enumerate(page.read_text().splitlines(), 1):
            if line.startswith("```"):
                fenced = not fenced
            elif re.match(_OPENS, line):
                inside = True
            elif re.match(_CLOSES, line):
                inside = False
            elif (line.startswith("|") and not inside and not fenced
                  and any(VERDICT_CELL.match(cell.strip()) for cell in line.split("|"))):
                out.append(f"{page.name}:{number}: {line}")
    return out
