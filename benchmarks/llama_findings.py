#!/usr/bin/env python3
"""Write the llama.cpp part of docs/engine-findings.md: the matrix's verdicts for the installed
llama-cpp-python release, the findings that are not verdicts, and what the environment costs.

    .venv-llama/bin/python benchmarks/llama_findings.py            # print this release's section
    .venv-llama/bin/python benchmarks/llama_findings.py --write    # write it (~15 min), compose
    .venv-llama/bin/python benchmarks/llama_findings.py --measure-build   # also time the builds

Run it in the environment ``python3 run.py audit --llama`` builds (``.venv-llama``, with the C++
examples in ``.venv-llama/llama-cpp-bin``). ``--write`` stores the section in benchmarks/findings
(``llama-cpp-VERSION.md``: one file per release, every table row naming it) and
re-composes docs/engine-findings.md (`benchmarks/engine_findings.py --compose`, which needs the
test environment's torch: run it there if this one lacks it). Every row is a seeded audit (seed 0)
of `dsi_ref.backends.llama_cpp.matrix`: the same release gives the same counts.

``--measure-build`` times, on this machine, the two builds the environment needs (the binding's
wheel from its sdist with pip, and the C++ examples with `dsi_ref.backends.llama_cpp.build`) in
a temporary folder, and measures their sizes; without it the section keeps the cost lines of the
stored section, if any.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np

from dsi_ref.audit.statistical import POLICY_ALPHA, sample_seeds
from dsi_ref.backends.llama_cpp import build, cpp
from dsi_ref.backends.llama_cpp import models as m
from dsi_ref.backends.llama_cpp.binding import binding_version, load_llama, logits_all_crash
from dsi_ref.backends.llama_cpp.matrix import (
    EPSILON,
    N_TOKENS,
    PROMPT,
    CellResult,
    cells,
    prompt_ids,
    run_matrix,
)
from dsi_ref.backends.llama_cpp.options import probe_options
from dsi_ref.backends.llama_cpp.sampling import SAMPLERS

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ROOT / "benchmarks" / "findings"
COST_BEGIN, COST_END = "<!-- cost:begin -->", "<!-- cost:end -->"


def section_path(version: str) -> Path:
    """Where the section of llama-cpp-python ``version`` is stored."""
    return SECTIONS / f"llama-cpp-{version}.md"


def _row(version: str, r: CellResult) -> str:
    rep = r.report
    agree = "-" if r.agreement is None else f"{r.agreement:.4%}"
    return (f"| {version} | {r.cell.name} | **{rep.verdict}** | {r.expected} | {EPSILON:g} | "
            f"{rep.alpha:g} | {rep.power:.6f} | {rep.n_samples} | {rep.statistic:.4g} | "
            f"{rep.empirical_tv:.4f} | {agree} |")


def _predicted_rows(version: str, results: list[CellResult]) -> list[str]:
    rows = []
    for r in results:
        if r.predicted is None:
            continue
        check, tv, power = r.predicted
        rows.append(f"| {version} | {r.cell.name} | {tv:.4f} | {power:.6f} | "
                    f"**{check.verdict}** | {check.power:.6f} | {check.n_samples} | "
                    f"{check.statistic:.4g} | {check.empirical_tv:.4f} |")
    return rows


def logit_gaps() -> dict[str, float]:
    """The largest distance between llama.cpp's logits and the float64 forward, over the
    prompt and ten more tokens, with a float32 KV cache (the audit's) and the default float16
    one."""
    tokens = [*prompt_ids(), *(m.byte_token(b) for b in b"hgfedcba\x00\xff")]
    path = m.gguf_path(m.target_model())
    ref = m.forward(m.target_model(), tokens)
    out = {}
    import llama_cpp

    for name, kind in (("float32", llama_cpp.GGML_TYPE_F32), ("float16", llama_cpp.GGML_TYPE_F16)):
        llm = load_llama(path, logits_all=True, type_k=kind, type_v=kind)
        llm.eval(tokens)
        out[name] = float(np.abs(np.array(llm.scores[:len(tokens)], np.float64) - ref).max())
    return out


def logger_loss(runs: int, flush: bool = False) -> tuple[int, int]:
    """How many of ``runs`` runs of ``llama-speculative-simple`` (no drafts) lost their output,
    run one at a time, unpinned, as released or (``flush``) with the flush at exit that
    `dsi_ref.backends.llama_cpp.build` adds: ``(lost, runs)``."""
    target = m.gguf_path(m.target_model())
    path = cpp.CppPath("no-draft")
    command = [str(cpp.binary(path.example)), "-m", str(target), *path.args(), "-p",
               PROMPT.decode(), "-n", str(N_TOKENS), *cpp.COMMON_FLAGS,
               *SAMPLERS[0].cli_args()]
    lost = 0
    env = {k: v for k, v in os.environ.items() if k != build.FLUSH_VARIABLE}
    if flush:
        env[build.FLUSH_VARIABLE] = "1"
    for seed in sample_seeds(11, runs):
        done = subprocess.run([*command, "-s", str(seed % 0xFFFFFFFF)], capture_output=True,
                              check=False, env=env)
        lost += b"n_accept" not in done.stderr
    return lost, runs


def example_version() -> str:
    """The llama.cpp build the examples report (``--version``)."""
    done = subprocess.run([str(cpp.binary("llama-speculative")), "--version"],
                          capture_output=True, text=True, check=False)
    text = (done.stdout + done.stderr).strip().splitlines()
    return next((line for line in text if line.startswith("version")), "unknown")


def measure_build(log: list[str]) -> list[str]:
    """Time the binding's wheel build and the examples' build in a temporary folder."""
    lock = ROOT / "locks" / f"py{sys.version_info.major}{sys.version_info.minor}-llama.txt"
    requirement = build.pinned_requirement(lock)
    with tempfile.TemporaryDirectory(prefix="llama-cost-") as tmp:
        folder = Path(tmp)
        sdist = build.fetch_sdist(requirement, folder / "sdist", folder / "fetch.log")
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                        "--no-cache-dir", "-w", str(folder / "wheel"), str(sdist)], check=True)
        wheel_s = time.perf_counter() - start
        log.append(f"binding wheel built in {wheel_s:.0f} s")
        wheel = next((folder / "wheel").glob("*.whl"))
        start = time.perf_counter()
        built = build.build_examples(sdist, folder / "bin")
        examples_s = time.perf_counter() - start
        log.append(f"examples built in {examples_s:.0f} s")
        sizes = {name: path.stat().st_size for name, path in built.items()}
        sdist_mb, wheel_mb = sdist.stat().st_size / 1e6, wheel.stat().st_size / 1e6
    venv = subprocess.run(["du", "-sm", sys.prefix], capture_output=True, text=True,
                          check=False).stdout.split()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return [
        f"Measured on {date.today().isoformat()} on this project's machine ({cores} cores, "
        "shared with other work) by `benchmarks/llama_findings.py --measure-build`:", "",
        f"- the binding's wheel from its {sdist_mb:.0f} MB sdist (pip, cmake, g++): "
        f"{wheel_s:.0f} s, a {wheel_mb:.1f} MB wheel;",
        f"- the C++ examples from the same sdist (`{', '.join(built)}`, static): "
        f"{examples_s:.0f} s, {sum(sizes.values()) / 1e6:.0f} MB for the two binaries;",
        f"- the whole environment (`{Path(sys.prefix).name}`, binaries included): "
        f"{venv[0] if venv else '?'} MB.",
    ]


def _stored_cost(version: str) -> list[str]:
    path = section_path(version)
    if not path.exists():
        return ["Not measured yet (`benchmarks/llama_findings.py --write --measure-build`)."]
    text = path.read_text()
    found = re.search(re.escape(COST_BEGIN) + r"\n(.*?)\n" + re.escape(COST_END), text, re.S)
    return found[1].splitlines() if found else []


def render(version: str, results: list[CellResult], probes: list, gaps: dict[str, float],
           crash: str, loss: tuple[int, int], flushed: tuple[int, int], cost: list[str],
           quick: bool) -> str:
    """The release's section."""
    lossy = [r for r in results if r.report.verdict == "lossy"]
    stochastic = [r for r in results if r.cell.spec.mode == "speculative"]
    unexpected = [r for r in results if not r.ok]
    same = [r for r in results if r.agreement is not None]
    lossless_paths = sorted({r.cell.path for r in results if r.expected == "lossless"})
    speculative = [r for r in results if r.predicted is not None]
    lines = [
        f"## llama-cpp-python {version}", "",
        f"Audited with llama-cpp-python {version} (its llama.cpp built from the same sdist: the "
        f"binding, and `llama-speculative` / `llama-speculative-simple`, {example_version()}), "
        f"CPU, one thread, float32 KV caches. {'Quick' if quick else 'Full'} run of "
        f"{date.today().isoformat()}: {len(results)} cells, each a seeded statistical audit "
        f"(seed 0) at α = {POLICY_ALPHA:g} with power 0.99 against every law at TV ≥ {EPSILON} "
        f"from the target's exact law of the first {N_TOKENS} tokens.", "",
        f"### Findings (llama-cpp-python {version})", "",
        f"1. **`llama-speculative` is lossy** in {len([r for r in stochastic if r in lossy])} "
        f"of its {len(stochastic)} cells: it drafts the drafter's most likely token "
        "(`cur_p->data[0]`) but verifies it with the test of a draft drawn from q (accept if "
        "`r <= p/q`, else the residual). Its output follows the law this mechanism predicts "
        "(`dsi_ref.backends.llama_cpp.whitebox`: "
        + "; ".join(f"{r.cell.name}: exact TV {r.predicted[1]:.4f} to the target, audited "
                    f"against the prediction: {r.predicted[0].verdict}"
                    for r in speculative if r.predicted is not None)
        + "). The smallest program: docs/engine-bugs.md, section 11 (its exact TV is 1/3). "
        "Reading the code, its residual "
        "also pairs the two candidate lists by rank after sorting them by id, which is (p − q)+ "
        "only when the target's and the drafter's sampler chains keep the same tokens.",
        "2. **Lossless at the stated power**: " + ", ".join(f"`{p}`" for p in lossless_paths)
        + ". Each samples the target at every position and keeps a draft only while it equals "
        "that sample, so per seed it is plain sampling: the share of seeds whose tokens equal "
        "the non-speculative path's, over the same seeds, is "
        + (f"{min(r.agreement for r in same if r.agreement is not None):.4%} to "
           f"{max(r.agreement for r in same if r.agreement is not None):.4%}" if same else "-")
        + " (a difference is a batched forward rounding a draw across a boundary).",
        f"3. **The binding's `logits_all` crash**: `Llama(draft_model=...)` with the default "
        f"`logits_all=False` forces `logits_all` on inside but sizes its score buffer for "
        f"`n_batch` rows, so a prompt plus drafts longer than `n_batch` raises `{crash}` "
        "(`dsi_ref.backends.llama_cpp.binding.logits_all_crash`; pass `logits_all=True`).",
        "4. **Options accepted and silently ignored** (same seeds with and without; "
        "`dsi_ref.backends.llama_cpp.options`):", "",
        "| llama-cpp-python | path | option | compared | same with and without | mean with "
        "| mean without | honoured, it would |", "|---|---|---|---|---|---|---|---|",
        *(f"| {version} | {p.path} | `{p.option}` | {p.measure} | {p.same:.0%} of "
          f"{p.seeds} seeds | {'-' if p.with_option is None else f'{p.with_option:.2f}'} | "
          f"{'-' if p.without_option is None else f'{p.without_option:.2f}'} | {p.effect} |"
          for p in probes), "",
        "5. **Pitfalls an audit must handle** (each handled in `dsi_ref.backends.llama_cpp`): "
        "`generate()` reuses the `Llama` object's seed on every call (`set_seed` before each "
        "sample); the sampler defaults are top-k 40, top-p 0.95, min-p 0.05, temperature 0.8 "
        "(every setting is passed; the matrix's last sampler is those defaults); the C++ "
        "examples' acceptance coins come from a linear congruential generator, so consecutive "
        "seeds give stratified draws (the audit's seeds are 64-bit words reduced to 32 bits); "
        f"the examples' logger is not flushed at exit (ggml-org/llama.cpp#22142): {loss[0]} of "
        f"{loss[1]} short runs, one at a time, lost their whole output as released, "
        f"{flushed[0]} of {flushed[1]} with the opt-in flush at exit that the build adds "
        "(`dsi_ref.backends.llama_cpp.build`; a run whose output is still missing is repeated "
        "with its seed); `--draft-max` was renamed `--spec-draft-n-max`, "
        "and `llama-speculative-simple` needs `--spec-type` (with `-md` for draft-simple); "
        "ngram-simple drafts `--spec-ngram-simple-size-m` tokens, and only after "
        "`size-n + size-m + 1` tokens of context (defaults 12 and 48: never on a short prompt).",
        f"6. **Logits**: llama.cpp's logits are within {gaps['float32']:.2g} of the float64 "
        f"forward with a float32 KV cache ({gaps['float16']:.2g} with the default float16 "
        "cache); every reference's margin (how far its logits are from moving a token across a "
        "top-k, top-p, typical-p or min-p cut) is at least 1e-4.",
        "7. **Not audited here**: `llama-server`'s speculative options (the server was not "
        "built within this work's budget); grammars (the C++ sampler draws from the chain and, "
        "only when that token breaks the grammar, draws again with the grammar applied first, "
        "while the binding applies the grammar inside its chain: under a truncating sampler "
        "the two are different laws, and which one a user asked for is to be settled before "
        "either is audited).", "",
    ]
    if unexpected:
        lines += [f"**Unexpected verdicts**: {'; '.join(r.cell.name for r in unexpected)}.", ""]
    lines += [
        f"### Cells (llama-cpp-python {version})", "",
        "| llama-cpp-python | cell | verdict | expected | ε (TV) | α | power | samples | G | "
        "empirical TV | same as control |", "|---|---|---|---|---|---|---|---|---|---|---|",
        *(_row(version, r) for r in results), "",
        f"### `llama-speculative` against its predicted law (llama-cpp-python {version})", "",
        "Each cell of `llama-speculative` is sized for power 0.99 against TV ≥ 0.2 and against "
        "the law its mechanism predicts; that law is audited as a reference of its own (the "
        "example must follow it).", "",
        "| llama-cpp-python | cell | predicted law's exact TV to the target | the cell's power "
        "against it | verdict against the prediction | power | samples | G | empirical TV |",
        "|---|---|---|---|---|---|---|---|---|", *_predicted_rows(version, results), "",
        f"### Cost of the environment (llama-cpp-python {version})", "",
        COST_BEGIN, *cost, COST_END,
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="store the section and compose")
    parser.add_argument("--quick", action="store_true", help="the matrix's quick cells only")
    parser.add_argument("--measure-build", action="store_true", help="time the builds too")
    args = parser.parse_args(argv)
    version = binding_version()
    log: list[str] = []
    results = run_matrix(cells(quick=args.quick), progress=True)
    target, drafter = m.gguf_path(m.target_model()), m.gguf_path(m.near_drafter())
    probes = probe_options(target, drafter, prompt_ids(), PROMPT, sample_seeds(7, 40))
    cost = measure_build(log) if args.measure_build else _stored_cost(version)
    text = render(version, results, probes, logit_gaps(), logits_all_crash(target),
                  logger_loss(200), logger_loss(200, flush=True), cost, args.quick)
    for line in log:
        print(f"[llama_findings] {line}", file=sys.stderr)
    if not args.write:
        print(text)
        return 0
    SECTIONS.mkdir(exist_ok=True)
    section_path(version).write_text(text + "\n")
    print(f"wrote {section_path(version).relative_to(ROOT)}")
    composed = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "engine_findings.py"),
                               "--compose"], cwd=ROOT, check=False)
    if composed.returncode != 0:
        print("compose the page in the test environment: .venv/bin/python "
              "benchmarks/engine_findings.py --compose")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
