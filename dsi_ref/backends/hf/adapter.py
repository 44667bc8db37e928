"""`LanguageModel` <-> Hugging Face causal LM adapters, and a sampler for HF assisted generation.

Two directions:

* `ToyCausalLM` wraps a toy `LanguageModel` as a ``transformers`` causal LM (``PreTrainedModel`` +
  ``GenerationMixin``) whose logits are the log-probabilities of the toy model, so any HF decoding
  routine (``generate(..., assistant_model=...)``) runs on models whose exact law is known
  (`dsi_ref.target_distribution` of the toy model). Token ids ``0 .. V - 1`` are the toy model's;
  id ``V`` is a BOS token that starts every input (HF needs a non-empty input) and that the model
  never emits (logit ``-inf``). The toy model sees the prefix without the BOS.
* `HFLanguageModel` wraps any torch causal LM (a `ToyCausalLM`, or a random-weight
  ``LlamaForCausalLM`` built from a config) as a `LanguageModel` with float rows, with
  temperature / top-k / top-p applied in float64 in the order and with the tie rules of HF's
  logits warpers, so the same processing is applied on the target side and the drafter side.

Numerics (the dtype study): ``ToyCausalLM(dtype=...)`` rounds the log-probabilities to ``dtype``
(the model's computation dtype); the softmax is taken afterwards in float64 by `HFLanguageModel`
(HF takes it in float32). Nothing is renormalised behind the user's back: the softmax *is* the
normalisation, as in every sampler.

The KV cache of `ToyCausalLM` stores the token ids themselves (one layer, one head, head size 1,
float64): what a toy model's "attention" needs is the prefix, and HF's cache cropping after a
rejection then crops the prefix exactly as it crops real keys and values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import GenerationConfig, GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.cache_utils import Cache
from transformers.modeling_outputs import CausalLMOutputWithPast

from ...base.errors import InvalidDistributionError
from ...base.models import LanguageModel, Number, Prefix, checked_probs
from .compat import cache_argument, causal_lm_output

__all__ = [
    "DTYPES",
    "AssistedSampler",
    "HFLanguageModel",
    "Processing",
    "ToyCausalLM",
    "ToyConfig",
    "to_hf",
]

#: The dtypes of the numerics study, by name.
DTYPES: dict[str, torch.dtype] = {"float64": torch.float64, "float32": torch.float32,
                                  "bfloat16": torch.bfloat16}


class ToyConfig(PretrainedConfig):
    """Config of `ToyCausalLM`: the toy vocabulary plus one BOS id (``vocab_size = V + 1``)."""

    model_type = "dsi-ref-toy"

    def __init__(self, toy_vocab_size: int = 2, eos: int | None = None, **kwargs: Any) -> None:
        self.toy_vocab_size = toy_vocab_size
        self.num_hidden_layers = 1
        self.num_attention_heads = 1
        self.num_key_value_heads = 1
        self.hidden_size = 1
        self.head_dim = 1
        kwargs.setdefault("vocab_size", toy_vocab_size + 1)
        kwargs.setdefault("bos_token_id", toy_vocab_size)
        kwargs.setdefault("eos_token_id", eos)
        kwargs.setdefault("pad_token_id", toy_vocab_size)
        super().__init__(**kwargs)


class ToyCausalLM(PreTrainedModel, GenerationMixin):
    """A `LanguageModel` as an HF causal LM: logits = log-probabilities of the toy model.

    Build it with `to_hf`. Rows are cached per prefix (toy models are pure functions of the
    prefix), so HF's sampling loops pay one toy call per distinct prefix.
    """

    config_class = ToyConfig
    base_model_prefix = "toy"
    main_input_name = "input_ids"
    _supports_cache_class = True

    def __init__(self, config: ToyConfig, lm: LanguageModel | None = None,
                 dtype: torch.dtype = torch.float32) -> None:
        super().__init__(config)
        if lm is None:
            raise TypeError("ToyCausalLM needs the toy LanguageModel it wraps (use to_hf)")
        if lm.vocab_size != config.toy_vocab_size:
            raise ValueError(f"config is for vocabulary {config.toy_vocab_size}, the model has "
                             f"{lm.vocab_size}")
        self.lm = lm
        self.logit_dtype = dtype
        # One parameter so that `.device` and `.dtype` work; it does not enter the logits.
        self.anchor = torch.nn.Parameter(torch.zeros(1, dtype=dtype), requires_grad=False)
        self._rows: dict[Prefix, torch.Tensor] = {}
        self.post_init()  # type: ignore[no-untyped-call]

    def _init_weights(self, module: Any) -> None:
        """No weights to initialise: the logits come from the toy model."""

    def logit_row(self, prefix: Prefix) -> torch.Tensor:
        """Logits (in the model's dtype) of the next token after ``prefix`` (toy ids, no BOS)."""
        row = self._rows.get(prefix)
        if row is None:
            probs = checked_probs(self.lm, prefix)
            logits = [math.log(p) if p > 0 else -math.inf for p in _as_floats(probs)]
            logits.append(-math.inf)  # BOS is never emitted
            row = torch.tensor(logits, dtype=torch.float64).to(self.logit_dtype)
            self._rows[prefix] = row
        return row

    def forward(self, input_ids: torch.Tensor, cache: Cache | None = None,
                attention_mask: torch.Tensor | None = None, use_cache: bool | None = None,
                logits_to_keep: int = 0, past_key_values: Cache | None = None,
                **kwargs: Any) -> CausalLMOutputWithPast:
        """Logits for every position of ``input_ids`` (shape ``(batch, new, V + 1)``).

        With a cache (``cache``, or ``past_key_values`` as transformers < 5.24 names it),
        ``input_ids`` are the new tokens only and the cache holds the earlier ones.
        Padding is not interpreted (``attention_mask`` is ignored): use batches without padding.
        A BOS id later in a sequence (emitted only by a wrong decoder: its probability is 0) is
        passed to the toy model like any token; a toy model that cannot answer raises its error.
        """
        batch, new = input_ids.shape
        ids = input_ids.to(torch.float64).reshape(batch, 1, new, 1)
        cache = cache_argument(cache, past_key_values)
        if cache is not None:
            keys, _ = cache.update(ids, ids, 0)
            full = keys.reshape(batch, -1).to(torch.long)
        else:
            full = input_ids
        rows = []
        bos = self.config.bos_token_id
        for b in range(batch):
            seq = [int(t) for t in full[b]]
            if not seq or seq[0] != bos:
                raise ValueError(f"ToyCausalLM inputs must start with the BOS id {bos}, got {seq}")
            toks = tuple(seq[1:])
            start = len(seq) - new
            rows.append(torch.stack([self.logit_row(toks[:i]) for i in range(start, len(seq))]))
        logits = torch.stack(rows)
        if logits_to_keep:
            logits = logits[:, -logits_to_keep:]
        return causal_lm_output(logits, cache)


def to_hf(lm: LanguageModel, dtype: torch.dtype = torch.float32) -> ToyCausalLM:
    """Wrap a toy ``lm`` as a `ToyCausalLM` whose logits are its log-probabilities in ``dtype``.

    The generation config is set for plain sampling (no top-k / top-p defaults) and a constant
    number of assistant tokens is left to the caller (see `AssistedSampler`).
    """
    if dtype not in DTYPES.values():
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype}")
    config = ToyConfig(toy_vocab_size=lm.vocab_size, eos=lm.eos)
    model = ToyCausalLM(config, lm, dtype)
    model.eval()  # type: ignore[no-untyped-call]
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=lm.eos, pad_token_id=config.pad_token_id,
        do_sample=True, top_k=None, top_p=None, temperature=None)
    return model


def _as_floats(row: Sequence[Number]) -> list[float]:
    return [float(x) for x in row]


@dataclass(frozen=True)
class Processing:
    """Logits processing applied by `HFLanguageModel` (and by HF's ``generate`` when passed on).

    Order and tie rules are HF's: temperature, then top-k (every token tied with the k-th logit is
    kept), then top-p (the smallest set of most likely tokens whose mass exceeds ``top_p``; at least
    one token is kept).
    """

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self) -> None:
        if not (self.temperature > 0 and math.isfinite(self.temperature)):
            raise ValueError(f"temperature must be a positive finite number, got "
                             f"{self.temperature!r}")
        if self.top_k is not None and (isinstance(self.top_k, bool) or self.top_k < 1):
            raise ValueError(f"top_k must be an int >= 1 or None, got {self.top_k!r}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must lie in (0, 1] or be None, got {self.top_p!r}")

    def generate_kwargs(self) -> dict[str, Any]:
        """The same processing as ``generate`` keyword arguments."""
        return {"temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p}

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """Processed float64 logits of one row (``-inf`` where a token is filtered out)."""
        scores = logits.to(torch.float64) / self.temperature
        if self.top_k is not None and self.top_k < scores.numel():
            kth = torch.topk(scores, self.top_k).values[-1]
            scores = scores.masked_fill(scores < kth, -math.inf)
        if self.top_p is not None and self.top_p < 1:
            sorted_scores, order = torch.sort(scores, descending=False)
            cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
            remove_sorted = cumulative <= 1 - self.top_p
            remove_sorted[-1] = False  # keep at least one token
            remove = remove_sorted.scatter(0, order, remove_sorted)
            scores = scores.masked_fill(remove, -math.inf)
        return scores


class HFLanguageModel:
    """A torch causal LM as a `LanguageModel`: float64 softmax of its processed last logits.

    Args:
        model: a torch module called as ``model(input_ids=...)`` returning ``.logits`` of shape
            ``(1, length, vocab)``.
        bos_token_id: prepended to every prefix (``None``: prefixes are passed as they are, and
            the empty prefix is refused).
        eos: the end-of-sequence id (default: the model's generation config).
        processing: temperature / top-k / top-p (`Processing`).
        name: shown in error messages.

    Rows are cached per prefix (the model must be deterministic: ``eval()`` mode).
    """

    def __init__(self, model: Any, *, bos_token_id: int | None = None, eos: int | None = None,
                 processing: Processing | None = None, name: str | None = None) -> None:
        self.model = model
        self.vocab_size: int = int(model.config.vocab_size)
        self.bos_token_id = bos_token_id
        if eos is None:
            eos_id = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
            eos = eos_id if isinstance(eos_id, int) else None
        self.eos: int | None = eos
        self.processing = processing or Processing()
        self.name = name or f"HF({type(model).__name__})"
        self._cache: dict[Prefix, tuple[float, ...]] = {}

    def __repr__(self) -> str:
        return f"HFLanguageModel({self.name}, vocab_size={self.vocab_size}, {self.processing})"

    def probs(self, prefix: Prefix) -> tuple[float, ...]:
        """The processed next-token distribution after ``prefix``."""
        prefix = tuple(prefix)
        row = self._cache.get(prefix)
        if row is None:
            ids = ([self.bos_token_id] if self.bos_token_id is not None else []) + list(prefix)
            if not ids:
                raise InvalidDistributionError(
                    f"{self.name}: empty prefix and no bos_token_id; HF models need at least one "
                    "input token (pass bos_token_id=...)")
            with torch.no_grad():
                logits = self.model(input_ids=torch.tensor([ids])).logits[0, -1]
            scores = self.processing.apply(logits)
            if not torch.isfinite(scores).any():
                raise InvalidDistributionError(
                    f"{self.name} at prefix {prefix!r}: every logit is -inf or NaN")
            row = tuple(scores.softmax(dim=-1).tolist())
            self._cache[prefix] = row
        return row


class AssistedSampler:
    """One seeded draw of HF assisted generation: ``sampler(seed) -> generated tokens``.

    Calls ``target.generate(input_ids, assistant_model=drafter, do_sample=True, ...)`` after
    ``torch.manual_seed(seed)``, with ``[BOS] + prompt`` as input, and returns the new tokens
    (``drafter=None``: plain HF sampling, the control). Any HF causal LMs with a
    ``bos_token_id`` in their config work (a `ToyCausalLM`, a random-weight Llama). The
    assistant's settings left at ``None`` keep HF's defaults (20 assistant tokens, schedule
    ``"constant"``, confidence threshold 0.4 in transformers 5); ``num_assistant_tokens``,
    ``schedule`` (``"constant"``, ``"heuristic"``) and ``confidence_threshold`` override them.
    """

    def __init__(self, target: PreTrainedModel, drafter: PreTrainedModel | None,
                 prompt: Sequence[int],
                 max_new_tokens: int, *, num_assistant_tokens: int | None = None,
                 schedule: str | None = None, confidence_threshold: float | None = None,
                 processing: Processing | None = None,
                 generate_kwargs: dict[str, Any] | None = None) -> None:
        if schedule not in (None, "constant", "heuristic"):
            raise ValueError(f"schedule must be 'constant', 'heuristic' or None, got {schedule!r}")
        if num_assistant_tokens is not None and num_assistant_tokens < 1:
            raise ValueError(f"num_assistant_tokens must be >= 1, got {num_assistant_tokens}")
        if confidence_threshold is not None and not 0 <= confidence_threshold < 1:
            raise ValueError(f"confidence_threshold must lie in [0, 1), got "
                             f"{confidence_threshold!r}")
        if isinstance(max_new_tokens, bool) or max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be an int >= 1, got {max_new_tokens!r}")
        self.target, self.drafter = target, drafter
        self.prompt = tuple(prompt)
        self.max_new_tokens = max_new_tokens
        bos = target.config.bos_token_id
        self.input_ids = torch.tensor([[bos, *self.prompt]])
        self.kwargs: dict[str, Any] = {
            "do_sample": True, "max_new_tokens": max_new_tokens,
            "attention_mask": torch.ones_like(self.input_ids),
            **(processing or Processing()).generate_kwargs(), **(generate_kwargs or {})}
        if drafter is not None:
            config = drafter.generation_config
            if num_assistant_tokens is not None:
                config.num_assistant_tokens = num_assistant_tokens
            if schedule is not None:
                config.num_assistant_tokens_schedule = schedule
            if confidence_threshold is not None:
                config.assistant_confidence_threshold = confidence_threshold
            self.kwargs["assistant_model"] = drafter

    def __call__(self, seed: int) -> tuple[int, ...]:
        """The tokens generated after the prompt, with torch's global RNG seeded by ``seed``."""
        torch.manual_seed(seed)
        with torch.no_grad():
            out = self.target.generate(self.input_ids, **self.kwargs)  # type: ignore[operator]
        return tuple(int(t) for t in out[0, self.input_ids.shape[1]:])
