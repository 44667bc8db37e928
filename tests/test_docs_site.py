"""The docs site builds with ``mkdocs build --strict`` (mkdocs.yml), offline, and holds what it
promises: README.md as the home page with its links rewritten, the pages and figures, and the API
reference generated from the docstrings. Also the two pieces of build code under docs/: the hook
that lets links to repository files through (and only those) and the griffe extension for the
project's docstring conventions.

Skips, saying so, when the ``[docs]`` extra is not installed (``python3 run.py test`` installs it).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS_PACKAGES = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python",
                 "mkdocs_include_markdown_plugin", "griffe")


def _missing() -> list[str]:
    missing = []
    for name in DOCS_PACKAGES:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # a parent package is missing
            found = False
        if not found:
            missing.append(name)
    return missing


needs_docs = pytest.mark.skipif(
    bool(_missing()),
    reason=f"the [docs] extra is not installed (missing {', '.join(_missing())}); "
    "pip install -e '.[docs]' or python3 run.py test",
)


def _load(name: str) -> ModuleType:
    """Import docs/<name>.py (build code, not a package) under a private module name."""
    spec = importlib.util.spec_from_file_location(f"_docs_{name}", ROOT / "docs" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once with ``--strict`` (any warning fails the build)."""
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        # Not --quiet: it silences the warnings, and with them what --strict counts.
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


@needs_docs
def test_home_page_is_the_readme_with_its_links_rewritten(site: Path) -> None:
    home = (site / "index.html").read_text()
    first_paragraph = (ROOT / "README.md").read_text().split("\n\n")[1]
    assert "Distributed Speculative" in first_paragraph
    assert "Distributed Speculative" in home
    # README's links are relative to the repository root; on the site they are relative to docs/.
    assert 'href="getting-started.html"' in home
    assert 'src="figures/timeline-bigram.png"' in home
    assert "docs/getting-started" not in home


@needs_docs
def test_every_page_and_figure_is_on_the_site(site: Path) -> None:
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert (site / page.with_suffix(".html").name).is_file(), page.name
    for figure in sorted((ROOT / "docs" / "figures").glob("*.png")):
        assert (site / "figures" / figure.name).is_file(), figure.name
    assert not list(site.glob("*.py")), "the build code under docs/ is not published"


@needs_docs
def test_the_api_reference_is_generated_from_the_docstrings(site: Path) -> None:
    import dsi_ref

    # The public API: every name of __all__ in the table, linked to where it is documented.
    public = (site / "api" / "dsi_ref.html").read_text()
    links = {name: href for href, name in re.findall(
        r'href="([^"]+)"><code>dr\.(\w+)</code></a>', public)}  # unresolved: left as [..][..]
    assert set(links) == set(dsi_ref.__all__) - {"__version__"}
    assert links["dsi"] == "decoders.html#dsi_ref.decoders.dsi.dsi"
    pages = {"base": "dsi_ref.base.models.TableLM", "decoders": "dsi_ref.decoders.dsi.DSIRun",
             "audit": "dsi_ref.audit.exact.exact_distribution", "sim": "dsi_ref.sim.event",
             "backends": "dsi_ref.backends", "theory": "theory.si_latency",
             "proofs": "proofs.core.Theorem"}
    for page, anchor in pages.items():
        assert f'id="{anchor}"' in (site / "api" / f"{page}.html").read_text(), page
    # The griffe extension's doctest fences reached the page (no stray reference links).
    assert "1, 3/2, 3/2, 2, 2" in (site / "api" / "theory.html").read_text()


@needs_docs
def test_the_site_fetches_nothing_from_the_network(site: Path) -> None:
    for page in site.rglob("*.html"):
        text = page.read_text()
        assert "fonts.googleapis.com" not in text and "fonts.gstatic.com" not in text, page
        remote = re.findall(r'<(?:script|link)[^>]+(?:src|href)="(https?://[^"]+)"', text)
        assert not remote, (page, remote)


def _link_report(page: str, url: str, kind: str = "not_found") -> logging.LogRecord:
    if kind == "not_found":
        message = (f"Doc file '{page}' contains a link '{url}', but the target is not found "
                   "among documentation files.")
    else:
        message = (f"Doc file '{page}' contains an unrecognized relative link '{url}', "
                   "it was left as is.")
    return logging.LogRecord("mkdocs.structure.pages", logging.WARNING, __file__, 0, message,
                             None, None)


@pytest.mark.parametrize(("page", "url", "kind", "lowered"), [
    ("theory.md", "../pyproject.toml", "not_found", True),          # a repository file
    ("theory.md", "../tests/test_docs_site.py#L1", "not_found", True),
    ("gpu-backend.md", "gpu-results/", "unrecognized", True),      # a folder of data in docs/
    ("api/index.md", "../../run.py", "not_found", True),
    ("theory.md", "../tests/no_such_test.py", "not_found", False),  # missing: still fails
    ("theory.md", "no-such-page.md", "not_found", False),           # a broken page link
    ("theory.md", "getting-started.md", "not_found", False),        # a page: mkdocs' business
    ("theory.md", "../../outside-the-repository", "unrecognized", False),
])
def test_the_hook_lowers_only_links_to_existing_repository_files(
    page: str, url: str, kind: str, lowered: bool
) -> None:
    hooks = _load("hooks")
    record = _link_report(page, url, kind)
    assert hooks.RepositoryLinks(ROOT / "docs").filter(record)
    assert record.levelno == (logging.INFO if lowered else logging.WARNING)


def test_the_public_api_table_follows_re_exports_to_the_definition() -> None:
    hooks = _load("hooks")
    module, summary = hooks.definition(ROOT, "dsi_ref", "dsi")
    assert module == "dsi_ref.decoders.dsi" and summary.startswith("Distributed speculative")
    constant = hooks.definition(ROOT, "dsi_ref", "VERIFY_RULES")
    assert constant == ("dsi_ref.decoders.verification", "")
    table = hooks.public_api_table(ROOT)
    assert "| [`dr.dsi`][dsi_ref.decoders.dsi.dsi] | `dsi_ref.decoders.dsi` |" in table
    assert "__version__" not in table


def test_the_hook_leaves_other_warnings_alone() -> None:
    hooks = _load("hooks")
    record = logging.LogRecord("mkdocs.structure.pages", logging.WARNING, __file__, 0,
                               "Doc file 'theory.md' contains a link '#nope', but there is no "
                               "such anchor on this page.", None, None)
    hooks.RepositoryLinks(ROOT / "docs").filter(record)
    assert record.levelno == logging.WARNING


@needs_docs
def test_grouped_arguments_become_one_entry_per_name() -> None:
    conventions = _load("griffe_conventions")
    text = ("Summary.\n\nArgs:\n    x: one.\n    a, b: the cost\n        of a forward.\n"
            "    c: three.\n\nReturns:\n    x, y: not an argument section, kept.")
    assert conventions.split_grouped_arguments(text) == (
        "Summary.\n\nArgs:\n    x: one.\n    a: the cost\n        of a forward.\n"
        "    b: the cost\n        of a forward.\n    c: three.\n\nReturns:\n"
        "    x, y: not an argument section, kept.")


@needs_docs
def test_doctests_in_the_prose_are_fenced() -> None:
    conventions = _load("griffe_conventions")
    text = "Summary.\n\n>>> f(1)\n[1, 2]\n\nMore prose.\n    >>> g()\n    3"
    assert conventions.fence_doctests(text) == (
        "Summary.\n\n```pycon\n>>> f(1)\n[1, 2]\n```\n\nMore prose.\n\n"
        "    ```pycon\n    >>> g()\n    3\n    ```")
    already = "Summary.\n\n```pycon\n>>> f(1)\n```"
    assert conventions.fence_doctests(already) == already
