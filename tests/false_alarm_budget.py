"""The suite's false-alarm budget, from the tests' own declarations (docs/statistical-policy.md).

Every test whose verdict depends on a sample declares its false-alarm rate ``alpha`` — the
probability, over seeds, that a correct implementation fails it (for a negative control, the
probability that it misses) — with ``@pytest.mark.statistical(alpha=...)`` (an audit of a law) or
``@pytest.mark.montecarlo(alpha=...)`` (a mean or a rate against an exact value), on the test
or on one of its parametrisations. ``tests/conftest.py`` calls `budget_problems` on the collected
items of every run and refuses the run when:

* a test carries one of the two markers without a valid ``alpha`` (a number in [0, 1]);
* a test that samples declares no ``alpha``: its source, or that of a function of its own module
  it calls, decides on a sample by one of `SAMPLING_PATTERNS` (a statistical audit whose verdict
  is read, a simulated rejection rate, a bound in standard errors, a seeded sample compared with
  a tolerance or a count: with its seed fixed such a test is deterministic, but the seed was one
  draw, and its ``alpha`` is the probability over seeds);
* a test declares ``alpha=0`` without a ``reason`` (the opt-out of a test that looks like it
  samples but passes for every draw);
* the declared rates of the run's tests add up to more than `BUDGET`.

``python tests/false_alarm_budget.py`` prints the budget table of the default run; ``--write``
puts it into docs/statistical-policy.md, ``--check`` fails when the page is stale
(``tests/test_false_alarm_budget.py`` runs the check).
"""

from __future__ import annotations

import contextlib
import inspect
import io
import math
import re
import sys
import textwrap
import tokenize
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

#: At most this many spurious failures per run, in expectation (a union bound).
BUDGET = 1e-6
ALPHA_MARKERS = ("statistical", "montecarlo")
#: A draw with a seed: the decoders' `Sampler`, numpy's, torch's and Python's generators, a
#: latency simulation.
SEEDED_SAMPLE = re.compile(r"\b(?:Sampler|default_rng|sample_runs|simulate_latency|manual_seed"
                           r"|Random|Generator)\(|\.sample\(")
#: A float tolerance finer than this is rounding noise, not a sampling error (``abs=1e-12``).
_NOISE = r"\d(?:\.\d*)?e-(?:[7-9]|\d\d)\b"
#: A decision on what was drawn: a difference within a tolerance (``abs(mean - 0.5) < 0.05``,
#: ``pytest.approx(x, abs=0.05)``; not one at float-noise level), a count accumulated over draws
#: against a threshold (``hits += ...`` then ``assert hits >= 10``), a `Counter` or ``.count``
#: of draws against one, or how many distinct values were drawn (``assert len(seen) > 1``).
SAMPLE_DECISION = re.compile(
    rf"\babs\([^\n]*\)\s*<=?+\s*+(?!{_NOISE})"
    rf"|\bapprox\([^\n]*\b(?:abs|rel)\s*=\s*+(?!{_NOISE})"
    r"|\b(?P<count>\w+)\s*\+=[\s\S]*^\s*assert\b[^\n]*"
    r"(?:\b(?P=count)\s*[<>]|[<>]=?\s*(?:[\d.]+\s*\*\s*)?(?P=count)\b)"
    r"|\b(?:Counter\(|\.count\()[\s\S]*^\s*assert\b[^\n]*[<>]"
    r"|^\s*assert\s+len\(\w+\)\s*[<>]", re.M)
#: What marks a test as deciding on a sample: (name, pattern, a second pattern that must also be
#: present, or None).
SAMPLING_PATTERNS: tuple[tuple[str, re.Pattern[str], re.Pattern[str] | None], ...] = (
    ("a statistical audit whose verdict is read", re.compile(r"\bstatistical_audit\("),
     re.compile(r"\.verdict\b")),
    ("a simulated rejection rate", re.compile(r"\brejection_rate\("), None),
    ("a bound in standard errors", re.compile(r"\*\s*se\b|\bse\s*\*|\bZ_MAX\b"), None),
    ("a seeded sample compared with a tolerance or a count", SEEDED_SAMPLE, SAMPLE_DECISION),
)
ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "statistical-policy.md"
BEGIN, END = "<!-- budget-table:begin -->", "<!-- budget-table:end -->"
DEFAULT_RUN = "not slow and not gpu"


def declared_alpha(item: pytest.Item) -> tuple[str, float] | None:
    """``(marker, alpha)`` of the item's closest budget marker, or None without one.

    ``alpha=0`` is the opt-out of a test that looks like it decides on a sample but cannot fail
    by chance (every draw passes, by construction); it must say why, with ``reason=...``.

    Raises:
        ValueError: the marker has no ``alpha``, one outside [0, 1], or ``alpha=0`` without a
            ``reason``.
    """
    for marker in item.iter_markers():
        if marker.name in ALPHA_MARKERS:
            alpha = marker.kwargs.get("alpha")
            if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) \
                    or not 0 <= alpha <= 1 or math.isnan(alpha):
                raise ValueError(f"{item.nodeid}: @pytest.mark.{marker.name} needs alpha=<its "
                                 f"false-alarm rate, in [0, 1]>, got {alpha!r}")
            reason = marker.kwargs.get("reason")
            if alpha == 0 and not (isinstance(reason, str) and reason.strip()):
                raise ValueError(f"{item.nodeid}: @pytest.mark.{marker.name}(alpha=0) says no draw "
                                 "can fail the test: give reason=<why> (a test that can fail "
                                 "by chance declares its alpha instead)")
            return marker.name, float(alpha)
    return None


def _code_only(source: str) -> str:
    """``source`` without its strings and comments (a pattern quoted in a test is not code)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(textwrap.dedent(source)).readline))
    except (tokenize.TokenError, SyntaxError):
        return source
    blank = {tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", -1)}
    return tokenize.untokenize(tok._replace(string='""' if tok.type == tokenize.STRING else "")
                               if tok.type in blank else tok for tok in tokens)


def _sources(item: pytest.Item) -> str:
    function = getattr(item, "function", None)
    if function is None:
        return ""
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):
        return ""
    module = getattr(item, "module", None)
    helpers = []
    for name in set(re.findall(r"\b([A-Za-z_]\w*)\(", source)):
        helper = getattr(module, name, None)
        if inspect.isfunction(helper) and helper.__module__ == getattr(module, "__name__", ""):
            with contextlib.suppress(OSError, TypeError):
                helpers.append(inspect.getsource(helper))
    return "\n".join(_code_only(text) for text in [source, *helpers])


def sampling_reason(item: pytest.Item) -> str | None:
    """Why the item looks like a test that decides on a sample (`SAMPLING_PATTERNS`), or None."""
    source = _sources(item)
    for reason, pattern, also in SAMPLING_PATTERNS:
        if pattern.search(source) and (also is None or also.search(source)):
            return reason
    return None


def budget_problems(items: Sequence[pytest.Item], budget: float = BUDGET) -> list[str]:
    """What is wrong with the run's declarations (empty when nothing is)."""
    problems, total = [], 0.0
    for item in items:
        try:
            declared = declared_alpha(item)
        except ValueError as error:
            problems.append(str(error))
            continue
        if declared is None:
            reason = sampling_reason(item)
            if reason is not None:
                problems.append(f"{item.nodeid} decides on a sample ({reason}) but declares no "
                                "false-alarm rate: add @pytest.mark.statistical(alpha=...) or "
                                "@pytest.mark.montecarlo(alpha=...)")
            continue
        total += declared[1]
    if total > budget:
        problems.append(f"the declared false-alarm rates of this run add up to {total:.3g} > "
                        f"the budget {budget:g}: raise thresholds (with the sample size that "
                        "keeps the power) or mark tests slow; docs/statistical-policy.md")
    return problems


def _function_id(item: pytest.Item) -> str:
    return item.nodeid.split("[", 1)[0]


def budget_rows(items: Iterable[pytest.Item]) -> list[tuple[str, str, float, int, float]]:
    """Per test function with a declaration: ``(test, marker, alpha per item, items, total)``."""
    rows: dict[str, tuple[str, str, float, int, float]] = {}
    for item in items:
        declared = declared_alpha(item)
        if declared is None:
            continue
        name, alpha = declared
        key = _function_id(item)
        _, _, first, count, total = rows.get(key, (key, name, alpha, 0, 0.0))
        per = first if first == alpha else math.nan  # parametrisations may differ
        rows[key] = (key, name, per, count + 1, total + alpha)
    return sorted(rows.values())


def budget_table(items: Iterable[pytest.Item]) -> str:
    """The markdown budget table of the items (docs/statistical-policy.md)."""
    rows = budget_rows(items)
    lines = ["| test | marker | alpha per case | cases | alpha |", "|---|---|---|---|---|"]
    for test, marker, per, count, total in rows:
        per_text = "varies" if math.isnan(per) else f"{per:.2g}"
        lines.append(f"| `{test}` | {marker} | {per_text} | {count} | {total:.2g} |")
    grand = sum(row[4] for row in rows)
    lines.append(f"| **total** | | | {sum(row[3] for row in rows)} | **{grand:.2g}** "
                 f"(budget {BUDGET:g}) |")
    return "\n".join(lines) + "\n"


class _Capture:
    def __init__(self) -> None:
        self.items: list[pytest.Item] = []

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.items = list(items)


def default_run_items() -> list[pytest.Item]:
    """Collect the default run (``-m 'not slow and not gpu'``) in this process."""
    capture = _Capture()
    with contextlib.redirect_stdout(io.StringIO()):
        code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-n", "0",
                            "-m", DEFAULT_RUN, str(ROOT / "tests")], plugins=[capture])
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        raise SystemExit(f"collection failed ({code!r})")
    return capture.items


def page_with_table(page: str, table: str) -> str:
    """``page`` with the text between the budget markers replaced by ``table``."""
    start, end = page.index(BEGIN) + len(BEGIN), page.index(END)
    return page[:start] + "\n" + table + page[end:]


def main(argv: Sequence[str]) -> int:
    """Print the table; ``--write`` updates the page, ``--check`` exits 1 when it is stale."""
    table = budget_table(default_run_items())
    page = PAGE.read_text()
    if "--write" in argv:
        PAGE.write_text(page_with_table(page, table))
    elif "--check" in argv and page_with_table(page, table) != page:
        print("docs/statistical-policy.md is stale: run python tests/false_alarm_budget.py "
              "--write", file=sys.stderr)
        return 1
    print(table, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
