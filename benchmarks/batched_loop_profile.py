"""Where the batched DSI loop (`Engine(batched=True)`) spends its time: a profile per run.

Every batched forward (``BatchedSession.rows_batch``), every task submission (``run_on``) and
every delivery of a finished task to the committer (``finish_rows``) is timestamped from outside
the engine (wrappers, no change to the engine). From them, per run:

* ``forward``: the device busy (sum of the batched forwards);
* ``idle``: wall − forward, split into
  - ``no task``: the device free and no task submitted yet for its next forward — the next
    task comes from the committer (after it handles the previous forward's results) or from
    the drafter (a window completing);
  - ``gather``: a task submitted but its forward not yet launched (the loop's own latency:
    waking up, draining the inbox, building the batch);
* ``boundary wait``: the time tasks waited because they were submitted while a forward ran
  (they join the next one), summed over tasks; ``wait``: per task, submission to the start of
  its forward;
* ``deliver``: per task, from the end of its forward to the committer handling its rows;
* ``tasks / forward``, and the share of forwards that carry the frontier task together with a
  verification window.

``--sleep`` replaces every forward's cost with a synthetic one (the real tiny models still
compute the rows, then the call sleeps until the synthetic cost has passed; ``--scale``
multiplies them, so that they dominate a loaded CPU's own forward times), so the loop's own
overhead shows against known forward costs; they are `dsi_ref.sim.batched.H100_LLAMA7B`'s (one
H100, llama-7b/68M, issue 25). DSI/SI is printed with the rounds model's prediction
(`dsi_ref.sim.batched.predict`) for the synthetic costs, or, with real forwards, for this
device's costs measured first
(`dsi_ref.backends.engine.measure.measure_batched_costs`).

    .venv/bin/python benchmarks/batched_loop_profile.py --sleep --runs 3
    .venv/bin/python benchmarks/batched_loop_profile.py --sp-degree 2,4 --lookahead 5
    # on a GPU, real models (no sleep): --target llama-7b --drafter llama-68m --device cuda
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


import dsi_ref as dr
from dsi_ref.backends.engine import Engine
from dsi_ref.backends.engine.batched import BatchedDSI
from dsi_ref.backends.engine.dsi import WallClockDSI
from dsi_ref.backends.engine.measure import measure_batched_costs
from dsi_ref.backends.torch.model import build_pair
from dsi_ref.sim.batched import H100_LLAMA7B, BatchedCosts, predict


def _pad(began: float, seconds: float | None) -> None:
    if seconds is not None:
        while (left := began + seconds - time.perf_counter()) > 0:
            time.sleep(left if left > 2e-4 else 0)


class Recorder:
    """The timestamps of one run (perf_counter seconds)."""

    def __init__(self) -> None:
        self.forwards: list[tuple[float, float, list[int]]] = []  # start, end, task ids
        self.submitted: dict[int, tuple[float, bool]] = {}        # id -> (t, frontier)
        self.by_slot: dict[int, list[int]] = {}                   # slot -> ids not yet run
        self.delivered: dict[int, float] = {}
        self.started: dict[int, float] = {}
        self.deliver_seconds = 0.0
        self.begin = self.end = 0.0


def instrument(engine: Engine, sp_degree: int, rec: list[Recorder],
               cost: Callable[[str, Any], float | None]) -> None:
    """Wrap the engine's sessions (timing, synthetic costs) and the DSI run's seams."""
    pool = engine.batched_pool(sp_degree)
    session = pool.session
    rows_batch = session.rows_batch

    def timed_batch(jobs: dict[int, tuple[Sequence[int], int]],
                    cancelled: Callable[[], bool] | None = None) -> Any:
        began = time.perf_counter()
        ids: list[int] = []
        if rec:   # per slot, the oldest task submitted to it that was not preempted
            for slot in jobs:
                queued = rec[-1].by_slot.get(slot, [])
                while queued and queued[0] in pool.cancelled:
                    queued.pop(0)
                if queued:
                    ids.append(queued.pop(0))
        out = rows_batch(jobs, cancelled)
        _pad(began, cost("batched", jobs))
        if rec:
            rec[-1].forwards.append((began, time.perf_counter(), ids))
        return out

    session.rows_batch = timed_batch  # type: ignore[method-assign]
    for name, kind in (("drafter_session", "drafter"), ("target_session", "target")):
        s = getattr(engine, name)
        plain = s.rows

        def timed(context: Sequence[int], count: int = 1, _plain: Any = plain,
                  _kind: str = kind) -> Any:
            began = time.perf_counter()
            out = _plain(context, count)
            _pad(began, cost(_kind, count))
            return out

        s.rows = timed


def _patch_run(rec: list[Recorder]) -> Callable[[], None]:
    """Wrap the DSI run's seams (class-wide); returns the function that unwraps them."""
    cls = WallClockDSI
    run_on, finish_rows, run = cls.run_on, cls.finish_rows, cls.run

    def restore() -> None:
        cls.run_on, cls.finish_rows, cls.run = run_on, finish_rows, run  # type: ignore[method-assign]

    def on(self: Any, task: Any, server: int) -> None:
        if rec:
            rec[-1].submitted[task.id] = (time.perf_counter(), task.frontier)
            rec[-1].by_slot.setdefault(server, []).append(task.id)
        run_on(self, task, server)

    def finish(self: Any, task: Any, rows: Any) -> None:
        began = time.perf_counter()
        if rec:
            rec[-1].delivered[task.id] = began
        finish_rows(self, task, rows)
        if rec:
            rec[-1].deliver_seconds += time.perf_counter() - began

    def timed_run(self: Any) -> Any:
        began = time.perf_counter()
        out = run(self)
        if rec:
            rec[-1].begin, rec[-1].end = began, time.perf_counter()
        return out

    cls.run_on, cls.finish_rows, cls.run = on, finish, timed_run  # type: ignore[method-assign]
    batched_run = BatchedDSI.run        # the batched loop runs its own `run`

    def timed_batched_run(self: Any) -> Any:
        began = time.perf_counter()
        out = batched_run(self)
        if rec:
            rec[-1].begin, rec[-1].end = began, time.perf_counter()
        return out

    BatchedDSI.run = timed_batched_run  # type: ignore[method-assign]

    def restore_both() -> None:
        restore()
        BatchedDSI.run = batched_run  # type: ignore[method-assign]

    return restore_both


def analyse(r: Recorder, runs: list[dr.Run]) -> dict[str, float]:
    """The profile of one run (ms and ratios)."""
    wall = r.end - r.begin
    forwards = sorted(f for f in r.forwards if f[0] >= r.begin)   # not the untimed prefill
    busy = sum(e - s for s, e, _ in forwards)
    carried = [[(tid, *r.submitted[tid]) for tid in ids] for _, _, ids in forwards]
    gather = no_task = boundary = 0.0
    waits: list[float] = []
    free_since = r.begin
    for (s, e, _), tasks in zip(forwards, carried, strict=True):
        first = min((t for _, t, _ in tasks), default=s)
        ready = max(free_since, min(first, s))
        no_task += max(0.0, ready - free_since)
        gather += max(0.0, s - ready)
        boundary += sum(free_since - t for _, t, _ in tasks if t < free_since)
        waits.extend(s - t for _, t, _ in tasks)
        free_since = e
    delivers = [r.delivered[tid] - e for (_, e, _), tasks in zip(forwards, carried, strict=True)
                for tid, _, _ in tasks if tid in r.delivered]
    both = sum(1 for tasks in carried if any(f for _, _, f in tasks)
               and any(not f for _, _, f in tasks))
    tokens = sum(len(run.tokens) for run in runs)
    return {"wall_ms": wall * 1e3, "forward_ms": busy * 1e3, "idle_ms": (wall - busy) * 1e3,
            "no_task_ms": no_task * 1e3, "gather_ms": gather * 1e3,
            "boundary_wait_ms": boundary * 1e3,
            "wait_ms_mean": 1e3 * statistics.fmean(waits) if waits else 0.0,
            "deliver_ms_mean": 1e3 * statistics.fmean(delivers) if delivers else 0.0,
            "committer_ms": r.deliver_seconds * 1e3, "forwards": len(forwards),
            "tasks_per_forward": sum(len(c) for c in carried) / max(1, len(forwards)),
            "frontier_and_verify": both / max(1, len(forwards)),
            "ms_per_token": wall * 1e3 / max(1, tokens)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--target", default="tiny-target")
    parser.add_argument("--drafter", default="tiny-drafter")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="fp64")
    parser.add_argument("--lookahead", type=int, default=5)
    parser.add_argument("--sp-degree", default="2,4")
    parser.add_argument("--new-tokens", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--verify", default="rejection")
    parser.add_argument("--sleep", action="store_true",
                        help="synthetic forward costs (issue 25's H100 7B/68M milliseconds)")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply the synthetic costs (--sleep) by this")
    parser.add_argument("--reps", type=int, default=20,
                        help="forwards per measured cost (real forwards, not --sleep)")
    args = parser.parse_args(argv)
    target, drafter = build_pair(args.target, args.drafter, device=args.device, dtype=args.dtype,
                                 max_seq_len=max(256, args.new_tokens + 16))

    costs = H100_LLAMA7B

    def cost(kind: str, jobs: dict[int, tuple[Sequence[int], int]] | int) -> float | None:
        """Synthetic seconds (``--sleep``): a batched forward over ``b`` rows costs
        ``batch_ms(b)``, or that times TPOT / v when every row is a one-token (frontier) task,
        as the rounds model charges it; SI's forwards ``verify_ms`` (one token: TPOT); a
        drafter forward ``drafter_ms``."""
        if not args.sleep:
            return None
        if isinstance(jobs, dict):
            longest = max(count for _, count in jobs.values())
            ms = costs.batch_ms(len(jobs)) * (1 if longest > 1 else 1 / costs.verify_cost)
        elif kind == "target":
            ms = costs.verify_ms if jobs > 1 else costs.tpot_ms
        else:
            ms = costs.drafter_ms
        return ms * float(args.scale) / 1e3

    rec: list[Recorder] = []
    restore = _patch_run(rec)
    try:
        _profile(args, target, drafter, rec, cost)
    finally:
        restore()
    return 0


def _profile(args: argparse.Namespace, target: Any, drafter: Any, rec: list[Recorder],
             cost: Callable[[str, Any], float | None]) -> None:
    """Per SP: SI and profiled DSI runs on the same seeds, their means, the prediction."""
    prompt = (1, 2, 3)
    print(f"# batched DSI loop profile: {args.target}/{args.drafter} on {args.device}, "
          f"k={args.lookahead}, N={args.new_tokens}, verify={args.verify}, "
          f"{'synthetic H100 costs x' + str(args.scale) if args.sleep else 'real forwards'}")
    for sp in (int(x) for x in args.sp_degree.split(",")):
        with Engine(target, drafter, batched=True) as engine:
            measured = None if args.sleep else measure_batched_costs(engine, sp, args.lookahead,
                                                             args.reps)
            instrument(engine, sp, rec, cost)
            engine.dsi(prompt, 4, dr.Sampler(99), lookahead=args.lookahead, sp_degree=sp)
            si_ms, profiles, accepted, decided = [], [], 0, 0
            for seed in range(args.runs):
                si = engine.speculative(prompt, args.new_tokens, dr.Sampler(seed),
                                        lookahead=args.lookahead, verify=args.verify)
                si_ms.append(si.time * 1e3 / len(si.tokens))
                accepted += si.stats["accepted"]
                decided += si.stats["accepted"] + si.stats["rejected"]
                rec.append(Recorder())
                run = engine.dsi(prompt, args.new_tokens, dr.Sampler(seed),
                                 lookahead=args.lookahead, sp_degree=sp, verify=args.verify)
                profiles.append(analyse(rec[-1], [run]))
        keys = profiles[0].keys()
        mean = {k: statistics.fmean(p[k] for p in profiles) for k in keys}
        si_mean = statistics.fmean(si_ms)
        print(f"\nSP={sp}: DSI {mean['ms_per_token']:.3f} ms/token, SI {si_mean:.3f} ms/token, "
              f"DSI/SI {si_mean / mean['ms_per_token']:.3f} (SI acceptance "
              f"{accepted / max(1, decided):.3f}); mean of {args.runs} runs:")
        wall = mean["wall_ms"]
        for key, label in (("forward_ms", "forward (device busy)"), ("idle_ms", "idle"),
                           ("no_task_ms", "  idle, no task submitted yet"),
                           ("gather_ms", "  idle, task submitted, not launched (gather)")):
            print(f"  {label:<46} {mean[key]:9.2f} ms  {100 * mean[key] / wall:5.1f} %")
        print(f"  {'boundary wait (task-ms waiting for a forward)':<46} "
              f"{mean['boundary_wait_ms']:9.2f} ms")
        print(f"  {'wait: submitted -> its forward starts, per task':<46} "
              f"{mean['wait_ms_mean']:9.3f} ms")
        print(f"  {'deliver: forward end -> committer, per task':<46} "
              f"{mean['deliver_ms_mean']:9.3f} ms")
        print(f"  {'committer handling results (total)':<46} {mean['committer_ms']:9.2f} ms")
        print(f"  forwards {mean['forwards']:.1f}, tasks/forward {mean['tasks_per_forward']:.2f}, "
              f"frontier+verify together {100 * mean['frontier_and_verify']:.0f} %")
        a, dsi_ms = accepted / max(1, decided), mean["ms_per_token"]
        if measured is not None:
            print(f"  measured costs (ms): TPOT {measured.tpot_ms:.3f}, window "
                  f"{measured.verify_ms:.3f}, batched " + ", ".join(
                      f"{b}: {ms:.3f}" for b, ms in sorted(measured.batched_ms.items())) +
                  f", drafter {measured.drafter_ms:.3f} (x{measured.drafter_beside:.2f} "
                  "beside a batched forward)")
            _predict(measured, args, sp, a, si_mean, dsi_ms)
        else:   # the synthetic costs: the drafter is never slowed down
            plain = H100_LLAMA7B
            _predict(BatchedCosts(plain.tpot_ms, plain.verify_ms, plain.batched_ms,
                                  plain.drafter_ms, 1.0, plain.lookahead, "the synthetic costs"),
                     args, sp, a, si_mean, dsi_ms)


def _predict(costs: BatchedCosts, args: argparse.Namespace, sp: int, a: float,
             si_ms: float, dsi_ms: float) -> None:
    """The rounds model's SI and DSI ms/token and DSI/SI for ``costs`` and acceptance ``a``,
    beside the measured ones (``--scale`` applied to the synthetic costs)."""
    p = predict(costs, a, sp, args.new_tokens, args.lookahead)
    scale = float(args.scale) if args.sleep else 1.0
    print(f"  predicted (rounds model, {costs.source}, a={a:.3f}): SI {p.si_ms * scale:.3f}, "
          f"DSI {p.dsi_ms * scale:.3f} ms/token, DSI/SI {p.dsi_over_si:.3f}; measured / "
          f"predicted time: SI {si_ms / (p.si_ms * scale):.3f}, DSI "
          f"{dsi_ms / (p.dsi_ms * scale):.3f}; DSI/SI measured / predicted "
          f"{si_ms / dsi_ms / p.dsi_over_si:.3f}")


if __name__ == "__main__":
    raise SystemExit(main())
