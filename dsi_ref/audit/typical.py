"""The exact cost of Medusa's typical acceptance: its total-variation distance to the target law.

`dsi_ref.decoders.typical.TypicalAcceptance` is lossy by design, so a verdict "lossy" says little.
`typical_acceptance_tv` says how lossy: for each posterior threshold ``ε`` it runs SI with the rule
through the exact engine and returns ``TV(law of SI's output, target's law)`` as a `Fraction`
(exact: the rule's float threshold is compared exactly with the rows' `Fraction` entries, see the
rule's module). The table of docs/verifiers.md is generated from it
(``benchmarks/typical_tv_table.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction

from ..base.models import LanguageModel
from ..decoders.speculative import speculative
from ..decoders.typical import MEDUSA_ENTROPY_OFFSET, TypicalAcceptance, TypicalCorrection
from .laws import LosslessReport, check_lossless

__all__ = ["typical_acceptance_report", "typical_acceptance_tv"]


def typical_acceptance_report(target: LanguageModel, drafter: LanguageModel,
                              prompt: Sequence[int], max_new_tokens: int, lookahead: int,
                              epsilon: float, *, delta: float | None = None,
                              correction: TypicalCorrection = "greedy",
                              entropy_offset: float = MEDUSA_ENTROPY_OFFSET
                              ) -> LosslessReport:
    """The exact `LosslessReport` of SI with `TypicalAcceptance` (``ε``, ``δ``, ``correction``)
    against the target's law (exact comparison: ``float_tolerance=0``)."""
    rule = TypicalAcceptance(epsilon, delta, correction=correction, entropy_offset=entropy_offset)
    return check_lossless(
        lambda rng: speculative(target, drafter, prompt, max_new_tokens, rng, lookahead,
                                verify=rule).tokens,
        target, prompt, max_new_tokens, float_tolerance=0)


def typical_acceptance_tv(target: LanguageModel, drafter: LanguageModel, prompt: Sequence[int],
                          max_new_tokens: int, lookahead: int, thresholds: Iterable[float], *,
                          delta: float | None = None, correction: TypicalCorrection = "greedy",
                          entropy_offset: float = MEDUSA_ENTROPY_OFFSET
                          ) -> list[tuple[float, Fraction]]:
    """``[(ε, TV), …]``: the exact total-variation distance between the law of the first
    ``max_new_tokens`` tokens of SI (lookahead ``lookahead``) with Medusa's typical acceptance at
    posterior threshold ``ε`` and the target's law, for each ``ε`` of ``thresholds``.

    ``delta`` is Medusa's posterior alpha ``δ``, the same for every ``ε``; ``None`` (default) takes
    Medusa's recommendation ``δ = sqrt(ε)`` for each ``ε``. ``correction`` is the token committed
    after a refused draft (`TypicalAcceptance`).

    >>> from fractions import Fraction as F
    >>> import dsi_ref as dr
    >>> t = dr.TableLM.context_free((F(1, 2), F(1, 2)))
    >>> d = dr.TableLM.context_free((F(3, 4), F(1, 4)))
    >>> # every draft is typical: the first token comes from q, the second is drawn from p
    >>> typical_acceptance_tv(t, d, (), 2, 1, [0.09], correction="target")
    [(0.09, Fraction(1, 4))]
    >>> typical_acceptance_tv(t, d, (), 2, 1, [0.09])  # ... or is argmax p = 0
    [(0.09, Fraction(1, 2))]
    """
    out: list[tuple[float, Fraction]] = []
    for epsilon in thresholds:
        report = typical_acceptance_report(target, drafter, prompt, max_new_tokens, lookahead,
                                           epsilon, delta=delta, correction=correction,
                                           entropy_offset=entropy_offset)
        out.append((float(epsilon), report.tv_distance))
    return out
