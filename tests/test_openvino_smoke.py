"""The OpenVINO GenAI smoke (CI: ``python3 run.py test --openvino tests/test_openvino_smoke.py``):
``LLMPipeline`` without speculation and with prompt lookup is lossless at stated power, and with
a draft model and temperature sampling it is flagged lossy.

Each audit draws the sample size that gives its stated power (`audit_cell`). The negative
control is sized for power ``1 - POLICY_MISS`` against every law at TV >= 0.3 from the target's:
the draft model's law is about 0.4 away (docs/engine-findings.md; the test checks the empirical
TV), so a miss has probability below ``POLICY_MISS`` while that holds."""

from __future__ import annotations

import pytest

pytest.importorskip("openvino_genai")
pytest.importorskip("optimum.intel")

from dsi_ref.audit.statistical import POLICY_ALPHA, POLICY_MISS
from dsi_ref.backends.openvino.engine import EngineProcess
from dsi_ref.backends.openvino.matrix import QUICK_CELLS, audit_cell, expected, resolved
from dsi_ref.backends.openvino.models import build_ir

pytestmark = [pytest.mark.openvino,
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::ResourceWarning")]

CONTROL, LOOKUP, DRAFT = QUICK_CELLS


def _run(cell, **kw):  # type: ignore[no-untyped-def]
    models = build_ir()
    with EngineProcess(resolved(cell.engine, models), models.target) as engine:
        return audit_cell(cell, engine, models=models, **kw)


@pytest.mark.statistical(alpha=POLICY_ALPHA)
@pytest.mark.parametrize("cell", [CONTROL, LOOKUP], ids=["control", "prompt-lookup"])
def test_the_control_and_prompt_lookup_are_lossless(cell) -> None:  # type: ignore[no-untyped-def]
    assert expected(cell)[0] == "lossless"
    report = _run(cell)
    assert report.verdict == "lossless", report
    assert report.power >= 0.99


@pytest.mark.statistical(alpha=POLICY_MISS)  # a negative control: its miss rate (docstring)
def test_a_draft_model_with_temperature_sampling_is_lossy() -> None:
    assert expected(DRAFT)[0] == "lossy"
    report = _run(DRAFT, epsilon=0.3, power=1 - POLICY_MISS)
    assert report.verdict == "lossy", report
    assert report.power >= 1 - POLICY_MISS
    assert report.empirical_tv >= 0.3, report  # the deviation the power is stated against
