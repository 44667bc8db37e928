"""Mutants of sampling with processors: processors applied on one side only (`Processors`), and
stateful processors not rolled back on rejection (`dsi_ref.base.stateful`). Each promises the
processed target's law (`Mutant.law`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, cast

from ...base.latency import Latency
from ...base.models import LanguageModel, Number
from ...base.processors import ProcessedLM, Processors
from ...base.randomness import Key, Randomness
from ...base.result import Run
from ...base.stateful import (
    FrequencyPenalty,
    GrammarConstraint,
    IncrementalLM,
    RepetitionPenalty,
    Slot,
    StatefulProcessor,
    TokenDFA,
    recomputed,
)
from ...decoders.common import check_inputs, model_probs
from ...decoders.speculative import SIRun, SpeculativeConfig, speculative
from ...decoders.verification import RejectionSampling
from . import Mutant

__all__ = ["PROCESSOR_MUTANTS", "PROCESSOR_MUTANT_SETTINGS", "STATEFUL_MUTANTS"]


# -- sampling processors on one side only (issue #15, item 5) ----------------------------------
# Each samples with processors (`dsi_ref.base.processors`), so the law it promises is the
# processed target's (`Mutant.law`), and each gets the processing of one side wrong.


class _VerifierProcessors(SIRun):
    """SI on a processed target (``self.target``, a `ProcessedLM`) whose verifier filters the
    raw ``p`` with processors of its own (``verifier``) at the drafts' positions, and at the
    bonus position too when ``filter_bonus`` is set (else the bonus row is the correctly processed
    one, as a regular sampler draws it)."""

    verifier: Processors = Processors()
    filter_bonus: bool = False

    def score(self) -> None:
        super().score()
        raw = cast(ProcessedLM, self.target).model
        full = self.prompt + self.context
        first = len(full) - len(self.drafts)
        rows = [self.verifier.apply(model_probs(raw, full[:first + j]))
                for j in range(len(self.drafts) + self.filter_bonus)]
        self.target_rows = (*rows, *self.target_rows[len(rows):])


class _MinPSkippedInVerification(_VerifierProcessors):
    """min-p applied where the regular sampler draws (the bonus token) and skipped by the
    verifier: vllm-project/vllm #42744 (the rejection sampler applies only the processors that
    are not "argmax-invariant", so min_p and logit_bias never reach the verified positions) and
    #42802 (its fix); #10198 is the same class as issue #15 cites it. The verified positions
    follow the raw ``p``, the bonus positions the filtered one."""

    verifier = Processors()  # BUG: min_p dropped on the verified positions


class _TopPFirstInVerification(_VerifierProcessors):
    """top-k and top-p applied in the other order by the verifier (top-p first, then top-k),
    bonus token included, than by the regular sampler (top-k then top-p, Hugging Face's and
    vLLM's order): sgl-project/sglang #36173 as issue #15 cites it. Top-p after top-k cuts at
    mass ``top_p`` of the *renormalised* top-k, so the two orders keep different sets: with
    ``top_k = 2, top_p = 3/5``, the row ``(1/3, 1/2, 1/6)`` keeps ``{1}`` (the top-k row is
    ``(2/5, 3/5, 0)``) but ``{0, 1}`` with top-p first."""

    verifier = Processors(top_k=2, top_p=Fraction(3, 5),
                          order=("temperature", "top_p", "top_k", "min_p"))  # BUG: swapped
    filter_bonus = True


class _RawQForProcessedDraft(RejectionSampling):
    """Drafts drawn from the processed ``q`` (top-k), verified as if drawn from the raw ``q``:
    huggingface/transformers #47932 (candidate generators sample from processor-applied logits
    and return the raw logits as ``q``; with the default ``top_k=50`` TV up to 0.31) and #47961
    (its fix: return the distribution the candidates were drawn from)."""

    name = "raw-q-for-processed-draft"
    drafting = Processors(top_k=2)

    def draft(self, draft_probs: Sequence[Number], rng: Randomness,
              context: tuple[int, ...]) -> int:
        # BUG: samples top-k(q); the verifier is told the raw q
        return rng.categorical(self.drafting.apply(draft_probs),
                               key=("draft", len(context), context))


def _processed_variant(settings: Processors, cls: type[SIRun] = SIRun,
                       rule: RejectionSampling | None = None) -> Callable[..., Run]:
    """SI (``cls``, with ``rule`` when given) on the target processed with ``settings``, with
    `speculative`'s signature; the drafter is used as given."""
    def decoder(target: LanguageModel, drafter: LanguageModel, prompt: Sequence[int],
                max_new_tokens: int, rng: Randomness, lookahead: int = 2,
                latency: Latency | None = None, **kwargs: Any) -> Run:
        if rule is not None:
            kwargs["verify"] = rule
        config = SpeculativeConfig(lookahead, latency=latency or Latency(), **kwargs)
        target = ProcessedLM(target, settings)
        prompt = check_inputs(target, prompt, max_new_tokens, drafter)
        return cls(target, drafter, prompt, max_new_tokens, rng, config).run()
    return decoder


def _processed_mutant(name: str, pattern: str, settings: Processors,
                      cls: type[SIRun] = SIRun, rule: RejectionSampling | None = None) -> Mutant:
    return Mutant(name, pattern, _processed_variant(settings, cls, rule), "speculative",
                  law=lambda target: ProcessedLM(target, settings))


#: The processors each mutant samples the target with (and so the law it promises).
PROCESSOR_MUTANT_SETTINGS = {
    "min-p-skipped-in-verification": Processors(min_p=Fraction(1, 2)),
    "top-k-top-p-swapped-in-verification": Processors(top_k=2, top_p=Fraction(3, 5)),
    "raw-q-for-processed-draft": Processors(top_k=2),
}

#: Processors on one side only.
PROCESSOR_MUTANTS: tuple[Mutant, ...] = (
    _processed_mutant("min-p-skipped-in-verification", "min_p applied to the bonus token only: "
                      "the verifier's p skips it (vLLM #42744/#42802)",
                      PROCESSOR_MUTANT_SETTINGS["min-p-skipped-in-verification"],
                      _MinPSkippedInVerification),
    _processed_mutant("top-k-top-p-swapped-in-verification", "the verifier applies top-p before "
                      "top-k, the sampler top-k before top-p (SGLang #36173)",
                      PROCESSOR_MUTANT_SETTINGS["top-k-top-p-swapped-in-verification"],
                      _TopPFirstInVerification),
    _processed_mutant("raw-q-for-processed-draft", "drafts sampled from top-k(q), verified with "
                      "the raw q (HF #47932/#47961)",
                      PROCESSOR_MUTANT_SETTINGS["raw-q-for-processed-draft"],
                      rule=_RawQForProcessedDraft()),
)

# -- stateful processors not rolled back on rejection (issue #15, item 5) ------------------------
# Each samples with stateful processors (`dsi_ref.base.stateful`) kept incrementally, as engines
# keep them, and skips the rollback: the law it promises is the recomputed processed target's
# (`Mutant.law`). The processors see the whole prefix (``prompt=()`` on both sides), so the
# decoder and the law agree on the parity pair's prompt too.


class _NoRollback(IncrementalLM):
    """An incremental wrapper whose rollback keeps the state of the rejected drafts: the context
    pointer moves back to the common prefix, the state does not, and the next tokens are
    advanced from there."""

    def rollback(self, slot: Slot, common: int) -> None:
        top = slot.stack[-1]
        super().rollback(slot, common)
        slot.stack[-1] = top  # BUG: the state still holds the rejected drafts


class _NoMergeHints:
    """``rng`` without ``merge_point``: a wrapper with hidden state (the mutants') makes the rest
    of a run depend on more than the run's own state, so the exact engine must not merge."""

    def __init__(self, rng: Randomness) -> None:
        self.rng = rng

    def categorical(self, weights: Sequence[Fraction | float], key: Key = None) -> int:
        return self.rng.categorical(weights, key=key)

    def bernoulli(self, p: Fraction | float, key: Key = None) -> bool:
        return self.rng.bernoulli(p, key=key)

    def choose(self, options: Sequence[Any], key: Key = None) -> Any:
        return self.rng.choose(options, key=key)

    def uniform(self, key: Key = None, bits: int | None = None) -> float:
        return self.rng.uniform(key=key, bits=bits)


StatefulStack = Callable[[LanguageModel], list[StatefulProcessor]]


def _penalties(model: LanguageModel) -> list[StatefulProcessor]:
    """The stack of ``penalty-counts-rejected-drafts``: osaurus-ai/vmlx-swift #357 (fixed by
    #361), where the processor copies meant to be thrown away share the penalty counts, so "the
    draft loop records every PROPOSED token ... rejected drafts are recorded into the real
    processor" (there the presence and frequency penalties; the repetition penalty's buffer
    copied cleanly). With `_NoRollback` the rejected drafts stay counted; the same report's
    second half, accepted tokens recorded twice, is not reproduced."""
    return [RepetitionPenalty(2), FrequencyPenalty(Fraction(1, 2))]


def _at_most_one_zero(model: LanguageModel) -> list[StatefulProcessor]:
    """A grammar with memory: token 0 at most once (``a*(ba*)?``, ``b`` = 0, ``a`` any other
    non-EOS token)."""
    others = set(range(1, model.vocab_size)) - {model.eos}
    dfa = TokenDFA.from_regex("a*(ba*)?", model.vocab_size, model.eos,
                              symbols={"a": others, "b": {0}})
    return [GrammarConstraint(dfa, "at most one 0")]


def _stateful_variant(target_processors: StatefulStack, drafter_processors: StatefulStack,
                      cls: type[IncrementalLM] = IncrementalLM) -> Callable[..., Run]:
    """SI on the target and drafter wrapped by ``cls`` (fresh per run) with the processors each
    stack gives, with `speculative`'s signature; merge hints hidden (`_NoMergeHints`)."""
    def decoder(target: LanguageModel, drafter: LanguageModel, prompt: Sequence[int],
                max_new_tokens: int, rng: Randomness, lookahead: int = 2,
                latency: Latency | None = None, **kwargs: Any) -> Run:
        t = cls(target, target_processors(target))
        d = cls(drafter, drafter_processors(drafter))
        return speculative(t, d, prompt, max_new_tokens, _NoMergeHints(rng), lookahead,
                           latency=latency, **kwargs)
    return decoder


def _stateful_mutant(name: str, pattern: str, target_processors: StatefulStack,
                     drafter_processors: StatefulStack) -> Mutant:
    return Mutant(name, pattern, _stateful_variant(target_processors, drafter_processors,
                                                   _NoRollback), "speculative",
                  law=lambda target: recomputed(target, target_processors(target)))


#: Stateful processors not rolled back.
STATEFUL_MUTANTS: tuple[Mutant, ...] = (
    _stateful_mutant("penalty-counts-rejected-drafts", "repetition and frequency penalties whose "
                     "state keeps counting rejected drafts (vmlx-swift #357/#361: the draft "
                     "loop records every proposed token into the real processor)", _penalties,
                     _penalties),
    _stateful_mutant("grammar-not-rolled-back", "a grammar matcher advanced on drafts and not "
                     "rolled back on rejection (vLLM #53046/#52805, SGLang #14464)",
                     _at_most_one_zero, lambda model: []),
)
