"""The z3 layer: every theorem gets its expected verdict (no UNKNOWN), none is vacuous, a wrong
claim is refuted, UNKNOWN never counts as proved, the translation is faithful, and the table is
deterministic."""

from __future__ import annotations

import io
import re
from contextlib import redirect_stdout
from fractions import Fraction as F
from pathlib import Path

import pytest
import sympy
import z3

import theory
from proofs import (
    THEOREMS,
    Theorem,
    TheoremResult,
    TranslationError,
    Verdict,
    by_name,
    check_claim,
    prove,
    render_markdown,
    render_text,
    run_all,
    to_z3,
)
from proofs.__main__ import main
from proofs.theorems import X, event_abstract, event_spread, lookahead_step_abstract

pytestmark = pytest.mark.smt
a, c = theory.a, theory.c
PAGE = Path(__file__).resolve().parent.parent / "docs" / "theory.md"
TABLE = re.compile(r"<!-- proofs-table:begin -->\n(.*?)<!-- proofs-table:end -->", re.S)
FAST = ["sp_requirement_sufficient", "sp_requirement_below_waits", "event_draft_ready",
        "event_draft_ready_c_above_1"]


@pytest.fixture(scope="module")
def results() -> list[TheoremResult]:
    return run_all()


def test_every_theorem_gets_its_expected_verdict_and_none_is_unknown(
        results: list[TheoremResult]) -> None:
    assert [r.theorem.name for r in results] == [t.name for t in THEOREMS]
    for r in results:
        assert r.verdict is not Verdict.UNKNOWN, f"{r.theorem.name}: {r.reason}"
        assert r.as_expected, f"{r.theorem.name}: {r.verdict.value}"
        if r.verdict is Verdict.PROVED:
            assert r.instances_checked == len(r.theorem.instances)
        else:
            assert r.counterexample is not None


def test_per_k_theorems_cover_lookaheads_1_to_32() -> None:
    per_k = [t for t in THEOREMS if t.instances != (None,)]
    assert len(per_k) >= 10
    for t in per_k:
        first = 2 if t.name == "event_sp_requirement_with_partial_window" else 1  # k = 1: none
        assert set(range(first, 33)) <= set(t.instances), t.name


@pytest.mark.parametrize("theorem", THEOREMS, ids=lambda t: t.name)
def test_hypotheses_are_satisfiable_so_no_proof_is_vacuous(theorem: Theorem) -> None:
    for instance in {theorem.instances[0], theorem.instances[-1]}:
        witness = check_claim(theorem.hypotheses(instance), sympy.false)
        assert witness.verdict is Verdict.REFUTED, f"{theorem.name} k={instance}"


def test_a_slightly_wrong_claim_is_refuted_with_a_counterexample() -> None:
    k = 3
    si = theory.si_latency_per_token(a, c, k)
    s_k = theory.geometric_sum(a, 1, k)
    wrong = sympy.Equivalent(sympy.Gt(si, 1), sympy.Ge(k * c, s_k))  # ≥ instead of >
    result = check_claim([sympy.Le(0, a), sympy.Le(a, 1), sympy.Lt(0, c)], wrong)
    assert result.verdict is Verdict.REFUTED and result.counterexample is not None
    a_, c_ = result.counterexample["a"], result.counterexample["c"]
    assert isinstance(a_, F) and isinstance(c_, F)
    assert theory.si_delta(a_, c_, k) == 0 and theory.si_latency_per_token(a_, c_, k) == 1


def test_dsi_le_si_is_not_provable_without_the_lemmas() -> None:
    d = sympy.Symbol("D", real=True)
    result = check_claim([sympy.Le(0, a), sympy.Le(a, 1), sympy.Lt(0, c), sympy.Le(c, 1)],
                         sympy.Le(d, theory.si_latency_per_token(a, c, 2)))
    assert result.verdict is Verdict.REFUTED


def test_unknown_never_counts_as_proved() -> None:
    theorem = by_name("si_slower_than_nonsi_iff")
    result = prove(theorem, instances=[32], rlimit=1)
    assert result.verdict is Verdict.UNKNOWN
    assert not result.proved and not result.as_expected
    assert result.reason


def test_the_event_models_spread_abstraction_is_faithful() -> None:
    for k in range(1, 6):
        exact = theory.dsi_event_latency_per_token(a, c, k)
        assert sympy.simplify(event_abstract(k).subs(X, event_spread(k)) - exact) == 0


def test_the_all_k_lookahead_abstraction_is_faithful() -> None:
    from proofs.theorems import S_k, kk, u
    for k in range(1, 8):
        values = {kk: k, S_k: theory.geometric_sum(a, 0, k), u: a ** (k + 1)}
        for shift in (0, 1):
            exact = theory.si_lookahead_step(a, c, k + shift)
            abstract = lookahead_step_abstract(shift).subs(values)
            assert sympy.expand(abstract - exact) == 0


def test_translation_handles_min_max_ceiling_powers_and_rejects_the_rest() -> None:
    env = {a: z3.Real("a"), c: z3.Real("c")}
    solver = z3.Solver()
    expr = sympy.Min(a, c) + sympy.Max(a, 2 * c) + sympy.ceiling(a / c) + a**-2
    solver.add(env[a] == z3.RealVal("1/2"), env[c] == z3.RealVal("1/3"))
    value = z3.Real("v")
    solver.add(value == to_z3(expr, env))
    assert solver.check() == z3.sat
    got = solver.model()[value]
    expected = sympy.Rational(1, 3) + sympy.Rational(2, 3) + 2 + 4
    assert F(got.numerator_as_long(), got.denominator_as_long()) == F(str(expected))
    with pytest.raises(TranslationError):
        to_z3(sympy.sin(a), env)
    with pytest.raises(TranslationError):
        to_z3(sympy.Float(0.5) * a, env)
    with pytest.raises(TranslationError):
        to_z3(sympy.Symbol("unbound"), env)


def test_theorem_rejects_an_unknown_expectation_or_an_unlabelled_negative_result() -> None:
    with pytest.raises(ValueError, match="PROVED or REFUTED"):
        Theorem("t", "w", "m", lambda k: [], lambda k: sympy.true, expected=Verdict.UNKNOWN)
    with pytest.raises(ValueError, match="drops"):
        Theorem("t", "w", "m", lambda k: [], lambda k: sympy.true, expected=Verdict.REFUTED)


def test_table_is_deterministic_without_times(results: list[TheoremResult]) -> None:
    again = run_all(FAST)
    subset = [r for r in results if r.theorem.name in FAST]
    assert render_text(again, times=False) == render_text(subset, times=False)
    text = render_text(results, times=False)
    assert "all as expected" in text and "UNKNOWN" in text  # the summary counts UNKNOWN (0)
    markdown = render_markdown(results)
    assert markdown.count("\n| `") == len(THEOREMS)


def test_python_m_proofs_exit_status_and_unknown_name() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["--no-times", "--theorem", "event_draft_ready"]) == 0
    assert "event_draft_ready" in out.getvalue() and "PROVED" in out.getvalue()
    assert main(["--theorem", "no_such_theorem"]) == 2


def test_theory_page_verdict_table_is_the_generated_one(results: list[TheoremResult]) -> None:
    """docs/theory.md's table is ``python -m proofs --markdown --no-times`` (fails if stale)."""
    match = TABLE.search(PAGE.read_text())
    assert match, "docs/theory.md lost its proofs-table markers"
    assert match.group(1).strip() == render_markdown(results, times=False).strip()
