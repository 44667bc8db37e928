"""Hypothesis strategies for dsi-ref: toy models, model pairs, prompts, lookaheads, latencies.

Built with ``@st.composite`` so that shrinking works on the parts (rows shrink towards small
numerators, pairs towards small vocabularies). The generated models stress the edges of the
verification rules: zeros in rows (drafts the target never emits), ties (greedy tie-breaking),
``p == q`` (empty residual), one-hot rows, EOS, context dependence (iteration boundaries).

>>> from hypothesis import given
>>> @given(model_pairs())
... def test(pair): ...
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from hypothesis import strategies as st

from ..base.latency import Latency
from ..base.models import LanguageModel, Number, Prefix, TableLM
from ..base.processors import HF_ORDER, STEPS, VLLM_ORDER, Processors

__all__ = [
    "exact_rows",
    "language_models",
    "latencies",
    "lookaheads",
    "model_pairs",
    "processors",
    "prompts",
    "sp_degrees",
]

Draw = Any  # hypothesis' draw function


@st.composite
def exact_rows(draw: Draw, vocab_size: int, *, denominator: int = 6,
               allow_zeros: bool = True) -> tuple[Fraction, ...]:
    """A probability row over ``vocab_size`` tokens with entries in ``(1/denominator)·ℕ``.

    Zeros, ties and one-hot rows come up often because the numerators are small integers.
    """
    low = 0 if allow_zeros else 1
    counts = draw(st.lists(st.integers(low, denominator), min_size=vocab_size,
                           max_size=vocab_size))
    if sum(counts) == 0:  # keep at least one token possible (no filter: shrinks cleanly)
        counts[draw(st.integers(0, vocab_size - 1))] = 1
    total = sum(counts)
    return tuple(Fraction(c, total) for c in counts)


def _float_row(row: Sequence[Fraction]) -> tuple[float, ...]:
    # exact conversion then a renormalisation in float, so the sum is 1 within 1e-15
    floats = [float(x) for x in row]
    total = sum(floats)
    return tuple(x / total for x in floats)


@st.composite
def language_models(draw: Draw, vocab_size: int | None = None, *, max_vocab: int = 3,
                    max_context: int = 1, eos: int | bool | None = None, exact: bool = True,
                    denominator: int = 6, name: str = "model") -> TableLM:
    """A `TableLM` n-gram model with random exact rows (``exact=False``: float rows).

    Args:
        vocab_size: fixed vocabulary size, or ``None`` to draw one in ``2..max_vocab``.
        max_context: the context length is drawn in ``0..max_context`` (0: context-free).
        eos: an EOS id, ``None`` for none, or ``True`` to draw whether (and which) EOS to use.
        exact: `Fraction` rows (default) or floats.
        denominator: rows have entries in ``(1/denominator)·ℕ`` before normalisation.
    """
    v = vocab_size if vocab_size is not None else draw(st.integers(2, max_vocab))
    context = draw(st.integers(0, max_context))
    if eos is True:
        eos = draw(st.none() | st.integers(0, v - 1))
    elif eos is False:
        eos = None
    table: dict[Prefix, tuple[Number, ...]] = {}
    for length in range(context + 1):
        for key in _contexts(v, length):
            row = draw(exact_rows(v, denominator=denominator))
            table[key] = row if exact else _float_row(row)
    return TableLM(vocab_size=v, context=context, table=table, eos=eos, name=name)


def _contexts(vocab_size: int, length: int) -> list[Prefix]:
    out: list[Prefix] = [()]
    for _ in range(length):
        out = [k + (t,) for k in out for t in range(vocab_size)]
    return out


@st.composite
def model_pairs(draw: Draw, *, max_vocab: int = 3, max_context: int = 1,
                eos: int | bool | None = True, exact: bool = True,
                same: float | None = None) -> tuple[LanguageModel, LanguageModel]:
    """A ``(target, drafter)`` pair sharing vocabulary and EOS.

    With some probability (or always, ``same=1``) the drafter *is* the target (``p == q``), and
    sometimes it is a one-hot context-free model (a drafter that always proposes one token).
    """
    v = draw(st.integers(2, max_vocab))
    if eos is True:
        eos = draw(st.none() | st.integers(0, v - 1))
    target = draw(language_models(v, max_context=max_context, eos=eos, exact=exact,
                                  name="target"))
    kind = "same" if same == 1 else draw(st.sampled_from(["random", "random", "same",
                                                          "one-hot"]))
    if kind == "same":
        return target, target
    if kind == "one-hot":
        token = draw(st.integers(0, v - 1))
        row = tuple(Fraction(int(i == token)) for i in range(v))
        drafter = TableLM.context_free(row if exact else _float_row(row), eos=eos,
                                       name="one-hot drafter")
        return target, drafter
    drafter = draw(language_models(v, max_context=max_context, eos=eos, exact=exact,
                                   name="drafter"))
    return target, drafter


def prompts(vocab_size: int, *, max_len: int = 2) -> st.SearchStrategy[tuple[int, ...]]:
    """Prompts of length ``0..max_len`` over ``vocab_size`` tokens."""
    return st.lists(st.integers(0, vocab_size - 1), max_size=max_len).map(tuple)


def lookaheads(max_lookahead: int = 3) -> st.SearchStrategy[int]:
    """Lookaheads ``k`` in ``1..max_lookahead``."""
    return st.integers(1, max_lookahead)


def sp_degrees(max_sp: int = 3) -> st.SearchStrategy[int]:
    """Numbers of target servers ``SP`` in ``1..max_sp``."""
    return st.integers(1, max_sp)


@st.composite
def latencies(draw: Draw, *, random: bool = False, prefill: bool = True) -> Latency:
    """A `Latency` with exact costs: drafter ``c`` in {1/10, 1/4, 1/2, 1, 3/2} (c = 1 makes ties
    with the target), target 1, sometimes TTFT ≠ TPOT; ``random=True`` adds small discrete
    latency laws (two values) for the drafter and the target."""
    c = draw(st.sampled_from([Fraction(1, 10), Fraction(1, 4), Fraction(1, 2), Fraction(1),
                              Fraction(3, 2)]))
    target: Any = Fraction(1)
    drafter: Any = c
    if random and draw(st.booleans()):
        drafter = {c: Fraction(1, 2), 2 * c: Fraction(1, 2)}
    if random and draw(st.booleans()):
        target = {Fraction(1): Fraction(2, 3), Fraction(2): Fraction(1, 3)}
    target_first = draw(st.sampled_from([None, Fraction(2)])) if prefill else None
    return Latency(drafter=drafter, target=target, target_first=target_first)


@st.composite
def processors(draw: Draw, vocab_size: int = 3, *, orders: bool = True) -> Processors:
    """Sampling-processor settings (`dsi_ref.base.processors.Processors`) for ``processed``.

    Each step is off or on independently: an exact temperature ``T`` in {1, 1/2, 1/3}; top-k
    with ``k`` in ``1..vocab_size`` (``k = 1`` on a row with tied maxima keeps all of them);
    top-p and min-p on small-denominator fractions, so that the cumulative mass of the rows of
    `exact_rows` lands exactly on ``top_p`` and a probability exactly on ``min_p · max`` (the
    boundary cases); ``orders=True`` also draws the order (Hugging Face's, vLLM's or any
    permutation of the steps).
    """
    temperature = draw(st.sampled_from([None, Fraction(1), Fraction(1, 2), Fraction(1, 3)]))
    top_k = draw(st.none() | st.integers(1, vocab_size))
    top_p = draw(st.none() | st.sampled_from([Fraction(1, 4), Fraction(1, 3), Fraction(1, 2),
                                              Fraction(2, 3), Fraction(3, 4), Fraction(1)]))
    min_p = draw(st.none() | st.sampled_from([Fraction(0), Fraction(1, 4), Fraction(1, 3),
                                              Fraction(1, 2), Fraction(2, 3)]))
    order = HF_ORDER
    if orders:
        order = draw(st.sampled_from([HF_ORDER, VLLM_ORDER]) | st.permutations(STEPS).map(tuple))
    return Processors(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                      order=order)
