#!/usr/bin/env python3
"""Measure what a Ray target server costs beyond its forward (docs/ray-backend.md).

    .venv/bin/python benchmarks/ray_overheads.py [--address HOST:PORT] [--repeats 200]
                                                 [--json PATH]

Measured against one actor of `dsi_ref.backends.ray` (the `TargetServer` class, the tiny
target built in the actor from its `ModelSpec`; medians over ``--repeats`` calls, after a
warm-up):

* ``round_trip_us``: an actor call with no payload (``ping``), submit to reply.
* ``row_v32000_us``: the same call returning one row of ``V = 32 000`` float64 probabilities
  (what a frontier task returns at the paper's vocabulary), and ``rows_k6_v32000_us`` six rows
  (a verification task with ``k = 5``).
* ``verify_result_us``: a KV-free verification result (the accepted length and the token,
  without rows: what a server that verifies itself would return).
* ``cancel_us``: `ray.cancel` of a running call that polls ``is_canceled()`` every 0.1 ms, to
  the moment its reply (`TaskCancelledError`) is read; ``cancel_queued_us``: of a queued call
  (behind nothing: cancelled in transit).
* ``tiny_forward_us`` and ``tiny_call_us``: one forward of the tiny target inside the actor,
  and the whole call around it (so ``tiny_call_us - tiny_forward_us`` is the overhead a real
  task pays, with its tokens and its row).

Prints JSON (and writes it with ``--json``). The per-task overhead the simulator takes
(``task_overhead``, in target forwards) is the overhead of a call returning the task's rows,
over the target's TPOT.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import ray
import ray.exceptions

from dsi_ref.backends.ray import connect
from dsi_ref.backends.torch.model import build_pair


@ray.remote
class _Probe:
    """Payload shapes of the calls a DSI run makes."""

    def __init__(self, vocab: int) -> None:
        self.one = np.random.default_rng(0).random((1, vocab))
        self.six = np.random.default_rng(1).random((6, vocab))

    def ping(self) -> None:
        return None

    def row(self, tokens: tuple[int, ...]) -> tuple[np.ndarray, float]:
        return self.one, 0.0

    def rows(self, tokens: tuple[int, ...]) -> tuple[np.ndarray, float]:
        return self.six, 0.0

    def verdict(self, tokens: tuple[int, ...]) -> tuple[int, int]:
        return 3, 17

    def spin(self, seconds: float) -> bool:
        context = ray.get_runtime_context()
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            if context.is_canceled():
                return False
            time.sleep(1e-4)
        return True


def _median_us(call: Callable[[], Any], repeats: int) -> float:
    for _ in range(max(3, repeats // 10)):
        call()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1e6


def _cancel_us(probe: Any, repeats: int, running: bool) -> float:
    times = []
    for _ in range(repeats):
        ref = probe.spin.remote(1.0)
        if running:
            time.sleep(0.005)
        began = time.perf_counter()
        ray.cancel(ref)
        with contextlib.suppress(ray.exceptions.TaskCancelledError):
            ray.get(ref)
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1e6


def measure(repeats: int, vocab: int = 32000) -> dict[str, Any]:
    """The medians described in the module docstring, in microseconds."""
    options = {"num_cpus": 0, "allow_out_of_order_execution": True}
    probe = _Probe.options(**options).remote(vocab)  # type: ignore[attr-defined]
    ray.get(probe.ping.remote())
    tokens = tuple(range(64))
    out: dict[str, Any] = {
        "round_trip_us": _median_us(lambda: ray.get(probe.ping.remote()), repeats),
        "row_v32000_us": _median_us(lambda: ray.get(probe.row.remote(tokens)), repeats),
        "rows_k6_v32000_us": _median_us(lambda: ray.get(probe.rows.remote(tokens)), repeats),
        "verify_result_us": _median_us(lambda: ray.get(probe.verdict.remote(tokens)), repeats),
        "cancel_us": _cancel_us(probe, max(10, repeats // 10), running=True),
        "cancel_queued_us": _cancel_us(probe, max(10, repeats // 10), running=False),
    }
    ray.kill(probe)
    from dsi_ref.backends.ray.server import RemoteServer

    target, _ = build_pair()        # the actor builds it from its spec, as RayEngine's do
    server: Any = RemoteServer.options(**options).remote(target.spec(), "cpu", 1, None, 1)
    context = (1, 2, 3, 4, 5)
    ray.get(server.rows.remote(context, 1))
    forwards: list[float] = []

    def call() -> None:
        _, seconds = ray.get(server.rows.remote(context, 1))
        forwards.append(seconds)

    out["tiny_call_us"] = _median_us(call, repeats)
    out["tiny_forward_us"] = statistics.median(forwards) * 1e6
    ray.kill(server)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", help="a Ray cluster (default: start Ray here)")
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    connect(args.address, num_cpus=2)
    result = {"machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, "
                         f"python {platform.python_version()}, ray {ray.__version__}",
              "address": args.address or "in-process", "repeats": args.repeats,
              **{k: round(v, 1) for k, v in measure(args.repeats).items()}}
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
