"""The ``cross-vocab`` section of ``dsi-ref audit``: SLEM, TLI and SLRS against the target's law of
output strings, their exact acceptance, and the cross-vocabulary mutants (each must be killed).
"""

from __future__ import annotations

import time
from typing import Any

from ...audit.strings import acceptance, check_lossless_strings, cross_vocab_pairs
from ...audit.zoo import CROSS_VOCAB_MUTANTS, hunt_cross_vocab
from ...decoders.vocab import CROSS_VOCAB_ALGORITHMS, cross_vocab_speculative
from .core import Section, SectionSpec, progress_bar

__all__ = ["AUDIT_TOKENS", "SECTION", "cross_vocab_section"]

#: Target tokens per audited run (the Done-when of issue 15: 4 target tokens).
AUDIT_TOKENS = 4


def cross_vocab_section(*, quick: bool = False, progress: bool = True) -> Section:
    """Exact string-level losslessness and acceptance of every cross-vocabulary algorithm on the
    toy pairs, and the kill of every cross-vocabulary mutant."""
    section = Section("cross-vocab", "Drafters of another vocabulary (SLEM, TLI, SLRS): exact "
                      "law of output strings, acceptance, mutants",
                      ("decoder", "pair", "k", "strings", "TV", "verdict",
                       "tokens/target forward", "s"))
    lookaheads = (2,) if quick else (1, 2)
    jobs = [(pair, algorithm, k) for pair in cross_vocab_pairs() for k in lookaheads
            for algorithm in CROSS_VOCAB_ALGORITHMS]
    start = time.perf_counter()
    for pair, algorithm, k in progress_bar(jobs, total=len(jobs), desc="cross-vocab",
                                           enabled=progress):
        t0 = time.perf_counter()

        def program(rng: Any, pair: Any = pair, algorithm: str = algorithm, k: int = k
                    ) -> tuple[int, ...]:
            return cross_vocab_speculative(pair.target, pair.drafter, pair.target_tokenizer,
                                           pair.drafter_tokenizer, pair.prompt, AUDIT_TOKENS,
                                           rng, lookahead=k, algorithm=algorithm).tokens

        report = check_lossless_strings(program, pair.target, pair.target_tokenizer,
                                        pair.prompt, AUDIT_TOKENS)
        stats = acceptance(pair, algorithm, AUDIT_TOKENS, k)
        section.ok &= report.equal
        section.rows.append((algorithm.upper(), pair.name, k, report.outcomes,
                             str(report.tv_distance),
                             "lossless" if report.equal else "LOSSY",
                             round(float(stats["tokens"] / stats["iterations"]), 4),
                             round(time.perf_counter() - t0, 2)))
    for mutant in CROSS_VOCAB_MUTANTS.values():
        t0 = time.perf_counter()
        kill = hunt_cross_vocab(mutant)
        section.ok &= kill is not None
        section.rows.append((mutant.name, kill.pair if kill else "-", 2, "-",
                             str(kill.tv_distance) if kill else "0",
                             "killed" if kill else "NOT KILLED", "-",
                             round(time.perf_counter() - t0, 2)))
    section.seconds = time.perf_counter() - start
    section.notes.append(f"N = {AUDIT_TOKENS} target tokens (or until EOS); strings are the "
                         "target ids decoded with the target's tokenizer; tokens/target forward "
                         "is E[output length] / E[target forwards], exact; mutants are hunted "
                         "at N = 3 (dsi_ref.audit.zoo.hunt_cross_vocab)")
    return section


#: The section spec registered in `dsi_ref.commands.audit.TOP_SECTIONS`.
SECTION = SectionSpec("cross-vocab", cross_vocab_section)
