"""Sampling processors as models: ``processed(model, temperature=..., top_k=..., top_p=...,
min_p=...)`` is a `LanguageModel` whose next-token law is the processed one.

An engine that samples with processors samples from a law that is not the model's: speculation
must then be lossless with respect to the *processed target*. Writing the processed law as a model
makes that law a first-class object: the exact audit computes it, compares a decoder with it, and a
drafter may carry processors of its own (SI and DSI are lossless with respect to the processed
target whatever the drafter's processors, as long as the verifier is told the ``q`` the drafts
were drawn from).

**The steps** (``p`` is the row of the wrapped model, every step renormalises what it keeps):

* temperature ``T``: ``p ↦ p^{1/T} / Σ p^{1/T}`` (``softmax(logits / T)``);
* top-k: keep the tokens whose probability is at least the ``k``-th largest;
* top-p: keep the tokens whose probability is at least ``v``, where ``v`` is the probability of
  the last token the descending order needs for its cumulative mass to reach ``top_p``;
* min-p: keep the tokens whose probability is at least ``min_p · max p``.

**Order.** Hugging Face's ``generate`` builds its ``LogitsProcessorList`` in the order
temperature, top-k, top-p, min-p (``GenerationMixin._get_logits_processor``, transformers 5.23
to 5.25); that is `HF_ORDER`, the default. vLLM's V1 sampler applies min-p right after the
temperature and before top-k/top-p (`VLLM_ORDER`). ``order=`` takes any permutation of the four
step names.

**Ties are kept.** Every cut keeps all the tokens tied with its boundary value, so the kept set
is closed under ties and the processed law does not depend on token ids. For top-k and min-p
this is Hugging Face's and vLLM's rule (``scores < kth`` and ``probs < min_p · max`` are what is
removed). For top-p the engines keep as many of the boundary's tied tokens as their sort order
happens to reach (implementation-defined); here all of them are kept, a superset of every such
choice. Example: ``(2/5, 2/5, 1/5)`` with ``top_p = 1/2`` keeps both tokens of mass ``2/5``.

**Exactness.** On `Fraction` rows every step is exact except a temperature whose ``1/T`` is not an
integer: ``p^{1/T}`` is then irrational in general. With ``exact=True`` (the default) only the
exact temperatures ``T = 1/n`` (``n = 1, 2, ...``: ``p^n / Σ p^n``) are accepted, and any other
one is refused with `InvalidParameterError`; ``exact=False`` computes the temperature step in
float64 (`float_temperature`, with the error bound stated there) and the later cuts on those
floats. Float rows are processed in floats either way.

**EOS** is the wrapped model's: processors change probabilities, never the vocabulary or EOS.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Literal, TypeAlias

from .errors import InvalidParameterError
from .models import UNIT_ROUNDOFF, LanguageModel, Number, Prefix, checked_probs, normalised
from .validate import check_bool, check_int, check_number

__all__ = [
    "HF_ORDER",
    "STEPS",
    "VLLM_ORDER",
    "ProcessedLM",
    "Processors",
    "Step",
    "float_temperature",
    "processed",
    "temperature_error_bound",
]

Step: TypeAlias = Literal["temperature", "top_k", "top_p", "min_p"]
#: The processor steps, by name.
STEPS: tuple[Step, ...] = ("temperature", "top_k", "top_p", "min_p")
#: Hugging Face's order (``GenerationMixin._get_logits_processor``): the default.
HF_ORDER: tuple[Step, ...] = ("temperature", "top_k", "top_p", "min_p")
#: vLLM V1's order: min-p is applied with the argmax-invariant processors, before top-k/top-p.
VLLM_ORDER: tuple[Step, ...] = ("temperature", "min_p", "top_k", "top_p")


@dataclass(frozen=True)
class Processors:
    """Validated processor settings (``None``: the step is off) and the order they apply in.

    Args:
        temperature: ``T > 0``; exact when ``1/T`` is a positive integer (see the module).
        top_k: ``k >= 1``.
        top_p: ``top_p`` in ``(0, 1]`` (``1`` keeps everything).
        min_p: ``min_p`` in ``[0, 1)`` (``0`` keeps everything).
        order: a permutation of `STEPS` (default `HF_ORDER`).
        exact: refuse a temperature that cannot be exact (``exact=False``: float semantics).

    Raises:
        InvalidParameterError: a value outside its domain, NaN or infinite; a bad ``order``; a
            temperature with ``1/T`` not an integer while ``exact=True``.
    """

    temperature: Number | None = None
    top_k: int | None = None
    top_p: Number | None = None
    min_p: Number | None = None
    order: tuple[Step, ...] = HF_ORDER
    exact: bool = True

    def __post_init__(self) -> None:
        check_bool("exact", self.exact)
        if self.temperature is not None:
            check_number("temperature", self.temperature, positive=True)
            if self.exact and self.power is None:
                raise InvalidParameterError(
                    f"temperature={self.temperature!r} has 1/T = {_inverse(self.temperature)}, "
                    "not an integer: p^(1/T) is irrational in general. Exact temperatures are "
                    "T = 1/n (e.g. Fraction(1, 2)); pass exact=False for float64 semantics")
        if self.top_k is not None:
            object.__setattr__(self, "top_k", check_int("top_k", self.top_k))
        if self.top_p is not None:
            check_number("top_p", self.top_p)
            if not 0 < self.top_p <= 1:
                raise InvalidParameterError(f"top_p must lie in (0, 1], got {self.top_p!r}")
        if self.min_p is not None:
            check_number("min_p", self.min_p)
            if not 0 <= self.min_p < 1:
                raise InvalidParameterError(f"min_p must lie in [0, 1), got {self.min_p!r}")
        order: object = self.order
        if (isinstance(order, str) or not isinstance(order, Sequence)
                or len(order) != len(STEPS) or sorted(map(str, order)) != sorted(STEPS)):
            raise InvalidParameterError(f"order must be a permutation of {STEPS}, got {order!r}")
        object.__setattr__(self, "order", tuple(order))

    @property
    def power(self) -> int | None:
        """``n = 1/T`` when it is a positive integer (the exact temperatures), else ``None``."""
        if self.temperature is None:
            return 1
        inverse = 1 / Fraction(self.temperature)
        return int(inverse) if inverse.denominator == 1 else None

    def describe(self) -> str:
        """The active steps, in order: ``"T=1/2, top_k=2"``; ``"none"`` when all are off."""
        parts = [f"{'T' if s == 'temperature' else s}={getattr(self, s)}"
                 for s in self.order if self.active(s)]
        return ", ".join(parts) or "none"

    def active(self, step: Step) -> bool:
        """Whether ``step`` changes some row (``T = 1``, ``top_p = 1``, ``min_p = 0`` do not)."""
        value = getattr(self, step)
        if value is None:
            return False
        if step == "temperature":
            return bool(value != 1)
        if step == "top_p":
            return bool(value < 1)
        if step == "min_p":
            return bool(value > 0)
        return True

    def apply(self, row: Sequence[Number]) -> tuple[Number, ...]:
        """The processed row of a distribution ``row`` (exact on `Fraction` rows, see the
        module; float rows, and a float temperature, give float rows)."""
        out: list[Number] = [Fraction(x) if isinstance(x, int) else x for x in row]
        for step in self.order:
            if not self.active(step):
                continue
            if step == "temperature":
                power = self.power
                if power is not None and self.exact:
                    out = _normalise([x ** power for x in out])
                else:
                    out = list(float_temperature(out, _given(self.temperature)))
            elif step == "top_k":
                out = _keep_at_least(out, _kth_largest(out, int(_given(self.top_k))))
            elif step == "top_p":
                out = _keep_at_least(out, _top_p_boundary(out, _given(self.top_p)))
            else:
                out = _keep_at_least(out, max(out) * _given(self.min_p))
        return tuple(out)


def _given(value: Number | None) -> Number:
    assert value is not None  # only active steps are applied
    return value


def _inverse(value: Number) -> str:
    return str(1 / Fraction(value)) if isinstance(value, Fraction | int) else repr(1 / value)


def _normalise(row: list[Number]) -> list[Number]:
    """`dsi_ref.base.models.normalised`, as a list (the steps of `Processors.apply` edit it)."""
    return list(normalised(row))


def _kth_largest(row: Sequence[Number], k: int) -> Number:
    return sorted(row, reverse=True)[min(k, len(row)) - 1]


def _top_p_boundary(row: Sequence[Number], top_p: Number) -> Number:
    """The probability of the last token that the descending order needs for its cumulative
    mass to reach ``top_p`` (the row sums to 1; a float row reaches at least its last entry)."""
    cumulative: Number = 0
    ordered = sorted(row, reverse=True)
    for x in ordered:
        cumulative += x
        if cumulative >= top_p:
            return x
    return ordered[-1]


def _keep_at_least(row: Sequence[Number], threshold: Number) -> list[Number]:
    """Zero every entry below ``threshold`` (ties with it are kept), then renormalise."""
    return _normalise([x if x >= threshold else 0 * x for x in row])


def float_temperature(row: Sequence[Number], temperature: Number) -> tuple[float, ...]:
    """The temperature step in float64: ``y_i = fl(p_i)^(1/T)``, then ``y_i / Σ y``.

    Error bound (first order in ``u = 2^-53``, with a ``pow`` accurate to one ulp, as C
    libraries' are): ``fl(p_i)`` carries a relative error ``u``, which the power multiplies by
    ``1/T``, and ``pow`` adds ``u``; the sum of ``V`` terms adds ``(V − 1) u`` and the division
    ``u``. So every entry is within relative error ``(2/T + V + 2) u`` of the exact
    ``p_i^{1/T} / Σ p^{1/T}``, and the row's total-variation distance from it is at most
    ``(1/T + V/2 + 1) u`` (`temperature_error_bound`). The cuts applied after a float
    temperature are decided on these floats: a token whose exact probability lies within that
    relative error of a cut may fall on the other side of it.
    """
    inverse = 1.0 / float(temperature)
    powered = [float(x) ** inverse if x > 0 else 0.0 for x in row]
    total = math.fsum(powered)
    return tuple(y / total for y in powered)


def temperature_error_bound(vocab_size: int, temperature: Number) -> float:
    """The bound of `float_temperature` on the total-variation distance of one row from the
    exact tempered row: ``(1/T + V/2 + 1) · 2^-53``."""
    return (1 / float(temperature) + vocab_size / 2 + 1) * UNIT_ROUNDOFF


class ProcessedLM:
    """The processed law of ``model`` as a `LanguageModel` (see the module for the steps).

    ``probs(prefix)`` is ``processors.apply(model.probs(prefix))``; the wrapped model's rows are
    validated, and the processed rows are distributions by construction (``prevalidated``).
    Rows are cached per prefix (models are functions of the prefix).
    """

    #: Rows are distributions by construction (the wrapped model's rows are validated here).
    prevalidated = True

    def __init__(self, model: LanguageModel, processors: Processors, name: str | None = None
                 ) -> None:
        if not isinstance(model, LanguageModel):
            raise InvalidParameterError(f"model must be a LanguageModel, got {model!r}")
        if not isinstance(processors, Processors):
            raise InvalidParameterError(f"processors must be a Processors, got {processors!r}")
        self.model = model
        self.processors = processors
        self.vocab_size: int = model.vocab_size
        self.eos: int | None = model.eos
        inner = getattr(model, "name", None) or type(model).__name__
        self.name = name or f"processed({inner}; {processors.describe()})"
        self._row = lru_cache(maxsize=1 << 16)(self._compute)

    def __repr__(self) -> str:
        return f"ProcessedLM({self.name!r})"

    def _compute(self, prefix: Prefix) -> tuple[Number, ...]:
        return self.processors.apply(checked_probs(self.model, prefix))

    def probs(self, prefix: Prefix) -> tuple[Number, ...]:
        """The processed next-token row after ``prefix``."""
        return self._row(tuple(prefix))


def processed(model: LanguageModel, *, temperature: Number | None = None,
              top_k: int | None = None, top_p: Number | None = None,
              min_p: Number | None = None, order: Sequence[Step] = HF_ORDER,
              exact: bool = True) -> ProcessedLM:
    """The model whose next-token law is ``model``'s after the sampling processors.

    Steps (each renormalises; ``None`` turns a step off): temperature ``p^{1/T}``, top-k, top-p,
    min-p, applied in ``order`` (default Hugging Face's: temperature → top-k → top-p → min-p;
    `VLLM_ORDER` is vLLM's). Every cut keeps the tokens tied with its boundary. Exact on
    `Fraction` rows for the temperatures ``T = 1/n``; any other temperature needs
    ``exact=False`` (float64 semantics, error bound in `float_temperature`). EOS is ``model``'s.

    >>> from fractions import Fraction as F
    >>> from dsi_ref.base.models import TableLM
    >>> m = TableLM.context_free((F(1, 2), F(1, 3), F(1, 6)))
    >>> processed(m, temperature=F(1, 2)).probs(())
    (Fraction(9, 14), Fraction(2, 7), Fraction(1, 14))
    >>> processed(m, top_k=2).probs(())
    (Fraction(3, 5), Fraction(2, 5), Fraction(0, 1))
    >>> processed(m, top_p=F(1, 2)).probs(())
    (Fraction(1, 1), Fraction(0, 1), Fraction(0, 1))

    Raises:
        InvalidParameterError: ``top_k < 1``; ``top_p`` outside ``(0, 1]``; ``min_p`` outside
            ``[0, 1)``; ``temperature <= 0``; NaN or infinite values; a bad ``order``; an inexact
            temperature with ``exact=True``.
    """
    settings = Processors(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                          order=order,  # type: ignore[arg-type]  # validated: a permutation
                          exact=exact)
    return ProcessedLM(model, settings)
