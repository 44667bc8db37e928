"""The ``processors`` section of ``dsi-ref audit``: speculation with sampling processors.

SI (every verification rule) and DSI, with processors drawn differently on the target and the
drafter, are audited exactly against the *processed target* (`dsi_ref.base.processors`) on every
pair of the default suite; then the zoo's processor mutants (issue #15, item 5) are hunted here
too, so that the section shows each bug class with its exact witness (the ``zoo`` section kills
them as well, with every other mutant).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from ...audit.laws import check_lossless
from ...audit.suite import default_suite
from ...audit.zoo import MUTANTS, PROCESSOR_MUTANT_SETTINGS, hunt
from ...base.processors import VLLM_ORDER, ProcessedLM, Processors
from ...decoders.dsi import dsi
from ...decoders.speculative import speculative
from ...decoders.verification import VERIFY_RULES, VerifyRule
from .core import Section, SectionSpec, progress_bar

__all__ = ["PROCESSOR_COMBINATIONS", "SECTION", "processors_section"]

#: (target's processors, drafter's processors): each side its own, as engines allow.
PROCESSOR_COMBINATIONS: tuple[tuple[Processors, Processors], ...] = (
    (Processors(temperature=Fraction(1, 2), top_k=2), Processors()),
    (Processors(top_p=Fraction(3, 5), min_p=Fraction(1, 4)),
     Processors(temperature=Fraction(1, 3), top_k=1)),
    (Processors(top_k=2, top_p=Fraction(1, 2), min_p=Fraction(1, 2), order=VLLM_ORDER),
     Processors(top_p=Fraction(1, 2))),
)
#: Budget of the audit: ``N`` generated tokens, lookahead 2, DSI on 2 servers.
PROCESSORS_AUDIT_TOKENS = 3


def _program(name: str, target: ProcessedLM, drafter: ProcessedLM, prompt: tuple[int, ...],
             rule: VerifyRule) -> Callable[[Any], tuple[int, ...]]:
    def program(rng: Any) -> tuple[int, ...]:
        if name == "speculative":
            return speculative(target, drafter, prompt, PROCESSORS_AUDIT_TOKENS, rng,
                               lookahead=2, verify=rule).tokens
        return dsi(target, drafter, prompt, PROCESSORS_AUDIT_TOKENS, rng, lookahead=2,
                   sp_degree=2, verify=rule, record=False).tokens
    return program


def processors_section(*, quick: bool = False, progress: bool = True) -> Section:
    """SI and DSI × every rule × processor combinations × suite pairs, each audited exactly
    against the processed target; then every processor mutant of the zoo must be killed."""
    section = Section("processors", "Speculation with sampling processors: lossless w.r.t. the "
                      "processed target; the processor mutants must fail",
                      ("check", "target processors", "drafter processors", "outcomes", "TV",
                       "verdict", "s"))
    pairs = default_suite()[:3] if quick else default_suite()
    jobs = [(name, t, d) for t, d in PROCESSOR_COMBINATIONS for name in ("speculative", "dsi")]
    start = time.perf_counter()
    for name, t_proc, d_proc in progress_bar(jobs, total=len(jobs), desc="processors",
                                             enabled=progress):
        t0 = time.perf_counter()
        outcomes, worst, equal = 0, Fraction(0), True
        for pair in pairs:
            target = ProcessedLM(pair.target, t_proc)
            drafter = ProcessedLM(pair.drafter, d_proc)
            for rule in VERIFY_RULES:
                report = check_lossless(_program(name, target, drafter, pair.prompt, rule),
                                        target, pair.prompt, PROCESSORS_AUDIT_TOKENS,
                                        greedy=rule == "greedy")
                outcomes += report.outcomes
                worst = max(worst, report.tv_distance)
                equal &= report.equal
        section.ok &= equal
        section.rows.append((f"{name} ({'+'.join(VERIFY_RULES)})", t_proc.describe(),
                             d_proc.describe(), outcomes, str(worst),
                             "lossless" if equal else "LOSSY",
                             round(time.perf_counter() - t0, 2)))
    killed = 0
    for mutant_name, promised in PROCESSOR_MUTANT_SETTINGS.items():
        t0 = time.perf_counter()
        kill = hunt(MUTANTS[mutant_name])
        killed += kill is not None
        section.ok &= kill is not None
        section.rows.append((f"mutant {mutant_name}", promised.describe(), "-", "-",
                             str(kill.tv_distance) if kill and kill.tv_distance else "-",
                             f"killed: {kill}" if kill else "NOT KILLED",
                             round(time.perf_counter() - t0, 2)))
    section.seconds = time.perf_counter() - start
    section.notes.append(f"models: {', '.join(p.name for p in pairs)}; N = "
                         f"{PROCESSORS_AUDIT_TOKENS}, lookahead 2, DSI on 2 servers; the target "
                         "law is always the processed target's (dsi_ref.base.processors: HF's "
                         "order unless VLLM_ORDER is named; ties at a cut are kept)")
    section.notes.append(f"killed {killed}/{len(PROCESSOR_MUTANT_SETTINGS)} processor mutants "
                         "(the zoo section kills them too)")
    return section


#: The section spec registered in `dsi_ref.commands.audit.TOP_SECTIONS`.
SECTION = SectionSpec("processors", processors_section)
