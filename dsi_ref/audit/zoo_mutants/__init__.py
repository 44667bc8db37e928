"""The zoo's mutants: wrong decoders, each a small variation of a correct one, named after a real
bug, grouped by what they break; `dsi_ref.audit.zoo` registers them and hunts them.

* `dsi_ref.audit.zoo_mutants.verifiers` — a verification rule with one step changed: token-level
  (a subclass of `RejectionSampling` passed as ``verify=`` to the correct `speculative`), block
  verification, tree verification;
* `dsi_ref.audit.zoo_mutants.orchestration` — SI with one structural step changed (a subclass of
  `SIRun`: the verify loop, the bonus token), DSI with one orchestration rule changed (a subclass
  of `DSIRun`) or replaced by a race; and the equivalent mutants, lossless lookalikes;
* `dsi_ref.audit.zoo_mutants.processors` — sampling processors applied on one side only, and
  stateful processors not rolled back on rejection;
* `dsi_ref.audit.zoo_mutants.cross_vocab` — cross-vocabulary decoders with one step wrong (their
  bugs show in the law of output strings).

This module holds `Mutant`, the description of every same-vocabulary mutant.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...base.models import LanguageModel
from ...base.result import Run

__all__ = ["Mutant"]


@dataclass(frozen=True)
class Mutant:
    """A wrong decoder: its name, the real bug pattern, and a callable with `speculative`'s
    signature ``(target, drafter, prompt, max_new_tokens, rng, lookahead=..., **kwargs)``."""

    name: str
    pattern: str
    decoder: Callable[..., Run]
    base: str  # "speculative" or "dsi"
    #: The model whose law the decoder promises, from the suite's target (``None``: the target
    #: itself). A decoder that samples with processors promises the processed target.
    law: Callable[[LanguageModel], LanguageModel] | None = None
