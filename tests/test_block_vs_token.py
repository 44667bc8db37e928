"""docs/block-vs-token.md against its generator, benchmarks/block_vs_token.py (issue #14, item 6).

The whole grid takes minutes, so the test recomputes a fast subset: two rows of ``a`` at the
page's shown drafter costs (every ``k = 1 … 20``, ``N = 1000``, ``SP = 7``), whose table rows
must appear verbatim in the committed page; the setting line too. It also checks the
generator's two shortcuts: block's laws from the weights equal the exact engine's for small
``k``, and the batched event-model programme equals ``expected_latency`` cell by cell, with
position and with window decisions; and the page's worked example (fixed-window block DSI
slower than token-level DSI) against the event model, which tests/test_acceptance_from_models.py
bridges to the token-level engine.
"""

from __future__ import annotations

import importlib.util
import sys
from fractions import Fraction as F
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import dsi_ref as dr
from dsi_ref.audit.acceptance import window_acceptance_law
from dsi_ref.sim import AcceptanceLaw
from dsi_ref.sim.grid import HeatmapSpec

ROOT = Path(__file__).resolve().parent.parent


def generator() -> ModuleType:
    path = ROOT / "benchmarks" / "block_vs_token.py"
    spec = importlib.util.spec_from_file_location("block_vs_token", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["block_vs_token"] = module
    spec.loader.exec_module(module)
    return module


GEN = generator()


def test_committed_rows_equal_the_generator_on_a_subset() -> None:
    """Rows ``a = 1/2`` and ``a = 3/4``: the acceptance table's rows verbatim, and the latency
    table's cells at ``c = 1/2`` (every ``k = 1 … 20``, ``N = 1000``, ``SP = 7``)."""
    page = GEN.PAGE.read_text().splitlines()
    text = "\n".join(page)
    assert "`HeatmapSpec(ndim=20)`" in text and "`N = 1000`, `SP = 7`" in text
    c = F(1, 2)
    assert c in GEN.SHOWN_C
    res = GEN.compute(HeatmapSpec(ndim=20, model="event"), c_values=[c], a_indices=[10, 15])
    assert res.a == [F(1, 2), F(3, 4)]
    for row in GEN.acceptance_rows(res):
        assert row in page, row
    latency_table = [line for line in page if line.count("|") >= 2 + 5 * len(GEN.SHOWN_C)]
    for j, a in enumerate(res.a):
        rows = [line for line in latency_table if line.startswith(f"| {GEN._f(a)} | ")]
        assert len(rows) == 1, rows
        cells = [cell.strip() for cell in rows[0].strip("|").split("|")][1:]
        at_c = cells[5 * GEN.SHOWN_C.index(c): 5 * GEN.SHOWN_C.index(c) + 5]
        assert " | ".join(at_c) == GEN.latency_cells(res, c, j)


@pytest.mark.parametrize("a", [F(1, 4), F(3, 5), F(19, 20)])
def test_block_laws_from_the_weights_equal_the_engine(a: F) -> None:
    target, drafter = GEN.mirrored_pair(a)
    laws = GEN.window_laws(a, 3)
    for k in (1, 2, 3):
        engine = AcceptanceLaw.from_mapping(window_acceptance_law(target, drafter, k, "block"), k)
        assert laws["block"][k - 1] == engine
        assert laws["token"][k - 1] == AcceptanceLaw.from_mapping(
            window_acceptance_law(target, drafter, k, "rejection"), k)


@pytest.mark.parametrize("decisions", ["position", "window"])
def test_batched_event_model_equals_expected_latency(decisions: str) -> None:
    for k in (2, 3):
        column = [GEN.window_laws(a, 3)[rule][k - 1] for a in (F(1, 5), F(7, 10))
                  for rule in GEN.RULES]
        batched = GEN.dsi_event_laws(F(1, 10), k, column, 200, 7, decisions)
        assert len(batched) == len(column) == 4
        for law, value in zip(column, batched, strict=True):
            direct = dr.expected_latency("dsi", c=0.1, acceptance=GEN.floats(law), lookahead=k,
                                         n_tokens=200, model="event", sp_degree=7,
                                         decisions=decisions)
            assert abs(value - direct) <= 1e-12 * direct


def test_the_pages_example_of_block_dsi_slower_than_token_level() -> None:
    """``p = (1/2, 1/2)``, ``q = (3/4, 1/4)``, ``N = 5``, ``k = 2``, ``SP = 2``: block DSI with
    fixed windows against rejection DSI at ``c = 1/3``, and block DSI above non-SI at ``c = 1``;
    the page quotes these values."""
    target = dr.TableLM.context_free((F(1, 2), F(1, 2)))
    drafter = dr.TableLM.context_free((F(3, 4), F(1, 4)))
    kw: dict[str, Any] = {"lookahead": 2, "n_tokens": 5, "model": "event", "sp_degree": 2}
    block = AcceptanceLaw.from_mapping(window_acceptance_law(target, drafter, 2, "block"), 2)
    token = AcceptanceLaw.from_mapping(window_acceptance_law(target, drafter, 2, "rejection"), 2)
    slow = dr.expected_latency("dsi", c=F(1, 3), acceptance=block, decisions="window", **kw)
    fast = dr.expected_latency("dsi", c=F(1, 3), acceptance=token, **kw)
    tie = dr.expected_latency("dsi", c=F(1), acceptance=block, decisions="window", **kw)
    assert (slow, fast, tie) == (F(2893, 768), F(871, 256), F(1735, 256))
    assert slow > fast and tie > 5
    text = GEN.PAGE.read_text()
    for value in (slow, fast, tie):
        assert isinstance(value, F)
        assert f"{value.numerator}/{value.denominator} ≈ {float(value):.3f}" in text


def test_ranges_are_runs_of_consecutive_grid_points() -> None:
    values = [F(i, 20) for i in range(1, 8)]
    mask = np.array([True, True, False, True, False, True, True])
    assert GEN._ranges(values, mask) == "0.05–0.1, 0.2, 0.3–0.35"
    assert GEN._ranges(values, np.zeros(7, dtype=bool)) == "—"


@pytest.mark.slow
def test_committed_where_row_equals_the_generator_at_one_c() -> None:
    """Table 3's row at ``c = 1/10`` (every ``a`` and ``k``: about 15 s): where fixed-window
    block DSI wins, where token-level DSI does, and the same-``k`` comparison."""
    res = GEN.compute(HeatmapSpec(ndim=20, model="event"), c_values=[F(1, 10)])
    assert GEN.where_row(res, 0) in GEN.PAGE.read_text().splitlines()
