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
from dataclasses import dataclass
from typing import Literal, TypeAlias

from .models import Number
from .randomness import Randomness

__all__ = [
    "VERIFY_RULES",
    "Decision",
    "NumericalError",
    "VerifyRule",
    "argmax",
    "decide",
    "draft_token",
    "residual",
]

VerifyRule: TypeAlias = Literal["rejection", "exact_match", "greedy"]
VERIFY_RULES: tuple[VerifyRule, ...] = ("rejection", "exact_match", "greedy")


class NumericalError(ArithmeticError):
    """Float rounding made an impossible event happen (e.g. a rejection with an empty residual)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """How a position was decided: the committed ``token`` and whether it was the draft."""

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
    if rule == "greedy":
        return argmax(draft_probs)
    return rng.categorical(draft_probs, key=("draft", len(context), context))


def decide(rule: VerifyRule, target_probs: Sequence[Number],
           draft_probs: Sequence[Number] | None, draft: int | None, rng: Randomness,
           context: tuple[int, ...]) -> Decision:
    """Decide the position after ``context`` from ``p = target_probs`` and the draft ``x ~ q``.

    ``context`` is the committed generated tokens before the position (its length is the
    position).

    With ``draft=None`` the position gets a bonus token from ``p``. Otherwise the rule accepts the
    draft or commits a residual token (see the glossary).
    """
    position = len(context)
    if draft is None:
        if rule == "greedy":
            return Decision(argmax(target_probs), False, "bonus")
        token = rng.categorical(target_probs, key=("target", position, context))
        return Decision(token, False, "bonus")
    if rule == "rejection":
        assert draft_probs is not None
        p, q = target_probs[draft], draft_probs[draft]
        # accept x with probability min(1, p(x)/q(x)); q(x) > 0 since x ~ q
        if p >= q or rng.bernoulli(p / q, key=("accept", position, context)):
            return Decision(draft, True, "accepted")
        weights = residual(target_probs, draft_probs)
        if not sum(weights) > 0:
            raise NumericalError(f"rejected the draft {draft} at position {position} but the "
                                 "residual (p - q)+ is empty: float rounding in p or q")
        token = rng.categorical(weights, key=("residual", position, context))
        return Decision(token, False, "rejected")
    if rule == "exact_match":
        y = rng.categorical(target_probs, key=("target", position, context))
        return Decision(y, y == draft, "accepted" if y == draft else "rejected")
    if rule == "greedy":
        y = argmax(target_probs)
        return Decision(y, y == draft, "accepted" if y == draft else "rejected")
    raise ValueError(f"unknown verification rule {rule!r}; expected one of {VERIFY_RULES}")
