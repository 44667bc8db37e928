"""Mutants of cross-vocabulary speculation: `SLEMRun` with one step wrong.

Their bugs show in the law of output *strings*, so they live apart from the same-vocabulary
mutants (`Mutant`, hunted with `speculative`'s signature) and are hunted by
`dsi_ref.audit.zoo.hunt_cross_vocab` with the exact audit over strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...decoders.vocab import CrossVocabRun, SLEMRun

__all__ = ["CROSS_VOCAB", "CrossVocabMutant"]


class _BosReaddedOnRetokenisation(SLEMRun):
    """SLEM whose decided target ids re-enter the sequence through the tokenizer with its
    special tokens on (``add_special_tokens=True``): a BOS before every iteration's tokens. The
    target then conditions on a start-of-text marker in mid-sequence and the BOS eats the
    budget. huggingface/transformers #46124 ("unintentionally adding a BOS token during every
    iterative re-tokenization step ... stuttering in the generated sequence (``<s> Hello <s>
    world``)") in `AssistedCandidateGeneratorDifferentTokenizers` and
    `UniversalSpeculativeDecodingGenerator`."""

    name = "cross-vocab-bos-readded"

    def commit(self, decided: Sequence[int]) -> None:
        bos = self.target_tokenizer.encode("", add_bos=True)  # BUG: the special tokens too
        self.out.extend(bos + tuple(decided))


class _AcceptanceOnTokenIds(SLEMRun):
    """SLEM whose string-level acceptance compares ids across vocabularies: the target's draw
    ``y_j`` (an id of ``T``) is matched against the drafter's token ``d_j`` (an id of ``D``) and,
    on equal ids, the *drafter's* string is committed. The bug class of cross-tokenizer code
    that maps vocabularies by id instead of by string (what HF #35029's
    `AssistantToTargetTranslator` and vLLM #38174's vocabulary mapping exist to prevent): an
    id means a different string in each vocabulary."""

    name = "cross-vocab-acceptance-on-ids"

    def iteration(self) -> None:
        drafted = self.draft(self.drafter_context()) if self.room > 0 else ()
        decided: list[int] = []
        for d in drafted[:self.room]:
            y = self.rng.categorical(self.target_row(decided))
            if y != d:  # BUG: an id of T compared with an id of D
                decided.append(y)
                self.commit(decided)
                return
            piece = self.drafter_tokenizer.decode((d,))  # BUG: the drafter's string committed
            decided.extend(self.target_tokenizer.encode(piece))
            if self.target.eos in decided:
                self.commit(decided)
                return
        decided.append(self.rng.categorical(self.target_row(decided)))
        self.commit(decided)


@dataclass(frozen=True)
class CrossVocabMutant:
    """A wrong cross-vocabulary decoder: a `CrossVocabRun` subclass and its bug pattern."""

    name: str
    pattern: str
    run_class: type[CrossVocabRun]
    base: str = "cross_vocab_speculative"


#: The cross-vocabulary mutants (hunted over strings by `dsi_ref.audit.zoo.hunt_cross_vocab`).
CROSS_VOCAB: tuple[CrossVocabMutant, ...] = (
    CrossVocabMutant("cross-vocab-bos-readded", "a BOS re-added on re-tokenisation before "
                     "every iteration's tokens (HF #46124)", _BosReaddedOnRetokenisation),
    CrossVocabMutant("cross-vocab-acceptance-on-ids", "string-level acceptance done on token "
                     "ids across vocabularies", _AcceptanceOnTokenIds),
)
