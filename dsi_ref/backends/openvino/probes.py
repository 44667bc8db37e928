"""The OpenVINO GenAI findings that need no statistics, measured (benchmarks/openvino_findings.py
and tests/test_openvino_engine.py print and assert them).

* `point_mass`: with ``do_sample=True`` and ``top_k=1`` every law is a point mass, so a lossless
  engine returns the target's argmax chain on every seed; with a draft model GenAI returns the
  drafter's token where the two differ (``validate_candidate`` accepts a draft ``d`` when
  ``r <= q(d) / p(x)``, ``x`` the target's own sample: both probabilities are 1 here).
* `crash_rate`: how many sampled requests with a draft model raise, one fresh pipeline after
  each crash, with the scheduler ``LLMPipeline`` makes and without prefix caching.
* `logit_gap`: the largest distance between the converted target's logits and the float64
  reference's, with the given device properties (f32, or the CPU plugin's defaults).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...base.errors import EngineCrashError
from .engine import F32, EngineConfig, EngineProcess
from .matrix import PROMPT
from .models import IRSet
from .sampling import Sampling

__all__ = ["CrashRate", "PointMass", "crash_rate", "greedy_chain", "logit_gap", "point_mass"]


def greedy_chain(folder: Any, n: int, prompt: Sequence[int] = PROMPT) -> tuple[int, ...]:
    """The argmax chain of ``n`` tokens of the Hugging Face checkpoint in ``folder`` (float64)."""
    from ..vllm.models import logit_rows

    seq = list(prompt)
    for _ in range(n):
        seq.append(int(np.argmax(logit_rows(folder, [seq])[0])))
    return tuple(seq[len(prompt):])


@dataclass(frozen=True)
class PointMass:
    """`point_mass`'s outcome: the target's argmax chain, the drafter's argmax chain after the
    prompt and the target's first token, and the set of outputs each engine gave."""

    target: tuple[int, ...]
    drafter: tuple[int, ...]
    control: frozenset[tuple[int, ...]]
    speculative: frozenset[tuple[int, ...]]
    seeds: int


def point_mass(models: IRSet, drafter: str = "independent", *, tokens: int = 3,
               seeds: int = 20) -> PointMass:
    """Sample with ``top_k=1`` from the control and from a draft-model pipeline (no prefix
    caching), ``seeds`` seeds each."""
    from ..vllm.models import build_models

    hf = build_models()
    point = Sampling(top_k=1)
    drawn = list(range(seeds))
    with EngineProcess(EngineConfig(), models.target) as control:
        plain = frozenset(control.generate(PROMPT, tokens, point, drawn))
    config = EngineConfig("draft", str(models.drafter(drafter)), drafter, 2,
                          prefix_caching=False)
    with EngineProcess(config, models.target) as engine:
        spec = frozenset(engine.generate(PROMPT, tokens, point, drawn))
    target = greedy_chain(hf.target, tokens)
    after = greedy_chain(hf.drafter(drafter), tokens - 1, PROMPT + target[:1])
    return PointMass(target, after, plain, spec, seeds)


@dataclass(frozen=True)
class CrashRate:
    """`crash_rate`'s outcome: requests sent, requests that raised, and one message."""

    label: str
    requests: int
    crashes: int
    message: str


def crash_rate(models: IRSet, *, prefix_caching: bool | None, requests: int = 200,
               k: int = 2, sampling: Sampling | None = None) -> CrashRate:
    """Send ``requests`` seeded requests (seeds 1..N, 3 tokens) to a draft-model pipeline (the
    near drafter), starting a fresh one after each crash."""
    sampling = sampling or Sampling()
    config = EngineConfig("draft", str(models.near), "near", k, prefix_caching=prefix_caching)
    todo = list(range(1, requests + 1))
    crashes, message = 0, ""
    while todo:
        with EngineProcess(config, models.target) as engine:
            while todo:
                seed = todo.pop(0)
                try:
                    engine.generate(PROMPT, 3, sampling, [seed])
                except EngineCrashError as error:
                    crashes += 1
                    message = message or str(error).split(" raised ", 1)[-1]
                    break
    return CrashRate(f"{config.label} / {sampling.label}", requests, crashes, message)


def logit_gap(models: IRSet, properties: dict[str, Any] | None = None) -> float:
    """``max |logit - reference|`` of the converted target after `PROMPT`, compiled with
    ``properties`` (default `F32`; ``{}``: the CPU plugin's defaults)."""
    import openvino as ov

    from ..vllm.models import logit_rows

    props = dict(F32) if properties is None else properties
    model = ov.Core().compile_model(str(models.target / "openvino_model.xml"), "CPU", props)
    ids = np.array([PROMPT], dtype=np.int64)
    out = model.create_infer_request().infer({
        "input_ids": ids, "attention_mask": np.ones_like(ids),
        "position_ids": np.arange(len(PROMPT))[None], "beam_idx": np.array([0], np.int32)})
    row = np.asarray(out[model.outputs[0]][0, -1], dtype=np.float64)
    reference = logit_rows(models.hf_target, [PROMPT])[0]
    return float(np.abs(row - reference).max())
