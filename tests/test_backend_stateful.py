"""The torch engine with stateful processors (issue #15, item 2): penalties and a grammar.

`dsi_ref.backends.torch.processed.processed_backend` wraps each `TorchLM`; its sessions process the
rows of every cached forward with an incremental state per session (advanced on drafts, rolled
back on rejection; one per DSI target server). Where the committed tokens are a deterministic
function of the rows (greedy, and exact match whose ``y ~ p`` is keyed on the position), the
engine's SI and DSI commit the reference's tokens: non-SI on the *recomputed* processed target
through ``LanguageModel.probs``. Rows agree to ~1e-16 (cached against fresh forwards), so the
equalities are exact in practice (see tests/test_backend_exec_equivalence.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction as F

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dsi_ref as dr  # noqa: E402
from dsi_ref.backends.engine import Engine  # noqa: E402
from dsi_ref.backends.torch.model import TorchLM  # noqa: E402
from dsi_ref.backends.torch.processed import ProcessedBackendLM, processed_backend  # noqa: E402
from dsi_ref.base.errors import BackendError  # noqa: E402
from dsi_ref.base.stateful import (  # noqa: E402
    GrammarConstraint,
    PresencePenalty,
    RepetitionPenalty,
    StatefulProcessor,
    TokenDFA,
    recomputed,
)

pytestmark = pytest.mark.torch

PROMPT = (1, 2, 3)
N = 10
#: Alternate a "low" token (0-4) and a "high" one (5-10): the grammar is over classes of tokens,
#: the penalties over tokens.
GRAMMAR = TokenDFA.from_regex("(lh)*l?", vocab_size=11,
                              symbols={"l": range(0, 5), "h": range(5, 11)})


def _processors() -> list[StatefulProcessor]:
    return [RepetitionPenalty(3), PresencePenalty(F(1, 2)), GrammarConstraint(GRAMMAR)]


@pytest.fixture(scope="module")
def processed(pair: tuple[TorchLM, TorchLM]) -> tuple[ProcessedBackendLM, ProcessedBackendLM]:
    target, drafter = pair
    # the drafter keeps a penalty only: it drafts tokens the grammar forbids, which are rejected
    return (processed_backend(target, _processors(), PROMPT),
            processed_backend(drafter, [RepetitionPenalty(2)], PROMPT))


@pytest.fixture(scope="module")
def engine(processed: tuple[ProcessedBackendLM, ProcessedBackendLM]) -> Iterator[Engine]:
    with Engine(*processed) as eng:
        yield eng


def _expected(target: TorchLM, seed: int, greedy: bool) -> tuple[int, ...]:
    reference = recomputed(target, _processors(), PROMPT)
    return dr.autoregressive(reference, PROMPT, N, dr.Sampler(seed), greedy=greedy).tokens


def _in_grammar(tokens: tuple[int, ...]) -> bool:
    state = GRAMMAR.start
    for token in tokens:
        state = GRAMMAR.step(state, token)
    return state >= 0


def test_a_processed_session_gives_the_recomputed_rows(
        pair: tuple[TorchLM, TorchLM],
        processed: tuple[ProcessedBackendLM, ProcessedBackendLM]) -> None:
    target, _ = pair
    session = processed[0].session()
    reference = recomputed(target, _processors(), PROMPT)
    for context, count in [(PROMPT + (0, 5, 0), 4), (PROMPT + (0, 5, 1, 6), 2),
                           (PROMPT + (0,), 1), (PROMPT + (0, 7, 7), 3)]:
        rows = session.rows(context, count)
        end = len(context) - count + 1
        for i in range(count):
            expected = np.asarray(reference.probs(context[:end + i]), dtype=np.float64)
            assert np.max(np.abs(rows[i] - expected)) < 1e-12
    assert session.state.stats["rollbacks"] >= 2   # (0, 5, 0) -> (0, 5, 1, 6) -> (0,) -> ...


@pytest.mark.parametrize("verify", ["greedy", "exact_match"])
def test_engine_speculative_with_penalties_and_a_grammar_commits_the_reference_tokens(
        pair: tuple[TorchLM, TorchLM], engine: Engine, verify: str) -> None:
    target, _ = pair
    runs = []
    for seed in range(2):
        expected = _expected(target, seed, verify == "greedy")
        real = engine.speculative(PROMPT, N, dr.Sampler(seed), lookahead=3,
                                  verify=verify)  # type: ignore[arg-type]
        assert real.tokens == expected and _in_grammar(real.tokens)
        runs.append(real)
    # the rows decide (seeds fixed, decisions deterministic): drafts were rejected, so the
    # target session's state was rolled back
    assert any(run.stats["rejected"] for run in runs)


@pytest.mark.parametrize("verify", ["greedy", "exact_match"])
@pytest.mark.parametrize("sp_degree", [1, 3])
def test_engine_dsi_with_penalties_and_a_grammar_commits_the_reference_tokens(
        pair: tuple[TorchLM, TorchLM], engine: Engine, verify: str, sp_degree: int) -> None:
    target, _ = pair
    for seed in range(2):
        expected = _expected(target, seed, verify == "greedy")
        real = engine.dsi(PROMPT, N, dr.Sampler(seed), lookahead=2, sp_degree=sp_degree,
                          verify=verify)  # type: ignore[arg-type]
        assert real.tokens == expected and _in_grammar(real.tokens)


def test_batched_servers_refuse_a_processed_target(
        processed: tuple[ProcessedBackendLM, ProcessedBackendLM]) -> None:
    with pytest.raises(BackendError, match="TorchLM target"):
        Engine(*processed, batched=True)
