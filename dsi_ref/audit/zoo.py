"""The zoo of wrong decoders: each a small variation of a correct one, named after a real bug.

A decoder that is wrong must fail loudly. Every mutant here reproduces the pattern of a bug seen in
speculative-decoding code; the test suite fails if any of them passes the exact audit, and
``dsi-ref audit`` reports how many were killed and the witness sequence of each.

Three kinds of mutation, each overriding one step of a correct decoder:

* a verification rule with one step changed (a subclass of `RejectionSampling` passed as
  ``verify=`` to the correct `speculative`);
* SI with one structural step changed (a subclass of `SIRun`: the verify loop, the bonus token);
* DSI with one orchestration rule changed (a subclass of `DSIRun`), or DSI replaced by a race.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, cast

from ..base.errors import ScheduleDependenceError
from ..base.latency import Latency
from ..base.models import LanguageModel, Number
from ..base.processors import ProcessedLM, Processors
from ..base.randomness import Key, Randomness
from ..base.result import Run
from ..base.stateful import (
    FrequencyPenalty,
    GrammarConstraint,
    IncrementalLM,
    RepetitionPenalty,
    Slot,
    StatefulProcessor,
    TokenDFA,
    recomputed,
)
from ..decoders.autoregressive import autoregressive
from ..decoders.common import check_inputs, model_probs
from ..decoders.dsi import DSIConfig, DSIRun, Task
from ..decoders.speculative import SIRun, SpeculativeConfig, speculative
from ..decoders.tree import (
    EagleTopK,
    RecursiveRejectionWithoutReplacement,
    TreeRule,
    normalise,
    role,
    tree_speculative,
)
from ..decoders.verification import BlockVerification, RejectionSampling, argmax, residual
from ..decoders.vocab import CrossVocabRun, SLEMRun, cross_vocab_speculative
from .exact import Witness
from .laws import check_lossless
from .schedulers import witness_summary
from .strings import CrossVocabPair, check_lossless_strings, cross_vocab_pairs
from .suite import ModelPair, default_suite

__all__ = ["CROSS_VOCAB_MUTANTS", "EQUIVALENT_MUTANTS", "MUTANTS", "CrossVocabMutant", "Kill",
           "Mutant", "StringKill", "hunt", "hunt_cross_vocab"]


@dataclass(frozen=True)
class Mutant:
    """A wrong decoder: its name, the real bug pattern, and a callable with `speculative`'s
    signature ``(target, drafter, prompt, max_new_tokens, rng, lookahead=..., **kwargs)``."""

    name: str
    pattern: str
    decoder: Callable[..., Run]
    base: str  # "speculative" or "dsi"
    #: The model whose law the decoder promises, from the suite's target (``None``: the target
    #: itself). A decoder that samples with processors promises the processed target.
    law: Callable[[LanguageModel], LanguageModel] | None = None


# -- verification rules with one step wrong ------------------------------------------------------


class _GreedyDraftSoftVerify(RejectionSampling):
    name = "greedy-draft-soft-q"

    def draft(self, draft_probs: Sequence[Number], rng: Randomness,
              context: tuple[int, ...]) -> int:
        return argmax(draft_probs)  # BUG: drafts argmax q, but accepts with min(1, p/q)


class _TemperatureDraft(RejectionSampling):
    name = "tempered-draft"

    def draft(self, draft_probs: Sequence[Number], rng: Randomness,
              context: tuple[int, ...]) -> int:
        sharpened = [q * q for q in draft_probs]  # BUG: samples q^(1/T), T = 1/2; verifies with q
        return rng.categorical(sharpened, key=("draft", len(context), context))


class _ResidualFromTarget(RejectionSampling):
    name = "residual-from-p"

    def residual(self, target_probs: Sequence[Number], draft_probs: Sequence[Number],
                 rng: Randomness, context: tuple[int, ...]) -> int:
        return self.bonus(target_probs, rng, context)  # BUG: resamples p instead of (p - q)+


class _ResidualUnclipped(RejectionSampling):
    name = "residual-unclipped"

    def residual(self, target_probs: Sequence[Number], draft_probs: Sequence[Number],
                 rng: Randomness, context: tuple[int, ...]) -> int:
        weights: list[Number] = [abs(Fraction(p) - Fraction(q))
                                 for p, q in zip(target_probs, draft_probs, strict=True)]
        return rng.categorical(weights, key=("residual", len(context), context))  # BUG: |p - q|


class _ResidualUnnormalised(RejectionSampling):
    name = "residual-unnormalised"

    def residual(self, target_probs: Sequence[Number], draft_probs: Sequence[Number],
                 rng: Randomness, context: tuple[int, ...]) -> int:
        weights = residual(target_probs, draft_probs)
        # BUG: inverse CDF of the unnormalised (p - q)+ against u ~ U(0, 1): the missing mass
        # 1 - sum (p - q)+ falls through to the last token
        weights[-1] += 1 - sum(weights)
        return rng.categorical(weights, key=("residual", len(context), context))


class _AcceptRatioInverted(RejectionSampling):
    name = "accept-ratio-inverted"

    def accept(self, target_probs: Sequence[Number], draft_probs: Sequence[Number], draft: int,
               rng: Randomness, context: tuple[int, ...]) -> bool:
        p, q = target_probs[draft], draft_probs[draft]
        ratio = Fraction(1) if q >= p else Fraction(q) / Fraction(p)  # BUG: min(1, q/p)
        return rng.bernoulli(ratio, key=("accept", len(context), context))


class _SharedUniform(RejectionSampling):
    name = "shared-uniform"

    def accept(self, target_probs: Sequence[Number], draft_probs: Sequence[Number], draft: int,
               rng: Randomness, context: tuple[int, ...]) -> bool:
        p, q = target_probs[draft], draft_probs[draft]
        # BUG: the acceptance coin reuses the uniform that drew the draft
        return bool(p >= q or rng.bernoulli(p / q, key=("draft", len(context), context)))


class _ReseededEachStep(RejectionSampling):
    name = "rng-reseeded-each-step"

    def accept(self, target_probs: Sequence[Number], draft_probs: Sequence[Number], draft: int,
               rng: Randomness, context: tuple[int, ...]) -> bool:
        p, q = target_probs[draft], draft_probs[draft]
        # BUG: the generator is re-seeded with the same seed before every acceptance test, so
        # every position reuses one uniform (the acceptance coins are perfectly correlated)
        return bool(p >= q or rng.bernoulli(p / q, key=("accept",)))


class _TemperatureInAcceptOnly(RejectionSampling):
    name = "processor-one-side"

    def accept(self, target_probs: Sequence[Number], draft_probs: Sequence[Number], draft: int,
               rng: Randomness, context: tuple[int, ...]) -> bool:
        # BUG: a logits processor (temperature 2) is applied to p in the accept test only
        flat = [Fraction(p) ** 2 for p in target_probs]
        ratio = flat[draft] / sum(flat) / Fraction(draft_probs[draft])
        return bool(ratio >= 1 or rng.bernoulli(ratio, key=("accept", len(context), context)))


class _WrongSideAtTies(RejectionSampling):
    """The uniform is drawn on a grid of ``1/grid`` (a low-precision RNG), so ``u = p/q`` has
    positive probability; accepting on ``u <= p/q`` instead of ``u < p/q`` is then biased."""

    name = "accept-wrong-side-at-ties"
    grid = 12

    def accept(self, target_probs: Sequence[Number], draft_probs: Sequence[Number], draft: int,
               rng: Randomness, context: tuple[int, ...]) -> bool:
        ratio = Fraction(target_probs[draft]) / Fraction(draft_probs[draft])
        u = Fraction(rng.categorical([1] * self.grid, key=("accept", len(context), context)),
                     self.grid)
        return u <= ratio  # BUG: the correct test is u < p/q


def _with_rule(rule: RejectionSampling) -> Callable[..., Run]:
    def decoder(target: LanguageModel, drafter: LanguageModel, prompt: Sequence[int],
                max_new_tokens: int, rng: Randomness, lookahead: int = 2, **kwargs: Any) -> Run:
        kwargs.pop("verify", None)
        return speculative(target, drafter, prompt, max_new_tokens, rng, lookahead, rule,
                           **kwargs)
    return decoder


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

    def state(self) -> Hashable:
        return (super().state(), self.stale)


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


def _mutants() -> dict[str, Mutant]:
    table = [
        ("greedy-draft-soft-q", "drafts greedily (argmax q) but accepts with the soft q",
         _with_rule(_GreedyDraftSoftVerify()), "speculative"),
        ("tempered-draft", "drafts from a temperature-scaled q, verifies with the plain q",
         _with_rule(_TemperatureDraft()), "speculative"),
        ("residual-from-p", "on rejection resamples p instead of the residual (p - q)+",
         _with_rule(_ResidualFromTarget()), "speculative"),
        ("residual-unclipped", "residual not clipped at 0: samples |p - q|",
         _with_rule(_ResidualUnclipped()), "speculative"),
        ("residual-unnormalised", "residual not renormalised: the missing mass goes to the last "
         "token", _with_rule(_ResidualUnnormalised()), "speculative"),
        ("accept-ratio-inverted", "acceptance probability min(1, q/p) instead of min(1, p/q)",
         _with_rule(_AcceptRatioInverted()), "speculative"),
        ("shared-uniform", "the acceptance coin reuses the draft's uniform",
         _with_rule(_SharedUniform()), "speculative"),
        ("rng-reseeded-each-step", "the RNG is re-seeded before every acceptance test: one "
         "uniform shared by all positions", _with_rule(_ReseededEachStep()), "speculative"),
        ("processor-one-side", "a logits processor (temperature) applied to p in the accept "
         "test only", _with_rule(_TemperatureInAcceptOnly()), "speculative"),
        ("accept-wrong-side-at-ties", "u <= p/q instead of u < p/q with a coarse uniform",
         _with_rule(_WrongSideAtTies()), "speculative"),
        ("no-break-after-rejection", "keeps verifying drafts after the first rejection",
         _si_variant(_NoBreakAfterRejection), "speculative"),
        ("bonus-from-q", "the bonus token is drawn from the drafter",
         _si_variant(_BonusFromDrafter), "speculative"),
        ("bonus-off-by-one", "the bonus token uses p of the last draft's position",
         _si_variant(_BonusOffByOne), "speculative"),
        ("stale-target-probs", "after a rejection, verifies against p computed on the "
         "rejected draft", _si_variant(_StaleTargetProbs), "speculative"),
        ("dsi-commits-preempted", "DSI commits with p from a task built on a rejected draft",
         _dsi_variant(_CommitsPreempted), "dsi"),
        ("dsi-stale-rows", "DSI keeps p computed on a rejected draft after the rejection",
         _dsi_variant(_StaleRowsAfterRejection), "dsi"),
        ("dsi-frontier-result-misrouted", "DSI leaves a stale frontier forward running and "
         "uses its p at the current frontier (response matched by server, not by position)",
         _dsi_variant(_FrontierResultMisrouted), "dsi"),
        ("dsi-logits-off-by-one", "DSI reads a verification task's p for position j from the "
         "logits of position j - 1", _dsi_variant(_LogitsOffByOne), "dsi"),
        ("race-independent", "races a target-only thread and SI with independent randomness, "
         "keeps whichever finishes first", _race, "dsi"),
    ]
    return {name: Mutant(name, pattern, fn, base) for name, pattern, fn, base in table}


#: Every mutant by name.
MUTANTS: dict[str, Mutant] = _mutants()


# -- tree verification with one step wrong (issue #14, item 5) -----------------------------------
# Each overrides one step of a rule of `dsi_ref.decoders.tree` and runs `tree_speculative` with
# the tree (2, 1, ..., 1) of depth ``lookahead``: two drafts at the first position.


class _TreeNoResidualUpdate(TreeRule):
    """Recursive rejection sampling that tests every sibling against the same ``p`` and draws
    the token after a rejected level from ``p``: the step ``p' ← norm((p' − q)+)`` after a
    rejected sibling is missing. Models the tree verifiers whose losslessness users dispute
    (flexflow-serve #10, SafeAILab/EAGLE #93): multi-step speculative sampling is lossless only
    with the residual carried from one sibling to the next."""

    name = "tree-no-residual-update"

    def update(self, target: Sequence[Number], proposal: Sequence[Number],
               token: int) -> list[Number]:
        return list(target)  # BUG: p' stays p after a rejected sibling


class _IidVerifiedAsWithoutReplacement(RecursiveRejectionWithoutReplacement):
    """Siblings drawn i.i.d. from ``q`` (with replacement), verified as if drawn without
    replacement: the test ``min(1, p'(x)/q_j(x))`` and the residual use ``q_j``, ``q`` with the
    earlier siblings removed and renormalised. The proposal law handed to the verifier is not
    the one the draft came from (SafeAILab/EAGLE #74: "what we need is the actual distribution
    from which each draft token is sampled"); a repeated sibling has ``q_j(x) = 0``: ratio
    infinite, accepted."""

    name = "tree-iid-verified-as-without-replacement"

    def children(self, draft_probs: Sequence[Number], k: int, rng: Randomness,
                 context: tuple[int, ...]) -> list[tuple[int, Sequence[Number]]]:
        out: list[tuple[int, Sequence[Number]]] = []
        left: list[Number] = list(draft_probs)
        for j in range(k):
            x = rng.categorical(draft_probs, key=(role("draft", j), len(context), context))
            out.append((x, normalise(left) if sum(left) > 0 else list(left)))  # BUG: told q_j
            left[x] = 0 * left[x]
        return out


class _PointMassSoftQ(EagleTopK):
    """EAGLE's deterministic top-k children verified as if they were samples of ``q``: accept
    with ``min(1, p'(x)/q(x))`` and update ``p' ← norm((p' − q)+)`` (the rule SpecInfer proves
    for ``x ~ q``). The dispute of SafeAILab/EAGLE #183 and #221: top-k children are point
    masses, and only the point-mass test ``p'(x)`` is lossless for them."""

    name = "tree-point-mass-soft-q"

    def accept(self, target: Sequence[Number], proposal: Sequence[Number], token: int,
               sibling: int, rng: Randomness, context: tuple[int, ...]) -> bool:
        return TreeRule.accept(self, target, proposal, token, sibling, rng, context)  # BUG

    def update(self, target: Sequence[Number], proposal: Sequence[Number],
               token: int) -> list[Number]:
        return TreeRule.update(self, target, proposal, token)  # BUG: (p' − q)+ of the soft q


def _with_tree_rule(rule: TreeRule) -> Callable[..., Run]:
    """``rule`` run by `tree_speculative` with `speculative`'s signature: tree (2, 1, ..., 1) of
    depth ``lookahead``."""
    def decoder(target: LanguageModel, drafter: LanguageModel, prompt: Sequence[int],
                max_new_tokens: int, rng: Randomness, lookahead: int = 2,
                latency: Latency | None = None, **kwargs: Any) -> Run:
        kwargs.pop("verify", None)
        return tree_speculative(target, drafter, prompt, max_new_tokens, rng,
                                tree=(2,) + (1,) * (lookahead - 1), verify=rule,
                                latency=latency)
    return decoder


MUTANTS.update({m.name: m for m in (
    Mutant("tree-no-residual-update", "tree verification without the residual update after a "
           "rejected sibling", _with_tree_rule(_TreeNoResidualUpdate()), "tree_speculative"),
    Mutant("tree-iid-verified-as-without-replacement", "siblings drafted with replacement but "
           "verified as drawn without", _with_tree_rule(_IidVerifiedAsWithoutReplacement()),
           "tree_speculative"),
    Mutant("tree-point-mass-soft-q", "top-k (point-mass) children verified against the soft q",
           _with_tree_rule(_PointMassSoftQ()), "tree_speculative"),
)})

# -- block verification with one step wrong (issue #14, item 5) ---------------------------------
# Each overrides one step of `BlockVerification` and runs the correct `speculative` with it.


class _BlockTokenTest(BlockVerification):
    """Block verification that keeps the token-level machinery: the coin for accepting ``x_≤i``
    is the token-level ``min(1, p_i(x_i)/q_i(x_i))`` of the last draft alone, scanned from the
    longest prefix down, and the correction is the unadjusted ``(p − q)+``.
    vllm-project/vllm-ascend #7807 (fixed by #7808): "uses the same acceptance criteria as the
    token-wise algorithm and does not adjust the distribution according to the correct formula"
    — and #7603: ``cumprod(p/q)`` thresholds that are not the paper's ``h_i``."""

    def select(self, weights: Sequence[Number], target_rows: Sequence[Sequence[Number]],
               draft_rows: Sequence[Sequence[Number]], drafts: Sequence[int], rng: Randomness,
               context: tuple[int, ...]) -> int:
        for i in range(len(drafts), 0, -1):
            x = drafts[i - 1]
            ratio = target_rows[i - 1][x] / draft_rows[i - 1][x]
            accepted = context + tuple(drafts[:i])
            if rng.bernoulli(ratio if ratio < 1 else 1, key=("block", len(accepted), accepted)):
                return i  # BUG: the token-level test, and a later prefix after a failed one
        return 0

    def correction(self, weight: Number, target_row: Sequence[Number],
                   draft_row: Sequence[Number], rng: Randomness, context: tuple[int, ...]) -> int:
        return super().correction(1, target_row, draft_row, rng, context)  # BUG: (p − q)+


class _BlockUnadjustedResidual(BlockVerification):
    """Block verification with the paper's acceptance but the token-level residual
    ``(p − q)+`` instead of ``(w_τ · p − q)+``: the second half of vllm-ascend #7807, the
    residual that vllm-ascend #15673 had to port as ``max(p_τ · M_b − M_s, 0)``."""

    def correction(self, weight: Number, target_row: Sequence[Number],
                   draft_row: Sequence[Number], rng: Randomness, context: tuple[int, ...]) -> int:
        return super().correction(1, target_row, draft_row, rng, context)  # BUG: w_τ ignored


class _BlockStopsAtFirstFailure(BlockVerification):
    """Block verification scanned from the shortest prefix up, stopping at the first failed
    coin: the natural "accept while the test passes" loop of token-level code, with the block's
    ``h_i``. Not an equivalent mutant: ``h_i`` is the probability of stopping at ``i`` *given*
    that every longer prefix was refused (Sun et al., Algorithm 2 draws ``η_m`` first), so
    reading it as "continue past ``i``" changes the law of ``τ`` (exact TV 0.02–0.21 on random
    V = 3 chains of 3 drafts)."""

    def select(self, weights: Sequence[Number], target_rows: Sequence[Sequence[Number]],
               draft_rows: Sequence[Sequence[Number]], drafts: Sequence[int], rng: Randomness,
               context: tuple[int, ...]) -> int:
        m = len(drafts)
        for i in range(1, m + 1):  # BUG: shortest prefix first, stop at the first failure
            h = self.stop_probability(weights[i], target_rows[i] if i < m else None,
                                      draft_rows[i] if i < m else None)
            accepted = context + tuple(drafts[:i])
            if not rng.bernoulli(h, key=("block", len(accepted), accepted)):
                return i - 1
        return m


MUTANTS.update({m.name: m for m in (
    Mutant("block-token-test", "block verification with the token-level acceptance test and an "
           "unadjusted residual (vllm-ascend #7807)", _with_rule(_BlockTokenTest()),
           "speculative"),
    Mutant("block-unadjusted-residual", "block verification whose correction ignores the "
           "accepted prefix's weight: (p - q)+ instead of (w p - q)+",
           _with_rule(_BlockUnadjustedResidual()), "speculative"),
    Mutant("block-stops-at-first-failure", "block verification scanned from the shortest prefix, "
           "stopping at the first failed coin", _with_rule(_BlockStopsAtFirstFailure()),
           "speculative"),
)})

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

MUTANTS.update({m.name: m for m in (
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
)})

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


MUTANTS.update({m.name: m for m in (
    _stateful_mutant("penalty-counts-rejected-drafts", "repetition and frequency penalties whose "
                     "state keeps counting rejected drafts (vmlx-swift #357/#361: the draft "
                     "loop records every proposed token into the real processor)", _penalties,
                     _penalties),
    _stateful_mutant("grammar-not-rolled-back", "a grammar matcher advanced on drafts and not "
                     "rolled back on rejection (vLLM #53046/#52805, SGLang #14464)",
                     _at_most_one_zero, lambda model: []),
)})

#: Equivalent mutants: variations that look like bugs but do not change the output law (the
#: audit must NOT flag them; `hunt` returns None). Note: why they are lossless. A missing bonus
#: token only means that every position is decided against a draft, which rejection sampling does
#: losslessly. A draft kept after a bonus token was drafted on a context that is no longer the
#: speculative sequence, but it is verified against the very row ``q`` it was sampled from, and
#: rejection sampling is lossless for any proposal law it is told truthfully.
EQUIVALENT_MUTANTS: dict[str, Mutant] = {
    m.name: m for m in (
        Mutant("no-bonus", "never draws a bonus token: drafts up to the budget instead",
               _si_variant(_NoBonus), "speculative"),
        Mutant("dsi-keeps-draft-after-bonus", "DSI keeps the draft in flight after a bonus "
               "token and verifies it (with its own q) at the next position",
               _dsi_variant(_KeepsDraftAfterBonus), "dsi"),
    )
}


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


# -- cross-vocabulary decoders with one step wrong (issue #15, items 4-5) ------------------------
# Each overrides one step of `SLEMRun`. Their bugs show in the law of output *strings*, so they
# live apart from `MUTANTS` (whose hunt runs same-vocabulary pairs with `speculative`'s
# signature) and are hunted by `hunt_cross_vocab` with the exact audit over strings.


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


#: The cross-vocabulary mutants by name (hunted over strings by `hunt_cross_vocab`).
CROSS_VOCAB_MUTANTS: dict[str, CrossVocabMutant] = {m.name: m for m in (
    CrossVocabMutant("cross-vocab-bos-readded", "a BOS re-added on re-tokenisation before "
                     "every iteration's tokens (HF #46124)", _BosReaddedOnRetokenisation),
    CrossVocabMutant("cross-vocab-acceptance-on-ids", "string-level acceptance done on token "
                     "ids across vocabularies", _AcceptanceOnTokenIds),
)}


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
