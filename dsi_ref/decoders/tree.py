"""Multi-draft and tree speculation: draft a token tree, verify it with one target forward.

``tree_speculative(target, drafter, prompt, N, rng, tree=(2, 1), verify=rule)`` generalises SI
(`dsi_ref.decoders.speculative`): the window is a tree whose level ``d`` gives each node of
depth ``d`` ``tree[d]`` children (``tree=(2, 1)``: two children of the root, one child each:
two chains of depth 2; ``tree=(k,)``: one-step multi-draft with ``k`` drafts; ``tree=(1,) * m``:
SI with lookahead ``m``). Notation as in `dsi_ref.decoders.verification`: ``p`` is the target's
row and ``q`` the drafter's, at the same context.

One iteration:

1. **draft**: depth ``m = min(len(tree), remaining − 1)`` (room for the token the target decides
   after the accepted path); level by level, every node that is not EOS gets its children from
   the rule's `TreeRule.children`. One drafter forward per level (the level's nodes batched).
2. **score**: one target forward gives ``p`` at every node.
3. **verify**: the rule picks an accepted path (drafted tokens) from the root down, and the
   token after it: a **residual** (the path stopped at a node whose children were all rejected)
   or a **bonus** (the path reached a leaf). An accepted EOS ends the run.

On the virtual clock an iteration costs ``m·c + 1`` (``c`` per level, batched, and one target
forward), as SI with lookahead ``m``.

Rules (`TREE_VERIFY_RULES`), one class each, their steps overridable (the zoo's mutants override
one step):

* ``"rrs"`` — SpecInfer's multi-step speculative sampling (recursive rejection sampling):
  children ``x_j ~ q`` i.i.d.; at a node, with ``p' = p``, child ``j`` is accepted with
  probability ``min(1, p'(x_j)/q(x_j))``, else ``p' ← norm((p' − q)+)``; after every child is
  rejected, the residual token is drawn from ``p'``. `RecursiveRejection`.
* ``"rrs_without_replacement"`` — the same with children drawn without replacement:
  ``x_j ~ q_j``, ``q_j = norm(q with x_1..x_{j−1} zeroed)``, and the test and the residual update
  use ``q_j``. `RecursiveRejectionWithoutReplacement`.
* ``"eagle_topk"`` — EAGLE-2/3: the children are the ``k`` most likely tokens of ``q`` (ties: lowest
  id; tokens with ``q = 0`` are not proposed), deterministic, so each is a point-mass proposal:
  accept ``x`` with probability ``p'(x)``; after a rejection ``p' ← norm(p' with x zeroed)``
  (SafeAILab/EAGLE ``evaluate_posterior``, issue #171). `EagleTopK`.
* ``"traversal"`` — Traversal Verification (Weng et al., arXiv 2505.12398): leaf to root, in
  post-order, each node accepted with the sequence-level probability ``α``; children drawn without
  replacement. `Traversal` (its docstring gives the update, derived here).
* ``"greedy"`` — children are the top-``k`` of ``q``; the path follows the target's argmax while
  a child matches it; the token after it is ``argmax p``. `GreedyTree`.

Keys. Every draw is keyed ``(role, position, context)`` as in `dsi_ref.decoders.verification`;
the sibling index ``j`` goes into the role: ``"draft"``, ``"accept"`` for ``j = 0`` (so
``tree=(1,) * m`` with ``"rrs"`` makes SI's draws, one by one) and ``"draft#j"``, ``"accept#j"``
for ``j ≥ 1``; the residual is ``("residual", i, ctx)``, the bonus ``("target", i, ctx)``.
``context`` is the generated tokens before the position, drafted ones included, so a key keeps
the shape that `dsi_ref.base.randomness.merge_point` and the exact engine parse.

Row arithmetic. Every step reads and builds rows only through `TreeRule`'s row methods (`law`,
``mass``, ``excess``, ``without``, ``as_row``, ``draw``, ``best``, ``most_likely``);
`dsi_ref.backends.engine.vectorised_tree` overrides those alone, with numpy on float64 rows, so
the engine's tree rules are these rules (same numbers, same keyed draws).

Rows as laws. A row stands for each entry over the row's sum (the library's convention:
`dsi_ref.audit.exact.rows.exact_row`; ``rng.categorical`` draws that way). The sampling rules
compare ``p`` with a proposal law, so both sides are read as laws, the same way (`normalise`):
``p'`` starts as ``norm(p)`` (`TreeRule.start`, Traversal's ``B``) and a child's proposal is
``norm(q)`` or ``q_j`` (a `TreeNode.proposal`). `Fraction` rows stay exact (an exact division),
and float ``p == q`` rows give bitwise equal laws. So on rows that do not sum to 1 (float rows,
exact rows a model vouches for) the rules stay exactly lossless for the laws the rows stand for,
and in exact arithmetic a residual is empty only when ``p' = q_j``, where no child is rejected
and none is needed. (`GreedyTree` reads ``p`` as it is: its ``argmax`` is the reference's.)
(Comparing ``p`` as it is with a renormalised ``q`` made ``(p − q_1)+`` empty on ``p == q`` rows
summing to less than 1, after a rejection of probability ``1 − Σ q``.)
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal, NamedTuple, TypeAlias

from ..base.errors import InvalidParameterError, NumericalError
from ..base.exact_hooks import exact_hooks
from ..base.latency import Latency
from ..base.models import LanguageModel, Number, Prefix, sequential_sum
from ..base.randomness import Randomness
from ..base.result import Run
from ..base.validate import check_int
from .common import Recorder, check_inputs, model_reader
from .verification import argmax, path_weight, stop_weight, weighted_residual

__all__ = ["STATS", "TREE_RULES", "TREE_VERIFY_RULES", "EagleTopK", "GreedyTree",
           "RecursiveRejection", "RecursiveRejectionWithoutReplacement", "Traversal",
           "TreeNode", "TreeRule", "TreeRun", "TreeVerdict", "TreeVerifyRule", "as_tree_rule",
           "check_tree", "normalise", "role", "top_k", "tree_speculative"]

TreeVerifyRule: TypeAlias = Literal["rrs", "rrs_without_replacement", "eagle_topk", "traversal",
                                    "greedy"]
TREE_VERIFY_RULES: tuple[TreeVerifyRule, ...] = ("rrs", "rrs_without_replacement", "eagle_topk",
                                                 "traversal", "greedy")

#: The counters of a tree run (`Run.stats`), as SI's.
STATS = ("iterations", "drafts", "accepted", "rejected", "bonus", "target_forwards",
         "drafter_forwards")

Row = Sequence[Number]


def role(name: str, sibling: int) -> str:
    """The role of sibling ``sibling``'s draw: ``name`` for the first, ``name#j`` after."""
    return name if sibling == 0 else f"{name}#{sibling}"


def normalise(weights: Sequence[Number]) -> list[Number]:
    """``weights / Σ weights``: the law a row of weights stands for (`Fraction` s and ints
    exactly, as `Fraction` s; floats in float64); `NumericalError` when nothing is left (float
    rounding)."""
    total = sum(weights, Fraction(0))  # int weights: an exact division, not a float one
    if not total > 0:
        raise NumericalError(f"a tree rule's distribution has no mass left: {list(weights)!r} "
                             "(float rounding in p or q)")
    return [w / total for w in weights]


def top_k(draft_probs: Row, k: int) -> list[int]:
    """The ``k`` most likely tokens of ``q`` (ties: lowest id), those with ``q > 0`` only."""
    order = sorted((t for t in range(len(draft_probs)) if draft_probs[t] > 0),
                   key=lambda t: (-draft_probs[t], t))
    return order[:k]


@dataclass(eq=False)
class TreeNode:
    """A node of the draft tree: its ``token`` (None at the root), the ``context`` of its children
    (the generated tokens up to and including it), its ``sibling`` index, the ``proposal`` law
    its token was drawn from (None at the root; the drafter's row for a point-mass child), the
    drafter's row ``q`` and the target's row ``p`` at ``context``, and its ``children``."""

    token: int | None
    context: tuple[int, ...]
    sibling: int = 0
    proposal: Row | None = None
    q: Row | None = None
    p: Row | None = None
    children: list[TreeNode] = field(default_factory=list)


class TreeVerdict(NamedTuple):
    """What verification commits: the accepted drafted tokens, then ``last`` (None when the path
    ends at an accepted EOS) of kind ``"rejected"`` (a residual token) or ``"bonus"``."""

    path: tuple[int, ...]
    last: int | None
    kind: Literal["rejected", "bonus", "eos"]


class TreeRule:
    """A tree verification rule: how a node's children are drafted and how the tree is decided.

    The base class is SpecInfer's recursive rejection sampling with i.i.d. children
    (``"rrs"``); the other rules override steps. ``greedy`` says whether the reference is the
    target's greedy sequence.
    """

    name = "rrs"
    greedy = False

    # -- row arithmetic: every step below reads and builds rows through these, and only these
    # (`dsi_ref.backends.engine.vectorised_tree` overrides them with numpy on float64 rows) ---
    def law(self, weights: Row, mass: Number | None = None) -> Row:
        """The law a row of weights stands for: `normalise` (a new row). ``mass``: ``Σ weights``
        (`mass`) when the caller has it, so that a faster row arithmetic need not sum again."""
        return normalise(weights)

    def mass(self, weights: Row) -> Number:
        """``Σ weights`` (`sequential_sum`: left to right on every Python version)."""
        return sequential_sum(weights)

    def excess(self, weight: Number, target: Row, proposal: Row) -> Row:
        """``(w · p' − q)+``: `weighted_residual` (``w = 1``: the residual ``(p' − q)+``)."""
        return weighted_residual(weight, target, proposal)

    def without(self, weights: Row, token: int) -> Row:
        """A copy of ``weights`` with ``token``'s entry zeroed."""
        out = list(weights)
        out[token] = 0 * out[token]
        return out

    def as_row(self, weights: Row) -> Row:
        """``weights`` as the rule's own row, unchanged (a list copy; no step writes into it)."""
        return list(weights)

    def draw(self, weights: Row, rng: Randomness, key: tuple[str, int, tuple[int, ...]]) -> int:
        """A token from ``weights`` (normalised): ``rng.categorical(weights, key)``."""
        return rng.categorical(weights, key=key)

    def best(self, weights: Row) -> int:
        """The most likely token, ties to the lowest id: `argmax`."""
        return argmax(weights)

    def most_likely(self, weights: Row, k: int) -> list[int]:
        """The ``k`` most likely tokens with a positive weight: `top_k`."""
        return top_k(weights, k)

    # -- drafting ------------------------------------------------------------------------------
    def children(self, draft_probs: Row, k: int, rng: Randomness,
                 context: tuple[int, ...]) -> list[tuple[int, Row]]:
        """``k`` children after ``context`` and the law each was drawn from: ``x_j ~ q`` i.i.d.,
        the law ``norm(q)`` (`normalise`, as `start` reads ``p``; the draw reads ``q`` as it is,
        as SI's does: ``rng.categorical`` normalises)."""
        i = len(context)
        law = self.law(draft_probs)
        return [(self.draw(draft_probs, rng, (role("draft", j), i, context)), law)
                for j in range(k)]

    # -- top-down verification, step by step ---------------------------------------------------
    def start(self, target_probs: Row) -> Row:
        """``p'`` at a node before its first child is tested: ``norm(p)``, the law the row
        stands for, normalised as the children's proposals are (see the module's "Rows as
        laws")."""
        return self.law(target_probs)

    def accept(self, target: Sequence[Number], proposal: Row, token: int, sibling: int,
               rng: Randomness, context: tuple[int, ...]) -> bool:
        """Accept child ``x`` with probability ``min(1, p'(x)/q_j(x))``."""
        p, q = target[token], proposal[token]
        return bool(p >= q or rng.bernoulli(p / q, key=(role("accept", sibling), len(context),
                                                        context)))

    def update(self, target: Sequence[Number], proposal: Row, token: int) -> Row:
        """``p'`` after child ``x`` (drawn from ``q_j``) was rejected: ``norm((p' − q_j)+)``."""
        return self.law(self.excess(1, target, proposal))

    def residual(self, target: Sequence[Number], rng: Randomness,
                 context: tuple[int, ...]) -> int:
        """The token after the path when every child of its last node was rejected: ``~ p'``."""
        return self.draw(target, rng, ("residual", len(context), context))

    def bonus(self, target_probs: Row, rng: Randomness, context: tuple[int, ...]) -> int:
        """The token after a path that reached a leaf: ``~ p``."""
        return self.draw(target_probs, rng, ("target", len(context), context))

    def verify(self, root: TreeNode, rng: Randomness, eos: int | None) -> TreeVerdict:
        """Decide the tree from the root down: at each node test its children in order (each
        rejection updates ``p'``); descend into the first accepted one; stop with a residual
        token when all are rejected, with a bonus token at a leaf."""
        node = root
        path: list[int] = []
        while True:
            assert node.p is not None
            context = node.context
            if not node.children:
                return TreeVerdict(tuple(path), self.bonus(node.p, rng, context), "bonus")
            target = self.start(node.p)
            for child in node.children:
                assert child.token is not None and child.proposal is not None
                if self.accept(target, child.proposal, child.token, child.sibling, rng,
                               context):
                    break
                target = self.update(target, child.proposal, child.token)
            else:
                return TreeVerdict(tuple(path), self.residual(target, rng, context), "rejected")
            path.append(child.token)
            if child.token == eos:
                return TreeVerdict(tuple(path), None, "eos")
            node = child


#: The rule of ``verify="rrs"`` (`TreeRule` itself).
RecursiveRejection = TreeRule


class RecursiveRejectionWithoutReplacement(TreeRule):
    """Recursive rejection sampling with children drawn without replacement:
    ``x_j ~ q_j = norm(q with x_1..x_{j−1} zeroed)`` (fewer children when ``q`` has fewer
    tokens); the test and the residual update use ``q_j`` (the inherited steps, given the
    child's own proposal)."""

    name = "rrs_without_replacement"

    def children(self, draft_probs: Row, k: int, rng: Randomness,
                 context: tuple[int, ...]) -> list[tuple[int, Row]]:
        """``x_j ~ q_j``, stopping when ``q`` has no token left."""
        out: list[tuple[int, Row]] = []
        left = draft_probs
        for j in range(k):
            mass = self.mass(left)
            if not mass > 0:
                break
            proposal = self.law(left, mass)
            x = self.draw(proposal, rng, (role("draft", j), len(context), context))
            out.append((x, proposal))
            left = self.without(left, x)
        return out


class EagleTopK(TreeRule):
    """EAGLE-2/3's sampling verification: the children are `top_k` of ``q`` (deterministic), each
    a point-mass proposal. Child ``x`` is accepted with probability ``p'(x)`` (``min(1, p'/1)``);
    after a rejection ``p' ← norm(p' with x zeroed)``; the residual is drawn from ``p'``.

    Lossless for any deterministic set of children: ``x_1`` is output with probability
    ``p(x_1)``, ``x_2`` with ``(1 − p(x_1)) · p(x_2)/(1 − p(x_1)) = p(x_2)``, and so on, and the
    residual ``p'`` is ``p`` conditioned on none of them."""

    name = "eagle_topk"

    def children(self, draft_probs: Row, k: int, rng: Randomness,
                 context: tuple[int, ...]) -> list[tuple[int, Row]]:
        """The ``k`` most likely tokens of ``q`` (their law: the drafter's row)."""
        return [(x, draft_probs) for x in self.most_likely(draft_probs, k)]

    def accept(self, target: Sequence[Number], proposal: Row, token: int, sibling: int,
               rng: Randomness, context: tuple[int, ...]) -> bool:
        """Accept the point mass ``x`` with probability ``p'(x)``."""
        p = target[token]
        return bool(p >= 1 or rng.bernoulli(p, key=(role("accept", sibling), len(context),
                                                    context)))

    def update(self, target: Sequence[Number], proposal: Row, token: int) -> Row:
        """``norm(p' with x zeroed)``."""
        return self.law(self.without(target, token))


class GreedyTree(EagleTopK):
    """Temperature 0 on a tree: children `top_k` of ``q``; a child is accepted iff it is
    ``argmax p``; the token after the path is ``argmax p``. The reference is the target's greedy
    sequence."""

    name = "greedy"
    greedy = True

    def start(self, target_probs: Row) -> Row:
        """``p`` as it is: no division that could round two entries into a tie, so that
        ``argmax`` is the target's greedy choice."""
        return self.as_row(target_probs)

    def accept(self, target: Sequence[Number], proposal: Row, token: int, sibling: int,
               rng: Randomness, context: tuple[int, ...]) -> bool:
        """``x = argmax p``."""
        return token == self.best(target)

    def update(self, target: Sequence[Number], proposal: Row, token: int) -> Row:
        """Nothing changes: the next child is compared with the same ``argmax p``."""
        return self.as_row(target)

    def residual(self, target: Sequence[Number], rng: Randomness,
                 context: tuple[int, ...]) -> int:
        """``argmax p``."""
        return self.best(target)

    def bonus(self, target_probs: Row, rng: Randomness, context: tuple[int, ...]) -> int:
        """``argmax p``."""
        return self.best(target_probs)


class Traversal(RecursiveRejectionWithoutReplacement):
    """Traversal Verification (Weng et al. 2025, arXiv 2505.12398), children drawn without
    replacement (`RecursiveRejectionWithoutReplacement.children`).

    Every node ``Y`` with parent ``P`` carries ``α(Y) = min(1, α(P) · B_P(y) / S_P(y))`` (the
    root: ``α = 1``), where ``B_P`` is the target's law at ``P`` (``norm(p)``, `TreeRule.start`,
    or its residual) and ``S_P`` the law ``y`` was drawn from. The tree is visited in
    post-order: the first leaf is accepted with probability ``α`` (the whole path from the root
    to it at once); if it is rejected it is deleted and its parent is updated, with
    ``r = Σ (α(P) B_P − S_P)+``:

    * ``B_P ← norm((α(P) B_P − S_P)+)``;
    * ``α(P) ← r / (1 − α(P) + r)`` (``1 − α(P) + r = 1 − Σ min(α(P) B_P, S_P)`` is the
      probability that the child's subtree accepts nothing);
    * ``S_P`` loses the token (the next sibling's law, `TreeNode.proposal`);

    and the ``α`` of the remaining subtrees are recomputed. A node whose children are all
    deleted is a leaf; accepted, the token after it is drawn from its ``B`` (``p`` at a leaf of
    the drafted tree: a bonus; the updated ``B``: a residual). The root, its ``α`` staying 1, is
    accepted when all its children are deleted. On a chain this is Sun et al.'s block
    verification. The update of ``α(P)`` is derived from the invariant "a subtree whose root has
    ``α`` accepts one of its nodes with probability ``α``, and the continuation after ``P``
    follows ``B_P``"; the exact engine checks the result (docs/tree-verification.md).
    """

    name = "traversal"

    def path_alpha(self, alpha: Number, target: Sequence[Number], proposal: Row,
                   token: int) -> Number:
        """``α(Y) = min(1, α(P) · B_P(y) / S_P(y))`` (`path_weight`)."""
        return path_weight(alpha, target[token], proposal[token])

    def reject_child(self, alpha: Number, target: Sequence[Number], proposal: Row,
                     token: int) -> tuple[Number, Row]:
        """``(α(P), B_P)`` after a child's subtree accepted nothing (see the class docstring):
        `weighted_residual` and `stop_weight`, as block verification's ``h_i``."""
        weights = self.excess(alpha, target, proposal)
        r = self.mass(weights)
        if not r > 0:  # P accepts nothing more (α(P) = 0): B_P is never drawn from again
            return 0 * r, weights
        return stop_weight(alpha, r), self.law(weights, r)

    def accept_node(self, alpha: Number, node: TreeNode, rng: Randomness) -> bool:
        """Accept the path ending at ``node`` (a leaf now) with probability ``α(node)``."""
        assert node.token is not None
        context = node.context[:-1]
        return bool(alpha >= 1 or rng.bernoulli(alpha, key=(role("accept", node.sibling),
                                                             len(context), context)))

    def visit(self, node: TreeNode, alpha: Number, rng: Randomness, eos: int | None,
              root: bool) -> TreeVerdict | None:
        """Post-order traversal of ``node``'s subtree: the verdict of the first accepted node
        (its path relative to ``node``), or None if the subtree accepted nothing."""
        target: Row = self.start(node.p) if node.p is not None else []
        tried = False
        for child in node.children:
            assert child.token is not None and child.proposal is not None
            tried = True
            got = self.visit(child, self.path_alpha(alpha, target, child.proposal, child.token),
                             rng, eos, False)
            if got is not None:
                return TreeVerdict((child.token, *got.path), got.last, got.kind)
            alpha, target = self.reject_child(alpha, target, child.proposal, child.token)
        if not root and not self.accept_node(alpha, node, rng):
            return None
        if node.token is not None and node.token == eos:
            return TreeVerdict((), None, "eos")
        if tried:
            # Exactly, r = 0 leaves α(P) = 0 (P not accepted) but at the root, where α = 1:
            # there r = 0 means B = S, so the child's α is 1 and it is never deleted.
            if not self.mass(target) > 0:
                raise NumericalError(f"traversal verification accepted the node after "
                                     f"{node.context!r} but its residual is empty: float "
                                     "rounding in p or q")
            return TreeVerdict((), self.residual(target, rng, node.context), "rejected")
        assert node.p is not None
        return TreeVerdict((), self.bonus(node.p, rng, node.context), "bonus")

    def verify(self, root: TreeNode, rng: Randomness, eos: int | None) -> TreeVerdict:
        """Traverse from the first leaf (post-order); the root is accepted last."""
        verdict = self.visit(root, 1, rng, eos, True)
        assert verdict is not None
        return verdict


#: The built-in tree rules by name.
TREE_RULES: dict[str, TreeRule] = {
    "rrs": TreeRule(), "rrs_without_replacement": RecursiveRejectionWithoutReplacement(),
    "eagle_topk": EagleTopK(), "traversal": Traversal(), "greedy": GreedyTree()}


def as_tree_rule(verify: TreeVerifyRule | TreeRule) -> TreeRule:
    """The `TreeRule` for a name of `TREE_VERIFY_RULES` or a rule object."""
    if isinstance(verify, TreeRule):
        return verify
    if isinstance(verify, str) and verify in TREE_RULES:
        return TREE_RULES[verify]
    raise InvalidParameterError(f"verify must be one of {TREE_VERIFY_RULES} or a TreeRule, got "
                                f"{verify!r}")


def check_tree(tree: object) -> tuple[int, ...]:
    """``tree`` as a non-empty tuple of ints ``>= 1`` (children per node at each depth)."""
    if isinstance(tree, str | bytes) or not isinstance(tree, Sequence) or not tree:
        raise InvalidParameterError(f"tree must be a non-empty sequence of child counts, got "
                                    f"{tree!r}")
    return tuple(check_int("tree width", width) for width in tree)


class TreeRun:
    """One run of tree speculation: its state and the steps of an iteration as methods
    (`draft`, `score`, `verify`, `commit`); use `tree_speculative` to run it."""

    def __init__(self, target: LanguageModel, drafter: LanguageModel, prompt: Prefix,
                 max_new_tokens: int, rng: Randomness, tree: tuple[int, ...], rule: TreeRule,
                 latency: Latency) -> None:
        self.target, self.drafter, self.prompt = target, drafter, prompt
        self.n, self.rng, self.tree, self.rule = max_new_tokens, rng, tree, rule
        self.eos = target.eos
        self.read_p = model_reader(target)
        self.read_q = model_reader(drafter)
        self.rec = Recorder(latency, STATS)
        self.stats = self.rec.stats
        self.tokens: list[int] = []
        self.done = False
        self.root = TreeNode(None, ())

    def depth(self) -> int:
        """Levels drafted this iteration: ``min(len(tree), remaining − 1)``."""
        return min(len(self.tree), self.n - len(self.tokens) - 1)

    def drafter_rows(self, level: list[TreeNode]) -> list[Row]:
        """``q`` at each node of a level (one drafter forward; the seam the torch engine
        overrides)."""
        return [self.read_q(self.prompt + node.context) for node in level]

    def target_rows(self, nodes: list[TreeNode]) -> list[Row]:
        """``p`` at each node (the root first, then the tree level by level; one target
        forward; the seam the torch engine overrides)."""
        return [self.read_p(self.prompt + node.context) for node in nodes]

    def draft(self) -> list[TreeNode]:
        """Draft the tree level by level (one drafter forward per level); returns every node."""
        start = len(self.tokens)
        nodes = [self.root]
        level = [self.root]
        for d in range(self.depth()):
            level = [node for node in level if node.token is None or node.token != self.eos]
            if not level:
                break
            for node, row in zip(level, self.drafter_rows(level), strict=True):
                node.q = row
            self.rec.forward("drafter", "draft", (start + d,), self.rng)
            self.stats["drafter_forwards"] += 1
            nxt: list[TreeNode] = []
            for node in level:
                assert node.q is not None
                for j, (x, proposal) in enumerate(self.rule.children(node.q, self.tree[d],
                                                                     self.rng, node.context)):
                    child = TreeNode(x, node.context + (x,), j, proposal)
                    node.children.append(child)
                    nxt.append(child)
            self.stats["drafts"] += len(nxt)
            nodes += nxt
            level = nxt
        return nodes

    def score(self, nodes: list[TreeNode]) -> None:
        """One target forward: ``p`` at every node (none after an EOS)."""
        scored = [node for node in nodes if node.token is None or node.token != self.eos]
        for node, row in zip(scored, self.target_rows(scored), strict=True):
            node.p = row
        start = len(self.tokens)
        deepest = max(len(node.context) for node in nodes) - start
        self.rec.forward("target", "verify" if len(nodes) > 1 else "forward",
                         tuple(range(start, start + deepest + 1)), self.rng)
        self.stats["target_forwards"] += 1

    def commit(self, token: int, kind: str) -> None:
        """Commit one token (trace, counters, EOS)."""
        self.rec.commit((len(self.tokens),), kind)
        self.tokens.append(token)
        self.stats[kind] += 1
        self.done = token == self.eos

    def iterate(self) -> None:
        """Draft, score, verify, commit the accepted path and the token after it."""
        self.stats["iterations"] += 1
        self.root = TreeNode(None, tuple(self.tokens))
        nodes = self.draft()
        self.score(nodes)
        verdict = self.rule.verify(self.root, self.rng, self.eos)
        for token in verdict.path:
            self.commit(token, "accepted")
        if verdict.last is not None:
            self.commit(verdict.last, verdict.kind)

    def state(self) -> Hashable:
        """What the rest of the run depends on (merge points at each iteration's start)."""
        return (self.rec.state(self.tokens), self.done)

    def run(self) -> Run:
        """Iterate until ``N`` tokens or EOS are committed."""
        hooks = exact_hooks(self.rng)  # a free-form merge point at each iteration's start
        while len(self.tokens) < self.n and not self.done:
            if hooks is not None:
                hooks.merge_point(self.state(), entry=self.stats["iterations"] == 0,
                                  committed=tuple(self.tokens))
            self.iterate()
        return self.rec.result(self.tokens)


def tree_speculative(target: LanguageModel, drafter: LanguageModel, prompt: Sequence[int],
                     max_new_tokens: int, rng: Randomness, *, tree: Sequence[int] = (2, 1),
                     verify: TreeVerifyRule | TreeRule = "rrs",
                     latency: Latency | None = None) -> Run:
    """Tree speculation: draft a token tree of widths ``tree``, verify it with one target forward.

    Returns a `Run` whose ``tokens`` follow the target's law exactly for every sampling rule of
    `TREE_VERIFY_RULES` (the greedy target sequence for ``"greedy"``), whatever the drafter;
    ``stats["accepted"]`` counts the drafted tokens committed.
    """
    rule = as_tree_rule(verify)
    widths = check_tree(tree)
    if latency is not None and not isinstance(latency, Latency):
        raise InvalidParameterError("latency must be a dsi_ref.Latency")
    prompt = check_inputs(target, prompt, max_new_tokens, drafter, rng=rng)
    return TreeRun(target, drafter, prompt, max_new_tokens, rng, widths, rule,
                   Latency() if latency is None else latency).run()


