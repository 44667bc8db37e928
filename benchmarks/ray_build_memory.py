#!/usr/bin/env python3
"""What bringing up Ray target-server actors costs the driver (issue 26, item 1).

    .venv/bin/python benchmarks/ray_build_memory.py [--preset llama-7b] [--dtype bf16]
        [--actors 1] [--ship spec|pickle] [--weights PATH] [--forward] [--threads 1]
        [--json PATH]
    .venv/bin/python benchmarks/ray_build_memory.py --save-weights PATH [--preset ...]

Starts Ray in this process, then measures, from just before the target is made to the moment
every one of ``--actors`` server actors has built its model and answered (`RayEngine.servers`,
`RayEngine.server_pids`):

* ``driver_peak_growth_mb``: the driver's peak resident memory over that span minus its
  resident memory before it (Linux: ``VmHWM`` after resetting it through
  ``/proc/self/clear_refs``, and a 20 ms sampler of ``VmRSS``; the larger is reported). Ray's
  own processes (raylet, GCS, the object store's shared memory as such) are not the driver and
  are not counted; pages of the object store the driver writes (``ray.put`` of a pickled copy)
  are, as the kernel counts them in its resident set.
* ``up_seconds``: that span (process start, imports, building or unpickling the weights).
* ``actor_rss_mb``: each actor's resident memory once it answered (``VmRSS`` of its pid), and
  its parts ``actor_rss_anon_mb`` (private memory: drawn or unpickled weights) and
  ``actor_rss_file_mb`` (file pages, shared between processes: mapped weights, libraries).

``--ship spec`` (default): the driver passes a `ModelSpec` (`RayEngine(spec)`: the driver's copy
is a `LazyLM`, never built); each actor draws its own weights from the seed. ``--ship pickle``:
the driver builds the target (`TorchLM`) and every actor gets a pickled copy through the object
store (the behaviour before issue 26; its ``driver_peak_growth_mb`` includes the driver's copy).

``--weights PATH``: the spec names a weights file (written first, in its own run, by
``--save-weights PATH``: it draws the weights, 13.5 GB for llama-7b, and saves them) that each
actor memory-maps instead of drawing: the actors of one machine share its pages. ``--forward``:
each actor then runs one forward (which reads every weight; a mapped file's pages come into
the page cache once), and ``mem_available_drop_mb`` is the drop of the machine's
``MemAvailable`` (``/proc/meminfo``) from before the bring-up to after the forwards (other jobs
on the machine move it too).

Prints JSON (and writes it with ``--json``). Mind the machine's memory: each actor holds its own
copy (llama-7b in bf16: 13.5 GB; llama-1b: 2.5 GB), unless mapped from ``--weights``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import threading
import time
from pathlib import Path
from typing import Any

import ray

from dsi_ref.backends.ray import RayEngine, connect
from dsi_ref.backends.torch.model import TorchLM
from dsi_ref.backends.torch.spec import ModelSpec
from dsi_ref.backends.torch.transformer import PRESETS


def _status_kb(field: str, pid: int | str = "self") -> int:
    """A ``/proc/<pid>/status`` field in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


class _PeakSampler(threading.Thread):
    """The driver's largest ``VmRSS`` seen every 20 ms until stopped."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_kb = _status_kb("VmRSS")
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.02):
            self.peak_kb = max(self.peak_kb, _status_kb("VmRSS"))


def _available_kb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    raise KeyError("MemAvailable")


def measure(preset: str, dtype: str, actors: int, ship: str, threads: int,
            weights: str | None = None, forward: bool = False) -> dict[str, Any]:
    """The quantities of the module docstring, for one bring-up."""
    available_kb = _available_kb()
    before_kb = _status_kb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")      # VmHWM := VmRSS (Linux >= 4.0)
    sampler = _PeakSampler()
    sampler.start()
    began = time.perf_counter()
    target: Any = ModelSpec(preset=preset, dtype=dtype, weights=weights) if ship == "spec" \
        else TorchLM(preset, dtype=dtype, weights=weights)
    built = time.perf_counter() - began
    engine = RayEngine(target, None, ship=ship, server_threads=threads, start_timeout=3600.0)
    try:
        engine.pool(actors)
        pids = engine.server_pids()
        up = time.perf_counter() - began
        forward_s = None
        if forward:
            ray.get([engine.actor_for(s).rows.remote((1, 2, 3), 1) for s in range(actors)])
            forward_s = round(time.perf_counter() - began - up, 1)
        sampler.done.set()
        sampler.join()
        peak_kb = max(_status_kb("VmHWM"), sampler.peak_kb)
        actor_kb = [_status_kb("VmRSS", pid) for pid in pids]
        anon_kb = [_status_kb("RssAnon", pid) for pid in pids]
        file_kb = [_status_kb("RssFile", pid) for pid in pids]
        drop_kb = available_kb - _available_kb()
    finally:
        engine.close()
    config = PRESETS[preset]
    bytes_per = {"bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8}[dtype]
    return {"preset": preset, "dtype": dtype, "actors": actors, "ship": ship,
            "weights_file": weights, "threads_per_actor": threads,
            "weights_mb": round(config.n_params() * bytes_per / 1e6),
            "driver_rss_before_mb": round(before_kb / 1024),
            "driver_peak_growth_mb": round((peak_kb - before_kb) / 1024),
            "driver_build_seconds": round(built, 1),
            "up_seconds": round(up, 1),
            "forward_seconds": forward_s,
            "actor_rss_mb": [round(kb / 1024) for kb in actor_kb],
            "actor_rss_anon_mb": [round(kb / 1024) for kb in anon_kb],
            "actor_rss_file_mb": [round(kb / 1024) for kb in file_kb],
            "mem_available_drop_mb": round(drop_kb / 1024)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="llama-7b", choices=sorted(PRESETS))
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32", "fp64"))
    parser.add_argument("--actors", type=int, default=1)
    parser.add_argument("--ship", default="spec", choices=("spec", "pickle"))
    parser.add_argument("--threads", type=int, default=1, help="torch threads per actor")
    parser.add_argument("--weights", metavar="PATH", help="map the weights from this file")
    parser.add_argument("--save-weights", metavar="PATH",
                        help="only draw the weights and write them to PATH")
    parser.add_argument("--forward", action="store_true", help="one forward per actor")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    if args.save_weights:
        TorchLM(args.preset, dtype=args.dtype).save_weights(args.save_weights)
        return 0
    connect(None, num_cpus=2)
    result = {"machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, "
                         f"python {platform.python_version()}, ray {ray.__version__}",
              **measure(args.preset, args.dtype, args.actors, args.ship, args.threads,
                        args.weights, args.forward)}
    ray.shutdown()
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
