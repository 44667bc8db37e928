"""MkDocs hook of the docs site (mkdocs.yml ``hooks:``): links that leave docs/.

The pages link to files of the repository outside docs/ (``../tests/test_x.py``,
``../pyproject.toml``) and to folders of data inside it (``gpu-results/run2/``). Neither is a page
of the site, so MkDocs reports them; under ``--strict`` that fails the build. This hook lowers
such a report to INFO **only when the target exists in the repository**: a link to a missing
file, a link between pages that does not resolve, and a missing anchor all still fail the build.
"""

from __future__ import annotations

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
