"""DSI on Ray (`dsi_ref.backends.ray`): the reference semantics across processes.

The target servers are Ray actors, each with its own copy of the target; the drafter and the
committer run here. The checks are the thread engine's (tests/test_backend_exec_equivalence.py):
``exact_match`` and ``greedy`` commit non-SI's tokens whatever the schedule; ``rejection`` and
``block`` commit, position by position, the reference rule's decision on the run's own schedule.
Then the faults (an actor killed mid-run, every actor killed, an unreachable cluster) and the
statistical audit's fan-out over Ray workers (the same samples and verdict for 1, 2, 4 workers).

Ray starts once per module (``num_cpus=2``); one engine with 3 server actors serves every test,
and the fault tests, which kill its actors, come last.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import pytest

torch = pytest.importorskip("torch")
ray = pytest.importorskip("ray")

from test_backend_exec_equivalence import PROMPT, N, _replay, _replay_blocks  # noqa: E402

import dsi_ref as dr  # noqa: E402
from dsi_ref.audit.statistical import Alternative, statistical_audit  # noqa: E402
from dsi_ref.backends.ray import (  # noqa: E402
    RayEngine,
    ServerLostError,
    connect,
    ray_map,
    sample_parallel,
)
from dsi_ref.backends.torch.model import TorchLM  # noqa: E402
from dsi_ref.backends.torch.transformer import ModelConfig  # noqa: E402
from dsi_ref.base.errors import BackendError  # noqa: E402
from dsi_ref.base.result import decision_kinds  # noqa: E402

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    started = connect(num_cpus=2)
    # the workers cannot import this test module: its functions travel by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def engine(ray_local: None, pair: tuple[TorchLM, TorchLM]) -> Iterator[RayEngine]:
    # no replacement of killed actors: one costs seconds (tests/test_backend_ray_recovery.py)
    eng = RayEngine(*pair, max_replacements=0)
    eng.pool(3)
    yield eng
    eng.close()


@pytest.mark.parametrize("verify", ["exact_match", "greedy"])
def test_ray_dsi_commits_the_schedule_free_reference_tokens(
        pair: tuple[TorchLM, TorchLM], engine: RayEngine, verify: str) -> None:
    target, _ = pair
    for sp_degree in (1, 2, 3):
        for seed in range(2):
            expected = dr.autoregressive(target, PROMPT, N, dr.Sampler(seed),
                                         greedy=verify == "greedy").tokens
            real = engine.dsi(PROMPT, N, dr.Sampler(seed), lookahead=2, sp_degree=sp_degree,
                              verify=verify)  # type: ignore[arg-type]
            assert real.tokens == expected
            assert real.stats["lost_tasks"] == 0
            assert real.stats["max_busy_servers"] <= sp_degree


#: As in the thread engine's test: seeds until a rejection and an acceptance were seen.
MAX_SEEDS = 40


# alpha: as the thread engine's test (a run has a rejection in 39/40 measured seeds, p >= 0.655 at
# confidence 1 - 1e-6): no rejection in MAX_SEEDS = 40 runs w.p. < 0.345^40 < 4e-19
@pytest.mark.montecarlo(alpha=4e-19)
def test_ray_dsi_rejection_commits_the_reference_rules_decisions(
        pair: tuple[TorchLM, TorchLM], engine: RayEngine) -> None:
    target, drafter = pair
    kinds_seen: set[str] = set()
    for seed in range(MAX_SEEDS):
        if seed >= 3 and {"accepted", "rejected"} <= kinds_seen:
            break
        real = engine.dsi(PROMPT, N, dr.Sampler(seed), lookahead=3, sp_degree=3)
        assert len(real.tokens) == N
        assert list(real.tokens) == _replay(target, drafter, real, seed)
        kinds_seen.update(decision_kinds(real))
    assert {"accepted", "rejected"} <= kinds_seen


def test_ray_dsi_block_commits_the_reference_rules_decisions(
        pair: tuple[TorchLM, TorchLM], engine: RayEngine) -> None:
    target, drafter = pair
    for seed in range(2):
        real = engine.dsi(PROMPT, N, dr.Sampler(seed), lookahead=3, sp_degree=2,
                          verify="block")
        assert list(real.tokens) == _replay_blocks(target, drafter, real, seed, 3)


def test_ray_dsi_preempts_by_cancellation(engine: RayEngine) -> None:
    # every run of 24 tokens with SP = 3 preempts (the frontier task follows each commit)
    run = engine.dsi(PROMPT, 24, dr.Sampler(0), lookahead=3, sp_degree=3)
    assert run.stats["preempted_tasks"] > 0 and run.stats["frontier_tasks"] > 0
    assert run.stats["target_forward_us"] > 0
    commits = [e for e in run.trace if e.kind == "commit"]
    assert [e.positions[0] for e in commits] == list(range(24))
    assert not engine.ray_pool.calls      # nothing awaited after the run


def test_an_unreachable_cluster_fails_fast_with_a_named_error(
        ray_local: None, pair: tuple[TorchLM, TorchLM]) -> None:
    listener = socket.socket()          # accepts connections, answers nothing: not a Ray head
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    silent = f"127.0.0.1:{listener.getsockname()[1]}"
    with listener:
        for address in ("127.0.0.1:1", silent):        # refused; connected but silent
            began = time.perf_counter()
            with pytest.raises(BackendError, match="no Ray cluster answers"):
                RayEngine(*pair, address=address, connect_timeout=1.0)
            # fast: Ray's own retries take 20 s and more; 10 s leaves room for a loaded machine
            assert time.perf_counter() - began < 10.0
    with pytest.raises(BackendError, match="host:port"):
        connect("nonsense")
    connect(ray.get_runtime_context().gcs_address)      # the running head answers


# -- the statistical audit's fan-out ----------------------------------------------------------
def _toy_pair() -> tuple[dr.TableLM, dr.TableLM]:
    target = dr.TableLM.context_free((Fraction(1, 2), Fraction(1, 3), Fraction(1, 6)))
    drafter = dr.TableLM.context_free((Fraction(1, 6), Fraction(1, 2), Fraction(1, 3)))
    return target, drafter


def _toy_dsi(seed: int) -> tuple[int, ...]:
    target, drafter = _toy_pair()
    return dr.dsi(target, drafter, (), 3, dr.Sampler(seed), lookahead=2, sp_degree=2).tokens


def test_sample_parallel_gives_the_same_samples_for_any_number_of_workers(
        ray_local: None) -> None:
    seeds = list(range(50))
    expected = [_toy_dsi(s) for s in seeds]
    for workers in (1, 2, 4):
        assert sample_parallel(_toy_dsi, seeds, workers=workers) == expected
    assert sample_parallel(_toy_dsi, seeds, workers=3, chunk=7) == expected
    with pytest.raises(BackendError, match="workers"):
        sample_parallel(_toy_dsi, seeds, workers=0)


@pytest.mark.statistical(alpha=1e-8)   # one audit (the same samples) at alpha 1e-8
def test_the_audit_fanned_out_over_ray_gives_one_verdict(ray_local: None) -> None:
    target, _ = _toy_pair()
    law = dr.target_distribution(target, (), 3)
    reports = [statistical_audit(_toy_dsi, law, alternative=Alternative.tv(0.2), alpha=1e-8,
                                 seed=11, sample_map=None if workers == 0 else ray_map(workers))
               for workers in (0, 1, 2, 4)]   # 0: drawn here, one by one
    fields = [(r.verdict, r.statistic, r.p_value, r.n_samples, dict(r.counts)) for r in reports]
    assert fields[1:] == fields[:1] * 3
    assert reports[0].verdict == "lossless"


# -- faults (last: they kill the shared engine's actors) -----------------------------------------
def _kill_at(engine: RayEngine, monkeypatch: pytest.MonkeyPatch, calls: int,
             slots: tuple[int, ...]) -> None:
    """Kill the actors serving ``slots`` just before the ``calls``-th actor call of the next run
    is sent."""
    pool = engine.ray_pool
    submit = pool.submit
    sent = [0]

    def killing(slot: int, job: Any) -> None:
        sent[0] += 1
        if sent[0] == calls:
            for s in slots:
                ray.kill(engine.actor_for(s), no_restart=True)
        submit(slot, job)

    monkeypatch.setattr(pool, "submit", killing)


def test_a_server_killed_mid_run_leaves_the_run_correct(
        pair: tuple[TorchLM, TorchLM], engine: RayEngine,
        monkeypatch: pytest.MonkeyPatch) -> None:
    target, drafter = pair
    expected = dr.autoregressive(target, PROMPT, N, dr.Sampler(3)).tokens
    _kill_at(engine, monkeypatch, 4, (2,))
    killed = engine.fleet.slots[2].serving
    real = engine.dsi(PROMPT, N, dr.Sampler(3), lookahead=2, sp_degree=3, verify="exact_match")
    assert real.tokens == expected
    if not engine.fleet.dead():     # every call to it was cancelled before its reply was read
        engine.dsi(PROMPT, N, dr.Sampler(4), lookahead=2, sp_degree=3, verify="exact_match")
    assert engine.fleet.dead() == [killed]      # the death was seen: a call was lost, sent again
    assert killed not in [s.serving for s in engine.fleet.slots]   # its slot moved to a live one
    monkeypatch.undo()
    for seed in range(2):   # rejection, on the two remaining actors: the reference decisions
        real = engine.dsi(PROMPT, N, dr.Sampler(seed), lookahead=3, sp_degree=3)
        assert list(real.tokens) == _replay(target, drafter, real, seed)


def test_every_server_killed_is_a_named_error(engine: RayEngine,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    _kill_at(engine, monkeypatch, 3, (0, 1, 2))
    with pytest.raises(ServerLostError, match="every target-server actor died"):
        engine.dsi(PROMPT, N, dr.Sampler(0), lookahead=2, sp_degree=3, verify="exact_match")


# -- the end-to-end law (slow) -------------------------------------------------------------------
def _tiny(vocab: int, seed: int, width: int) -> TorchLM:
    config = ModelConfig(vocab, width, 1, 2, 2 * width, max_seq_len=16, shared_rank=2,
                         shared_scale=2.0, shared_seed=5, name=f"toy-{width}")
    return TorchLM(config, seed=seed)


@pytest.mark.slow
@pytest.mark.statistical(alpha=1e-8)
def test_ray_dsi_law_is_the_targets_at_stated_power(ray_local: None) -> None:
    # toy vocabulary of 3, 3 new tokens (27 outcomes): power >= 0.99 against every law at
    # TV >= 0.2; the reference law is the exact law of the same torch target's rows
    target, drafter = _tiny(3, 0, 8), _tiny(3, 1, 4)
    law = dr.target_distribution(target, (1,), 3)
    with RayEngine(target, drafter) as eng:
        # no determinism re-draws: with rejection the tokens depend on the wall-clock schedule
        # (which positions got a bonus), so a run is not a function of its seed alone
        report = statistical_audit(
            lambda s: eng.dsi((1,), 3, dr.Sampler(s), lookahead=2, sp_degree=3).tokens, law,
            alternative=Alternative.tv(0.2), alpha=1e-8, determinism_checks=0)
    assert report.verdict == "lossless", str(report)
