"""The ``llama`` section of ``dsi-ref audit``: llama.cpp's speculative paths against the exact law.

Every cell of `dsi_ref.backends.llama_cpp.matrix.cells` (the binding without speculation, with
prompt lookup and with a draft model; ``llama-speculative-simple`` without drafts, with
draft-simple and with ngram-simple; ``llama-speculative``), under each sampler and draft length,
audited at false-alarm rate 1e-8 with power 0.99 against every law at TV >= 0.2 from the target's
exact law. The section passes when every verdict is the expected one: lossless, except
``llama-speculative``, which must be found lossy and must follow the law its mechanism predicts
(docs/engine-bugs.md, section 11). ``--quick``: the two controls, prompt lookup and
``llama-speculative``, plain sampling. Opt-in: ``dsi-ref audit --section llama`` (``--llama``),
in the environment ``python3 run.py audit --llama`` builds.
"""

from __future__ import annotations

import importlib.util
import time
from typing import Any

from .core import Section, SectionSpec

__all__ = ["SECTION", "llama_section"]

_COLUMNS = ("cell", "verdict", "expected", "power", "samples", "G", "empirical TV",
            "same as control", "samples/s")


def _missing() -> list[str]:
    return [name for name in ("llama_cpp", "gguf") if importlib.util.find_spec(name) is None]


def llama_section(*, quick: bool = False, progress: bool = True) -> Section:
    """Run the llama.cpp matrix (``quick``: four cells) and return it as one table."""
    section = Section("llama", "Engines: llama.cpp speculative decoding", _COLUMNS)
    missing = _missing()
    if missing:
        section.rows.append(("llama", "skipped", "-", "-", "-", "-", "-", "-", "-"))
        section.notes.append(f"skipped: {', '.join(missing)} not installed "
                             "(`python3 run.py audit --llama` builds the llama.cpp environment)")
        return section
    start = time.perf_counter()
    from ...backends.llama_cpp.binding import binding_version
    from ...backends.llama_cpp.matrix import EPSILON, N_TOKENS, cells, run_matrix

    results = run_matrix(cells(quick=quick), progress=progress)
    for r in results:
        report: Any = r.report
        agree = "-" if r.agreement is None else f"{r.agreement:.4%}"
        section.rows.append((r.cell.name, report.verdict, r.expected, round(report.power, 6),
                             report.n_samples, round(report.statistic, 2),
                             round(report.empirical_tv, 4), agree,
                             round(report.samples_per_second)))
        section.ok &= r.ok
        if r.predicted is not None:
            check, tv, power = r.predicted
            section.rows.append((f"{r.cell.name}: against its predicted law", check.verdict,
                                 "lossless", round(check.power, 6), check.n_samples,
                                 round(check.statistic, 2), round(check.empirical_tv, 4), "-",
                                 round(check.samples_per_second)))
            section.notes.append(f"{r.cell.name}: the predicted law (greedy draft, p/q test) is "
                                 f"at exact TV {tv:.4f} from the target's; the cell's audit has "
                                 f"power {power:.6f} against it")
    wrong = [r.cell.name for r in results if not r.ok]
    if wrong:
        section.notes.append(f"unexpected verdicts: {'; '.join(wrong)}")
    section.notes.append(f"llama-cpp-python {binding_version()}; outcome: the first {N_TOKENS} "
                         f"tokens (a token outside the live alphabet ends it); power against "
                         f"every law at TV >= {EPSILON}; 'same as control': the share of seeds "
                         "whose tokens equal the non-speculative path's")
    section.seconds = time.perf_counter() - start
    return section


#: The section spec registered in `dsi_ref.commands.audit.TOP_SECTIONS`.
SECTION = SectionSpec("llama", llama_section, opt_in=True)
