"""The OpenVINO GenAI audit's reference side, without OpenVINO: GenAI's sampling rules as
`dsi_ref.backends.openvino.sampling` writes them (its own order, which is not vLLM's), the exact
law of the first tokens, the matrix's predictions and the named errors for bad input. These run
in the default suite; the engine is tested under ``python3 run.py test --openvino``
(tests/test_openvino_engine.py, tests/test_openvino_smoke.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dsi_ref.backends.openvino.engine import EngineConfig, EngineProcess
from dsi_ref.backends.openvino.matrix import CELLS, QUICK_CELLS, Cell, expected
from dsi_ref.backends.openvino.sampling import (
    ReferenceMarginError,
    Sampling,
    penalised_logits,
    processed_row,
)
from dsi_ref.base.errors import EngineOptionError, InvalidParameterError, ModelDirectoryError


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    out: np.ndarray = e / e.sum()
    return out


LOGITS = np.array([2.0, 1.0, 0.5, -0.3, -1.2, 0.1])


def test_plain_sampling_is_the_softmax_and_temperature_divides_the_logits() -> None:
    assert np.allclose(processed_row(LOGITS, (), (), Sampling()), softmax(LOGITS), atol=1e-15)
    assert np.allclose(processed_row(LOGITS, (), (), Sampling(temperature=0.7)),
                       softmax(LOGITS / 0.7), atol=1e-15)


def test_greedy_is_the_argmax_of_the_penalised_logits() -> None:
    row = processed_row(LOGITS, (0,), (), Sampling(temperature=0.0, repetition_penalty=4.0))
    assert row.tolist() == [0, 1, 0, 0, 0, 0]  # 2.0 / 4 = 0.5 < 1.0


def test_top_k_keeps_the_k_largest_and_renormalises() -> None:
    row = processed_row(LOGITS, (), (), Sampling(top_k=2, temperature=0.5))
    expect = np.zeros(6)
    expect[:2] = softmax(LOGITS[:2] / 0.5)
    assert np.allclose(row, expect, atol=1e-15)


def test_min_p_does_not_renormalise_before_top_p() -> None:
    """GenAI's MinPFilter drops tokens and leaves the others' probabilities as they were, so
    TopPFilter's running sum is of the unrenormalised ones. On (0.4, 0.3, 0.2, 0.06, 0.04) with
    min-p 0.2 (cut 0.08) and top-p 0.75: GenAI's running sums 0.4, 0.7, 0.9 first exceed 0.75 at
    the third token, so it keeps three; renormalised (0.444, 0.333, 0.222) they would exceed it
    at the second. The reference follows GenAI."""
    p = np.array([0.4, 0.3, 0.2, 0.06, 0.04])
    row = processed_row(np.log(p), (), (), Sampling(min_p=0.2, top_p=0.75))
    assert np.count_nonzero(row) == 3
    renormalised = p[:3] / p[:3].sum()
    assert renormalised[0] + renormalised[1] > 0.75
    assert np.allclose(row[:3], renormalised, atol=1e-12)


def test_top_p_keeps_the_token_that_crosses_the_cut() -> None:
    p = np.array([0.5, 0.3, 0.15, 0.05])
    row = processed_row(np.log(p), (), (), Sampling(top_p=0.6))
    assert np.count_nonzero(row) == 2  # 0.5 is not above 0.6; 0.8 is
    assert math.isclose(row[0], 0.5 / 0.8, rel_tol=1e-12)


def test_presence_and_frequency_penalties_move_a_logit_towards_zero() -> None:
    """GenAI subtracts from a positive logit and *adds* to a negative one (OpenAI subtracts)."""
    z = penalised_logits(LOGITS, (), (0, 4, 4), Sampling(presence_penalty=0.5,
                                                         frequency_penalty=0.25))
    assert math.isclose(z[0], 2.0 - 0.5 - 0.25, rel_tol=1e-15)
    assert math.isclose(z[4], -1.2 + 0.5 + 0.5, rel_tol=1e-15)
    assert z[1] == LOGITS[1]


def test_the_repetition_penalty_covers_the_prompt_and_the_output() -> None:
    z = penalised_logits(LOGITS, (1,), (4,), Sampling(repetition_penalty=2.0))
    assert math.isclose(z[1], 0.5, rel_tol=1e-15)
    assert math.isclose(z[4], -2.4, rel_tol=1e-15)
    assert z[0] == LOGITS[0]


def test_a_cut_within_float_rounding_is_refused() -> None:
    tied = np.array([1.0, 0.5, 0.5 + 1e-7, -1.0])
    with pytest.raises(ReferenceMarginError, match="top-k"):
        processed_row(tied, (), (), Sampling(top_k=2))
    with pytest.raises(ReferenceMarginError, match="argmax"):
        processed_row(np.array([1.0, 1.0 + 1e-9]), (), (), Sampling(temperature=0.0))


def test_bad_settings_are_named_errors() -> None:
    for bad in ({"temperature": -1.0}, {"top_k": 0}, {"top_p": 0.0}, {"min_p": 1.0},
                {"repetition_penalty": 0.0}):
        with pytest.raises(InvalidParameterError):
            Sampling(**bad)  # type: ignore[arg-type]


def test_engine_configurations_are_checked_before_any_process() -> None:
    with pytest.raises(EngineOptionError, match="needs a drafter"):
        EngineConfig("draft")
    with pytest.raises(EngineOptionError, match="not both"):
        EngineConfig("prompt_lookup", k=2, confidence=0.5)
    with pytest.raises(EngineOptionError, match="mode must be"):
        EngineConfig("medusa")
    with pytest.raises(EngineOptionError, match=r"1\.\.16"):
        EngineConfig("prompt_lookup", k=0)


def test_a_folder_that_is_not_ir_is_refused_in_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ModelDirectoryError, match="not an OpenVINO IR folder") as info:
        EngineProcess(EngineConfig(), tmp_path).__enter__()
    assert "\n" not in str(info.value)


def test_the_matrix_predicts_each_verdict_from_its_finding() -> None:
    verdicts = {c.name: expected(c)[0] for c in CELLS}
    assert all(v == "lossless" for n, v in verdicts.items()
               if n.startswith(("no speculation", "prompt lookup")))
    assert all(v == "lossless" for n, v in verdicts.items() if n.endswith("greedy"))
    assert {v for n, v in verdicts.items()
            if "[no prefix caching]" in n and not n.endswith("greedy")} == {"lossy"}
    assert verdicts["draft(near) k=2 / T=1"] == "crash"
    assert len(verdicts) == len(CELLS)  # names are unique
    assert [expected(c)[0] for c in QUICK_CELLS] == ["lossless", "lossless", "lossy"]
    assert isinstance(QUICK_CELLS[0], Cell)


def test_the_reference_law_is_the_float64_chain_and_sums_to_one() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from dsi_ref.backends.openvino.matrix import MAX_NEW_TOKENS, PROMPT
    from dsi_ref.backends.openvino.sampling import reference_law
    from dsi_ref.backends.vllm.models import build_models, logit_rows

    target = build_models().target
    for sampling in (Sampling(), Sampling(temperature=0.7), Sampling(top_k=3),
                     Sampling(top_p=0.8), Sampling(repetition_penalty=1.3),
                     Sampling(temperature=0.0)):
        law = reference_law(target, PROMPT, MAX_NEW_TOKENS, sampling)
        assert math.isclose(math.fsum(law.values()), 1.0, abs_tol=1e-12)
        first = processed_row(logit_rows(target, [PROMPT])[0], PROMPT, (), sampling)
        marginal = np.zeros(len(first))
        for outcome, mass in law.items():
            marginal[outcome[0]] += mass
        assert np.allclose(marginal, first, atol=1e-12), sampling.label


def test_a_law_too_large_to_audit_is_refused_before_any_forward() -> None:
    pytest.importorskip("transformers")
    from dsi_ref.backends.openvino.sampling import reference_law
    from dsi_ref.backends.vllm.models import build_models

    with pytest.raises(InvalidParameterError, match="no statistical audit"):
        reference_law(build_models().target, (0,), 6, Sampling())
