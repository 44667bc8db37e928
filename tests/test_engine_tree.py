"""Tree speculation on the torch engine commits what the reference `tree_speculative` commits.

`Engine.tree_speculative` is the reference `TreeRun` whose rows come from one target forward over
the whole tree (a tree attention mask in the static KV cache) and one drafter forward per level;
the accepted path is compacted in the caches. Here, on the tiny float64 CPU models:

* a tree forward's rows are the rows of `Session.rows` on each node's path (within the
  reduction-order bound of tests/float_bounds.py: masked keys add exact zeros, so the two are
  the same real computation summed in another order);
* compaction: a later call whose context follows a path of the held tree reuses that path's
  keys/values (moved to the contiguous slots) and its rows are a fresh session's;
* the engine commits the reference's tokens, counters and trace shape (the reference runs on the
  same `TorchLM` through `LanguageModel.probs`) for every rule of `TREE_VERIFY_RULES`, on a chain,
  an EAGLE-like tree and others, with EOS hits. Rows from the two differ by ~1e-16 (reduction
  order), so a token could differ only if a keyed uniform fell within ~1e-16 of a boundary
  (tests/test_backend_exec_equivalence.py): exact in practice;
* ``dsi-ref bench --tree`` runs tree, chain and non-SI (a smoke test) and refuses a rule of the
  other kind.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from float_bounds import assert_rows_close, reorder_rtol  # noqa: E402  (tests/ is on sys.path)

import dsi_ref as dr  # noqa: E402
from dsi_ref.backends.engine import Engine  # noqa: E402
from dsi_ref.backends.torch.model import TorchLM, build_pair  # noqa: E402
from dsi_ref.backends.torch.session import Session  # noqa: E402
from dsi_ref.backends.torch.transformer import ModelConfig  # noqa: E402
from dsi_ref.base.errors import BackendError, InvalidParameterError  # noqa: E402
from dsi_ref.cli import main  # noqa: E402
from dsi_ref.decoders.tree import TREE_VERIFY_RULES, tree_speculative  # noqa: E402

pytestmark = pytest.mark.torch

PROMPT = (1, 2)
EOS = 3


@pytest.fixture(scope="module")
def pair() -> tuple[TorchLM, TorchLM]:
    return build_pair(eos=EOS)


@pytest.fixture(scope="module")
def engine(pair: tuple[TorchLM, TorchLM]) -> Engine:
    with Engine(*pair) as eng:
        yield eng  # type: ignore[misc]


def _path(parents: list[int], tokens: list[int], i: int) -> tuple[int, ...]:
    out: list[int] = []
    while i >= 0:
        out.append(tokens[i])
        i = parents[i]
    return tuple(reversed(out))


def _random_tree(seed: int, nodes: int, vocab: int) -> tuple[list[int], list[int]]:
    r = random.Random(seed)
    parents = [-1 if i == 0 else r.randrange(-1, i) for i in range(nodes)]
    return parents, [r.randrange(vocab) for _ in range(nodes)]


def test_tree_rows_are_each_paths_rows(pair: tuple[TorchLM, TorchLM]) -> None:
    target, _ = pair
    rtol = reorder_rtol(target.config, torch.float64)
    parents, tokens = _random_tree(0, 7, target.vocab_size)
    tree = target.session()
    fresh = target.session()
    rows = tree.tree_rows(PROMPT, parents, tokens)
    assert rows.shape == (len(tokens) + 1, target.vocab_size)
    assert_rows_close(rows[0].tolist(), fresh.rows(PROMPT, 1)[0].tolist(), rtol)
    for i in range(len(tokens)):
        expected = fresh.rows(PROMPT + _path(parents, tokens, i), 1)[0]
        assert_rows_close(rows[i + 1].tolist(), expected.tolist(), rtol)
    # level by level: the held nodes are reused, only the new ones are computed
    levels = target.session()
    levels.rows(PROMPT, 1)
    seen: list[int] = []     # the query length of every forward
    hook = target.model.register_forward_pre_hook(lambda _, args: seen.append(args[0].shape[1]))
    try:
        root = levels.tree_rows(PROMPT, [], [])
        first = levels.tree_rows(PROMPT, parents[:1], tokens[:1], 1)
        got = levels.tree_rows(PROMPT, parents[:3], tokens[:3], 2)
    finally:
        hook.remove()
    assert seen == [1, 1, 2]  # the prefix's last token (the root's row); node 0; nodes 1, 2
    assert_rows_close(root[0].tolist(), rows[0].tolist(), rtol)
    assert_rows_close(first[0].tolist(), rows[1].tolist(), rtol)
    for i in (1, 2):
        assert_rows_close(got[i - 1].tolist(), rows[i + 1].tolist(), rtol)


def test_a_path_of_the_held_tree_is_compacted_and_reused(pair: tuple[TorchLM, TorchLM]) -> None:
    target, _ = pair
    rtol = reorder_rtol(target.config, torch.float64)
    parents, tokens = [-1, -1, 0, 1, 3], [4, 5, 6, 7, 8]
    session = target.session()
    session.tree_rows(PROMPT, parents, tokens)
    accepted = _path(parents, tokens, 4)            # nodes 1, 3, 4: slots not contiguous
    assert accepted == (5, 7, 8)
    context = PROMPT + accepted + (9,)
    forwards = session.forwards
    session._adopt([target.bos, *context])
    assert session.tokens == [target.bos, *PROMPT, *accepted] and session.tree == []
    seen: list[int] = []
    hook = target.model.register_forward_pre_hook(lambda _, args: seen.append(args[0].shape[1]))
    try:
        got = session.rows(context, 3)
    finally:
        hook.remove()
    assert session.forwards == forwards + 1 and seen == [3]   # 7, 8 (recomputed: count), 9
    expected = target.session().rows(context, 3)
    for a, b in zip(got, expected, strict=True):
        assert_rows_close(a.tolist(), b.tolist(), rtol)
    # a context off the tree drops it: nothing is adopted
    session.tree_rows(PROMPT, parents, tokens)
    session._adopt([target.bos, *PROMPT, 9])
    assert session.tokens == [target.bos, *PROMPT] and session.tree == []


def test_tree_rows_rejects_a_bad_tree(pair: tuple[TorchLM, TorchLM]) -> None:
    target, _ = pair
    session = target.session()
    with pytest.raises(BackendError, match="parents"):
        session.tree_rows(PROMPT, [0], [1])
    with pytest.raises(BackendError, match="count"):
        session.tree_rows(PROMPT, [-1], [1], 3)


def _shape(run: dr.Run) -> list[tuple[str, str, tuple[int, ...], str]]:
    return [(e.resource, e.kind, e.positions, e.note) for e in run.trace]


def _same(pair: tuple[TorchLM, TorchLM], engine: Engine, tree: tuple[int, ...], verify: str,
          seed: int, n: int) -> dr.Run:
    target, drafter = pair
    ref = tree_speculative(target, drafter, PROMPT, n, dr.Sampler(seed), tree=tree,
                           verify=verify)  # type: ignore[arg-type]
    before = engine.target_session.forwards, engine.drafter_session.forwards
    real = engine.tree_speculative(PROMPT, n, dr.Sampler(seed), tree=tree,
                                   verify=verify)  # type: ignore[arg-type]
    assert real.tokens == ref.tokens, (tree, verify, seed)
    # one session forward per counted forward (each iteration: one target forward over the
    # tree, one drafter forward per level), and the untimed prefill of each
    assert engine.target_session.forwards - before[0] == real.stats["target_forwards"] + 1
    assert engine.drafter_session.forwards - before[1] == real.stats["drafter_forwards"] + 1
    assert dict(real.stats) == dict(ref.stats)
    assert _shape(real) == _shape(ref)
    assert real.time > 0
    return ref


#: (tree, seed) pairs of the default run: a chain and an EAGLE-like tree, each seed one whose
#: "rrs" run commits EOS (asserted below); more shapes and seeds under -m slow.
FAST = [((1, 1), 3), ((2, 2, 1), 2)]


@pytest.mark.parametrize("verify", TREE_VERIFY_RULES)
def test_engine_tree_commits_the_reference_tokens(pair: tuple[TorchLM, TorchLM],
                                                  engine: Engine, verify: str) -> None:
    for tree, seed in FAST:
        ref = _same(pair, engine, tree, verify, seed, 6)
        if verify == "rrs":
            assert ref.tokens[-1] == EOS, (tree, ref.tokens)


@pytest.mark.slow
@pytest.mark.parametrize("verify", TREE_VERIFY_RULES)
@pytest.mark.parametrize("tree", [(1,), (3,), (1, 1, 1), (2, 1), (3, 2, 1), (4, 2, 2, 1)])
def test_engine_tree_commits_the_reference_tokens_on_more_shapes(
        pair: tuple[TorchLM, TorchLM], engine: Engine, verify: str,
        tree: tuple[int, ...]) -> None:
    runs = [_same(pair, engine, tree, verify, seed, 12) for seed in range(6)]
    assert any(run.tokens[-1] == EOS for run in runs) or verify == "greedy"


def test_engine_tree_needs_torch_sessions_and_a_valid_tree(engine: Engine) -> None:
    with pytest.raises(InvalidParameterError):
        engine.tree_speculative(PROMPT, 4, dr.Sampler(0), tree=())
    with pytest.raises(InvalidParameterError):
        engine.tree_speculative(PROMPT, 4, dr.Sampler(0), verify="nope")  # type: ignore[arg-type]
    with Engine(engine.target) as alone, pytest.raises(BackendError, match="drafter"):
        alone.tree_speculative(PROMPT, 4, dr.Sampler(0))


def test_a_speculative_run_after_a_tree_run_is_unchanged(pair: tuple[TorchLM, TorchLM],
                                                         engine: Engine) -> None:
    target, drafter = pair
    context = PROMPT + (5,)
    vocab = range(target.vocab_size)   # every token at depth 1, each with one child: the
    parents = [*(-1 for _ in vocab), *vocab]          # run's first tokens follow a held path
    tokens = [*vocab, *((t + 1) % target.vocab_size for t in vocab)]
    for session in (engine.target_session, engine.drafter_session):
        assert isinstance(session, Session)
        session.tree_rows(context, parents, tokens)
    ref = dr.speculative(target, drafter, context, 4, dr.Sampler(0), lookahead=2)
    real = engine.speculative(context, 4, dr.Sampler(0), lookahead=2)
    assert real.tokens == ref.tokens


def test_bench_runs_tree_against_the_chain(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tree.json"
    code = main(["bench", "--target", "tiny-target", "--drafter", "tiny-drafter", "--device",
                 "cpu", "--dtype", "fp64", "--tree", "2,1", "--verify", "traversal",
                 "--prompts", "1", "--new-tokens", "4", "--prompt-len", "3", "--json", str(out)])
    assert code == 0
    assert "tokens per target forward" in capsys.readouterr().out
    results = json.loads(out.read_text())["results"]
    assert results["tree"]["shape"] == [2, 1] and results["chain"]["shape"] == [1, 1]
    for name in ("tree", "chain", "nonsi"):
        assert results[name]["tokens"] == 4
    assert results["nonsi"]["tokens_per_target_forward"] == 1


@pytest.mark.parametrize("extra", [["--tree", "2,1", "--verify", "rejection"],
                                   ["--verify", "rrs"]])
def test_bench_refuses_a_rule_of_the_other_kind(extra: list[str],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--target", "tiny-target", "--drafter", "tiny-drafter", "--device",
                 "cpu", *extra]) == 2
    assert "rule" in capsys.readouterr().err


@pytest.mark.slow
def test_engine_tree_commits_the_reference_tokens_on_a_larger_vocabulary() -> None:
    """V = 512: the numpy rules' draws and top-k on wider rows (random tiny weights)."""
    shape = {"shared_rank": 8, "shared_scale": 6.0, "shared_seed": 3, "max_seq_len": 64}
    target = TorchLM(ModelConfig(512, 32, 2, 4, 64, name="t512", **shape),  # type: ignore[arg-type]
                     seed=0, eos=EOS)
    drafter = TorchLM(ModelConfig(512, 16, 1, 2, 32, name="d512", **shape),  # type: ignore[arg-type]
                      seed=1, eos=EOS)
    with Engine(target, drafter) as engine:
        for verify in TREE_VERIFY_RULES:
            for tree in ((2, 2, 1), (3, 1)):
                for seed in range(3):
                    _same((target, drafter), engine, tree, verify, seed, 10)
