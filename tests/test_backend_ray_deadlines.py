"""No hangs on Ray (`dsi_ref.backends.ray`, issue 26 item 2): every wait has a deadline.

A frozen server actor (SIGSTOP on its process) is lost like a dead one once it misses the
per-task deadline: its calls go to a live actor and the run commits the reference tokens, or,
with none left, raises `ServerTimeoutError`. With the defaults, every server frozen ends in a
named error within 60 s; ``dsi(timeout=)`` bounds a run; resources no node has (a GPU share
without GPUs) are `UnschedulableError` within 10 s, and one line from ``dsi-ref bench``.

Every test resumes what it froze (SIGCONT, in ``finally``) before its engine is closed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
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
    ServerTimeoutError,
    UnschedulableError,
)
from dsi_ref.backends.torch.model import TorchLM  # noqa: E402
from dsi_ref.base.errors import BackendError  # noqa: E402
from dsi_ref.cli import main  # noqa: E402

pytestmark = pytest.mark.torch


@contextlib.contextmanager
def _engine(pair: tuple[TorchLM, TorchLM], servers: int,
            **options: Any) -> Iterator[tuple[RayEngine, list[int]]]:
    """An engine with ``servers`` warmed-up server actors, and their pids; resumes them (and
    closes the engine) on exit."""
    engine = RayEngine(*pair, **options)
    pids: list[int] = []
    try:
        engine.pool(servers)
        pids = engine.server_pids()
        engine.dsi(PROMPT, 4, dr.Sampler(0), lookahead=2, sp_degree=servers,
                   verify="exact_match")
        yield engine, pids
    finally:
        _resume(pids)
        engine.close()


def _resume(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def _freeze_at(engine: RayEngine, monkeypatch: pytest.MonkeyPatch, calls: int,
               pids: list[int]) -> None:
    """SIGSTOP ``pids`` just before the ``calls``-th actor call of the next run is sent."""
    pool = engine.ray_pool
    submit = pool.submit
    sent = [0]

    def freezing(slot: int, job: Any) -> None:
        sent[0] += 1
        if sent[0] == calls:
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
        submit(slot, job)

    monkeypatch.setattr(pool, "submit", freezing)


def test_frozen_servers_are_lost_like_dead_ones_within_their_deadlines(
        ray_local: None, pair: tuple[TorchLM, TorchLM],
        monkeypatch: pytest.MonkeyPatch) -> None:
    target, _ = pair
    # no replacement (max_replacements=0): capacity only shrinks, as checked here
    with _engine(pair, 3, task_timeout_floor=1.0, max_replacements=0) as (engine, pids):
        # one of 3 frozen mid-run: lost after the 1 s per-task deadline, its calls sent again;
        # the run commits non-SI's tokens
        frozen = engine.fleet.slots[2].serving
        _freeze_at(engine, monkeypatch, 4, [pids[2]])
        frozen_seen = 0
        for seed in (3, 4):     # the second run's warm-up finds it if every call was cancelled
            expected = dr.autoregressive(target, PROMPT, N, dr.Sampler(seed)).tokens
            real = engine.dsi(PROMPT, N, dr.Sampler(seed), lookahead=2, sp_degree=3,
                              verify="exact_match")
            assert real.tokens == expected
            frozen_seen += real.stats["frozen_servers"]
            monkeypatch.undo()
        assert frozen_seen == 1 and engine.fleet.dead() == [frozen]
        assert frozen not in [s.serving for s in engine.fleet.slots]   # its slot moved
        live = [pids[i] for i in range(2)]

        # the run's timeout (0.3 s) passes before the per-task deadline (1 s)
        for pid in live:
            os.kill(pid, signal.SIGSTOP)
        began = time.monotonic()
        with pytest.raises(ServerTimeoutError, match=r"within its timeout of 0\.3 s"):
            engine.dsi(PROMPT, N, dr.Sampler(0), lookahead=2, sp_degree=3, timeout=0.3)
        assert time.monotonic() - began < 10.0      # ended, not hung (the message names 0.3 s)
        assert not engine.ray_pool.calls and len(engine.fleet.dead()) == 1
        with pytest.raises(BackendError, match="timeout"):
            engine.dsi(PROMPT, N, dr.Sampler(0), timeout=0.0)
        _resume(live)

        # the 2 left frozen mid-run: each lost in turn, then a named error
        _freeze_at(engine, monkeypatch, 3, live)
        began = time.monotonic()
        with pytest.raises(ServerTimeoutError, match="died or froze"):
            engine.dsi(PROMPT, N, dr.Sampler(0), lookahead=2, sp_degree=3,
                       verify="exact_match")
        assert time.monotonic() - began < 5.0       # two deadlines of 1 s at most, in turn
        assert not engine.ray_pool.calls and len(engine.fleet.dead()) == 3


@pytest.mark.slow  # about 15 s: the default per-task deadline is 10 s
def test_every_server_frozen_with_the_defaults_fails_within_60_s(
        ray_local: None, pair: tuple[TorchLM, TorchLM]) -> None:
    with _engine(pair, 2, max_replacements=0) as (engine, pids):
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        began = time.monotonic()
        with pytest.raises(ServerLostError, match="froze"):     # a ServerTimeoutError
            engine.dsi(PROMPT, N, dr.Sampler(0), lookahead=2, sp_degree=2)
        elapsed = time.monotonic() - began
        print(f"every server frozen: ServerTimeoutError after {elapsed:.2f} s")
        assert elapsed < 60.0


def _no_gpus() -> bool:
    return float(ray.cluster_resources().get("GPU", 0)) == 0


def test_unschedulable_servers_are_a_named_error_within_10_s(
        ray_local: None, pair: tuple[TorchLM, TorchLM]) -> None:
    # a GPU share without GPUs, else more CPUs than the local Ray's 2
    for ask in [{"num_gpus": 0.5} if _no_gpus() else {"server_cpus": 64.0}]:
        began = time.monotonic()
        with pytest.raises(UnschedulableError, match="no Ray node can host"):
            RayEngine(*pair, **ask)  # type: ignore[arg-type]
        elapsed = time.monotonic() - began
        print(f"unschedulable {ask}: UnschedulableError after {elapsed:.2f} s")
        assert elapsed < 10.0


def test_bench_on_unschedulable_gpus_prints_one_line(
        ray_local: None, capsys: pytest.CaptureFixture[str]) -> None:
    if not _no_gpus():
        pytest.skip("this machine has GPUs: a GPU share is schedulable")
    began = time.monotonic()
    code = main(["bench", "--target", "tiny-target", "--drafter", "tiny-drafter", "--device",
                 "cpu", "--new-tokens", "4", "--prompts", "1", "--prompt-len", "3",
                 "--backend", "ray", "--ray-gpus", "0.5"])
    assert code == 2 and time.monotonic() - began < 15.0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no Ray node can host" in err[0], err
