"""llama-cpp-python's sampling paths, seeded per sample: the control, prompt lookup, a draft model.

`binding_sampler` returns the ``seed -> tokens`` function of one path (`BindingPath`):

* ``plain``: ``Llama.generate`` without a draft model (the non-speculative control);
* ``prompt-lookup``: ``Llama(draft_model=LlamaPromptLookupDecoding(max_ngram_size=2,
  num_pred_tokens=k))``, the binding's own speculative mode;
* ``draft-model``: ``Llama(draft_model=GreedyDraftModel(drafter, k))``, a user-written
  ``LlamaDraftModel`` that runs a second GGUF model greedily (the binding ships none).

All three sample the target at every position with one sampler chain and keep a draft token only
while it equals the target's own sample: per seed, their output is plain sampling's, except where
a batched forward's float32 rounding moves a draw across a boundary.

Pitfalls handled here (docs/engine-findings.md): the seed is set before every sample
(``generate`` reuses ``Llama``'s seed on every call), the model is reset before every sample (a
cached prefix is re-evaluated in a batch of another shape, which may round differently, and the
same seed must give the same tokens), every sampler setting is passed (the binding's defaults are
top-k 40, top-p 0.95, min-p 0.05, temperature 0.8), and ``logits_all=True`` is passed with a
draft model (`logits_all_crash` shows why).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...base.errors import EngineEnvironmentError, EngineOptionError, ModelFileError
from .models import N_VOCAB, check_same_vocabulary
from .sampling import SamplerConfig

__all__ = ["BINDING_MODES", "BindingPath", "binding_sampler", "binding_version", "llama_seed",
           "load_llama", "logits_all_crash"]

#: The binding's sampling paths.
BINDING_MODES = ("plain", "prompt-lookup", "draft-model")


def _llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as error:
        raise EngineEnvironmentError(
            f"llama-cpp-python is not importable ({error}); `python3 run.py audit --llama` "
            "builds the llama.cpp environment") from None
    return llama_cpp


def binding_version() -> str:
    """The installed llama-cpp-python's version."""
    version: str = _llama_cpp().__version__
    return version


def llama_seed(seed: int) -> int:
    """An audit's 64-bit seed as a llama.cpp seed: 32 bits, never ``0xFFFFFFFF`` (which llama.cpp
    reads as "draw a random seed")."""
    return int(seed) % 0xFFFFFFFF


def load_llama(path: Path | str, **kwargs: Any) -> Any:
    """``llama_cpp.Llama(path, ...)`` with this audit's settings (one thread, float32 KV cache, a
    64-token context, quiet), or `ModelFileError` in one line when the file does not load."""
    llama_cpp = _llama_cpp()
    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"no model file at {path}")
    settings: dict[str, Any] = {
        "n_ctx": 64, "n_batch": 64, "n_threads": 1, "n_threads_batch": 1, "verbose": False,
        "type_k": llama_cpp.GGML_TYPE_F32, "type_v": llama_cpp.GGML_TYPE_F32, **kwargs}
    try:
        llm = llama_cpp.Llama(str(path), **settings)
    except (ValueError, RuntimeError) as error:
        raise ModelFileError(f"llama.cpp did not load {path}: {error}") from None
    if llm.n_vocab() != N_VOCAB:
        raise ModelFileError(f"{path}: a vocabulary of {llm.n_vocab()} tokens, not the tiny "
                             f"models' {N_VOCAB}")
    return llm


def _greedy_draft_model_class() -> type:
    llama_speculative = _llama_cpp().llama_speculative

    class GreedyDraftModel(llama_speculative.LlamaDraftModel):  # type: ignore[misc, name-defined]
        """A draft model for ``Llama(draft_model=...)``: another GGUF model, drafting its
        ``num_pred_tokens`` most likely next tokens one after the other. Its KV cache keeps the
        longest prefix it shares with the target's tokens."""

        def __init__(self, drafter: Any, num_pred_tokens: int) -> None:
            self.drafter = drafter
            self.num_pred_tokens = num_pred_tokens

        def __call__(self, input_ids: np.ndarray, /, **kwargs: Any) -> np.ndarray:
            ids = [int(t) for t in input_ids]
            d = self.drafter
            have = [int(t) for t in d.input_ids[:d.n_tokens]]
            shared = 0
            while shared < min(len(have), len(ids)) and have[shared] == ids[shared]:
                shared += 1
            shared = min(shared, len(ids) - 1)       # the last token's logits are needed
            d.n_tokens = shared
            d.eval(ids[shared:])
            drafts: list[int] = []
            for _ in range(self.num_pred_tokens):
                token = int(np.argmax(d.scores[d.n_tokens - 1]))
                drafts.append(token)
                d.eval([token])
            return np.array(drafts, dtype=np.intc)

    return GreedyDraftModel


@dataclass(frozen=True)
class BindingPath:
    """One of the binding's paths: ``mode`` (`BINDING_MODES`), the draft length ``k`` and the
    drafter's GGUF file (``draft-model`` only)."""

    mode: str
    k: int = 0
    drafter: Path | None = None

    def __post_init__(self) -> None:
        if self.mode not in BINDING_MODES:
            raise EngineOptionError(f"unknown binding path {self.mode!r}; known: "
                                    f"{', '.join(BINDING_MODES)}")
        if (self.mode == "plain") != (self.k == 0):
            raise EngineOptionError(f"{self.mode}: k = {self.k} (0 exactly for the plain path)")
        if (self.mode == "draft-model") != (self.drafter is not None):
            raise EngineOptionError(f"{self.mode}: a drafter file goes with draft-model only")


def binding_sampler(target: Path, path: BindingPath, prompt: Sequence[int], n_tokens: int,
                    config: SamplerConfig, **extra: Any) -> Callable[[int], tuple[int, ...]]:
    """``seed -> the first n_tokens generated tokens`` of the binding on ``path``; ``extra``:
    more keywords of ``Llama.generate``."""
    llama_cpp = _llama_cpp()
    draft: Any = None
    if path.mode == "prompt-lookup":
        draft = llama_cpp.llama_speculative.LlamaPromptLookupDecoding(
            max_ngram_size=2, num_pred_tokens=path.k)
    elif path.mode == "draft-model":
        assert path.drafter is not None
        check_same_vocabulary(target, path.drafter)
        drafter = load_llama(path.drafter, logits_all=True)
        draft = _greedy_draft_model_class()(drafter, path.k)
    llm = load_llama(target, draft_model=draft, logits_all=draft is not None,
                     last_n_tokens_size=config.penalty_last_n)
    kwargs = {**config.binding_kwargs(), **extra}
    prompt = [int(t) for t in prompt]

    def sample(seed: int) -> tuple[int, ...]:
        llm.reset()
        llm.set_seed(llama_seed(seed))
        out: list[int] = []
        for token in llm.generate(prompt, reset=True, **kwargs):
            out.append(int(token))
            if len(out) == n_tokens:
                break
        return tuple(out)

    return sample


def logits_all_crash(target: Path, drafter_tokens: int = 8, n_batch: int = 8) -> str:
    """The binding's ``logits_all`` crash, reproduced: ``Llama(draft_model=...)`` with the
    default ``logits_all=False`` sizes its score buffer for ``n_batch`` rows but, since a draft
    model forces ``logits_all`` on inside, writes one row per evaluated token; once the prompt and
    the drafts pass ``n_batch`` it raises. Returns the exception's one-line text (``""`` if it
    did not raise: fixed)."""
    llama_cpp = _llama_cpp()
    draft = llama_cpp.llama_speculative.LlamaPromptLookupDecoding(
        max_ngram_size=2, num_pred_tokens=drafter_tokens)
    llm = load_llama(target, n_batch=n_batch, draft_model=draft)
    prompt = [1, *[100, 101, 102] * 3]
    try:
        for i, _ in enumerate(llm.generate(prompt, temp=1.0, top_k=0, top_p=1.0, min_p=0.0)):
            if i >= 16:
                break
    except ValueError as error:
        return f"{type(error).__name__}: {error}".splitlines()[0]
    return ""
