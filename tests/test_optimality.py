"""The optimality LPs and their exact certificates (dsi_ref/audit/optimality.py), and the
generated page docs/optimality.md (regenerated here in full and compared: about 2 s)."""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import pytest

import dsi_ref as dr
from dsi_ref.audit import optimality as opt

ROOT = Path(__file__).resolve().parent.parent
F = Fraction


def one_step(seed: int, vocab: int = 4) -> tuple[tuple[Fraction, ...], tuple[Fraction, ...]]:
    p = dr.TableLM.random(vocab, 0, seed).probs(())
    q = dr.TableLM.random(vocab, 0, seed + 100, zero_prob=0).probs(())
    return tuple(F(v) for v in p), tuple(F(v) for v in q)


def chain_models(vocab: int, seed: int) -> tuple[dr.TableLM, dr.TableLM]:
    return (dr.TableLM.random(vocab, 1, seed, name="target"),
            dr.TableLM.random(vocab, 1, seed + 100, name="drafter"))


# -- the one-step LP -----------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("scheme", opt.DRAFT_SCHEMES)
def test_the_certified_optimum_checks_and_equals_the_min_cut(seed: int, k: int,
                                                            scheme: opt.DraftScheme) -> None:
    p, q = one_step(seed)
    law = opt.draft_law(q, k, scheme)
    cert = opt.multidraft_optimum(p, q, k, scheme)
    cert.check()
    assert cert.value == opt.min_cut_optimum(p, law)
    assert all(isinstance(v, Fraction) for v in (*cert.primal, *cert.dual))


@pytest.mark.parametrize("seed", range(4))
def test_single_draft_optimum_is_one_minus_tv_and_rejection_attains_it(seed: int) -> None:
    p, q = one_step(seed, vocab=3)
    overlap = sum((min(a, b) for a, b in zip(p, q, strict=True)), F(0))
    assert opt.multidraft_optimum(p, q, 1).value == overlap
    acceptance = opt.one_step_acceptance(
        lambda t, d, pr, n, rng: dr.speculative(t, d, pr, n, rng, lookahead=1), p, q)
    assert acceptance == overlap


def test_a_hand_computed_optimum() -> None:
    # p = (1, 0), q = (1/2, 1/2), two i.i.d. drafts: token 0 is among them w.p. 3/4.
    cert = opt.multidraft_optimum((F(1), F(0)), (F(1, 2), F(1, 2)), 2)
    assert cert.value == F(3, 4)
    # without replacement both tokens are always drafted: every Y is accepted.
    assert opt.multidraft_optimum((F(1), F(0)), (F(1, 2), F(1, 2)), 2,
                                  "without_replacement").value == 1


def test_draft_laws() -> None:
    q = (F(1, 2), F(1, 3), F(1, 6))
    for k in (1, 2, 3):
        for scheme in opt.DRAFT_SCHEMES:
            assert sum(opt.draft_law(q, k, scheme).values()) == 1
    assert (opt.draft_law(q, 2, "without_replacement")[1, 2]
            == F(1, 3) * F(1, 6) / (1 - F(1, 3)))
    assert opt.draft_law((F(1, 4), F(1, 2), F(1, 4)), 2, "top_k") == {(1, 0): F(1)}
    # Fewer tokens with q > 0 than drafts: every one of them is drafted, as the tree rules do.
    assert opt.draft_law((F(1), F(0), F(0)), 2, "without_replacement") == {(0,): F(1)}
    assert opt.draft_law((F(0), F(1), F(0)), 2, "top_k") == {(1,): F(1)}
    with pytest.raises(dr.InvalidParameterError, match="scheme"):
        opt.draft_law(q, 2, "sorted")  # type: ignore[arg-type]


def test_the_repair_alone_certifies_and_rescues_a_failed_rounding() -> None:
    p, q = one_step(2)
    assert (opt.solve(opt.multidraft_program(p, opt.draft_law(q, 3)), rounding=False).value
            == opt.min_cut_optimum(p, opt.draft_law(q, 3)))
    # Denominators beyond MAX_DENOMINATOR: rounding cannot recover the vertex, the basis can.
    big = 1_000_003
    p2 = (F(1, big), F(big - 3, 2 * big), F(big + 1, 2 * big))
    q2 = (F(2, big), F(big - 3, big), F(1, big))
    law = opt.draft_law(q2, 2)
    cert = opt.solve(opt.multidraft_program(p2, law))
    cert.check()
    assert cert.value == opt.min_cut_optimum(p2, law)
    # limit_denominator never gives these denominators: the repair made this certificate.
    assert max(v.denominator for v in cert.primal) > opt.MAX_DENOMINATOR


# -- refusing what does not hold -----------------------------------------------------------------
def _tight_row(cert: opt.Certificate) -> int:
    """A row of a column in the primal support (a tight dual constraint)."""
    j = next(j for j, z in enumerate(cert.primal) if z)
    return next(i for i, a in cert.program.columns[j].items() if a > 0)


def _replace(values: tuple[Fraction, ...], i: int, new: Any) -> tuple[Any, ...]:
    return values[:i] + (new,) + values[i + 1:]


PERTURBATIONS: dict[str, tuple[str, Callable[[opt.Certificate], opt.Certificate]]] = {
    "primal entry + 1e-9": ("primal", lambda c: dataclasses.replace(
        c, primal=_replace(c.primal, 0, c.primal[0] + F(1, 10**9)))),
    "primal entry negative": ("primal", lambda c: dataclasses.replace(
        c, primal=_replace(c.primal, 0, F(-1, 10**9)))),
    "primal entry a float": ("primal", lambda c: dataclasses.replace(
        c, primal=_replace(c.primal, 0, float(c.primal[0])))),
    "dual entry - 1e-9 on a tight row": ("dual", lambda c: dataclasses.replace(
        c, dual=_replace(c.dual, _tight_row(c), c.dual[_tight_row(c)] - F(1, 10**9)))),
    "dual entry + 1e-9": ("gap", lambda c: dataclasses.replace(
        c, dual=_replace(c.dual, len(c.dual) - 1, c.dual[-1] + F(1, 10**9)))),
    "value + 1e-9": ("value", lambda c: dataclasses.replace(c, value=c.value + F(1, 10**9))),
    "a dual entry missing": ("shape", lambda c: dataclasses.replace(c, dual=c.dual[:-1])),
}


@pytest.mark.parametrize("name", PERTURBATIONS)
@pytest.mark.parametrize("which", ["one-step", "chain"])
def test_a_perturbed_certificate_is_refused(name: str, which: str) -> None:
    if which == "one-step":
        p, q = one_step(1)
        cert = opt.multidraft_optimum(p, q, 2)
    else:
        cert = opt.chain_optimum(*chain_models(2, 1), (), 2)
    cert.check()
    condition, perturb = PERTURBATIONS[name]
    bad = perturb(cert)
    with pytest.raises(opt.CertificateError) as error:
        bad.check()
    assert error.value.condition == condition


def test_solve_never_returns_an_unverified_optimum(monkeypatch: pytest.MonkeyPatch) -> None:
    p, q = one_step(0)
    program = opt.multidraft_program(p, opt.draft_law(q, 2))
    good = opt.solve(program)

    def wrong_solution(*args: object, **kwargs: object) -> SimpleNamespace:
        n, m = len(program.columns), len(program.b)
        return SimpleNamespace(status=0, message="", x=np.zeros(n),
                               eqlin=SimpleNamespace(marginals=np.zeros(m)))

    monkeypatch.setattr(opt, "linprog", wrong_solution)
    monkeypatch.setattr(opt, "_basis_certificate", lambda *a: dataclasses.replace(
        good, value=good.value + 1))
    with pytest.raises(opt.CertificateError):
        opt.solve(program)


def test_an_infeasible_program_has_no_certificate() -> None:
    program = opt.LinearProgram(columns=({0: F(1)}, {0: F(1)}), b=(F(-1),), c=(F(1), F(0)),
                                column_labels=("a", "b"), row_labels=("r",))
    with pytest.raises(opt.CertificateError) as error:
        opt.solve(program)
    assert error.value.condition == "solver"


# -- chains ----------------------------------------------------------------------------------
def _point(program: opt.LinearProgram, law: dict[Any, Fraction]) -> tuple[Fraction, ...]:
    index = {label: j for j, label in enumerate(program.column_labels)}
    z = [F(0)] * len(program.columns)
    for label, mass in law.items():
        z[index[label]] += mass
    return tuple(z)


def _feasible(program: opt.LinearProgram, z: tuple[Fraction, ...]) -> bool:
    az = [F(0)] * len(program.b)
    for j, col in enumerate(program.columns):
        for i, a in col.items():
            az[i] += a * z[j]
    return az == list(program.b)


@pytest.mark.parametrize(("vocab", "gamma", "seed"), [(2, 2, 1), (3, 2, 1), (2, 3, 4)])
def test_the_chain_lp_admits_token_rejection_and_refuses_a_lossy_verifier(
        vocab: int, gamma: int, seed: int) -> None:
    target, drafter = chain_models(vocab, seed)
    program = opt.chain_program(target, drafter, (), gamma)
    config = dr.SpeculativeConfig(gamma, "rejection")

    def token_level(rng: dr.Randomness) -> tuple[tuple[int, ...], int, int]:
        run = dr.SIRun(target, drafter, (), gamma + 1, rng, config)
        run.iterate()
        tau = run.stats["accepted"]
        return tuple(run.drafts), tau, run.tokens[tau]

    law = dr.exact_distribution(token_level)
    z = _point(program, law)
    assert _feasible(program, z)  # token-level rejection is a valid chain verifier
    value = sum((c * v for c, v in zip(program.c, z, strict=True)), F(0))
    assert value == opt.block_accepted(target, drafter, (), gamma, "rejection")
    assert value <= opt.chain_optimum(target, drafter, (), gamma).value
    # Accepting every draft and sampling the bonus from p is lossy: not a feasible point.
    lossy: dict[Any, Fraction] = {}
    for x in itertools.product(range(vocab), repeat=gamma):
        qx = F(1)
        for j in range(gamma):
            qx *= F(drafter.probs(x[:j])[x[j]])
        for y, py in enumerate(target.probs(x)):
            if qx and py:
                lossy[x, gamma, y] = qx * F(py)
    assert not _feasible(program, _point(program, lossy))


@pytest.mark.parametrize(("vocab", "seed"), [(2, 1), (3, 1), (3, 2)])
def test_the_single_draft_chain_optimum_is_the_overlap(vocab: int, seed: int) -> None:
    target, drafter = chain_models(vocab, seed)
    p, q = target.probs(()), drafter.probs(())
    overlap = sum((min(F(a), F(b)) for a, b in zip(p, q, strict=True)), F(0))
    assert opt.chain_optimum(target, drafter, (), 1).value == overlap


@pytest.mark.skipif("block" not in dr.VERIFY_RULES, reason="block verification not in this tree")
@pytest.mark.parametrize(("vocab", "gamma"), [(2, 1), (2, 2), (2, 3), (3, 2), (3, 3)])
@pytest.mark.parametrize("seed", [0, 5])
def test_block_verification_attains_the_certified_optimum(vocab: int, gamma: int,
                                                          seed: int) -> None:
    target, drafter = chain_models(vocab, seed)
    optimum = opt.chain_optimum(target, drafter, (), gamma).value
    block = opt.block_accepted(target, drafter, (), gamma, "block")
    token = opt.block_accepted(target, drafter, (), gamma, "rejection")
    assert block == optimum
    assert token <= block


@pytest.mark.slow
@pytest.mark.skipif("block" not in dr.VERIFY_RULES, reason="block verification not in this tree")
def test_block_verification_attains_the_optimum_on_many_chains() -> None:
    """Every V in 2..3, γ in 1..3, seeds 0..49, drafter with and without zeros: 600 instances
    (about 15 s). Reports every instance where block misses the certified optimum."""
    misses = []
    for zero_prob, vocab, gamma, seed in itertools.product((0.25, 0.0), (2, 3), (1, 2, 3),
                                                           range(50)):
        target = dr.TableLM.random(vocab, 1, seed)
        drafter = dr.TableLM.random(vocab, 1, seed + 100, zero_prob=zero_prob)
        optimum = opt.chain_optimum(target, drafter, (), gamma).value
        block = opt.block_accepted(target, drafter, (), gamma, "block")
        token = opt.block_accepted(target, drafter, (), gamma, "rejection")
        if block != optimum or token > block:
            misses.append((zero_prob, vocab, gamma, seed, optimum, block, token))
    assert not misses


def test_chain_program_refuses_bad_input() -> None:
    target, drafter = chain_models(2, 1)
    with pytest.raises(dr.InvalidParameterError, match="gamma"):
        opt.chain_program(target, drafter, (), 0)
    with pytest.raises(dr.InvalidParameterError, match="EOS"):
        opt.chain_program(dr.TableLM.random(2, 1, 1, eos=1), drafter, (), 1)


# -- the generated page --------------------------------------------------------------------------
def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("optimality_table",
                                                  ROOT / "benchmarks" / "optimality_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_page_is_what_the_generator_writes() -> None:
    """The whole page, regenerated with the committed seeds (about 2 s)."""
    page = _generator().page()
    assert (ROOT / "docs" / "optimality.md").read_text() == page, (
        "docs/optimality.md is stale: run .venv/bin/python benchmarks/optimality_table.py "
        "--write")


def test_the_page_is_in_the_site_nav() -> None:
    assert "optimality.md" in (ROOT / "mkdocs.yml").read_text()
