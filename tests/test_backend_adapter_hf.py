"""The torch / Hugging Face adapters (`dsi_ref.backends.hf.adapter`) and the dtype study.

* toy `LanguageModel` -> HF causal LM: logits are the toy log-probabilities, with and without the
  KV cache (which holds the prefix), and the BOS id is never emitted;
* torch causal LM -> `LanguageModel`: float64 softmax, temperature / top-k / top-p exactly as HF's
  warpers; our decoders run on it unchanged and stay lossless (exactly, on the float rows);
* the dtype study: the TV distance that float64 / float32 / bfloat16 logits introduce.
"""

from __future__ import annotations

import math
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import dsi_ref as dr  # noqa: E402
from dsi_ref.audit.suite import default_suite  # noqa: E402
from dsi_ref.backends.hf.adapter import HFLanguageModel, Processing, to_hf  # noqa: E402
from dsi_ref.backends.hf.assisted import dtype_study, wrap  # noqa: E402

pytestmark = pytest.mark.torch

BIGRAM = dr.TableLM.random(4, 1, seed=3, name="bigram4")


def _prefixes(vocab: int, max_len: int) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = [()]
    for _ in range(max_len):
        out += [p + (t,) for p in out if len(p) == len(out[-1]) for t in range(vocab)]
    return sorted(set(out))


def test_toy_model_as_hf_has_the_toy_log_probs_as_logits() -> None:
    model = to_hf(BIGRAM, torch.float64)
    for prefix in _prefixes(4, 2):
        logits = model(input_ids=torch.tensor([[4, *prefix]])).logits[0, -1]
        assert logits[4] == -math.inf  # BOS is never emitted
        for tok, p in enumerate(BIGRAM.probs(prefix)):
            if p == 0:
                assert logits[tok] == -math.inf
            else:
                assert math.isclose(math.exp(float(logits[tok])), float(p), rel_tol=1e-14)


def test_cached_forward_equals_full_forward_and_crop_rewinds_the_prefix() -> None:
    from transformers import DynamicCache

    model = to_hf(BIGRAM, torch.float32)
    ids = torch.tensor([[4, 1, 3, 0]])
    full = model(input_ids=ids).logits
    cache = DynamicCache(config=model.config)
    first = model(input_ids=ids[:, :2], cache=cache).logits
    rest = model(input_ids=ids[:, 2:], cache=cache).logits
    assert torch.equal(torch.cat([first, rest], dim=1), full)
    cache.crop(-2)  # as HF does after a rejection: drop the last two tokens
    again = model(input_ids=torch.tensor([[2]]), cache=cache).logits[0, -1]
    expected = model(input_ids=torch.tensor([[4, 1, 2]])).logits[0, -1]
    assert torch.equal(again, expected)


def test_inputs_without_bos_are_refused_by_name() -> None:
    model = to_hf(BIGRAM)
    with pytest.raises(ValueError, match="BOS"):
        model(input_ids=torch.tensor([[1, 2]]))


@pytest.mark.parametrize("pair", default_suite(), ids=lambda p: p.name)
def test_round_trip_through_torch_in_float64_keeps_the_law(pair: dr.audit.suite.ModelPair) -> None:
    exact = dr.target_distribution(pair.target, pair.prompt, 3)
    wrapped = dr.target_distribution(wrap(pair.target, torch.float64), pair.prompt, 3)
    assert set(wrapped) == set(exact)  # zeros stay exact zeros
    assert float(dr.total_variation(wrapped, exact)) <= 1e-12


def test_processing_matches_hf_logits_warpers_including_ties() -> None:
    from transformers import (
        LogitsProcessorList,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    gen = torch.Generator().manual_seed(0)
    rows = [torch.randn(7, generator=gen, dtype=torch.float64) for _ in range(20)]
    rows.append(torch.tensor([1.0, 1.0, 1.0, 0.5, 0.5, -1.0, -math.inf], dtype=torch.float64))
    for temperature, top_k, top_p in [(0.7, 3, 0.9), (1.3, None, 0.5), (1.0, 2, None),
                                      (0.5, 5, 0.99)]:
        ours = Processing(temperature, top_k, top_p)
        theirs = LogitsProcessorList([TemperatureLogitsWarper(temperature)])
        if top_k is not None:
            theirs.append(TopKLogitsWarper(top_k))
        if top_p is not None:
            theirs.append(TopPLogitsWarper(top_p))
        for row in rows:
            expected = theirs(torch.zeros(1, 1, dtype=torch.long), row[None].clone())[0]
            got = ours.apply(row)
            assert torch.equal(torch.isinf(got), torch.isinf(expected))
            finite = torch.isfinite(expected)
            assert torch.allclose(got[finite], expected[finite], rtol=1e-12, atol=0)


@pytest.mark.parametrize("kwargs, match", [({"temperature": 0.0}, "temperature"),
                                           ({"top_k": 0}, "top_k"),
                                           ({"top_p": 1.5}, "top_p")])
def test_processing_rejects_bad_parameters_by_name(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Processing(**kwargs)  # type: ignore[arg-type]


def test_empty_prefix_without_bos_is_refused() -> None:
    lm = HFLanguageModel(to_hf(BIGRAM))
    with pytest.raises(dr.InvalidDistributionError, match="bos_token_id"):
        lm.probs(())


def _tiny_llama(seed: int) -> object:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=5, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, bos_token_id=4,
                         eos_token_id=None, pad_token_id=None, max_position_embeddings=16)
    model = LlamaForCausalLM(config)
    model.eval()
    return model


def test_our_decoders_run_on_a_random_weight_llama_and_stay_lossless() -> None:
    target = HFLanguageModel(_tiny_llama(0), bos_token_id=4, eos=None, name="llama-t")
    drafter = HFLanguageModel(_tiny_llama(1), bos_token_id=4, eos=None, name="llama-d")
    law = dr.target_distribution(target, (), 2)
    assert math.isclose(sum(float(p) for p in law.values()), 1.0, abs_tol=1e-12)
    for program in (
        lambda rng: dr.speculative(target, drafter, (), 2, rng, lookahead=2).tokens,
        lambda rng: dr.dsi(target, drafter, (), 2, rng, lookahead=1, sp_degree=2).tokens,
    ):
        assert float(dr.total_variation(dr.exact_distribution(program), law)) <= 1e-12


def test_temperature_is_applied_on_both_sides_consistently() -> None:
    processing = Processing(temperature=0.5, top_k=3)
    target = HFLanguageModel(to_hf(BIGRAM, torch.float64), bos_token_id=4, processing=processing)
    drafter = HFLanguageModel(to_hf(dr.TableLM.random(4, 1, seed=4), torch.float64),
                              bos_token_id=4, processing=processing)
    law = dr.target_distribution(target, (), 3)
    plain = dr.target_distribution(BIGRAM, (), 3)
    assert float(dr.total_variation(law, plain)) > 0.05  # the processing changes the law ...
    spec = dr.exact_distribution(
        lambda rng: dr.speculative(target, drafter, (), 3, rng, lookahead=2).tokens)
    assert float(dr.total_variation(spec, law)) <= 1e-12  # ... and SI samples the processed law


def test_dtype_study_separates_float_noise_from_bugs() -> None:
    rows = dtype_study()
    assert {(r.model, r.dtype, r.decoder) for r in rows} == {
        (p.name, d, dec) for p in default_suite() for d in ("float64", "float32", "bfloat16")
        for dec in ("autoregressive", "speculative", "dsi")}
    worst = {d: max(r.tv for r in rows if r.dtype == d) for d in ("float64", "float32",
                                                                   "bfloat16")}
    assert worst["float64"] <= 1e-12
    assert worst["float32"] <= 1e-6
    assert worst["bfloat16"] <= 1e-2
    assert worst["float64"] < worst["float32"] < worst["bfloat16"]
    # our decoders add nothing to the model's own rounding: same TV as sampling the target
    by_key = {(r.model, r.dtype, r.decoder): r.tv for r in rows}
    for (model, dtype, decoder), tv in by_key.items():
        assert abs(tv - by_key[(model, dtype, "autoregressive")]) <= 1e-9, (model, dtype, decoder)

