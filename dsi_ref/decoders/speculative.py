"""Speculative inference ("SI"; Leviathan et al. 2023, Chen et al. 2023).

Each iteration: the drafter drafts ``m = min(lookahead, remaining − 1)`` tokens autoregressively
(fewer if it drafts EOS), the target scores prefix + drafts in one forward (giving ``p`` at the
``m + 1`` positions), and the drafts are verified left to right (`dsi_ref.decoders.verification`):
the
accepted ones are committed, the first rejected one is replaced by a residual token, and if all are
accepted a bonus token is drawn from ``p`` at the last position. An iteration therefore commits
between 1 and ``m + 1`` tokens and costs ``m·c + 1`` on the virtual clock (docs/paper.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..base.errors import InvalidParameterError
from ..base.latency import Latency
from ..base.models import LanguageModel, Number
from ..base.randomness import Randomness
from ..base.result import Run
from ..base.validate import check_int
from .common import Recorder, check_inputs, merge_hint, model_reader
from .verification import Rule, VerifyRule, as_rule

__all__ = ["SpeculativeConfig", "speculative"]

STATS = ("iterations", "drafts", "accepted", "rejected", "bonus", "target_forwards",
         "drafter_forwards")


@dataclass(frozen=True)
class SpeculativeConfig:
    """Parameters of SI, validated on construction.

    Args:
        lookahead: drafts per iteration (``k`` in docs/paper.md), ``>= 1``.
        verify: ``"rejection"``, ``"exact_match"``, ``"greedy"``, or a `Rule` object.
        latency: forward costs on the virtual clock.
    """

    lookahead: int
    verify: VerifyRule | Rule = "rejection"
    latency: Latency = field(default_factory=Latency)

    def __post_init__(self) -> None:
        object.__setattr__(self, "lookahead", check_int("lookahead", self.lookahead))
        try:
            as_rule(self.verify)
        except (TypeError, ValueError) as error:
            raise InvalidParameterError(str(error)) from None
        if not isinstance(self.latency, Latency):
            raise InvalidParameterError("latency must be a dsi_ref.Latency")


def speculative(target: LanguageModel, drafter: LanguageModel, prompt: Sequence[int],
                max_new_tokens: int, rng: Randomness, lookahead: int = 3,
                verify: VerifyRule | Rule = "rejection", *, latency: Latency | None = None) -> Run:
    """Speculative inference: draft ``lookahead`` tokens, verify them with one target forward.

    Returns a `Run` whose ``tokens`` follow the target's law exactly (for ``"rejection"`` and
    ``"exact_match"``; the greedy target sequence for ``"greedy"``), whatever the drafter.
    """
    config = SpeculativeConfig(lookahead, verify, latency or Latency())
    prompt = check_inputs(target, prompt, max_new_tokens, drafter)
    rule, eos = as_rule(config.verify), target.eos
    rec = Recorder(config.latency, STATS)
    hint = merge_hint(rng)
    target_probs, drafter_probs = model_reader(target), model_reader(drafter)
    tokens: list[int] = []
    done = False
    while len(tokens) < max_new_tokens and not done:
        committed = tuple(tokens)
        if hint:
            hint(rec.state(tokens), entry=rec.stats["iterations"] == 0, committed=committed)
        rec.stats["iterations"] += 1
        start, prefix = len(tokens), prompt + committed
        m = min(config.lookahead, max_new_tokens - start - 1)  # leave room for the bonus token

        # 1. draft m tokens autoregressively: x_j ~ q(· | prefix, x_<j)
        drafts: list[int] = []
        draft_rows: list[Sequence[Number]] = []
        context = committed  # generated tokens before the next draft: committed + drafts
        for j in range(m):
            row = drafter_probs(prompt + context)
            rec.forward("drafter", "draft", (start + j,), rng)
            x = rule.draft(row, rng, context)
            drafts.append(x)
            draft_rows.append(row)
            context += (x,)
            if x == eos:  # nothing is drafted past EOS
                break
        rec.stats["drafts"] += len(drafts)
        rec.stats["drafter_forwards"] += len(drafts)

        # 2. one target forward over prefix + drafts: p at each of the len(drafts) + 1 positions
        target_rows = [target_probs(prefix + context[start:start + j])
                       for j in range(len(drafts) + 1)]
        rec.forward("target", "verify" if drafts else "forward",
                    tuple(range(start, start + len(drafts) + 1)), rng)
        rec.stats["target_forwards"] += 1

        # 3. verify left to right; stop at the first rejection (or at EOS)
        rejected = False
        for j, x in enumerate(drafts):
            decision = rule.decide(target_rows[j], draft_rows[j], x, rng, context[:start + j])
            rec.commit((start + j,), decision.kind)
            tokens.append(decision.token)
            rec.stats["accepted" if decision.accepted else "rejected"] += 1
            rejected = not decision.accepted
            done = decision.token == eos
            if rejected or done:
                break
        # 4. bonus token from p after the last draft, when every draft was accepted
        if not (rejected or done):
            bonus = rule.decide(target_rows[len(drafts)], None, None, rng, context)
            rec.commit((len(tokens),), bonus.kind)
            tokens.append(bonus.token)
            rec.stats["bonus"] += 1
            done = bonus.token == eos
    return rec.result(tokens)
