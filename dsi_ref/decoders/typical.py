"""Medusa's typical acceptance: a verification rule that is lossy by design.

Medusa (Cai et al. 2024, "Medusa: Simple LLM Inference Acceleration Framework with Multiple
Decoding Heads", §2.3.1) does not test a draft ``x`` against the drafter's law at all. It accepts
``x`` when the target finds it *typical enough*:

    accept x  ⇔  p(x) > min(ε, δ · exp(−H(p)))

with ``p`` the target's row at the position (notation of `dsi_ref.decoders.verification`: ``p``
target, ``q`` drafter), ``H(p)`` its entropy, ``ε`` the *posterior threshold* and ``δ`` the
*posterior alpha*, "recommended to be ``sqrt(ε)``" (FasterDecoding/Medusa,
``medusa/model/medusa_model.py``, ``medusa_generate``: ``posterior_threshold=0.09``,
``posterior_alpha=0.3``). ``evaluate_posterior`` (``medusa/model/utils.py``) computes the entropy
as ``−Σ p · log(p + 1e-5)`` (the ``1e-5`` keeps ``log 0`` away); ``entropy_offset`` is that
constant. Accepted drafts form a prefix (``cumprod`` of the mask): the first refused draft ends the
window, as in token-level verification.

What is committed after the accepted prefix. In Medusa the token after the accepted prefix is the
first candidate of the next step, committed without a test (``candidates[:, 1:]`` is what
``evaluate_posterior`` checks). ``generate_candidates`` takes it as ``argmax p`` of the base model
(``medusa_generate``, and the ``fast`` path of later versions); the sampled path of later
versions draws it with ``get_typical_one_token``: ``p`` with every token of ``p < threshold``
removed, renormalised. ``correction`` picks one:

* ``"greedy"`` (default, Medusa's ``medusa_generate``): ``argmax p`` (ties: lowest id);
* ``"typical"``: a draw from ``p`` restricted to ``{y : p(y) ≥ threshold}`` (Medusa's
  ``get_typical_one_token``); if no token is left — the threshold above ``max p``, possible only
  when ``δ > 1`` — Medusa's softmax of all ``−inf`` has no law, and this rule commits ``argmax p``;
* ``"target"``: a plain draw from ``p`` (what a port that reuses SI's bonus path would do).

The same token is committed at a position without a draft (the bonus): in Medusa both are "the
first candidate of the next step". Medusa applies a temperature to the logits first; the toy
models here give probabilities directly (temperature 1).

Exactness. ``exp`` and ``log`` are floats, so the threshold is a ``float``; the test
``p(x) > threshold`` compares a `Fraction` with a ``float`` exactly (Python converts the float to
its binary value), so every decision is a deterministic function of the row and the exact engine
computes the rule's output law in `Fraction`s. Only a row whose ``p(x)`` lies within a rounding
error of its threshold could be decided differently by another libm; `typical_threshold` is the
one place that computes it.

Randomness: the draft ``x ~ q`` is keyed as in SI (``("draft", i, ctx)``); the acceptance draws
nothing; a sampled correction is keyed ``("residual", i, ctx)`` and a sampled bonus
``("target", i, ctx)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, TypeAlias

from ..base.errors import InvalidParameterError
from ..base.models import Number
from ..base.randomness import Randomness
from ..base.validate import check_number
from .verification import RejectionSampling, argmax

__all__ = ["MEDUSA_ENTROPY_OFFSET", "MEDUSA_POSTERIOR_THRESHOLD", "TYPICAL_CORRECTIONS",
           "TypicalAcceptance", "TypicalCorrection", "typical_threshold"]

TypicalCorrection: TypeAlias = Literal["greedy", "typical", "target"]
TYPICAL_CORRECTIONS: tuple[TypicalCorrection, ...] = ("greedy", "typical", "target")
#: Medusa's default posterior threshold ``ε`` (``medusa_generate``); its ``δ`` is ``sqrt(ε) = 0.3``.
MEDUSA_POSTERIOR_THRESHOLD = 0.09
#: The constant inside Medusa's entropy, ``−Σ p · log(p + 1e-5)``.
MEDUSA_ENTROPY_OFFSET = 1e-5


def typical_threshold(target_probs: Sequence[Number], epsilon: float, delta: float,
                      entropy_offset: float = MEDUSA_ENTROPY_OFFSET) -> float:
    """``min(ε, δ · exp(−H(p)))`` with ``H(p) = −Σ_y p(y) · log(p(y) + entropy_offset)``, in floats.

    >>> typical_threshold([0.5, 0.5], 0.09, 0.3, entropy_offset=0.0)  # H = log 2: min(0.09, 0.15)
    0.09
    >>> round(typical_threshold([0.5, 0.5], 1.0, 0.3, entropy_offset=0.0), 12)  # 0.3 / 2
    0.15
    """
    entropy = -sum(float(p) * math.log(float(p) + entropy_offset)
                   for p in target_probs if p > 0)
    return min(epsilon, delta * math.exp(-entropy))


class TypicalAcceptance(RejectionSampling):
    """Medusa's typical acceptance as a `Rule` (see the module docstring): accept the draft
    ``x ~ q`` iff ``p(x) > min(ε, δ · exp(−H(p)))``; after a refused draft, and at a position
    without a draft, commit the ``correction`` token. Lossy by design: never registered as
    lossless (`dsi_ref.audit.typical` computes its exact TV against the target's law).

    Args:
        epsilon: Medusa's ``posterior_threshold`` ``ε >= 0`` (default 0.09).
        delta: Medusa's ``posterior_alpha`` ``δ >= 0``; ``None`` (default) is ``sqrt(ε)``.
        correction: ``"greedy"`` (default), ``"typical"`` or ``"target"``.
        entropy_offset: the constant inside the entropy's logarithm (Medusa's ``1e-5``).
    """

    greedy = False

    def __init__(self, epsilon: float = MEDUSA_POSTERIOR_THRESHOLD, delta: float | None = None,
                 *, correction: TypicalCorrection = "greedy",
                 entropy_offset: float = MEDUSA_ENTROPY_OFFSET) -> None:
        check_number("epsilon", epsilon, low=0)
        check_number("delta", delta, allow_none=True, low=0)
        check_number("entropy_offset", entropy_offset, low=0)
        if correction not in TYPICAL_CORRECTIONS:
            raise InvalidParameterError(f"correction must be one of {TYPICAL_CORRECTIONS}, got "
                                        f"{correction!r}")
        self.epsilon = float(epsilon)
        self.delta = math.sqrt(self.epsilon) if delta is None else float(delta)
        self.correction = correction
        self.entropy_offset = float(entropy_offset)
        self.name = f"typical(eps={self.epsilon:g}, delta={self.delta:g}, {correction})"

    def threshold(self, target_probs: Sequence[Number]) -> float:
        """The row's acceptance threshold (`typical_threshold`)."""
        return typical_threshold(target_probs, self.epsilon, self.delta, self.entropy_offset)

    def accept(self, target_probs: Sequence[Number], draft_probs: Sequence[Number], draft: int,
               rng: Randomness, context: tuple[int, ...]) -> bool:
        """``p(x) > threshold`` (exact comparison of the row's entry with the float threshold);
        ``q`` is not read and no coin is drawn."""
        return bool(target_probs[draft] > self.threshold(target_probs))

    def _commit(self, target_probs: Sequence[Number], rng: Randomness, role: str,
                context: tuple[int, ...]) -> int:
        if self.correction == "greedy":
            return argmax(target_probs)
        if self.correction == "typical":
            threshold = self.threshold(target_probs)
            kept = [p if p >= threshold else 0 * p for p in target_probs]
            if not sum(kept) > 0:
                return argmax(target_probs)
            return rng.categorical(kept, key=(role, len(context), context))
        return rng.categorical(target_probs, key=(role, len(context), context))

    def residual(self, target_probs: Sequence[Number], draft_probs: Sequence[Number],
                 rng: Randomness, context: tuple[int, ...]) -> int:
        """The correction token after a refused draft (it may equal the refused draft)."""
        return self._commit(target_probs, rng, "residual", context)

    def bonus(self, target_probs: Sequence[Number], rng: Randomness,
              context: tuple[int, ...]) -> int:
        """The correction token at a position without a draft."""
        return self._commit(target_probs, rng, "target", context)
