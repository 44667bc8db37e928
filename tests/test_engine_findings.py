"""docs/engine-findings.md against its generator, benchmarks/engine_findings.py (issue #16).

The fast rows (every greedy cell of the HF candidate-generator matrix, universal SD's white-box
checks, the harness's two greedy engines) are recomputed here and must be on the page verbatim:
each is a seeded audit or an exact computation, so the same code gives the same line. The
sampled rows come from the last full run; the page must have one for every sampled cell of the
current matrix, and name the installed transformers version.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.torch


def _load() -> ModuleType:
    path = ROOT / "benchmarks" / "engine_findings.py"
    spec = importlib.util.spec_from_file_location("engine_findings", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["engine_findings"] = module
    spec.loader.exec_module(module)
    return module


GEN = _load()


@pytest.fixture(scope="module")
def fast() -> object:
    return GEN.compute(fast=True)


@pytest.mark.statistical(alpha=0, reason="compares seeded audits with the page that the same "
                         "code wrote from the same seeds: a line matches whatever the verdict")
def test_the_fast_rows_are_on_the_page_verbatim(fast: object) -> None:
    page = GEN.PAGE.read_text().splitlines()
    rows = [r.markdown() for r in [*fast.greedy, *fast.harness]]  # type: ignore[attr-defined]
    lines = [*rows, *fast.usd_white]  # type: ignore[attr-defined]
    assert len(lines) == 8 + 2 + 6
    missing = [line for line in lines if line not in page]
    assert not missing, ("docs/engine-findings.md is stale: run "
                         "benchmarks/engine_findings.py --write\n" + "\n".join(missing))


def test_the_page_covers_every_sampled_cell_and_every_generator() -> None:
    import transformers

    from dsi_ref.backends.hf_generators import CELLS, GENERATORS, NOT_DRIVEN

    text = GEN.PAGE.read_text()
    assert f"transformers {transformers.__version__}" in text
    for cell in CELLS:
        assert f"| {cell.name} | **" in text, f"no verdict for {cell.name}: rerun --write"
    for generator in GENERATORS:
        assert generator in text
    for why in NOT_DRIVEN.values():
        assert why in text
    assert "(not computed in this run" not in text  # the page is a full run's


def test_the_reproducer_on_the_page_is_the_script() -> None:
    script = (ROOT / "benchmarks" / "usd_vocab_order_repro.py").read_text().rstrip("\n")
    assert script in GEN.PAGE.read_text()
