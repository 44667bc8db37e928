"""MkDocs hooks of the docs site (mkdocs.yml ``hooks:``): links that leave docs/, and the table of
the public API.

**Links.** The pages link to files of the repository outside docs/ (``../tests/test_x.py``,
``../pyproject.toml``) and to folders of data inside it (``gpu-results/run2/``). Neither is a page
of the site, so MkDocs reports them; under ``--strict`` that fails the build. This hook lowers
such a report to INFO **only when the target exists in the repository**: a link to a missing
file, a link between pages that does not resolve, and a missing anchor all still fail the build.

**The public API.** docs/api/dsi_ref.md holds the marker ``<!-- public-api -->``; it becomes a
table of every name of ``dsi_ref.__all__``, read statically from the source (no import), each
linked to its documentation where it is defined (an autorefs link: a name that has no rendered
documentation fails the strict build) with the first line of its docstring. Rendering the
re-exported objects a second time would cost a quarter of the build.
"""

from __future__ import annotations

import ast
import logging
import posixpath
import re
from pathlib import Path
from typing import Any

#: The two reports of ``mkdocs.structure.pages`` that this hook may lower (MkDocs 1.6 wording).
_NOT_FOUND = re.compile(
    r"^Doc file '(?P<page>[^']+)' contains a link '(?P<url>[^']+)', but the target"
)
_UNRECOGNIZED = re.compile(
    r"^Doc file '(?P<page>[^']+)' contains an unrecognized relative link '(?P<url>[^']+)'"
)


class RepositoryLinks(logging.Filter):
    """Lowers link reports whose target lies in the repository but is not a docs page."""

    def __init__(self, docs_dir: Path) -> None:
        super().__init__()
        self.docs_dir = docs_dir.resolve()
        self.root = self.docs_dir.parent

    def target(self, page: str, url: str) -> Path | None:
        """The existing repository path that ``url`` on docs page ``page`` points at, if any."""
        path = url.split("#", 1)[0].split("?", 1)[0]
        if not path or "://" in path or path.startswith("/"):
            return None
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(page), path))
        candidate = (self.docs_dir / joined).resolve()
        if not candidate.is_relative_to(self.root) or not candidate.exists():
            return None
        return candidate

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep every record; lower a link report to INFO when its target exists."""
        if record.levelno != logging.WARNING:
            return True
        message = record.getMessage()
        match = _NOT_FOUND.match(message) or _UNRECOGNIZED.match(message)
        if match is None:
            return True
        target = self.target(match["page"], match["url"])
        inside_docs_page = target is not None and target.is_relative_to(self.docs_dir) and (
            target.suffix == ".md"
        )
        if target is not None and not inside_docs_page:
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


_LOGGER = logging.getLogger("mkdocs.structure.pages")


def on_config(config: Any) -> Any:
    """Install the filter once per build (``mkdocs serve`` rebuilds with a fresh config)."""
    for old in [f for f in _LOGGER.filters if isinstance(f, RepositoryLinks)]:
        _LOGGER.removeFilter(old)
    _LOGGER.addFilter(RepositoryLinks(Path(config["docs_dir"])))
    return config


PUBLIC_API_MARKER = "<!-- public-api -->"


def _module_file(root: Path, dotted: str) -> Path:
    base = root.joinpath(*dotted.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def _absolute(root: Path, dotted: str, node: ast.ImportFrom) -> str:
    """The absolute module of a (possibly relative) ``from ... import`` inside ``dotted``."""
    if node.level == 0:
        return node.module or ""
    package = dotted if _module_file(root, dotted).name == "__init__.py" else (
        dotted.rpartition(".")[0])
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _summary(node: ast.AST) -> str:
    doc = ast.get_docstring(node) if isinstance(
        node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef | ast.Module) else None
    return doc.strip().split("\n\n")[0].replace("\n", " ") if doc else ""


def definition(root: Path, dotted: str, name: str) -> tuple[str, str]:
    """Where ``dotted.name`` is defined (following re-exports) and its docstring's first paragraph
    (empty for a constant)."""
    tree = ast.parse(_module_file(root, dotted).read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and (
                node.name == name):
            return dotted, _summary(node)
        if isinstance(node, ast.ImportFrom) and any(
                (alias.asname or alias.name) == name for alias in node.names):
            original = next(a.name for a in node.names if (a.asname or a.name) == name)
            return definition(root, _absolute(root, dotted, node), original)
    return dotted, ""  # an assignment: a constant, documented with its module


def public_api_table(root: Path, package: str = "dsi_ref") -> str:
    """The Markdown table of ``package.__all__``: name (linked), defined in, summary."""
    tree = ast.parse(_module_file(root, package).read_text())
    exported: list[str] = next(
        ast.literal_eval(node.value) for node in tree.body
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets))
    rows = ["| name | defined in | what it is |", "|---|---|---|"]
    for name in exported:
        if name.startswith("__"):
            continue
        module, summary = definition(root, package, name)
        target = f"{module}.{name}" if summary else module  # constants have no entry of their own
        rows.append(f"| [`dr.{name}`][{target}] | `{module}` | {summary or 'a constant'} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Expand the public-API marker (docs/api/dsi_ref.md)."""
    if PUBLIC_API_MARKER not in markdown:
        return markdown
    root = Path(config["docs_dir"]).resolve().parent
    return markdown.replace(PUBLIC_API_MARKER, public_api_table(root))
