"""Non-speculative sampling ("non-SI"): one target forward per generated token.

Non-SI is SI with an empty window: each iteration of `dsi_ref.decoders.speculative.SIRun` without
a drafter is one target forward and one bonus token (a token drawn from ``p`` with no draft, the
glossary's bonus), so the loop is written once, there.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..base.latency import Latency
from ..base.models import LanguageModel
from ..base.randomness import Randomness
from ..base.result import Run
from ..base.validate import check_bool
from .common import check_inputs
from .speculative import SIRun, SpeculativeConfig

__all__ = ["autoregressive", "non_si_config"]


def non_si_config(greedy: bool, latency: Latency | None = None) -> SpeculativeConfig:
    """The configuration of a non-SI `SIRun` (no drafter): with no draft, every rule but greedy
    samples ``p``, and greedy takes ``argmax p`` (the lookahead is unused)."""
    return SpeculativeConfig(1, "greedy" if greedy else "rejection",
                             Latency() if latency is None else latency)


def autoregressive(target: LanguageModel, prompt: Sequence[int], max_new_tokens: int,
                   rng: Randomness, *, latency: Latency | None = None,
                   greedy: bool = False) -> Run:
    """Sample ``x_i ~ p(· | prompt, x_<i)`` one token at a time (``argmax p`` if ``greedy``).

    Stops after ``max_new_tokens`` tokens or at the target's EOS. Each step costs one target
    forward (``latency.target_first`` for the first: TTFT + (N − 1)·TPOT in all).
    """
    check_bool("greedy", greedy)
    prompt = check_inputs(target, prompt, max_new_tokens, rng=rng)
    return SIRun(target, None, prompt, max_new_tokens, rng, non_si_config(greedy, latency)).run()
