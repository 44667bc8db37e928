"""Tree speculation on the torch engine: the reference `TreeRun` with real, cached forwards.

`Engine.tree_speculative` *is* `dsi_ref.decoders.tree.TreeRun` (the window, the level-by-level
drafting, the rule's children, verification and commits are inherited); only its two row seams,
the clock and the trace change, as `Engine.speculative` is `SIRun` with other seams:

* **target** (`TreeRun.target_rows`): the whole tree in *one* forward (`Session.tree_rows`). The
  tree's nodes are laid out after the committed prefix in the static KV cache, each at the
  position of its depth (RoPE), with a tree attention mask: a node attends to the prefix and to
  its ancestors only. The rows are the root's (after the prefix) and each node's.
* **drafter** (`TreeRun.drafter_rows`): level by level, one forward per depth over that level's
  nodes (the tree mask again; the levels above are already in the drafter's cache).
* **compaction**: the next iteration's context is prefix + accepted path + the token after it;
  the session finds that path in the tree it holds, moves its keys/values to the contiguous slots
  after the prefix and drops the other nodes (`Session._adopt`), so only the new token and the
  next tree are computed.
* **clock**: wall-clock seconds from `run` (the prompt is prefilled before, untimed); a forward's
  trace span runs from the start of its rows' forward to when the reference records it.

The rule is the reference's with its row arithmetic on numpy rows
(`dsi_ref.backends.engine.vectorised_tree.vectorised_tree_rule`: same numbers, same keyed draws).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...base.errors import BackendError
from ...base.randomness import Randomness
from ...base.result import Run
from ...decoders.common import DEFAULT_LATENCY, check_inputs
from ...decoders.tree import (
    STATS,
    TreeNode,
    TreeRule,
    TreeRun,
    TreeVerifyRule,
    check_tree,
)
from ..torch.session import Session
from .vectorised_tree import vectorised_tree_rule
from .wallclock import Clock, EngineModels, WallClockRecorder

__all__ = ["tree_speculative"]


class _WallClockTree(TreeRun):
    """`TreeRun` whose rows come from the engine's cached sessions: one target forward over the
    whole tree, one drafter forward per level (`Session.tree_rows`)."""

    def __init__(self, models: EngineModels, prompt: tuple[int, ...], max_new_tokens: int,
                 rng: Randomness, tree: tuple[int, ...], rule: TreeRule) -> None:
        super().__init__(models.target, models.drafter, prompt, max_new_tokens, rng, tree, rule,
                         DEFAULT_LATENCY)
        self.device = models.device
        self.target_session = _tree_session(models.target_session, "target")
        self.drafter_session = _tree_session(models.drafter_session, "drafter")
        self.drafted: list[TreeNode] = []      # the nodes in the drafter's cache, in order
        self.wall: WallClockRecorder | None = None

    def layout(self, nodes: list[TreeNode]) -> tuple[list[int], list[int]]:
        """``(parents, tokens)`` of ``nodes`` (the tree's nodes below the root, each after its
        parent) as `Session.tree_rows` takes them."""
        index = {id(self.root): -1}
        index.update((id(node), i) for i, node in enumerate(nodes))
        parent: dict[int, int] = {}
        for node in (self.root, *nodes):
            for child in node.children:
                parent[id(child)] = index[id(node)]
        tokens: list[int] = []
        for node in nodes:
            assert node.token is not None
            tokens.append(node.token)
        return [parent[id(node)] for node in nodes], tokens

    def _started(self) -> None:
        assert self.wall is not None
        self.wall.began = self.wall.clock()

    def drafter_rows(self, level: list[TreeNode]) -> list[Any]:
        """One drafter forward over the level's nodes (the levels above are cached)."""
        self._started()
        if level[0] is self.root:
            self.drafted = []
            rows = self.drafter_session.tree_rows(self.prompt + self.root.context, [], [])
            return list(rows)
        nodes = self.drafted + level
        parents, tokens = self.layout(nodes)
        rows = self.drafter_session.tree_rows(self.prompt + self.root.context, parents, tokens,
                                              len(level))
        self.drafted = nodes
        return list(rows)

    def target_rows(self, nodes: list[TreeNode]) -> list[Any]:
        """One target forward over the root and every node of the tree."""
        self._started()
        assert nodes[0] is self.root
        parents, tokens = self.layout(nodes[1:])
        return list(self.target_session.tree_rows(self.prompt + self.root.context, parents,
                                                  tokens))

    def run(self) -> Run:
        """`TreeRun.run` on the wall clock (started now)."""
        self.wall = WallClockRecorder(Clock(self.device), STATS)
        self.rec, self.stats = self.wall, self.wall.stats
        return super().run()


def _tree_session(session: object, role: str) -> Session:
    """``session`` as a `Session` (tree forwards need the tree mask of `TorchLM` models)."""
    if not isinstance(session, Session):
        raise BackendError(f"tree speculation needs TorchLM models (a Session with tree_rows); "
                           f"the {role}'s session is a {type(session).__name__}")
    return session


def tree_speculative(models: EngineModels, prompt: Sequence[int], max_new_tokens: int,
                     rng: Randomness, *, tree: Sequence[int] = (2, 1),
                     verify: TreeVerifyRule | TreeRule = "rrs") -> Run:
    """`dsi_ref.decoders.tree.tree_speculative` on an engine's models, timed (`Engine`'s
    ``tree_speculative``; see the module docstring)."""
    rule = vectorised_tree_rule(verify)
    widths = check_tree(tree)
    prompt = check_inputs(models.target, prompt, max_new_tokens, models.drafter, rng=rng)
    run = _WallClockTree(models, prompt, max_new_tokens, rng, widths, rule)
    run.target_session.rows(prompt, 1)                      # prefill both, untimed
    run.drafter_session.rows(prompt, 1)
    return run.run()
