"""OpenVINO GenAI under ``python3 run.py test --openvino``: the conversion to IR, the engine
process and its named errors, and the findings that need no statistics (each asserted on every
seed it draws, so none of them can fail by chance):

* the converted target computes the float64 reference's logits to float32 precision when asked
  for f32, and to about 4e-2 with the CPU plugin's defaults on a CPU with bf16 instructions;
* a seed gives the same tokens again, with and without a draft model;
* with a draft model, ``do_sample=True`` and ``top_k=1`` (sampling from a point mass), the
  output is the *drafter's* choice where it differs from the target's: ``validate_candidate``
  accepts a draft ``d`` when ``r <= q(d) / p(x)``, with ``x`` the target's own sample, and both
  are 1 here;
* in the scheduler ``LLMPipeline`` makes (prefix caching on), sampled requests with a draft
  model raise ``RuntimeError`` (``content_length <= prompt_ids.size() + m_generated_ids.size()``)
  on some seeds, and never without prefix caching.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("openvino_genai")
pytest.importorskip("optimum.intel")

from dsi_ref.backends.openvino.engine import EngineConfig, EngineProcess
from dsi_ref.backends.openvino.matrix import PROMPT
from dsi_ref.backends.openvino.models import build_ir, convert, is_ir_folder
from dsi_ref.backends.openvino.probes import logit_gap, point_mass
from dsi_ref.backends.openvino.sampling import Sampling
from dsi_ref.backends.vllm.models import WIDE, build
from dsi_ref.base.errors import (
    EngineCrashError,
    EngineOptionError,
    ModelDirectoryError,
    VocabularyMismatchError,
)

pytestmark = [pytest.mark.openvino,
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::ResourceWarning")]


@pytest.fixture(scope="module")
def ir():  # type: ignore[no-untyped-def]
    return build_ir()


def test_the_converted_target_computes_the_reference_logits_in_f32(ir) -> None:  # type: ignore[no-untyped-def]
    gap = logit_gap(ir)
    assert gap < 1e-5, gap  # measured 2.5e-6
    assert is_ir_folder(ir.target) and convert(ir.target) == ir.target  # IR is reused as is


def test_the_cpu_defaults_compute_in_bf16_where_the_cpu_has_it(ir) -> None:  # type: ignore[no-untyped-def]
    import openvino as ov

    if str(ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT")) != "<Type: 'bfloat16'>":
        pytest.skip("this CPU's default inference precision is not bf16")
    gap = logit_gap(ir, {})
    assert 1e-3 < gap < 0.2, gap  # measured 3.7e-2: why every engine of the audit asks for f32


def test_a_folder_that_is_no_causal_lm_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"architectures": ["BertModel"], "vocab_size": 8}')
    with pytest.raises(ModelDirectoryError, match="not a causal LM") as info:
        convert(tmp_path)
    assert "\n" not in str(info.value)
    with pytest.raises(ModelDirectoryError, match="does not exist"):
        convert(tmp_path / "missing")


def test_a_drafter_of_another_vocabulary_is_refused(ir) -> None:  # type: ignore[no-untyped-def]
    wide = convert(build(WIDE))
    with pytest.raises(VocabularyMismatchError, match="9 tokens"):
        EngineProcess(EngineConfig("draft", str(wide), "wide", 2), ir.target).__enter__()


def test_an_option_genai_refuses_is_an_engine_option_error(ir) -> None:  # type: ignore[no-untyped-def]
    config = EngineConfig(properties=(("INFERENCE_PRECISION_HINT", "no-such-type"),))
    with pytest.raises(EngineOptionError, match="refuses") as info:
        EngineProcess(config, ir.target).__enter__()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("mode", ["none", "draft", "prompt_lookup"])
def test_a_seed_gives_the_same_tokens_again(ir, mode: str) -> None:  # type: ignore[no-untyped-def]
    drafter = str(ir.near) if mode == "draft" else None
    config = EngineConfig(mode, drafter, "near", 2, prefix_caching=False if drafter else None)
    seeds = list(range(1, 41))
    with EngineProcess(config, ir.target) as engine:
        first = engine.generate(PROMPT, 3, Sampling(), seeds)
        again = engine.generate(PROMPT, 3, Sampling(), seeds)
    assert first == again
    assert len(set(first)) > 5  # the seeds matter


def test_sampling_from_a_point_mass_returns_the_drafters_choice(ir) -> None:  # type: ignore[no-untyped-def]
    """``top_k=1``: the target's law is the point mass on its argmax chain (the control gives
    it on every seed), yet with the independent drafter the second token is the drafter's."""
    found = point_mass(ir)
    assert found.control == {found.target}
    assert found.target[1] != found.drafter[0]  # the two models disagree after token 1
    assert len(found.speculative) == 1, found  # the same wrong sequence on every seed
    (tokens,) = found.speculative
    assert tokens[0] == found.target[0]  # sampled by the target before any draft
    assert tokens[1] == found.drafter[0] != found.target[1], found  # probability 0 under p


def test_the_default_scheduler_crashes_with_a_draft_model_and_sampling(ir) -> None:  # type: ignore[no-untyped-def]
    seeds = list(range(1, 101))
    with EngineProcess(EngineConfig("draft", str(ir.near), "near", 2), ir.target) as engine:
        with pytest.raises(EngineCrashError, match="content_length") as info:
            engine.generate(PROMPT, 3, Sampling(), seeds)
        with pytest.raises(EngineCrashError, match="crashed earlier"):
            engine.generate(PROMPT, 3, Sampling(), seeds)
    assert "\n" not in str(info.value)
    config = EngineConfig("draft", str(ir.near), "near", 2, prefix_caching=False)
    with EngineProcess(config, ir.target) as engine:
        assert len(engine.generate(PROMPT, 3, Sampling(), seeds)) == len(seeds)
