"""Sampling processors as models (`dr.processed`, issue #15, items 1, 3 and 5).

The processed law is pinned by hand on small rows (every step, every tie rule, both orders), is
compared with a literal re-implementation of Hugging Face's warpers over every tie order, and its
float temperature with a 60-digit reference within the stated bound. Then the properties: SI
(every rule of `VERIFY_RULES`) and DSI are lossless with respect to the *processed target* for
processor settings drawn independently for the target and the drafter; the processor mutants of
the zoo are wrong only because of their bug (their decoder with the bug removed passes).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from decimal import Decimal, localcontext
from fractions import Fraction as F

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsi_ref as dr
from dsi_ref.audit.strategies import exact_rows, model_pairs, processors
from dsi_ref.audit.zoo import MUTANTS, PROCESSOR_MUTANT_SETTINGS, hunt
from dsi_ref.audit.zoo_mutants.processors import _processed_mutant
from dsi_ref.base.processors import (
    HF_ORDER,
    VLLM_ORDER,
    ProcessedLM,
    Processors,
    float_temperature,
    temperature_error_bound,
)
from dsi_ref.decoders.verification import VERIFY_RULES

ROW = (F(1, 2), F(1, 3), F(1, 6))
TIED = (F(2, 5), F(2, 5), F(1, 5))
PROPERTY = settings(max_examples=10, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


def apply(row: Sequence[F], **kwargs: object) -> tuple[F, ...]:
    return Processors(**kwargs).apply(row)  # type: ignore[arg-type]


# -- the law of each step, by hand --------------------------------------------------------------


def test_temperature_one_over_n_is_p_to_the_n_normalised_exactly() -> None:
    assert apply(ROW, temperature=F(1, 2)) == (F(9, 14), F(4, 14), F(1, 14))
    assert apply(ROW, temperature=F(1, 3)) == (F(27, 36), F(8, 36), F(1, 36))
    assert apply(ROW, temperature=0.5) == apply(ROW, temperature=F(1, 2))  # 0.5 is 1/2 exactly
    assert apply(ROW, temperature=1) == ROW


def test_top_k_keeps_every_token_tied_with_the_kth() -> None:
    assert apply(ROW, top_k=2) == (F(3, 5), F(2, 5), F(0))
    assert apply(ROW, top_k=1) == (F(1), F(0), F(0))
    assert apply(TIED, top_k=1) == (F(1, 2), F(1, 2), F(0))  # both maxima kept
    assert apply(ROW, top_k=5) == ROW  # k >= V: nothing cut


def test_top_p_keeps_the_smallest_head_reaching_top_p_and_its_ties() -> None:
    assert apply(ROW, top_p=F(1, 2)) == (F(1), F(0), F(0))  # 1/2 reaches 1/2 exactly
    assert apply(ROW, top_p=F(2, 3)) == (F(3, 5), F(2, 5), F(0))
    assert apply(ROW, top_p=F(5, 6)) == (F(3, 5), F(2, 5), F(0))  # 1/2 + 1/3 reaches 5/6
    assert apply(ROW, top_p=F(6, 7)) == ROW
    assert apply(TIED, top_p=F(1, 3)) == (F(1, 2), F(1, 2), F(0))  # boundary tie: both kept


def test_min_p_cuts_below_min_p_times_the_maximum_and_keeps_the_threshold() -> None:
    assert apply(ROW, min_p=F(1, 3)) == ROW  # 1/6 == 1/3 · 1/2 is kept (the cut is strict)
    assert apply(ROW, min_p=F(1, 2)) == (F(3, 5), F(2, 5), F(0))
    assert apply(ROW, min_p=0) == ROW


def test_the_order_matters_and_defaults_to_hugging_faces() -> None:
    row = (F(1, 3), F(1, 2), F(1, 6))
    hf = apply(row, top_k=2, top_p=F(3, 5))
    assert hf == (F(0), F(1), F(0))  # top-k: (2/5, 3/5, 0), then 3/5 reaches top_p alone
    assert apply(row, top_k=2, top_p=F(3, 5),
                 order=("temperature", "top_p", "top_k", "min_p")) == (F(2, 5), F(3, 5), F(0))
    assert Processors().order == HF_ORDER == ("temperature", "top_k", "top_p", "min_p")
    # min-p after top-p (HF) or before top-k/top-p (vLLM): on (.4, .3, .2, .1), top-p 3/4 keeps
    # three tokens, then min-p 1/2 keeps them (2/9 >= 1/2 · 4/9); min-p first keeps three, whose
    # renormalised head 4/9 + 3/9 already reaches 3/4
    row = (F(4, 10), F(3, 10), F(2, 10), F(1, 10))
    assert apply(row, top_p=F(3, 4), min_p=F(1, 2)) == (F(4, 9), F(3, 9), F(2, 9), F(0))
    assert apply(row, top_p=F(3, 4), min_p=F(1, 2), order=VLLM_ORDER) \
        == (F(4, 7), F(3, 7), F(0), F(0))
    assert VLLM_ORDER == ("temperature", "min_p", "top_k", "top_p")


def test_the_processed_model_keeps_vocabulary_and_eos_and_names_its_steps() -> None:
    m = dr.TableLM.random(3, 1, seed=3, eos=2, name="m")
    p = dr.processed(m, temperature=F(1, 2), top_k=2, min_p=F(1, 4))
    assert isinstance(p, dr.LanguageModel) and isinstance(p, ProcessedLM)
    assert (p.vocab_size, p.eos) == (3, 2)
    assert p.name == "processed(m; T=1/2, top_k=2, min_p=1/4)"
    assert p.probs((1,)) == Processors(temperature=F(1, 2), top_k=2,
                                       min_p=F(1, 4)).apply(m.probs((1,)))
    assert dr.processed(m).probs((0,)) == m.probs((0,))  # no step: the model's law


# -- against Hugging Face's warpers, literally, over every tie order ----------------------------


def _hf_top_p(row: Sequence[F], top_p: F, order: Sequence[int]) -> set[int]:
    """TopPLogitsWarper: sort ascending (ties in ``order``), remove where cumsum <= 1 - top_p,
    keep at least the last."""
    ascending = sorted(range(len(row)), key=lambda i: (row[i], order.index(i)))
    kept, cumulative = set(), F(0)
    for rank, i in enumerate(ascending):
        cumulative += row[i]
        if cumulative > 1 - top_p or rank == len(row) - 1:
            kept.add(i)
    return kept


@settings(max_examples=60, deadline=None, derandomize=True)
@given(row=st.integers(2, 4).flatmap(lambda v: exact_rows(v, denominator=6)),
       top_p=st.sampled_from([F(1, 4), F(1, 3), F(1, 2), F(2, 3), F(3, 4), F(5, 6)]),
       top_k=st.integers(1, 4), min_p=st.sampled_from([F(1, 4), F(1, 3), F(1, 2)]))
def test_each_cut_is_the_union_of_hugging_faces_over_tie_orders(
        row: tuple[F, ...], top_p: F, top_k: int, min_p: F) -> None:
    support = {i for i, x in enumerate(apply(row, top_p=top_p)) if x > 0}
    hf_sets = [_hf_top_p(row, top_p, order)
               for order in itertools.permutations(range(len(row)))]
    assert support == {i for s in hf_sets for i in s if row[i] > 0}
    if all(s == hf_sets[0] for s in hf_sets):  # no tie at the boundary: HF's law exactly
        kept = sum(row[i] for i in hf_sets[0])
        assert apply(row, top_p=top_p) == tuple(row[i] / kept if i in hf_sets[0] else 0
                                                for i in range(len(row)))
    kth = sorted(row, reverse=True)[min(top_k, len(row)) - 1]  # TopKLogitsWarper: < kth removed
    assert {i for i, x in enumerate(apply(row, top_k=top_k)) if x > 0} \
        == {i for i, x in enumerate(row) if x >= kth and x > 0}
    assert {i for i, x in enumerate(apply(row, min_p=min_p)) if x > 0} \
        == {i for i, x in enumerate(row) if x >= min_p * max(row) and x > 0}  # MinPLogitsWarper


@settings(max_examples=60, deadline=None, derandomize=True)
@given(data=st.data(), v=st.integers(2, 4))
def test_processing_is_a_distribution_on_the_support_equivariant_under_relabelling(
        data: st.DataObject, v: int) -> None:
    row = data.draw(exact_rows(v))
    procs = data.draw(processors(v))
    out = procs.apply(row)
    assert sum(out) == 1 and all(isinstance(x, F) for x in out)
    assert all(x == 0 for x, p in zip(out, row, strict=True) if p == 0)  # support shrinks
    top = max(row)
    assert all(out[i] > 0 for i in range(v) if row[i] == top)  # the maxima always survive
    perm = data.draw(st.permutations(range(v)))
    assert procs.apply([row[i] for i in perm]) == tuple(out[i] for i in perm)  # no id order


# -- float temperatures: the stated bound against a 60-digit reference --------------------------


def _reference(row: Sequence[F], temperature: F) -> list[Decimal]:
    with localcontext() as ctx:
        ctx.prec = 60
        inverse = 1 / (Decimal(temperature.numerator) / Decimal(temperature.denominator))
        powered = [(Decimal(float(x)).ln() * inverse).exp() if x > 0 else Decimal(0)
                   for x in row]
        total = sum(powered)
        return [y / total for y in powered]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(row=st.integers(2, 5).flatmap(lambda v: exact_rows(v, denominator=12)),
       temperature=st.sampled_from([F(2), F(3, 2), F(7, 10), F(3), F(5, 7)]))
def test_a_float_temperature_is_within_its_stated_bound(row: tuple[F, ...],
                                                        temperature: F) -> None:
    floats = [float(x) for x in row]  # the bound is for float rows (fl(p) = p here)
    out = float_temperature(floats, temperature)
    reference = _reference(row, temperature)
    tv = sum(abs(Decimal(y) - r) for y, r in zip(out, reference, strict=True)) / 2
    assert tv <= Decimal(temperature_error_bound(len(row), temperature))
    assert math.isclose(sum(out), 1.0, abs_tol=1e-12)
    as_model = dr.processed(dr.TableLM.context_free(row), temperature=temperature, exact=False)
    assert as_model.probs(()) == float_temperature(row, temperature)


def test_an_inexact_temperature_is_refused_unless_exact_is_false() -> None:
    with pytest.raises(dr.InvalidParameterError, match=r"1/T = 3/2, not an integer.*exact=False"):
        dr.processed(dr.TableLM.context_free(ROW), temperature=F(2, 3))
    tempered = dr.processed(dr.TableLM.context_free(ROW), temperature=F(2, 3), exact=False)
    assert all(isinstance(x, float) for x in tempered.probs(()))
    # exact=False computes every temperature in float64, T = 1/2 included
    half = dr.processed(dr.TableLM.context_free(ROW), temperature=F(1, 2), exact=False)
    assert max(abs(a - float(b)) for a, b in zip(half.probs(()), (F(9, 14), F(4, 14),
                                                                 F(1, 14)), strict=True)) < 1e-15


@pytest.mark.parametrize("kwargs", [
    {"top_k": 0}, {"top_k": -1}, {"top_k": True}, {"top_k": 1.5},
    {"top_p": 0}, {"top_p": F(3, 2)}, {"top_p": -0.1}, {"top_p": math.nan}, {"top_p": math.inf},
    {"min_p": 1}, {"min_p": -0.1}, {"min_p": math.nan}, {"min_p": "0.1"},
    {"temperature": 0}, {"temperature": -1}, {"temperature": math.nan},
    {"temperature": math.inf}, {"temperature": 0.7},
    {"order": ("temperature", "top_k", "top_p")}, {"order": "temperature"},
    {"order": ("temperature", "top_k", "top_k", "min_p")}, {"exact": "yes"},
], ids=str)
def test_bad_settings_raise_invalid_parameter_error(kwargs: dict[str, object]) -> None:
    with pytest.raises(dr.InvalidParameterError):
        dr.processed(dr.TableLM.context_free(ROW), **kwargs)  # type: ignore[arg-type]


def test_a_bad_row_of_the_wrapped_model_is_still_refused() -> None:
    bad = dr.FunctionLM(2, lambda prefix: (F(1, 2), F(1, 3)), name="bad")
    with pytest.raises(dr.InvalidDistributionError, match="bad"):
        dr.processed(bad, top_k=1).probs(())


# -- speculation is lossless w.r.t. the processed target (item 3) -------------------------------


def test_the_issue_example_drafter_and_target_with_different_processors() -> None:
    t = dr.TableLM.random(3, 1, seed=1)
    d = dr.TableLM.random(3, 1, seed=2)
    target = dr.processed(t, temperature=F(1, 2), top_k=2, top_p=F(9, 10))
    drafter = dr.processed(d, top_p=F(1, 2), min_p=F(1, 3), order=VLLM_ORDER)
    dr.assert_lossless(lambda rng: dr.speculative(target, drafter, (), 3, rng, lookahead=2).tokens,
                       target=target, prompt=(), max_new_tokens=3)
    # and not with respect to the raw target
    report = dr.check_lossless(
        lambda rng: dr.speculative(target, drafter, (), 3, rng, lookahead=2).tokens,
        target=t, prompt=(), max_new_tokens=3)
    assert not report.equal


@pytest.mark.parametrize("rule", VERIFY_RULES)
@PROPERTY
@given(pair=model_pairs(max_vocab=3), data=st.data(), lookahead=st.integers(1, 2))
def test_si_is_lossless_wrt_the_processed_target_for_processors_on_both_sides(
        pair: tuple[dr.LanguageModel, dr.LanguageModel], data: st.DataObject, rule: str,
        lookahead: int) -> None:
    t, d = pair
    target = ProcessedLM(t, data.draw(processors(t.vocab_size), label="target processors"))
    drafter = ProcessedLM(d, data.draw(processors(d.vocab_size), label="drafter processors"))
    report = dr.check_lossless(
        lambda rng: dr.speculative(target, drafter, (), 3, rng, lookahead=lookahead,
                                   verify=rule).tokens,  # type: ignore[arg-type]
        target, (), 3, greedy=rule == "greedy")
    assert report.equal, str(report)


@pytest.mark.parametrize("rule", VERIFY_RULES)
@PROPERTY
@given(pair=model_pairs(max_vocab=3), data=st.data())
def test_dsi_is_lossless_wrt_the_processed_target_for_processors_on_both_sides(
        pair: tuple[dr.LanguageModel, dr.LanguageModel], data: st.DataObject, rule: str) -> None:
    t, d = pair
    target = ProcessedLM(t, data.draw(processors(t.vocab_size), label="target processors"))
    drafter = ProcessedLM(d, data.draw(processors(d.vocab_size), label="drafter processors"))
    report = dr.check_lossless(
        lambda rng: dr.dsi(target, drafter, (), 3, rng, lookahead=2, sp_degree=2,
                           verify=rule).tokens,  # type: ignore[arg-type]
        target, (), 3, greedy=rule == "greedy")
    assert report.equal, str(report)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(pair=model_pairs(max_vocab=3, max_context=1), data=st.data(),
       rule=st.sampled_from(VERIFY_RULES), lookahead=st.integers(1, 3))
def test_si_and_dsi_processed_lossless_longer(
        pair: tuple[dr.LanguageModel, dr.LanguageModel], data: st.DataObject, rule: str,
        lookahead: int) -> None:
    t, d = pair
    target = ProcessedLM(t, data.draw(processors(t.vocab_size)))
    drafter = ProcessedLM(d, data.draw(processors(d.vocab_size)))
    for program in (
            lambda rng: dr.speculative(target, drafter, (), 4, rng, lookahead=lookahead,
                                       verify=rule).tokens,  # type: ignore[arg-type]
            lambda rng: dr.dsi(target, drafter, (), 4, rng, lookahead=lookahead, sp_degree=2,
                               verify=rule).tokens):  # type: ignore[arg-type]
        report = dr.check_lossless(program, target, (), 4, greedy=rule == "greedy")
        assert report.equal, str(report)


# -- the zoo's processor mutants (item 5) -------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PROCESSOR_MUTANT_SETTINGS))
def test_a_processor_mutant_promises_the_processed_target_and_is_killed(name: str) -> None:
    mutant = MUTANTS[name]
    settings_ = PROCESSOR_MUTANT_SETTINGS[name]
    t = dr.TableLM.random(3, 1, seed=11)
    promised = mutant.law(t) if mutant.law else t
    assert isinstance(promised, ProcessedLM) and promised.processors == settings_
    kill = hunt(mutant)
    assert kill is not None and kill.tv_distance is not None and kill.tv_distance > F(1, 10)


@pytest.mark.parametrize("name", sorted(PROCESSOR_MUTANT_SETTINGS))
def test_without_its_bug_a_processor_mutant_is_lossless(name: str) -> None:
    """The same decoder (target processed with the mutant's settings, drafter as given) with the
    correct verifier passes the hunt: each kill is due to the bug, not to the processing."""
    correct = _processed_mutant(f"{name}-fixed", "none", PROCESSOR_MUTANT_SETTINGS[name])
    assert hunt(correct) is None


def test_the_raw_q_mutant_is_the_hf_bug_and_its_fix_is_lossless() -> None:
    """HF #47961's fix: hand the verifier the q the drafts were drawn from."""
    t, d = dr.TableLM.random(3, 1, seed=11), dr.TableLM.random(3, 1, seed=12)
    drafting = PROCESSOR_MUTANT_SETTINGS["raw-q-for-processed-draft"]
    target, drafter = ProcessedLM(t, drafting), ProcessedLM(d, drafting)
    dr.assert_lossless(lambda rng: dr.speculative(target, drafter, (), 3, rng, lookahead=2).tokens,
                       target=target, prompt=(), max_new_tokens=3)


# -- the audit's section ------------------------------------------------------------------------


def test_the_processors_section_of_the_audit_passes_and_kills_every_processor_mutant() -> None:
    from dsi_ref.commands.audit import audit_sections
    from dsi_ref.commands.sections.processors import PROCESSOR_COMBINATIONS, processors_section

    assert "processors" in [s.name for s in audit_sections()]
    section = processors_section(quick=True, progress=False)
    assert section.ok
    assert len(section.rows) == 2 * len(PROCESSOR_COMBINATIONS) + len(PROCESSOR_MUTANT_SETTINGS)
    verdicts = [row[5] for row in section.rows]
    assert verdicts[:2 * len(PROCESSOR_COMBINATIONS)] == ["lossless"] * (2 * len(
        PROCESSOR_COMBINATIONS))
    assert all(v.startswith("killed: ") for v in verdicts[2 * len(PROCESSOR_COMBINATIONS):])
