"""Timelines (`dsi_ref.commands.gantt`, ``dsi-ref timeline``): rows, text, PNG, command line."""

from __future__ import annotations

from fractions import Fraction as F
from pathlib import Path

import pytest

from dsi_ref import InvalidParameterError, Latency
from dsi_ref.audit.suite import default_suite
from dsi_ref.cli import main
from dsi_ref.commands.args import FIGURE_SUFFIXES
from dsi_ref.commands.gantt import (
    KIND_STYLE,
    compare_runs,
    plot_timelines,
    timeline_rows,
    timeline_text,
)
from dsi_ref.commands.timeline import MAX_TOKENS

PAIR = next(p for p in default_suite() if p.name == "bigram")


def test_each_decoder_gets_its_resources_as_rows_drafter_first_committer_last() -> None:
    runs = compare_runs(PAIR.target, PAIR.drafter, (), 8, 0, lookahead=1, sp_degree=2,
                        latency=Latency(drafter=F(1, 4)))
    assert timeline_rows(runs["non-SI"]) == ["target", "committer"]
    assert timeline_rows(runs["SI"]) == ["drafter", "target", "committer"]
    rows = timeline_rows(runs["DSI"])
    assert rows[0] == "drafter" and rows[-1] == "committer"
    assert [r for r in rows if r.startswith("target-")] == ["target-0", "target-1"]


def test_the_three_runs_share_model_and_seed_and_every_span_kind_has_a_colour() -> None:
    runs = compare_runs(PAIR.target, PAIR.drafter, (), 8, 0, lookahead=1, sp_degree=2,
                        latency=Latency(drafter=F(1, 4)))
    assert all(len(r.tokens) == 8 for r in runs.values())
    kinds = {e.kind for r in runs.values() for e in r.trace} - {"commit"}
    assert kinds <= set(KIND_STYLE)
    # this run shows every kind: drafts, verified and frontier forwards, preemption, waiting
    assert {e.kind for e in runs["DSI"].trace} >= set(KIND_STYLE)


def test_timeline_text_lists_every_commit_with_its_token() -> None:
    run = compare_runs(PAIR.target, PAIR.drafter, (), 5, 1)["DSI"]
    text = timeline_text(run, "DSI")
    for position, token in enumerate(run.tokens):
        assert f"commit position {position} = {token}" in text
    assert text.splitlines()[0] == f"DSI: tokens {run.tokens}, time {run.time}"


def test_plot_timelines_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    runs = compare_runs(PAIR.target, PAIR.drafter, (), 6, 0, lookahead=2, sp_degree=3)
    path = plot_timelines(runs, tmp_path / "sub" / "t.png", title="test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


def test_timeline_command_writes_the_png_and_prints_the_runs(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "timeline.png"
    assert main(["timeline", "--model", "zeros", "--tokens", "4", "--seed", "2",
                 "--sp-degree", "2", "--drafter-cost", "1/2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert out.exists() and f"wrote {out}" in printed
    assert "non-SI: tokens" in printed and "DSI: tokens" in printed


def test_timeline_command_text_mode_needs_no_matplotlib(capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    assert main(["timeline", "--tokens", "3", "--no-plot", "--text"]) == 0
    printed = capsys.readouterr().out
    assert "commit position 0 =" in printed and "wrote" not in printed


def test_timeline_command_rejects_a_non_positive_cost(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    with pytest.raises(SystemExit):
        main(["timeline", "--drafter-cost", "0", "--no-plot"])
    assert "must be > 0" in capsys.readouterr().err


@pytest.mark.parametrize(("suffix", "magic"), [(".pdf", b"%PDF"), (".svg", b"<?xml")])
def test_plot_timelines_writes_every_supported_format(tmp_path: Path, suffix: str,
                                                      magic: bytes) -> None:
    pytest.importorskip("matplotlib")
    runs = compare_runs(PAIR.target, PAIR.drafter, (), 3, 0)
    assert suffix in FIGURE_SUFFIXES
    assert plot_timelines(runs, tmp_path / f"t{suffix}").read_bytes().startswith(magic)


def test_plot_timelines_refuses_another_format_before_drawing(tmp_path: Path) -> None:
    """It was matplotlib's ``ValueError: Format 'txt' is not supported`` after the runs."""
    runs = compare_runs(PAIR.target, PAIR.drafter, (), 3, 0)
    with pytest.raises(InvalidParameterError, match=r"\.png, \.pdf, \.svg; got '\.txt'"):
        plot_timelines(runs, tmp_path / "t.txt")
    assert not list(tmp_path.iterdir())


def test_the_longest_timeline_is_accepted_and_one_more_token_is_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["timeline", "--tokens", str(MAX_TOKENS), "--no-plot"]) == 0
    assert f"N={MAX_TOKENS}" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        main(["timeline", "--tokens", str(MAX_TOKENS + 1), "--no-plot"])
    assert info.value.code == 2
    assert f"expected an int <= {MAX_TOKENS}" in capsys.readouterr().err
