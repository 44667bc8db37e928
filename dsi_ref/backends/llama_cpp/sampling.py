"""llama.cpp's sampler chain applied exactly, in float64, and the law of the first tokens.

`SamplerConfig` holds the settings a user gives llama.cpp (the binding's ``generate`` keywords,
the C++ examples' ``--temp --top-k ...`` flags). `chain_probs` applies them to one row of logits
the way both apply them (src/llama-sampler.cpp; the order of ``Llama._init_sampler`` and of
``common_params_sampling.samplers``, which agree on these steps):

1. **penalties** over the last ``penalty_last_n`` generated tokens (the prompt does not count:
   neither the binding nor the examples accept it into the sampler): a token seen ``c`` times has
   its logit divided by ``repeat_penalty`` when positive, multiplied when ``<= 0``, then lowered by
   ``c * frequency_penalty + presence_penalty``;
2. **top-k** (``k <= 0``: off): the ``k`` largest logits;
3. **typical-p** (``< 1``): softmax, entropy ``H``, tokens sorted by ``|-log p - H|``, kept until
   the running sum of ``p`` exceeds ``typical_p`` (strictly);
4. **top-p** (``< 1``): softmax, tokens by ``p`` descending, kept until the running sum reaches
   ``top_p`` (``>=``), that token included;
5. **min-p** (``> 0``): tokens whose logit is at least the largest plus ``log min_p``;
6. **temperature**: the surviving logits divided by ``temperature``;
7. **dist**: softmax, one draw.

Every filter sees the logits before the temperature: llama.cpp's order, not Hugging Face's.

`reference_law` is the exact law of the first ``N`` tokens under the chain (from the float64
logits of `dsi_ref.backends.llama_cpp.models.forward`), **coarsened**: a token outside the live
alphabet ends the outcome as `OTHER` (the law after such a token is not needed: a lossless
engine's coarsened law is the target's coarsened law). Each law also carries its **margin**: how
far the float64 logits are from changing a decision of the chain (a token crossing the top-k,
top-p, typical-p or min-p cut). llama.cpp computes the logits in float32, about 1e-5 away; a
margin well above that makes the reference the engine's law, not a neighbour of it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...base.errors import InvalidParameterError
from .models import TinyLlama, forward, live_tokens

__all__ = ["NEGLIGIBLE", "OTHER", "SAMPLERS", "ChainResult", "ReferenceLaw", "SamplerConfig",
           "chain_probs", "coarsen", "reference_law"]

#: The outcome symbol of a token outside the live alphabet (the outcome ends there).
OTHER = -1
#: A decision between tokens that both have less probability than this (before the chain's
#: temperature) does not count towards a margin: however it goes, the law moves by less.
NEGLIGIBLE = 1e-9


@dataclass(frozen=True)
class SamplerConfig:
    """The sampling settings of one cell, as llama.cpp names them.

    Every field is set: llama.cpp's own defaults (top-k 40, top-p 0.95, min-p 0.05, temperature
    0.8) apply whenever a caller leaves one out, so an audit that forgot them would audit another
    law (`DEFAULTS` is that law, as a cell of its own).
    """

    name: str
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    typical_p: float = 1.0
    repeat_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    penalty_last_n: int = 64

    def __post_init__(self) -> None:
        checks = [(self.temperature > 0, "temperature > 0 (greedy is not audited here)"),
                  (0 < self.top_p <= 1, "0 < top_p <= 1"), (0 <= self.min_p < 1, "0 <= min_p < 1"),
                  (0 < self.typical_p <= 1, "0 < typical_p <= 1"),
                  (self.repeat_penalty > 0, "repeat_penalty > 0"),
                  (self.penalty_last_n >= 0, "penalty_last_n >= 0")]
        for ok, what in checks:
            if not ok:
                raise InvalidParameterError(f"sampler {self.name!r}: need {what}")

    def binding_kwargs(self) -> dict[str, Any]:
        """The keywords of ``Llama.generate`` (and ``create_completion``) for these settings."""
        return {"temp": self.temperature, "top_k": self.top_k, "top_p": self.top_p,
                "min_p": self.min_p, "typical_p": self.typical_p,
                "repeat_penalty": self.repeat_penalty,
                "frequency_penalty": self.frequency_penalty,
                "presence_penalty": self.presence_penalty}

    def cli_args(self) -> list[str]:
        """The command-line flags of the C++ examples for these settings."""
        return ["--temp", repr(self.temperature), "--top-k", str(self.top_k),
                "--top-p", repr(self.top_p), "--min-p", repr(self.min_p),
                "--typical", repr(self.typical_p), "--repeat-penalty", repr(self.repeat_penalty),
                "--frequency-penalty", repr(self.frequency_penalty),
                "--presence-penalty", repr(self.presence_penalty),
                "--repeat-last-n", str(self.penalty_last_n)]


#: The cells' samplers: each setting alone, then llama.cpp's defaults together.
SAMPLERS: tuple[SamplerConfig, ...] = (
    SamplerConfig("plain"),
    SamplerConfig("temperature 0.7", temperature=0.7),
    SamplerConfig("top-k 3", top_k=3),
    SamplerConfig("top-p 0.9", top_p=0.9),
    SamplerConfig("min-p 0.1", min_p=0.1),
    SamplerConfig("typical-p 0.9", typical_p=0.9),
    SamplerConfig("repetition penalty 2", repeat_penalty=2.0),
    SamplerConfig("defaults (k 40, p 0.95, min-p 0.05, T 0.8)", temperature=0.8, top_k=40,
                  top_p=0.95, min_p=0.05),
)


@dataclass(frozen=True)
class ChainResult:
    """One row after the chain: the probabilities over the vocabulary (0 for a removed token)
    and the smallest margin of any decision the chain made (``inf`` when it made none)."""

    probs: np.ndarray
    margin: float


def _softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max())
    out: np.ndarray = e / e.sum()
    return out


def _top_k(ids: np.ndarray, logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, float]:
    if k <= 0 or k >= len(ids):
        return ids, logits, math.inf
    order = np.argsort(-logits, kind="stable")
    margin = float(logits[order[k - 1]] - logits[order[k]])
    if _softmax(logits)[order[k - 1]] < NEGLIGIBLE:
        margin = math.inf
    keep = order[:k]
    return ids[keep], logits[keep], margin


def _top_p(ids: np.ndarray, logits: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray, float]:
    if p >= 1:
        return ids, logits, math.inf
    probs = _softmax(logits)
    order = np.argsort(-probs, kind="stable")
    cum = np.cumsum(probs[order])
    last = int(np.searchsorted(cum, p, side="left"))       # first i with cum[i] >= p
    last = min(last, len(ids) - 1)
    margin = float(cum[last] - p)
    if last > 0:
        margin = min(margin, float(p - cum[last - 1]))
    if last + 1 < len(ids) and probs[order[last]] >= NEGLIGIBLE:   # a firm order at the cut
        margin = min(margin, float(probs[order[last]] - probs[order[last + 1]]))
    keep = order[:last + 1]
    return ids[keep], logits[keep], margin


def _typical(ids: np.ndarray, logits: np.ndarray, p: float
             ) -> tuple[np.ndarray, np.ndarray, float]:
    if p >= 1:
        return ids, logits, math.inf
    probs = _softmax(logits)
    entropy = float(-(probs * np.log(probs)).sum())
    shifted = np.abs(-np.log(probs) - entropy)
    order = np.argsort(shifted, kind="stable")
    cum = np.cumsum(probs[order])
    above = np.nonzero(cum > p)[0]
    last = int(above[0]) if len(above) else len(ids) - 1
    margin = float(cum[last] - p)
    if last > 0:
        margin = min(margin, float(p - cum[last - 1]))
    if last + 1 < len(ids) and max(probs[order[last]], probs[order[last + 1]]) >= NEGLIGIBLE:
        margin = min(margin, float(shifted[order[last + 1]] - shifted[order[last]]))
    keep = order[:last + 1]
    return ids[keep], logits[keep], margin


def _min_p(ids: np.ndarray, logits: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray, float]:
    if p <= 0:
        return ids, logits, math.inf
    cut = float(logits.max()) + math.log(p)
    counted = _softmax(logits) >= NEGLIGIBLE
    margin = float(np.abs(logits[counted] - cut).min()) if counted.any() else math.inf
    keep = logits >= cut
    return ids[keep], logits[keep], margin


def _penalised(logits: np.ndarray, history: Sequence[int], config: SamplerConfig) -> np.ndarray:
    window = list(history)[-config.penalty_last_n:] if config.penalty_last_n else []
    out = logits.copy()
    for token in set(window):
        count = window.count(token)
        x = out[token]
        x = x * config.repeat_penalty if x <= 0 else x / config.repeat_penalty
        out[token] = x - count * config.frequency_penalty - config.presence_penalty
    return out


def chain_probs(logits: np.ndarray, config: SamplerConfig,
                history: Sequence[int] = ()) -> ChainResult:
    """The law llama.cpp's chain draws from, given one row of ``logits`` and the tokens
    generated so far (``history``, for the penalties); see the module docstring for the order.
    """
    logits = np.asarray(logits, dtype=np.float64)
    penalised = _penalised(logits, history, config)
    margin = math.inf
    penalty_on = config.penalty_last_n and history and (
        config.repeat_penalty != 1 or config.frequency_penalty or config.presence_penalty)
    if penalty_on:                        # a logit at 0 switches between * and /
        seen = set(list(history)[-config.penalty_last_n:])
        margin = min(abs(float(logits[t])) for t in seen)
    ids = np.arange(len(logits))
    kept = penalised
    steps: list[tuple[Callable[[np.ndarray, np.ndarray, Any], tuple[np.ndarray, np.ndarray,
                                                                     float]], Any]] = [
        (_top_k, config.top_k), (_typical, config.typical_p), (_top_p, config.top_p),
        (_min_p, config.min_p)]
    for step, value in steps:
        ids, kept, m = step(ids, kept, value)
        margin = min(margin, m)
    probs = np.zeros(len(logits))
    probs[ids] = _softmax(kept / config.temperature)
    return ChainResult(probs, margin)


def coarsen(tokens: Sequence[int], n_tokens: int,
            live: Sequence[int] | None = None) -> tuple[int, ...]:
    """An engine's output as an outcome of `reference_law`: the first ``n_tokens`` tokens, cut
    after the first one outside ``live`` (default: the live alphabet), which becomes `OTHER`;
    an output shorter than ``n_tokens`` (the engine stopped: an end-of-generation token) ends
    in `OTHER` too."""
    alphabet = set(live_tokens() if live is None else live)
    out: list[int] = []
    for token in list(tokens)[:n_tokens]:
        if int(token) not in alphabet:
            return (*out, OTHER)
        out.append(int(token))
    return tuple(out) if len(out) == n_tokens else (*out, OTHER)


@dataclass(frozen=True)
class ReferenceLaw:
    """The coarsened law of the first ``n_tokens`` tokens, and its margin (see the module
    docstring)."""

    law: dict[tuple[int, ...], float]
    margin: float
    n_tokens: int
    sampler: SamplerConfig
    forwards: int = field(default=0)


def reference_law(model: TinyLlama, prompt: Sequence[int], n_tokens: int,
                  config: SamplerConfig,
                  logits_of: Callable[[tuple[int, ...]], np.ndarray] | None = None
                  ) -> ReferenceLaw:
    """The exact (float64) law of the first ``n_tokens`` tokens after ``prompt`` (ids, BOS
    included) under ``config``, coarsened by `coarsen`.

    ``logits_of(tokens)`` gives the last row of logits after ``tokens`` (default: `forward` of
    ``model``); it is called once per live prefix, ``|live|^(n_tokens-1)`` times at most.
    """
    if n_tokens < 1:
        raise InvalidParameterError(f"n_tokens must be >= 1, got {n_tokens}")
    prompt = tuple(int(t) for t in prompt)
    if logits_of is None:
        weights = model.weights()

        def logits_of(tokens: tuple[int, ...]) -> np.ndarray:
            last: np.ndarray = forward(model, tokens, weights)[-1]
            return last

    live = live_tokens()
    live_set = frozenset(live)
    law: dict[tuple[int, ...], float] = {}
    margin = math.inf
    forwards = 0
    frontier: list[tuple[tuple[int, ...], float]] = [((), 1.0)]
    for depth in range(n_tokens):
        grown: list[tuple[tuple[int, ...], float]] = []
        for generated, mass in frontier:
            row = chain_probs(logits_of(prompt + generated), config, generated)
            forwards += 1
            margin = min(margin, row.margin)
            # the mass of the tokens outside the live set, summed from their own entries: 0 when
            # the chain removed them all (``1 - sum(live)`` would leave rounding dust of either
            # sign there, an outcome of probability ~1e-17 whose presence depends on the CPU's
            # float kernels and changes the audit's pooling and sample size)
            other = math.fsum(float(p) for t, p in enumerate(row.probs) if t not in live_set)
            if other > 0:
                law[(*generated, OTHER)] = law.get((*generated, OTHER), 0.0) + mass * other
            for t in live:
                if row.probs[t] > 0:
                    child = (*generated, t)
                    if depth + 1 == n_tokens:
                        law[child] = mass * float(row.probs[t])
                    else:
                        grown.append((child, mass * float(row.probs[t])))
        frontier = grown
    return ReferenceLaw(law, margin, n_tokens, config, forwards)
