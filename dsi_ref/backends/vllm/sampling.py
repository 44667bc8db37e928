"""vLLM's sampling settings, and the exact law they define on a checkpoint's first tokens.

vLLM's sampler (``vllm/v1/sample/sampler.py``) turns a row of logits into the law of the next
token in this order, each step on the logits of the previous one:

1. **logit bias**: ``z_t += b_t`` for every biased token ``t`` (a non-argmax-invariant logits
   processor, before the penalties);
2. **penalties** (``apply_penalties``): the repetition penalty ``r`` divides a positive logit and
   multiplies a negative one for every token seen in the prompt *or* the output; then the
   frequency penalty subtracts ``f · count`` and the presence penalty ``a · [count > 0]``, counts
   over the *output* tokens only (OpenAI's definition);
3. **temperature**: ``z / T`` (greedy when ``T = 0``: the argmax, steps 4–5 skipped);
4. **min-p**: drop the tokens whose probability is below ``min_p`` times the largest;
5. **top-k**, then **top-p**.

Steps 3–5 are `dsi_ref.base.processors` in `VLLM_ORDER` (the one implementation of those
rules, shared with the toy models), on the softmax of the logits after steps 1–2.
`reference_law` enumerates the first ``N`` tokens after a prompt, each row computed from the
checkpoint's float64 logits (`dsi_ref.backends.vllm.models.logit_rows`) with the tokens
generated so far, and returns their exact law as floats. vLLM samples in float32: a cut whose
boundary is within rounding of a token's probability could go the other way there, so
`reference_law` refuses a setting whose cuts are that close (`ReferenceMarginError`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...base.errors import InvalidParameterError
from ...base.processors import VLLM_ORDER, Processors

__all__ = ["ReferenceMarginError", "Sampling", "processed_row", "reference_law"]

#: Relative margin a kept or dropped token must have from a cut (min-p, top-k, top-p) for the
#: float64 reference to decide it as vLLM's float32 sampler does.
MARGIN = 1e-4


class ReferenceMarginError(InvalidParameterError):
    """A cut of the sampling settings falls within float32 rounding of a token's probability on
    some row the audit enumerates: vLLM may keep a token the reference drops (choose other
    settings)."""


@dataclass(frozen=True)
class Sampling:
    """One request's sampling settings, as vLLM's ``SamplingParams`` takes them.

    ``None`` leaves a step off. ``temperature = 0`` is greedy decoding. ``logit_bias`` is a
    tuple of ``(token id, bias)`` pairs.
    """

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: tuple[tuple[int, float], ...] = ()

    def __post_init__(self) -> None:
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise InvalidParameterError(f"temperature must be >= 0, got {self.temperature!r}")
        if self.top_k is not None and self.top_k < 1:
            raise InvalidParameterError(f"top_k must be >= 1, got {self.top_k!r}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise InvalidParameterError(f"top_p must lie in (0, 1], got {self.top_p!r}")
        if self.min_p is not None and not 0 <= self.min_p < 1:
            raise InvalidParameterError(f"min_p must lie in [0, 1), got {self.min_p!r}")
        if self.repetition_penalty is not None and not self.repetition_penalty > 0:
            raise InvalidParameterError(
                f"repetition_penalty must be > 0, got {self.repetition_penalty!r}")

    @property
    def greedy(self) -> bool:
        """Greedy decoding (``temperature == 0``)."""
        return self.temperature == 0

    @property
    def label(self) -> str:
        """A short label: ``T=1``, ``T=0.7 top-k 3``, ``greedy``, ``bias 2:+1.5``..."""
        parts = ["greedy" if self.greedy else f"T={self.temperature:g}"]
        for name, value in (("top-k", self.top_k), ("top-p", self.top_p),
                            ("min-p", self.min_p), ("rep", self.repetition_penalty),
                            ("presence", self.presence_penalty),
                            ("frequency", self.frequency_penalty)):
            if value is not None:
                parts.append(f"{name} {value:g}")
        if self.logit_bias:
            parts.append("bias " + ",".join(f"{t}:{b:+g}" for t, b in self.logit_bias))
        return " ".join(parts)

    def params(self) -> dict[str, Any]:
        """The keyword arguments of vLLM's ``SamplingParams`` (without seed and length)."""
        out: dict[str, Any] = {"temperature": float(self.temperature)}
        if self.top_k is not None:
            out["top_k"] = int(self.top_k)
        if self.top_p is not None:
            out["top_p"] = float(self.top_p)
        if self.min_p is not None:
            out["min_p"] = float(self.min_p)
        if self.repetition_penalty is not None:
            out["repetition_penalty"] = float(self.repetition_penalty)
        if self.presence_penalty is not None:
            out["presence_penalty"] = float(self.presence_penalty)
        if self.frequency_penalty is not None:
            out["frequency_penalty"] = float(self.frequency_penalty)
        if self.logit_bias:
            out["logit_bias"] = {int(t): float(b) for t, b in self.logit_bias}
        return out

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields (what a worker process is sent)."""
        return {"temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p,
                "min_p": self.min_p, "repetition_penalty": self.repetition_penalty,
                "presence_penalty": self.presence_penalty,
                "frequency_penalty": self.frequency_penalty,
                "logit_bias": [list(pair) for pair in self.logit_bias]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Sampling:
        """The inverse of `as_dict`."""
        fields = dict(data)
        fields["logit_bias"] = tuple((int(t), float(b)) for t, b in data.get("logit_bias", ()))
        return cls(**fields)

    def processors(self) -> Processors | None:
        """Steps 3–5 as `Processors` in `VLLM_ORDER` (``None`` when greedy)."""
        if self.greedy:
            return None
        return Processors(temperature=self.temperature, top_k=self.top_k, top_p=self.top_p,
                          min_p=self.min_p, order=VLLM_ORDER, exact=False)


def penalised_logits(logits: np.ndarray, prompt: Sequence[int], output: Sequence[int],
                     sampling: Sampling) -> np.ndarray:
    """Steps 1–2: the logit bias, then the repetition, frequency and presence penalties."""
    z = np.array(logits, dtype=np.float64)
    for token, bias in sampling.logit_bias:
        z[token] += bias
    r = sampling.repetition_penalty
    if r is not None and r != 1:
        seen = sorted(set(prompt) | set(output))
        z[seen] = np.where(z[seen] > 0, z[seen] / r, z[seen] * r)
    counts = np.bincount(np.asarray(output, dtype=np.int64), minlength=len(z))[:len(z)]
    if sampling.frequency_penalty:
        z -= sampling.frequency_penalty * counts
    if sampling.presence_penalty:
        z -= sampling.presence_penalty * (counts > 0)
    return z


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    out: np.ndarray = e / e.sum()
    return out


def _check_margins(probs: np.ndarray, sampling: Sampling) -> None:
    """`ReferenceMarginError` when a cut's boundary is within `MARGIN` of a probability."""
    tempered = _softmax(np.log(np.maximum(probs, 1e-300)) / sampling.temperature)
    row = tempered
    for step in VLLM_ORDER[1:]:
        value = getattr(sampling, step)
        if value is None:
            continue
        if step == "min_p":
            bound = value * row.max()
            close = np.abs(row - bound) <= MARGIN * bound
        elif step == "top_k":
            ordered = np.sort(row)[::-1]
            close = (np.array([value < len(row) and abs(ordered[value - 1] - ordered[value])
                               <= MARGIN * ordered[value - 1]]))
        else:
            ordered = np.sort(row)[::-1]
            above = np.cumsum(ordered) - ordered  # mass strictly above each token
            close = np.abs(above - value) <= MARGIN
        if close.any():
            raise ReferenceMarginError(
                f"{sampling.label}: the {step} cut lies within {MARGIN:g} of a token's "
                "probability on a row of the audit: vLLM's float32 sampler may decide it "
                "otherwise; choose another value")
        one = Processors(**{step: value}, order=VLLM_ORDER, exact=False)
        kept = np.asarray(one.apply(row.tolist()), dtype=np.float64)
        row = kept


def processed_row(logits: np.ndarray, prompt: Sequence[int], output: Sequence[int],
                  sampling: Sampling) -> np.ndarray:
    """The law of the next token (float64) under ``sampling``, from the raw ``logits`` after
    ``prompt`` and the tokens ``output`` generated so far: vLLM's steps 1–5. Greedy settings
    give the point mass on the argmax of the penalised logits (lowest id on a tie)."""
    z = penalised_logits(logits, prompt, output, sampling)
    if sampling.greedy:
        out = np.zeros(len(z))
        out[int(np.argmax(z))] = 1.0
        return out
    probs = _softmax(z)
    _check_margins(probs, sampling)
    processors = sampling.processors()
    assert processors is not None
    return np.asarray(processors.apply(probs.tolist()), dtype=np.float64)


def reference_law(folder: str | Path, prompt: Sequence[int], max_new_tokens: int,
                  sampling: Sampling, *, min_mass: float = 0.0,
                  max_outcomes: int = 10**5) -> dict[tuple[int, ...], float]:
    """The exact law of the first ``max_new_tokens`` tokens that a request with ``sampling``
    generates after ``prompt`` on the checkpoint in ``folder`` (EOS ignored, as the audit's
    requests ask): one float64 forward per generated prefix, the rows by `processed_row`.
    Outcomes of probability ``<= min_mass`` are dropped along with their subtrees (0 keeps every
    outcome of positive probability). A law that can have more than ``max_outcomes`` outcomes
    (``V^N``, or ``k^N`` with top-k ``k``) is refused before any forward
    (`InvalidParameterError`: on a real vocabulary, shrink the support with top-k or ask for
    fewer tokens): no audit could reach its power on such a law anyway."""
    from .models import load_config, logit_rows

    width = int(load_config(folder)["vocab_size"])
    if sampling.greedy:
        width = 1
    elif sampling.top_k is not None:
        width = min(width, sampling.top_k)
    if width ** max_new_tokens > max_outcomes:
        raise InvalidParameterError(
            f"the exact law of {max_new_tokens} tokens can have {width}^{max_new_tokens} "
            f"outcomes, more than {max_outcomes}: no statistical audit reaches its power on "
            "it; limit the support (top_k) or the tokens")
    prompt = tuple(int(t) for t in prompt)
    law: dict[tuple[int, ...], float] = {(): 1.0}
    for _ in range(max_new_tokens):
        prefixes = list(law)
        rows = logit_rows(folder, [prompt + p for p in prefixes])
        grown: dict[tuple[int, ...], float] = {}
        for prefix, logits in zip(prefixes, rows, strict=True):
            row = processed_row(logits, prompt, prefix, sampling)
            for token in np.flatnonzero(row > 0):
                mass = law[prefix] * float(row[token])
                if mass > min_mass:
                    grown[prefix + (int(token),)] = mass
        law = grown
    total = math.fsum(law.values())
    return {outcome: mass / total for outcome, mass in law.items()}
