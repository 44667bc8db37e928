"""Non-speculative sampling ("non-SI"): one target forward per generated token."""

from __future__ import annotations

from collections.abc import Sequence

from ..base.latency import Latency
from ..base.models import LanguageModel
from ..base.randomness import Randomness
from ..base.result import Run
from .common import Recorder, check_inputs, merge_hint, model_probs
from .verification import VerifyRule, decide

__all__ = ["autoregressive"]


def autoregressive(target: LanguageModel, prompt: Sequence[int], max_new_tokens: int,
                   rng: Randomness, *, latency: Latency | None = None,
                   greedy: bool = False) -> Run:
    """Sample ``x_i ~ p(· | prompt, x_<i)`` one token at a time (``argmax p`` if ``greedy``).

    Stops after ``max_new_tokens`` tokens or at the target's EOS. Each step costs one target
    forward (``latency.target_first`` for the first: TTFT + (N − 1)·TPOT in all).
    """
    prompt = check_inputs(target, prompt, max_new_tokens)
    rec = Recorder(latency or Latency(), ("target_forwards", "bonus"))
    hint = merge_hint(rng)
    tokens: list[int] = []
    # with no draft, every rule but greedy samples p; greedy takes argmax p
    rule: VerifyRule = "greedy" if greedy else "rejection"
    for pos in range(max_new_tokens):
        if hint:
            hint(rec.state(tokens), entry=pos == 0, committed=tuple(tokens))
        row = model_probs(target, prompt + tuple(tokens))        # p(· | committed prefix)
        rec.forward("target", "forward", (pos,), rng)
        rec.stats["target_forwards"] += 1
        token = decide(rule, row, None, None, rng, tuple(tokens)).token   # x_pos ~ p
        tokens.append(token)
        rec.stats["bonus"] += 1
        rec.commit((pos,), "bonus")  # a token drawn from p with no draft (the glossary's bonus)
        if token == target.eos:
            break
    return rec.result(tokens)
