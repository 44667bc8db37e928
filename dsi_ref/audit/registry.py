"""The registry of decoders, each paired with its reference law.

Every losslessness test is parametrised over `DECODERS`; a test fails when a public decoder of
`dsi_ref` is missing here. A `Variant` fixes the keyword arguments of one configuration (a
verification rule, say) and whether the reference is the target's sampled law or its greedy
sequence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..base.models import LanguageModel
from ..base.randomness import Randomness
from ..base.result import Run
from ..decoders.autoregressive import autoregressive
from ..decoders.dsi import dsi
from ..decoders.speculative import speculative
from ..decoders.tree import TREE_VERIFY_RULES, tree_speculative

__all__ = ["DECODERS", "STRING_LEVEL_DECODERS", "DecoderSpec", "Variant", "register"]


@dataclass(frozen=True)
class Variant:
    """One configuration of a decoder: ``kwargs`` and whether its reference is greedy."""

    label: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    greedy: bool = False


@dataclass(frozen=True)
class DecoderSpec:
    """A registered decoder: how to call it, its variants, its reference.

    ``params`` names the extra parameters the decoder takes (``"lookahead"``, ``"sp_degree"``,
    ...) so that test strategies can supply them.
    """

    name: str
    fn: Callable[..., Run]
    uses_drafter: bool
    variants: tuple[Variant, ...]
    params: tuple[str, ...] = ()
    reference: str = "autoregressive (the target's own law)"

    def program(self, target: LanguageModel, drafter: LanguageModel | None,
                prompt: Sequence[int], max_new_tokens: int, variant: Variant,
                **params: Any) -> Callable[[Randomness], tuple[int, ...]]:
        """``rng -> tokens`` for one configuration (what `exact_distribution` takes)."""
        kwargs = {**variant.kwargs, **{k: v for k, v in params.items() if k in self.params}}

        def run(rng: Randomness) -> tuple[int, ...]:
            if self.uses_drafter:
                return self.fn(target, drafter, prompt, max_new_tokens, rng, **kwargs).tokens
            return self.fn(target, prompt, max_new_tokens, rng, **kwargs).tokens

        return run


DECODERS: dict[str, DecoderSpec] = {}


def register(spec: DecoderSpec) -> DecoderSpec:
    """Add ``spec`` to `DECODERS` (names are unique)."""
    if spec.name in DECODERS:
        raise ValueError(f"decoder {spec.name!r} is already registered")
    DECODERS[spec.name] = spec
    return spec


register(DecoderSpec(
    "autoregressive", autoregressive, uses_drafter=False,
    variants=(Variant("sampled"), Variant("greedy", {"greedy": True}, greedy=True)),
))
register(DecoderSpec(
    "speculative", speculative, uses_drafter=True, params=("lookahead",),
    variants=(Variant("rejection", {"verify": "rejection"}),
              Variant("exact_match", {"verify": "exact_match"}),
              Variant("greedy", {"verify": "greedy"}, greedy=True),
              Variant("block", {"verify": "block"})),
))
# DSI's losslessness is a claim about tokens: lean runs (no trace, no counters) let the exact
# checker merge paths that differ only in their history (same law, ~5x fewer paths)
register(DecoderSpec(
    "dsi", dsi, uses_drafter=True, params=("lookahead", "sp_degree"),
    variants=(Variant("rejection", {"verify": "rejection", "record": False}),
              Variant("exact_match", {"verify": "exact_match", "record": False}),
              Variant("greedy", {"verify": "greedy", "record": False}, greedy=True),
              Variant("block", {"verify": "block", "record": False})),
))

# -- tree speculation (issue #14, item 3) ---------------------------------------------------------
# Every rule of TREE_VERIFY_RULES on the tree (2, 1): two chains of depth 2, so that the sibling
# steps (a rejected first child, then the second) and the depth (an accepted child, then its own
# child) are both exercised by every registry property; the tree is part of the variant.
register(DecoderSpec(
    "tree_speculative", tree_speculative, uses_drafter=True,
    variants=tuple(Variant(f"{rule}-2x1", {"verify": rule, "tree": (2, 1)},
                           greedy=rule == "greedy") for rule in TREE_VERIFY_RULES),
    reference="autoregressive (the target's own law; its greedy sequence for greedy)",
))


#: Public decoders whose losslessness is a property of output *strings*, checked apart from the
#: registry's properties (which draw same-vocabulary pairs and call ``fn(target, drafter, prompt,
#: max_new_tokens, rng, ...)``): their name, and where they are checked.
STRING_LEVEL_DECODERS: dict[str, str] = {
    "cross_vocab_speculative": "tests/test_cross_vocab.py (exact, over strings and ids), "
                               "tests/test_cross_vocab_statistical.py, the audit's cross-vocab "
                               "section",
}
