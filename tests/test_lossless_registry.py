"""Losslessness of every registered decoder, exactly: output law == target law (as Fractions).

Parametrised over the registry (`dsi_ref.audit.registry.DECODERS`) × each decoder's variants (verify
rules), with hypothesis drawing context-dependent models with zeros, ties, ``p == q``, one-hot
drafters and EOS, prompts, lookaheads, server counts and latencies; a test fails when a public
decoder is missing from the registry.
"""

from __future__ import annotations

import inspect
from fractions import Fraction as F
from typing import Any

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import dsi_ref as dr
from dsi_ref.audit.registry import DECODERS, STRING_LEVEL_DECODERS, DecoderSpec, Variant
from dsi_ref.audit.strategies import latencies, lookaheads, model_pairs, prompts, sp_degrees

CASES = [pytest.param(spec, variant, id=f"{spec.name}-{variant.label}")
         for spec in DECODERS.values() for variant in spec.variants]


def _params(data: st.DataObject, spec: DecoderSpec) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if "lookahead" in spec.params:
        params["lookahead"] = data.draw(lookaheads(3), label="lookahead")
    if "sp_degree" in spec.params:
        params["sp_degree"] = data.draw(sp_degrees(3), label="sp_degree")
    return params


@pytest.mark.parametrize(("spec", "variant"), CASES)
@settings(max_examples=4 * settings.default.max_examples)  # the central property: 4x the budget
@given(data=st.data())
def test_registered_decoder_output_law_equals_target_law(spec: DecoderSpec, variant: Variant,
                                                         data: st.DataObject) -> None:
    target, drafter = data.draw(model_pairs(max_vocab=3, max_context=1), label="pair")
    prompt = data.draw(prompts(target.vocab_size, max_len=2), label="prompt")
    n = data.draw(st.integers(1, 3), label="max_new_tokens")
    params = _params(data, spec)
    program = spec.program(target, drafter, prompt, n, variant, **params)
    report = dr.check_lossless(program, target, prompt, n, greedy=variant.greedy)
    note(str(report))
    assert report.equal, str(report)


RANDOM_LATENCY_CASES = [c for c in CASES if "dsi" in c.id or "speculative" in c.id]


def _check_under_random_latencies(spec: DecoderSpec, variant: Variant, data: st.DataObject,
                                  n: int, max_sp: int) -> None:
    target, drafter = data.draw(model_pairs(max_vocab=2, max_context=1), label="pair")
    latency = data.draw(latencies(random=True), label="latency")
    params = _params(data, spec)
    if "sp_degree" in params:
        params["sp_degree"] = min(params["sp_degree"], max_sp)

    def run(rng: dr.Randomness) -> tuple[int, ...]:
        fn: Any = spec.fn
        return tuple(fn(target, drafter, (), n, rng, latency=latency, **variant.kwargs,
                        **params).tokens)

    report = dr.check_lossless(run, target, (), n, greedy=variant.greedy)
    assert report.equal, str(report)


@pytest.mark.parametrize(("spec", "variant"), RANDOM_LATENCY_CASES)
@given(data=st.data())
def test_decoder_is_lossless_under_random_latencies_and_prefill(spec: DecoderSpec,
                                                                variant: Variant,
                                                                data: st.DataObject) -> None:
    """Latencies drawn through ``rng`` (random, TTFT ≠ TPOT) are part of the enumeration: the
    output law must not depend on them (2 new tokens, up to 2 servers: every latency draw and
    every schedule enumerated stays small)."""
    _check_under_random_latencies(spec, variant, data, n=2, max_sp=2)


@pytest.mark.slow
@pytest.mark.parametrize(("spec", "variant"), RANDOM_LATENCY_CASES)
@given(data=st.data())
def test_decoder_is_lossless_under_random_latencies_longer_runs(spec: DecoderSpec,
                                                                variant: Variant,
                                                                data: st.DataObject) -> None:
    """As above with 3 new tokens and up to 3 servers (minutes: marked slow)."""
    _check_under_random_latencies(spec, variant, data, n=3, max_sp=3)


@pytest.mark.parametrize("lookahead", [1, 2, 3])
@pytest.mark.parametrize("verify", ["rejection", "exact_match"])
def test_speculative_is_lossless_across_iteration_boundaries_with_context(lookahead: int,
                                                                         verify: str) -> None:
    """A trigram target and a bigram drafter, 5 tokens: several iterations, every boundary."""
    target = dr.TableLM.random(3, 2, seed=5, name="trigram")
    drafter = dr.TableLM.random(3, 1, seed=6, name="bigram")
    dr.assert_lossless(lambda rng: dr.speculative(target, drafter, (2,), 5, rng, lookahead,
                                                  verify),  # type: ignore[arg-type]
                       target, (2,), 5)


def test_every_public_decoder_is_registered() -> None:
    public = {name for name in dr.__all__
              if inspect.isfunction(getattr(dr, name))
              and inspect.signature(getattr(dr, name)).return_annotation in ("Run", dr.Run)}
    assert {"autoregressive", "speculative", "dsi"} <= public
    # a decoder over two vocabularies (it takes tokenizers) is checked over output strings
    assert set(STRING_LEVEL_DECODERS) <= public
    for name in STRING_LEVEL_DECODERS:
        assert "target_tokenizer" in inspect.signature(getattr(dr, name)).parameters
    missing = public - set(DECODERS) - set(STRING_LEVEL_DECODERS)
    assert not missing, f"public decoders missing from dsi_ref.audit.registry.DECODERS: {missing}"
    for spec in DECODERS.values():
        assert getattr(dr, spec.name) is spec.fn, f"{spec.name} is not the public function"


def test_registry_rejects_duplicate_names() -> None:
    with pytest.raises(ValueError, match="already registered"):
        dr.audit.registry.register(DECODERS["speculative"])


def test_a_user_decoder_that_drafts_greedily_but_verifies_with_soft_q_is_reported_lossy() -> None:
    """A decoder written by a user against `Randomness`: SI with greedy drafting (argmax q) and
    the soft acceptance test min(1, p/q) — a real bug pattern. The audit names the worst
    sequence and both probabilities."""
    target = dr.TableLM.context_free((F(1, 2), F(1, 2)), name="fair")
    drafter = dr.TableLM.context_free((F(3, 4), F(1, 4)), name="biased")

    def greedy_draft_soft_verify(rng: dr.Randomness) -> tuple[int, ...]:
        tokens: list[int] = []
        while len(tokens) < 2:
            p, q = target.probs(tuple(tokens)), drafter.probs(tuple(tokens))
            x = max(range(2), key=lambda t: q[t])               # BUG: argmax q, not x ~ q
            if rng.bernoulli(min(F(1), F(p[x]) / F(q[x]))):     # soft min(1, p/q)
                tokens.append(x)
            else:
                residual = [max(F(0), F(a) - F(b)) for a, b in zip(p, q, strict=True)]
                tokens.append(rng.categorical(residual))
        return tuple(tokens)

    with pytest.raises(AssertionError) as info:
        dr.assert_lossless(greedy_draft_soft_verify, target, (), 2)
    message = str(info.value)
    assert "LOSSY" in message
    assert "worst sequence (0, 0)" in message
    assert "decoder P = 4/9" in message and "target P = 1/4" in message
    report = dr.check_lossless(greedy_draft_soft_verify, target, (), 2)
    # per position P(0) = 2/3 (accepted draft 0), P(1) = 1/3 (residual): TV = 7/36
    assert report.tv_distance == F(7, 36)


def test_target_distribution_stops_at_eos_and_at_the_budget() -> None:
    t = dr.TableLM.context_free((F(1, 2), F(1, 4), F(1, 4)), eos=2)
    law = dr.target_distribution(t, (), 2)
    assert law == {(2,): F(1, 4), (0, 0): F(1, 4), (0, 1): F(1, 8), (0, 2): F(1, 8),
                   (1, 0): F(1, 8), (1, 1): F(1, 16), (1, 2): F(1, 16)}
    assert dr.target_distribution(t, (), 2, greedy=True) == {(0, 0): F(1)}
    assert dr.target_distribution(t, (), 0) == {(): F(1)}
