"""Static ensemble verification (DIVERSE): a verification rule that is lossy by design.

DIVERSE (arXiv 2604.07622) relaxes the law a draft is verified against from the target's row
``p`` to the mixture

    v = w · p + (1 − w) · q,        0 ≤ w ≤ 1,

(notation of `dsi_ref.decoders.verification`: ``p`` target, ``q`` drafter, both at the same
position after the same committed prefix). transformers 5.25 ships it as the generation option
``assistant_ensemble_weight`` (``_speculative_sampling`` in ``transformers/generation/utils.py``):

* a draft ``x ~ q`` is accepted with probability
  ``min(1, v(x)/q(x)) = min(1, 1 − w + w·p(x)/q(x))``;
* after a rejection the correction is drawn from the normalised ``(v − q)+ = w · (p − q)+``, which
  normalises to the same law as rejection sampling's residual ``(p − q)+`` (HF computes the
  latter; so does this rule);
* a position without a draft (the **bonus** after a fully accepted window) is drawn from ``p``,
  as in plain speculative sampling: the ensemble enters only through the acceptance test.

So every *drafted* position is decided by speculative sampling against ``v`` (its committed token
follows ``v`` given the prefix), and every bonus position follows ``p``. Which positions are
bonus positions depends on the acceptances, hence on the tokens, so the output follows neither
``p`` nor the autoregressive law of ``v`` (`ensemble_target`) in general. Two positions are
fixed: a window holds ``min(k, remaining − 1)`` drafts (transformers drafts so, and so does
`dsi_ref.decoders.speculative`), so with a budget ``N ≥ 2`` the first position is always drafted
(its token follows ``v``) and the last never is (its token follows ``p`` given the prefix).
`dsi_ref.audit.ensemble` computes the law and its distances to ``p`` and to ``v`` exactly.
``w = 1`` is plain rejection sampling (lossless); ``p = q`` makes ``v = p`` (lossless for every
``w``).

Greedy decoding has its own ensemble path in transformers (``do_sample=False``): the draft
``argmax q`` is accepted iff it equals ``argmax v``, a rejected position commits ``argmax v`` and
the bonus is ``argmax p`` (`GreedyEnsembleVerification`).

Randomness is keyed as rejection sampling's: the draft ``("draft", i, ctx)``, the acceptance coin
``("accept", i, ctx)``, the residual ``("residual", i, ctx)``, the bonus ``("target", i, ctx)``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..base.models import FunctionLM, LanguageModel, Number, Prefix, checked_probs
from ..base.randomness import Randomness
from ..base.validate import check_number
from .verification import Decision, Greedy, RejectionSampling, argmax

__all__ = ["EnsembleVerification", "GreedyEnsembleVerification", "ensemble_row", "ensemble_target"]


def ensemble_row(weight: Number, target_probs: Sequence[Number],
                 draft_probs: Sequence[Number]) -> tuple[Number, ...]:
    """DIVERSE's verification law ``v = w · p + (1 − w) · q`` at one position.

    >>> ensemble_row(Fraction(1, 2), (Fraction(1), Fraction(0)), (Fraction(0), Fraction(1)))
    (Fraction(1, 2), Fraction(1, 2))
    """
    return tuple(weight * p + (1 - weight) * q
                 for p, q in zip(target_probs, draft_probs, strict=True))


def ensemble_target(target: LanguageModel, drafter: LanguageModel, weight: Number
                    ) -> FunctionLM:
    """The model whose row after every prefix is ``v = w · p + (1 − w) · q`` (`ensemble_row`):
    the law every drafted position of `EnsembleVerification` follows."""
    check_number("weight", weight, low=0, high=1)
    if target.vocab_size != drafter.vocab_size:
        raise ValueError(f"target and drafter vocabularies differ ({target.vocab_size} vs "
                         f"{drafter.vocab_size})")

    def probs(prefix: Prefix) -> tuple[Number, ...]:
        return ensemble_row(weight, checked_probs(target, prefix), checked_probs(drafter, prefix))

    return FunctionLM(target.vocab_size, probs, eos=target.eos,
                      name=f"ensemble(w={weight})")


class EnsembleVerification(RejectionSampling):
    """Static ensemble verification as a `Rule` (see the module docstring): accept the draft
    ``x ~ q`` with probability ``min(1, 1 − w + w · p(x)/q(x))``; the residual and the bonus are
    rejection sampling's. Lossy by design for ``0 ≤ w < 1`` (never registered as lossless);
    ``w = 1`` is rejection sampling.

    Args:
        weight: ``w``, transformers' ``assistant_ensemble_weight``, in ``[0, 1]`` (transformers
            accepts the open interval; ``0`` accepts every draft, ``1`` is lossless). A
            `Fraction` keeps the exact engine exact.
    """

    greedy = False

    def __init__(self, weight: Number) -> None:
        check_number("weight", weight, low=0, high=1)
        self.weight = weight
        self.name = f"ensemble(w={weight})"

    def accept(self, target_probs: Sequence[Number], draft_probs: Sequence[Number], draft: int,
               rng: Randomness, context: tuple[int, ...]) -> bool:
        """Accept ``x`` with probability ``min(1, v(x)/q(x))``, ``v(x)/q(x) = 1 − w + w·p/q``
        (at least 1 exactly when ``p(x) ≥ q(x)``, or when ``w = 0``)."""
        p, q = target_probs[draft], draft_probs[draft]
        if p >= q or self.weight == 0:
            return True
        ratio = 1 - self.weight + self.weight * p / q
        return bool(rng.bernoulli(ratio, key=("accept", len(context), context)))


class GreedyEnsembleVerification(Greedy):
    """transformers' greedy path with ``assistant_ensemble_weight``: draft ``argmax q``; at a
    drafted position commit ``argmax v`` (``v = w · p + (1 − w) · q``; the draft is accepted when
    equal); at a position without a draft commit ``argmax p``. Ties go to the lowest id, as
    torch's ``argmax`` breaks them. Its reference (``greedy``) is the target's greedy sequence,
    which it leaves wherever ``argmax v ≠ argmax p`` on the path.
    """

    def __init__(self, weight: Number) -> None:
        check_number("weight", weight, low=0, high=1)
        self.weight = weight
        self.name = f"greedy-ensemble(w={weight})"

    def decide(self, target_probs: Sequence[Number], draft_probs: Sequence[Number] | None,
               draft: int | None, rng: Randomness, context: tuple[int, ...]) -> Decision:
        """Commit ``argmax v`` at a drafted position (accepted when it is the draft), ``argmax p``
        at a bonus position."""
        if draft is None or draft_probs is None:
            return Decision(argmax(target_probs), False, "bonus")
        y = argmax(ensemble_row(self.weight, target_probs, draft_probs))
        return Decision(y, y == draft, "accepted" if y == draft else "rejected")
