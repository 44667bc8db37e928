"""Mutants of the decoders' structure: SI with one structural step wrong (a subclass of `SIRun`),
DSI with one orchestration rule wrong (a subclass of `DSIRun`) or replaced by a race; and the
equivalent mutants, variations that look like bugs but keep the output law.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

from ...base.latency import Latency
from ...base.models import LanguageModel, Number
from ...base.randomness import Key, Randomness
from ...base.result import Run
from ...decoders.autoregressive import autoregressive
from ...decoders.common import check_inputs, model_probs
from ...decoders.dsi import DSIConfig, DSIRun, Task
from ...decoders.speculative import SIRun, SpeculativeConfig, speculative
from . import Mutant

__all__ = ["DSI_MUTANTS", "EQUIVALENT", "SI_MUTANTS"]


# -- SI with one structural step wrong ------------------------------------------------------------


class _NoBreakAfterRejection(SIRun):
    def verify(self) -> bool:
        every_accepted = True
        for j in range(len(self.drafts)):
            # BUG: keeps verifying the later drafts after a rejection
            every_accepted = self.commit(self.target_rows[j], j).accepted and every_accepted
            if self.done:
                return False
        return every_accepted


class _BonusFromDrafter(SIRun):
    def bonus(self) -> None:
        # BUG: the bonus token is drawn from the drafter
        self.commit(self.model_rows("drafter", self.context, 1)[0])


class _BonusOffByOne(SIRun):
    def bonus(self) -> None:
        # BUG: p of the last draft's position instead of the position after it
        self.commit(self.target_rows[max(len(self.drafts) - 1, 0)])


class _StaleTargetProbs(SIRun):
    stale: Sequence[Number] | None = None  # p after the last rejection, computed on its draft

    def verify(self) -> bool:
        if self.stale is not None:  # BUG: p at the first position comes from the old forward
            self.target_rows = (self.stale, *self.target_rows[1:])
            self.stale = None
        start = len(self.tokens)
        every_accepted = super().verify()
        if not (every_accepted or self.done):  # rejected at position len(tokens) - 1
            self.stale = self.target_rows[len(self.tokens) - start]
        return every_accepted


class _NoBonus(SIRun):
    def window(self) -> int:
        return min(self.lookahead, self.n - len(self.tokens))  # drafts up to the budget ...

    def bonus(self) -> None:
        return  # ... and never draws a bonus token


def _si_variant(cls: type[SIRun]) -> Callable[..., Run]:
    """``cls`` run as a decoder with `speculative`'s signature (rejection sampling unless
    ``verify=`` says otherwise)."""
    def decoder(target: LanguageModel, drafter: LanguageModel, prompt: Sequence[int],
                max_new_tokens: int, rng: Randomness, lookahead: int = 2,
                latency: Latency | None = None, **kwargs: Any) -> Run:
        config = SpeculativeConfig(lookahead, latency=latency or Latency(), **kwargs)
        prompt = check_inputs(target, prompt, max_new_tokens, drafter)
        return cls(target, drafter, prompt, max_new_tokens, rng, config).run()
    return decoder


# -- DSI with one orchestration rule wrong -------------------------------------------------------


class _CommitsPreempted(DSIRun):
    def preempt(self, task: Task, why: str) -> None:
        if why.startswith(("rejected", "bonus")):
            return  # BUG: "preempted" tasks keep running and their p (stale context) is used
        super().preempt(task, why)


class _StaleRowsAfterRejection(DSIRun):
    def invalidate(self, why: str) -> None:
        kept = dict(self.supplied)
        super().invalidate(why)
        self.supplied = kept  # BUG: p computed on the rejected draft stays available


class _FrontierResultMisrouted(DSIRun):
    def preempt(self, task: Task, why: str) -> None:
        if why == "frontier moved":
            return  # BUG: the stale frontier forward is left running ...
        super().preempt(task, why)

    def target_rows(self, task: Task) -> dict[int, tuple[Number, ...]]:
        if task.frontier and task.first < self.frontier:
            # ... and its p, computed for an earlier frontier, is routed to the current one: the
            # response is matched by server, not by the position it was requested for
            return {self.frontier: model_probs(self.target,
                                               self.prompt + task.context[:task.first])}
        return super().target_rows(task)


class _LogitsOffByOne(DSIRun):
    def target_rows(self, task: Task) -> dict[int, tuple[Number, ...]]:
        # BUG: the row for position j > first is read at index j - 1 of the task's logits (the
        # classic `logits[:, -k:]` vs `logits[:, -k-1:-1]` slip): p(. | context[:j-1]) is used
        return {position: model_probs(self.target, self.prompt
                                      + task.context[:position - (position > task.first)])
                for position in range(max(task.first, self.frontier), task.last + 1)}


class _KeepsDraftAfterBonus(DSIRun):
    def invalidate(self, why: str) -> None:
        if why.startswith("bonus"):
            return  # the draft in flight, for the decided position, is delivered as the next one
        super().invalidate(why)


def _dsi_variant(cls: type[DSIRun]) -> Callable[..., Run]:
    def decoder(target: LanguageModel, drafter: LanguageModel, prompt: Sequence[int],
                max_new_tokens: int, rng: Randomness, lookahead: int = 2, sp_degree: int = 2,
                latency: Latency | None = None, **kwargs: Any) -> Run:
        config = DSIConfig(lookahead, sp_degree, latency or Latency(), **kwargs)
        prompt = check_inputs(target, prompt, max_new_tokens, drafter)
        return cls(target, drafter, prompt, max_new_tokens, rng, config).run()
    return decoder


class _Namespaced:
    """``rng`` with every key prefixed: draws independent of the same decisions elsewhere."""

    def __init__(self, rng: Randomness, namespace: str) -> None:
        self.rng, self.namespace = rng, namespace

    def _key(self, key: Key) -> Key:
        return None if key is None else (self.namespace + ":" + str(key[0]), *key[1:]) \
            if isinstance(key, tuple) and key and isinstance(key[0], str) else (self.namespace,
                                                                                  key)

    def categorical(self, weights: Sequence[Fraction | float], key: Key = None) -> int:
        return self.rng.categorical(weights, key=self._key(key))

    def bernoulli(self, p: Fraction | float, key: Key = None) -> bool:
        return self.rng.bernoulli(p, key=self._key(key))

    def choose(self, options: Sequence[Any], key: Key = None) -> Any:
        return self.rng.choose(options, key=key)

    def uniform(self, key: Key = None, bits: int | None = None) -> float:
        return self.rng.uniform(key=self._key(key), bits=bits)


def _race(target: LanguageModel, drafter: LanguageModel, prompt: Sequence[int],
          max_new_tokens: int, rng: Randomness, lookahead: int = 2,
          latency: Latency | None = None, **_: Any) -> Run:
    # BUG: a target-only thread and the speculative path run with independent randomness and
    # the first to finish wins — the winner is chosen by how lucky the drafts were
    alone = autoregressive(target, prompt, max_new_tokens, _Namespaced(rng, "target-only"),
                           latency=latency)
    spec = speculative(target, drafter, prompt, max_new_tokens, _Namespaced(rng, "speculative"),
                       lookahead, latency=latency)
    return spec if spec.time <= alone.time else alone


#: SI with one structural step wrong.
SI_MUTANTS: tuple[Mutant, ...] = (
    Mutant("no-break-after-rejection", "keeps verifying drafts after the first rejection",
           _si_variant(_NoBreakAfterRejection), "speculative"),
    Mutant("bonus-from-q", "the bonus token is drawn from the drafter",
           _si_variant(_BonusFromDrafter), "speculative"),
    Mutant("bonus-off-by-one", "the bonus token uses p of the last draft's position",
           _si_variant(_BonusOffByOne), "speculative"),
    Mutant("stale-target-probs", "after a rejection, verifies against p computed on the "
           "rejected draft", _si_variant(_StaleTargetProbs), "speculative"),
)

#: DSI with one orchestration rule wrong, and the race.
DSI_MUTANTS: tuple[Mutant, ...] = (
    Mutant("dsi-commits-preempted", "DSI commits with p from a task built on a rejected draft",
           _dsi_variant(_CommitsPreempted), "dsi"),
    Mutant("dsi-stale-rows", "DSI keeps p computed on a rejected draft after the rejection",
           _dsi_variant(_StaleRowsAfterRejection), "dsi"),
    Mutant("dsi-frontier-result-misrouted", "DSI leaves a stale frontier forward running and "
           "uses its p at the current frontier (response matched by server, not by position)",
           _dsi_variant(_FrontierResultMisrouted), "dsi"),
    Mutant("dsi-logits-off-by-one", "DSI reads a verification task's p for position j from the "
           "logits of position j - 1", _dsi_variant(_LogitsOffByOne), "dsi"),
    Mutant("race-independent", "races a target-only thread and SI with independent randomness, "
           "keeps whichever finishes first", _race, "dsi"),
)

#: Equivalent mutants: variations that look like bugs but do not change the output law (the
#: audit must NOT flag them; `dsi_ref.audit.zoo.hunt` returns None). Note: why they are
#: lossless. A missing bonus token only means that every position is decided against a draft,
#: which rejection sampling does losslessly. A draft kept after a bonus token was drafted on a
#: context that is no longer the speculative sequence, but it is verified against the very row
#: ``q`` it was sampled from, and rejection sampling is lossless for any proposal law it is told
#: truthfully.
EQUIVALENT: tuple[Mutant, ...] = (
    Mutant("no-bonus", "never draws a bonus token: drafts up to the budget instead",
           _si_variant(_NoBonus), "speculative"),
    Mutant("dsi-keeps-draft-after-bonus", "DSI keeps the draft in flight after a bonus "
           "token and verifies it (with its own q) at the next position",
           _dsi_variant(_KeepsDraftAfterBonus), "dsi"),
)
