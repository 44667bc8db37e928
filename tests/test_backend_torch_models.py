"""The torch models behind `LanguageModel`: rows, KV-cache reuse and rollback, preemptible
forwards, configurations, and the vectorised verification rules.

Rows are float64 on CPU; a cached (incremental) forward and a fresh one reduce in different
orders, so they agree to ~1e-16, not bit for bit: comparisons use 1e-12.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from float_bounds import assert_rows_close, reorder_rtol  # noqa: E402  (tests/ is on sys.path)

from dsi_ref import Sampler  # noqa: E402
from dsi_ref.backends.engine.vectorised import vectorised_rule  # noqa: E402
from dsi_ref.backends.torch.model import TorchLM, build_pair  # noqa: E402
from dsi_ref.backends.torch.session import BatchedSession  # noqa: E402
from dsi_ref.backends.torch.transformer import PRESETS, ModelConfig  # noqa: E402
from dsi_ref.base.errors import BackendError  # noqa: E402
from dsi_ref.base.models import validate_probs  # noqa: E402
from dsi_ref.decoders.verification import VERIFY_RULES, as_rule  # noqa: E402

pytestmark = pytest.mark.torch

TOL = 1e-12


def test_probs_are_valid_distributions_over_the_vocabulary(pair: tuple[TorchLM, TorchLM]) -> None:
    target, drafter = pair
    for model in pair:
        for prefix in [(), (1,), (3, 4, 5, 6)]:
            row = model.probs(prefix)
            validate_probs(row, model.vocab_size, model=model, prefix=prefix)
            assert all(isinstance(x, float) for x in row)
    assert target.probs((1, 2)) != drafter.probs((1, 2))


def test_rows_give_the_distributions_after_the_last_count_prefixes(
        pair: tuple[TorchLM, TorchLM]) -> None:
    target, _ = pair
    context = (1, 2, 3, 4, 5)
    rows = target.session().rows(context, 3)
    for j, prefix in enumerate([context[:3], context[:4], context]):
        fresh = target.session().rows(prefix, 1)[0]
        np.testing.assert_allclose(rows[j], fresh, rtol=0, atol=TOL)


def test_cache_reuse_and_rollback_give_the_rows_of_a_fresh_forward(
        pair: tuple[TorchLM, TorchLM]) -> None:
    target, _ = pair
    session = target.session()
    session.rows((1, 2, 3, 4), 1)
    before = session.forwards
    session.rows((1, 2, 3, 9, 9, 9), 2)           # diverges at index 3: recompute from there
    rolled_back = session.rows((1, 2, 3, 4, 5), 2)  # back to the first branch
    assert session.forwards == before + 2
    np.testing.assert_allclose(rolled_back, target.session().rows((1, 2, 3, 4, 5), 2),
                               rtol=0, atol=TOL)
    assert session.tokens == [target.bos, 1, 2, 3, 4, 5]


def test_a_preempted_forward_returns_none_and_leaves_a_usable_cache(
        pair: tuple[TorchLM, TorchLM]) -> None:
    target, _ = pair
    session = target.session(segments=2)
    session.rows((1, 2), 1)
    calls: list[int] = []

    def cancelled() -> bool:
        calls.append(1)
        return True                                   # cancelled before the second segment

    assert session.rows_unless((1, 2, 7, 8), 2, cancelled) is None
    assert calls and session.preempted == 1
    assert session.tokens == [target.bos, 1, 2]     # later blocks never saw tokens 7, 8
    np.testing.assert_allclose(session.rows((1, 2, 7, 8), 2),
                               target.session().rows((1, 2, 7, 8), 2), rtol=0, atol=TOL)


def test_batched_session_rows_equal_single_sessions_and_roll_back(
        pair: tuple[TorchLM, TorchLM]) -> None:
    target, _ = pair
    batched = BatchedSession(target, 3, segments=2)
    jobs = {0: ((1, 2, 3), 1), 2: ((4, 5, 6, 7, 8), 3)}
    for _ in range(2):
        rows = batched.rows_batch(jobs)
        assert rows is not None and set(rows) == set(jobs)
        for slot, (context, count) in jobs.items():
            np.testing.assert_allclose(rows[slot], target.session().rows(context, count),
                                       rtol=0, atol=TOL)
        jobs = {0: ((1, 2, 9, 9), 2), 1: (tuple(range(1, 11)) * 7, 4), 2: ((4, 5, 6, 1), 2)}
    rows = batched.rows_batch(jobs)
    assert rows is not None
    for slot, (context, count) in jobs.items():     # > 64 new tokens in slot 1: two rounds
        np.testing.assert_allclose(rows[slot], target.session().rows(context, count),
                                   rtol=0, atol=TOL)
    assert batched.rows_batch({0: ((1, 2, 9, 9, 5), 1)}, lambda: True) is None
    assert batched.tokens[0] == [target.bos, 1, 2, 9, 9]
    with pytest.raises(BackendError, match="slot 3"):
        batched.rows_batch({3: ((1,), 1)})


def test_segments_partition_the_layers() -> None:
    model = TorchLM(ModelConfig(11, 16, 5, 2, 32, max_seq_len=16)).model
    for count in range(1, 8):
        bounds = model.segments(count)
        assert bounds[0][0] == 0 and bounds[-1][1] == 5
        assert all(a[1] == b[0] and a[0] < a[1] for a, b in itertools.pairwise(bounds))
        assert len(bounds) == min(count, 5)


def test_same_seed_same_model_and_pairs_share_only_the_bigram_head() -> None:
    a = TorchLM("tiny-target", seed=3)
    b = TorchLM("tiny-target", seed=3)
    target, drafter = build_pair(seed=3)
    # same seed: bit-identical weights (the same generator draws the same values) ...
    assert all(torch.equal(x, y) for x, y in zip(a.model.state_dict().values(),
                                                 b.model.state_dict().values(), strict=True))
    # ... in other buffers, so the rows agree within the reordering bound, not bit for bit
    assert_rows_close(a.probs((1, 2)), b.probs((1, 2)), reorder_rtol(a.model.config, a.dtype))
    assert torch.equal(target.model.shared_u, drafter.model.shared_u)
    assert torch.equal(target.model.shared_w, drafter.model.shared_w)
    assert not torch.equal(target.model.embed[:, :16], drafter.model.embed)


def test_n_params_counts_every_parameter() -> None:
    model = TorchLM("tiny-target").model
    assert PRESETS["tiny-target"].n_params() == sum(p.numel() for p in model.parameters())


def test_presets_have_the_shapes_of_the_models_they_stand_for() -> None:
    assert 1.0e9 < PRESETS["llama-1b"].n_params() < 1.4e9     # TinyLlama-1.1B shape
    assert 6.5e9 < PRESETS["llama-7b"].n_params() < 7.2e9     # Llama-2-7B shape
    assert 50e6 < PRESETS["llama-68m"].n_params() < 90e6      # Vicuna-68M shape
    assert {c.vocab_size for n, c in PRESETS.items() if n.startswith("llama")} == {32000}


@pytest.mark.parametrize(("field", "value"), [("vocab_size", 0), ("n_heads", 3),
                                               ("shared_scale", -1.0), ("max_seq_len", True),
                                               ("shared_rank", -1), ("rope_base", 1.0)])
def test_bad_configurations_are_rejected_with_the_field_named(field: str, value: object) -> None:
    kwargs: dict[str, object] = {"vocab_size": 11, "d_model": 16, "n_layers": 1, "n_heads": 2,
                                 "d_ff": 32, field: value}
    with pytest.raises(BackendError, match=field if field != "n_heads" else "head"):
        ModelConfig(**kwargs)  # type: ignore[arg-type]


def test_bad_model_arguments_are_rejected() -> None:
    with pytest.raises(BackendError, match="unknown model preset"):
        TorchLM("gpt-9")
    with pytest.raises(BackendError, match="eos=11"):
        TorchLM("tiny-target", eos=11)
    with pytest.raises(BackendError, match="unknown dtype"):
        TorchLM("tiny-target", dtype="fp8")
    with pytest.raises(BackendError, match="CUDA graphs need a CUDA device"):
        TorchLM("tiny-target").session(graphs=True)
    with pytest.raises(BackendError, match="max_seq_len"):
        TorchLM("tiny-target", max_seq_len=4).probs((1, 2, 3, 4))
    with pytest.raises(BackendError, match="count must lie"):
        TorchLM("tiny-target").session().rows((1, 2), 4)


def _random_row(gen: np.random.Generator, size: int) -> np.ndarray:
    row = gen.random(size) * (gen.random(size) > 0.3)   # zeros are common
    row[gen.integers(size)] += 0.1
    return row / row.sum()


# alpha: "bonus" (no draft) is certain, and so is "accepted" (p == q) for rejection sampling; no
# rejection in the 300 seeds has probability prod (1 - TV(p, q)) over these rows = 1.8e-89. Under
# exact_match some row has sum p q = 0 and one sum p q = 1 (certain); greedy draws nothing.
@pytest.mark.montecarlo(alpha=2e-89)
@pytest.mark.parametrize("rule_name", VERIFY_RULES)
def test_vectorised_rules_decide_exactly_like_the_reference_rules(rule_name: str) -> None:
    gen = np.random.default_rng(0)
    reference, fast = as_rule(rule_name), vectorised_rule(rule_name)
    decided = set()
    for seed in range(300):
        size = int(gen.integers(2, 40))
        p, q = _random_row(gen, size), _random_row(gen, size)
        if seed % 7 == 0:
            q = p.copy()                                      # p == q: never rejected
        context = tuple(int(t) for t in gen.integers(0, size, seed % 5))
        x_ref = reference.draft(q.tolist(), Sampler(seed), context)
        x_fast = fast.draft(q, Sampler(seed), context)
        assert x_ref == x_fast
        for draft in (x_ref, None):
            ref = reference.decide(p.tolist(), q.tolist(), draft, Sampler(seed), context)
            out = fast.decide(p, q, draft, Sampler(seed), context)
            assert ref == out, (seed, draft)
            decided.add(out.kind)
    assert decided == {"accepted", "rejected", "bonus"}


@pytest.mark.gpu
def test_cuda_graph_rows_equal_eager_rows_across_chunks_and_segments() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    lm = TorchLM("tiny-target", device="cuda", dtype="fp32", max_seq_len=200)
    context = tuple(int(t) for t in np.random.default_rng(0).integers(1, 11, 150))
    eager = lm.session(graphs=False).rows(context, 140)     # > 2 chunks of 64 under graphs
    batched = BatchedSession(lm, 2, graphs=True, segments=2)
    rows = batched.rows_batch({0: (context, 140), 1: (context[:120] + (3, 4), 3)})
    assert rows is not None
    np.testing.assert_allclose(rows[0], eager, rtol=0, atol=1e-5)
    for segments in (1, 2):
        graphs = lm.session(graphs=True, segments=segments)
        np.testing.assert_allclose(graphs.rows(context, 140), eager, rtol=0, atol=1e-5)
        np.testing.assert_allclose(graphs.rows(context[:120] + (3, 4), 3),
                                   lm.session(graphs=False).rows(context[:120] + (3, 4), 3),
                                   rtol=0, atol=1e-5)
