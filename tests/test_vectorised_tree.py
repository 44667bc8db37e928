"""The tree rules on numpy rows (`dsi_ref.backends.engine.vectorised_tree`) decide as the reference.

For every rule of `TREE_VERIFY_RULES`, a tree drafted and verified by the vectorised rule on
float64 arrays must be the reference rule's tree and verdict on the same rows as tuples of Python
floats, under the same ``Sampler`` seed: the same children (draws, top-k with ties), the same
accepted path and the same token after it (or the same error). Rows come from hypothesis (short,
with zeros, ties and ``p == q``) and, at the engine's vocabulary of 32 000, from softmaxes of
related logits, where the draws take the certified search of `dsi_ref.backends.engine.vectorised`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsi_ref import Sampler
from dsi_ref.backends.engine.vectorised_tree import top_k_index, vectorised_tree_rule
from dsi_ref.base.errors import InvalidParameterError, NumericalError
from dsi_ref.decoders.tree import TREE_VERIFY_RULES, TreeNode, TreeRule, as_tree_rule, top_k

Outcome = tuple[object, ...]


def _outcome(rule: TreeRule, rows_q: Sequence[Any], rows_p: Sequence[Any], widths: Sequence[int],
             seed: int, context: tuple[int, ...], eos: int | None) -> Outcome:
    """Draft a tree of ``widths`` with ``rule`` as `TreeRun.draft` does (no children and no
    ``p`` after an EOS; the ``n``-th node made reads row ``n`` of each bank, modulo its
    length), verify it, and return every node's (token, sibling) and the verdict, or the
    error's type."""
    rng = Sampler(seed)
    root = TreeNode(None, context)
    nodes, level = [root], [root]
    try:
        for width in widths:
            level = [node for node in level if node.token is None or node.token != eos]
            nxt: list[TreeNode] = []
            for node in level:
                node.q = rows_q[nodes.index(node) % len(rows_q)]
                for j, (x, law) in enumerate(rule.children(node.q, width, rng, node.context)):
                    child = TreeNode(x, node.context + (x,), j, law)
                    node.children.append(child)
                    nxt.append(child)
                    nodes.append(child)
            level = nxt
        for n, node in enumerate(nodes):
            if node.token is None or node.token != eos:
                node.p = rows_p[n % len(rows_p)]
        verdict = rule.verify(root, rng, eos)
    except (NumericalError, InvalidParameterError) as error:
        return ("error", type(error).__name__)
    return tuple((node.token, node.sibling) for node in nodes), verdict


def _same(name: str, rows_q: np.ndarray, rows_p: np.ndarray, widths: Sequence[int], seed: int,
          context: tuple[int, ...] = (), eos: int | None = None) -> Outcome:
    """The reference's outcome (rows as tuples of floats), asserted equal to the vectorised
    rule's (float64 rows)."""
    reference = _outcome(as_tree_rule(name), [tuple(row.tolist()) for row in rows_q],
                         [tuple(row.tolist()) for row in rows_p], widths, seed, context, eos)
    fast = _outcome(vectorised_tree_rule(name), list(rows_q), list(rows_p), widths, seed,
                    context, eos)
    assert fast == reference
    return reference


_ENTRY = st.sampled_from([0.0, 0.0, 0.1, 0.125, 0.25, 1 / 3, 0.5, 1.0]) | st.floats(1e-6, 1.0)


@st.composite
def _banks(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``q`` and of ``p`` (not normalised; zeros, ties; ``p == q`` at some nodes)."""
    vocab = draw(st.integers(2, 6))
    count = draw(st.integers(1, 4))
    row = st.lists(_ENTRY, min_size=vocab, max_size=vocab).filter(lambda r: max(r) > 0)
    rows_q = np.array(draw(st.lists(row, min_size=count, max_size=count)))
    rows_p = np.array(draw(st.lists(row, min_size=count, max_size=count)))
    for i in draw(st.lists(st.integers(0, count - 1), max_size=count)):
        rows_p[i] = rows_q[i]                                   # p == q at some nodes
    return rows_q, rows_p


@settings(max_examples=25, deadline=None, derandomize=True)
@given(banks=_banks(), widths=st.lists(st.integers(1, 3), min_size=1, max_size=3),
       seed=st.integers(0, 2 ** 32), eos=st.none() | st.integers(0, 5),
       context=st.lists(st.integers(0, 5), max_size=2).map(tuple))
def test_every_rule_decides_like_the_reference_on_short_rows(
        banks: tuple[np.ndarray, np.ndarray], widths: list[int], seed: int, eos: int | None,
        context: tuple[int, ...]) -> None:
    rows_q, rows_p = banks
    for name in TREE_VERIFY_RULES:
        _same(name, rows_q, rows_p, widths, seed, context, eos)


@settings(max_examples=15, deadline=None, derandomize=True)
@given(banks=_banks(), widths=st.lists(st.integers(1, 3), min_size=1, max_size=3),
       seed=st.integers(0, 2 ** 32))
def test_laws_computed_when_first_read_decide_alike_on_short_rows(
        banks: tuple[np.ndarray, np.ndarray], widths: list[int], seed: int) -> None:
    with mock.patch("dsi_ref.backends.engine.vectorised_tree._LAZY", 1):   # every law lazy
        for name in TREE_VERIFY_RULES:
            _same(name, *banks, widths, seed)


def _softmax_banks(gen: np.random.Generator, vocab: int, count: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Drafter and target rows: softmaxes of related logits (as the engine's models give)."""
    logits = gen.standard_normal((count, vocab)) * 4
    noisy = logits + gen.standard_normal((count, vocab)) * 1.2

    def softmax(x: np.ndarray) -> np.ndarray:
        e = np.exp(x - x.max(axis=1, keepdims=True))
        out: np.ndarray = e / e.sum(axis=1, keepdims=True)
        return out

    return softmax(noisy), softmax(logits)


def _long_rows(vocab: int, seeds: int, widths: tuple[int, ...]) -> None:
    gen = np.random.default_rng(vocab)
    rows_q, rows_p = _softmax_banks(gen, vocab, 3)
    rows_p[1] = rows_q[1]                    # p == q at one node in three: long accepted paths
    for name in TREE_VERIFY_RULES:
        for seed in range(seeds):
            _same(name, rows_q, rows_p, widths, seed, (seed, 1))


def test_every_rule_decides_like_the_reference_on_long_float64_rows() -> None:
    _long_rows(2048, 2, (2, 1))              # >= 4 blocks of 128: the certified search draws


@pytest.mark.slow
def test_every_rule_decides_like_the_reference_at_the_engines_vocabulary() -> None:
    _long_rows(32000, 4, (3, 2, 1))


@settings(max_examples=30, deadline=None, derandomize=True)
@given(row=st.lists(_ENTRY | st.just(float("nan")), min_size=1, max_size=12),
       k=st.integers(1, 14))
def test_top_k_on_a_float64_row_is_the_references(row: list[float], k: int) -> None:
    assert top_k_index(np.array(row), k) == top_k(row, k)


def test_every_built_in_rule_has_a_vectorised_version_and_others_are_kept() -> None:
    for name in TREE_VERIFY_RULES:
        reference, fast = as_tree_rule(name), vectorised_tree_rule(name)
        assert type(fast) is not type(reference) and isinstance(fast, type(reference))
        assert fast.name == name and fast.greedy == reference.greedy
        assert type(vectorised_tree_rule(reference)) is type(fast)

    class Custom(TreeRule):
        pass

    custom = Custom()
    assert vectorised_tree_rule(custom) is custom        # a subclass keeps its own steps


def test_bad_input_is_refused_as_the_reference_refuses_it() -> None:
    with pytest.raises(InvalidParameterError, match="verify must be one of"):
        vectorised_tree_rule("nope")  # type: ignore[arg-type]
    good = np.array([[0.5, 0.25, 0.25]])
    cases = {"negative q": (np.array([[0.75, -0.25, 0.5]]), good),
             "zero q": (np.zeros((1, 3)), good),
             "NaN q": (np.array([[0.5, np.nan, 0.5]]), good),
             "zero p": (good, np.zeros((1, 3)))}
    refused = {"negative q": ("rrs", "rrs_without_replacement", "traversal"),
               "zero q": ("rrs",), "NaN q": ("rrs",),     # no q left: a leaf for the others
               "zero p": ("rrs", "rrs_without_replacement", "eagle_topk", "traversal")}
    for label, (rows_q, rows_p) in cases.items():
        for name in TREE_VERIFY_RULES:
            out = _same(name, rows_q, rows_p, (2,), 0)
            assert (out[0] == "error") == (name in refused[label]), (label, name, out)


@pytest.mark.parametrize("vocab", [7, 2048])              # at once, and when first read
def test_a_law_is_the_references_and_no_step_writes_into_it(vocab: int) -> None:
    from dsi_ref.decoders.tree import normalise

    row = np.random.default_rng(vocab).random(vocab) * (np.arange(vocab) % 3 > 0)
    rule = vectorised_tree_rule("eagle_topk")
    law = rule.law(row)
    assert np.asarray(law).tolist() == normalise(row.tolist())    # entry for entry
    before = np.array(law).tolist()
    zeroed = rule.without(law, 1)
    assert zeroed[1] == 0 and np.asarray(law).tolist() == before  # a copy was zeroed
    assert rule.law(zeroed, rule.mass(zeroed)).tolist() == normalise(  # type: ignore[attr-defined]
        np.asarray(zeroed).tolist())
