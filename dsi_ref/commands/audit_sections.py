"""Sections of the ``dsi-ref audit`` report: each runs a family of checks and returns a table.

A section is registered in `SECTIONS` as a `SectionSpec`; later work adds sections (DSI, the zoo
of wrong decoders, the theorems) without touching the CLI.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, TypeVar

from tqdm import tqdm

from ..audit.laws import check_lossless
from ..audit.registry import DECODERS
from ..audit.schedulers import (
    DSI_CLAIMS,
    SCHEDULER_CLASSES,
    default_random_latency,
    minimal_witness,
    witness_summary,
)
from ..audit.suite import ModelPair, default_suite
from ..audit.zoo import EQUIVALENT_MUTANTS, MUTANTS, hunt
from ..base.latency import Latency
from ..decoders.dsi import QUEUE_POLICIES, dsi
from ..decoders.verification import VERIFY_RULES

__all__ = ["SECTIONS", "Section", "SectionSpec", "progress_bar", "render_section"]

T = TypeVar("T")


@dataclass
class Section:
    """The result of one section: a table, a verdict and the time it took."""

    name: str
    title: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    ok: bool = True
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {"name": self.name, "title": self.title, "ok": self.ok, "seconds": self.seconds,
                "notes": self.notes, "rows": [dict(zip(self.columns, r, strict=True))
                                              for r in self.rows]}


@dataclass(frozen=True)
class SectionSpec:
    """A named section and the function that computes it.

    ``opt_in`` sections (long statistical runs) are left out of a plain ``dsi-ref audit`` and run
    when named (``--section NAME``, or their own flag such as ``--hf``).
    """

    name: str
    run: Callable[..., Section]
    opt_in: bool = False


def progress_bar(items: Iterable[T], *, total: int, desc: str, enabled: bool) -> Iterator[T]:
    """A tqdm progress bar on stderr (or the bare iterable when disabled)."""
    if not enabled:
        yield from items
        return
    yield from tqdm(items, total=total, desc=desc, leave=False, unit="check")


def render_section(section: Section) -> str:
    """A plain-text table with a title line and notes."""
    cells = [tuple(str(c) for c in section.columns)] + [tuple(_fmt(c) for c in r)
                                                         for r in section.rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(section.columns))]
    line = "  ".join("-" * w for w in widths)
    out = [f"\n== {section.title} ({'PASS' if section.ok else 'FAIL'}, "
           f"{section.seconds:.1f} s) =="]
    out.append("  ".join(c.ljust(w) for c, w in zip(cells[0], widths, strict=True)))
    out.append(line)
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells[1:]]
    out += [f"note: {n}" for n in section.notes]
    return "\n".join(out)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e4 else f"{value:.3e}"
    return str(value)


def decoders_section(*, quick: bool = False, progress: bool = True) -> Section:
    """Exact audit of every registered decoder × variant × suite model × lookahead."""
    section = Section("decoders", "Exact losslessness of every registered decoder",
                      ("decoder", "rule", "model", "params", "outcomes", "TV", "verdict", "s"))
    lookaheads = (2,) if quick else (1, 2, 3)
    jobs = []
    for spec in DECODERS.values():
        for variant in spec.variants:
            for pair in default_suite():
                for params in _param_grid(spec.params, lookaheads):
                    jobs.append((spec, variant, pair, params))
    start = time.perf_counter()
    for spec, variant, pair, params in progress_bar(jobs, total=len(jobs), desc="decoders",
                                                   enabled=progress):
        t0 = time.perf_counter()
        program = spec.program(pair.target, pair.drafter, pair.prompt, pair.max_new_tokens,
                               variant, **params)
        report = check_lossless(program, pair.target, pair.prompt, pair.max_new_tokens,
                                greedy=variant.greedy)
        section.ok &= report.equal
        section.rows.append((spec.name, variant.label, pair.name,
                             " ".join(f"{k}={v}" for k, v in params.items()) or "-",
                             report.outcomes, str(report.tv_distance),
                             "lossless" if report.equal else "LOSSY",
                             round(time.perf_counter() - t0, 2)))
    section.seconds = time.perf_counter() - start
    return section


def _param_grid(names: tuple[str, ...], lookaheads: tuple[int, ...]) -> list[dict[str, int]]:
    if "lookahead" in names:
        return [{"lookahead": k} for k in lookaheads]
    return [{}]


#: DSI audit grid: a drafter at half the target's cost, so that drafts and tasks complete at the
#: same instants (ties for the scheduler) and verification tasks queue when servers are few.
DSI_AUDIT_LATENCY = Latency(drafter=Fraction(1, 2))
DSI_AUDIT_PAIRS = ("zeros", "bigram", "eos")
DSI_AUDIT_TOKENS = 3


def _dsi_program(pair: ModelPair, max_new_tokens: int, **kwargs: Any
                 ) -> Callable[[Any], tuple[int, ...]]:
    def program(rng: Any) -> tuple[int, ...]:
        return dsi(pair.target, pair.drafter, pair.prompt, max_new_tokens, rng, **kwargs).tokens
    return program


def dsi_section(*, quick: bool = False, progress: bool = True) -> Section:
    """DSI quantified over every schedule: lookaheads × server counts 1..4 × queue policies ×
    verification rules, on context-dependent and EOS models (exact laws)."""
    section = Section("dsi", "DSI: exact losslessness for every schedule (all tie orders and "
                      "queue choices)",
                      ("lookahead", "sp_degree", "queue", "models", "rules", "outcomes", "TV",
                       "verdict", "s"))
    lookaheads = (2,) if quick else (1, 2, 3)
    servers = (1, 2) if quick else (1, 2, 3, 4)
    pairs = [p for p in default_suite() if p.name in DSI_AUDIT_PAIRS]
    jobs = [(k, sp, queue) for k in lookaheads for sp in servers for queue in QUEUE_POLICIES]
    start = time.perf_counter()
    for k, sp, queue in progress_bar(jobs, total=len(jobs), desc="dsi", enabled=progress):
        t0 = time.perf_counter()
        outcomes, worst_tv, equal = 0, Fraction(0), True
        for pair in pairs:
            for rule in VERIFY_RULES:
                program = _dsi_program(pair, DSI_AUDIT_TOKENS, lookahead=k, sp_degree=sp,
                                       latency=DSI_AUDIT_LATENCY, verify=rule, queue=queue,
                                       record=False)
                report = check_lossless(program, pair.target, pair.prompt, DSI_AUDIT_TOKENS,
                                        greedy=rule == "greedy")
                outcomes += report.outcomes
                worst_tv = max(worst_tv, report.tv_distance)
                equal &= report.equal
        section.ok &= equal
        section.rows.append((k, sp, queue, "+".join(DSI_AUDIT_PAIRS), "+".join(VERIFY_RULES),
                             outcomes, str(worst_tv), "lossless" if equal else "LOSSY",
                             round(time.perf_counter() - t0, 2)))
    section.seconds = time.perf_counter() - start
    section.notes.append(f"N = {DSI_AUDIT_TOKENS}, drafter cost c = {DSI_AUDIT_LATENCY.drafter}, "
                         "target cost 1; every tie order and (queue=any) every queue choice is "
                         "explored, and each must give the same law (schedule robustness); "
                         "lean runs (record=False: same law, more merging)")
    return section


#: Scheduler-class audit: drafter as slow as the target, so that a draft and the frontier task
#: finish together and the scheduler decides which is delivered first.
SCHEDULERS_AUDIT_LATENCY = Latency(drafter=Fraction(1))
SCHEDULERS_AUDIT_PAIRS = ("bigram", "zeros")


def schedulers_section(*, quick: bool = False, progress: bool = True) -> Section:
    """DSI's verdict per scheduler class × verification rule (minimal witness where lossy),
    checked against `DSI_CLAIMS` both ways."""
    section = Section("schedulers", "DSI against scheduler classes (adversaries): verdict per "
                      "class and verification rule",
                      ("class", "rule", "claimed", "verdict", "minimal witness", "s"))
    budget = 2 if quick else 3
    pairs = [p for p in default_suite() if p.name in SCHEDULERS_AUDIT_PAIRS]
    jobs = [(c, r) for c in SCHEDULER_CLASSES for r in VERIFY_RULES]
    start = time.perf_counter()
    for scheduler_class, rule in progress_bar(jobs, total=len(jobs), desc="schedulers",
                                              enabled=progress):
        t0 = time.perf_counter()
        latency = (default_random_latency(SCHEDULERS_AUDIT_LATENCY)
                   if scheduler_class == "random" else SCHEDULERS_AUDIT_LATENCY)
        lossless, witness = True, "-"
        for pair in pairs:
            verdict = minimal_witness(scheduler_class, pair.target, pair.drafter, pair.prompt,
                                      budget, lookahead=2, sp_degree=2, latency=latency,
                                      verify=rule, queue="any")
            if not verdict.lossless:
                lossless = False
                witness = (f"{pair.name} N={verdict.max_new_tokens}: "
                           + (witness_summary(verdict.witness) if verdict.witness
                              else str(min(verdict.reports, key=lambda r: r.equal))))
                break
        claimed = scheduler_class in DSI_CLAIMS[rule]
        section.ok &= claimed == lossless
        section.rows.append((scheduler_class, rule, "lossless" if claimed else "lossy",
                             "lossless" if lossless else "LOSSY", witness,
                             round(time.perf_counter() - t0, 2)))
    section.seconds = time.perf_counter() - start
    section.notes.append(f"models {' and '.join(SCHEDULERS_AUDIT_PAIRS)}, N <= {budget}, "
                         "lookahead 2, sp_degree 2, queue=any, drafter cost 1 (target 1, or "
                         "1 or 2 with probability 1/2 for the random class); the section fails "
                         "when a verdict differs from the claim, either way")
    return section


def zoo_section(*, quick: bool = False, progress: bool = True) -> Section:
    """Every mutant of the zoo must be killed by the exact audit; the witness of each."""
    section = Section("zoo", "The zoo of wrong decoders: each must fail the exact audit",
                      ("mutant", "base", "killed", "witness", "s"))
    start = time.perf_counter()
    killed = 0
    for mutant in progress_bar(MUTANTS.values(), total=len(MUTANTS), desc="zoo",
                               enabled=progress):
        t0 = time.perf_counter()
        kill = hunt(mutant)
        killed += kill is not None
        section.ok &= kill is not None
        section.rows.append((mutant.name, mutant.base, "yes" if kill else "NO (passes!)",
                             str(kill) if kill else mutant.pattern,
                             round(time.perf_counter() - t0, 2)))
    for mutant in EQUIVALENT_MUTANTS.values():  # look like bugs, are lossless: must pass
        t0 = time.perf_counter()
        kill = hunt(mutant)
        section.ok &= kill is None
        section.rows.append((mutant.name, f"{mutant.base} (equivalent)",
                             f"FLAGGED: {kill}" if kill else "no (lossless, as it must be)",
                             mutant.pattern, round(time.perf_counter() - t0, 2)))
    section.seconds = time.perf_counter() - start
    section.notes.append(f"killed {killed}/{len(MUTANTS)} mutants; the {len(EQUIVALENT_MUTANTS)} "
                         "equivalent mutants (lossless variations, dsi_ref.audit.zoo) pass, as "
                         "they must")
    return section


#: The sections of ``dsi-ref audit``, in order.
SECTIONS: list[SectionSpec] = [
    SectionSpec("decoders", decoders_section),
    SectionSpec("dsi", dsi_section),
    SectionSpec("schedulers", schedulers_section),
    SectionSpec("zoo", zoo_section),
]
