"""OpenVINO GenAI's sampling settings, and the exact law they define on a checkpoint's first tokens.

GenAI's sampler (``src/cpp/src/sampling/logit_processor.hpp`` and ``logit_transformers.hpp``,
openvinotoolkit/openvino.genai; the order has been this one since 2025, and is stated in a comment
there: "Order: top_k → temperature → min_p → top_p") turns a row of logits into the law of the
next token in this order, each step on the output of the previous one:

1. **repetition penalty** ``r``: a logit ``z >= 0`` of a token seen in the prompt *or* the output
   is divided by ``r``, a negative one multiplied (``RepetitionPenaltyTransform``);
2. **presence penalty** ``a``, then **frequency penalty** ``f``, over the *output* tokens only,
   and *towards zero*: ``z >= 0`` loses ``a`` (``f · count``), a negative ``z`` gains it
   (``PresencePenaltyTransform``, ``FrequencyPenaltyTransform``; OpenAI's definition subtracts
   in both cases);
3. greedy decoding (``do_sample=False``): the argmax (the lowest id on a tie); steps 4–7 skipped;
4. **top-k**: the ``k`` largest logits;
5. **temperature**: ``softmax(z / T)`` over what top-k kept;
6. **min-p**: drop the tokens below ``min_p`` times the largest probability, *without*
   renormalising;
7. **top-p**: in descending order, keep tokens until the running sum of the (not renormalised)
   probabilities exceeds ``top_p``; the token drawn is proportional to what is kept.

`processed_row` is that chain in float64 on a row of logits; `reference_law` enumerates the first
``N`` tokens after a prompt, one float64 forward of the Hugging Face checkpoint per prefix
(`dsi_ref.backends.vllm.models.logit_rows`), and returns their exact law. The engine computes
in float32: a cut whose boundary is within `MARGIN` of a token's value on a row the audit
enumerates could go the other way there, so `reference_law` refuses such a setting
(`ReferenceMarginError`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...base.errors import InvalidParameterError

__all__ = ["MARGIN", "ReferenceMarginError", "Sampling", "processed_row", "reference_law"]

#: Relative margin a kept or dropped token must have from a cut (top-k, min-p, top-p) for the
#: float64 reference to decide it as the engine's float32 sampler does.
MARGIN = 1e-4


class ReferenceMarginError(InvalidParameterError):
    """A cut of the sampling settings falls within float32 rounding of a token's value on some
    row of the audit: the engine may keep a token the reference drops (choose other settings)."""


@dataclass(frozen=True)
class Sampling:
    """One request's sampling settings, as GenAI's ``GenerationConfig`` takes them.

    ``None`` leaves a step off; ``temperature = 0`` is greedy decoding (``do_sample=False``).
    """

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None

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
        """A short label: ``T=1``, ``T=0.7 top-k 3``, ``greedy``..."""
        parts = ["greedy" if self.greedy else f"T={self.temperature:g}"]
        for name, value in (("top-k", self.top_k), ("top-p", self.top_p),
                            ("min-p", self.min_p), ("rep", self.repetition_penalty),
                            ("presence", self.presence_penalty),
                            ("frequency", self.frequency_penalty)):
            if value is not None:
                parts.append(f"{name} {value:g}")
        return " ".join(parts)

    def config(self) -> dict[str, Any]:
        """The ``GenerationConfig`` fields (without seed, length and the speculative ones)."""
        out: dict[str, Any] = {"do_sample": not self.greedy}
        if not self.greedy:
            out["temperature"] = float(self.temperature)
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
        return out

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields (what a worker process is sent)."""
        return {"temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p,
                "min_p": self.min_p, "repetition_penalty": self.repetition_penalty,
                "presence_penalty": self.presence_penalty,
                "frequency_penalty": self.frequency_penalty}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Sampling:
        """The inverse of `as_dict`."""
        return cls(**data)


def penalised_logits(logits: np.ndarray, prompt: Sequence[int], output: Sequence[int],
                     sampling: Sampling) -> np.ndarray:
    """Steps 1–2: the repetition penalty, then the presence and frequency penalties."""
    z = np.array(logits, dtype=np.float64)
    r = sampling.repetition_penalty
    if r is not None and r != 1:
        seen = sorted(set(prompt) | set(output))
        z[seen] = np.where(z[seen] >= 0, z[seen] / r, z[seen] * r)
    counts = np.bincount(np.asarray(output, dtype=np.int64), minlength=len(z))[:len(z)]
    used = np.flatnonzero(counts)
    for penalty, amount in ((sampling.presence_penalty, np.ones(len(used))),
                            (sampling.frequency_penalty, counts[used].astype(np.float64))):
        if penalty:
            z[used] = np.where(z[used] >= 0, z[used] - penalty * amount,
                               z[used] + penalty * amount)
    return z


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= MARGIN * max(abs(a), abs(b), 1e-300)


def processed_row(logits: np.ndarray, prompt: Sequence[int], output: Sequence[int],
                  sampling: Sampling) -> np.ndarray:
    """The law of the next token (float64) under ``sampling``, from the raw ``logits`` after
    ``prompt`` and the tokens ``output`` generated so far: GenAI's steps 1–7. Greedy settings
    give the point mass on the argmax of the penalised logits (lowest id on a tie).
    `ReferenceMarginError` when a cut lies within `MARGIN` of a token's value."""
    z = penalised_logits(logits, prompt, output, sampling)
    if sampling.greedy:
        ordered = np.sort(z)[::-1]
        if len(z) > 1 and _close(ordered[0], ordered[1]):
            raise ReferenceMarginError(f"{sampling.label}: two logits tie within {MARGIN:g} "
                                       "on a row of the audit: the argmax is not decided")
        out = np.zeros(len(z))
        out[int(np.argmax(z))] = 1.0
        return out
    kept = np.arange(len(z))
    k = sampling.top_k
    if k is not None and k < len(z):
        ordered = np.sort(z)[::-1]
        if _close(ordered[k - 1], ordered[k]):
            raise ReferenceMarginError(f"{sampling.label}: the top-k cut lies within "
                                       f"{MARGIN:g} of a token's logit on a row of the audit")
        kept = np.argsort(-z, kind="stable")[:k]
    e = np.exp((z[kept] - z[kept].max()) / sampling.temperature)
    probs = e / e.sum()
    if sampling.min_p:
        bound = sampling.min_p * probs.max()
        if any(_close(p, bound) for p in probs):
            raise ReferenceMarginError(f"{sampling.label}: the min-p cut lies within "
                                       f"{MARGIN:g} of a token's probability on a row")
        keep = probs >= bound
        kept, probs = kept[keep], probs[keep]
    if sampling.top_p is not None and sampling.top_p < 1:
        order = np.argsort(-probs, kind="stable")
        running = np.cumsum(probs[order])
        if any(_close(s, sampling.top_p) for s in running[:-1]):
            raise ReferenceMarginError(f"{sampling.label}: the top-p cut lies within "
                                       f"{MARGIN:g} of a running sum on a row of the audit")
        crossed = np.flatnonzero(running > sampling.top_p)
        size = int(crossed[0]) + 1 if len(crossed) else len(order)
        kept, probs = kept[order[:size]], probs[order[:size]]
    out = np.zeros(len(z))
    out[kept] = probs / probs.sum()
    return out


def reference_law(folder: str | Path, prompt: Sequence[int], max_new_tokens: int,
                  sampling: Sampling, *, max_outcomes: int = 10**5
                  ) -> dict[tuple[int, ...], float]:
    """The exact law of the first ``max_new_tokens`` tokens that a request with ``sampling``
    generates after ``prompt`` on the Hugging Face checkpoint in ``folder`` (EOS ignored, as the
    audit's requests ask): one float64 forward per generated prefix, the rows by
    `processed_row`. A law that can have more than ``max_outcomes`` outcomes is refused before
    any forward (`InvalidParameterError`): no audit could reach its power on it."""
    from ..vllm.models import load_config, logit_rows

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
                grown[prefix + (int(token),)] = law[prefix] * float(row[token])
        law = grown
    total = math.fsum(law.values())
    return {outcome: mass / total for outcome, mass in law.items()}
