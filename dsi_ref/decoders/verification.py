"""Verification rules: how one position is decided from target probs, draft probs and a draft.

Glossary (defined once, used everywhere in dsi-ref)
---------------------------------------------------
Convention: ``p`` is the **target** distribution and ``q`` the **drafter** distribution at the same
position, both conditioned on the same committed prefix. (Leviathan et al. use p for the target as
here; Chen et al. and several codebases flip the letters — read carefully when comparing.) In code
they are ``target_probs`` and ``draft_probs``.

* **draft** — a token ``x ~ q`` proposed by the drafter for a position not yet decided.
* **accepted** — the draft is committed as is. Rejection sampling accepts with probability
  ``min(1, p(x)/q(x))``; exact-match sampling accepts when an independent ``y ~ p`` equals ``x``;
  greedy decoding accepts when ``x = argmax p``.
* **rejected** — the draft is not committed; the position is decided by a **residual** (a.k.a.
  **recovered**) token instead, and every draft after it is discarded. Rejection sampling draws
  the residual from the normalised ``(p − q)+``; exact-match commits ``y``; greedy ``argmax p``.
* **bonus** — a token drawn from ``p`` at a position with no draft (after all drafts of a window
  were accepted, or whenever the target alone decides a position).
* **committed** — decided for good: part of the output. Positions are committed left to right.

Note: why the residual is normalised. Conditioned on a rejection, rejection sampling must
output ``y`` with probability ``(p(y) − q(y))+ / Σ_z (p(z) − q(z))+``; then
``P(out = y) = min(p(y), q(y)) + (1 − Σ_z min(p(z), q(z))) · (p(y) − q(y))+ / Σ_z (p(z) − q(z))+
= p(y)`` because ``Σ_z (p − q)+ = 1 − Σ_z min(p, q)``. `Randomness.categorical` normalises its
weights, so passing ``(p − q)+`` draws from the normalised residual. When ``p = q`` no rejection
can happen, and the residual (all zeros) is never drawn.

Randomness is drawn in a fixed order, each draw keyed ``(role, i, context)`` where ``i`` is the
position and ``context`` the generated tokens before it (so ``len(context) == i``): the draft
``("draft", i, ctx)``, the acceptance coin ``("accept", i, ctx)``, the residual
``("residual", i, ctx)``, a token drawn from ``p`` (bonus, exact-match ``y``, non-SI)
``("target", i, ctx)``. A key names one decision in one context: whoever makes it (SI, DSI, any
server of DSI), under keyed randomness it comes out the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple, Protocol, TypeAlias, runtime_checkable

from ..base.errors import InvalidParameterError, NumericalError
from ..base.models import Number
from ..base.randomness import Randomness

__all__ = [
    "RULES",
    "VERIFY_RULES",
    "Decision",
    "ExactMatch",
    "Greedy",
    "NumericalError",
    "RejectionSampling",
    "Rule",
    "VerifyRule",
    "argmax",
    "as_rule",
    "decide",
    "draft_token",
    "residual",
]

VerifyRule: TypeAlias = Literal["rejection", "exact_match", "greedy"]
VERIFY_RULES: tuple[VerifyRule, ...] = ("rejection", "exact_match", "greedy")



class Decision(NamedTuple):
    """How a position was decided: the committed ``token`` and whether it was the draft.

    (A named tuple: one is made per committed token, on the sampling hot path.)"""

    token: int
    accepted: bool
    kind: Literal["accepted", "rejected", "bonus"]


def argmax(probs: Sequence[Number]) -> int:
    """The most likely token; ties go to the lowest id (temperature-0 decoding)."""
    best = 0
    for i in range(1, len(probs)):
        if probs[i] > probs[best]:
            best = i
    return best


def residual(target_probs: Sequence[Number], draft_probs: Sequence[Number]) -> list[Number]:
    """The unnormalised residual ``(p − q)+`` (see the module's note on normalisation)."""
    return [t - d if t > d else 0 * t for t, d in zip(target_probs, draft_probs, strict=True)]


def draft_token(rule: VerifyRule, draft_probs: Sequence[Number], rng: Randomness,
                context: tuple[int, ...]) -> int:
    """The drafter's proposal after ``context``: ``x ~ q`` (``argmax q`` for greedy)."""
    return as_rule(rule).draft(draft_probs, rng, context)


def decide(rule: VerifyRule, target_probs: Sequence[Number],
           draft_probs: Sequence[Number] | None, draft: int | None, rng: Randomness,
           context: tuple[int, ...]) -> Decision:
    """Decide the position after ``context`` from ``p = target_probs`` and the draft ``x ~ q``.

    ``context`` is the committed generated tokens before the position (its length is the
    position). With ``draft=None`` the position gets a bonus token from ``p``; otherwise the rule
    accepts the draft or commits a residual token (see the glossary).
    """
    return as_rule(rule).decide(target_probs, draft_probs, draft, rng, context)


@runtime_checkable
class Rule(Protocol):
    """A verification rule as an object: how to draft and how to decide a position.

    The built-in rules are `RejectionSampling` and its subclasses `ExactMatch` and `Greedy` (by
    name in `RULES`); a custom rule (a new verification scheme, or a deliberately wrong one from
    the zoo) passes as ``verify=`` to `speculative` and `dsi`.
    ``greedy`` says whether its reference is the target's greedy sequence.
    """

    @property
    def name(self) -> str:
        """A short name for reports."""
        ...

    @property
    def greedy(self) -> bool:
        """True when the reference is the target's greedy sequence."""
        ...

    def draft(self, draft_probs: Sequence[Number], rng: Randomness,
              context: tuple[int, ...]) -> int:
        """The drafter's proposal after ``context``."""
        ...

    def decide(self, target_probs: Sequence[Number], draft_probs: Sequence[Number] | None,
               draft: int | None, rng: Randomness, context: tuple[int, ...]) -> Decision:
        """Decide the position after ``context`` (see `decide`)."""
        ...


class RejectionSampling:
    """Token-level rejection sampling (Leviathan et al. 2023; Chen et al. 2023).

    Split into the steps that real implementations get wrong, so that the zoo's mutants
    (`dsi_ref.audit.zoo`) override exactly one of them.
    """

    name = "rejection"
    greedy = False

    def draft(self, draft_probs: Sequence[Number], rng: Randomness,
              context: tuple[int, ...]) -> int:
        """``x ~ q``."""
        return rng.categorical(draft_probs, key=("draft", len(context), context))

    def accept(self, target_probs: Sequence[Number], draft_probs: Sequence[Number], draft: int,
               rng: Randomness, context: tuple[int, ...]) -> bool:
        """Accept ``x`` with probability ``min(1, p(x)/q(x))`` (``q(x) > 0`` since ``x ~ q``)."""
        p, q = target_probs[draft], draft_probs[draft]
        return bool(p >= q or rng.bernoulli(p / q, key=("accept", len(context), context)))

    def residual(self, target_probs: Sequence[Number], draft_probs: Sequence[Number],
                 rng: Randomness, context: tuple[int, ...]) -> int:
        """A token from the normalised residual ``(p − q)+``."""
        weights = residual(target_probs, draft_probs)
        if not sum(weights) > 0:
            raise NumericalError(f"rejected the draft at position {len(context)} but the "
                                 "residual (p - q)+ is empty: float rounding in p or q")
        return rng.categorical(weights, key=("residual", len(context), context))

    def bonus(self, target_probs: Sequence[Number], rng: Randomness,
              context: tuple[int, ...]) -> int:
        """A token from ``p`` at a position with no draft."""
        return rng.categorical(target_probs, key=("target", len(context), context))

    def decide(self, target_probs: Sequence[Number], draft_probs: Sequence[Number] | None,
               draft: int | None, rng: Randomness, context: tuple[int, ...]) -> Decision:
        """Accept the draft or commit a residual token; a bonus token without a draft."""
        if draft is None:
            return Decision(self.bonus(target_probs, rng, context), False, "bonus")
        assert draft_probs is not None
        if self.accept(target_probs, draft_probs, draft, rng, context):
            return Decision(draft, True, "accepted")
        return Decision(self.residual(target_probs, draft_probs, rng, context), False,
                        "rejected")


class ExactMatch(RejectionSampling):
    """Exact-match sampling: draw ``y ~ p``; accept the draft iff ``y = x``, else commit ``y``."""

    name = "exact_match"

    def decide(self, target_probs: Sequence[Number], draft_probs: Sequence[Number] | None,
               draft: int | None, rng: Randomness, context: tuple[int, ...]) -> Decision:
        """Commit ``y ~ p`` whatever the draft; it is accepted when equal."""
        y = self.bonus(target_probs, rng, context)
        if draft is None:
            return Decision(y, False, "bonus")
        return Decision(y, y == draft, "accepted" if y == draft else "rejected")


class Greedy(RejectionSampling):
    """Temperature-0 decoding for both models: draft ``argmax q``, accept iff it is ``argmax p``."""

    name = "greedy"
    greedy = True

    def draft(self, draft_probs: Sequence[Number], rng: Randomness,
              context: tuple[int, ...]) -> int:
        """``argmax q`` (ties: lowest id)."""
        return argmax(draft_probs)

    def decide(self, target_probs: Sequence[Number], draft_probs: Sequence[Number] | None,
               draft: int | None, rng: Randomness, context: tuple[int, ...]) -> Decision:
        """Commit ``argmax p``; the draft is accepted when equal."""
        y = argmax(target_probs)
        if draft is None:
            return Decision(y, False, "bonus")
        return Decision(y, y == draft, "accepted" if y == draft else "rejected")


#: The built-in rules by name.
RULES: dict[str, Rule] = {"rejection": RejectionSampling(), "exact_match": ExactMatch(),
                          "greedy": Greedy()}


def as_rule(verify: VerifyRule | Rule) -> Rule:
    """The `Rule` object for a rule name or a rule object; a clear error otherwise."""
    if isinstance(verify, str):
        if verify not in RULES:
            raise InvalidParameterError(f"verify must be one of {VERIFY_RULES} or a Rule, got "
                                        f"{verify!r}")
        return RULES[verify]
    if isinstance(verify, Rule):
        return verify
    raise InvalidParameterError(f"verify must be a rule name {VERIFY_RULES} or a Rule object, "
                                f"got {type(verify).__name__}")
