"""The batched DSI loop (`dsi_ref.backends.engine.batched`): what one forward carries, and the
reference's decisions and tokens.

The loop is driven on a fake session whose forwards block until the test releases them, so what
each forward carries is checked without any timing: every task submitted while a forward runs
joins the next one (not a round of its own), the tasks the committer submits on a forward's
results join the very next forward, a preempted task never runs, and a server row's second task
waits for the row's first. The engine on tiny float64 models then commits the reference's tokens
(docs/gpu-backend.md, "Same seeds, same tokens": schedule-free rules equal `dr.dsi` and non-SI;
rejection sampling equals the reference rule's decision on the run's own schedule).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_backend_exec_equivalence import _replay  # noqa: E402  (tests/ is on sys.path)

import dsi_ref as dr  # noqa: E402
from dsi_ref.backends.engine import Engine  # noqa: E402
from dsi_ref.backends.engine.batched import BatchedPool  # noqa: E402
from dsi_ref.backends.engine.pool import Done, Job, Report, Skipped  # noqa: E402
from dsi_ref.backends.torch.model import TorchLM, build_pair  # noqa: E402
from dsi_ref.base.result import decision_kinds  # noqa: E402
from dsi_ref.decoders.dsi import Task  # noqa: E402

pytestmark = pytest.mark.torch

PROMPT = (1, 2, 3)
N = 16


class _GatedSession:
    """A `BatchedSession` stand-in: each forward records its rows and blocks until released."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []
        self.started: queue.Queue[int] = queue.Queue()
        self.release: queue.Queue[None] = queue.Queue()

    def rows_batch(self, jobs: dict[int, tuple[Sequence[int], int]],
                   cancelled: Callable[[], bool] | None = None) -> dict[int, np.ndarray]:
        self.calls.append(sorted(jobs))
        self.started.put(len(self.calls))
        self.release.get(timeout=30)
        return {slot: np.zeros((count, 2)) for slot, (_, count) in jobs.items()}


def _job(task_id: int, frontier: bool = False) -> Job:
    return Job(Task(task_id, 0, 0, (), frontier, 0), (1,), 1)


def test_one_forward_carries_everything_ready_when_the_device_frees() -> None:
    session = _GatedSession()
    handed: list[list[tuple[type, int]]] = []
    done = threading.Event()

    def committer(reports: list[Report]) -> None:  # runs in the pool's thread
        handed.append([(type(report), report.task.id) for report in reports])
        if len(handed) == 1:                       # the next frontier task, on the reports
            pool.submit(0, _job(9, frontier=True))
        if len(handed) == 3:
            done.set()

    pool = BatchedPool(session)  # type: ignore[arg-type]
    pool.handler = committer
    try:
        pool.submit(0, _job(0, frontier=True))
        assert session.started.get(timeout=30) == 1      # forward 1: the frontier task alone
        pool.cancel(4)
        for slot, task_id in ((1, 1), (2, 2), (3, 4), (1, 3)):   # submitted mid-forward
            pool.submit(slot, _job(task_id))
        session.release.put(None)
        assert session.started.get(timeout=30) == 2
        session.release.put(None)
        assert session.started.get(timeout=30) == 3
        session.release.put(None)
        assert done.wait(30)
    finally:
        pool.inbox.put(None)
        pool.thread.join(30)
    # forward 2: the frontier task submitted on forward 1's results and every window ready
    # (task 4 was preempted: never runs); task 3 waits for its row's task 1
    assert session.calls == [[0], [0, 1, 2], [1]]
    assert handed == [[(Done, 0)], [(Skipped, 4), (Done, 1), (Done, 2), (Done, 9)],
                      [(Done, 3)]]


def test_a_stopped_server_serves_what_is_left_then_ends() -> None:
    session = _GatedSession()
    pool = BatchedPool(session)  # type: ignore[arg-type]
    pool.submit(0, _job(0, frontier=True))
    assert session.started.get(timeout=30) == 1
    for slot, task_id in ((1, 1), (1, 2)):             # a row's two tasks, then stop
        pool.submit(slot, _job(task_id))
    pool.inbox.put(None)
    for _ in range(3):
        session.release.put(None)
    pool.thread.join(30)
    assert not pool.thread.is_alive()
    assert session.calls == [[0], [1], [1]]
    reports = [pool.next_report(block=False) for _ in range(4)]   # no handler: next_report
    assert [type(r) for r in reports] == [Done, Done, Done, type(None)]
    assert [r.task.id for r in reports if r is not None] == [0, 1, 2]


@pytest.mark.parametrize("sp_degree, lookahead, seeds, rules", [
    (2, 3, 1, ("exact_match",)),
    pytest.param(2, 3, 3, ("exact_match", "greedy"), marks=pytest.mark.slow),
    pytest.param(1, 2, 3, ("exact_match", "greedy"), marks=pytest.mark.slow),
    pytest.param(4, 1, 3, ("exact_match", "greedy"), marks=pytest.mark.slow),
    pytest.param(3, 5, 3, ("exact_match", "greedy"), marks=pytest.mark.slow)])
def test_batched_dsi_commits_the_reference_tokens(pair: tuple[TorchLM, TorchLM], sp_degree: int,
                                                  lookahead: int, seeds: int,
                                                  rules: tuple[str, ...]) -> None:
    target, drafter = pair
    with Engine(target, drafter, batched=True) as engine:
        for seed in range(seeds):
            for verify in rules:
                ref = dr.dsi(target, drafter, PROMPT, N, dr.Sampler(seed), lookahead=lookahead,
                             sp_degree=sp_degree, verify=verify)  # type: ignore[arg-type]
                real = engine.dsi(PROMPT, N, dr.Sampler(seed), lookahead=lookahead,
                                  sp_degree=sp_degree, verify=verify)  # type: ignore[arg-type]
                assert real.tokens == ref.tokens == dr.autoregressive(
                    target, PROMPT, N, dr.Sampler(seed), greedy=verify == "greedy").tokens
            real = engine.dsi(PROMPT, N, dr.Sampler(seed), lookahead=lookahead,
                              sp_degree=sp_degree)
            assert list(real.tokens) == _replay(target, drafter, real, seed)
            if decision_kinds(real) == decision_kinds(
                    ref := dr.dsi(target, drafter, PROMPT, N, dr.Sampler(seed),
                                  lookahead=lookahead, sp_degree=sp_degree)):
                assert real.tokens == ref.tokens
            stats = real.stats
            assert stats["max_busy_servers"] <= sp_degree
            assert 1 <= stats["forwards"] <= stats["batched_rows"]
            assert stats["batched_rows"] <= stats["tasks"] + stats["frontier_tasks"]


def test_batched_dsi_stops_at_eos_like_the_reference() -> None:
    target, drafter = build_pair(eos=7)
    with Engine(target, drafter, batched=True) as engine:
        for seed in (0,):        # a seed whose reference stops early (it is deterministic)
            expected = dr.autoregressive(target, PROMPT, N, dr.Sampler(seed)).tokens
            assert expected[-1] == 7 and len(expected) < N
            ref = dr.dsi(target, drafter, PROMPT, N, dr.Sampler(seed), lookahead=2, sp_degree=3,
                         verify="exact_match")
            real = engine.dsi(PROMPT, N, dr.Sampler(seed), lookahead=2, sp_degree=3,
                              verify="exact_match")
            assert real.tokens == ref.tokens == expected


def _profile_script() -> Any:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "batched_loop_profile.py"
    spec = importlib.util.spec_from_file_location("batched_loop_profile", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_profile_splits_a_run_by_hand() -> None:
    # forwards [1, 4] (the frontier task, submitted at 0.5) and [5, 9] (two windows, submitted at
    # 2, mid-forward, and at 4.5, while the device was free), in a run from 0 to 10
    profile = _profile_script()
    r = profile.Recorder()
    r.begin, r.end = 0.0, 10.0
    r.forwards = [(1.0, 4.0, [0]), (5.0, 9.0, [1, 2])]
    r.submitted = {0: (0.5, True), 1: (2.0, False), 2: (4.5, False)}
    r.delivered = {0: 4.2, 1: 9.1, 2: 9.3}
    got = profile.analyse(r, [dr.Run((1, 2), 10.0)])
    expected = {"wall_ms": 10e3, "forward_ms": 7e3, "idle_ms": 3e3, "no_task_ms": 0.5e3,
                "gather_ms": 1.5e3, "boundary_wait_ms": 2e3, "wait_ms_mean": 4e3 / 3,
                "deliver_ms_mean": 0.2e3, "forwards": 2, "tasks_per_forward": 1.5,
                "frontier_and_verify": 0.0, "ms_per_token": 5e3}
    assert {k: got[k] for k in expected} == pytest.approx(expected)


@pytest.mark.slow
def test_the_profile_script_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from dsi_ref.backends.engine.batched import BatchedDSI
    from dsi_ref.backends.engine.dsi import WallClockDSI

    seams = (WallClockDSI.run_on, WallClockDSI.finish_rows, BatchedDSI.run)
    profile = _profile_script()
    assert profile.main(["--sleep", "--scale", "0.05", "--new-tokens", "8", "--runs", "1",
                         "--sp-degree", "2"]) == 0
    out = capsys.readouterr().out
    assert "forward (device busy)" in out and "DSI/SI measured / predicted" in out
    assert (WallClockDSI.run_on, WallClockDSI.finish_rows, BatchedDSI.run) == seams


def test_a_failing_forward_is_raised_in_the_run_and_the_next_run_works(
        pair: tuple[TorchLM, TorchLM]) -> None:
    target, drafter = pair
    with Engine(target, drafter, batched=True) as engine:
        session = engine.batched_pool(2).session
        plain = session.rows_batch
        calls = 0

        def failing(jobs: Any, cancelled: Any = None) -> Any:
            nonlocal calls
            calls += 1
            if calls == 3:          # the prefill, a first forward, then a failure
                raise RuntimeError("device lost")
            return plain(jobs, cancelled)

        session.rows_batch = failing  # type: ignore[method-assign]
        with pytest.raises(RuntimeError, match="device lost"):
            engine.dsi(PROMPT, N, dr.Sampler(0), lookahead=2, sp_degree=2, verify="greedy")
        session.rows_batch = plain  # type: ignore[method-assign]
        real = engine.dsi(PROMPT, N, dr.Sampler(0), lookahead=2, sp_degree=2, verify="greedy")
        assert real.tokens == dr.autoregressive(target, PROMPT, N, dr.Sampler(0),
                                                greedy=True).tokens
