"""The enforced false-alarm budget (tests/false_alarm_budget.py, docs/statistical-policy.md): the
collection hook's rules on small user suites, and the policy page's table is current."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from false_alarm_budget import (
    BUDGET,
    DEFAULT_RUN,
    PAGE,
    budget_problems,
    budget_table,
    page_with_table,
)

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parent.parent


def problems(pytester: pytest.Pytester, source: str) -> list[str]:
    return budget_problems(pytester.getitems(source))


def test_declared_tests_within_the_budget_pass(pytester: pytest.Pytester) -> None:
    source = '''
import pytest

@pytest.mark.montecarlo(alpha=2e-9)
@pytest.mark.parametrize("n", [1, 2])
def test_mean(n):
    se = 1.0
    assert abs(0.0) < 6 * se

@pytest.mark.statistical(alpha=1e-8)
def test_audit():
    pass
'''
    assert problems(pytester, source) == []


def test_a_marker_without_alpha_is_refused(pytester: pytest.Pytester) -> None:
    found = problems(pytester, "import pytest\n\n@pytest.mark.statistical\ndef test_a():\n"
                               "    pass\n")
    assert len(found) == 1 and "needs alpha=" in found[0] and "test_a" in found[0]


def test_an_alpha_outside_0_1_is_refused(pytester: pytest.Pytester) -> None:
    found = problems(pytester, "import pytest\n\n@pytest.mark.montecarlo(alpha=2)\n"
                               "def test_b():\n    pass\n")
    assert len(found) == 1 and "got 2" in found[0]


def test_an_undeclared_test_that_decides_on_a_sample_is_refused(pytester: pytest.Pytester
                                                                ) -> None:
    source = '''
import numpy as np

def _mean_is_close(runs, exact):
    se = runs.std(ddof=1) / np.sqrt(runs.size)
    return abs(runs.mean() - exact) < 6 * se

def test_through_a_helper():
    assert _mean_is_close(np.ones(3), 1.0)

def test_an_audit_verdict():
    report = statistical_audit(None, None)
    assert report.verdict == "lossless"
'''
    found = problems(pytester, source)
    assert len(found) == 2
    assert "test_through_a_helper decides on a sample (a bound in standard errors)" in found[0]
    assert "test_an_audit_verdict decides on a sample (a statistical audit" in found[1]


def test_deterministic_tests_are_not_flagged(pytester: pytest.Pytester) -> None:
    """No false alarms: a seeded run compared with itself, an audit that must refuse before
    sampling, and a closed form within a tolerance decide on nothing random."""
    source = '''
import pytest

def test_same_seed_same_report():
    assert statistical_audit(1, seed=1) == statistical_audit(1, seed=1)

def test_underpowered():
    with pytest.raises(ValueError):
        statistical_audit(None, None, 3)

def test_tolerance():
    assert abs(0.1 + 0.2 - 0.3) < 1e-12
'''
    assert problems(pytester, source) == []


def test_an_undeclared_seeded_count_or_tolerance_test_is_refused(pytester: pytest.Pytester
                                                                 ) -> None:
    """A fixed seed makes a test deterministic, not free of chance: the seed was one draw."""
    source = '''
from collections import Counter
import dsi_ref as dr
import numpy as np

def _draws(n):
    return [dr.Sampler(s).categorical([1, 1, 2]) for s in range(n)]

def test_counts():
    counts = Counter(_draws(400))
    assert counts[2] > 150

def test_a_mean_within_a_tolerance():
    assert abs(np.random.default_rng(3).random(1000).mean() - 0.5) < 0.05

def test_hits_in_a_loop():
    hits = 0
    for seed in range(30):
        hits += dr.Sampler(seed).bernoulli(0.5)
    assert hits >= 5
'''
    found = problems(pytester, source)
    assert [f.split(" ", 1)[0].rsplit("::", 1)[1] for f in found] == [
        "test_counts", "test_a_mean_within_a_tolerance", "test_hits_in_a_loop"]
    assert all("(a seeded sample compared with a tolerance or a count)" in f for f in found)


def test_reproducibility_only_seeded_tests_are_not_flagged(pytester: pytest.Pytester) -> None:
    """Same seed, same output; a property of every draw; a float-noise tolerance: nothing to
    declare. A test that looks like it samples but passes for every draw opts out with
    ``alpha=0`` and a reason, never without one."""
    source = '''
import dsi_ref as dr
import pytest

def test_same_seed_same_tokens():
    assert [dr.Sampler(7).categorical([1, 1]) for _ in range(5)] == \\
        [dr.Sampler(7).categorical([1, 1]) for _ in range(5)]

def test_every_draw_is_in_range():
    draws = [dr.Sampler(s).categorical([1, 0, 1]) for s in range(50)]
    assert all(d in (0, 2) for d in draws)

def test_float_noise():
    x = dr.Sampler(1).uniform()
    assert x == pytest.approx(x + 1e-15, abs=1e-12)

@pytest.mark.montecarlo(alpha=0, reason="the weights put all the mass on token 1")
def test_certain():
    hits = 0
    for seed in range(10):
        hits += dr.Sampler(seed).categorical([0, 1]) == 1
    assert hits >= 10
'''
    assert problems(pytester, source) == []


def test_a_zero_alpha_without_a_reason_is_refused(pytester: pytest.Pytester) -> None:
    found = problems(pytester, "import pytest\n\n@pytest.mark.montecarlo(alpha=0)\n"
                               "def test_c():\n    pass\n")
    assert len(found) == 1 and "give reason=" in found[0] and "test_c" in found[0]


def test_a_run_over_the_budget_is_refused(pytester: pytest.Pytester) -> None:
    source = f'''
import pytest

@pytest.mark.statistical(alpha={BUDGET / 2})
@pytest.mark.parametrize("n", [1, 2, 3])
def test_a(n):
    pass
'''
    found = problems(pytester, source)
    assert len(found) == 1 and "add up to 1.5e-06 > the budget 1e-06" in found[0]


def test_the_hook_refuses_the_run(pytester: pytest.Pytester) -> None:
    """The same rules, through tests/conftest.py's hook in a real (inner) run."""
    pytester.makeconftest(f"import sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\n"
                          + (ROOT / "tests" / "conftest.py").read_text().replace(
                              "from __future__ import annotations\n", ""))
    pytester.makepyfile(test_user="import pytest\n\n@pytest.mark.statistical\n"
                                  "def test_a():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*false-alarm budget*", "*test_a: @pytest.mark.statistical "
                                 "needs alpha=*"])


def _is_the_full_default_run(config: pytest.Config) -> bool:
    args = [str(Path(a).resolve()) for a in config.args]
    return (args in ([], [str(ROOT / "tests")]) and not config.option.keyword
            and config.option.markexpr == DEFAULT_RUN and not config.option.deselect
            and not getattr(config.option, "lf", False))


def test_the_policy_pages_table_is_the_default_runs_declarations(request: pytest.FixtureRequest
                                                                 ) -> None:
    """Checked from this session's own items when it collected the whole default run (the
    suite's normal run); a partial run cannot see every declaration (the slow test below
    collects them itself)."""
    if not _is_the_full_default_run(request.config):
        pytest.skip("a partial run: the table is checked by the full default run, or by "
                    "python tests/false_alarm_budget.py --check")
    page = PAGE.read_text()
    assert page_with_table(page, budget_table(request.session.items)) == page, (
        "docs/statistical-policy.md is stale: run python tests/false_alarm_budget.py --write")


@pytest.mark.slow
def test_the_policy_page_is_current_by_its_own_collection() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "tests" / "false_alarm_budget.py"),
                             "--check"], capture_output=True, text=True, cwd=ROOT, check=False)
    assert result.returncode == 0, result.stderr
