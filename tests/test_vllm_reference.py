"""The vLLM audit's reference side, without vLLM: the tiny checkpoints, vLLM's sampling rules as
`dsi_ref.backends.vllm.sampling` writes them, the exact law of the first tokens, and the named
errors for bad input. These run in the default suite (torch and transformers, no vLLM); the
engine itself is tested under ``python3 run.py test --vllm`` (tests/test_vllm_engine.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import dsi_ref as dr
from dsi_ref.backends.vllm import models
from dsi_ref.backends.vllm.engine import EngineConfig, EngineProcess
from dsi_ref.backends.vllm.matrix import CELLS, PROMPT, Cell, expected
from dsi_ref.backends.vllm.sampling import (
    ReferenceMarginError,
    Sampling,
    penalised_logits,
    processed_row,
    reference_law,
)
from dsi_ref.base.errors import (
    EngineEnvironmentError,
    EngineOptionError,
    InvalidParameterError,
    ModelDirectoryError,
    VocabularyMismatchError,
)
from dsi_ref.base.processors import VLLM_ORDER


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> models.ModelSet:
    return models.build_models(tmp_path_factory.mktemp("vllm-models"))


def test_checkpoints_are_a_function_of_their_spec(built: models.ModelSet, tmp_path: Path) -> None:
    again = models.build(models.TARGET, tmp_path)
    assert again.name == built.target.name  # the folder is named by the spec's digest
    a = (built.target / "model.safetensors").read_bytes()
    assert a == (again / "model.safetensors").read_bytes()
    assert models.build(models.TARGET, tmp_path) == again  # found in the cache, not rewritten
    config = models.load_config(built.target)
    assert config["vocab_size"] == models.TARGET.vocab_size
    assert config["head_dim"] >= 32  # vLLM's CPU attention refuses smaller heads


def test_the_near_drafter_accepts_more_often_than_the_independent_one(
        built: models.ModelSet) -> None:
    near = models.acceptance_rate(built.target, built.near, PROMPT)
    independent = models.acceptance_rate(built.target, built.independent, PROMPT)
    p = np.exp(models.logit_rows(built.target, [PROMPT])[0])
    q = np.exp(models.logit_rows(built.near, [PROMPT])[0])
    overlap = np.minimum(p / p.sum(), q / q.sum()).sum()  # sum of min(p, q) = 1 - TV
    assert near == pytest.approx(overlap, abs=1e-12)
    assert 0 < independent < near < 1


def test_logit_rows_are_the_checkpoints_rows_in_float64(built: models.ModelSet) -> None:
    import torch
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(str(built.target), dtype=torch.float32).eval()
    contexts = [PROMPT]
    with torch.no_grad():
        f32 = model(input_ids=torch.tensor(contexts)).logits[:, -1].double().numpy()
    f64 = models.logit_rows(built.target, contexts)
    assert f64.dtype == np.float64
    assert np.max(np.abs(f64 - f32)) < 1e-4  # the float32 run vLLM sees, within rounding


def test_logit_bias_then_penalties_as_vllm_orders_them() -> None:
    z = np.array([2.0, -1.0, 0.5, -0.25])
    s = Sampling(logit_bias=((1, 1.5),), repetition_penalty=2.0, frequency_penalty=0.3,
                 presence_penalty=0.1)
    out = penalised_logits(z, prompt=[0], output=[1, 1, 3], sampling=s)
    # token 0: in the prompt only, positive: divided; token 1: biased to 0.5 first, then
    # divided (it is positive after the bias), then frequency 2x and presence; token 2 unseen;
    # token 3: negative, multiplied, then frequency 1x and presence
    want = [2.0 / 2, (-1.0 + 1.5) / 2 - 0.3 * 2 - 0.1, 0.5, -0.25 * 2 - 0.3 - 0.1]
    assert out == pytest.approx(want, abs=1e-15)


def test_processed_row_is_the_base_processors_in_vllm_order() -> None:
    z = np.log(np.array([0.4, 0.3, 0.2, 0.1]))
    s = Sampling(temperature=0.5, min_p=0.2, top_k=3, top_p=0.8)
    row = processed_row(z, (), (), s)
    tempered = np.array([0.4, 0.3, 0.2, 0.1]) ** 2
    tempered /= tempered.sum()  # [16, 9, 4, 1] / 30
    kept = tempered * (tempered >= 0.2 * tempered.max())  # min-p drops 1/30
    kept /= kept.sum()
    # top-k 3 keeps 16, 9, 4; top-p 0.8 keeps the tokens with less than 0.8 above them
    above = np.concatenate([[0], np.cumsum(kept)[:-1]])
    kept = kept * (above < 0.8)
    assert row == pytest.approx(kept / kept.sum(), abs=1e-12)
    assert processed_row(z, (), (), Sampling(temperature=0)).tolist() == [1.0, 0, 0, 0]


def test_a_cut_within_float32_rounding_of_a_probability_is_refused() -> None:
    z = np.log(np.array([0.5, 0.3, 0.2]))
    with pytest.raises(ReferenceMarginError, match="top_p"):
        processed_row(z, (), (), Sampling(top_p=0.8))  # 0.5 + 0.3 is exactly the cut
    with pytest.raises(ReferenceMarginError, match="min_p"):
        processed_row(z, (), (), Sampling(min_p=0.4))  # 0.4 * 0.5 = 0.2, a probability


def test_the_reference_law_is_the_chain_of_processed_rows(built: models.ModelSet) -> None:
    s = Sampling(temperature=0.7, top_p=0.9, repetition_penalty=1.3)
    law = reference_law(built.target, PROMPT, 2, s)
    assert math.fsum(law.values()) == pytest.approx(1.0, abs=1e-12)
    first = processed_row(models.logit_rows(built.target, [PROMPT])[0], PROMPT, (), s)
    for token in range(len(first)):
        marginal = math.fsum(m for o, m in law.items() if o[0] == token)
        assert marginal == pytest.approx(first[token], abs=1e-12)
    (x, y), mass = max(law.items(), key=lambda kv: kv[1])
    second = processed_row(models.logit_rows(built.target, [(*PROMPT, x)])[0], PROMPT, (x,), s)
    assert mass == pytest.approx(first[x] * second[y], rel=1e-12)


def test_without_penalties_the_law_is_dsi_refs_target_distribution(
        built: models.ModelSet) -> None:
    """Two computations of one law: the vLLM reference, and `dr.target_distribution` of the
    checkpoint's rows (softmax of the float64 logits) processed by `dr.processed`."""
    def probs(prefix: tuple[int, ...]) -> tuple[float, ...]:
        row = np.exp(models.logit_rows(built.target, [prefix])[0])
        return tuple(float(x) for x in row / row.sum())

    lm = dr.FunctionLM(vocab_size=models.TARGET.vocab_size, probs=probs)
    s = Sampling(temperature=1.3, top_k=5)
    target = dr.processed(lm, temperature=1.3, top_k=5, order=VLLM_ORDER, exact=False)
    law = dr.target_distribution(target, PROMPT, 2)
    ours = reference_law(built.target, PROMPT, 2, s)
    assert set(ours) == {o for o, m in law.items() if m > 0}
    assert max(abs(float(law[o]) - m) for o, m in ours.items()) < 1e-12


def test_bad_model_directories_and_drafters_are_named_errors(built: models.ModelSet,
                                                             tmp_path: Path) -> None:
    with pytest.raises(ModelDirectoryError, match="does not exist"):
        models.load_config(tmp_path / "nowhere")
    (tmp_path / "enc").mkdir()
    (tmp_path / "enc" / "config.json").write_text(json.dumps(
        {"architectures": ["BertModel"], "vocab_size": 8}))
    with pytest.raises(ModelDirectoryError, match="not a causal LM"):
        models.load_config(tmp_path / "enc")
    with pytest.raises(VocabularyMismatchError, match="9 tokens"):
        EngineConfig("draft_model", str(built.wide), "wide").check(built.target)
    with pytest.raises(EngineOptionError, match="needs a drafter"):
        EngineConfig("draft_model")
    with pytest.raises(EngineOptionError, match="num_speculative_tokens"):
        EngineConfig("ngram", k=0)
    with pytest.raises(InvalidParameterError, match="top_p"):
        Sampling(top_p=0.0)


def test_an_environment_without_vllm_is_a_named_error_with_the_command(
        built: models.ModelSet, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util
    import sys

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    monkeypatch.setenv("DSI_REF_VLLM_PYTHON", sys.executable)
    with pytest.raises(EngineEnvironmentError, match=r"python3 run\.py audit --vllm"), \
            EngineProcess(EngineConfig(), built.target):
        pass


def test_every_cell_has_a_predicted_verdict_and_the_matrix_covers_the_issue() -> None:
    verdicts = {expected(c)[0] for c in CELLS}
    assert verdicts == {"lossless", "lossy", "refused", "crash"}
    methods = {c.engine.method for c in CELLS}
    assert {None, "draft_model", "ngram", "suffix", "eagle"} <= methods
    assert {c.engine.k for c in CELLS if c.engine.method == "draft_model"} >= {1, 2, 3, 4}
    assert {c.engine.draft_sample_method for c in CELLS} == {"greedy", "probabilistic"}
    temperatures = {c.sampling.temperature for c in CELLS}
    assert {0.0, 0.7, 1.0, 1.3} <= temperatures
    control = [c for c in CELLS if c.engine.method is None]
    assert all(expected(c)[0] == "lossless" for c in control)
    for name in ("top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty",
                 "frequency_penalty", "logit_bias"):
        assert any(getattr(c.sampling, name) for c in control), name
    stock = [c for c in CELLS if c.engine.expand == "stock" and c.engine.method is not None
             and not c.sampling.greedy and c.sampling.top_k is None]
    assert stock and all(expected(c)[0] == "lossy" for c in stock)
    assert isinstance(CELLS[0], Cell)


@pytest.mark.parametrize(("args", "message"), [
    (["--vllm", "--model", "/no/such/folder"], "model directory '/no/such/folder' does not exist"),
    (["--vllm", "--model", "{target}"], "needs --draft DIR"),
    (["--vllm", "--model", "{target}", "--draft", "{wide}"], "vocabulary of 9 tokens"),
    (["--vllm", "--model", "{target}", "--method", "none", "--tokens", "9"],
     "8^9 outcomes, more than 100000"),
    ([], "give MODULE:CALLABLE or --vllm"),
    (["some_module:make", "--vllm"], "give MODULE:CALLABLE or --vllm"),
])
def test_audit_engine_vllm_refuses_bad_input_in_one_line_with_status_2(
        args: list[str], message: str, built: models.ModelSet,
        capsys: pytest.CaptureFixture[str]) -> None:
    from dsi_ref.cli import main

    args = [a.format(target=built.target, wide=built.wide) for a in args]
    assert main(["audit-engine", *args, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dsi-ref: error: ") and err.count("\n") == 1, err
    assert message in err, err
