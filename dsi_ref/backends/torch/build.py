"""Build a `ModelSpec`'s model: now (`build_model`), or on its first forward (`LazyLM`).

`build_model` is what a Ray target-server actor calls on the spec it receives: a `TorchLM` drawn
from its seed (or memory-mapped from its weights file), or a `CheckpointLM` loaded from its
directory. `LazyLM` is the driver's side of a spec: a `LanguageModel` that knows its vocabulary
and special tokens at once (`ModelSpec.tokens`) and builds its weights only on its first forward,
so a driver that runs DSI only (every target forward in the actors) never holds the target's
weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .checkpoint import CheckpointLM
from .model import TorchLM
from .spec import ModelSpec

__all__ = ["LazyLM", "build_model"]


def build_model(spec: ModelSpec) -> TorchLM | CheckpointLM:
    """The model ``spec`` names, its weights drawn or loaded here (call it where the model is to
    live)."""
    if spec.checkpoint is not None:
        return CheckpointLM(spec.checkpoint, device=spec.device, dtype=spec.dtype,
                            eos=spec.eos, bos=spec.bos)
    assert spec.preset is not None
    return TorchLM(spec.preset, seed=spec.seed, device=spec.device, dtype=spec.dtype,
                   eos=spec.eos, bos=0 if spec.bos is None else spec.bos,
                   max_seq_len=spec.max_seq_len, weights=spec.weights)


class LazyLM:
    """A `ModelSpec`'s model, built on its first forward (see the module docstring).

    ``name``, ``vocab_size``, ``eos``, ``bos`` and ``device`` come from the spec; ``probs``,
    ``replica`` and the sessions' forwards build the model (once) and use it. A session made
    before the build (`Engine` makes its target session at construction) builds on its first
    use.
    """

    def __init__(self, spec: ModelSpec) -> None:
        self.spec_ = spec
        self.name, self.vocab_size, self.eos, self.bos = spec.tokens()
        self._built: TorchLM | CheckpointLM | None = None

    def __repr__(self) -> str:
        state = "built" if self._built is not None else "not built"
        return f"LazyLM({self.name}, {state})"

    @property
    def built(self) -> bool:
        """Whether the weights were built (in this process)."""
        return self._built is not None

    def model(self) -> TorchLM | CheckpointLM:
        """The model, built now if it was not."""
        if self._built is None:
            self._built = build_model(self.spec_)
        return self._built

    def spec(self) -> ModelSpec:
        """The spec it builds from."""
        return self.spec_

    @property
    def device(self) -> torch.device:
        """Where the weights are (or will be) built."""
        return torch.device(self.spec_.device)

    def session(self, *, graphs: bool | None = None, priority: int = 0,
                segments: int = 1) -> Any:
        """A session that builds the model on its first use."""
        return _LazySession(self, {"graphs": graphs, "priority": priority,
                                   "segments": segments})

    def replica(self, device: Any) -> Any:
        """The built model's replica on ``device``."""
        return self.model().replica(device)

    def probs(self, prefix: Sequence[int]) -> tuple[float, ...]:
        """The next-token distribution after ``prefix`` (builds the model)."""
        return self.model().probs(prefix)


class _LazySession:
    """A session of a `LazyLM`, made (and the model built) on its first attribute use."""

    def __init__(self, lm: LazyLM, options: dict[str, Any]) -> None:
        self._lm, self._options = lm, options
        self._session: Any = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if self._session is None:
            self._session = self._lm.model().session(**self._options)
        return getattr(self._session, name)
