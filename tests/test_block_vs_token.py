"""docs/block-vs-token.md against its generator, benchmarks/block_vs_token.py (issue #14, item 6).

The whole grid takes minutes, so the test recomputes a fast subset: two rows of ``a`` at the
page's shown drafter costs (every ``k = 1 … 20``, ``N = 1000``, ``SP = 7``), whose table rows
must appear verbatim in the committed page; the setting line too. It also checks the
generator's two shortcuts: block's laws from the weights equal the exact engine's for small
``k``, and the batched event-model programme equals ``expected_latency`` cell by cell.
"""

from __future__ import annotations

import importlib.util
import sys
from fractions import Fraction as F
from pathlib import Path
from types import ModuleType

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
    latency_table = [line for line in page if line.count("|") >= 2 + 4 * len(GEN.SHOWN_C)]
    for j, a in enumerate(res.a):
        rows = [line for line in latency_table if line.startswith(f"| {GEN._f(a)} | ")]
        assert len(rows) == 1, rows
        cells = [cell.strip() for cell in rows[0].strip("|").split("|")][1:]
        at_c = cells[4 * GEN.SHOWN_C.index(c): 4 * GEN.SHOWN_C.index(c) + 4]
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


def test_batched_event_model_equals_expected_latency() -> None:
    for k in (2, 3):
        column = [GEN.window_laws(a, 3)[rule][k - 1] for a in (F(1, 5), F(7, 10))
                  for rule in GEN.RULES]
        batched = GEN.dsi_event_laws(F(1, 10), k, column, 200, 7)
        assert len(batched) == len(column) == 4
        for law, value in zip(column, batched, strict=True):
            direct = dr.expected_latency("dsi", c=0.1, acceptance=GEN.floats(law), lookahead=k,
                                         n_tokens=200, model="event", sp_degree=7)
            assert abs(value - direct) <= 1e-12 * direct
