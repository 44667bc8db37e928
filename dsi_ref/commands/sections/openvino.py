"""The ``openvino`` section of ``dsi-ref audit``: OpenVINO GenAI's speculative decoding, audited.

Every cell of `dsi_ref.backends.openvino.matrix.CELLS` (``--quick``: the smoke, `QUICK_CELLS`):
``LLMPipeline`` without speculation, with a draft model and with prompt lookup, on the tiny Llama
checkpoints converted to OpenVINO IR, each against the exact law of its first tokens at
false-alarm rate 1e-8 and power 0.99 against every law at TV >= 0.2. The section passes when each
verdict is the one the findings predict (docs/engine-findings.md): openvino-genai 2026.4 is lossy
with a draft model and sampling, and crashes with one in its default scheduler; the control and
prompt lookup are lossless. Opt-in: ``python3 run.py audit --openvino`` builds
``.venv-openvino`` and runs it.
"""

from __future__ import annotations

import importlib.util
import time
from typing import Any

from .core import Section, SectionSpec

__all__ = ["SECTION", "openvino_section"]

_COLUMNS = ("cell", "verdict", "expected", "samples", "power", "G", "TV", "samples/s", "note")


def _missing() -> list[str]:
    return [name for name in ("openvino_genai", "openvino_tokenizers", "optimum")
            if importlib.util.find_spec(name) is None]


def _cell_row(result: Any) -> tuple[Any, ...]:
    r = result.report
    note = result.why if result.ok else f"UNEXPECTED: {result.message}"
    if r is None:
        return (result.cell.name, result.verdict, result.expected, "-", "-", "-", "-", "-",
                (note or result.message)[:100])
    return (result.cell.name, result.verdict, result.expected, r.n_samples, round(r.power, 6),
            round(r.statistic, 1), round(r.empirical_tv, 4), round(r.samples_per_second),
            note[:100])


def openvino_section(*, quick: bool = False, progress: bool = True) -> Section:
    """Run the OpenVINO GenAI matrix (``quick``: three cells) as one table."""
    section = Section("openvino", "Engines: OpenVINO GenAI speculative decoding (CPU)",
                      _COLUMNS)
    missing = _missing()
    if missing:
        section.ok = False
        section.rows.append(("openvino", "not installed", "-", "-", "-", "-", "-", "-", "-"))
        section.notes.append(f"{', '.join(missing)} not installed in this environment: "
                             "`python3 run.py audit --openvino` builds .venv-openvino from "
                             "locks/py311-openvino.txt and runs this section there")
        return section
    start = time.perf_counter()
    from ...backends.openvino.matrix import CELLS, QUICK_CELLS, run_matrix

    results = run_matrix(QUICK_CELLS if quick else CELLS, progress=progress)
    version = next((r.version for r in results if r.version), "?")
    for result in results:
        section.rows.append(_cell_row(result))
        section.ok &= result.ok
    peak = max((r.peak_rss_mb for r in results), default=0.0)
    unexpected = [r.cell.name for r in results if not r.ok]
    section.notes.append(f"openvino-genai {version}, tiny Llama target built in code and "
                         f"converted to IR (dsi_ref.backends.openvino.models); {len(results)} "
                         f"cells, {sum(r.verdict == 'lossy' for r in results)} lossy, "
                         f"{sum(r.verdict == 'crash' for r in results)} crashed; each engine's "
                         f"peak RSS <= {peak:.0f} MiB")
    if unexpected:
        section.notes.append("verdicts that differ from the findings: " + "; ".join(unexpected))
    section.notes.append("expected verdicts and their reasons: docs/engine-findings.md "
                         "(OpenVINO GenAI)")
    section.seconds = time.perf_counter() - start
    return section


#: The section spec registered in `dsi_ref.commands.audit.TOP_SECTIONS`.
SECTION = SectionSpec("openvino", openvino_section, opt_in=True)
