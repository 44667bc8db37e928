"""The zoo of wrong decoders: each a small variation of a correct one, named after a real bug.

A decoder that is wrong must fail loudly. Every mutant here reproduces the pattern of a bug seen in
speculative-decoding code; the test suite fails if any of them passes the exact audit, and
``dsi-ref audit`` reports how many were killed and the witness sequence of each.

The mutants live in `dsi_ref.audit.zoo_mutants`, grouped by what they break (a verification rule;
SI's structure or DSI's orchestration; sampling processors; cross-vocabulary speculation). This
module is the registry (`MUTANTS`, `EQUIVALENT_MUTANTS`, `CROSS_VOCAB_MUTANTS`) and the hunts
that kill them (`hunt`, `hunt_cross_vocab`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from ..base.errors import ScheduleDependenceError
from ..base.latency import Latency
from ..base.randomness import Randomness
from ..base.result import Run
from ..decoders.vocab import cross_vocab_speculative
from .exact import Witness
from .laws import check_lossless
from .schedulers import witness_summary
from .strings import CrossVocabPair, check_lossless_strings, cross_vocab_pairs
from .suite import ModelPair, default_suite
from .zoo_mutants import Mutant
from .zoo_mutants.cross_vocab import CROSS_VOCAB, CrossVocabMutant
from .zoo_mutants.orchestration import DSI_MUTANTS, EQUIVALENT, SI_MUTANTS
from .zoo_mutants.processors import PROCESSOR_MUTANT_SETTINGS, PROCESSOR_MUTANTS, STATEFUL_MUTANTS
from .zoo_mutants.verifiers import BLOCK_MUTANTS, RULE_MUTANTS, TREE_MUTANTS

__all__ = ["CROSS_VOCAB_MUTANTS", "EQUIVALENT_MUTANTS", "MUTANTS", "PROCESSOR_MUTANT_SETTINGS",
           "CrossVocabMutant", "Kill", "Mutant", "StringKill", "hunt", "hunt_cross_vocab"]

#: Every mutant by name.
MUTANTS: dict[str, Mutant] = {m.name: m for m in (
    *RULE_MUTANTS, *SI_MUTANTS, *DSI_MUTANTS, *TREE_MUTANTS, *BLOCK_MUTANTS, *PROCESSOR_MUTANTS,
    *STATEFUL_MUTANTS)}

#: Equivalent mutants: variations that look like bugs but do not change the output law (the
#: audit must NOT flag them; `hunt` returns None). Why they are lossless:
#: `dsi_ref.audit.zoo_mutants.orchestration`.
EQUIVALENT_MUTANTS: dict[str, Mutant] = {m.name: m for m in EQUIVALENT}

#: The cross-vocabulary mutants by name (hunted over strings by `hunt_cross_vocab`).
CROSS_VOCAB_MUTANTS: dict[str, CrossVocabMutant] = {m.name: m for m in CROSS_VOCAB}


@dataclass(frozen=True)
class Kill:
    """How a mutant was caught: the configuration, and the worst sequence or the witness."""

    mutant: str
    model: str
    config: str
    tv_distance: Fraction | None
    worst_sequence: tuple[int, ...] | None
    mutant_probability: Fraction | None
    target_probability: Fraction | None
    witness: Witness | None = None

    def __str__(self) -> str:
        if self.witness is not None:
            return (f"{self.model} {self.config}: schedule-dependent: "
                    f"{witness_summary(self.witness)}")
        return (f"{self.model} {self.config}: TV {self.tv_distance}, P{self.worst_sequence} = "
                f"{self.mutant_probability} vs target {self.target_probability}")


#: Latencies tried on DSI-level mutants: a fast drafter, ties (c = 1), a slow drafter (bonuses).
HUNT_LATENCIES = (Latency(), Latency(drafter=Fraction(1)), Latency(drafter=Fraction(3, 2)))


def hunt(mutant: Mutant, pairs: Sequence[ModelPair] | None = None, max_new_tokens: int = 3,
         lookahead: int = 2) -> Kill | None:
    """Look for a configuration where ``mutant`` is not lossless (exact audit); None if none.

    A schedule-dependent output law counts as a kill: some scheduler makes the law wrong.
    """
    latencies = HUNT_LATENCIES if mutant.base == "dsi" else (Latency(),)
    for latency in latencies:
        for pair in pairs if pairs is not None else default_suite():
            config = f"N={max_new_tokens} k={lookahead} c={latency.drafter}"

            def program(rng: Randomness, pair: ModelPair = pair,
                        latency: Latency = latency) -> Run:
                return mutant.decoder(pair.target, pair.drafter, pair.prompt, max_new_tokens,
                                      rng, lookahead=lookahead, latency=latency)

            target = pair.target if mutant.law is None else mutant.law(pair.target)
            try:
                report = check_lossless(program, target, pair.prompt, max_new_tokens)
            except ScheduleDependenceError as error:
                return Kill(mutant.name, pair.name, config, None, None, None, None,
                            error.witness)
            if not report.equal:
                return Kill(mutant.name, pair.name, config, report.tv_distance,
                            report.worst_sequence, report.decoder_probability,
                            report.target_probability)
    return None


@dataclass(frozen=True)
class StringKill:
    """How a cross-vocabulary mutant was caught: the pair, the configuration and the string
    whose probability differs most."""

    mutant: str
    pair: str
    config: str
    tv_distance: Fraction
    worst_string: str | None
    mutant_probability: Fraction
    target_probability: Fraction

    def __str__(self) -> str:
        return (f"{self.pair} {self.config}: TV {self.tv_distance}, P({self.worst_string!r}) = "
                f"{self.mutant_probability} vs target {self.target_probability}")



def hunt_cross_vocab(mutant: CrossVocabMutant, pairs: Sequence[CrossVocabPair] | None = None,
                     max_new_tokens: int = 3, lookahead: int = 2) -> StringKill | None:
    """Look for a toy pair where ``mutant``'s law of output strings is not the target's (exact
    audit over strings, `dsi_ref.audit.strings`); None if none."""
    for pair in pairs if pairs is not None else cross_vocab_pairs():
        def program(rng: Randomness, pair: CrossVocabPair = pair) -> tuple[int, ...]:
            return cross_vocab_speculative(
                pair.target, pair.drafter, pair.target_tokenizer, pair.drafter_tokenizer,
                pair.prompt, max_new_tokens, rng, lookahead=lookahead,
                run_class=mutant.run_class).tokens

        report = check_lossless_strings(program, pair.target, pair.target_tokenizer,
                                        pair.prompt, max_new_tokens)
        if not report.equal:
            return StringKill(mutant.name, pair.name, f"N={max_new_tokens} k={lookahead}",
                              report.tv_distance, report.worst_string,
                              report.decoder_probability, report.target_probability)
    return None
