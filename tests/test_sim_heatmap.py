"""The heatmap: the official grid, values equal to the scalar exact expectations, the paper's
qualitative findings, the event model's finite servers, and the ``dsi-ref heatmap`` command."""

from __future__ import annotations

import json
import time
from fractions import Fraction as F
from pathlib import Path

import numpy as np
import pytest

import dsi_ref as dr
from dsi_ref.cli import main
from dsi_ref.sim.grid import HeatmapSpec, compute_heatmap, grid_axes, losing, summarize


def test_grid_axes_are_the_official_linspace_with_its_clipping() -> None:
    spec = HeatmapSpec()
    cs, accs, ks = grid_axes(spec)
    c_off = np.linspace(0, 1, 21)
    c_off = np.where(c_off <= 0.01, 0.01, c_off)
    a_off = np.clip(np.linspace(0, 1, 21), 0.01, 0.99)
    assert np.allclose([float(x) for x in cs], c_off, rtol=0, atol=1e-15)
    assert np.allclose([float(x) for x in accs], a_off, rtol=0, atol=1e-15)
    assert ks == list(range(1, 21))


def test_grid_cells_equal_the_scalar_exact_expectations() -> None:
    h = compute_heatmap(HeatmapSpec(ndim=4, n_tokens=40, sp_degree=3))
    for i, j, kk in [(0, 0, 3), (2, 1, 1), (4, 4, 2), (1, 3, 3)]:
        c, a, k = h.c[i], h.a[j], h.lookaheads[kk]
        si = dr.expected_latency("si", c=c, a=a, lookahead=k, n_tokens=40)
        assert h.si[i, j, kk] == pytest.approx(float(si), rel=1e-12)
        if dr.sim.required_servers(c, k) <= 3:
            dsi = dr.expected_latency("dsi", c=c, a=a, lookahead=k, n_tokens=40)
            assert h.dsi[i, j, kk] == pytest.approx(float(dsi), rel=1e-12)
        else:
            assert np.isnan(h.dsi[i, j, kk])


def test_paper_heatmap_reproduces_the_papers_qualitative_findings() -> None:
    """Full grid (ndim = 20, N = 1000, SP = 7, the official quirks): SI is slower than non-SI
    in a large region, and DSI is never slower than SI or non-SI."""
    summary = summarize(compute_heatmap(HeatmapSpec()))
    panels = summary["panels"]
    assert panels["si_vs_nonsi"]["cells_below_1"] > 0.3 * summary["cells"]
    for name in ("dsi_vs_si", "dsi_vs_nonsi", "dsi_vs_baseline"):
        assert panels[name]["cells_below_1"] == 0
        assert panels[name]["min"] > 1 - 1e-9


def test_fair_si_lookahead_set_exposes_cells_where_paper_dsi_loses_to_si() -> None:
    """With SI at its own best k, the server check that restricts DSI's k at c = 0.01 costs
    DSI the cells the official run hides (the quirk flatters DSI)."""
    summary = summarize(compute_heatmap(HeatmapSpec(si_lookahead_set="fair")))
    below = summary["panels"]["dsi_vs_si"]["below_1"]
    assert below and all(c == pytest.approx(0.01) for c, _, _ in below)


def test_event_heatmap_best_cells_are_minima_of_exact_event_expectations() -> None:
    h = compute_heatmap(HeatmapSpec(ndim=3, n_tokens=12, sp_degree=2, model="event",
                                    si_lookahead_set="fair"))
    for i, j in [(0, 0), (1, 2), (3, 3)]:
        values = [float(dr.expected_latency("dsi", c=h.c[i], a=h.a[j], lookahead=k, n_tokens=12,
                                            model="event", sp_degree=2)) for k in h.lookaheads]
        assert h.best["dsi"][i, j] == pytest.approx(min(values), rel=1e-12)


def test_event_model_with_one_server_ties_nonsi_everywhere_and_never_counts_as_a_loss() -> None:
    h = compute_heatmap(HeatmapSpec(ndim=3, n_tokens=10, sp_degree=1, model="event"))
    speedup = h.panel("dsi_vs_nonsi")
    assert np.allclose(speedup, 1.0, rtol=1e-12) and not losing(speedup).any()


def test_heatmap_command_writes_csv_summary_and_png(tmp_path: Path) -> None:
    assert main(["heatmap", "--ndim", "4", "--n-tokens", "30", "--out", str(tmp_path),
                 "--no-progress"]) == 0
    label = "paper_sp7_quirks_ndim4"
    assert (tmp_path / f"heatmap_{label}.png").stat().st_size > 10_000
    rows = (tmp_path / f"heatmap_{label}.csv").read_text().splitlines()
    assert len(rows) == 1 + 5 * 5
    summary = json.loads((tmp_path / f"heatmap_{label}_summary.json").read_text())
    assert set(summary["panels"]) == {"si_vs_nonsi", "dsi_vs_si", "dsi_vs_nonsi",
                                      "dsi_vs_baseline"}


@pytest.mark.parametrize(("flags", "lookahead_set"), [
    ([], "quirks"), (["--si-lookahead-set", "fair"], "fair"), (["--fair"], "fair"),
    (["--model", "paper", "--paper-quirks"], "quirks"),
    (["--si-lookahead-set", "quirks"], "quirks"),
])
def test_heatmap_command_names_sis_lookahead_set_by_its_flag_or_a_shortcut(
        tmp_path: Path, flags: list[str], lookahead_set: str) -> None:
    assert main(["heatmap", "--ndim", "2", "--n-tokens", "6", "--out", str(tmp_path),
                 "--no-progress", "--no-plot", *flags]) == 0
    label = f"paper_sp7_{lookahead_set}_ndim2"
    summary = json.loads((tmp_path / f"heatmap_{label}_summary.json").read_text())
    assert summary["spec"]["si_lookahead_set"] == lookahead_set
    assert "si_lookahead" in (tmp_path / f"heatmap_{label}.csv").read_text().splitlines()[0]
    with pytest.raises(SystemExit):     # one policy at a time
        main(["heatmap", "--fair", "--si-lookahead-set", "quirks", "--out", str(tmp_path)])


def test_heatmap_command_sweeps_sp_for_the_event_model(tmp_path: Path) -> None:
    assert main(["heatmap", "--model", "event", "--ndim", "2", "--n-tokens", "8",
                 "--sp-degree", "1", "3", "--out", str(tmp_path), "--no-progress"]) == 0
    rows = json.loads((tmp_path / "heatmap_event_sweep_fair_ndim2_n8.json").read_text())
    assert [r["sp_degree"] for r in rows] == [1, 3]
    assert rows[0]["median_dsi_vs_si"] <= rows[1]["median_dsi_vs_si"]
    assert (tmp_path / "heatmap_event_sweep_fair_ndim2_n8.png").exists()


@pytest.mark.slow
def test_full_paper_heatmap_takes_at_most_five_seconds() -> None:
    """Issue 5's performance target: 21 × 21 × 20 configurations, N = 1000, exact SI and DSI
    (the official simulator needed about 70 s with 5 Monte Carlo repeats)."""
    compute_heatmap(HeatmapSpec(ndim=3, n_tokens=10))  # warm-up (imports, caches)
    start = time.perf_counter()
    compute_heatmap(HeatmapSpec())
    assert time.perf_counter() - start <= 5.0


def test_bad_heatmap_spec_raises_named_errors() -> None:
    with pytest.raises(dr.InvalidParameterError, match="ndim"):
        HeatmapSpec(ndim=0)
    with pytest.raises(dr.InvalidParameterError, match="si_lookahead_set"):
        HeatmapSpec(si_lookahead_set="best")  # type: ignore[arg-type]
    with pytest.raises(dr.InvalidParameterError, match="model"):
        HeatmapSpec(model="exact")  # type: ignore[arg-type]
    assert F(1, 100) in grid_axes(HeatmapSpec(ndim=2))[0]


def test_paper_heatmap_with_one_server_keeps_only_lookaheads_with_k_c_at_least_one() -> None:
    h = compute_heatmap(HeatmapSpec(ndim=4, n_tokens=10, sp_degree=1))
    allowed = ~np.isnan(h.dsi[:, 0, :])
    assert allowed.tolist() == [[k * c >= 1 for k in h.lookaheads] for c in h.c]
