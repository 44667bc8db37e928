"""The exact law of static ensemble verification, and its distance to the target's law.

`dsi_ref.decoders.ensemble.EnsembleVerification` (DIVERSE; transformers 5.25's
``assistant_ensemble_weight``) is lossy by design. `ensemble_law` runs SI with the rule through
the exact engine and returns the law of its output in `Fraction`s; `ensemble_distances` gives, for
each weight ``w``, its total-variation distance to the target's law ``p`` and to the
autoregressive law of the mixture ``v = w · p + (1 − w) · q`` (`ensemble_target`), the law every
drafted position follows. The table of docs/verifiers.md is generated from it
(``benchmarks/ensemble_tv_table.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from ..base.models import LanguageModel
from ..decoders.ensemble import EnsembleVerification, ensemble_target
from ..decoders.speculative import speculative
from .exact import Law, exact_distribution, total_variation
from .laws import target_distribution

__all__ = ["EnsembleDistance", "ensemble_distances", "ensemble_law"]


def ensemble_law(target: LanguageModel, drafter: LanguageModel, prompt: Sequence[int],
                 max_new_tokens: int, lookahead: int, weight: Fraction) -> Law:
    """The exact law of the first ``max_new_tokens`` tokens of SI (lookahead ``k``, windows of
    ``min(k, remaining − 1)`` drafts, as transformers drafts) with `EnsembleVerification` at
    weight ``w``.

    >>> from fractions import Fraction as F
    >>> import dsi_ref as dr
    >>> t = dr.TableLM.context_free((F(1, 2), F(1, 2)))
    >>> d = dr.TableLM.context_free((F(3, 4), F(1, 4)))
    >>> ensemble_law(t, d, (), 1, 1, F(1, 2))  # one token: no draft, the bonus from p
    {(0,): Fraction(1, 2), (1,): Fraction(1, 2)}
    >>> ensemble_law(t, d, (), 2, 1, F(1, 2))[(0, 0)]  # the first from v (5/8), the last from p
    Fraction(5, 16)
    """
    rule = EnsembleVerification(weight)
    return exact_distribution(
        lambda rng: tuple(speculative(target, drafter, prompt, max_new_tokens, rng, lookahead,
                                      verify=rule, record=False).tokens))


@dataclass(frozen=True)
class EnsembleDistance:
    """The exact distances of SI's output law at one ensemble weight ``w``.

    ``to_target``: TV to the target's law ``p``; ``to_mixture``: TV to the autoregressive law
    of ``v = w · p + (1 − w) · q``."""

    weight: Fraction
    to_target: Fraction
    to_mixture: Fraction


def ensemble_distances(target: LanguageModel, drafter: LanguageModel, prompt: Sequence[int],
                       max_new_tokens: int, lookahead: int, weights: Iterable[Fraction]
                       ) -> list[EnsembleDistance]:
    """`EnsembleDistance` for each weight of ``weights`` (exact, see `ensemble_law`).

    >>> from fractions import Fraction as F
    >>> import dsi_ref as dr
    >>> t = dr.TableLM.context_free((F(1, 2), F(1, 2)))
    >>> d = dr.TableLM.context_free((F(3, 4), F(1, 4)))
    >>> [(r.to_target, r.to_mixture) for r in ensemble_distances(t, d, (), 2, 1, [F(1, 2), 1])]
    [(Fraction(1, 8), Fraction(1, 8)), (Fraction(0, 1), Fraction(0, 1))]
    """
    reference = target_distribution(target, prompt, max_new_tokens)
    out = []
    for weight in weights:
        law = ensemble_law(target, drafter, prompt, max_new_tokens, lookahead, weight)
        mixture = target_distribution(ensemble_target(target, drafter, weight), prompt,
                                      max_new_tokens)
        out.append(EnsembleDistance(Fraction(weight), total_variation(law, reference),
                                    total_variation(law, mixture)))
    return out
