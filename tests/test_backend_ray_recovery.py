"""Lost server actors are replaced (`RayEngine(max_replacements=)`, issue 26 item 3).

An actor killed mid-run (`ray.kill`) or frozen (SIGSTOP, then killed at its deadline) is lost; a
replacement is built from the target's spec while the run goes on with the live actors, and
takes its slot back at its first answer: the run commits non-SI's tokens and, after it
(`RayEngine.recover`), ``SP`` actors serve again. With ``max_replacements=0`` capacity only
shrinks, as before; past the budget, the same. Every actor killed with budget left: the run
waits for the replacements (they are built within ``start_timeout``) and ends with the
reference tokens.

Slow (each test starts fresh actors; the default run covers one replacement in
tests/test_backend_ray.py). The module starts its own Ray (``num_cpus=2``) and stops it.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")
ray = pytest.importorskip("ray")

from test_backend_exec_equivalence import PROMPT, N  # noqa: E402

import dsi_ref as dr  # noqa: E402
from dsi_ref.backends.ray import (  # noqa: E402
    RayEngine,
    ServerLostError,
    UnschedulableError,
)
from dsi_ref.backends.torch.model import TorchLM  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]

SP = 3


@contextlib.contextmanager
def _engine(pair: tuple[TorchLM, TorchLM], **options: Any) -> Iterator[RayEngine]:
    engine = RayEngine(*pair, **options)
    try:
        engine.pool(SP)
        engine.server_pids()                # every actor built
        yield engine
    finally:
        engine.close()


def _expected(target: TorchLM, seed: int) -> tuple[int, ...]:
    return dr.autoregressive(target, PROMPT, N, dr.Sampler(seed)).tokens


def _at_call(engine: RayEngine, monkeypatch: pytest.MonkeyPatch, calls: int,
             act: Any) -> None:
    """Call ``act()`` just before the ``calls``-th actor call of the next run is sent."""
    pool = engine.ray_pool
    submit = pool.submit
    sent = [0]

    def wrapped(slot: int, job: Any) -> None:
        sent[0] += 1
        if sent[0] == calls:
            act()
        submit(slot, job)

    monkeypatch.setattr(pool, "submit", wrapped)


def _run_until_lost(engine: RayEngine, target: TorchLM, lost: int) -> dict[str, int]:
    """Runs (exact_match) until ``lost`` actors were seen lost; every run commits non-SI's
    tokens. The summed counters."""
    totals = {"lost_tasks": 0, "frozen_servers": 0, "replaced_servers": 0}
    for seed in range(3, 8):
        run = engine.dsi(PROMPT, N, dr.Sampler(seed), lookahead=2, sp_degree=SP,
                         verify="exact_match")
        assert run.tokens == _expected(target, seed)
        for key in totals:
            totals[key] += run.stats[key]
        if len(engine.fleet.dead()) >= lost:
            break
    assert len(engine.fleet.dead()) == lost
    return totals


# server_cpus=0.6: 3 servers reserve 1.8 of Ray's 2 CPUs, so the replacement is placed only
# once the lost actor's placement group was removed
@pytest.mark.parametrize("server_cpus", [0.0, 0.6])
def test_a_killed_server_is_replaced(ray_local: None, pair: tuple[TorchLM, TorchLM],
                                     monkeypatch: pytest.MonkeyPatch, server_cpus: float) -> None:
    target, _ = pair
    with _engine(pair, server_cpus=server_cpus) as engine:
        killed = engine.fleet.slots[1].serving
        _at_call(engine, monkeypatch, 4, lambda: ray.kill(engine.actor_for(1), no_restart=True))
        totals = _run_until_lost(engine, target, 1)
        assert totals["replaced_servers"] == 1 and engine.fleet.replaced == 1
        assert engine.recover() == SP                    # capacity is back
        assert killed not in engine.fleet.live()
        assert engine.fleet.slots[1].serving is engine.fleet.slots[1].home
        monkeypatch.undo()
        run = engine.dsi(PROMPT, N, dr.Sampler(9), lookahead=2, sp_degree=SP,
                         verify="exact_match")
        assert run.tokens == _expected(target, 9) and run.stats["lost_tasks"] == 0
        assert len(engine.server_pids()) == SP


def test_no_budget_no_replacement(ray_local: None, pair: tuple[TorchLM, TorchLM],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    target, _ = pair
    with _engine(pair, max_replacements=0) as engine:
        _at_call(engine, monkeypatch, 4, lambda: ray.kill(engine.actor_for(2), no_restart=True))
        totals = _run_until_lost(engine, target, 1)
        assert totals["replaced_servers"] == 0 and not engine.fleet.joining()
        assert engine.recover(timeout=1.0) == SP - 1     # capacity shrank, as before


def test_every_server_killed_with_budget_left_recovers(
        ray_local: None, pair: tuple[TorchLM, TorchLM],
        monkeypatch: pytest.MonkeyPatch) -> None:
    target, _ = pair
    with _engine(pair) as engine:

        def kill_all() -> None:
            for slot in range(SP):
                ray.kill(engine.actor_for(slot), no_restart=True)

        _at_call(engine, monkeypatch, 3, kill_all)
        totals = _run_until_lost(engine, target, SP)    # waits for the replacements
        assert totals["replaced_servers"] == SP and engine.fleet.replaced == SP
        assert engine.recover() == SP
        monkeypatch.undo()
        # the budget (SP) is spent: a further loss is not replaced, and losing all is an error
        _at_call(engine, monkeypatch, 3, kill_all)
        with pytest.raises(ServerLostError, match="every target-server actor died"):
            for seed in range(2):
                engine.dsi(PROMPT, N, dr.Sampler(seed), lookahead=2, sp_degree=SP,
                           verify="exact_match")
        assert engine.fleet.replaced == SP and not engine.fleet.joining()


def test_a_frozen_server_is_replaced(ray_local: None, pair: tuple[TorchLM, TorchLM],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    target, _ = pair
    with _engine(pair, task_timeout_floor=1.0) as engine:
        pids = engine.server_pids()
        try:
            _at_call(engine, monkeypatch, 4, lambda: os.kill(pids[0], signal.SIGSTOP))
            totals = _run_until_lost(engine, target, 1)
            assert totals["frozen_servers"] == 1 and totals["replaced_servers"] == 1
            assert engine.recover() == SP
            assert pids[0] not in engine.server_pids()
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pids[0], signal.SIGCONT)


def test_an_unplaceable_replacement_is_dropped_then_a_named_error(
        ray_local: None, pair: tuple[TorchLM, TorchLM],
        monkeypatch: pytest.MonkeyPatch) -> None:
    target, _ = pair
    with _engine(pair, server_cpus=0.1, schedule_timeout=1.0) as engine:
        # from now on a server asks for more CPUs than Ray has: no replacement can be placed
        monkeypatch.setattr(engine.fleet, "bundle", lambda: {"CPU": 64.0})
        _at_call(engine, monkeypatch, 4, lambda: ray.kill(engine.actor_for(0), no_restart=True))
        _run_until_lost(engine, target, 1)              # the run goes on with the live two
        engine.recover(timeout=60.0)                    # each replacement dropped after 1 s
        # the budget, spent on them
        assert engine.fleet.replaced == SP and not engine.fleet.joining()
        assert len(engine.fleet.live()) == SP - 1
    with _engine(pair, server_cpus=0.1, schedule_timeout=1.0) as engine:
        monkeypatch.setattr(engine.fleet, "bundle", lambda: {"CPU": 64.0})

        def kill_all() -> None:
            for slot in range(SP):
                ray.kill(engine.actor_for(slot), no_restart=True)

        _at_call(engine, monkeypatch, 3, kill_all)
        with pytest.raises(UnschedulableError, match="no Ray node can host a replacement"):
            for seed in range(2):
                engine.dsi(PROMPT, N, dr.Sampler(seed), lookahead=2, sp_degree=SP,
                           verify="exact_match", timeout=60.0)
