"""The default suite of toy model pairs that `dsi-ref audit` checks every decoder on.

Each pair stresses one edge of the verification rules: zeros in the rows (drafts the target never
emits), context dependence (iteration boundaries matter), EOS, ``p == q`` (empty residual), a
one-hot drafter, ties (greedy tie-breaking).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction as F

from ..base.models import FunctionLM, LanguageModel, Prefix, TableLM

__all__ = ["ModelPair", "default_suite"]


@dataclass(frozen=True)
class ModelPair:
    """A named (target, drafter) pair with the prompt and budget it is audited at."""

    name: str
    target: LanguageModel
    drafter: LanguageModel
    prompt: Prefix = ()
    max_new_tokens: int = 4


def _parity(prefix: Prefix) -> tuple[F, F, F]:
    # context-dependent through the whole prefix, not just the last token
    return (F(1, 2), F(1, 4), F(1, 4)) if sum(prefix) % 2 == 0 else (F(1, 6), F(2, 3), F(1, 6))


def default_suite() -> list[ModelPair]:
    """The model pairs of the default audit (exact `Fraction` rows, vocabulary 3)."""
    bigram_t = TableLM.random(3, 1, seed=11, name="bigram-target")
    bigram_d = TableLM.random(3, 1, seed=12, name="bigram-drafter")
    return [
        ModelPair("zeros", TableLM.context_free((F(1, 2), F(1, 2), F(0)), name="t"),
                  TableLM.context_free((F(0), F(1, 3), F(2, 3)), name="d")),
        ModelPair("bigram", bigram_t, bigram_d),
        ModelPair("parity", FunctionLM(3, _parity, name="parity-target"), bigram_d,
                  prompt=(1,)),
        ModelPair("eos", TableLM.random(3, 1, seed=21, eos=2, name="eos-target"),
                  TableLM.random(3, 1, seed=22, eos=2, name="eos-drafter")),
        ModelPair("p==q", bigram_t, bigram_t),
        ModelPair("one-hot", bigram_t, TableLM.context_free((F(0), F(0), F(1)), name="onehot")),
        ModelPair("ties", TableLM.context_free((F(2, 5), F(2, 5), F(1, 5)), name="tied"),
                  TableLM.context_free((F(1, 5), F(2, 5), F(2, 5)), name="tied-d")),
    ]
