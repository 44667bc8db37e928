"""The law ``llama-speculative`` samples from, computed exactly from the models (float64).

`speculative_example_law` follows ``examples/speculative/speculative.cpp`` (one draft sequence,
``--temp > 0``) step by step on the float64 rows of `dsi_ref.backends.llama_cpp.sampling`:

1. the first token is drawn from the target's processed law ``p`` (no draft exists yet);
2. a round drafts ``k`` tokens, each the **first candidate** of the drafter's processed law ``q``
   (its most likely token: ``cur_p->data[0]``), the drafter's penalty history extended by the
   drafts;
3. draft ``i`` is accepted when ``r <= p(d) / q(d)`` (``r`` uniform on ``[0, 1)``), so with
   probability ``min(1, p(d) / q(d))``; ``p(d) = 0`` when the target's chain removed ``d``;
4. on a rejection the next token is drawn from the residual: both candidate lists sorted by id and
   subtracted **position by position** (``p_i - q_i``, clipped at 0, normalised), the rule of
   (p − q)+ only when both lists hold the same ids; after a rejection, or after a token drawn
   once every draft was accepted (from ``p`` itself), a new round starts.

The law is coarsened as the audit's reference is (`dsi_ref.backends.llama_cpp.sampling.coarsen`).
A black-box audit of the engine against this law (it must pass) confirms the mechanism; its
distance to the target's law is the loss, computed exactly rather than sampled.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ...base.errors import InvalidParameterError
from .models import TinyLlama, forward, live_tokens
from .sampling import OTHER, SamplerConfig, chain_probs

__all__ = ["aligned_residual", "speculative_example_law"]


def aligned_residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``llama-speculative``'s residual: the candidates of ``p`` and of ``q`` (the tokens they
    keep) sorted by id and subtracted position by position, clipped at 0 and normalised; a
    candidate of ``p`` past the end of ``q``'s list keeps its ``p``. Over the same candidates
    this is ``(p - q)+`` normalised."""
    kept_p, kept_q = np.nonzero(p > 0)[0], np.nonzero(q > 0)[0]
    out = np.zeros_like(p)
    for i, token in enumerate(kept_p):
        out[token] = max(0.0, p[token] - q[kept_q[i]]) if i < len(kept_q) else p[token]
    total = out.sum()
    if not total > 0:
        raise InvalidParameterError("the residual has no mass (p equals q on its candidates)")
    normalised: np.ndarray = out / total
    return normalised


def speculative_example_law(target: TinyLlama, drafter: TinyLlama, prompt: Sequence[int],
                            n_tokens: int, config: SamplerConfig, k: int,
                            target_logits: Callable[[tuple[int, ...]], np.ndarray] | None = None,
                            drafter_logits: Callable[[tuple[int, ...]], np.ndarray] | None = None
                            ) -> tuple[dict[tuple[int, ...], float], float]:
    """The coarsened law of the first ``n_tokens`` tokens of ``llama-speculative`` with draft
    length ``k``, and the smallest gap between the first and second candidate of any ``q`` that
    was drafted from (the greedy choice's margin)."""
    if k < 1 or n_tokens < 1:
        raise InvalidParameterError(f"need k >= 1 and n_tokens >= 1, got {k}, {n_tokens}")
    prompt = tuple(int(t) for t in prompt)
    cache: dict[tuple[str, tuple[int, ...]], np.ndarray] = {}

    def logits(which: str, tokens: tuple[int, ...]) -> np.ndarray:
        key = (which, tokens)
        if key not in cache:
            given = target_logits if which == "p" else drafter_logits
            model = target if which == "p" else drafter
            cache[key] = given(tokens) if given else forward(model, tokens)[-1]
        return cache[key]

    def row(which: str, generated: tuple[int, ...]) -> np.ndarray:
        return chain_probs(logits(which, prompt + generated), config, generated).probs

    live = set(live_tokens())
    law: dict[tuple[int, ...], float] = {}
    margin = [math.inf]

    def emit(outcome: tuple[int, ...], mass: float) -> None:
        law[outcome] = law.get(outcome, 0.0) + mass

    def draw(generated: tuple[int, ...], probs: np.ndarray, mass: float) -> None:
        """A token from ``probs`` ends the round; a new round starts after it."""
        for token in np.nonzero(probs > 0)[0]:
            child = mass * float(probs[token])
            if int(token) not in live:
                emit((*generated, OTHER), child)
            else:
                round_((*generated, int(token)), child)

    def round_(generated: tuple[int, ...], mass: float) -> None:
        if len(generated) == n_tokens:
            emit(generated, mass)
            return
        drafts: list[int] = []
        qs: list[np.ndarray] = []
        for _ in range(k):
            q = row("q", generated + tuple(drafts))
            order = np.argsort(-q, kind="stable")
            margin[0] = min(margin[0], float(q[order[0]] - q[order[1]]))
            drafts.append(int(order[0]))
            qs.append(q)
        verify(generated, drafts, qs, 0, mass)

    def verify(generated: tuple[int, ...], drafts: list[int], qs: list[np.ndarray], i: int,
               mass: float) -> None:
        if len(generated) == n_tokens:
            emit(generated, mass)
            return
        p = row("p", generated)
        if i == len(drafts):
            draw(generated, p, mass)
            return
        d, q = drafts[i], qs[i]
        accept = min(1.0, float(p[d]) / float(q[d]))
        if accept > 0:
            if d not in live:
                emit((*generated, OTHER), mass * accept)
            else:
                verify((*generated, d), drafts, qs, i + 1, mass * accept)
        if accept < 1:
            draw(generated, aligned_residual(p, q), mass * (1 - accept))

    if n_tokens >= 1:
        draw((), row("p", ()), 1.0)
    return law, margin[0]
