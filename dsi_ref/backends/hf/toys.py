"""The toy models and tokenizers Hugging Face's candidate generators need, built in code.

The audit matrix (`dsi_ref.backends.hf.generators`) drives each generator on toys whose exact law
is known; besides the target and drafter wrapped by `dsi_ref.backends.hf.adapter.to_hf`, some
generators need a model or a tokenizer of a particular shape:

* `EarlyExitToyLM` (`early_exit_model`): one HF model whose logits are the target's with all
  its layers and the drafter's when ``config.num_hidden_layers`` is lowered to the early-exit
  layer (what ``EarlyExitCandidateGenerator`` does);
* `BigramHeadLM`: the drafter as an embedding + LM head (one-hot embedding, head weights = the
  drafter's log-probabilities), which universal speculative decoding needs (it prunes the head);
* `word_tokenizer`: toy ``PreTrainedTokenizerFast`` (word-level, built in code) for the
  different-tokenizer generators.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from transformers import GenerationConfig, GenerationMixin, PreTrainedModel, PreTrainedTokenizerFast
from transformers.modeling_outputs import CausalLMOutputWithPast

from ...base.models import LanguageModel, Prefix, checked_probs
from .adapter import ToyCausalLM, ToyConfig
from .compat import cache_argument, causal_lm_output

__all__ = ["BOS_WORD", "BigramHeadLM", "EarlyExitToyLM", "early_exit_model",
           "plain_generation_config", "word_tokenizer"]

#: The word of the toys' BOS token.
BOS_WORD = "<s>"


class _Depth(torch.nn.Module):
    """The submodule HF reads the layer count from (``base_model_prefix``)."""

    def __init__(self, config: ToyConfig) -> None:
        super().__init__()
        self.config = config


class EarlyExitToyLM(ToyCausalLM):
    """A toy with two "depths": the target's logits with all layers (2), the drafter's when
    ``self.toy.config.num_hidden_layers`` is lowered to 1 (``generate(...,
    assistant_early_exit=1)`` does exactly that on ``getattr(model, base_model_prefix)``)."""

    def __init__(self, config: ToyConfig, lm: LanguageModel, early: LanguageModel) -> None:
        super().__init__(config, lm)
        self.early = early
        self.toy = _Depth(ToyConfig(toy_vocab_size=config.toy_vocab_size))
        self.toy.config.num_hidden_layers = 2
        self._early_rows: dict[Prefix, torch.Tensor] = {}

    def logit_row(self, prefix: Prefix) -> torch.Tensor:
        """The target's row with every layer, the early exit's with fewer."""
        if int(self.toy.config.num_hidden_layers) >= 2:
            return super().logit_row(prefix)
        row = self._early_rows.get(prefix)
        if row is None:
            row = _log_row(checked_probs(self.early, prefix), self.logit_dtype)
            self._early_rows[prefix] = row
        return row


def _log_row(probs: Sequence[Any], dtype: torch.dtype, extra: int = 1,
             floor: float | None = None) -> torch.Tensor:
    zero = -math.inf if floor is None else floor
    logits = [math.log(float(p)) if p > 0 else zero for p in probs] + [zero] * extra
    return torch.tensor(logits, dtype=torch.float64).to(dtype)


def early_exit_model(target: LanguageModel, drafter: LanguageModel) -> EarlyExitToyLM:
    """`EarlyExitToyLM` of ``target`` (all layers) and ``drafter`` (layer 1), set for sampling."""
    config = ToyConfig(toy_vocab_size=target.vocab_size, eos=target.eos)
    model = EarlyExitToyLM(config, target, drafter)
    model.eval()  # type: ignore[no-untyped-call]
    model.generation_config = plain_generation_config(config)
    return model


def plain_generation_config(config: ToyConfig) -> GenerationConfig:
    """The generation config of a toy set for plain sampling (no top-k, top-p or temperature
    of its own: the cell's processors are passed to ``generate``)."""
    return GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id, do_sample=True, top_k=None, top_p=None,
        temperature=None)


class BigramHeadLM(PreTrainedModel, GenerationMixin):
    """A bigram toy as embedding + LM head: ``logits(x_t) = W · onehot(x_t)``, ``W[y, x] = log
    p(y | x)`` (zeros floored at -30), in the *assistant's* id order ``order`` (``order[i]`` is
    the toy id of assistant id ``i``; ids the toy lacks get a flat floor row and column).

    Universal speculative decoding prunes and re-indexes exactly these two modules.
    """

    config_class = ToyConfig
    base_model_prefix = "bigram"
    main_input_name = "input_ids"
    _supports_cache_class = True

    def __init__(self, config: ToyConfig, lm: LanguageModel | None = None,
                 order: Sequence[int | None] = ()) -> None:
        super().__init__(config)
        if lm is None:
            raise TypeError("BigramHeadLM needs the bigram toy it wraps")
        size = int(config.vocab_size)
        self.embed = torch.nn.Embedding(size, size)
        self.head = torch.nn.Linear(size, size, bias=False)
        self.post_init()  # type: ignore[no-untyped-call]  # before the weights: it may reset them
        with torch.no_grad():
            self.embed.weight.copy_(torch.eye(size))
            weight = torch.full((size, size), -30.0)
            for i, x in enumerate(order):
                if x is None:
                    continue
                row = checked_probs(lm, (x,))
                for j, y in enumerate(order):
                    if y is not None and row[y] > 0:
                        weight[j, i] = math.log(float(row[y]))
            self.head.weight.copy_(weight)

    def _init_weights(self, module: Any) -> None:
        """Weights are set from the toy model in ``__init__``."""

    def get_input_embeddings(self) -> torch.nn.Module:
        """The one-hot embedding."""
        return self.embed

    def set_input_embeddings(self, value: torch.nn.Module) -> None:
        """Replaced by universal speculative decoding's re-indexing embedding."""
        self.embed = value  # type: ignore[assignment]

    def get_output_embeddings(self) -> torch.nn.Module:
        """The LM head."""
        return self.head

    def set_output_embeddings(self, new_embeddings: torch.nn.Module) -> None:
        """Replaced by universal speculative decoding's pruned head."""
        self.head = new_embeddings  # type: ignore[assignment]

    def forward(self, input_ids: torch.Tensor, cache: Any = None,
                attention_mask: torch.Tensor | None = None, use_cache: bool | None = None,
                logits_to_keep: int = 0, past_key_values: Any = None,
                **kwargs: Any) -> CausalLMOutputWithPast:
        """Logits of every new position (the cache only counts positions)."""
        batch, new = input_ids.shape
        cache = cache_argument(cache, past_key_values)
        if cache is not None:
            zeros = torch.zeros(batch, 1, new, 1, dtype=torch.float32)
            cache.update(zeros, zeros, 0)
        logits = self.head(self.embed(input_ids))
        if logits_to_keep:
            logits = logits[:, -logits_to_keep:]
        return causal_lm_output(logits, cache)


class _PinnedVocabTokenizer(PreTrainedTokenizerFast):
    """A fast tokenizer whose ``get_vocab()`` iterates in the fixed order ``vocab_order``.

    A fast tokenizer's ``get_vocab()`` is a Rust hash map: its iteration order changes with every
    instance. Universal speculative decoding depends on that order, so the matrix pins it
    (`dsi_ref.backends.hf.generators.USD_VOCAB_ORDER`)."""

    vocab_order: tuple[str, ...] = ()

    def get_vocab(self) -> dict[str, int]:
        """The vocabulary, iterated in ``vocab_order``."""
        vocab: dict[str, int] = super().get_vocab()
        return {w: vocab[w] for w in self.vocab_order}


def word_tokenizer(words: Sequence[str], bos: str = BOS_WORD,
                   vocab_order: Sequence[str] | None = None) -> PreTrainedTokenizerFast:
    """A word-level ``PreTrainedTokenizerFast`` built in code: ``words[i]`` is id ``i``, ``bos``
    (a special token) the next id; words are split on whitespace and decoded space-joined.

    ``vocab_order`` (every word and ``bos``, once each) pins the iteration order of
    ``get_vocab()``; without it the order is the Rust hash map's, different per instance."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(words)}
    vocab[bos] = len(words)
    raw = Tokenizer(models.WordLevel(vocab, unk_token=bos))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    raw.decoder = decoders.WordPiece(prefix="##")  # joins words with single spaces
    cls: type[PreTrainedTokenizerFast] = PreTrainedTokenizerFast
    if vocab_order is not None:
        if sorted(vocab_order) != sorted([*words, bos]):
            raise ValueError(f"vocab_order {vocab_order!r} is not an order of {[*words, bos]!r}")
        cls = type("PinnedVocabTokenizer", (_PinnedVocabTokenizer,),
                   {"vocab_order": tuple(vocab_order)})
    tok = cls(tokenizer_object=raw, bos_token=bos, unk_token=bos, pad_token=bos)
    return tok
