"""docs/gpu-backend.md's shared-device tables are what ``benchmarks/summarize.py --shared`` makes
of the recorded H100 runs (docs/gpu-results/), so the page cannot drift from its command."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "gpu-results"


def _summarize() -> ModuleType:
    spec = importlib.util.spec_from_file_location("summarize", ROOT / "benchmarks" /
                                                  "summarize.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shared_device_tables_in_the_docs_are_current() -> None:
    summarize = _summarize()
    log = (RESULTS / "probe.log").read_text()
    made = "\n\n".join(summarize.shared_table(str(RESULTS / name), log)
                       for name in ("bench-1b-rejection.json", "bench-1b-greedy.json"))
    made = made.replace(str(RESULTS) + "/", "")
    page = (ROOT / "docs" / "gpu-backend.md").read_text()
    start, end = "<!-- shared-table:start -->\n", "\n<!-- shared-table:end -->"
    shown = page[page.index(start) + len(start):page.index(end)]
    assert shown == made


def test_the_probe_log_is_read_as_slowdowns() -> None:
    contention = _summarize().probe_contention((RESULTS / "probe.log").read_text(), "llama-1b")
    assert contention.target == pytest.approx((1.0, 4.420 / 3.083, 5.206 / 3.083, 6.465 / 3.083))
    assert contention.drafter == pytest.approx((1.0, 0.653 / 0.462, 0.928 / 0.462))
    assert _summarize().probe_contention("", "llama-1b") is None
