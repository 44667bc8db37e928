"""Mutants of the verification rule: one step of a correct rule changed.

Token-level rules (subclasses of `RejectionSampling`) and block verification (of
`BlockVerification`) run as ``verify=`` of the correct `speculative`; tree rules (of the rules of
`dsi_ref.decoders.tree`) run by `tree_speculative` with the tree (2, 1, ..., 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

from ...base.latency import Latency
from ...base.models import LanguageModel, Number
from ...base.randomness import Randomness
from ...base.result import Run
from ...decoders.speculative import speculative
from ...decoders.tree import (
    EagleTopK,
    RecursiveRejectionWithoutReplacement,
    TreeRule,
    normalise,
    role,
    tree_speculative,
)
from ...decoders.verification import BlockVerification, RejectionSampling, argmax, residual
from . import Mutant

__all__ = ["BLOCK_MUTANTS", "RULE_MUTANTS", "TREE_MUTANTS"]


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


#: Token-level rules with one step wrong.
RULE_MUTANTS: tuple[Mutant, ...] = (
    Mutant("greedy-draft-soft-q", "drafts greedily (argmax q) but accepts with the soft q",
           _with_rule(_GreedyDraftSoftVerify()), "speculative"),
    Mutant("tempered-draft", "drafts from a temperature-scaled q, verifies with the plain q",
           _with_rule(_TemperatureDraft()), "speculative"),
    Mutant("residual-from-p", "on rejection resamples p instead of the residual (p - q)+",
           _with_rule(_ResidualFromTarget()), "speculative"),
    Mutant("residual-unclipped", "residual not clipped at 0: samples |p - q|",
           _with_rule(_ResidualUnclipped()), "speculative"),
    Mutant("residual-unnormalised", "residual not renormalised: the missing mass goes to the last "
           "token", _with_rule(_ResidualUnnormalised()), "speculative"),
    Mutant("accept-ratio-inverted", "acceptance probability min(1, q/p) instead of min(1, p/q)",
           _with_rule(_AcceptRatioInverted()), "speculative"),
    Mutant("shared-uniform", "the acceptance coin reuses the draft's uniform",
           _with_rule(_SharedUniform()), "speculative"),
    Mutant("rng-reseeded-each-step", "the RNG is re-seeded before every acceptance test: one "
           "uniform shared by all positions", _with_rule(_ReseededEachStep()), "speculative"),
    Mutant("processor-one-side", "a logits processor (temperature) applied to p in the accept "
           "test only", _with_rule(_TemperatureInAcceptOnly()), "speculative"),
    Mutant("accept-wrong-side-at-ties", "u <= p/q instead of u < p/q with a coarse uniform",
           _with_rule(_WrongSideAtTies()), "speculative"),
)


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
               token: int) -> Sequence[Number]:
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


#: Tree rules with one step wrong.
TREE_MUTANTS: tuple[Mutant, ...] = (
    Mutant("tree-no-residual-update", "tree verification without the residual update after a "
           "rejected sibling", _with_tree_rule(_TreeNoResidualUpdate()), "tree_speculative"),
    Mutant("tree-iid-verified-as-without-replacement", "siblings drafted with replacement but "
           "verified as drawn without", _with_tree_rule(_IidVerifiedAsWithoutReplacement()),
           "tree_speculative"),
    Mutant("tree-point-mass-soft-q", "top-k (point-mass) children verified against the soft q",
           _with_tree_rule(_PointMassSoftQ()), "tree_speculative"),
)

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


#: Block verification with one step wrong.
BLOCK_MUTANTS: tuple[Mutant, ...] = (
    Mutant("block-token-test", "block verification with the token-level acceptance test and an "
           "unadjusted residual (vllm-ascend #7807)", _with_rule(_BlockTokenTest()),
           "speculative"),
    Mutant("block-unadjusted-residual", "block verification whose correction ignores the "
           "accepted prefix's weight: (p - q)+ instead of (w p - q)+",
           _with_rule(_BlockUnadjustedResidual()), "speculative"),
    Mutant("block-stops-at-first-failure", "block verification scanned from the shortest prefix, "
           "stopping at the first failed coin", _with_rule(_BlockStopsAtFirstFailure()),
           "speculative"),
)
