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

`TorchLM.spec()` / `CheckpointLM.spec()` give the spec of a model already built;
`dsi_ref.backends.torch.build` builds a spec's model (`build_model`, or `LazyLM` on its first
forward). A spec is a recipe and nothing else: ``tokens()`` tells a model's vocabulary and
special tokens without building it (`special_tokens` reads a checkpoint's).

This module imports neither torch nor Ray at import time (its checks read the presets and the
dtype names of `dsi_ref.backends.torch.transformer`, lazily).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...base.errors import BackendError

if TYPE_CHECKING:
    from .transformer import ModelConfig

__all__ = ["ModelSpec", "special_tokens"]


@dataclass(frozen=True)
class ModelSpec:
    """How to build a model (exactly one of ``preset`` and ``checkpoint``).

    Args:
        preset: a `TorchLM` preset name (`dsi_ref.backends.torch.transformer.PRESETS`) or a
            `ModelConfig`.
        checkpoint: a local Hugging Face checkpoint directory (`CheckpointLM`); on a cluster,
            a path every node can read (a shared file system or the same copy on each node).
        seed: the `TorchLM` weights' seed (ignored for a checkpoint).
        dtype: a dtype name of `dsi_ref.backends.torch.transformer.DTYPES` (``"bf16"``,
            ``"fp64"``...).
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
        from .transformer import DTYPES, PRESETS  # torch, here only: specs are built in code

        if self.dtype not in DTYPES:
            raise BackendError(f"ModelSpec: unknown dtype {self.dtype!r}; known: "
                               f"{', '.join(DTYPES)}")
        if isinstance(self.preset, str) and self.preset not in PRESETS:
            raise BackendError(f"ModelSpec: unknown model preset {self.preset!r}; known: "
                               f"{', '.join(PRESETS)}")

    def tokens(self) -> tuple[str, int, int | None, int]:
        """``(name, vocab_size, eos, bos)`` of the model, without building it (a checkpoint's
        ``config.json`` is read)."""
        if self.checkpoint is not None:
            path = Path(self.checkpoint)
            try:
                config = json.loads((path / "config.json").read_text())
            except (OSError, ValueError) as error:
                raise BackendError(f"{path}: no readable config.json ({error})") from None
            vocab = int(config["vocab_size"])
            eos, bos = special_tokens(config.get("eos_token_id"), config.get("bos_token_id"),
                                      vocab, self.eos, self.bos)
            return path.name, vocab, eos, bos
        from .transformer import PRESETS

        config = PRESETS[self.preset] if isinstance(self.preset, str) else self.preset
        assert config is not None
        return f"{config.name}(seed={self.seed})", config.vocab_size, self.eos, \
            0 if self.bos is None else self.bos


def special_tokens(config_eos: Any, config_bos: Any, vocab_size: int, eos: int | None,
                   bos: int | None) -> tuple[int | None, int]:
    """A checkpoint's ``(eos, bos)``: the given ones, else its config's when each is one int
    (else no EOS, BOS 0); `BackendError` for an id outside the vocabulary."""
    eos = eos if eos is not None else (config_eos if isinstance(config_eos, int) else None)
    bos = bos if bos is not None else (config_bos if isinstance(config_bos, int) else 0)
    for label, token in (("eos", eos), ("bos", bos)):
        if token is not None and not 0 <= token < vocab_size:
            raise BackendError(f"{label}={token} is not a token id of a vocabulary of size "
                               f"{vocab_size}")
    return eos, bos
