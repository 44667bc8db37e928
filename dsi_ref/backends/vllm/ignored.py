"""Options vLLM accepts and then ignores, found by comparing outputs seed by seed.

An option that changes the algorithm changes some request's tokens for a fixed seed. When two
engines, one with the option and one without, give the same tokens for every one of many
seeds, the option did nothing. That is how ``rejection_sample_method="block"`` shows on a CPU:
vLLM's CPU runner uses the rejection sampler of ``vllm/v1/sample``, which implements the
standard rule only (block verification lives in the GPU runner's sampler), and says nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .engine import EngineConfig, EngineProcess
from .models import build_models
from .sampling import Sampling

__all__ = ["IgnoredOption", "compare_outputs", "ignored_options"]


@dataclass(frozen=True)
class IgnoredOption:
    """The comparison of an option against the default, seed by seed."""

    name: str
    seeds: int
    same: int
    expected: str

    @property
    def verdict(self) -> str:
        """``ignored`` (every seed gave the same tokens) or ``applied``."""
        return "ignored" if self.same == self.seeds else "applied"

    @property
    def ok(self) -> bool:
        """The verdict is the expected one."""
        return self.verdict == self.expected

    @property
    def note(self) -> str:
        """How many seeds gave the same tokens."""
        return f"{self.same}/{self.seeds} seeds give the same tokens as the default"


def compare_outputs(base: EngineConfig, option: EngineConfig, sampling: Sampling,
                    seeds: int = 2000) -> int:
    """How many of ``seeds`` seeded requests give the same tokens on both engines."""
    from .matrix import MAX_NEW_TOKENS, PROMPT

    models = build_models()
    outputs = []
    for config in (base, option):
        drafter = str(models.drafter(config.drafter)) if config.drafter else None
        with EngineProcess(replace(config, drafter=drafter), models.target) as engine:
            outputs.append(engine.generate(PROMPT, MAX_NEW_TOKENS, sampling, range(seeds)))
    return sum(a == b for a, b in zip(*outputs, strict=True))


def ignored_options(seeds: int = 2000) -> list[IgnoredOption]:
    """Each option checked: block verification against the standard rule."""
    base = EngineConfig("draft_model", "near", "near", 2, expand="fixed")
    block = replace(base, rejection_sample_method="block")
    same = compare_outputs(base, block, Sampling(), seeds)
    return [IgnoredOption('rejection_sample_method="block" (draft_model(near) k=2, T=1)', seeds,
                          same, "ignored")]
