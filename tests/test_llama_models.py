"""The llama.cpp family's pure parts (numpy only; the default run): the tiny models and their
float64 forward, llama.cpp's sampler chain, the coarsened reference law, the law
``llama-speculative`` is predicted to follow, and the GGUF writer when ``gguf`` is installed.

llama.cpp itself is checked against these in tests/test_llama_engine.py (marker ``llama``): its
logits against `forward`, its samples against the laws.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import dsi_ref as dr
from dsi_ref.audit.statistical import Alternative, achieved_power
from dsi_ref.backends.llama_cpp import models as m
from dsi_ref.backends.llama_cpp.matrix import (
    EPSILON,
    MIN_MARGIN,
    N_TOKENS,
    PATHS,
    SWEEP_KS,
    SWEEP_SAMPLER,
    cells,
    planned_samples,
    predicted_law,
    prompt_ids,
)
from dsi_ref.backends.llama_cpp.sampling import (
    OTHER,
    SAMPLERS,
    SamplerConfig,
    chain_probs,
    coarsen,
    reference_law,
)
from dsi_ref.backends.llama_cpp.whitebox import aligned_residual, speculative_example_law
from dsi_ref.base.errors import InvalidParameterError

LIVE = m.live_tokens()


def row(values: dict[int, float]) -> np.ndarray:
    """A logit row: ``values`` on the given tokens, -60 elsewhere (negligible, not 0)."""
    logits = np.full(m.N_VOCAB, -60.0)
    for token, logit in values.items():
        logits[token] = logit
    return logits


def test_the_models_are_the_same_wherever_they_are_built() -> None:
    a, b = m.target_model().weights(), m.target_model().weights()
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert m.target_model().digest() != m.near_drafter().digest()
    near = m.near_drafter().weights()
    far = m.independent_drafter().weights()
    w = "blk.0.attn_q.weight"
    moved = np.abs(near[w] - a[w]).mean() / np.abs(a[w]).mean()
    assert 0.05 < moved < 0.15                   # 10 % noise, relative to the tensor's scale
    assert np.abs(far[w] - a[w]).mean() / np.abs(a[w]).mean() > 1


def test_forward_is_causal_and_keeps_dead_tokens_dead() -> None:
    model = m.target_model()
    tokens = list(prompt_ids())
    full = m.forward(model, tokens)
    assert full.shape == (len(tokens), m.N_VOCAB)
    head = m.forward(model, tokens[:4])
    assert np.allclose(full[:4], head, rtol=0, atol=1e-12)      # later tokens change nothing
    dead = [t for t in range(m.N_VOCAB) if t not in LIVE]
    gap = full[:, list(LIVE)].min(axis=1) - full[:, dead].max(axis=1)
    assert gap.min() > 10


@pytest.mark.parametrize("bad", [[], [m.N_VOCAB], [-1]])
def test_forward_refuses_tokens_outside_the_vocabulary(bad: list[int]) -> None:
    with pytest.raises(InvalidParameterError, match="tokens must be"):
        m.forward(m.target_model(), bad)


def test_byte_tokens_round_trip() -> None:
    assert [m.token_byte(m.byte_token(b)) for b in range(256)] == list(range(256))
    assert m.token_byte(m.BOS) is None
    with pytest.raises(InvalidParameterError):
        m.byte_token(256)


def test_chain_filters_before_the_temperature() -> None:
    # llama.cpp's order: top-p sees the temperature-1 law; HF's would see the tempered one.
    logits = row({LIVE[0]: math.log(0.5), LIVE[1]: math.log(0.3), LIVE[2]: math.log(0.2)})
    out = chain_probs(logits, SamplerConfig("x", top_p=0.75, temperature=0.5)).probs
    # 0.5 + 0.3 >= 0.75 keeps two tokens, then T = 0.5 squares their weights
    assert out[LIVE[0]] == pytest.approx(0.25 / 0.34, abs=1e-12)
    assert out[LIVE[1]] == pytest.approx(0.09 / 0.34, abs=1e-12)
    assert out[LIVE[2]] == 0


def test_chain_top_k_typical_and_min_p() -> None:
    logits = row({LIVE[0]: 2.0, LIVE[1]: 1.0, LIVE[2]: 0.0, LIVE[3]: -1.0})
    top2 = chain_probs(logits, SamplerConfig("k", top_k=2)).probs
    assert np.count_nonzero(top2) == 2 and top2[LIVE[0]] + top2[LIVE[1]] == pytest.approx(1)
    minp = chain_probs(logits, SamplerConfig("m", min_p=math.exp(-1.5))).probs
    assert np.count_nonzero(minp) == 2                 # logits within 1.5 of the largest
    p = chain_probs(logits, SamplerConfig("plain")).probs
    entropy = -sum(p[t] * math.log(p[t]) for t in LIVE[:4])
    by_typicality = sorted(LIVE[:4], key=lambda t: abs(-math.log(p[t]) - entropy))
    typical = chain_probs(logits, SamplerConfig("y", typical_p=0.5)).probs
    kept, cum = [], 0.0
    for t in by_typicality:
        kept.append(t)
        cum += p[t]
        if cum > 0.5:
            break
    assert set(np.nonzero(typical > 1e-12)[0]) == set(kept)


def test_repetition_penalty_divides_positive_and_multiplies_negative_logits() -> None:
    logits = row({LIVE[0]: 1.0, LIVE[1]: -1.0, LIVE[2]: 0.5})
    history = (LIVE[0], LIVE[1], LIVE[0])
    out = chain_probs(logits, SamplerConfig("r", repeat_penalty=2.0), history).probs
    want = np.exp([0.5, -2.0, 0.5])
    want /= want.sum()
    assert np.allclose([out[t] for t in LIVE[:3]], want, rtol=0, atol=1e-12)
    window = chain_probs(logits, SamplerConfig("r", repeat_penalty=2.0, penalty_last_n=1),
                         history).probs   # only the last token counts
    want = np.exp([0.5, -1.0, 0.5])
    want /= want.sum()
    assert np.allclose([window[t] for t in LIVE[:3]], want, rtol=0, atol=1e-12)


def test_coarsen() -> None:
    a, b = LIVE[0], LIVE[1]
    assert coarsen((a, b, a, b), 3) == (a, b, a)
    assert coarsen((a, m.EOS, b), 3) == (a, OTHER)
    assert coarsen((a,), 3) == (a, OTHER)                 # stopped early
    assert coarsen((), 1) == (OTHER,)


@pytest.mark.parametrize(("sampler", "n_tokens"),
                         [*((s, N_TOKENS) for s in SAMPLERS),
                          *((SWEEP_SAMPLER, k + 1) for k in SWEEP_KS)],
                         ids=lambda x: getattr(x, "name", str(x)))
def test_reference_laws_are_laws_with_room_for_float32(sampler: SamplerConfig,
                                                       n_tokens: int) -> None:
    ref = reference_law(m.target_model(), prompt_ids(), n_tokens, sampler)
    assert math.fsum(ref.law.values()) == pytest.approx(1, abs=1e-12)
    assert all(len(o) == n_tokens or o[-1] == OTHER for o in ref.law)
    assert ref.margin >= MIN_MARGIN, (sampler.name, ref.margin)


def test_reference_law_matches_target_distribution_of_the_same_rows() -> None:
    # Without coarsening effects (dead tokens ~1e-13), the law is dsi-ref's target_distribution
    # of a FunctionLM over the live tokens with the same rows.
    model, prompt = m.target_model(), prompt_ids()
    weights = model.weights()
    sampler = SAMPLERS[2]                                 # top-k 3

    def probs(prefix: tuple[int, ...]) -> tuple[float, ...]:
        tokens = tuple(LIVE[i] for i in prefix)
        p = chain_probs(m.forward(model, prompt + tokens, weights)[-1], sampler, tokens).probs
        live = [float(p[t]) for t in LIVE]
        return tuple(x / math.fsum(live) for x in live)

    lm = dr.FunctionLM(vocab_size=len(LIVE), probs=probs)
    theirs = dr.target_distribution(lm, (), 2)
    ours = reference_law(model, prompt, 2, sampler).law
    for outcome, p in theirs.items():
        assert ours[tuple(LIVE[i] for i in outcome)] == pytest.approx(float(p), abs=1e-9)


def test_aligned_residual_is_p_minus_q_on_shared_candidates_and_not_otherwise() -> None:
    p = np.zeros(m.N_VOCAB)
    q = np.zeros(m.N_VOCAB)
    p[[10, 11, 12]] = [0.5, 0.3, 0.2]
    q[[10, 11, 12]] = [0.2, 0.5, 0.3]
    assert np.allclose(aligned_residual(p, q)[[10, 11, 12]], [1, 0, 0])
    q2 = np.zeros(m.N_VOCAB)
    q2[[11, 12, 13]] = [0.2, 0.5, 0.3]                    # other candidates: paired by rank
    out = aligned_residual(p, q2)
    assert np.allclose(out[[10, 11, 12]], [0.3 / 0.3, 0, 0])
    plus = np.maximum(p - q2, 0)
    assert not np.allclose(out, plus / plus.sum())


def test_speculative_example_law_is_section_11_of_engine_bugs() -> None:
    # Context-free rows P and Q of docs/engine-bugs.md on three live tokens: the second token's
    # law is (2/3, 0, 1/3) after a first token drawn from P.
    P = (Fraction(1, 2), Fraction(1, 3), Fraction(1, 6))
    Q = (Fraction(1, 6), Fraction(1, 3), Fraction(1, 2))

    def rows(law: tuple[Fraction, ...]) -> np.ndarray:
        return row({LIVE[i]: math.log(float(x)) for i, x in enumerate(law)})

    model = m.target_model()
    law, margin = speculative_example_law(model, model, (1,), 2, SAMPLERS[0], 1,
                                          target_logits=lambda _: rows(P),
                                          drafter_logits=lambda _: rows(Q))
    second = (Fraction(2, 3), Fraction(0), Fraction(1, 3))
    for i in range(3):
        for j in range(3):
            got = law.get((LIVE[i], LIVE[j]), 0.0)
            assert got == pytest.approx(float(P[i] * second[j]), abs=1e-12)
    assert margin == pytest.approx(float(Q[2] - Q[1]), abs=1e-12)


def test_speculative_example_law_is_as_lossy_as_the_audits_are_sized_for() -> None:
    # The matrix states its power against TV >= EPSILON: the predicted loss is at least that.
    target, drafter = m.target_model(), m.near_drafter()
    law, margin = speculative_example_law(target, drafter, prompt_ids(), N_TOKENS, SAMPLERS[0],
                                          2)
    assert math.fsum(law.values()) == pytest.approx(1, abs=1e-12) and margin > MIN_MARGIN
    ref = reference_law(target, prompt_ids(), N_TOKENS, SAMPLERS[0]).law
    tv = 0.5 * math.fsum(abs(law.get(o, 0.0) - ref.get(o, 0.0)) for o in {*law, *ref})
    assert tv >= EPSILON


def test_the_matrix_plan() -> None:
    full, quick = cells(), cells(quick=True)
    assert {c.path for c in full} == {p.name for p in PATHS}
    assert {c.sampler for c in full} == set(SAMPLERS)
    speculative = [p for p in PATHS if p.speculative]
    sweep = {(c.path, c.k, c.n_tokens) for c in full if c.sampler == SWEEP_SAMPLER}
    assert sweep >= {(p.name, k, k + 1) for p in speculative for k in SWEEP_KS}
    # every draft position shows: the first token is the target's, then k drafts
    assert {(p.name, 0, k + 1) for p in PATHS if not p.speculative for k in SWEEP_KS} <= sweep
    assert {c.path for c in quick} == {"binding, no speculation", "binding, prompt lookup",
                                       "speculative-simple, no draft",
                                       "speculative (stochastic)"}
    assert [p.expected for p in PATHS].count("lossy") == 1


def test_llama_speculative_cells_are_sized_for_their_predicted_loss() -> None:
    # The independent drafter's predicted loss is small (TV ~0.05): its cell needs more samples
    # than the TV plan; every cell's stated power is recomputed by tests/test_llama_findings.py.
    chosen = [c for c in cells() if c.sampler == SAMPLERS[0] and c.k in (0, 2)]
    assert {c.drafter for c in chosen if c.spec.mode == "speculative"} == {"near", "independent"}
    for cell in chosen:
        n = planned_samples(cell)
        predicted = predicted_law(cell)
        assert (predicted is None) == (cell.spec.mode != "speculative")
        if predicted is not None:
            ref = reference_law(m.target_model(), prompt_ids(), cell.n_tokens, cell.sampler).law
            assert achieved_power(ref, Alternative.of_law(predicted), n) >= 0.99, cell.name
            assert achieved_power(ref, Alternative.tv(EPSILON), n) >= 0.99, cell.name


def test_gguf_writer_round_trip(tmp_path: object) -> None:
    gguf = pytest.importorskip("gguf")
    from pathlib import Path

    model = m.target_model()
    path = m.gguf_path(model, Path(str(tmp_path)))
    assert m.gguf_path(model, Path(str(tmp_path))) == path          # cached
    reader = gguf.GGUFReader(str(path))
    tensors = {t.name: np.asarray(t.data) for t in reader.tensors}
    weights = model.weights()
    assert tensors.keys() == weights.keys()
    for name, w in weights.items():
        assert np.array_equal(tensors[name].reshape(w.shape), w), name
    field = reader.fields["tokenizer.ggml.tokens"]
    tokens = [bytes(field.parts[i]).decode() for i in field.data]
    assert tuple(tokens) == m.TOKEN_TEXTS
