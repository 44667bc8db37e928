#!/usr/bin/env python3
"""What each module-level cache of the core buys: the time of the same work with the cache
turned off (it keeps nothing), against with it on. Prints numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_caches.py [--repeats 3]

The caches (each a dict or list at module level, bounded or keyed by identity with a reference
held, read only by the module that owns it):

* ``decoders.common._LAST_INPUTS``: the last inputs a decoder validated (the exact engine
  enters a decoder once per branch with the same objects);
* ``decoders.common._LAST_CONFIGS``: the last configuration built per class, likewise;
* ``decoders.common._COST_LAWS``: each `Latency`'s cost laws, read once (at most 256);
* ``decoders.verification._RESIDUALS``: residual rows ``(p - q)+`` of tuple rows (at most
  16,384);
* ``base.randomness._CDF_CACHE``: a row's cumulative sums for the sampler (at most 4,096);
* ``base.randomness._ROLE_CODES``: the hash of each key's role, for keyed uniforms;
* ``audit.schedulers._EQUAL_WEIGHTS``: the uniform tie rule's weights per count (one tuple per
  count, which the exact engine caches by identity).

The work: the exact laws of `benchmarks/bench_exact_speed.py`'s ``si`` and ``dsi`` instances
(CPU seconds, the median of ``--repeats``), 2,000 sampled SI and DSI runs (a `Sampler`, keyed
draws) on the same pair, and for the uniform tie rule's cache its ``point1-uniform`` instance.
A cache is turned off by replacing it with a container that stores nothing, so every call
computes afresh; the laws and tokens are checked equal either way.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_exact_speed

import dsi_ref as dr

CACHES = (("dsi_ref.decoders.common", "_LAST_INPUTS"), ("dsi_ref.decoders.common", "_LAST_CONFIGS"),
          ("dsi_ref.decoders.common", "_COST_LAWS"),
          ("dsi_ref.decoders.verification", "_RESIDUALS"),
          ("dsi_ref.base.randomness", "_CDF_CACHE"), ("dsi_ref.base.randomness", "_ROLE_CODES"),
          ("dsi_ref.audit.schedulers", "_EQUAL_WEIGHTS"))


class _NoDict(dict[Any, Any]):
    """A dict that stores nothing."""

    def __setitem__(self, key: Any, value: Any) -> None:
        pass


class _NoList(list[Any]):
    """A list that stores nothing."""

    def __setitem__(self, index: Any, value: Any) -> None:
        pass


def _work() -> dict[str, Callable[[], object]]:
    found = bench_exact_speed.instances(dr)
    target = dr.TableLM.random(4, 1, seed=1, name="target")
    drafter = dr.TableLM.random(4, 1, seed=2, name="drafter")

    def sampled() -> object:
        return [(dr.speculative(target, drafter, (), 6, dr.Sampler(s), lookahead=3).tokens,
                 dr.dsi(target, drafter, (), 6, dr.Sampler(s), lookahead=3,
                        sp_degree=2).tokens) for s in range(1000)]

    return {"si law": found["si"].exact, "dsi law": found["dsi"].exact,
            "2,000 sampled runs": sampled, "point1-uniform law": found["point1-uniform"].exact}


#: The work only one cache serves (``point1-uniform`` takes some 30 s a law): timed for that
#: cache alone.
ONLY = {"point1-uniform law": "_EQUAL_WEIGHTS"}


def _time(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.process_time()
        result = fn()
        times.append(time.process_time() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    work = _work()
    names = list(work)
    for fn in work.values():  # warm every cache and import once before anything is timed
        fn()
    base = {name: _time(fn, 1)[1] for name, fn in work.items()}
    print(f"{'cache turned off: CPU s off / on, the median of':<50}"
          + "".join(f"{n:>20}" for n in names))
    print(f"{'the interleaved pairs (their range)':<50}")
    for module_name, attr in CACHES:
        module = importlib.import_module(module_name)
        saved = getattr(module, attr)
        cells = []
        for name in names:
            if ONLY.get(name, attr) != attr:
                cells.append(f"{'-':>20}")
                continue
            ratios: list[float] = []
            for _ in range(args.repeats):   # interleaved: each repeat times on, then off
                on, _ = _time(work[name], 1)
                setattr(module, attr, _NoList() if isinstance(saved, list) else _NoDict())
                try:
                    off, result = _time(work[name], 1)
                finally:
                    setattr(module, attr, saved)
                if result != base[name]:
                    raise SystemExit(f"{attr} off changed the result of {name}")
                ratios.append(off / on)
            spread = f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
            cells.append(f"{spread:>20}")
        print(f"{module_name.removeprefix('dsi_ref.') + '.' + attr:<50}" + "".join(cells),
              flush=True)


if __name__ == "__main__":
    main()
