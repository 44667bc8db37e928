"""The docs' verdict tables, rendered from the registry, and the scan that keeps docs honest.

A generated table sits between ``<!-- claims:NAME begin ... -->`` and ``<!-- claims:NAME end -->``
on a docs page; ``python -m dsi_ref.claims --write`` rewrites every such block from the registry,
and `stale_blocks` lists the blocks that differ (a test fails on any). `stray_verdicts` lists
every Markdown table row of a docs page that states a verdict outside a generated block (a test
fails on any): a verdict on a docs page is a registry row, or a measurement of a page that
`MEASUREMENT_PAGES` names with the generator and the test that own it.

Prose too (`stray_prose_verdicts`, issue 34): a sentence that states a rule or a decoder
lossless or lossy carries a marker, ``<!-- claim: dsi/rejection/content-aware = lossy -->``
(the registry rows it states, ``decoder/rule/class`` with ``*`` for any part, each checked
against the registry: a row that changes its verdict fails the test until the sentence is
revised) or ``<!-- example: why -->`` (it is about an example of the page, computed there, a
measurement or a quotation, not a claim of the registry). The scan finds the sentences that
name a rule or a decoder and say lossless or lossy; one of them that states no verdict (a
recipe, a title) is marked ``<!-- no verdict -->``. The markers are HTML comments: the rendered
pages do not show them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from ..audit.schedulers import SCHEDULER_CLASSES
from .registry import (
    CLAIMS,
    DSI_RULES,
    LATENCY_CLAIMS,
    InstanceWitness,
    LosslessnessClaim,
    dsi_claim,
)

__all__ = ["EXAMPLE_PAGES", "MEASUREMENT_PAGES", "TABLES", "VERDICT_CELL", "marker_problems",
           "prose_verdicts", "render_table", "rewrite", "stale_blocks", "stray_prose_verdicts",
           "stray_verdicts"]

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


# -- verdicts in prose -----------------------------------------------------------------------------

#: A verdict word in prose (inline code is not prose: ``dr.assert_lossless`` states nothing).
_VERDICT_WORD = re.compile(r"\b(lossless|lossy)\b", re.I)
#: What a verdict sentence is about: a rule or a decoder of this library, by a name the docs use.
_SUBJECT = re.compile(
    r"\b(rejection|exact[ _]match|greedy|block|maximal|tree rules?|every rule|the rule|rrs|"
    r"specinfer|traversal|eagle|top-k|typical|medusa|slem|tli|slrs|string-level|cross-vocab|"
    r"speculative|SI|DSI|non-SI|autoregressive)\b", re.I)
#: The markers a verdict sentence carries (module docstring): ``<!-- claim: SELECTOR = VERDICT;
#: ... -->`` (the registry rows it states, checked), ``<!-- example: why -->`` (about an
#: example of the page, a measurement or a quotation: not a claim of the registry) or ``<!-- no
#: verdict -->`` (it names a rule and a verdict word but states no verdict: a recipe, a title).
_MARKER = re.compile(r"<!--\s*(claim|example|no verdict)\b:?\s*(.*?)\s*-->")
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=-->))\s+(?=[A-Z*_`(\[])")
_GENERATED = re.compile(r"<!-- (claims:[\w-]+|proofs-table:|budget-table:)(begin| begin)")
_GENERATED_END = re.compile(r"<!-- (claims:[\w-]+ end|proofs-table:end|budget-table:end)")
#: Pages whose every verdict is about an example the page computes (its code blocks, run by
#: tests/test_docs.py), with why; a page of measurements is in `MEASUREMENT_PAGES`.
EXAMPLE_PAGES: dict[str, str] = {
    "engine-bugs.md": "bugs reported against engines, each a program whose exact law the page "
                      "computes (tests/test_docs.py runs it)",
}


def _paragraphs(text: str) -> list[tuple[int, str]]:
    """``(first line, text)`` of each prose paragraph, list item and heading: code blocks,
    tables and generated blocks left out."""
    out: list[tuple[int, str]] = []
    current: list[str] = []
    start = 0
    fenced = generated = False

    def flush() -> None:
        if current:
            out.append((start, " ".join(" ".join(current).split())))
            current.clear()

    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            fenced = not fenced
            continue
        if _GENERATED.match(stripped):
            flush()
            generated = True
            continue
        if _GENERATED_END.match(stripped):
            generated = False
            continue
        if fenced or generated or stripped.startswith("|") or not stripped:
            flush()
            continue
        if stripped.startswith("#") or re.match(r"([*-]|\d+\.)\s", stripped):
            flush()
        if not current:
            start = number
        current.append(stripped)
        if stripped.startswith("#"):
            flush()
    flush()
    return out


def prose_verdicts(text: str) -> list[tuple[int, str, list[tuple[str, str]]]]:
    """``(line, sentence, markers)`` for every sentence of ``text``'s prose that names a rule or
    a decoder (`_SUBJECT`) and a verdict word outside inline code: the sentences that may state
    one lossless or lossy. ``markers`` are the ``(kind, body)`` of its markers (`_MARKER`); a
    paragraph that is only markers (after a heading, say) marks the paragraph before it."""
    out: list[tuple[int, str, list[tuple[str, str]]]] = []
    previous: list[int] = []
    for line, paragraph in _paragraphs(text):
        found = [(m.group(1), m.group(2)) for m in _MARKER.finditer(paragraph)]
        if found and not _MARKER.sub("", paragraph).strip():
            for at in previous:
                if not out[at][2]:
                    out[at] = (out[at][0], out[at][1], found)
            continue
        previous = []
        for sentence in _SENTENCE_END.split(paragraph):
            bare = _MARKER.sub("", sentence)
            if _VERDICT_WORD.search(re.sub(r"`[^`]*`", "``", bare)) and _SUBJECT.search(bare):
                previous.append(len(out))
                out.append((line, sentence, [(m.group(1), m.group(2))
                                             for m in _MARKER.finditer(sentence)]))
    return out


def _selected(selector: str) -> list[LosslessnessClaim]:
    """The registry rows ``decoder/rule[/class]`` names, ``*`` standing for any part."""
    parts = [p.strip() for p in selector.split("/")]
    rows = []
    for claim in CLAIMS:
        key = (claim.decoder, claim.rule, claim.scheduler_class or "")
        if len(parts) in (2, 3) and all(p in ("*", k) for p, k in zip(parts, key, strict=False)):
            rows.append(claim)
    return rows


def marker_problems(body: str) -> list[str]:
    """What is wrong with a claim marker's body ``SELECTOR = VERDICT; ...`` against the
    registry: a selector that names no row, or a row whose verdict is not the one stated."""
    problems = []
    for part in filter(None, (p.strip() for p in body.split(";"))):
        selector, _, verdict = part.rpartition("=")
        rows = _selected(selector)
        verdict = verdict.strip()
        if not rows or verdict not in ("lossless", "lossy"):
            problems.append(f"{part!r} names no registry row and verdict")
        else:
            problems += [f"{part!r}: the registry says {c.key} is {c.verdict}"
                         for c in rows if c.verdict != verdict]
    return problems


def stray_prose_verdicts(docs: Path) -> list[str]:
    """``page:line: problem: sentence`` for every sentence of ``docs/*.md`` that states a rule
    or decoder lossless or lossy (`prose_verdicts`) and is neither a registry row (its claim
    marker is checked against the rows: `marker_problems`) nor marked as an example (pages of
    `MEASUREMENT_PAGES` and `EXAMPLE_PAGES` are examples or measurements throughout)."""
    out = []
    for page in sorted(docs.glob("*.md")):
        if page.name in MEASUREMENT_PAGES or page.name in EXAMPLE_PAGES:
            continue
        for line, sentence, markers in prose_verdicts(page.read_text()):
            if not markers:
                out.append(f"{page.name}:{line}: unmarked: {sentence}")
            out += [f"{page.name}:{line}: {p}: {sentence}" for kind, body in markers
                    if kind == "claim" for p in marker_problems(body)]
    return out
