"""A user's vLLM configuration as an `EngineUnderTest`: ``dsi-ref audit-engine --vllm``.

`vllm_engine` starts one engine (`EngineProcess`) for a speculative configuration on the tiny
checkpoints of `dsi_ref.backends.vllm.models` or on a local checkpoint folder the user names,
and returns the engine under test (batched sampler, reference law from the target's float64
logits with the request's sampling settings) together with the process, which the caller
closes. Bad input is a one-line named error: a folder that does not exist or holds no causal
LM (`ModelDirectoryError`), a drafter with another vocabulary (`VocabularyMismatchError`), a
method or option vLLM refuses (`EngineOptionError`), no vLLM in the environment
(`EngineEnvironmentError`, with the command that builds it), a law too large to audit
(`InvalidParameterError`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...base.errors import EngineOptionError
from ..harness import EngineUnderTest
from .engine import EngineConfig, EngineProcess
from .matrix import MAX_NEW_TOKENS, PROMPT, batched
from .models import build_models, load_config
from .sampling import Sampling, reference_law

__all__ = ["vllm_engine"]


def vllm_engine(*, model: str | Path | None = None, drafter: str | Path | None = None,
                method: str | None = "draft_model", k: int = 2,
                draft_sample_method: str = "greedy", expand: str = "stock",
                sampling: Sampling | None = None, prompt: Sequence[int] = PROMPT,
                max_new_tokens: int = MAX_NEW_TOKENS) -> tuple[EngineUnderTest, EngineProcess]:
    """Start the engine and describe it for `dsi_ref.backends.harness.audit_engine`.

    ``model=None`` is the tiny target; ``drafter=None`` is its near drafter for
    ``draft_model`` and its EAGLE head for ``eagle`` (only with the tiny target). ``method=None``
    audits vLLM without speculation. ``expand`` installs one of the CPU expand shims of
    `dsi_ref.backends.vllm.patches` (``"stock"``: vLLM as released).
    """
    sampling = sampling or Sampling()
    if model is not None:
        load_config(model)  # a folder that does not exist or holds no causal LM: say so first
    tiny = build_models() if model is None or drafter is None else None
    target = Path(model) if model is not None else tiny.target  # type: ignore[union-attr]
    if drafter is None and method in {"draft_model", "eagle"}:
        if model is not None:
            raise EngineOptionError(f"method {method!r} on your model needs --draft DIR")
        assert tiny is not None
        drafter = tiny.near if method == "draft_model" else tiny.eagle
    config = EngineConfig(method, str(drafter) if drafter else None,
                          Path(drafter).name if drafter else "", k,
                          draft_sample_method=draft_sample_method, expand=expand)
    config.check(target)
    law = reference_law(target, prompt, max_new_tokens, sampling)
    process = EngineProcess(config, target).__enter__()
    prompt = tuple(int(t) for t in prompt)

    def sample(seed: int) -> tuple[int, ...]:
        return process.generate(prompt, max_new_tokens, sampling, [seed])[0]

    reproducible = not (draft_sample_method == "probabilistic" or method == "suffix")
    why = "" if reproducible else ("probabilistic drafts draw unseeded noise"
                                   if method != "suffix" else
                                   "suffix decoding drafts from a cache of earlier outputs")
    name = f"vLLM {process.version} {config.label} [{expand}] / {sampling.label}"
    engine = EngineUnderTest(sample, None, prompt, max_new_tokens, sampling.greedy, name,
                             reproducible=reproducible, why_not_reproducible=why,
                             sample_map=batched(process, sampling, lambda n: None, prompt,
                                                 max_new_tokens), law=law)
    return engine, process
