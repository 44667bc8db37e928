"""The paper's measurements on torch models (TTFT/TPOT, the two acceptance estimators) and
``dsi-ref bench`` end to end on tiny CPU models (its predictions are the simulator's, whose closed
forms the theory bridge tests check)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dsi_ref as dr  # noqa: E402
from dsi_ref.backends.engine.measure import (  # noqa: E402
    greedy_acceptance,
    measure_concurrency,
    measure_latency,
    measure_pair,
    random_prompts,
    sampling_acceptance,
)
from dsi_ref.backends.torch.model import TorchLM, build_pair  # noqa: E402
from dsi_ref.base.errors import BackendError  # noqa: E402
from dsi_ref.cli import main  # noqa: E402
from dsi_ref.sim.paper_table import read_rows  # noqa: E402

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module")
def pair() -> tuple[TorchLM, TorchLM]:
    return build_pair(seed=5)


def test_random_prompts_are_seeded_and_avoid_the_bos_token() -> None:
    prompts = random_prompts(11, 3, 5, seed=1)
    assert prompts == random_prompts(11, 3, 5, seed=1)
    assert all(len(p) == 5 and min(p) >= 1 and max(p) < 11 for p in prompts)
    with pytest.raises(BackendError, match="count >= 1"):
        random_prompts(11, 0, 5, seed=1)


def test_measure_latency_reports_positive_times_per_prompt(pair: tuple[TorchLM, TorchLM]) -> None:
    stats = measure_latency(pair[0], random_prompts(11, 2, 4, 0), new_tokens=4, warmup=1)
    assert stats.prompts == 2 and stats.new_tokens == 4
    assert stats.ttft_ms > 0 and stats.tpot_ms > 0
    assert stats.ttft_std_ms >= 0 and stats.tpot_std_ms >= 0
    with pytest.raises(BackendError, match="new_tokens must be >= 2"):
        measure_latency(pair[0], [(1,)], new_tokens=1)


def _greedy_by_hand(target: TorchLM, drafter: TorchLM, prompt: tuple[int, ...],
                    n: int) -> list[bool]:
    """Match indicators of the paper's protocol, one `probs` call at a time."""
    tokens: list[int] = []
    matches = []
    for _ in range(n):
        y = int(np.argmax(target.probs(prompt + tuple(tokens))))
        matches.append(int(np.argmax(drafter.probs(prompt + tuple(tokens)))) == y)
        tokens.append(y)
    return matches


def test_greedy_acceptance_is_the_moment_estimator_of_ended_match_runs() -> None:
    target, drafter = build_pair(seed=2)
    prompts = random_prompts(11, 3, 3, seed=3)
    estimate = greedy_acceptance(target, drafter, prompts, new_tokens=16)
    matches = mismatches = 0
    for prompt in prompts:
        run = 0
        for hit in _greedy_by_hand(target, drafter, prompt, 16):
            run, matches, mismatches = (run + 1, matches, mismatches) if hit \
                else (0, matches + run, mismatches + 1)
    assert (estimate.matches, estimate.mismatches, estimate.positions) == (matches, mismatches,
                                                                             48)
    assert matches > 0 and mismatches > 0   # both kinds of run end occur in this sample
    mean_run = matches / mismatches
    assert estimate.acceptance == pytest.approx(1 - 1 / (1 + mean_run), rel=1e-12)
    assert estimate.mean_run_length == pytest.approx(mean_run, rel=1e-12)


def test_greedy_acceptance_refuses_a_sample_without_a_mismatch() -> None:
    target = TorchLM("tiny-target", seed=1)
    twin = TorchLM("tiny-target", seed=1)        # the drafter is the target: every token matches
    with pytest.raises(BackendError, match="no mismatch"):
        greedy_acceptance(target, twin, random_prompts(11, 2, 3, 0), new_tokens=6)


def test_sampling_acceptance_averages_the_overlap_on_target_samples(
        pair: tuple[TorchLM, TorchLM]) -> None:
    target, drafter = pair
    prompts = random_prompts(11, 2, 3, seed=4)
    estimate = sampling_acceptance(target, drafter, prompts, new_tokens=6, seed=9)
    overlaps = []
    for i, prompt in enumerate(prompts):
        sample = dr.autoregressive(target, prompt, 6, dr.Sampler(9 + i)).tokens
        for j in range(len(sample)):
            context = prompt + sample[:j]
            overlaps.append(sum(min(p, q) for p, q in zip(target.probs(context),
                                                          drafter.probs(context), strict=True)))
    assert estimate.positions == len(overlaps)
    assert estimate.acceptance == pytest.approx(float(np.mean(overlaps)), abs=1e-12)
    assert 0 < estimate.acceptance < 1


def test_measure_pair_gives_a_table_row(pair: tuple[TorchLM, TorchLM]) -> None:
    row = measure_pair(*pair, random_prompts(11, 2, 3, 0), new_tokens=8, warmup=1)
    assert row.c == pytest.approx(row.drafter_tpot_ms / row.target_tpot_ms)
    fields = row.as_row()
    assert set(fields) == {"name", "target_ttft_ms", "target_tpot_ms", "drafter_ttft_ms",
                           "drafter_tpot_ms", "acceptance", "sampling_acceptance"}
    assert 0 < fields["sampling_acceptance"] < 1  # type: ignore[operator]


@pytest.mark.parametrize("server_devices", [None, "cpu,cpu:1"])
def test_bench_runs_end_to_end_and_writes_its_numbers(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str],
                                                      server_devices: str | None) -> None:
    out, row_file = tmp_path / "bench.json", tmp_path / "row.csv"
    extra = ["--server-devices", server_devices] if server_devices else []   # "cpu:1": a copy
    code = main(["bench", "--target", "tiny-target", "--drafter", "tiny-drafter", "--device",
                 "cpu", "--dtype", "fp64", "--new-tokens", "8", "--prompts", "2",
                 "--prompt-len", "3", "--lookahead", "2", "--sp-degree", "2",
                 "--verify", "rejection", "--json", str(out), "--table-row", str(row_file),
                 "--contention-forwards", "5", *extra])
    assert code == 0
    (row,) = read_rows(row_file)        # what `dsi-ref table --rows` reads
    assert row.sp_degree == 2 and 0 < row.acceptance_rate < 1 and row.target_tpot_ms > 0
    text = capsys.readouterr().out
    assert "dsi/si" in text and "orchestration overhead" in text
    data = json.loads(out.read_text())
    (result,) = data["results"]
    assert result["lookahead"] == 2 and result["sp_degree"] == 2
    assert all(t > 0 for times in result["times_s"].values() for t in times)
    assert set(result["measured_speedup"]) == {"dsi/si", "dsi/nonsi", "si/nonsi"}
    assert result["dsi_contended"]["target_forward_ms"] > 0
    if server_devices:       # servers on other devices: no shared-device prediction
        assert data["server_devices"] == ["cpu", "cpu:1"]
        assert data["concurrency"] is None and result["shared_device"] is None
    else:                    # the probe ran (SP = 2) and fed the shared-device prediction
        assert len(data["concurrency"]["target_ms"]) == 2
        assert len(data["concurrency"]["drafter_ms"]) == 3
        assert "one shared device" in text
        shared = result["shared_device"]
        assert shared["predicted_ms_per_token"] > 0
        assert shared["dsi/si"] * shared["measured/predicted dsi/si"] == \
            pytest.approx(result["measured_speedup"]["dsi/si"])


def test_measure_concurrency_times_every_load(pair: tuple[TorchLM, TorchLM]) -> None:
    probe = measure_concurrency(*pair, (1, 2, 3), 3, forwards=4)
    assert len(probe.target_ms) == 3 and len(probe.drafter_ms) == 4
    assert all(t > 0 for t in probe.target_ms + probe.drafter_ms)
    assert probe.parallelism[0] == pytest.approx(1.0)
    assert probe.parallelism[2] == pytest.approx(3 * probe.target_ms[0] / probe.target_ms[2])
    contention = probe.contention()      # what expected_latency(contention=...) takes
    assert contention.target[0] == pytest.approx(1.0)
    assert contention.drafter[0] == pytest.approx(1.0)
    assert contention.target_slowdown(2) == pytest.approx(probe.target_ms[1] / probe.target_ms[0])
    assert json.loads(json.dumps(probe.as_dict()))["forwards"] == 4
    with pytest.raises(BackendError, match=">= 1"):
        measure_concurrency(*pair, (1, 2), 0)


def test_bench_rejects_an_unknown_preset(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--target", "gpt-9", "--device", "cpu"]) == 2
    assert "unknown preset" in capsys.readouterr().err


def test_bench_rejects_a_missing_server_device(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--target", "tiny-target", "--drafter", "tiny-drafter", "--device",
                 "cpu", "--server-devices", "cuda:7"]) == 2
    assert "cuda:7" in capsys.readouterr().err


@pytest.mark.gpu
def test_measure_concurrency_on_cuda_gives_slowdowns_for_the_simulator() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    target, drafter = build_pair(device="cuda", dtype="fp32", max_seq_len=64)
    probe = measure_concurrency(target, drafter, (1, 2, 3), 3, forwards=10)
    assert all(t > 0 for t in probe.target_ms + probe.drafter_ms)
    latency = dr.expected_latency("dsi", c=0.2, a=0.7, lookahead=3, n_tokens=16, model="event",
                                  sp_degree=3, contention=probe.contention())
    assert latency > 0


@pytest.mark.parametrize("verify", dr.VERIFY_RULES)
def test_bench_accepts_every_rule_the_engine_runs(tmp_path: Path, verify: str) -> None:
    out = tmp_path / "bench.json"
    code = main(["bench", "--target", "tiny-target", "--drafter", "tiny-drafter", "--device",
                 "cpu", "--dtype", "fp64", "--new-tokens", "6", "--prompts", "2",
                 "--prompt-len", "3", "--lookahead", "2", "--sp-degree", "2",
                 "--verify", verify, "--json", str(out), "--contention-forwards", "0"])
    assert code == 0
    data = json.loads(out.read_text())
    assert data["verify"] == verify
    (result,) = data["results"]
    assert all(t > 0 for times in result["times_s"].values() for t in times)


def test_bench_batched_predicts_with_the_batched_model(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    """``--batched`` measures this device's batched-forward costs (`measure_batched_costs`) and
    predicts DSI/SI with the model of the batched loop (`dsi_ref.sim.batched.predict`)."""
    out = tmp_path / "bench.json"
    code = main(["bench", "--target", "tiny-target", "--drafter", "tiny-drafter", "--device",
                 "cpu", "--dtype", "fp64", "--new-tokens", "6", "--prompts", "2",
                 "--prompt-len", "3", "--lookahead", "2", "--sp-degree", "2", "--batched",
                 "--verify", "exact_match", "--json", str(out), "--contention-forwards", "0"])
    assert code == 0
    text = capsys.readouterr().out
    assert "a batched forward of b windows" in text and "batched servers" in text
    (result,) = json.loads(out.read_text())["results"]
    model = result["batched_model"]
    assert model["si_ms_per_token"] > 0 and model["dsi_ms_per_token"] > 0
    assert model["dsi/si"] == pytest.approx(model["si_ms_per_token"] / model["dsi_ms_per_token"])
    assert model["dsi/si"] * model["measured/predicted dsi/si"] == \
        pytest.approx(result["measured_speedup"]["dsi/si"])
