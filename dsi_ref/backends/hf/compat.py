"""The one place that knows what Hugging Face transformers calls the KV cache.

transformers 5.24 renamed a causal LM's cache: the forward argument and the output field
``past_key_values`` became ``cache`` (the old names still work there, with a deprecation
warning). Earlier 5.x releases know only ``past_key_values``. Every model that dsi-ref writes for
``generate`` (`ToyCausalLM`, the candidate-generator toys) and every caller that threads a cache
through a forward (`CheckpointLM`'s session) goes through these helpers, so each speaks the
installed release's own name and no deprecation warning is raised or silenced.

The name is read off the installed release (the fields of ``CausalLMOutputWithPast``), not
parsed from its version string. Both branches are exercised: the default test run uses the
locked release, and ``python3 run.py test --oldest`` the oldest release that pyproject allows.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import torch
from transformers.modeling_outputs import CausalLMOutputWithPast

__all__ = ["CACHE_NAME", "cache_argument", "causal_lm_output", "forward_with_cache",
           "output_cache"]


def _cache_name() -> str:
    names = {field.name for field in fields(CausalLMOutputWithPast)}
    if "cache" in names:
        return "cache"
    if "past_key_values" in names:
        return "past_key_values"
    raise ImportError("this transformers release's CausalLMOutputWithPast has neither `cache` "
                      f"nor `past_key_values` (fields: {sorted(names)}); dsi-ref supports the "
                      "releases that pyproject.toml allows")


#: The installed release's name of the KV cache: ``"cache"`` (transformers >= 5.24) or
#: ``"past_key_values"`` (earlier releases).
CACHE_NAME: str = _cache_name()


def cache_argument(cache: Any, past_key_values: Any) -> Any:
    """The cache a forward was given, under either name (a caller may use the older one).

    Raises ``ValueError`` when both names are given, as transformers itself does.
    """
    if cache is not None and past_key_values is not None:
        raise ValueError("give the KV cache as `cache` or as `past_key_values`, not both")
    return cache if cache is not None else past_key_values


def causal_lm_output(logits: torch.Tensor, cache: Any) -> CausalLMOutputWithPast:
    """A causal LM's output: ``logits`` and the cache, under the installed release's field name."""
    return CausalLMOutputWithPast(logits=logits, **{CACHE_NAME: cache})


def output_cache(output: Any) -> Any:
    """The cache an output carries, read under the installed release's field name."""
    return getattr(output, CACHE_NAME)


def forward_with_cache(model: Any, input_ids: torch.Tensor, cache: Any) -> Any:
    """``model(input_ids, <cache>=cache, use_cache=True)`` with the installed release's name."""
    return model(input_ids=input_ids, use_cache=True, **{CACHE_NAME: cache})
