"""docs/engine-findings.md against its generator, benchmarks/engine_findings.py (issue #16).

The page keeps one section per audited transformers release (benchmarks/findings/). The fast
rows (every greedy cell of the HF candidate-generator matrix, universal SD's white-box checks,
the harness's two greedy engines) are recomputed here on the installed release and must be
verbatim in that release's section: each is a seeded audit or an exact computation, so the same
code gives the same line. The sampled rows come from the release's last full run; its section
must have one for every sampled cell of the current matrix, and the reproducer's output with and
without the fix. The page is the composition of the stored sections. The power column of every
sampled row, in every release's section, is recomputed here without sampling: the power the
current code states for the test that ran (its sample size, α and ε against the exact reference
law), as a full run or ``--restate-power`` writes it; a restated section is a fixed point of the
restatement (its powers and the provenance sentence that counts the rows below target).
"""

from __future__ import annotations

import importlib.util
import os
import re
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
    _skip_if_unaudited()
    return GEN.compute(fast=True)


@pytest.mark.statistical(alpha=0, reason="compares seeded audits with the page that the same "
                         "code wrote from the same seeds: a line matches whatever the verdict")
def test_the_fast_rows_are_on_the_page_verbatim(fast: object) -> None:
    page = _installed_section().splitlines()
    rows = [r.markdown() for r in [*fast.greedy, *fast.harness]]  # type: ignore[attr-defined]
    lines = [*rows, *fast.usd_white]  # type: ignore[attr-defined]
    assert len(lines) == 8 + 2 + 6
    missing = [line for line in lines if line not in page]
    assert not missing, (f"the transformers {GEN.VERSION} section of docs/engine-findings.md "
                         "is stale: run benchmarks/engine_findings.py --write\n"
                         + "\n".join(missing))


#: The installed releases nobody has audited, as `python3 run.py test --latest` names them (and
#: says so in one line each): their section is missing by design there, so those tests skip.
UNAUDITED = set(filter(None, os.environ.get("DSI_REF_UNAUDITED", "").split(",")))


def _skip_if_unaudited() -> None:
    if "transformers" in UNAUDITED and not GEN.section_path(GEN.VERSION).exists():
        pytest.skip(f"transformers {GEN.VERSION} has no findings section (a drift run: run.py "
                    "named it UNAUDITED)")


def _installed_section() -> str:
    """The installed release's section, as stored and as on the page."""
    _skip_if_unaudited()
    path = GEN.section_path(GEN.VERSION)
    assert path.exists(), (f"no engine findings for transformers {GEN.VERSION}: run "
                           "benchmarks/engine_findings.py --write with it installed")
    text = path.read_text().rstrip("\n")
    assert text in GEN.PAGE.read_text(), "the page is stale: run engine_findings.py --compose"
    return text


def test_the_page_is_the_composition_of_the_stored_sections() -> None:
    assert GEN.PAGE.read_text() == GEN.compose()
    versions = [v for v, _ in GEN.stored_sections()]
    assert len(versions) >= 2
    _skip_if_unaudited()
    assert GEN.VERSION in versions


def test_the_installed_section_covers_every_sampled_cell_and_every_generator() -> None:
    from dsi_ref.backends.hf.generators import CELLS, GENERATORS, NOT_DRIVEN

    text = _installed_section()
    assert f"transformers {GEN.VERSION}, torch " in text
    for cell in CELLS:
        assert f"| {GEN.VERSION} | {cell.name} | **" in text, (
            f"no verdict for {cell.name}: rerun --write")
    for generator in GENERATORS:
        assert generator in text or generator in NOT_DRIVEN
    page = GEN.PAGE.read_text()
    for generator, why in NOT_DRIVEN.items():
        assert f"| `{generator}` | {why} |" in page
    assert "(not computed in this run" not in text  # the section is a full run's
    assert "(not run in this run" not in text         # with the reproducer's output
    assert text.count("observed :") == 2


def test_the_reproducer_on_the_page_is_the_script() -> None:
    script = (ROOT / "benchmarks" / "usd_vocab_order_repro.py").read_text().rstrip("\n")
    assert script in GEN.PAGE.read_text()


def test_the_power_column_is_the_power_of_the_test_that_ran() -> None:
    for version, text in GEN.stored_sections():
        sampled, first, full = GEN.rows_from_section(text)
        assert len(sampled) == sum(cell.do_sample for cell in GEN.CELLS)
        assert first and len(full) == len(GEN.HARNESS_FULL)
        stale = [f"{row.what}: {row.power}, recomputed {GEN.restated_power(row):.6f}"
                 for row in [*sampled, *first, *full]
                 if row.power != f"{GEN.restated_power(row):.6f}"]
        assert not stale, (f"transformers {version}: run benchmarks/engine_findings.py "
                           "--restate-power\n" + "\n".join(stale))
        restated = re.search(r"Power restated on (\d{4}-\d{2}-\d{2})", text)
        if restated is not None:
            assert GEN.restate_section(text, restated[1]) == text


def test_a_restated_power_below_target_is_said_on_the_page() -> None:
    page = GEN.PAGE.read_text()
    for version, text in GEN.stored_sections():
        rows = [r for rows in GEN.rows_from_section(text) for r in rows]
        below = [r for r in rows if GEN.below_target(r)]
        if below:  # only a restatement leaves rows below target: a full run samples enough
            assert re.search(rf"\. {len(below)} of these {len(rows)} rows now state less", text)
            assert f"transformers {version} on " in page and "**Power restated.**" in page


def test_the_installed_section_audits_ensemble_verification_where_the_release_has_it() -> None:
    from dsi_ref.audit.exact import total_variation
    from dsi_ref.backends.hf.ensemble import (
        ENSEMBLE_CELLS,
        ensemble_model_law,
        ensemble_supported,
    )
    from dsi_ref.backends.hf.generators import reference_law

    text = _installed_section()
    if not ensemble_supported() or "### Ensemble verification" not in text:
        release = tuple(int(x) for x in re.findall(r"\d+", GEN.VERSION)[:2])
        assert release < (5, 25), f"transformers {GEN.VERSION}: rerun --write"
        pytest.skip(f"transformers {GEN.VERSION}: no ensemble verification audited (before 5.25)")
    for cell in ENSEMBLE_CELLS:
        tv = total_variation(ensemble_model_law(cell), reference_law(cell))
        assert tv > 0, cell.name  # each cell has something to flag
        for what, expected in GEN.ENSEMBLE_AGAINST.values():
            row = re.search(rf"^\| {re.escape(GEN.VERSION)} \| {re.escape(cell.name)} \| "
                            rf"{re.escape(what)} \| (\w+) \| \*\*(\w+)\*\* \|.* \| "
                            rf"{re.escape(str(tv))} \(", text, re.M)
            assert row is not None, f"no {what} row for {cell.name}: rerun --write"
            assert row[1] == expected and row[2] == expected, row[0]


def test_the_installed_section_counts_the_candidates_accepted_in_every_cell() -> None:
    from dsi_ref.backends.hf.generators import CELLS

    text = _installed_section()
    if "### Candidates accepted" not in text:
        release = tuple(int(x) for x in re.findall(r"\d+", GEN.VERSION)[:2])
        assert release < (5, 25), f"transformers {GEN.VERSION}: rerun --write"
        pytest.skip(f"the transformers {GEN.VERSION} section was written before the matrix "
                    "counted the candidates accepted (since 5.25)")
    lines = GEN.table_lines(text, "Candidates accepted")
    for cell in CELLS:
        row = next((line for line in lines if line.startswith(f"| {GEN.VERSION} | {cell.name} |")),
                   None)
        assert row is not None, f"no acceptance for {cell.name}: rerun --write"
        drafted, accepted = (int(x) for x in row.split(" | ")[2:4])
        assert 0 <= accepted <= drafted
