"""A local Hugging Face causal-LM checkpoint directory behind the backend's interface.

`CheckpointLM(path)` loads any ``AutoModelForCausalLM`` checkpoint from a local directory (never
from the network: ``local_files_only=True``) and offers what `TorchLM` offers — ``probs`` (the
`LanguageModel` seam, float64 rows) and ``session()`` — so `Engine`, the measurements and
``dsi-ref bench --target PATH`` run on it unchanged.

A `CheckpointSession` keeps a ``transformers.DynamicCache`` and the tokens it holds; a call reuses
the longest common prefix with the previous call and *crops* the cache back to it (the rollback
after a rejected draft). Differences from `Session`: no CUDA graphs (forwards are eager), and a
forward cannot be preempted once started (``rows_unless`` checks only before it starts).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from ...base.errors import BackendError
from .model import replicate
from .spec import ModelSpec, special_tokens
from .transformer import DTYPES

__all__ = ["CheckpointLM", "CheckpointSession"]


class CheckpointLM:
    """A local Hugging Face causal LM (see the module docstring).

    Args:
        path: a checkpoint directory (``config.json`` and weights).
        device: ``"cpu"`` or ``"cuda"``.
        dtype: a torch dtype or a name in `DTYPES`.
        eos: end-of-sequence id (default: the config's ``eos_token_id`` when it is one int).
        bos: the token prepended to every sequence (default: the config's ``bos_token_id``, or 0).
    """

    def __init__(self, path: str | Path, *, device: str = "cpu",
                 dtype: torch.dtype | str = torch.float64, eos: int | None = None,
                 bos: int | None = None) -> None:
        from transformers import AutoModelForCausalLM

        path = Path(path)
        if not (path / "config.json").is_file():
            raise BackendError(f"{path} is not a Hugging Face checkpoint directory (no "
                               "config.json); pass a local directory, nothing is downloaded")
        if isinstance(dtype, str):
            if dtype not in DTYPES:
                raise BackendError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
            dtype = DTYPES[dtype]
        if torch.device(device).type == "cuda" and not torch.cuda.is_available():
            raise BackendError("device='cuda' requested but torch.cuda.is_available() is False")
        loaded: Any = AutoModelForCausalLM.from_pretrained(path, local_files_only=True,
                                                           dtype=dtype)
        self.model: Any = loaded.to(device).eval()
        config = self.model.config
        self.name = path.name
        self.vocab_size = int(config.vocab_size)
        self.max_seq_len = int(getattr(config, "max_position_embeddings", 1 << 30))
        self.eos, self.bos = special_tokens(getattr(config, "eos_token_id", None),
                                            getattr(config, "bos_token_id", None),
                                            self.vocab_size, eos, bos)
        self.path, self.dtype_name = path, next(k for k, v in DTYPES.items() if v == dtype)
        self._loaded_on = str(device)
        self._session: CheckpointSession | None = None

    def __repr__(self) -> str:
        return f"CheckpointLM({self.name}, device={self.device})"

    @property
    def device(self) -> torch.device:
        """Where the weights live."""
        return torch.device(self.model.device)

    def session(self, *, graphs: bool | None = None, priority: int = 0,
                segments: int = 1) -> CheckpointSession:
        """A new session (own KV cache). ``graphs`` must not be True (eager forwards only);
        ``segments`` is accepted for interface compatibility (no preemption mid-forward)."""
        if graphs:
            raise BackendError("CheckpointLM runs eager forwards: CUDA graphs are not supported")
        return CheckpointSession(self, priority=priority)

    def spec(self) -> ModelSpec:
        """What builds this model again, in another process (`ModelSpec`): its directory
        (resolved), dtype, device and special tokens."""
        return ModelSpec(checkpoint=str(self.path.resolve()), dtype=self.dtype_name,
                         device=self._loaded_on, eos=self.eos, bos=self.bos)

    def replica(self, device: str | torch.device) -> CheckpointLM:
        """The same checkpoint with a copy of its weights on ``device``."""
        return cast(CheckpointLM, replicate(self, device))

    def probs(self, prefix: Sequence[int]) -> tuple[float, ...]:
        """The next-token distribution after ``prefix`` (the `LanguageModel` seam)."""
        if self._session is None:
            self._session = self.session()
        return tuple(self._session.rows(tuple(prefix), 1)[0].tolist())


class CheckpointSession:
    """One ``DynamicCache`` over a `CheckpointLM` (on CUDA, with its own stream)."""

    def __init__(self, lm: CheckpointLM, *, priority: int = 0) -> None:
        from transformers import DynamicCache

        self.lm = lm
        self._new_cache = DynamicCache
        self.cache: Any = DynamicCache()
        self.tokens: list[int] = []
        self.forwards = 0
        self.stream = torch.cuda.Stream(
            lm.device, priority=priority) if lm.device.type == "cuda" else None

    def reset(self) -> None:
        """Forget the cached tokens."""
        self.tokens = []
        self.cache = self._new_cache()

    def rows(self, context: Sequence[int], count: int = 1) -> np.ndarray:
        """Rows [count, V] (float64) after the last ``count`` prefixes of ``context``."""
        rows = self.rows_unless(context, count, None)
        assert rows is not None
        return rows

    def rows_unless(self, context: Sequence[int], count: int,
                    cancelled: Callable[[], bool] | None) -> np.ndarray | None:
        """`rows`, or ``None`` when ``cancelled()`` is already true (checked before the
        forward only)."""
        if cancelled is not None and cancelled():
            return None
        seq = [self.lm.bos, *context]
        if not 1 <= count <= len(seq):
            raise BackendError(f"count must lie in 1..{len(seq)} for a context of length "
                               f"{len(seq) - 1}, got {count}")
        if len(seq) > self.lm.max_seq_len:
            raise BackendError(f"{self.lm.name}: sequence of {len(seq)} tokens exceeds "
                               f"max_position_embeddings={self.lm.max_seq_len}")
        n = 0
        limit = min(len(seq), len(self.tokens))
        while n < limit and seq[n] == self.tokens[n]:
            n += 1
        start = min(n, len(seq) - count)
        stream = torch.cuda.stream(self.stream) if self.stream is not None \
            else contextlib.nullcontext()
        with stream, torch.inference_mode():
            if start == 0:
                self.cache = self._new_cache()
            elif self.cache.get_seq_length() > start:
                self.cache.crop(start - self.cache.get_seq_length())   # roll back
            ids = torch.tensor([seq[start:]], dtype=torch.long, device=self.lm.device)
            logits = self.model_logits(ids)
            self.tokens = seq
            self.forwards += 1
            probs = torch.softmax(logits[-count:].double(), dim=-1).to("cpu")
        return probs.numpy()

    def model_logits(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits [L, V] of ``ids`` [1, L] after the cached tokens (extends the cache)."""
        from ..hf.compat import forward_with_cache, output_cache  # transformers, imported lazily

        out = forward_with_cache(self.lm.model, ids, self.cache)
        self.cache = output_cache(out)
        logits: torch.Tensor = out.logits[0]
        return logits
