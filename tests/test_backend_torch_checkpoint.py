"""A local Hugging Face checkpoint directory, loaded by path, behind the backend's interface:
cache reuse and rollback, reference equivalence of the engine on it, and ``dsi-ref bench`` on it.

Rows are float64; the tolerance of the equalities is that of tests/test_backend_exec_equivalence.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import dsi_ref as dr  # noqa: E402
from dsi_ref.backends.engine import Engine  # noqa: E402
from dsi_ref.backends.torch.checkpoint import CheckpointLM  # noqa: E402
from dsi_ref.base.errors import BackendError  # noqa: E402
from dsi_ref.cli import main  # noqa: E402

pytestmark = pytest.mark.torch

PROMPT = (1, 2, 3)


def _save(path: Path, seed: int, hidden: int) -> Path:
    config = transformers.LlamaConfig(vocab_size=11, hidden_size=hidden, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=2,
                                      intermediate_size=32, max_position_embeddings=64,
                                      bos_token_id=0, eos_token_id=None)
    torch.manual_seed(seed)
    transformers.LlamaForCausalLM(config).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("checkpoints")
    return _save(root / "target", 0, 16), _save(root / "drafter", 1, 8)


def test_checkpoint_rows_reuse_and_roll_back_the_cache(checkpoints: tuple[Path, Path]) -> None:
    lm = CheckpointLM(checkpoints[0])
    assert (lm.vocab_size, lm.bos, lm.eos, lm.name) == (11, 0, None, "target")
    session = lm.session()
    session.rows((1, 2, 3, 4), 1)
    session.rows((1, 2, 9, 9), 2)                     # diverges: the cache is cropped back
    rolled_back = session.rows((1, 2, 3, 4, 5), 3)
    fresh = lm.session().rows((1, 2, 3, 4, 5), 3)
    np.testing.assert_allclose(rolled_back, fresh, rtol=0, atol=1e-12)
    assert session.cache.get_seq_length() == 6        # BOS + 5 tokens
    dr.base.models.validate_probs(lm.probs(()), 11, model=lm)


@pytest.mark.parametrize("verify", dr.VERIFY_RULES)
def test_engine_on_a_checkpoint_commits_the_reference_tokens(
        checkpoints: tuple[Path, Path], verify: str) -> None:
    target, drafter = CheckpointLM(checkpoints[0]), CheckpointLM(checkpoints[1])
    with Engine(target, drafter) as engine:
        for seed in (0, 1) if verify == "rejection" else (0,):
            ref = dr.speculative(target, drafter, PROMPT, 12, dr.Sampler(seed), lookahead=3,
                                 verify=verify)  # type: ignore[arg-type]
            real = engine.speculative(PROMPT, 12, dr.Sampler(seed), lookahead=3,
                                      verify=verify)  # type: ignore[arg-type]
            assert real.tokens == ref.tokens
        if verify in ("exact_match", "greedy"):  # schedule-free: DSI commits non-SI's tokens
            expected = dr.autoregressive(target, PROMPT, 12, dr.Sampler(0),
                                         greedy=verify == "greedy").tokens
            real = engine.dsi(PROMPT, 12, dr.Sampler(0), lookahead=3, sp_degree=3,
                              verify=verify)  # type: ignore[arg-type]
            assert real.tokens == expected


def test_checkpoint_errors_are_actionable(tmp_path: Path, checkpoints: tuple[Path, Path]) -> None:
    with pytest.raises(BackendError, match="not a Hugging Face checkpoint directory"):
        CheckpointLM(tmp_path)
    with pytest.raises(BackendError, match="CUDA graphs are not supported"):
        CheckpointLM(checkpoints[0]).session(graphs=True)
    with pytest.raises(BackendError, match="eos=11"):
        CheckpointLM(checkpoints[0], eos=11)


def test_bench_accepts_checkpoint_directories(checkpoints: tuple[Path, Path],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "--target", str(checkpoints[0]), "--drafter", str(checkpoints[1]),
                 "--device", "cpu", "--dtype", "fp64", "--new-tokens", "6", "--prompts", "2",
                 "--prompt-len", "3", "--lookahead", "2", "--sp-degree", "2",
                 "--verify", "rejection"])
    assert code == 0
    out = capsys.readouterr().out
    assert "# dsi-ref bench: target" in out and "dsi/si" in out
