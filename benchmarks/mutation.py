#!/usr/bin/env python3
"""Mutation testing of the core modules with mutmut 3 (issue #13, item 7); docs/mutation-testing.md.

    .venv/bin/pip install 'mutmut>=3.8,<4'         # or: pip install -e '.[dev]'
    nohup nice -n 19 .venv/bin/python benchmarks/mutation.py verification \\
        > /tmp/mutation.log 2>&1 &                  # one module, in the background
    .venv/bin/python benchmarks/mutation.py all     # every module in MODULES (hours)

For each module it extracts the committed tree at HEAD (``git archive``) into a scratch directory
(``--workdir``, default ``$TMPDIR/dsi-ref-mutation/<module>``), appends a ``[tool.mutmut]``
section to the *copy's* pyproject.toml (mutate only that module; run only the module's fast tests
of `MODULES`, in one process, stopping at the first failure, Hypothesis derandomised), runs
``mutmut run`` there and writes the score and every survivor's diff to
``docs/mutation-results/<module>.json`` and ``.txt``. The working tree is never written to,
except for those result files; mutmut's ``mutants/`` copy lives in the scratch directory.

Outside CI: it runs for minutes per module on a two-core machine (the pilot's numbers are in
docs/mutation-testing.md). It asserts nothing; the exit status is 0 when mutmut ran.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "mutation-results"
#: module key -> (the file mutated, the fast tests that cover it): first the module's own
#: mutant-killing file (exact expectations, whole messages, every boundary; a few seconds), then
#: a few broader files. mutmut runs, per mutant, only the tests that reach the mutated function
#: (from its own coverage run), and stops at the first failure.
MODULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "verification": ("dsi_ref/decoders/verification.py", (
        "tests/test_verification_mutants.py", "tests/test_block_verification.py",
        "tests/test_core_speculative.py",
        "tests/test_si_run.py", "tests/test_zoo_mutants.py",
        "tests/test_float_models.py", "tests/test_lossless_registry.py",
        "tests/test_dsi_determinism.py")),
    "speculative": ("dsi_ref/decoders/speculative.py", (
        "tests/test_speculative_mutants.py", "tests/test_auto_state.py", "tests/test_si_run.py",
        "tests/test_block_verification.py",
        "tests/test_core_speculative.py", "tests/test_verification_mutants.py")),
    "dsi": ("dsi_ref/decoders/dsi.py", (
        "tests/test_dsi_mutants.py", "tests/test_block_verification.py",
        "tests/test_auto_state.py", "tests/test_dsi_determinism.py",
        "tests/test_schedulers_classes.py", "tests/test_dsi_schedules.py")),
    "exact": ("dsi_ref/audit/exact/law.py", (
        "tests/test_exact_mutants.py", "tests/test_hidden_randomness.py",
        "tests/test_core_speculative.py")),
    "exact_engine": ("dsi_ref/audit/exact/engine.py", (
        "tests/test_exact_mutants.py", "tests/test_hidden_randomness.py",
        "tests/test_merge_crosscheck.py", "tests/test_core_speculative.py")),
    "exact_guard": ("dsi_ref/audit/exact/guard.py", (
        "tests/test_exact_mutants.py", "tests/test_hidden_randomness.py")),
    "exact_witness": ("dsi_ref/audit/exact/witness.py", (
        "tests/test_exact_mutants.py", "tests/test_core_speculative.py")),
    "exact_rows": ("dsi_ref/audit/exact/rows.py", (
        "tests/test_exact_mutants.py", "tests/test_float_models.py")),
    "laws": ("dsi_ref/audit/laws.py", (
        "tests/test_laws_mutants.py", "tests/test_float_models.py")),
    "statistical": ("dsi_ref/audit/statistical/*.py", (  # a package since the split
        "tests/test_statistical_mutants.py", "tests/test_statistical_audit.py")),
    # issue 34, point 8: the modules of the rounds since
    "exact_uniform": ("dsi_ref/audit/exact/uniform.py", (
        "tests/test_exact_uniform_mutants.py", "tests/test_uniform.py",
        "tests/test_exact_mutants.py", "tests/test_bad_inputs.py",
        "tests/test_core_randomness.py")),
    "models": ("dsi_ref/base/models.py", (  # read_row: what the float tolerance relies on
        "tests/test_core_models.py", "tests/test_float_models.py")),
    "claims_attack": ("dsi_ref/claims/attack.py", ("tests/test_claims.py",)),
    "claims_instances": ("dsi_ref/claims/instances.py", ("tests/test_claims.py",)),
    "claims_registry": ("dsi_ref/claims/registry.py", ("tests/test_claims.py",)),
    "claims_render": ("dsi_ref/claims/render.py", ("tests/test_claims.py",)),
    "vectorised": ("dsi_ref/backends/engine/vectorised.py", ("tests/test_backend_vectorised.py",)),
    "vectorised_tree": ("dsi_ref/backends/engine/vectorised_tree.py",
                        ("tests/test_vectorised_tree.py",)),
    "engine_tree": ("dsi_ref/backends/engine/tree.py", ("tests/test_engine_tree.py",)),
}
#: Arguments of every pytest run inside mutmut: one process (pyproject's addopts spread the run
#: over xdist workers), stop at the first failure, no cache written.
PYTEST_ARGS = ("-n", "0", "-x", "-q", "-p", "no:cacheprovider")


def _toml_list(values: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(json.dumps(value) for value in values) + "]"


def prepare(module: str, workdir: Path) -> None:
    """A fresh copy of the repository's tracked files in ``workdir``, configured for ``module``."""
    path, tests = MODULES[module]
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    # the committed tree at HEAD (not the working tree: files being edited are not mutated)
    archive = subprocess.run(["git", "archive", "--format=tar", "HEAD"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(workdir, filter="data")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.strip()
    (workdir / "COMMIT").write_text(commit + "\n")
    config = (f"\n[tool.mutmut]\nsource_paths = [\"dsi_ref\"]\n"
              f"only_mutate = {_toml_list([path])}\n"
              f"pytest_add_cli_args = {_toml_list(PYTEST_ARGS)}\n"
              f"pytest_add_cli_args_test_selection = {_toml_list(tests)}\n"
              "also_copy = [\"docs\", \"theory\", \"proofs\", \"benchmarks\", \"mkdocs.yml\"]\n")
    with (workdir / "pyproject.toml").open("a") as handle:
        handle.write(config)


def _mutmut(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    executable = Path(sys.executable).with_name("mutmut")
    env = dict(os.environ, HYPOTHESIS_PROFILE="ci", PYTHONDONTWRITEBYTECODE="1")
    env.pop("CI", None)
    return subprocess.run([str(executable), *args], cwd=workdir, env=env, text=True,
                          capture_output=True)


def collect(workdir: Path) -> dict[str, str]:
    """``{mutant name: status}`` from mutmut's result files in ``workdir/mutants``."""
    from mutmut.stats import status_by_exit_code  # the installed mutmut's own reading

    statuses: dict[str, str] = {}
    for meta in sorted((workdir / "mutants").rglob("*.meta")):
        data = json.loads(meta.read_text())
        for name, code in data.get("exit_code_by_key", {}).items():
            statuses[name] = status_by_exit_code[code]
    return statuses


def run_module(module: str, workdir: Path, max_children: int) -> dict[str, object]:
    """Run mutmut on one module; write and return its summary."""
    prepare(module, workdir)
    start = time.monotonic()
    ran = _mutmut(workdir, "run", "--max-children", str(max_children))
    seconds = time.monotonic() - start
    (workdir / "mutmut-run.log").write_text(ran.stdout + ran.stderr)
    statuses = collect(workdir)
    counts: dict[str, int] = {}
    for status in statuses.values():
        counts[status] = counts.get(status, 0) + 1
    killed = counts.get("killed", 0) + counts.get("timeout", 0)
    decided = killed + counts.get("survived", 0)
    survivors = {name: _mutmut(workdir, "show", name).stdout
                 for name, status in statuses.items() if status not in ("killed", "timeout")}
    commit = (workdir / "COMMIT").read_text().strip()
    summary: dict[str, object] = {
        "module": MODULES[module][0], "commit": commit, "tests": list(MODULES[module][1]),
        "pytest_args": list(PYTEST_ARGS), "mutants": len(statuses), "counts": counts,
        "score": round(killed / decided, 4) if decided else None,
        "seconds": round(seconds, 1), "mutmut_exit": ran.returncode,
        "survivors": sorted(survivors)}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{module}.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = [f"# mutmut on {summary['module']}: {len(statuses)} mutants, {counts}, "
             f"score {summary['score']} (killed + timeout over killed + timeout + survived), "
             f"{seconds / 60:.1f} min", f"# tests: {' '.join(MODULES[module][1])}", ""]
    lines += [survivors[name].rstrip() + "\n" for name in sorted(survivors)]
    (RESULTS / f"{module}.txt").write_text("\n".join(lines))
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("modules", nargs="+", choices=[*MODULES, "all"])
    parser.add_argument("--workdir", type=Path,
                        default=Path(tempfile.gettempdir()) / "dsi-ref-mutation")
    parser.add_argument("--max-children", type=int, default=1,
                        help="mutants tested at once (default 1: the machine is shared)")
    args = parser.parse_args(argv)
    if shutil.which("mutmut", path=str(Path(sys.executable).parent)) is None:
        parser.error("mutmut is not installed next to this python: pip install 'mutmut>=3.8,<4'")
    modules = list(MODULES) if "all" in args.modules else args.modules
    for module in modules:
        summary = run_module(module, args.workdir / module, args.max_children)
        print(json.dumps({key: summary[key] for key in
                          ("module", "mutants", "counts", "score", "seconds", "mutmut_exit")}),
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
