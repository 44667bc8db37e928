"""The statistical audit's fan-out over Ray workers: `sample_parallel` and `ray_map`.

The audit itself (`dsi_ref.audit.statistical`) never imports Ray: it takes ``sample_map=``,
and `ray_map` makes one.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import ray

from ...base.errors import BackendError, ServerTimeoutError
from .connect import check_seconds, connect

__all__ = ["ray_map", "sample_parallel"]


@ray.remote
def _sample_chunk(sample_fn: Callable[[int], Any], seeds: list[int]) -> list[Any]:
    return [sample_fn(s) for s in seeds]


def sample_parallel(sample_fn: Callable[[int], Any], seeds: Sequence[int], *, workers: int,
                    chunk: int | None = None, timeout: float | None = None) -> list[Any]:
    """``[sample_fn(s) for s in seeds]``, computed by at most ``workers`` Ray tasks at once.

    The seeds are cut into chunks (``chunk`` seeds each; default: about four chunks per worker)
    and the results are put back in seed order, so the list — hence an audit's counts and
    verdict — does not depend on ``workers``. ``sample_fn`` must be picklable (cloudpickle:
    closures and lambdas are) and a function of its seed. Starts a local Ray if none runs.
    ``timeout``: seconds for the whole call (`ServerTimeoutError` when it passes; the chunks
    still running are cancelled); ``None``: no bound.
    """
    if workers < 1:
        raise BackendError(f"workers must be >= 1, got {workers!r}")
    check_seconds("timeout", timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    seeds = list(seeds)
    if not seeds:
        return []
    connect()
    size = chunk or max(1, -(-len(seeds) // (4 * workers)))
    chunks = [seeds[i:i + size] for i in range(0, len(seeds), size)]
    fn_ref = ray.put(sample_fn)
    results: dict[int, list[Any]] = {}
    pending: dict[ray.ObjectRef[Any], int] = {}

    def collect(until: int) -> None:      # wait until at most ``until`` chunks are pending
        while len(pending) > until:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            done, _ = ray.wait(list(pending), num_returns=1, timeout=left)
            if not done:
                for ref in pending:
                    with contextlib.suppress(Exception):
                        ray.cancel(ref)
                raise ServerTimeoutError(f"sample_parallel did not end within its timeout of "
                                         f"{timeout:g} s ({len(pending)} chunks unfinished)")
            results[pending.pop(done[0])] = ray.get(done[0])

    for index, part in enumerate(chunks):
        collect(workers - 1)
        pending[_sample_chunk.remote(fn_ref, part)] = index
    collect(0)
    return [value for index in range(len(chunks)) for value in results[index]]


def ray_map(workers: int, chunk: int | None = None, timeout: float | None = None
            ) -> Callable[[Callable[[int], Any], Sequence[int]], Iterable[Any]]:
    """A ``sample_map`` for `dsi_ref.audit.statistical.statistical_audit`: its samples drawn
    by `sample_parallel` over ``workers`` Ray workers (``timeout``: per call)."""
    def sample_map(sample_fn: Callable[[int], Any], seeds: Sequence[int]) -> list[Any]:
        return sample_parallel(sample_fn, seeds, workers=workers, chunk=chunk,
                               timeout=timeout)
    return sample_map
