"""The table: milliseconds from TTFT/TPOT pairs, user rows from TOML/CSV, ``dsi-ref table``."""

from __future__ import annotations

from fractions import Fraction as F
from pathlib import Path

import pytest

import dsi_ref as dr
from dsi_ref.cli import main
from dsi_ref.sim.paper_table import PHI3_MBPP, TableRow, compute_row, read_rows


def test_phi3_mbpp_row_is_the_public_row_of_the_paper_in_target_tpot_units() -> None:
    units = PHI3_MBPP.units
    assert units["c"] == F(33, 1002) and units["target_first"] == F(1803, 1002)
    assert units["drafter_first"] == F(573, 1002)
    assert PHI3_MBPP.acceptance_rate == F(94, 100) and PHI3_MBPP.sp_degree == 7
    assert PHI3_MBPP.lookahead == 5


def test_row_latencies_are_exact_expectations_scaled_by_the_target_tpot() -> None:
    result = compute_row(PHI3_MBPP, n_tokens=15, lookaheads=[2, 5], sp_degrees=[2, 7])
    u, tpot = PHI3_MBPP.units, 100.2
    common = {"c": u["c"], "a": F(94, 100), "n_tokens": 15, "target_first": u["target_first"],
              "drafter_first": u["drafter_first"]}
    assert result.nonsi_ms == pytest.approx(180.3 + 14 * 100.2, rel=1e-12)
    assert result.si_ms[5] == pytest.approx(
        tpot * float(dr.expected_latency("si", lookahead=5, **common)), rel=1e-12)  # type: ignore[arg-type]
    assert result.dsi_ms[(2, 7)] == pytest.approx(tpot * float(dr.expected_latency(
        "dsi", lookahead=2, model="event", sp_degree=7, **common)), rel=1e-12)  # type: ignore[arg-type]
    # more servers never hurt in this row; the best-vs-best speedup is reported per SP
    assert result.speedup("si", 2, 7) >= result.speedup("si", 2, 2)
    best = result.best(7)
    assert best["dsi_vs_si"] == pytest.approx(
        min(result.si_ms.values()) / min(result.dsi_ms[(k, 7)] for k in (2, 5)))


def test_rows_from_toml_and_csv_files(tmp_path: Path) -> None:
    toml = tmp_path / "rows.toml"
    toml.write_text('[[row]]\nname = "toy"\ntarget_ttft_ms = 50\ntarget_tpot_ms = 20.5\n'
                    'drafter_ttft_ms = 5\ndrafter_tpot_ms = 2\nacceptance_rate = 0.8\n'
                    'sp_degree = 4\n')
    csv = tmp_path / "rows.csv"
    csv.write_text("name,target_ttft_ms,target_tpot_ms,drafter_ttft_ms,drafter_tpot_ms,"
                   "acceptance_rate,lookahead\ntoy,50,20.5,5,2,0.8,3\n")
    (from_toml,), (from_csv,) = read_rows(toml), read_rows(csv)
    assert from_toml.target_tpot_ms == F(41, 2) == from_csv.target_tpot_ms
    assert from_toml.sp_degree == 4 and from_csv.lookahead == 3


@pytest.mark.parametrize(("text", "match"), [
    ("name,target_ttft_ms\ntoy,1\n", "missing fields"),
    ("name,target_ttft_ms,target_tpot_ms,drafter_ttft_ms,drafter_tpot_ms,acceptance_rate,gpu\n"
     "toy,1,1,1,1,0.5,h100\n", "unknown fields"),
    ("name,target_ttft_ms,target_tpot_ms,drafter_ttft_ms,drafter_tpot_ms,acceptance_rate\n"
     "toy,1,1,1,1,1.5\n", "acceptance_rate"),
    ("name,target_ttft_ms,target_tpot_ms,drafter_ttft_ms,drafter_tpot_ms,acceptance_rate\n"
     "toy,1,0,1,1,0.5\n", "target_tpot_ms must be > 0"),
])
def test_bad_rows_raise_named_errors(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "rows.csv"
    path.write_text(text)
    with pytest.raises(dr.InvalidParameterError, match=match):
        read_rows(path)


def test_table_command_prints_speedups_and_writes_csv_and_plot(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = tmp_path / "rows.toml"
    rows.write_text('[[row]]\nname = "toy"\ntarget_ttft_ms = 50\ntarget_tpot_ms = 20\n'
                    'drafter_ttft_ms = 5\ndrafter_tpot_ms = 2\nacceptance_rate = 0.8\n')
    assert main(["table", "--rows", str(rows), "--n-tokens", "12", "--lookaheads", "1-3",
                 "--sp-degrees", "2,7", "--out", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "Phi-3-medium / Phi-3-mini, MBPP" in out and "toy" in out and "DSI/SI" in out
    lines = (tmp_path / "table.csv").read_text().splitlines()
    assert len(lines) == 1 + 2 * 3 * 2
    assert (tmp_path / "table.png").stat().st_size > 10_000


def test_table_row_validation_names_the_row() -> None:
    with pytest.raises(dr.InvalidParameterError, match="bad row: sp_degree"):
        TableRow("bad row", F(1), F(1), F(1), F(1), F(1, 2), sp_degree=0)


@pytest.mark.parametrize("argv", [["heatmap", "--jobs", "0"], ["heatmap", "--ndim", "x"],
                                  ["table", "--n-tokens", "-3"], ["table", "--lookaheads", "a-b"]])
def test_commands_reject_bad_numbers_with_a_usage_error(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
