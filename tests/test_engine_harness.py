"""The engine harness (``dsi_ref.backends.harness``) and ``dsi-ref audit-engine``.

Fast: a pure-Python toy engine (lossless, and a lossy one whose exact TV is known), every bad
entry point refused in one line with status 2, the JSON output, and two real engines through the
command: dsi-ref's own torch engine and Hugging Face assisted generation, greedy (a point mass:
21 draws give power 0.99 against every law at TV >= 0.2). Slow: both real engines sampled.
"""

from __future__ import annotations

import json
import os
import re
from fractions import Fraction
from pathlib import Path

import pytest

import dsi_ref as dr
from dsi_ref.audit.statistical import POLICY_ALPHA, POLICY_MISS
from dsi_ref.backends.harness import EngineUnderTest, audit_engine, load_engine, plan_audit
from dsi_ref.base.errors import InvalidParameterError, UnderpoweredError
from dsi_ref.cli import main

TARGET = dr.TableLM.random(3, 1, seed=1, name="harness-target")
DRAFTER = dr.TableLM.random(3, 1, seed=2, name="harness-drafter")
PROMPT = (0,)
N = 2
HERE = Path(__file__).resolve().parent


def _si(seed: int) -> tuple[int, ...]:
    return dr.speculative(TARGET, DRAFTER, PROMPT, N, dr.Sampler(seed), lookahead=2).tokens


def _drafter_only(seed: int) -> tuple[int, ...]:
    return dr.autoregressive(DRAFTER, PROMPT, N, dr.Sampler(seed)).tokens


def toy_si() -> EngineUnderTest:
    """An entry point: dsi-ref's reference SI on two toy bigram models."""
    return EngineUnderTest(_si, TARGET, PROMPT, N, name="toy SI")


def toy_lossy() -> EngineUnderTest:
    """An entry point: an "engine" that samples the drafter, audited against the target."""
    return EngineUnderTest(_drafter_only, TARGET, PROMPT, N, name="toy drafter-only")


def _lossy_tv() -> float:
    p = dr.target_distribution(TARGET, PROMPT, N)
    q = dr.target_distribution(DRAFTER, PROMPT, N)
    return float(sum((abs(p.get(k, Fraction(0)) - q.get(k, Fraction(0)))
                      for k in p.keys() | q.keys()), Fraction(0)) / 2)


not_an_engine = 42


def returns_a_tuple() -> tuple[int, ...]:
    """An entry point of the wrong kind: it returns a tuple."""
    return (1, 2)


@pytest.fixture(autouse=True)
def _importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))  # `test_engine_harness:...` entries


@pytest.mark.statistical(alpha=POLICY_ALPHA)
def test_the_python_api_passes_a_correct_engine_at_stated_power() -> None:
    report = audit_engine(toy_si, epsilon=0.3)
    assert report.power >= 0.99 and report.alpha <= POLICY_ALPHA
    assert report.verdict == "lossless", report


@pytest.mark.statistical(alpha=POLICY_MISS)  # a negative control: the miss rate
def test_the_python_api_flags_a_lossy_engine() -> None:
    tv = _lossy_tv()
    assert tv > 0.3
    report = audit_engine(toy_lossy(), epsilon=0.3, power=1 - POLICY_MISS)
    assert report.verdict == "lossy", report


@pytest.mark.statistical(alpha=POLICY_MISS)  # a negative control: the miss rate
def test_the_command_states_power_writes_json_and_exits_1_on_lossy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "verdict.json"
    status = main(["audit-engine", "test_engine_harness:toy_lossy", "--epsilon", "0.3",
                   "--power", str(1 - POLICY_MISS), "--json", str(out), "--no-progress"])
    printed = capsys.readouterr().out
    assert status == 1
    assert "samples for power 0.999999999 against every law at TV >= 0.3" in printed
    assert "LOSSY" in printed
    data = json.loads(out.read_text())
    assert data["verdict"] == "lossy" and data["engine"] == "toy drafter-only"
    assert data["epsilon"] == 0.3 and data["power"] >= 1 - POLICY_MISS
    assert data["n_samples"] > 0 and data["samples_per_second"] > 0


@pytest.mark.parametrize(("entry", "message"), [
    ("test_engine_harness", "is not MODULE:CALLABLE"),
    ("test_engine_harness:", "is not MODULE:CALLABLE"),
    ("no_such_module_xyz:make", "module 'no_such_module_xyz' not found"),
    ("test_engine_harness:no_such_thing", "has no attribute 'no_such_thing'"),
    ("test_engine_harness:not_an_engine", "'not_an_engine' is a int, not a callable"),
    ("test_engine_harness:returns_a_tuple", "returned a tuple, not an EngineUnderTest"),
    ("engine_harness_broken_module:make", "importing 'engine_harness_broken_module' failed: "
     "ZeroDivisionError"),
])
def test_a_bad_entry_point_is_refused_in_one_line_with_status_2(
        entry: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "engine_harness_broken_module.py").write_text("x = 1 / 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["audit-engine", entry, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dsi-ref: error: ") and err.count("\n") == 1, err
    assert message in err, err
    with pytest.raises(InvalidParameterError, match=re.escape(message)):
        load_engine(entry)


def test_an_unwritable_json_path_is_refused_before_the_entry_point_is_loaded(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "missing-folder" / "out.json"
    assert main(["audit-engine", "no_such_module_xyz:make", "--json", str(bad)]) == 2
    assert "missing-folder" in capsys.readouterr().err


@pytest.mark.parametrize("args", [["--epsilon", "1.5"], ["--alpha", "0"], ["--seed", "-1"]])
def test_bad_numbers_are_usage_errors(args: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["audit-engine", "test_engine_harness:toy_si", *args])
    assert info.value.code == 2


# -- two real engines ---------------------------------------------------------------------------


@pytest.mark.torch
@pytest.mark.statistical(alpha=POLICY_ALPHA)  # per engine
@pytest.mark.parametrize("entry", ["dsi_ref.backends.harness:torch_si_greedy",
                                   "dsi_ref.backends.harness:hf_assisted_greedy"])
def test_two_real_engines_pass_through_the_command(
        entry: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = tmp_path / "v.json"
    status = main(["audit-engine", entry, "--json", str(out), "--no-progress"])
    assert status == 0, capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["verdict"] == "lossless" and data["power"] >= 0.99
    assert data["n_samples"] == 21  # a point mass: the greedy reference


@pytest.mark.torch
def test_the_sampled_engines_sample_sizes_are_those_the_docs_state() -> None:
    """docs/engine-harness.md quotes the plan of both sampled engines at the defaults (power
    0.99 against TV >= 0.2, alpha 1e-8): computed here without sampling."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sizes = {}
    for name in ("torch_si", "hf_assisted"):
        engine = load_engine(f"dsi_ref.backends.harness:{name}")
        plan = plan_audit(engine, engine.reference_law(), epsilon=0.2, alpha=POLICY_ALPHA,
                          power=0.99)
        sizes[name] = plan.n_samples
    assert sizes == {"torch_si": 1460, "hf_assisted": 1752}
    page = (HERE.parent / "docs" / "engine-harness.md").read_text()
    assert "(one thread; 1,460 samples for a verdict at TV ≥ 0.2)" in page
    assert "(1,752 samples)" in page


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.statistical(alpha=POLICY_ALPHA)
@pytest.mark.parametrize("entry", ["dsi_ref.backends.harness:torch_si",
                                   "dsi_ref.backends.harness:hf_assisted"])
def test_two_real_engines_sampled_are_lossless_at_stated_power(entry: str) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    report = audit_engine(entry, epsilon=0.2)
    assert report.power >= 0.99
    assert report.verdict == "lossless", report


@pytest.mark.statistical(alpha=POLICY_ALPHA)  # the docstring's audit says "lossless"
def test_the_docstring_example_runs() -> None:
    import doctest

    import dsi_ref.backends.harness as harness

    result = doctest.testmod(harness, raise_on_error=False, verbose=False)
    assert result.attempted >= 4 and result.failed == 0, result


def test_a_budget_too_small_for_the_stated_power_is_refused_before_sampling(
        capsys: pytest.CaptureFixture[str]) -> None:
    drawn: list[int] = []

    def make() -> EngineUnderTest:
        def sample(seed: int) -> tuple[int, ...]:
            drawn.append(seed)
            return dr.autoregressive(TARGET, (0,), 2, dr.Sampler(seed)).tokens
        return EngineUnderTest(sample, TARGET, (0,), 2, name="budgeted")

    needed = plan_audit(make(), make().reference_law(), epsilon=0.2, alpha=POLICY_ALPHA,
                        power=0.99).n_samples
    with pytest.raises(UnderpoweredError, match=f"about {needed} samples are needed"):
        audit_engine(make, max_samples=needed - 1)
    assert not drawn  # refused before any draw
    si = toy_si()
    needed = plan_audit(si, si.reference_law(), epsilon=0.2, alpha=POLICY_ALPHA,
                        power=0.99).n_samples
    assert main(["audit-engine", "--max-samples", str(needed - 1), "--no-progress",
                 "test_engine_harness:toy_si"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dsi-ref: error: ") and f"about {needed} samples" in err, err
