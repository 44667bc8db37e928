"""`TorchLM`: a `dsi_ref.LanguageModel` over the network of `dsi_ref.backends.torch.transformer`.

Its weights are seeded random ones of a preset's shapes (`PRESETS`), drawn on a device or
memory-mapped from a file (`TorchLM.save_weights`); `TorchLM.spec` names them as a `ModelSpec`
for another process to build. `TorchLM.probs` is the `LanguageModel` seam, with a default
session; it returns float rows (a float64 softmax). The sessions that run the model (KV caches,
CUDA streams and graphs, the batched servers) and the protocols the engine runs on are in
`dsi_ref.backends.torch.session`. `build_pair` builds a target and its drafter.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol, cast

import torch

from ...base.errors import BackendError
from .session import Session
from .spec import ModelSpec
from .transformer import DTYPES, PRESETS, ModelConfig, Transformer, canonical_device

__all__ = ["TorchLM", "build_pair", "replicate"]


class TorchLM:
    """A `dsi_ref.LanguageModel` backed by a `Transformer` (float rows, a float64 softmax).

    Args:
        config: a `ModelConfig` or the name of a preset (`PRESETS`).
        seed: seed of the model's own weights.
        device: ``"cpu"`` or ``"cuda"`` (or a `torch.device`).
        dtype: parameter dtype (or a name in `DTYPES`); float64 on CPU makes rows reproducible
            to ~1e-16, bfloat16 is the paper's setting on GPU.
        eos: end-of-sequence id, or ``None``.
        max_seq_len: override the config's ``max_seq_len``.
        bos: the token prepended to every sequence (so the empty prefix has a distribution).
        graphs: CUDA graphs in the default session (default: on CUDA).
        weights: a file of these weights written by `save_weights` (from the same config, seed
            and dtype), memory-mapped instead of drawn: processes on one machine that load it
            share its pages (the page cache) instead of a private copy each.
    """

    def __init__(self, config: ModelConfig | str, *, seed: int = 0,
                 device: str | torch.device = "cpu", dtype: torch.dtype | str = torch.float64,
                 eos: int | None = None, bos: int = 0, graphs: bool | None = None,
                 max_seq_len: int | None = None, weights: str | None = None) -> None:
        if isinstance(dtype, str):
            if dtype not in DTYPES:
                raise BackendError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
            dtype = DTYPES[dtype]
        if isinstance(config, str):
            if config not in PRESETS:
                raise BackendError(f"unknown model preset {config!r}; known: "
                                   f"{', '.join(PRESETS)}")
            config = PRESETS[config]
        if max_seq_len is not None:
            config = replace(config, max_seq_len=max_seq_len)
        device = torch.device(device)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise BackendError("device='cuda' requested but torch.cuda.is_available() is False")
        for name, token in (("eos", eos), ("bos", bos)):
            if token is not None and not 0 <= token < config.vocab_size:
                raise BackendError(f"{name}={token} is not a token id of a vocabulary of size "
                                   f"{config.vocab_size}")
        self.config = config
        self.seed, self._drawn_on = seed, str(device)
        self.name = f"{config.name}(seed={seed})"
        self.eos = eos
        self.bos = bos
        self.vocab_size = config.vocab_size
        self.weights = weights
        with torch.inference_mode():
            self.model = Transformer(config, seed=seed, device=device, dtype=dtype,
                                     draw=weights is None)
            if weights is not None:
                self._map(weights, dtype)
        self._session: Session | None = None
        self._graphs = graphs

    def _map(self, weights: str, dtype: torch.dtype) -> None:
        """Memory-map ``weights`` (`save_weights`) as this model's parameters."""
        try:
            state = torch.load(weights, mmap=True, weights_only=True, map_location="cpu")
        except (OSError, RuntimeError) as error:
            raise BackendError(f"cannot map weights {weights}: {error}") from None
        own = self.model.state_dict()
        wrong = sorted({f"{t.dtype} for {own[k].dtype}" for k, t in state.items()
                        if k in own and t.dtype != own[k].dtype})
        if wrong:
            raise BackendError(f"weights {weights} hold {', '.join(wrong)} (the model's dtype "
                               f"is {dtype})")
        try:
            self.model.load_state_dict(state, assign=True)
        except RuntimeError as error:
            raise BackendError(f"weights {weights} do not fit {self.config.name}: "
                               f"{str(error).splitlines()[0]}") from None
        if self.model.embed.device != torch.device(self._drawn_on):
            self.model.to(self._drawn_on)

    def save_weights(self, path: str) -> None:
        """Write the weights to ``path`` (a torch file) for ``TorchLM(..., weights=path)``."""
        torch.save(self.model.state_dict(), path)

    def __repr__(self) -> str:
        return f"TorchLM({self.name}, device={self.device}, dtype={self.dtype})"

    @property
    def device(self) -> torch.device:
        """Where the weights live."""
        return self.model.embed.device

    @property
    def dtype(self) -> torch.dtype:
        """Parameter dtype."""
        return self.model.embed.dtype

    def session(self, *, graphs: bool | None = None, priority: int = 0,
                segments: int = 1) -> Session:
        """A new `dsi_ref.backends.torch.session.Session` (own KV cache) over these weights (see
        it for the options)."""
        from .session import Session  # the sessions' module builds on this one

        return Session(self, graphs=self._graphs if graphs is None else graphs,
                       priority=priority, segments=segments)

    def spec(self) -> ModelSpec:
        """What builds these weights again, in another process (`ModelSpec`): the config (by
        its preset name when it is one), seed, dtype, special tokens, and the device the
        weights were drawn on (a replica's spec names its original's)."""
        preset: str | ModelConfig = self.config.name \
            if PRESETS.get(self.config.name) == self.config else self.config
        dtype = next(name for name, value in DTYPES.items() if value == self.dtype)
        return ModelSpec(preset=preset, seed=self.seed, dtype=dtype, device=self._drawn_on,
                         eos=self.eos, bos=self.bos, weights=self.weights)

    def replica(self, device: str | torch.device) -> TorchLM:
        """The same model with a copy of these weights on ``device`` (weights drawn on one
        device are copied, not redrawn: a generator draws differently on CPU and CUDA)."""
        return cast(TorchLM, replicate(self, device))

    def probs(self, prefix: Sequence[int]) -> tuple[float, ...]:
        """The next-token distribution after ``prefix`` (the `LanguageModel` seam)."""
        if self._session is None:
            self._session = self.session()
        return tuple(self._session.rows(tuple(prefix), 1)[0].tolist())


def replicate(lm: _Replicable, device: str | torch.device) -> Any:
    """A shallow copy of ``lm`` whose ``model`` is a deep copy moved to ``device`` (and whose
    default session is not shared): `TorchLM.replica` and `CheckpointLM.replica`."""
    device = canonical_device(device)
    clone = copy.copy(lm)
    with torch.inference_mode():
        clone.model = copy.deepcopy(lm.model).to(device)
    clone._session = None
    return clone


class _Replicable(Protocol):
    model: Any
    _session: Any


def build_pair(target: str | ModelConfig = "tiny-target", drafter: str | ModelConfig =
               "tiny-drafter", *, device: str = "cpu", dtype: torch.dtype | str = torch.float64,
               seed: int = 0, eos: int | None = None,
               max_seq_len: int | None = None) -> tuple[TorchLM, TorchLM]:
    """A target and a drafter (different own weights, the shared head of their configs)."""
    t = TorchLM(target, seed=seed, device=device, dtype=dtype, eos=eos, max_seq_len=max_seq_len)
    d = TorchLM(drafter, seed=seed + 1, device=device, dtype=dtype, eos=eos,
                max_seq_len=max_seq_len)
    if t.vocab_size != d.vocab_size:
        raise BackendError(f"target and drafter vocabularies differ: {t.vocab_size} vs "
                           f"{d.vocab_size}")
    return t, d
