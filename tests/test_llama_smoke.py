"""The llama.cpp smoke (marker ``llama``; what CI runs after the default suite, in .venv-llama):
the non-speculative control, one lossless speculative path, and ``llama-speculative`` flagged
lossy, each a statistical audit against the target's exact law.

* the binding without speculation and with prompt lookup: lossless at false-alarm rate
  `POLICY_ALPHA`, power 0.99 against TV >= 0.2; prompt lookup also gives plain sampling's tokens
  on at least 99 % of the seeds (it samples the target at every position);
* ``llama-speculative``: a negative control sized for power ``1 - POLICY_MISS`` against the law its
  mechanism predicts (`dsi_ref.backends.llama_cpp.whitebox`), and that law itself audited
  (lossless at `POLICY_ALPHA`): the example follows it.

About a minute on 2 cores (the C++ example runs one process per sample).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytest.importorskip("llama_cpp")
pytest.importorskip("gguf")

from dsi_ref.audit.statistical import (
    POLICY_ALPHA,
    POLICY_MISS,
    Alternative,
    required_samples,
    statistical_audit,
)
from dsi_ref.backends.llama_cpp import models as m
from dsi_ref.backends.llama_cpp.cpp import CppPath, cpp_sampler
from dsi_ref.backends.llama_cpp.matrix import (
    N_TOKENS,
    PROMPT,
    Cell,
    audit_cell,
    prompt_ids,
)
from dsi_ref.backends.llama_cpp.sampling import SAMPLERS, coarsen, reference_law
from dsi_ref.backends.llama_cpp.whitebox import speculative_example_law

pytestmark = pytest.mark.llama
PLAIN = SAMPLERS[0]
Law = dict[tuple[int, ...], float]
#: llama-speculative's sampler (coarsened), the target's law, the law its mechanism predicts.
Speculative = tuple[Callable[[int], tuple[int, ...]], Law, Law]


@pytest.fixture(scope="module")
def controls() -> dict[tuple[str, str], dict[int, tuple[int, ...]]]:
    return {}


@pytest.mark.statistical(alpha=POLICY_ALPHA)
def test_the_control_is_lossless(controls: dict[tuple[str, str], dict[int, tuple[int, ...]]]
                                 ) -> None:
    result = audit_cell(Cell("binding, no speculation", PLAIN), controls=controls)
    assert result.report.verdict == "lossless", result.report
    assert result.report.power >= 0.99


@pytest.mark.statistical(alpha=POLICY_ALPHA)
def test_prompt_lookup_is_lossless_and_is_plain_sampling_per_seed(
        controls: dict[tuple[str, str], dict[int, tuple[int, ...]]]) -> None:
    if ("binding, no speculation", PLAIN.name) not in controls:
        audit_cell(Cell("binding, no speculation", PLAIN), controls=controls)
    result = audit_cell(Cell("binding, prompt lookup", PLAIN, 2), controls=controls)
    assert result.report.verdict == "lossless", result.report
    assert result.agreement is not None and result.agreement >= 0.99, result.agreement


@pytest.fixture(scope="module")
def speculative() -> Speculative:
    target = m.gguf_path(m.target_model())
    drafter = m.gguf_path(m.near_drafter())
    raw = cpp_sampler(target, CppPath("speculative", 2, drafter), PROMPT, N_TOKENS, PLAIN)

    def sample(seed: int) -> tuple[int, ...]:
        return coarsen(raw(seed), N_TOKENS)

    law = reference_law(m.target_model(), prompt_ids(), N_TOKENS, PLAIN).law
    predicted, _ = speculative_example_law(m.target_model(), m.near_drafter(), prompt_ids(),
                                           N_TOKENS, PLAIN, 2)
    return sample, law, predicted


@pytest.mark.statistical(alpha=POLICY_MISS)   # a miss, at power 1 - POLICY_MISS
def test_llama_speculative_is_flagged_lossy(speculative: Speculative) -> None:
    sample, law, predicted = speculative
    alternative = Alternative.of_law(predicted, "llama-speculative's predicted law")
    n = required_samples(law, alternative, alpha=POLICY_ALPHA, power=1 - POLICY_MISS)
    assert n is not None
    report = statistical_audit(sample, law, n, alternative=alternative, alpha=POLICY_ALPHA,
                               power=1 - POLICY_MISS)
    assert report.verdict == "lossy", report


@pytest.mark.statistical(alpha=POLICY_ALPHA)
def test_llama_speculative_follows_its_predicted_law(speculative: Speculative) -> None:
    sample, _, predicted = speculative
    report = statistical_audit(sample, predicted, alternative=Alternative.tv(0.2),
                               alpha=POLICY_ALPHA, power=0.99, seed=1)
    assert report.verdict == "lossless", report
