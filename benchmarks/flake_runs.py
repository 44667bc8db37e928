#!/usr/bin/env python3
"""Flakiness check (issue #13, item 8): the default suite N times with different Hypothesis seeds.

    nohup nice .venv/bin/python benchmarks/flake_runs.py --runs 20 > /tmp/flake.log 2>&1 &

Run ``i`` (``i = 0 .. N-1``) is ``pytest --hypothesis-seed=<seed0 + i>`` with the ``dev``
Hypothesis profile (tests/conftest.py: not derandomised, so the seed decides the examples) and
pyproject.toml's default options (``-m 'not slow and not gpu'``, xdist workers). Each run's
pass/fail/error/skip counts, failed tests and duration go into ``--out`` (JSON) and a markdown
table on stdout. The exit status is 1 when any run failed, else 0. Not part of CI: one run is the
whole default suite (about two minutes on two cores). To test a fixed commit while the working
tree changes, run it from a clone (``python -m pytest`` puts the clone first on ``sys.path``):
``git clone . /tmp/flake && cd /tmp/flake && /path/to/.venv/bin/python benchmarks/flake_runs.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)")
_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


def one_run(seed: int, extra: list[str], timeout: float) -> dict[str, object]:
    """Run the default suite once with ``--hypothesis-seed=seed``; its counts and failures (a
    run past ``timeout`` seconds is killed and counts as failed: a hang is a flake too)."""
    env = dict(os.environ, HYPOTHESIS_PROFILE="dev")
    env.pop("CI", None)  # CI selects the derandomised profile
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               f"--hypothesis-seed={seed}", *extra]
    start = time.monotonic()
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, text=True, capture_output=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout.decode() if isinstance(expired.stdout, bytes) else ""
        return {"seed": seed, "exit": "timeout", "seconds": round(timeout, 1), "counts": {},
                "failures": [f"the run passed its {timeout:g} s limit"],
                "summary": out.strip().splitlines()[-1] if out.strip() else ""}
    seconds = time.monotonic() - start
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    counts: dict[str, int] = {}
    for number, word in _COUNT.findall(tail):
        key = "errors" if word.startswith("error") else word
        counts[key] = counts.get(key, 0) + int(number)
    return {"seed": seed, "exit": done.returncode, "seconds": round(seconds, 1),
            "counts": counts, "failures": _FAILED.findall(done.stdout), "summary": tail}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=20, help="how many runs (default 20)")
    parser.add_argument("--seed0", type=int, default=0, help="the first run's Hypothesis seed")
    parser.add_argument("--timeout", type=float, default=900,
                        help="seconds before a run counts as hung (default 900)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/dsi-ref-flake-runs.json"))
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True).stdout.strip() or "unknown"
    print(f"commit {commit}, {args.runs} runs of the default suite\n")
    runs = []
    print("| run | seed | exit | passed | failed | errors | seconds | failures |")
    print("|---|---|---|---|---|---|---|---|")
    for i in range(args.runs):
        run = one_run(args.seed0 + i, args.pytest_args, args.timeout)
        runs.append(run)
        counts, failures = run["counts"], run["failures"]
        assert isinstance(counts, dict) and isinstance(failures, list)
        print(f"| {i} | {run['seed']} | {run['exit']} | {counts.get('passed', 0)} | "
              f"{counts.get('failed', 0)} | {counts.get('errors', 0)} | {run['seconds']} | "
              f"{', '.join(failures) or '-'} |", flush=True)
        args.out.write_text(json.dumps({"commit": commit, "runs": runs}, indent=2) + "\n")
    failed = [run for run in runs if run["exit"] != 0]
    print(f"\n{len(runs)} runs, {len(failed)} failed; details in {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
