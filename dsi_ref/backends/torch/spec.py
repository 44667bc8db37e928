"""A model named by a small recipe instead of its weights: built where it runs (issue 26, item 1).

A `ModelSpec` is a few hundred bytes that build a model: a `TorchLM` preset (or `ModelConfig`)
with its seed and dtype (its weights drawn, or memory-mapped from a file `TorchLM.save_weights`
wrote, which the processes of one machine then share), or a `CheckpointLM` directory that every
machine can read. The Ray
backend sends the spec to each target-server actor, which builds its own copy; nothing as large
as the weights crosses the object store. The same spec builds the same weights: a `TorchLM`
draws them from its seed on ``device`` (a generator draws differently on CPU and on CUDA, so the
spec names the device the weights are *drawn* on; a server then moves them where it runs), and a
checkpoint is the same files.

`TorchLM.spec()` / `CheckpointLM.spec()` give the spec of a model already built. `LazyLM` is
the driver's side of a spec: a `LanguageModel` that knows its vocabulary and special tokens at
once and builds its weights only on its first forward, so a driver that runs DSI only (every
target forward in the actors) never holds the target's weights.

This module imports neither torch nor Ray at import time (the backends it builds do, lazily).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...base.errors import BackendError

if TYPE_CHECKING:
    import torch

    from .checkpoint import CheckpointLM
    from .model import ModelConfig, TorchLM

__all__ = ["LazyLM", "ModelSpec"]


@dataclass(frozen=True)
class ModelSpec:
    """How to build a model (exactly one of ``preset`` and ``checkpoint``).

    Args:
        preset: a `TorchLM` preset name (`dsi_ref.backends.torch.model.PRESETS`) or a
            `ModelConfig`.
        checkpoint: a local Hugging Face checkpoint directory (`CheckpointLM`); on a cluster,
            a path every node can read (a shared file system or the same copy on each node).
        seed: the `TorchLM` weights' seed (ignored for a checkpoint).
        dtype: a dtype name of `dsi_ref.backends.torch.model.DTYPES` (``"bf16"``, ``"fp64"``...).
        device: where a `TorchLM`'s weights are drawn, or a checkpoint is loaded.
        eos, bos: the special tokens (a checkpoint's default: its config's, as `CheckpointLM`).
        max_seq_len: a `TorchLM`'s ``max_seq_len`` override.
        weights: a `TorchLM` weights file (`TorchLM.save_weights`) to memory-map instead of
            drawing the weights: the server actors of one node share its pages.
    """

    preset: str | ModelConfig | None = None
    checkpoint: str | None = None
    seed: int = 0
    dtype: str = "fp64"
    device: str = "cpu"
    eos: int | None = None
    bos: int | None = None
    max_seq_len: int | None = None
    weights: str | None = None

    def __post_init__(self) -> None:
        if (self.preset is None) == (self.checkpoint is None):
            raise BackendError("ModelSpec needs exactly one of preset= (a TorchLM preset or "
                               "ModelConfig) and checkpoint= (a checkpoint directory)")
        from .model import DTYPES, PRESETS  # torch, here only: specs are built in code

        if self.dtype not in DTYPES:
            raise BackendError(f"ModelSpec: unknown dtype {self.dtype!r}; known: "
                               f"{', '.join(DTYPES)}")
        if isinstance(self.preset, str) and self.preset not in PRESETS:
            raise BackendError(f"ModelSpec: unknown model preset {self.preset!r}; known: "
                               f"{', '.join(PRESETS)}")

    def build(self) -> TorchLM | CheckpointLM:
        """The model (its weights drawn or loaded here: call it where the model is to live)."""
        if self.checkpoint is not None:
            from .checkpoint import CheckpointLM

            return CheckpointLM(self.checkpoint, device=self.device, dtype=self.dtype,
                                eos=self.eos, bos=self.bos)
        from .model import TorchLM

        assert self.preset is not None
        return TorchLM(self.preset, seed=self.seed, device=self.device, dtype=self.dtype,
                       eos=self.eos, bos=0 if self.bos is None else self.bos,
                       max_seq_len=self.max_seq_len, weights=self.weights)

    def tokens(self) -> tuple[str, int, int | None, int]:
        """``(name, vocab_size, eos, bos)`` of the model, without building it (a checkpoint's
        ``config.json`` is read)."""
        if self.checkpoint is not None:
            from .checkpoint import special_tokens

            path = Path(self.checkpoint)
            try:
                config = json.loads((path / "config.json").read_text())
            except (OSError, ValueError) as error:
                raise BackendError(f"{path}: no readable config.json ({error})") from None
            vocab = int(config["vocab_size"])
            eos, bos = special_tokens(config.get("eos_token_id"), config.get("bos_token_id"),
                                      vocab, self.eos, self.bos)
            return path.name, vocab, eos, bos
        from .model import PRESETS

        config = PRESETS[self.preset] if isinstance(self.preset, str) else self.preset
        assert config is not None
        return f"{config.name}(seed={self.seed})", config.vocab_size, self.eos, \
            0 if self.bos is None else self.bos


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
            self._built = self.spec_.build()
        return self._built

    def spec(self) -> ModelSpec:
        """The spec it builds from."""
        return self.spec_

    @property
    def device(self) -> torch.device:
        """Where the weights are (or will be) built."""
        import torch

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
