"""Tree speculation (`dsi_ref.decoders.tree`, issue #14 item 3): every rule of
`TREE_VERIFY_RULES` is lossless, exactly, on small models with zeros, ties, ``p == q`` and EOS,
for one-step multi-draft and for trees; the greedy rule gives the target's greedy sequence; the
chain tree with ``"rrs"`` is SI draw for draw; the counters and the virtual clock follow the
documented cost model. The default run stays small (a few seconds); the full sweep is ``slow``.
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest

import dsi_ref as dr
from dsi_ref.audit.suite import ModelPair, default_suite
from dsi_ref.decoders.tree import (
    TREE_RULES,
    EagleTopK,
    Traversal,
    TreeRule,
    check_tree,
    top_k,
    tree_speculative,
)

RULES = dr.TREE_VERIFY_RULES
TREES = [(1,), (2,), (3,), (2, 1), (2, 2)]
SUITE = {pair.name: pair for pair in default_suite()}


def _report(pair: ModelPair, rule: str, tree: tuple[int, ...], n: int) -> dr.LosslessReport:
    return dr.check_lossless(
        lambda rng: tree_speculative(pair.target, pair.drafter, pair.prompt, n, rng, tree=tree,
                                     verify=rule).tokens,  # type: ignore[arg-type]
        pair.target, pair.prompt, n, greedy=rule == "greedy")


def test_the_public_names_are_the_contract() -> None:
    assert dr.tree_speculative is tree_speculative
    assert set(RULES) >= {"rrs", "rrs_without_replacement", "eagle_topk", "traversal", "greedy"}
    assert set(TREE_RULES) == set(RULES)
    assert [TREE_RULES[name].name for name in RULES] == list(RULES)


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("tree", TREES, ids=str)
@pytest.mark.parametrize("model", ["zeros", "ties", "p==q", "eos"])
def test_every_rule_is_lossless_on_edge_case_models(rule: str, tree: tuple[int, ...],
                                                    model: str) -> None:
    report = _report(SUITE[model], rule, tree, 3)
    assert report.equal, str(report)


@pytest.mark.parametrize("rule", RULES)
def test_every_rule_is_lossless_on_a_random_bigram_pair_tree_2x2_four_tokens(rule: str) -> None:
    target = dr.TableLM.random(3, 1, seed=11, name="target")
    drafter = dr.TableLM.random(3, 1, seed=12, name="drafter")
    report = _report(ModelPair("bigram", target, drafter), rule, (2, 2), 4)
    assert report.equal, str(report)
    assert report.outcomes >= (1 if rule == "greedy" else 10)  # a real law, not a point


@pytest.mark.slow
@pytest.mark.parametrize("rule", RULES)
def test_every_rule_is_lossless_on_the_whole_suite(rule: str) -> None:
    for pair in default_suite():
        for tree in [*TREES, (1, 1, 1), (3, 2)]:
            for n in (3, 4):
                report = _report(pair, rule, tree, n)
                assert report.equal, f"{pair.name} tree={tree} N={n}: {report}"


def test_the_chain_tree_with_rrs_is_si_draw_for_draw() -> None:
    """Sibling 0 uses SI's keys, so tree (1, 1) with "rrs" is SI with lookahead 2 under the
    same seed: the same tokens, the same virtual time, the same counters."""
    target = dr.TableLM.random(3, 1, seed=11, name="target")
    drafter = dr.TableLM.random(3, 1, seed=12, name="drafter")
    latency = dr.Latency(drafter=F(1, 10))
    for seed in range(100):
        si = dr.speculative(target, drafter, (), 6, dr.Sampler(seed), 2, latency=latency)
        tree = tree_speculative(target, drafter, (), 6, dr.Sampler(seed), tree=(1, 1),
                                latency=latency)
        assert (tree.tokens, tree.time, tree.stats) == (si.tokens, si.time, si.stats), seed


def test_traversal_accepts_more_than_token_level_verification_on_a_chain() -> None:
    """On a chain, Traversal Verification is block verification: more accepted drafts than SI's
    token-level rejection sampling (exact expectations, pinned), both lossless."""
    target = dr.TableLM.random(3, 1, seed=11, name="target")
    drafter = dr.TableLM.random(3, 1, seed=12, name="drafter")

    def accepted(rule: str) -> F:
        return F(dr.exact_expectation(lambda rng: tree_speculative(
            target, drafter, (), 4, rng, tree=(1, 1, 1),
            verify=rule).stats["accepted"]))  # type: ignore[arg-type]

    assert accepted("rrs") == F(131, 108)
    assert accepted("traversal") == F(185, 144)
    assert accepted("traversal") > accepted("rrs")


def test_greedy_follows_the_target_argmax_and_counts_matches() -> None:
    target = dr.TableLM.context_free((F(1, 2), F(1, 3), F(1, 6)), name="t")
    drafter = dr.TableLM.context_free((F(1, 6), F(1, 3), F(1, 2)), name="d")
    run = tree_speculative(target, drafter, (), 4, dr.Sampler(0), tree=(2, 2), verify="greedy")
    assert run.tokens == (0, 0, 0, 0)
    # top-2 of q is (2, 1): argmax p = 0 never matches; every iteration commits one token
    assert run.stats["accepted"] == 0 and run.stats["iterations"] == 4
    wide = tree_speculative(target, drafter, (), 4, dr.Sampler(0), tree=(3, 3), verify="greedy")
    assert wide.tokens == (0, 0, 0, 0) and wide.stats["accepted"] == 2  # depth 2, then bonus


def test_top_k_is_deterministic_ties_to_the_lowest_id_and_skips_zeros() -> None:
    assert top_k((F(1, 4), F(1, 2), F(1, 4)), 2) == [1, 0]
    assert top_k((F(0), F(1, 2), F(1, 2)), 3) == [1, 2]


@pytest.mark.parametrize("rule", RULES)
def test_counters_and_virtual_clock_follow_the_cost_model(rule: str) -> None:
    """One drafter forward per drafted level, one target forward per iteration; every committed
    token is an accepted draft, a residual or a bonus."""
    target = dr.TableLM.random(3, 1, seed=11, name="target")
    drafter = dr.TableLM.random(3, 1, seed=12, name="drafter")
    c = F(1, 10)
    for seed in range(20):
        run = tree_speculative(target, drafter, (), 7, dr.Sampler(seed), tree=(2, 2),
                               verify=rule, latency=dr.Latency(drafter=c))  # type: ignore[arg-type]
        s = run.stats
        assert s["accepted"] + s["rejected"] + s["bonus"] == len(run.tokens) == 7
        assert s["target_forwards"] == s["iterations"]
        assert s["rejected"] + s["bonus"] == s["iterations"]
        assert run.time == s["drafter_forwards"] * c + s["target_forwards"]
        assert s["drafts"] >= s["accepted"]


def test_no_draft_when_one_token_is_left() -> None:
    target = dr.TableLM.random(3, 1, seed=11, name="target")
    run = tree_speculative(target, target, (), 1, dr.Sampler(0), tree=(2, 2))
    assert run.stats["drafts"] == 0 and run.stats["drafter_forwards"] == 0
    assert run.stats["bonus"] == 1


def test_eos_ends_a_branch_and_the_run() -> None:
    pair = SUITE["eos"]
    for seed in range(30):
        run = tree_speculative(pair.target, pair.drafter, (), 6, dr.Sampler(seed), tree=(2, 2),
                               verify="traversal")
        assert 2 not in run.tokens[:-1]  # nothing is committed after EOS


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"tree": ()}, "tree"), ({"tree": (0,)}, "tree"), ({"tree": "2"}, "tree"),
    ({"verify": "nope"}, "verify"), ({"verify": "rejection"}, "verify"),
    ({"latency": 1}, "latency"),
])
def test_bad_arguments_are_refused(kwargs: dict[str, object], match: str) -> None:
    t = dr.TableLM.random(3, 1, seed=11)
    with pytest.raises(dr.InvalidParameterError, match=match):
        tree_speculative(t, t, (), 2, dr.Sampler(0), **kwargs)  # type: ignore[arg-type]
    assert check_tree([2, 1]) == (2, 1)


def test_a_rule_object_is_accepted_and_the_mutant_pattern_is_caught() -> None:
    """A custom rule passes as ``verify=``: EAGLE's point-mass children verified with the soft q
    (the dispute of SafeAILab/EAGLE #183/#221) is lossy, the correct point-mass test is not."""

    class SoftQ(EagleTopK):
        accept = TreeRule.accept
        update = TreeRule.update

    pair = SUITE["zeros"]
    assert _report(pair, EagleTopK(), (2,), 3).equal  # type: ignore[arg-type]
    lossy = _report(pair, SoftQ(), (2,), 3)  # type: ignore[arg-type]
    assert not lossy.equal and lossy.tv_distance > 0


def test_traversal_update_keeps_the_subtree_acceptance_invariant() -> None:
    """``α(P) ← r / (1 − α + r)``: after a rejected child whose subtree accepts with
    ``Σ min(α B, S)``, the parent still accepts with total probability ``α``."""
    rule = Traversal()
    alpha, b, s = F(2, 3), [F(1, 2), F(1, 4), F(1, 4)], [F(1, 6), F(1, 6), F(2, 3)]
    new_alpha, new_b = rule.reject_child(alpha, b, s, 2)
    through_child = sum(min(alpha * x, y) for x, y in zip(b, s, strict=True))
    assert through_child + (1 - through_child) * new_alpha == alpha
    assert sum(new_b) == 1 and new_b[2] == 0


# -- rows that do not sum to 1: read as the laws they stand for ----------------------------------

#: Rows scaled by this: exact rows summing to ``1 − 2^-40`` (a model may vouch for them), and
#: their float copies (within validation's 1e-9).
SHORT = 1 - F(1, 2**40)


class ShortRows:
    """``model`` with every row scaled by `SHORT`: exact (`Fraction` s, ``prevalidated``, as
    validation wants exact rows to sum to 1) or floats (validated). Its law is the model's: a
    row stands for each entry over the row's sum."""

    def __init__(self, model: dr.LanguageModel, floats: bool) -> None:
        self.model, self.floats = model, floats
        self.prevalidated = not floats
        self.vocab_size, self.eos = model.vocab_size, model.eos

    def probs(self, prefix: tuple[int, ...]) -> tuple[F | float, ...]:
        row = tuple(F(x) * SHORT for x in self.model.probs(prefix))
        return tuple(float(x) for x in row) if self.floats else row


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("tree", [(2, 1), (3,)], ids=str)
@pytest.mark.parametrize("floats", [False, True], ids=["exact", "float"])
@pytest.mark.parametrize("model", ["p==q", "bigram", "zeros"])
def test_every_rule_is_lossless_on_rows_that_do_not_sum_to_one(
        rule: str, tree: tuple[int, ...], floats: bool, model: str) -> None:
    """Regression: ``rrs_without_replacement`` and ``traversal`` compared ``p`` as it is with
    the renormalised ``q_1``; on ``p == q`` rows summing to less than 1 that rejected with
    probability ``1 − Σ q`` and then found the residual ``(p − q_1)+`` empty (`NumericalError`;
    traversal: a categorical of zeros), exact rows and floats alike, and every sampling rule
    was off by ~1e-12 on exact rows (``p`` against ``q`` with different sums). Now ``p`` and
    ``q`` are normalised alike: exact rows are lossless exactly (no float crept in), floats
    within the default tolerance."""
    pair = SUITE[model]
    target, drafter = ShortRows(pair.target, floats), ShortRows(pair.drafter, floats)
    short = ModelPair(f"short {model}", target, drafter, pair.prompt)
    report = _report(short, rule, tree, 3)
    assert report.equal, str(report)
    if not floats:
        assert report.identical and report.float_tolerance == 0, str(report)


def test_p_and_q_are_normalised_alike() -> None:
    """The first child's proposal and ``p'`` are the same law on ``p == q`` rows that do not
    sum to 1 (bitwise, in floats), so its test ``min(1, p'(x)/q_1(x))`` accepts surely; int
    rows stay exact."""
    row = tuple(float(F(x) * SHORT) for x in (F(1, 3), F(1, 6), F(1, 2)))
    assert sum(row) != 1
    for name in ("rrs", "rrs_without_replacement", "traversal"):
        rule = TREE_RULES[name]
        (_, proposal), = rule.children(row, 1, dr.Sampler(0), ())
        assert rule.start(row) == list(proposal), name
    assert TREE_RULES["rrs"].start((1, 0, 1)) == [F(1, 2), 0, F(1, 2)]
    assert all(type(x) is F for x in TREE_RULES["rrs"].start((1, 0, 1)))
