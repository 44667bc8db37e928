"""The ``hf`` section of ``dsi-ref audit``: statistical audits that need torch / transformers.

* Hugging Face ``transformers`` assisted generation (``generate(..., assistant_model=...,
  do_sample=True)``) on toy models wrapped as HF models, against their exact law, with the power
  stated against a TV ball; plain HF sampling as a control;
* our decoders run on torch models through the adapter, and sampled directly (throughput);
* every zoo mutant through the same harness (negative controls), directly and through torch;
* the dtype study (TV introduced by float64 / float32 / bfloat16 logits).

Without torch or transformers the section reports itself skipped, with the reason. Run it alone
with ``dsi-ref audit --section hf`` (``--quick`` for a smaller budget).
"""

from __future__ import annotations

import importlib.util
import time
from typing import Any

from .core import Section, SectionSpec

__all__ = ["SECTION", "hf_section"]

_COLUMNS = ("audit", "models", "n", "alternative", "power", "G", "p <=", "verdict", "samples/s")


def _missing() -> list[str]:
    return [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]


def _row(audit: str, models: str, report: Any) -> tuple[Any, ...]:
    return (audit, models, report.n_samples, report.alternative, round(report.power, 6),
            round(report.statistic, 2), f"{report.p_value:.2g}", report.verdict,
            round(report.samples_per_second))


def hf_section(*, quick: bool = False, progress: bool = True) -> Section:
    """Run the torch / HF statistical audits and return them as one table."""
    section = Section("hf", "Statistical audits: HF assisted generation, torch adapter, zoo",
                      _COLUMNS)
    missing = _missing()
    if missing:
        section.rows.append(("hf", "-", 0, "-", "-", "-", "-", "skipped", "-"))
        section.notes.append(f"skipped: {', '.join(missing)} not installed "
                             "(pip install 'dsi-ref[torch]')")
        return section
    start = time.perf_counter()
    from ...audit.suite import ModelPair, default_suite
    from ...backends.hf.assisted import (
        HFAuditConfig,
        audit_hf_assisted,
        audit_own_decoders,
        dtype_study,
        negative_controls,
        transformers_version,
    )

    epsilon = 0.2 if quick else 0.1
    config = HFAuditConfig(epsilon=epsilon)
    models = f"bigram V={config.vocab_size}, N={config.max_new_tokens}"
    version = transformers_version()
    hf = audit_hf_assisted(config)
    section.rows.append(_row(f"HF {version} assisted (default assistant)", models, hf))
    reports = [hf]
    if not quick:
        control = audit_hf_assisted(HFAuditConfig(epsilon=0.2), drafter=False)
        section.rows.append(_row(f"HF {version} plain sampling (control)", models, control))
        reports.append(control)
    pair = default_suite()[1]
    small = ModelPair(pair.name, pair.target, pair.drafter, (), 3)
    for name, report in audit_own_decoders(small, epsilon=epsilon).items():
        section.rows.append(_row(f"ours via torch adapter: {name}", "suite bigram, N=3", report))
        reports.append(report)
    section.ok = all(r.verdict == "lossless" for r in reports)
    for via in ("sampler",) if quick else ("sampler", "torch"):
        controls = negative_controls(via)
        flagged = sum(c.flagged for c in controls)
        section.ok &= flagged == len(controls)
        miss = max(1 - c.report.power for c in controls)
        section.rows.append((f"zoo mutants via {via} (negative controls)", "suite",
                             sum(c.report.n_samples for c in controls),
                             "each mutant's exact law", f">= 1 - {max(miss, 1e-16):.0e}", "-", "-",
                             f"{flagged}/{len(controls)} flagged", "-"))
        for c in controls:
            if not c.flagged:
                section.notes.append(f"NOT flagged: {c.mutant} via {via} on {c.model}")
    rows = dtype_study()
    for dtype in ("float64", "float32", "bfloat16"):
        worst = max(r.tv for r in rows if r.dtype == dtype)
        section.rows.append((f"dtype study: {dtype} logits", "toy suite, N=3", "-",
                             "exact", "-", "-", "-", f"max TV {worst:.2e}", "-"))
    section.notes.append(f"verdict for transformers {version}: assisted generation is "
                         f"{hf.verdict} (power {hf.power:.4f} against {hf.alternative}, "
                         f"false-alarm rate <= {hf.alpha:g})")
    section.notes.append("'lossless' = no deviation found by a test with the stated power; "
                         "see docs/statistical-policy.md")
    section.seconds = time.perf_counter() - start
    return section


#: The section spec registered in `dsi_ref.commands.audit.TOP_SECTIONS`.
SECTION = SectionSpec("hf", hf_section, opt_in=True)  # ~1 min of sampling: `--hf`
