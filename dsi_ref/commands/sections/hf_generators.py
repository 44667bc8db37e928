"""The ``engines`` section of ``dsi-ref audit``: the Hugging Face candidate-generator matrix.

Every cell of `dsi_ref.backends.hf.generators.CELLS` audited against the processed toy target's
exact law at power 0.99 against TV >= 0.2 (``--quick``: the greedy cells only), universal
speculative decoding's white-box check (the draft law against the law its verifier is told), and
one row per generator that cannot be driven, with the reason. The section passes when every
verdict is the expected one: lossless, except universal SD with a ``get_vocab()`` order other
than the id order, which is lossy in transformers 5.x (docs/engine-findings.md): those rows must
reproduce the loss. Opt-in (torch and transformers, and minutes of sampling): run it with
``dsi-ref audit --section engines``.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterable
from typing import Any

from .core import Section, SectionSpec, progress_bar

__all__ = ["SECTION", "engines_section"]

_COLUMNS = ("cell", "verdict", "expected", "epsilon", "power", "samples", "G", "samples/s")


def engines_section(*, quick: bool = False, progress: bool = True) -> Section:
    """Run the matrix (``quick``: greedy cells and the white-box checks) as one table."""
    section = Section("engines", "Engines: Hugging Face candidate generators", _COLUMNS)
    missing = [n for n in ("torch", "transformers") if importlib.util.find_spec(n) is None]
    if missing:
        section.rows.append(("engines", "skipped", "-", "-", "-", "-", "-", "-"))
        section.notes.append(f"skipped: {', '.join(missing)} not installed "
                             "(pip install 'dsi-ref[torch]')")
        return section
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from ...backends.hf.assisted import transformers_version
    from ...backends.hf.generators import (
        CELLS,
        ID_VOCAB_ORDER,
        NOT_DRIVEN,
        Cell,
        audit_cell,
        quiet_transformers,
        usd_draft_check,
    )

    quiet_transformers()
    start = time.perf_counter()
    usd = "UniversalSpeculativeDecodingGenerator"

    def expected(cell: Cell) -> str:
        lossy = cell.generator == usd and cell.vocab_order != ID_VOCAB_ORDER
        return "lossy" if lossy else "lossless"

    cells = [c for c in CELLS if not quick or not c.do_sample]
    items: Iterable[Cell] = progress_bar(cells, total=len(cells), desc="engines",
                                         enabled=progress)
    for cell in items:
        result = audit_cell(cell, epsilon=0.2)
        want = expected(cell)
        section.ok &= result.verdict == want
        report: Any = result.report
        section.rows.append((cell.name, result.verdict, want, 0.2, round(result.power or 0, 6),
                             result.n_samples, round(report.statistic, 2),
                             round(result.samples_per_second)))
    for cell in (c for c in CELLS if c.generator == usd):
        check = usd_draft_check(cell, seeds=range(2))
        want = expected(cell)
        seen = "lossy" if check.first_token_tv > 0 else "lossless"
        section.ok &= seen == want
        section.rows.append((f"{cell.name}: white box, first token", seen, want, "exact", "-",
                             "-", f"TV {float(check.first_token_tv):.4f}", "-"))
    for generator, why in NOT_DRIVEN.items():
        section.rows.append((generator, "not driven", "-", "-", "-", "-", "-", "-"))
        section.notes.append(f"{generator}: {why.split(';')[0]}")
    section.notes.append(f"transformers {transformers_version()}; universal SD is lossy when the "
                         "assistant tokenizer's get_vocab() is not in id order: "
                         "docs/engine-findings.md")
    section.seconds = time.perf_counter() - start
    return section


#: The section spec registered in `dsi_ref.commands.audit.TOP_SECTIONS`.
SECTION = SectionSpec("engines", engines_section, opt_in=True)
